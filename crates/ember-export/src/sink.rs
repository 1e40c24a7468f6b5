//! Object storage: parsing `export_to` (`s3://`, `gs://`, `az://`,
//! `file://`), building the `object_store` client (S3 endpoint and
//! credentials from the usual AWS_* variables, GCS from GOOGLE_*, Azure from
//! AZURE_*), object key layout and file-name timestamps, and the local spool
//! folder that keeps files while the bucket is unreachable.

use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use object_store::{ClientConfigKey, ObjectStore, PutPayload, RetryConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// Errors of the exporters.
#[derive(Debug, Error)]
pub enum ExportError {
    /// `export_to` is not a supported URL.
    #[error("export_to {url:?}: {reason}")]
    Target {
        /// The URL.
        url: String,
        /// Why it is rejected.
        reason: String,
    },
    /// The object store client could not be built.
    #[error("cannot set up {url}: {source}")]
    Store {
        /// The URL.
        url: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// An upload failed (bucket unreachable, denied, ...).
    #[error("upload of {key} failed: {source}")]
    Upload {
        /// Object key.
        key: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// Local file I/O failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// The operation.
        what: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The HTTP trigger could not listen or be reached.
    #[error("{0}")]
    Http(String),
}

pub(crate) fn io_err(
    what: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> ExportError {
    let path = path.to_path_buf();
    move |source| ExportError::Io { what, path, source }
}

/// Kind of object store behind `export_to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Amazon S3 or an S3-compatible server.
    S3,
    /// Google Cloud Storage.
    Gcs,
    /// Azure Blob Storage.
    Azure,
    /// A local folder.
    File,
}

/// A parsed `export_to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportTarget {
    /// The original URL.
    pub url: String,
    /// Store kind.
    pub scheme: Scheme,
    /// Bucket / container, or the folder for `file://`.
    pub bucket: String,
    /// Key prefix inside the bucket (no leading or trailing '/').
    pub prefix: String,
}

impl ExportTarget {
    /// Parses `s3://bucket/prefix`, `gs://..`, `az://container/prefix` or
    /// `file:///absolute/dir`.
    pub fn parse(url: &str) -> Result<Self, ExportError> {
        let fail = |reason: &str| ExportError::Target {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| fail("expected SCHEME://..., SCHEME one of s3, gs, az, file"))?;
        let scheme = match scheme {
            "s3" | "s3a" => Scheme::S3,
            "gs" => Scheme::Gcs,
            "az" | "azure" | "abfs" => Scheme::Azure,
            "file" => Scheme::File,
            _ => {
                return Err(fail(
                    "unsupported scheme: use s3://, gs://, az:// or file://",
                ));
            }
        };
        if scheme == Scheme::File {
            if !rest.starts_with('/') {
                return Err(fail(
                    "file:// needs an absolute path, e.g. file:///var/lib/ember",
                ));
            }
            let dir = rest.trim_end_matches('/');
            return Ok(ExportTarget {
                url: url.to_string(),
                scheme,
                bucket: if dir.is_empty() {
                    "/".into()
                } else {
                    dir.into()
                },
                prefix: String::new(),
            });
        }
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(fail("no bucket name"));
        }
        if prefix.split('/').any(|s| s == "..") {
            return Err(fail("'..' is not allowed in the prefix"));
        }
        Ok(ExportTarget {
            url: url.to_string(),
            scheme,
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
        })
    }

    /// The object key of `file_name` for this node:
    /// `PREFIX/BUCKET_SUBDIRECTORY/NODE_NAME/file_name` (empty parts skipped).
    pub fn key(&self, bucket_subdirectory: &str, node_name: &str, file_name: &str) -> String {
        [
            self.prefix.as_str(),
            bucket_subdirectory.trim_matches('/'),
            node_name,
            file_name,
        ]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("/")
    }
}

/// Makes rustls use ring (never aws-lc) for object_store's HTTPS clients.
fn install_crypto_provider() {
    // Err only means a provider is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Uploads files to one `export_to`.
#[derive(Clone)]
pub struct Uploader {
    target: ExportTarget,
    store: Arc<dyn ObjectStore>,
}

impl std::fmt::Debug for Uploader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uploader")
            .field("target", &self.target)
            .finish()
    }
}

