//! Pretty JSON and YAML (issue 41 section 4) against the `versions/`
//! corpus: kubecache, in front of a sim holding the corpus's pods, answers
//! each recorded `pretty` and `yaml` case (gets, lists, errors, and
//! `/version`, which passes through to the sim; not protobuf, whose bytes
//! other tests hold, nor Tables, whose ages differ) as recorded, compared
//! as [`forms`] compares.

use crate::common;

use std::net::SocketAddr;

use common::{Served, Setup, serve};
use kubecache_loadtest::sim::{Policy, SimConfig, ids};
use kubecache_reflector::upstream::ApiResource;
use kubecache_testkit::{forms, golden, wait};
use kubecache_wire::Transform;

/// kubecache, keeping `managedFields`, in front of the corpus's pods.
async fn served() -> (Served, SocketAddr) {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 0,
            configmaps: 0,
            policy: Some(Policy::edges().with_kubecache()),
            ..SimConfig::default()
        },
        resources: vec![ApiResource::pods()],
        transform: Transform::keep_everything(),
        auth: Some(common::matrix_auth()),
        ..Setup::default()
    })
    .await;
    let list = golden::json("versions/bodies/data-pods-list-after-setup.json");
    let pods = list["items"].as_array().expect("items").clone();
    let count = pods.len();
    served.sim.seed(ids::PODS, pods).expect("pods seeded");
    let held = || {
        served
            .caches
            .by_name("pods")
            .unwrap()
            .reader
            .snapshot()
            .len()
    };
    wait::until("kubecache holds the corpus's pods", || held() == count).await;
    let addr = served
        .url
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("an address");
    (served, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pretty_and_yaml_answers_are_the_recorded_ones() {
    let (_served, addr) = served().await;
    let cases = forms::cases(|id| {
        (id.starts_with("pretty-") && !id.ends_with("-protobuf"))
            || [
                "yaml-pod-get",
                "yaml-pod-list-limit2",
                "yaml-404",
                "yaml-403-eve",
                "yaml-watch",
                "yaml-version",
            ]
            .contains(&id)
    });
    assert_eq!(cases.len(), 29);
    let differing = forms::differing(addr, &cases, kubecache_wire::pretty::indent).await;
    assert!(differing.is_empty(), "{}", differing.join("\n\n"));
}
