//! Pushing profiles to an Ember or Pyroscope server: the `push.v1.PusherService/Push` call
//! ([`Client`]) and a bounded, retrying background sender ([`Pusher`]), over Ember's one HTTP
//! client (`ember-http`). The wire types are in [`proto`].

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

pub mod client;
pub mod proto;

pub use client::{Client, PUSH_PATH, PushConfig, PushError, PushProfile, PushStats, Pusher};
pub use ember_http::HttpError;