impl Uploader {
    /// Builds the client for `export_to`. Remote stores take endpoint and
    /// credentials from the environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY, AWS_REGION, ...; GOOGLE_SERVICE_ACCOUNT...;
    /// AZURE_STORAGE_ACCOUNT_NAME...). Emulators: for GCS a service-account
    /// file with `"gcs_base_url"` and `"disable_oauth": true`; for Azurite
    /// AZURE_STORAGE_USE_EMULATOR=true and AZURITE_BLOB_STORAGE_URL. Retries
    /// are short: a failed upload stays in the spool and is tried again at
    /// the next cycle.
    pub fn new(export_to: &str) -> Result<Self, ExportError> {
        let target = ExportTarget::parse(export_to)?;
        let store_err = |source| ExportError::Store {
            url: export_to.to_string(),
            source,
        };
        let retry = RetryConfig {
            max_retries: 2,
            retry_timeout: Duration::from_secs(10),
            ..Default::default()
        };
        // Timeouts are set key by key, not with `with_client_options`, which
        // would replace the client options the builders read from the
        // environment (AWS_ALLOW_HTTP, AZURE_ALLOW_HTTP, *_PROXY_URL, ...) and
        // their own defaults (GCS allows http, so that an emulator's
        // `gcs_base_url` works; its default endpoint is https).
        let timeouts = [
            (ClientConfigKey::ConnectTimeout, "5s"),
            (ClientConfigKey::Timeout, "60s"),
        ];
        let bucket_url = match target.scheme {
            Scheme::S3 => format!("s3://{}", target.bucket),
            Scheme::Gcs => format!("gs://{}", target.bucket),
            Scheme::Azure => format!("az://{}", target.bucket),
            Scheme::File => String::new(),
        };
        // What every cloud store's builder is given; the three builders share no trait.
        macro_rules! cloud_builder {
            ($builder:ty, $client_key:path) => {{
                install_crypto_provider();
                let mut b = <$builder>::from_env()
                    .with_url(bucket_url)
                    .with_retry(retry);
                for (key, value) in timeouts {
                    b = b.with_config($client_key(key), value);
                }
                b
            }};
        }
        let store: Arc<dyn ObjectStore> = match target.scheme {
            Scheme::File => {
                let dir = Path::new(&target.bucket);
                std::fs::create_dir_all(dir).map_err(io_err("cannot create", dir))?;
                Arc::new(
                    object_store::local::LocalFileSystem::new_with_prefix(dir)
                        .map_err(store_err)?,
                )
            }
            Scheme::S3 => {
                use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
                let mut b = cloud_builder!(AmazonS3Builder, AmazonS3ConfigKey::Client);
                // A plain-http endpoint (MinIO, moto, a local gateway) must be
                // allowed explicitly by object_store.
                let endpoint = std::env::var("AWS_ENDPOINT_URL")
                    .or_else(|_| std::env::var("AWS_ENDPOINT"))
                    .unwrap_or_default();
                if endpoint.starts_with("http://") {
                    b = b.with_allow_http(true);
                }
                if std::env::var_os("AWS_REGION").is_none()
                    && std::env::var_os("AWS_DEFAULT_REGION").is_none()
                {
                    b = b.with_region("us-east-1");
                }
                Arc::new(b.build().map_err(store_err)?)
            }
            Scheme::Gcs => {
                use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
                let b = cloud_builder!(GoogleCloudStorageBuilder, GoogleConfigKey::Client);
                Arc::new(b.build().map_err(store_err)?)
            }
            Scheme::Azure => {
                use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
                // AZURE_STORAGE_USE_EMULATOR=true (Azurite) allows http itself;
                // AZURITE_BLOB_STORAGE_URL moves it off http://127.0.0.1:10000.
                let b = cloud_builder!(MicrosoftAzureBuilder, AzureConfigKey::Client);
                Arc::new(b.build().map_err(store_err)?)
            }
        };
        Ok(Uploader { target, store })
    }

    /// The parsed target.
    pub fn target(&self) -> &ExportTarget {
        &self.target
    }

    /// Uploads `bytes` under `key`.
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), ExportError> {
        let path = ObjectPath::parse(key).map_err(|e| ExportError::Upload {
            key: key.to_string(),
            source: e.into(),
        })?;
        self.store
            .put(&path, PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|source| ExportError::Upload {
                key: key.to_string(),
                source,
            })
    }
}

/// The node name for object keys: `$NODE_NAME` (Kubernetes downward API),
/// else the kernel hostname, else `unknown-node`.
pub fn default_node_name() -> String {
    if let Ok(n) = std::env::var("NODE_NAME")
        && !n.is_empty()
        && !n.contains('/')
    {
        return n;
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().replace('/', "_"))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-node".to_string())
}

