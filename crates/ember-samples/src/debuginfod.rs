//! A small debuginfod client: when a binary has a GNU build-id but neither
//! symbols nor DWARF on this machine, its debug file is fetched from the
//! servers in `DEBUGINFOD_URLS` (`<url>/buildid/<hex>/debuginfo`) and kept in
//! an on-disk cache (`$DEBUGINFOD_CACHE_PATH`, else
//! `$XDG_CACHE_HOME/ember/debuginfod` or `~/.cache/ember/debuginfod`, laid
//! out as `<hex>/debuginfo` like elfutils' client).
//!
//! Only plain `http://` is spoken, by a minimal blocking HTTP/1.1 GET over
//! `std::net::TcpStream` (no TLS stack in the build): `https://` servers are
//! skipped with a warning — put a local HTTP proxy or a debuginfod federating
//! server in front of them. Misses are cached as `<hex>/debuginfo.miss` for
//! [`Debuginfod::negative_ttl`] so an unknown build-id costs one request per
//! ten minutes, not one per run, and a server that cannot be reached is not
//! asked again in the same run. Fetching happens while symbolizing, after
//! sampling; every failure comes back as a value and becomes a warning.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// Why a fetch failed (the caller turns it into a warning).
#[derive(Debug, thiserror::Error)]
pub enum DebuginfodError {
    /// The URL is not `http://` (TLS is not built in).
    #[error(
        "debuginfod server {url}: only http:// is supported (use an http proxy or a \
         local federating debuginfod for https servers)"
    )]
    Unsupported {
        /// The server URL as configured.
        url: String,
    },
    /// Connecting, sending or receiving failed (including timeouts).
    #[error("debuginfod server {url}: {source}")]
    Io {
        /// The request URL.
        url: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The server answered something other than the file or a 404.
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
    /// Servers (indexes into `urls`) that failed in this run: skipped after.
    dead: Vec<bool>,
}

