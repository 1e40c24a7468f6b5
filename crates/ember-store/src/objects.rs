//! Where blocks live: an [`ObjectStore`] under a key prefix.
//!
//! Owns every block read, write, listing and deletion, so the local filesystem of today and
//! the S3/GCS/Azure backends of later share one code path: the store is handed an
//! `Arc<dyn ObjectStore>` and a prefix, and nothing else in the crate touches block files.
//!
//! Sync over async: `object_store` is async while [`crate::Store`] is a sync API called from
//! plain threads, `spawn_blocking` closures and tests alike. Rather than require callers to
//! be inside (or outside) a particular runtime, this module owns a small private tokio
//! runtime (one worker, IO and timer drivers on, so network backends work unchanged) and
//! runs each operation as a task on it, waiting on a channel. That works from any calling
//! context (a `block_on` inside an async worker would panic, and a bare executor would lack
//! the reactor a network backend needs). Block operations are rare (flush, start, retention),
//! so the hop to the runtime thread costs nothing measurable.
//!
//! With [`LocalFileSystem`] the store is opened with `with_fsync(true)`: a flush deletes the
//! log segments a block replaces, so the block must be on stable storage first, which remote
//! object stores guarantee on a successful put.

use std::future::Future;
use std::sync::Arc;

use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use crate::StoreError;

/// An object store, a prefix inside it and the runtime that drives its futures.
pub(crate) struct Objects {
    store: Arc<dyn ObjectStore>,
    prefix: ObjPath,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Objects")
            .field("store", &self.store.to_string())
            .field("prefix", &self.prefix.as_ref())
            .finish_non_exhaustive()
    }
}

/// One listed object: its key and size.
pub(crate) struct Listed {
    /// Key relative to the prefix (the file name).
    pub name: String,
    /// Full key.
    pub key: ObjPath,
    /// Size in bytes.
    pub size: u64,
}

fn object_error(what: &str, key: &ObjPath, e: impl std::fmt::Display) -> StoreError {
    StoreError::Io {
        path: format!("object {key} ({what})"),
        message: e.to_string(),
    }
}

impl Objects {
    /// Blocks under `prefix` of `store`.
    pub(crate) fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> Result<Objects, StoreError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(2)
            .thread_name("ember-objects")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Io {
                path: "object store runtime".into(),
                message: e.to_string(),
            })?;
        Ok(Objects {
            store,
            prefix: ObjPath::from(prefix),
            runtime: Some(runtime),
        })
    }

    /// A [`LocalFileSystem`] rooted at `root` (created if missing) with fsync on writes.
    pub(crate) fn local(root: &std::path::Path, prefix: &str) -> Result<Objects, StoreError> {
        std::fs::create_dir_all(root).map_err(|e| StoreError::io(root, e))?;
        let fs = LocalFileSystem::new_with_prefix(root)
            .map_err(|e| StoreError::io(root, std::io::Error::other(e.to_string())))?
            .with_fsync(true);
        Objects::new(Arc::new(fs), prefix)
    }

    /// Full key of `name` under the prefix.
    pub(crate) fn key(&self, name: &str) -> ObjPath {
        self.prefix.clone().join(name)
    }

    /// Runs `fut` to completion on the private runtime.
    fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let Some(rt) = &self.runtime else {
            return Err(StoreError::Closed);
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().map_err(|_| StoreError::Closed)
    }

    /// Every object directly under the prefix.
    pub(crate) fn list(&self) -> Result<Vec<Listed>, StoreError> {
        let store = self.store.clone();
        let prefix = self.prefix.clone();
        let listed = self
            .run(async move { store.list_with_delimiter(Some(&prefix)).await })?
            .map_err(|e| object_error("list", &self.prefix, e))?;
        Ok(listed
            .objects
            .into_iter()
            .filter_map(|m| {
                let name = m.location.filename()?.to_string();
                Some(Listed {
                    name,
                    key: m.location,
                    size: m.size,
                })
            })
            .collect())
    }

    /// The bytes of `key`.
    pub(crate) fn get(&self, key: &ObjPath) -> Result<Vec<u8>, StoreError> {
        let store = self.store.clone();
        let k = key.clone();
        let bytes = self
            .run(async move {
                match store.get(&k).await {
                    Ok(r) => r.bytes().await,
                    Err(e) => Err(e),
                }
            })?
            .map_err(|e| object_error("get", key, e))?;
        Ok(bytes.to_vec())
    }

    /// Bytes `range` of `key` (a block's index, or one tenant section, without the rest).
    pub(crate) fn get_range(
        &self,
        key: &ObjPath,
        range: std::ops::Range<u64>,
    ) -> Result<Vec<u8>, StoreError> {
        let store = self.store.clone();
        let k = key.clone();
        let bytes = self
            .run(async move { store.get_range(&k, range).await })?
            .map_err(|e| object_error("get range", key, e))?;
        Ok(bytes.to_vec())
    }

    /// Writes `parts`, one after another, as `key` (atomically: readers see the old state or
    /// all of it). A block's compressed pieces are written as they are, not copied into one
    /// buffer first.
    pub(crate) fn put_parts(&self, key: &ObjPath, parts: Vec<Vec<u8>>) -> Result<(), StoreError> {
        let payload: PutPayload = parts
            .into_iter()
            .filter(|p| !p.is_empty())
            .flat_map(PutPayload::from)
            .collect();
        let store = self.store.clone();
        let k = key.clone();
        self.run(async move { store.put(&k, payload).await })?
            .map_err(|e| object_error("put", key, e))?;
        Ok(())
    }

    /// Renames `from` to `to` (a rename on a file system; copy and delete on object stores).
    pub(crate) fn rename(&self, from: &ObjPath, to: &ObjPath) -> Result<(), StoreError> {
        let store = self.store.clone();
        let (f, t) = (from.clone(), to.clone());
        self.run(async move { store.rename(&f, &t).await })?
            .map_err(|e| object_error("rename", from, e))
    }

    /// Deletes `key`.
    pub(crate) fn delete(&self, key: &ObjPath) -> Result<(), StoreError> {
        let store = self.store.clone();
        let k = key.clone();
        self.run(async move { store.delete(&k).await })?
            .map_err(|e| object_error("delete", key, e))
    }
}

impl Drop for Objects {
    fn drop(&mut self) {
        // The store may be dropped inside an async context, where a blocking runtime
        // shutdown would panic; nothing is in flight once `run` has returned.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
