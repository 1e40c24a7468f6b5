//! The agent run in this test process, as `ember agent` runs it (crates/ember/src/cmd/agent.rs)
//! minus the process: its own tokio runtime, the admin endpoint on the configured address
//! (127.0.0.1:0 in every test) guarded by [`ADMIN_TOKEN`] unless a test says otherwise, hot
//! reload through that endpoint, and the shutdown flush with the budget the binary gives it
//! on SIGTERM.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_agent::admin::AdminOptions;
use ember_agent::{Agent, config};

/// The admin token of every [`RunningAgent::start`]ed agent (what `--admin-token-file` would
/// hold): hot reloads send it.
pub const ADMIN_TOKEN: &str = "test-admin-token";

/// What `ember agent` allows [`Agent::shutdown`] on SIGTERM (its `run_until_signal` budget).
pub const SHUTDOWN_BUDGET: Duration = Duration::from_millis(4500);

/// An agent running on threads of this test process.
pub struct RunningAgent {
    /// The library's agent (its metrics, outbox and configuration).
    pub agent: Arc<Agent>,
    /// `host:port` of the admin endpoint.
    pub admin: String,
    runtime: Option<tokio::runtime::Runtime>,
    stop_admin: Option<tokio::sync::oneshot::Sender<()>>,
}

/// How [`RunningAgent::terminate`] went.
#[derive(Debug)]
pub struct Stopped {
    /// Whether the shutdown flushed everything (the binary's `stopped flushed=` field).
    pub flushed: bool,
    /// Seconds the shutdown took.
    pub secs: f64,
    /// The push counters after it (the binary's `sent_profiles`, `queue_profiles`, ...).
    pub push: ember_push::PushStats,
}

impl RunningAgent {
    /// Parses `yaml` as `ember agent --config` would, starts the agent and its admin endpoint;
    /// panics when the configuration is refused.
    pub fn start(yaml: &str) -> RunningAgent {
        Self::try_start(yaml).unwrap_or_else(|e| panic!("starting the agent: {e}"))
    }

    /// [`RunningAgent::start`], returning what refused the configuration instead of panicking.
    pub fn try_start(yaml: &str) -> Result<RunningAgent, String> {
        Self::try_start_with(
            yaml,
            AdminOptions {
                token: Some(ADMIN_TOKEN.into()),
            },
        )
    }

    /// [`RunningAgent::try_start`] with the admin endpoint guarded as `options` say.
    pub fn try_start_with(yaml: &str, options: AdminOptions) -> Result<RunningAgent, String> {
        super::capture_logs();
        let config = config::parse(yaml).map_err(|e| e.to_string())?;
        // Two workers, as the binary's runtime has.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let listen = config.admin.listen.clone();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(&listen))
            .map_err(|e| format!("admin.listen {listen}: {e}"))?;
        let admin = listener
            .local_addr()
            .map_err(|e| e.to_string())?
            .to_string();
        let agent = {
            // The components spawn their tasks on the current runtime.
            let _entered = runtime.enter();
            Agent::start(config).map_err(|e| e.to_string())?
        };
        let (stop_admin, stopped) = tokio::sync::oneshot::channel::<()>();
        runtime.spawn(ember_agent::admin::serve(
            agent.clone(),
            listener,
            options,
            async move {
                let _ = stopped.await;
            },
        ));
        Ok(RunningAgent {
            agent,
            admin,
            runtime: Some(runtime),
            stop_admin: Some(stop_admin),
        })
    }

    /// `GET /metrics` on the admin endpoint.
    pub fn metrics(&self) -> String {
        let (s, b) = super::http(&self.admin, "GET", "/metrics", &[], b"");
        let text = String::from_utf8_lossy(&b).into_owned();
        assert_eq!(s, 200, "{text}");
        text
    }

    /// What the process logged so far (every agent of this test binary: the subscriber is
    /// global), for failure messages.
    pub fn log(&self) -> String {
        super::log_text()
    }

    /// Hot reload through the admin endpoint (`POST /api/v1/config`, what `ember agent apply`
    /// sends; SIGHUP in the binary ends in the same `Agent::apply`); panics unless applied.
    pub fn reload(&self, yaml: &str) {
        let (s, b) = super::http(
            &self.admin,
            "POST",
            "/api/v1/config",
            &[
                ("content-type", "application/yaml"),
                ("authorization", &format!("Bearer {ADMIN_TOKEN}")),
            ],
            yaml.as_bytes(),
        );
        let answer = String::from_utf8_lossy(&b);
        assert_eq!(s, 200, "reload refused: {answer}");
        assert!(answer.contains("\"applied\":true"), "{answer}");
    }

    /// What SIGTERM makes the binary do: [`Agent::shutdown`] within [`SHUTDOWN_BUDGET`] (stop
    /// producing, cut a last profile, flush the queue and the bucket exporters), then stop
    /// the admin endpoint.
    pub fn terminate(mut self) -> Stopped {
        let runtime = self.runtime.take().expect("running");
        let started = Instant::now();
        let flushed = runtime.block_on(self.agent.shutdown(SHUTDOWN_BUDGET));
        let secs = started.elapsed().as_secs_f64();
        let push = self.agent.outbox().push_stats().unwrap_or_default();
        if let Some(stop) = self.stop_admin.take() {
            let _ = stop.send(());
        }
        runtime.shutdown_timeout(Duration::from_secs(1));
        Stopped {
            flushed,
            secs,
            push,
        }
    }
}

impl Drop for RunningAgent {
    /// A test that failed before [`RunningAgent::terminate`]: stop the profiler thread and
    /// the tasks rather than leave them sampling while the other tests of the binary run.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.block_on(self.agent.shutdown(Duration::from_secs(1)));
            if let Some(stop) = self.stop_admin.take() {
                let _ = stop.send(());
            }
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}
