//! [`BlockingClient`]: the async [`Client`] for synchronous code (the symbolizer's debuginfod
//! fetch, CLI commands without a runtime).
//!
//! Why a worker thread with its own current-thread runtime, rather than reqwest's `blocking`
//! feature or `Runtime::block_on` on the caller's thread: `block_on` panics when the caller is
//! already inside a tokio runtime (the agent symbolizes from its tasks), and reqwest's blocking
//! client has the same restriction when dropped there. A worker thread owning the runtime is
//! safe from any thread, inside or outside a runtime; its one runtime also drives every pooled
//! connection, so keep-alive works across calls. The cost is one idle thread per client.

use std::sync::{Arc, mpsc};
use std::thread;

use bytes::Bytes;

use crate::{Client, ClientConfig, HttpError, Request, Response};

/// A job for the worker: runs on its runtime with the shared async client.
type Job = Box<dyn FnOnce(Client) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// Chunks of a streamed download on their way from the worker to the caller's sink.
const DOWNLOAD_CHUNKS_IN_FLIGHT: usize = 8;

/// A synchronous HTTP client: the same settings and behaviour as [`Client`], each call
/// blocking the calling thread until the answer is in.
///
/// Safe to call from any thread, including from inside a tokio runtime (the work runs on the
/// client's own worker thread); in async code prefer [`Client`], since a blocking call holds
/// up the calling runtime thread for as long as the request takes. Clones share the worker.
/// The worker thread ends when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct BlockingClient {
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
    config: ClientConfig,
}

impl BlockingClient {
    /// A client with these settings and its worker thread. Fails as [`Client::new`] does, or
    /// when the thread or its runtime cannot be started.
    pub fn new(config: &ClientConfig) -> Result<BlockingClient, HttpError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| HttpError::Setup(format!("tokio runtime: {e}")))?;
        // Built inside the runtime: reqwest's connector needs one when it is created.
        let client = {
            let _entered = runtime.enter();
            Client::new(config)?
        };
        let (jobs, mut queue) = tokio::sync::mpsc::unbounded_channel::<Job>();
        thread::Builder::new()
            .name("ember-http".into())
            .spawn(move || {
                runtime.block_on(async move {
                    while let Some(job) = queue.recv().await {
                        // Spawned, so that calls from several threads run concurrently.
                        tokio::spawn(job(client.clone()));
                    }
                });
            })
            .map_err(|e| HttpError::Setup(format!("HTTP worker thread: {e}")))?;
        Ok(BlockingClient {
            jobs,
            config: config.clone(),
        })
    }

    /// The settings this client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Runs `work` on the worker and waits for its result.
    fn run<T, F, Fut>(&self, work: F) -> Result<T, HttpError>
    where
        T: Send + 'static,
        F: FnOnce(Client) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, HttpError>> + Send + 'static,
    {
        let (answer, result) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |client| {
            Box::pin(async move {
                // The caller may have gone (it cannot, it waits): nothing to do then.
                let _ = answer.send(work(client).await);
            })
        });
        self.jobs.send(job).map_err(|_| HttpError::WorkerGone)?;
        result.recv().map_err(|_| HttpError::WorkerGone)?
    }

    /// [`Client::send`]: any status, body within the cap.
    pub fn send(&self, request: Request) -> Result<Response, HttpError> {
        self.run(move |client| async move { client.send(request).await })
    }

    /// [`Client::fetch`]: a 2xx response, else [`HttpError::Status`].
    pub fn fetch(&self, request: Request) -> Result<Response, HttpError> {
        self.run(move |client| async move { client.fetch(request).await })
    }

    /// [`Client::get_bytes`]: the body of a 2xx answer to `GET url`.
    pub fn get_bytes(&self, url: &str, max_body: u64) -> Result<Bytes, HttpError> {
        let url = url.to_string();
        self.run(move |client| async move { client.get_bytes(&url, max_body).await })
    }

    /// [`Client::download`]: streams the body of a 2xx answer to `sink`, which runs on the
    /// calling thread (so it may write files without holding up the worker's runtime).
    pub fn download(
        &self,
        request: Request,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<u64, HttpError> {
        let url = request.url().to_string();
        // Chunks travel through a std channel (the caller blocks on it, which tokio's channels
        // forbid inside a runtime); the semaphore bounds how many are in flight, so a slow
        // sink slows the transfer instead of piling the body up in memory.
        let (chunks, received) = mpsc::channel::<Result<Option<Bytes>, HttpError>>();
        let credit = Arc::new(tokio::sync::Semaphore::new(DOWNLOAD_CHUNKS_IN_FLIGHT));
        let worker_credit = credit.clone();
        let job: Job = Box::new(move |client| {
            Box::pin(async move {
                let mut download = match client.open_download(request).await {
                    Ok(d) => d,
                    Err(e) => {
                        let _ = chunks.send(Err(e));
                        return;
                    }
                };
                loop {
                    let Ok(permit) = worker_credit.acquire().await else {
                        return;
                    };
                    permit.forget();
                    let next = download.next_chunk().await;
                    let done = !matches!(next, Ok(Some(_)));
                    // A send error means the caller stopped reading: abandon the transfer.
                    if chunks.send(next).is_err() || done {
                        return;
                    }
                }
            })
        });
        self.jobs.send(job).map_err(|_| HttpError::WorkerGone)?;
        let mut total = 0u64;
        loop {
            match received.recv().map_err(|_| HttpError::WorkerGone)?? {
                Some(chunk) => {
                    total += chunk.len() as u64;
                    // Dropping `received` (by returning) makes the worker's next send fail.
                    sink(&chunk).map_err(|source| HttpError::Sink {
                        url: url.clone(),
                        source,
                    })?;
                    credit.add_permits(1);
                }
                None => return Ok(total),
            }
        }
    }
}
