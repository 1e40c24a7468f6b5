//! One module per subcommand: its clap options and a `run` that calls into the library crates.
//! Commands of an optional part of the binary are compiled only with its feature (Cargo.toml).

#[cfg(feature = "agent")]
pub mod agent;
pub mod collapse;
pub mod convert;
pub mod diff;
pub mod flamegraph;
#[cfg(feature = "agent")]
pub mod profiling;
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
