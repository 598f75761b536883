//! Pretty JSON and YAML (issue 41 section 4) against the `versions/`
//! corpus: kubecache, in front of a sim holding the corpus's pods, answers
//! each recorded `pretty` and `yaml` case kubecache itself answers (gets,
//! lists, errors; not protobuf, whose bytes other tests hold, nor Tables,
//! whose ages differ) with the recorded status, `Content-Type` and body.
//! Bodies are compared line by line without the lines of values the sim
//! cannot reproduce (resourceVersions, continue tokens, uids, times, and
//! the `generation` it adds);
//! a compact body is compared indented, and must stay compact.

use crate::common;

use std::net::SocketAddr;

use common::{Served, Setup, serve};
use kubecache_loadtest::sim::{Policy, SimConfig, ids};
use kubecache_reflector::upstream::ApiResource;
use kubecache_testkit::{edges, golden, wait};
use kubecache_wire::Transform;
use serde_json::Value;

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

/// `body` without the values the sim cannot reproduce; a compact JSON body
/// indented first, and marked so.
fn normalized(body: &[u8]) -> String {
    let compact = body.ends_with(b"\n") && body.iter().filter(|&&b| b == b'\n').count() == 1;
    let text = match compact && body.starts_with(b"{") {
        true => kubecache_wire::pretty::indent(body),
        false => body.to_vec(),
    };
    // The sim also sets `generation`, which a real API server leaves out of pods.
    let volatile = [
        "resourceVersion",
        "continue",
        "uid",
        "creationTimestamp",
        "time",
        "generation",
    ];
    let lines = String::from_utf8_lossy(&text)
        .split('\n')
        .filter(|line| {
            let key = line.trim_start().trim_start_matches("- ").trim_matches('"');
            !volatile
                .iter()
                .any(|v| key.starts_with(&format!("{v}\"")) || key.starts_with(&format!("{v}:")))
        })
        .map(str::to_string)
        .collect::<Vec<_>>();
    format!(
        "{}{}",
        lines.join("\n"),
        if compact { " (compact)" } else { "" }
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pretty_and_yaml_answers_are_the_recorded_ones() {
    let (_served, addr) = served().await;
    let cases: Vec<Value> = golden::json("versions/manifest.json")
        .as_array()
        .expect("cases")
        .iter()
        .filter(|case| {
            let id = case["id"].as_str().unwrap();
            (id.starts_with("pretty-") && !id.ends_with("-protobuf"))
                || [
                    "yaml-pod-get",
                    "yaml-pod-list-limit2",
                    "yaml-404",
                    "yaml-403-eve",
                    "yaml-watch",
                ]
                .contains(&id)
        })
        .cloned()
        .collect();
    assert_eq!(cases.len(), 28);
    let mut differing = Vec::new();
    for case in &cases {
        let id = case["id"].as_str().unwrap();
        let answer = edges::exchange(addr, edges::request_bytes(case, addr)).await;
        let recorded_type = case["response_headers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h[0] == "Content-Type")
            .map(|h| h[1].as_str().unwrap().to_string());
        let body = golden::read(&format!("versions/{}", case["body_file"].as_str().unwrap()));
        let (got, want) = (normalized(&answer.body), normalized(&body));
        let first = got.lines().zip(want.lines()).find(|(g, w)| g != w);
        if u64::from(answer.status) != case["status"].as_u64().unwrap()
            || answer.values("content-type").first().map(|t| t.to_string()) != recorded_type
            || got != want
        {
            differing.push(format!(
                "{id}: {} {:?}, first line that differs (got, recorded): {first:?}",
                answer.status,
                answer.values("content-type"),
            ));
        }
    }
    assert!(differing.is_empty(), "{}", differing.join("\n\n"));
}
