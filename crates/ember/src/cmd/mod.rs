//! One module per subcommand: its clap options and a `run` that calls into the library crates.

pub mod collapse;
pub mod convert;
pub mod diff;
pub mod flamegraph;
pub mod agent;
pub mod profiling;
pub mod push;
pub mod up;
pub mod record;
pub mod loadgen;
pub mod query;
pub mod server;
pub mod top;
