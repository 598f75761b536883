//! kubecache against the edge-case corpus (`shared/apiserver-golden/edges`;
//! see its README): every recorded request of the `impersonation`,
//! `authorization-header` and `request-edges` groups made without a client
//! certificate is sent to kubecache, in front of a sim with the corpus's
//! identities and RBAC (`Policy::edges`, and kubecache's own service
//! account) and the objects its cases name, caching pods and config maps,
//! as the recorded bytes on a connection of its own. Each must get the
//! recorded status; an error or a SelfSubjectReview also the recorded body,
//! byte for byte (but the review's creation time), and an error the same
//! `Warning` — whether kubecache answers it or passes it through.
//!
//! The cases kubecache answers otherwise are listed in [`DIFFERENT`], each
//! with why: the test fails when the set that differs changes, for better or
//! worse. (`loadtest/tests/edges.rs` holds the sim to the same cases.)

mod common;

use std::net::SocketAddr;

use common::{Setup, serve};
use kubecache_loadtest::sim::{Policy, SimConfig, ids};
use kubecache_reflector::upstream::ApiResource;
use kubecache_server::auth::AuthSettings;
use kubecache_testkit::{edges, golden, wait};

/// The cases kubecache answers otherwise, and why.
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
    (
        "req-accept-yaml-alice",
        "kubecache serves no YAML: 406 (kubectl asks for JSON or protobuf and prints YAML itself)",
    ),
    (
        "req-accept-yaml-anon",
        "kubecache writes no YAML: its 403 is indented JSON",
    ),
    (
        "req-accept-yaml-eve",
        "kubecache writes no YAML: its 403 is indented JSON",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubecache_answers_the_recorded_edge_cases_as_kube_apiserver_did() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 0,
            configmaps: 0,
            policy: Some(Policy::edges().with_kubecache()),
            ..SimConfig::default()
        },
        resources: vec![
            ApiResource::pods(),
            common::resource("", "configmaps", "ConfigMap", true),
        ],
        auth: Some(AuthSettings::default()),
        ..Setup::default()
    })
    .await;
    let (pods, configmaps) = golden::edge_objects();
    let counts = (pods.len(), configmaps.len());
    served.sim.seed(ids::PODS, pods).expect("pods seeded");
    served
        .sim
        .seed(ids::CONFIGMAPS, configmaps)
        .expect("configmaps seeded");
    let held = |name: &str| served.caches.by_name(name).unwrap().reader.snapshot().len();
    wait::until("kubecache holds the corpus's objects", || {
        (held("pods"), held("configmaps")) == counts
    })
    .await;
    let addr: SocketAddr = served
        .url
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("an address");
    let cases = edges::cases(&["impersonation", "authorization-header", "request-edges"]);
    assert_eq!(
        cases.len(),
        129,
        "every case of the three groups (none by certificate)"
    );
    let differing = edges::replay(addr, &cases).await;
    edges::assert_differ_exactly(&differing, DIFFERENT);
}
