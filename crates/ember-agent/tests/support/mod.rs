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

// Each test uses some of these: the others are unused in its binary.
#[allow(unused_imports)]
pub use agent::*;
#[allow(unused_imports)]
pub use apps::*;
#[allow(unused_imports)]
pub use host::*;
#[allow(unused_imports)]
pub use logs::*;
#[allow(unused_imports)]
pub use server::{Server, enc, http, temp_dir};

/// Folded stacks of a perf_collector dump (gzip'd `perf script`), as `ember collapse` prints.
pub fn collapse_file(path: &std::path::Path) -> String {
    let file = std::fs::File::open(path).unwrap();
    let folded = ember_collapse::fold_stacks(file, &ember_collapse::CollapseOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    folded.write_folded(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}