/// Redirects followed per request.
const MAX_REDIRECTS: usize = 4;

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
            dead,
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
    /// the rest of the run); a miss is remembered only if no server failed.
    pub fn debuginfo(&mut self, build_id: &str) -> Result<Option<PathBuf>, DebuginfodError> {
        self.fetch(build_id, "debuginfo")
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
        let mut failed = None;
        for i in 0..self.urls.len() {
            if self.dead[i] {
                continue;
            }
            let base = self.urls[i].clone();
            if !base.to_ascii_lowercase().starts_with("http://") {
                self.dead[i] = true;
                failed.get_or_insert(DebuginfodError::Unsupported { url: base });
                continue;
            }
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
                    return Ok(Some(target));
                }
                Ok(false) => asked = true,
                Err(e) => {
                    self.dead[i] = true;
                    failed.get_or_insert(e);
                }
            }
            let _ = std::fs::remove_file(&tmp);
        }
        // The other servers are still tried after one fails; its error is
        // reported (once: it is skipped from now on) when none had the file.
        if let Some(e) = failed {
            return Err(e);
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

    /// GETs `url` into `path`; `Ok(false)` on 404. A 200 answer must be an
    /// ELF file carrying `build_id` (for `debuginfo` and `executable`).
    fn download(
        &self,
        url: &str,
        path: &Path,
        build_id: &str,
        kind: &str,
    ) -> Result<bool, DebuginfodError> {
        let deadline = Instant::now() + self.max_time;
        let mut file = File::create(path).map_err(|source| DebuginfodError::Cache {
            path: path.to_path_buf(),
            source,
        })?;
        let mut current = url.to_string();
        for _ in 0..=MAX_REDIRECTS {
            match self.get(&current, &mut file, deadline)? {
                Answer::Body => {
                    drop(file);
                    check_build_id(path, build_id).map_err(|message| DebuginfodError::Http {
                        url: current.clone(),
                        message: format!("{kind}: {message}"),
                    })?;
                    return Ok(true);
                }
                Answer::NotFound => return Ok(false),
                Answer::Redirect(to) => current = to,
            }
        }
        Err(DebuginfodError::Http {
            url: url.to_string(),
            message: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    /// One HTTP/1.1 GET with `Connection: close`.
    fn get(&self, url: &str, out: &mut File, deadline: Instant) -> Result<Answer, DebuginfodError> {
        let http = |message: String| DebuginfodError::Http {
            url: url.to_string(),
            message,
        };
        let io_err = |source: io::Error| DebuginfodError::Io {
            url: url.to_string(),
            source,
        };
        let (host, port, path) = split_url(url).ok_or_else(|| http("not an http:// URL".into()))?;
        let stream = connect(&host, port, self.timeout).map_err(io_err)?;
        stream
            .set_read_timeout(Some(self.timeout))
            .and_then(|()| stream.set_write_timeout(Some(self.timeout)))
            .map_err(io_err)?;
        let host_header = if port == 80 {
            host.clone()
        } else if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: ember/{}\r\n\
             Accept: */*\r\nConnection: close\r\n\r\n",
            env!("CARGO_PKG_VERSION")
        );
        (&stream).write_all(request.as_bytes()).map_err(io_err)?;
        let mut reader = BufReader::new(&stream);
        let status_line = read_line(&mut reader).map_err(io_err)?;
        let mut parts = status_line.split_ascii_whitespace();
        let status = match (parts.next(), parts.next()) {
            (Some(v), Some(code)) if v.starts_with("HTTP/1.") => code
                .parse::<u16>()
                .map_err(|_| http(format!("bad status line {status_line:?}")))?,
            _ => return Err(http(format!("bad status line {status_line:?}"))),
        };
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut location = None;
        loop {
            let line = read_line(&mut reader).map_err(io_err)?;
            if line.is_empty() {
                break;
            }
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => {
                    length = Some(
                        value
                            .parse()
                            .map_err(|_| http("bad Content-Length".into()))?,
                    )
                }
                "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                "location" => location = Some(value.to_string()),
                _ => {}
            }
        }
        match status {
            200 => {}
            404 | 410 => return Ok(Answer::NotFound),
            301 | 302 | 303 | 307 | 308 => {
                let to = location.ok_or_else(|| http(format!("HTTP {status} without Location")))?;
                let to = if to.starts_with('/') {
                    format!("http://{host_header}{to}")
                } else {
                    to
                };
                if !to.to_ascii_lowercase().starts_with("http://") {
                    return Err(http(format!("redirected to {to}, which is not http://")));
                }
                return Ok(Answer::Redirect(to));
            }
            _ => return Err(http(format!("HTTP {status}"))),
        }
        if length.is_some_and(|n| n > self.max_bytes) {
            return Err(http(format!(
                "file larger than the {} byte limit (DEBUGINFOD_MAXSIZE)",
                self.max_bytes
            )));
        }
        let mut copier = Copier {
            out,
            deadline,
            limit: self.max_bytes,
            written: 0,
            buf: vec![0; 64 << 10],
        };
        let copied = if chunked {
            copier.chunked(&mut reader)
        } else {
            copier.copy(&mut reader, length)
        };
        copied.map_err(|e| match e {
            CopyError::Io(source) => io_err(source),
            CopyError::Other(message) => http(message),
        })?;
        Ok(Answer::Body)
    }
}

/// What a GET produced.
enum Answer {
    Body,
    NotFound,
    Redirect(String),
}

enum CopyError {
    Io(io::Error),
    Other(String),
}

impl From<io::Error> for CopyError {
    fn from(e: io::Error) -> Self {
        CopyError::Io(e)
    }
}

/// Copies a response body to the cache file within the size and time limits.
struct Copier<'a> {
    out: &'a mut File,
    deadline: Instant,
    limit: u64,
    written: u64,
    buf: Vec<u8>,
}

impl Copier<'_> {
    /// `length` bytes, or everything up to EOF when it is `None`.
    fn copy(&mut self, input: &mut impl Read, length: Option<u64>) -> Result<(), CopyError> {
        let mut left = length;
        loop {
            if left == Some(0) {
                return Ok(());
            }
            if Instant::now() > self.deadline {
                return Err(CopyError::Other(
                    "download took longer than DEBUGINFOD_MAXTIME".into(),
                ));
            }
            let want = left.map_or(self.buf.len(), |n| n.min(self.buf.len() as u64) as usize);
            let n = match input.read(&mut self.buf[..want]) {
                Ok(0) if left.is_none() => return Ok(()),
                Ok(0) => return Err(CopyError::Other("connection closed early".into())),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            self.written += n as u64;
            if self.written > self.limit {
                return Err(CopyError::Other(format!(
                    "file larger than the {} byte limit (DEBUGINFOD_MAXSIZE)",
                    self.limit
                )));
            }
            self.out.write_all(&self.buf[..n])?;
            if let Some(l) = &mut left {
                *l -= n as u64;
            }
        }
    }

    /// A `Transfer-Encoding: chunked` body.
    fn chunked(&mut self, input: &mut impl BufRead) -> Result<(), CopyError> {
        loop {
            let line = read_line(input)?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = u64::from_str_radix(size, 16)
                .map_err(|_| CopyError::Other(format!("bad chunk size {line:?}")))?;
            if size == 0 {
                return Ok(());
            }
            self.copy(input, Some(size))?;
            read_line(input)?;
        }
    }
}

/// A header line without its CRLF; at most 8 KiB.
fn read_line(input: &mut impl BufRead) -> io::Result<String> {
    let mut line = Vec::new();
    input.take(8 << 10).read_until(b'\n', &mut line)?;
    if line.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed inside the response head",
        ));
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// `http://host[:port]/path` → (host, port, path); IPv6 hosts in brackets.
fn split_url(url: &str) -> Option<(String, u16, String)> {
    let rest = url
        .get(..7)?
        .eq_ignore_ascii_case("http://")
        .then(|| &url[7..])?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => 80,
            None => return None,
        };
        (host, port)
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, p.parse().ok()?),
            None => (authority, 80),
        }
    };
    (!host.is_empty()).then(|| (host.to_string(), port, path.to_string()))
}

fn connect(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "host has no address");
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
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
    fn urls_split_into_host_port_and_path() {
        assert_eq!(
            split_url("http://example.org:8002/a/b"),
            Some(("example.org".into(), 8002, "/a/b".into()))
        );
        assert_eq!(
            split_url("HTTP://[::1]:9/x"),
            Some(("::1".into(), 9, "/x".into()))
        );
        assert_eq!(
            split_url("http://host"),
            Some(("host".into(), 80, "/".into()))
        );
        assert_eq!(split_url("https://host/x"), None);
        assert_eq!(split_url("http://:80/x"), None);
        assert_eq!(split_url("http://h:port/x"), None);
    }

    #[test]
    fn https_servers_are_refused_once_and_bad_ids_never_asked() {
        let dir = std::env::temp_dir().join(format!("ember-dbgd-unit-{}", std::process::id()));
        let mut c = Debuginfod::new(vec!["https://example.invalid".into()], dir.clone());
        assert!(matches!(
            c.debuginfo("abcd"),
            Err(DebuginfodError::Unsupported { .. })
        ));
        assert!(matches!(c.debuginfo("abcd"), Ok(None)));
        assert!(matches!(c.debuginfo("../etc"), Ok(None)));
        let _ = std::fs::remove_dir_all(dir);
    }
}
