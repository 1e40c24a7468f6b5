//! Pushing profiles to an Ember or Pyroscope server: the `push.v1` wire types
//! that both the server (to decode) and the clients (`ember push`, the agent's
//! server exporter) share.

pub mod proto;
