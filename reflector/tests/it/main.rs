//! kubecache-reflector's integration tests: the reflector against the sim, recorded streams and a real API server.
//!
//! One test binary for the crate: each module was a binary of its own, and
//! each linked the whole dependency tree; one link instead of many is most
//! of the build time of `cargo test` (issue 42). Run one module with
//! `cargo test --test it <module>::`.

mod common;
mod golden;
mod protobuf_equivalence;
mod reflector_history;
mod reflector_lifecycle;
mod reflector_sync;
