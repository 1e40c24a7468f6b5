//! The `push.v1` wire types, defined once in `ember-proto` and re-exported here so the
//! push client's users keep one import path.

pub use ember_proto::push::{PushRequest, PushResponse, RawProfileSeries, RawSample};
pub use ember_proto::types::LabelPair;