/// `YYYYMMDDTHHMMSS` (UTC) of a Unix time in seconds.
pub fn timestamp_utc(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    let (year, month, day) = ember_formats::units::civil_from_days(days);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}",
        rem / 3_600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Current Unix time in seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A local folder of files named `YYYYMMDDTHHMMSS-<suffix>`, oldest first by
/// name.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    suffix: &'static str,
    // Last second used for a name: uploaded files are deleted locally, so
    // the folder alone cannot tell which names the bucket already holds.
    last: std::sync::atomic::AtomicU64,
}

impl Spool {
    /// Opens (creating) `dir` for files ending in `suffix`.
    pub fn open(dir: PathBuf, suffix: &'static str) -> Result<Self, ExportError> {
        std::fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
        Ok(Spool {
            dir,
            suffix,
            last: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// File names in the spool, oldest first.
    pub fn files(&self) -> Result<Vec<String>, ExportError> {
        let mut names = Vec::new();
        let rd = std::fs::read_dir(&self.dir).map_err(io_err("cannot list", &self.dir))?;
        for entry in rd {
            let entry = entry.map_err(io_err("cannot list", &self.dir))?;
            if let Some(name) = entry.file_name().to_str()
                && name.ends_with(self.suffix)
                && name.len() > self.suffix.len()
            {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Writes a new file for the time `unix_secs` and returns its name. Two
    /// files in the same second get the next free second (never one this
    /// spool used before), so names stay in the documented layout, in order,
    /// and never overwrite an uploaded object.
    pub fn write(&self, unix_secs: u64, bytes: &[u8]) -> Result<String, ExportError> {
        use std::sync::atomic::Ordering;
        let mut t = unix_secs.max(self.last.load(Ordering::Relaxed).saturating_add(1));
        let existing = self.files()?;
        let name = loop {
            let name = format!("{}-{}", timestamp_utc(t), self.suffix);
            if !existing.contains(&name) && !self.dir.join(&name).exists() {
                break name;
            }
            t += 1;
        };
        self.last.store(t, Ordering::Relaxed);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, bytes).map_err(io_err("cannot write", &tmp))?;
        let path = self.dir.join(&name);
        std::fs::rename(&tmp, &path).map_err(io_err("cannot rename", &path))?;
        Ok(name)
    }

    /// Reads a file of the spool.
    pub fn read(&self, name: &str) -> Result<Vec<u8>, ExportError> {
        let path = self.dir.join(name);
        std::fs::read(&path).map_err(io_err("cannot read", &path))
    }

    /// Deletes a file of the spool.
    pub fn remove(&self, name: &str) -> Result<(), ExportError> {
        let path = self.dir.join(name);
        std::fs::remove_file(&path).map_err(io_err("cannot delete", &path))
    }

    /// Deletes the oldest files until at most `keep` remain; returns the
    /// deleted names.
    pub fn trim(&self, keep: usize) -> Result<Vec<String>, ExportError> {
        let files = self.files()?;
        let excess = files.len().saturating_sub(keep);
        let dropped: Vec<String> = files.into_iter().take(excess).collect();
        for name in &dropped {
            self.remove(name)?;
        }
        Ok(dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_match_the_calendar() {
        assert_eq!(timestamp_utc(0), "19700101T000000");
        // 2024-02-29 12:34:56 UTC (leap day).
        assert_eq!(timestamp_utc(1_709_210_096), "20240229T123456");
        // 2000-03-01 00:00:00 UTC.
        assert_eq!(timestamp_utc(951_868_800), "20000301T000000");
        assert_eq!(timestamp_utc(4_102_444_799), "20991231T235959");
    }

    #[test]
    fn targets_and_keys() {
        let t = ExportTarget::parse("s3://bucket/some/prefix/").unwrap();
        assert_eq!(
            (t.scheme, t.bucket.as_str(), t.prefix.as_str()),
            (Scheme::S3, "bucket", "some/prefix")
        );
        assert_eq!(
            t.key("perf", "node-1", "f.gz"),
            "some/prefix/perf/node-1/f.gz"
        );
        let t = ExportTarget::parse("gs://b").unwrap();
        assert_eq!(t.key("", "n", "f"), "n/f");
        assert_eq!(
            ExportTarget::parse("az://c/p").unwrap().scheme,
            Scheme::Azure
        );
        assert_eq!(
            ExportTarget::parse("file:///tmp/x/").unwrap().bucket,
            "/tmp/x"
        );
        for bad in [
            "",
            "s3://",
            "http://x/y",
            "file://rel/dir",
            "bucket",
            "s3://b/../x",
        ] {
            assert!(ExportTarget::parse(bad).is_err(), "{bad}");
        }
    }
}
