//! The simulated API server against the edge-case corpus
//! (`testdata/apiserver-golden/edges`, see its README):
//! every recorded request of the `impersonation`, `authorization-header`
//! and `request-edges` groups made without a client certificate is sent to
//! a sim with the corpus's policy ([`Policy::edges`]) and objects, as the
//! recorded bytes on a connection of its own, and must get the recorded
//! status; an error or a SelfSubjectReview also the recorded body, byte for
//! byte (but the review's creation time), and an error the same `Warning`.
//!
//! The cases the sim answers otherwise are listed in [`DIFFERENT`], each
//! with why: the test fails when the set that differs changes, for better or
//! worse.

use std::net::SocketAddr;

use kubecache_loadtest::sim::auth::edges::{PAYMENTS, POD_X};
use kubecache_loadtest::sim::{Policy, Sim, SimConfig, ids};
use kubecache_testkit::{edges, golden, replay};
use serde_json::Value;

/// The cases the sim answers otherwise, and why.
const DIFFERENT: &[(&str, &str)] = &[
    (
        "ah-control-char",
        "hyper, not Go's net/http, refuses the header: its 400 has no body",
    ),
    (
        "req-request-line-100k-alice",
        "the http crate's URI holds at most 64 KiB: hyper answers 414",
    ),
    (
        "req-request-line-1100k-alice",
        "hyper's 431 has no body; Go's says 431 Request Header Fields Too Large",
    ),
    ("req-accept-table-alice", "the sim serves no Table"),
];

/// The groups replayed.
const GROUPS: &[&str] = &["impersonation", "authorization-header", "request-edges"];

/// A sim with the corpus's policy and the objects its cases name
/// ([`golden::edge_objects`]).
async fn edges_sim() -> (String, Sim) {
    let (url, sim) = Sim::start(SimConfig {
        policy: Some(Policy::edges()),
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let (pods, configmaps) = golden::edge_objects();
    assert_eq!(
        (
            &pods[0]["metadata"]["namespace"],
            &pods[0]["metadata"]["name"]
        ),
        (&Value::from(PAYMENTS), &Value::from(POD_X))
    );
    sim.seed(ids::PODS, pods).expect("pods seeded");
    sim.seed(ids::CONFIGMAPS, configmaps)
        .expect("configmaps seeded");
    (url, sim)
}

#[tokio::test(start_paused = true)]
async fn the_sim_answers_the_recorded_edge_cases_as_kube_apiserver_did() {
    let (url, _sim) = edges_sim().await;
    let addr: SocketAddr = url
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("an address");
    let cases = edges::cases(GROUPS);
    assert_eq!(
        cases.len(),
        129,
        "every case of the three groups (none by certificate)"
    );
    let differing = edges::replay(addr, &cases).await;
    replay::assert_differ_exactly(&differing, DIFFERENT);
}
