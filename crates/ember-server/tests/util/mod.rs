//! Shared helpers of the server's end-to-end tests: run the real server in this process
//! (bound to 127.0.0.1:0 on its own tokio runtime) and speak HTTP/1.1 to it over a socket.
#![allow(dead_code)]

mod wire;

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

pub use wire::*;

/// A server running on a thread of this test process.
pub struct Server {
    /// Where it listens, and the requests tests send it.
    pub endpoint: Endpoint,
    pub data_dir: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl Server {
    /// Starts a server on `127.0.0.1:0` with its data in `data_dir`; `extra` takes the
    /// options `ember server` would (`--config FILE`, `--auth-tokens FILE`, `--metrics-auth`,
    /// `--tls-cert FILE --tls-key FILE`: then [`Endpoint`] still speaks plain HTTP). Without a
    /// `--config`, retention is disabled: the corpus profiles carry their original (years
    /// old) timestamps. Returns once the listener is bound and the log replayed.
    pub fn start(data_dir: &Path, extra: &[&str]) -> Server {
        Self::start_on("127.0.0.1:0", data_dir, extra)
    }

    /// [`Server::start`] on a given address: for a client that was told where the server
    /// would be before it came up (the agent's outage test).
    pub fn start_on(listen: &str, data_dir: &Path, extra: &[&str]) -> Server {
        let option = |name: &str| {
            extra
                .iter()
                .position(|a| *a == name)
                .map(|i| PathBuf::from(extra[i + 1]))
        };
        let limits: ember_server::Limits = match option("--config") {
            Some(path) => serde_json::from_slice(&std::fs::read(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            None => serde_json::from_str(r#"{"retention_days": 0}"#).unwrap(),
        };
        let tokens = option("--auth-tokens").map(|p| ember_server::read_tokens(&p).unwrap());
        let tls = match (option("--tls-cert"), option("--tls-key")) {
            (Some(cert), Some(key)) => Some(ember_server::TlsFiles { cert, key }),
            _ => None,
        };
        let config = ember_server::Config {
            listen: listen.parse().expect("a socket address"),
            data_dir: data_dir.to_path_buf(),
            limits,
            tokens,
            tls,
            metrics_auth: extra.contains(&"--metrics-auth"),
        };
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let server = match ember_server::Server::bind(config).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = bound_tx.send(Err(e.to_string()));
                        return Ok(());
                    }
                };
                let _ = bound_tx.send(Ok(server.local_addr().expect("bound address")));
                server
                    .run(async {
                        let _ = stopped.await;
                    })
                    .await
                    .map_err(|e| e.to_string())
            })
        });
        let addr = bound_rx
            .recv()
            .expect("server thread ended before binding")
            .unwrap_or_else(|e| panic!("starting the server: {e}"));
        Server {
            endpoint: Endpoint {
                addr: addr.to_string(),
            },
            data_dir: data_dir.to_path_buf(),
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Graceful shutdown (what SIGTERM does to `ember server`): in-flight requests finish,
    /// the log is flushed into a block; panics unless the server stops cleanly.
    pub fn terminate(mut self) {
        self.stop.take().map(|s| s.send(()));
        let result = self.thread.take().expect("running").join();
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("server stopped with an error: {e}"),
            Err(_) => panic!("server thread panicked"),
        }
    }
}

impl std::ops::Deref for Server {
    type Target = Endpoint;

    fn deref(&self) -> &Endpoint {
        &self.endpoint
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
