//! One module per subcommand: its clap options and a `run` that calls into the library crates.
//! Commands of an optional part of the binary are compiled only with its feature (Cargo.toml).

#[cfg(feature = "agent")]
pub mod agent;
pub mod collapse;
pub mod convert;
pub mod diff;
pub mod flamegraph;
#[cfg(any(feature = "client", all(feature = "agent", feature = "server")))]
pub mod listing;
pub mod merge_inputs;
#[cfg(feature = "agent")]
pub mod profiling;
pub mod progress;
#[cfg(feature = "client")]
pub mod push;
#[cfg(feature = "client")]
pub mod query;
#[cfg(feature = "record")]
pub mod record;
#[cfg(feature = "server")]
pub mod server;
pub mod top;
#[cfg(all(feature = "agent", feature = "server"))]
pub mod up;

/// How many threads run a command's async tasks.
#[cfg(any(feature = "client", feature = "server", feature = "agent"))]
#[derive(Debug, Clone, Copy)]
pub enum Threads {
    /// Only the thread that blocks on the runtime: a short client command.
    Caller,
    /// This many worker threads: the agent, whose sampler has its own threads.
    Workers(usize),
    /// One worker per core (tokio's default): the server.
    PerCore,
}

/// The async runtime of a command that needs one, with I/O and timers enabled.
#[cfg(any(feature = "client", feature = "server", feature = "agent"))]
pub fn runtime(threads: Threads) -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context;
    let mut builder = match threads {
        Threads::Caller => tokio::runtime::Builder::new_current_thread(),
        Threads::Workers(_) | Threads::PerCore => tokio::runtime::Builder::new_multi_thread(),
    };
    if let Threads::Workers(n) = threads {
        builder.worker_threads(n);
    }
    builder
        .enable_all()
        .build()
        .context("starting the async runtime")
}
