//! One module per subcommand: its clap options and a `run` that calls into the library crates.

pub mod agent;
pub mod collapse;
pub mod convert;
pub mod diff;
pub mod flamegraph;
pub mod profiling;
pub mod push;
pub mod query;
pub mod record;
pub mod server;
pub mod top;
pub mod up;
