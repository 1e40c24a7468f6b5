//! Helpers of the agent's end-to-end tests. The agent runs in the test process
//! ([`RunningAgent`]: `Agent::start`, its admin router on 127.0.0.1:0, `apply` through that
//! router, `shutdown`), and so does the server it pushes to (`crates/ember-server/tests/util`,
//! included here); what they profile and scrape are real programs ([`host::Workload`],
//! [`apps::go_app`]), and the bucket exporters write to a directory or a real moto S3.
#![allow(dead_code)]

mod agent;
pub mod apps;
pub mod host;
mod logs;
#[path = "../../../ember-server/tests/util/mod.rs"]
pub mod server;

// `host` talks HTTP through `super::wire`: the server helpers re-export the wire functions.
use server as wire;

pub use agent::*;
pub use apps::*;
pub use host::*;
pub use logs::*;
pub use server::{Server, enc, http, temp_dir};
