//! The sim against the `versions/` pretty and YAML cases (issue 41 section
//! 4): loaded with the corpus's pods, it answers each as recorded
//! (compared as [`forms`] compares), but those in [`DIFFERENT`].

use std::net::SocketAddr;

use kubecache_loadtest::sim::{Policy, Sim, SimConfig, ids};
use kubecache_testkit::{forms, golden};

/// The cases the sim answers otherwise, and why.
const DIFFERENT: &[(&str, &str)] = &[
    ("yaml-table-list", "the sim serves no Table"),
    ("yaml-table-get", "the sim serves no Table"),
    ("yaml-table-json-then-yaml", "the sim serves no Table"),
    ("yaml-table-yaml-then-yaml", "the sim serves no Table"),
];

#[tokio::test]
async fn the_sim_writes_pretty_json_and_yaml_as_recorded() {
    let (url, sim) = Sim::start(SimConfig {
        pods: 0,
        configmaps: 0,
        policy: Some(Policy::edges()),
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let list = golden::json("versions/bodies/data-pods-list-after-setup.json");
    let pods = list["items"].as_array().expect("items").clone();
    sim.seed(ids::PODS, pods).expect("pods seeded");
    let addr: SocketAddr = url
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("an address");
    let cases = forms::cases(|id| {
        (id.starts_with("pretty-") || id.starts_with("yaml-"))
            && !id.ends_with("-protobuf")
            && !DIFFERENT.iter().any(|(different, _)| *different == id)
    });
    assert_eq!(cases.len(), 29);
    let differing = forms::differing(addr, &cases, kubecache_wire::pretty::indent).await;
    assert!(differing.is_empty(), "{}", differing.join("\n\n"));
}
