//! A small debuginfod client: when a binary has a GNU build-id but neither
//! symbols nor DWARF on this machine, its debug file is fetched from the
//! servers in `DEBUGINFOD_URLS` (`<url>/buildid/<hex>/debuginfo`) and kept in
//! an on-disk cache (`$DEBUGINFOD_CACHE_PATH`, else
//! `$XDG_CACHE_HOME/ember/debuginfod` or `~/.cache/ember/debuginfod`, laid
//! out as `<hex>/debuginfo` like elfutils' client).
//!
//! Requests go through Ember's one HTTP client (`ember-http`, blocking flavour): `http://` and
//! `https://` servers (rustls, the system's roots), redirects, the proxies of the environment,
//! and bodies streamed to the cache file within the size limit. Misses are cached as `<hex>/debuginfo.miss` for
//! [`Debuginfod::negative_ttl`] so an unknown build-id costs one request per
//! ten minutes, not one per run, and a server that cannot be reached is not
//! asked again in the same run. Fetching happens while symbolizing, after
//! sampling; every failure comes back as a value and becomes a warning.

use ember_http::{BlockingClient, ClientConfig, HttpError, Request};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Why a fetch failed (the caller turns it into a warning).
#[derive(Debug, thiserror::Error)]
pub enum DebuginfodError {
    /// Connecting, sending or receiving failed (including timeouts, answers other than the
    /// file or a 404, and files over the size limit).
    // The source names the URL already.
    #[error("debuginfod server: {source}")]
    Transfer {
        /// The request URL.
        url: String,
        /// The HTTP client's error.
        #[source]
        source: HttpError,
    },
    /// The server answered with a file that is not the one asked for.
    #[error("debuginfod server {url}: {message}")]
    Http {
        /// The request URL.
        url: String,
        /// What was wrong with the answer.
        message: String,
    },
    /// The cache directory could not be written.
    #[error("debuginfod cache {}: {source}", path.display())]
    Cache {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Client settings and per-run state.
#[derive(Debug, Clone)]
pub struct Debuginfod {
    /// Server base URLs, tried in order.
    pub urls: Vec<String>,
    /// Cache directory (`<hex>/debuginfo` files and `.miss` markers).
    pub cache_dir: PathBuf,
    /// Limit for connecting and for each read or write.
    pub timeout: Duration,
    /// Limit for a whole download.
    pub max_time: Duration,
    /// Larger files are not downloaded.
    pub max_bytes: u64,
    /// How long a miss is remembered.
    pub negative_ttl: Duration,
    /// A PEM file of CA certificates trusted for `https://` servers besides the system's
    /// (which also honour `SSL_CERT_FILE`).
    pub ca_file: Option<PathBuf>,
    /// Servers (indexes into `urls`) that failed in this run: skipped after.
    dead: Vec<bool>,
    /// Failures of servers given up on that no result reported (another server had the
    /// file, or an earlier failure was the one returned), for [`Debuginfod::take_unreported`].
    unreported: Vec<String>,
    /// Built on the first request (it owns a worker thread), with the limits above.
    client: Option<BlockingClient>,
}

impl Debuginfod {
    /// A client for `urls` caching in `cache_dir`, with the defaults:
    /// 5 s timeout per network operation, 120 s per download, 2 GiB
    /// per file, misses remembered for 10 minutes.
    pub fn new(urls: Vec<String>, cache_dir: PathBuf) -> Debuginfod {
        let dead = vec![false; urls.len()];
        Debuginfod {
            urls,
            cache_dir,
            timeout: Duration::from_secs(5),
            max_time: Duration::from_secs(120),
            max_bytes: 2 << 30,
            negative_ttl: Duration::from_secs(600),
            ca_file: None,
            dead,
            unreported: Vec::new(),
            client: None,
        }
    }

    /// The client configured by the environment, or `None` when
    /// `DEBUGINFOD_URLS` is unset or empty. Also read: `DEBUGINFOD_CACHE_PATH`,
    /// `DEBUGINFOD_TIMEOUT` (seconds per network operation),
    /// `DEBUGINFOD_MAXTIME` (seconds per download), `DEBUGINFOD_MAXSIZE`
    /// (bytes per file), as elfutils' client does.
    pub fn from_env() -> Option<Debuginfod> {
        let urls: Vec<String> = std::env::var("DEBUGINFOD_URLS")
            .ok()?
            .split_ascii_whitespace()
            .map(|u| u.trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty())
            .collect();
        if urls.is_empty() {
            return None;
        }
        let cache_dir = std::env::var_os("DEBUGINFOD_CACHE_PATH")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(default_cache_dir)?;
        let mut client = Debuginfod::new(urls, cache_dir);
        let number = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|&n| n > 0)
        };
        if let Some(s) = number("DEBUGINFOD_TIMEOUT") {
            client.timeout = Duration::from_secs(s);
        }
        if let Some(s) = number("DEBUGINFOD_MAXTIME") {
            client.max_time = Duration::from_secs(s);
        }
        if let Some(b) = number("DEBUGINFOD_MAXSIZE") {
            client.max_bytes = b;
        }
        Some(client)
    }

