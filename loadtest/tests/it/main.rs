//! kubecache-loadtest's integration tests: the sim against the recorded corpora, its protocol, writes and auth, and the load runs.
//!
//! One test binary for the crate: each module was a binary of its own, and
//! each linked the whole dependency tree; one link instead of many is most
//! of the build time of `cargo test` (issue 42). Run one module with
//! `cargo test --test it <module>::`.

mod common;
mod edges;
mod golden;
mod real_clients;
mod run;
mod sim_auth;
mod sim_protocol;
mod sim_writes;
mod versions;
