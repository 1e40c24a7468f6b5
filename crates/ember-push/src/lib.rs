//! Pushing profiles to an Ember or Pyroscope server: the `push.v1` wire types that both the
//! server (to decode) and the clients (`ember push`, the agent's server exporter) share, a
//! small HTTP/1.1 client, and a bounded, retrying background sender.

#![warn(missing_docs)]
pub mod client;
pub mod http;
pub mod proto;

pub use client::{Client, PUSH_PATH, PushConfig, PushError, PushProfile, PushStats, Pusher};
pub use http::{HttpError, Url};