    /// The cached or freshly downloaded debug file of `build_id` (lowercase
    /// hex), `Ok(None)` when no server has it (or it is a remembered miss,
    /// or every server is unreachable). When no server had the file, the
    /// first error of a server is returned (once: that server is skipped for
    /// the rest of the run; the others' errors wait in
    /// [`Debuginfod::take_unreported`]); a miss is remembered only if no server failed.
    pub fn debuginfo(&mut self, build_id: &str) -> Result<Option<PathBuf>, DebuginfodError> {
        self.fetch(build_id, "debuginfo")
    }

    /// Failures of servers that were given up on (each once) and that no call returned as
    /// its error: a server that timed out before another one had the file. Callers turn
    /// them into warnings.
    pub fn take_unreported(&mut self) -> Vec<String> {
        std::mem::take(&mut self.unreported)
    }

    /// Like [`Debuginfod::debuginfo`] for any artifact kind the protocol
    /// names (`debuginfo`, `executable`).
    pub fn fetch(
        &mut self,
        build_id: &str,
        kind: &str,
    ) -> Result<Option<PathBuf>, DebuginfodError> {
        let valid_id = build_id.len() >= 2
            && build_id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !valid_id || !matches!(kind, "debuginfo" | "executable") {
            return Ok(None);
        }
        let dir = self.cache_dir.join(build_id);
        let target = dir.join(kind);
        if target.is_file() {
            return Ok(Some(target));
        }
        let miss = dir.join(format!("{kind}.miss"));
        if let Ok(meta) = std::fs::metadata(&miss)
            && let Ok(modified) = meta.modified()
            && SystemTime::now()
                .duration_since(modified)
                .is_ok_and(|age| age < self.negative_ttl)
        {
            return Ok(None);
        }
        let mut asked = false;
        let mut failed: Vec<DebuginfodError> = Vec::new();
        for i in 0..self.urls.len() {
            if self.dead[i] {
                continue;
            }
            let base = self.urls[i].clone();
            let url = format!("{base}/buildid/{build_id}/{kind}");
            create_dir(&dir)?;
            let tmp = dir.join(format!(".{kind}.{}.part", std::process::id()));
            let result = self.download(&url, &tmp, build_id, kind);
            match result {
                Ok(true) => {
                    std::fs::rename(&tmp, &target).map_err(|source| DebuginfodError::Cache {
                        path: target.clone(),
                        source,
                    })?;
                    // A server skipped on the way (silent, down) costs every later
                    // lookup nothing but this one its timeout: say so once.
                    self.unreported.extend(failed.iter().map(|e| e.to_string()));
                    return Ok(Some(target));
                }
                Ok(false) => asked = true,
                Err(e) => {
                    self.dead[i] = true;
                    failed.push(e);
                }
            }
            let _ = std::fs::remove_file(&tmp);
        }
        // The other servers are still tried after one fails; its error is
        // reported (once: it is skipped from now on) when none had the file.
        if !failed.is_empty() {
            let first = failed.remove(0);
            self.unreported.extend(failed.iter().map(|e| e.to_string()));
            return Err(first);
        }
        if asked {
            // Every reachable server said 404: remember it for a while.
            File::create(&miss).map_err(|source| DebuginfodError::Cache {
                path: miss.clone(),
                source,
            })?;
        }
        Ok(None)
    }

