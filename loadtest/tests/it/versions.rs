//! The simulated API server against the version-specific corpus
//! (`testdata/apiserver-golden/versions`, see its README): the cases of a
//! group are replayed in recording order to a sim claiming the recorded
//! server's version (1.28), with the corpus's identities and RBAC
//! ([`Policy::edges`]) and holding namespace `golden-v` as recorded after
//! set-up, and compared as `kubecache_testkit::versions` compares (values a
//! sim cannot reproduce read loosely; protobuf bodies read as JSON and the
//! bytes of strings that are not UTF-8). kubecache is held to the same cases
//! in front of it (`server/tests/it/versions.rs`).
//!
//! One test a group the sim answers itself; the cases answered otherwise
//! are listed in it, each with why: it fails when the set that differs
//! changes, for better or worse.

use std::net::SocketAddr;

use kubecache_loadtest::sim::{Policy, Sim, SimConfig, ids};
use kubecache_testkit::{replay, versions};
use kubecache_wire::protobuf::{self, KubeVersion};

/// Why the sim's `/version` differs.
const OWN_VERSION: &str =
    "the sim's /version is its own (gitVersion v1.28.0-kubecache-sim, its build), not v1.28.4's";

/// Why a Table case differs.
const NO_TABLE: &str = "the sim serves no Table";

/// Replays the `count` cases of `group` against the sim: those answered
/// otherwise must be exactly `different`. Protobuf bodies of successes are
/// compared too, read as JSON and the bytes of the strings that are not
/// UTF-8 ([`read_protobuf`]).
async fn replay(group: &str, count: usize, different: &[(&str, &str)]) {
    let (url, sim) = Sim::start(SimConfig {
        pods: 0,
        configmaps: 0,
        policy: Some(Policy::edges()),
        kube_version: KubeVersion::new(28),
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let (pods, configmaps) = versions::objects();
    sim.seed(ids::PODS, pods).expect("pods seeded");
    sim.seed(ids::CONFIGMAPS, configmaps)
        .expect("configmaps seeded");
    let addr: SocketAddr = url
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("an address");
    let cases = versions::cases(group);
    assert_eq!(cases.len(), count, "every case of {group}");
    let differing = versions::replay_reading_protobuf(addr, &cases, &[], read_protobuf).await;
    replay::assert_differ_exactly(&differing, different);
}

/// A protobuf body as JSON and the bytes of its strings that are not UTF-8.
fn read_protobuf(body: &[u8]) -> Option<versions::ReadProtobuf> {
    let unknown = protobuf::decode_unknown(body).ok()?;
    let (json, strings) = unknown.to_json_with_strings()?.ok()?;
    let strings = strings.iter().flat_map(|s| s.iter()).map(|s| {
        let what = if s.is_key() { "key" } else { "value" };
        (format!("{what} {}", s.pointer()), s.bytes().to_vec())
    });
    Some(versions::ReadProtobuf {
        json,
        strings: strings.collect(),
    })
}

/// Strings that are not UTF-8, in ConfigMaps created over protobuf (issue
/// 41, section 3): their bytes in protobuf, Go's `\ufffd` in JSON, U+FFFD
/// in YAML.
#[tokio::test]
async fn the_sim_keeps_strings_that_are_not_utf8_as_go_keeps_them() {
    replay("invalid-utf8", 13, &[]).await;
}

/// `?pretty` and curl-like User-Agents (issue 41, section 4).
#[tokio::test]
async fn the_sim_pretty_prints_as_kube_apiserver_does() {
    replay("pretty", 26, &[]).await;
}

/// `Accept: application/yaml` (issue 41, section 4).
#[tokio::test]
async fn the_sim_writes_yaml_as_kube_apiserver_does() {
    let different = [
        (
            "yaml-pod-list-limit2",
            "its continue token carries the sim's resourceVersion (loosened in JSON bodies only)",
        ),
        ("yaml-table-get", NO_TABLE),
        ("yaml-table-list", NO_TABLE),
        ("yaml-table-yaml-then-yaml", NO_TABLE),
        ("yaml-table-json-then-yaml", NO_TABLE),
    ];
    replay("yaml", 10, &different).await;
}

/// `/version` and the reviews `kubectl auth` sends (issue 41, section 5):
/// JSON as kubectl sends them, and their protobuf twins.
#[tokio::test]
async fn the_sim_answers_kubectl_auth_as_kube_apiserver_did() {
    let different = [("version", OWN_VERSION), ("version-anonymous", OWN_VERSION)];
    replay("version-auth", 12, &different).await;
}
