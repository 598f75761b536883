//! Kubernetes protobuf: a schema-driven transcoder between the API server's
//! JSON and its protobuf encoding (in progress: the schema comes first).
// The schema is used by the transcoder that follows.
#![allow(dead_code)]

mod desc;
#[cfg(test)]
mod generate;
#[rustfmt::skip]
mod schema;