    /// GETs `url` into `path`; `Ok(false)` on 404 or 410. A 2xx answer must be an ELF file
    /// carrying `build_id` (for `debuginfo` and `executable`).
    fn download(
        &mut self,
        url: &str,
        path: &Path,
        build_id: &str,
        kind: &str,
    ) -> Result<bool, DebuginfodError> {
        let transfer = |source: HttpError| DebuginfodError::Transfer {
            url: url.to_string(),
            source,
        };
        let client = self.client().map_err(transfer)?;
        let mut file = File::create(path).map_err(|source| DebuginfodError::Cache {
            path: path.to_path_buf(),
            source,
        })?;
        let request = Request::get(url).max_body(self.max_bytes);
        match client.download(request, &mut |chunk| file.write_all(chunk)) {
            Ok(_) => {}
            Err(e) if matches!(e.status(), Some(404 | 410)) => return Ok(false),
            Err(e) => return Err(transfer(e)),
        }
        file.flush().map_err(|source| DebuginfodError::Cache {
            path: path.to_path_buf(),
            source,
        })?;
        drop(file);
        check_build_id(path, build_id).map_err(|message| DebuginfodError::Http {
            url: url.to_string(),
            message: format!("{kind}: {message}"),
        })?;
        Ok(true)
    }

    /// The HTTP client, built on first use: `timeout` to connect and between reads,
    /// `max_time` for a whole download, `max_bytes` per file.
    fn client(&mut self) -> Result<BlockingClient, HttpError> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        let config = ClientConfig {
            connect_timeout: self.timeout,
            read_timeout: Some(self.timeout),
            timeout: self.max_time,
            max_body: self.max_bytes,
            ca_file: self.ca_file.clone(),
            ..ClientConfig::default()
        };
        let client = BlockingClient::new(&config)?;
        self.client = Some(client.clone());
        Ok(client)
    }
}

fn create_dir(dir: &Path) -> Result<(), DebuginfodError> {
    std::fs::create_dir_all(dir).map_err(|source| DebuginfodError::Cache {
        path: dir.to_path_buf(),
        source,
    })
}

/// The downloaded file must be ELF with the build-id it was asked for.
fn check_build_id(path: &Path, build_id: &str) -> Result<(), String> {
    use object::Object;
    let map = crate::mmap::Mmap::open(path).map_err(|e| e.to_string())?;
    let file = object::File::parse(map.bytes()).map_err(|e| format!("not ELF: {e}"))?;
    let found: String = match file.build_id() {
        Ok(Some(id)) => id.iter().map(|b| format!("{b:02x}")).collect(),
        _ => String::new(),
    };
    if found == build_id {
        Ok(())
    } else {
        Err(format!("served a file with build-id {found:?}"))
    }
}

/// `$XDG_CACHE_HOME/ember/debuginfod` or `~/.cache/ember/debuginfod`.
pub fn default_cache_dir() -> Option<PathBuf> {
    crate::symbolize::default_cache_dir()
        .and_then(|symbols| symbols.parent().map(|ember| ember.join("debuginfod")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_ids_and_kinds_are_never_asked() {
        // Removed with its content when the guard drops, at the end of the test.
        let dir = tempfile::tempdir().expect("temp dir");
        let dir = dir.path();
        // A server that would fail if asked: nothing is sent for an invalid request.
        let mut c = Debuginfod::new(vec!["http://127.0.0.1:9".into()], dir.to_path_buf());
        assert!(matches!(c.debuginfo("../etc"), Ok(None)));
        assert!(matches!(c.debuginfo("ABCD"), Ok(None)));
        assert!(matches!(c.fetch("abcd", "source"), Ok(None)));
        assert!(c.client.is_none());
    }
}
