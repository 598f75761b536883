//! Kubernetes protobuf: a schema-driven transcoder between the API server's
//! JSON and its protobuf encoding (in progress: schema and wire helpers first).
// The schema and helpers are used by the transcoder that follows.
#![allow(dead_code)]

mod desc;
mod error;
#[cfg(test)]
mod generate;
#[rustfmt::skip]
mod schema;
mod text;
mod wire;

pub use error::ProtoError;
