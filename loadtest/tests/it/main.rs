//! kubecache-loadtest's integration tests: the sim against the recorded corpora, its protocol, writes and auth, and the load runs.
//!
//! One test binary for the crate: each module was a binary of its own, and
//! each linked the whole dependency tree; one link instead of many is most
//! of the build time of `cargo test` (issue 42). Run one module with
//! `cargo test --test it <module>::`.

/// The binary's allocator. The tests move tens of thousands of JSON objects
/// through the sim and kubecache; with glibc's malloc, allocation was a
/// fifth of their CPU, and mimalloc took 13% off the reflector's (issue 42,
/// `ARCHITECTURE.md` "Tests"). kubecache's own binary is not built with it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;
mod edges;
mod fanout;
mod golden;
mod real_clients;
mod run;
mod sim_auth;
mod sim_lean;
mod sim_protocol;
mod sim_rbac;
mod sim_writes;
mod versions;
