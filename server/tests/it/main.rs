//! kubecache-server's integration tests: the sim on 127.0.0.1 (or a real API server), kubecache's router or binary in front of it.
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

mod api_server_bytes;
mod authz;
mod chaos;
mod client_certificates;
mod clients;
mod common;
mod consistent_reads;
mod deploy_binary;
mod deploy_manifests;
mod discovery;
mod edges;
mod encodings;
mod expensive;
mod failover;
mod fuzz_requests;
mod golden_replay;
mod held_pages;
mod http2;
mod initial_sends;
mod kubectl;
mod lifecycle;
mod load;
mod passthrough;
mod protocol;
mod read_your_writes;
mod reads;
mod revocation;
mod serving;
mod sharding;
mod table_watches;
mod versions;
mod warm_restart;
mod watch;
mod watch_isolation;
