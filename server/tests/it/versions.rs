//! kubecache against the version-specific corpus
//! (`testdata/apiserver-golden/versions`; see its README): the cases of a
//! group are replayed in recording order to kubecache, in front of a sim
//! with the corpus's identities and RBAC (`Policy::edges`: admin, alice,
//! eve, and kubecache's own service account) holding namespace `golden-v`
//! as recorded after set-up (its 30 pods and 20 configmaps), caching pods
//! and config maps. How an answer is compared, and what is read loosely
//! (values a sim cannot reproduce), is `kubecache_testkit::versions`'s
//! module doc; protobuf bodies are read as JSON and the bytes of strings
//! that are not UTF-8.
//!
//! One test a group; the cases answered otherwise are listed in it, each
//! with why: it fails when the set that differs changes, for better or
//! worse. The stream groups (`watchlist`, `bookmark`) and `data` (the data
//! set itself, read to seed the sim) are not replayed: their answers are
//! timed streams, compared by the watch tests.

use crate::common;

use std::net::SocketAddr;

use common::Served;
use kubecache_testkit::{replay, versions};
use kubecache_wire::protobuf::{self, KubeVersion};

/// kubecache in front of the corpus's sim holding its data set, and where
/// it listens.
async fn served() -> (Served, SocketAddr) {
    common::serve_corpus(KubeVersion::new(28), versions::objects()).await
}

/// Replays the `count` cases of `group` against kubecache, those of
/// `verbatim` with their recorded continue tokens: those answered otherwise
/// must be exactly `different`. Protobuf bodies of successes are compared
/// too, read as JSON and the bytes of the strings that are not UTF-8
/// ([`read_protobuf`]).
async fn replay(group: &str, count: usize, verbatim: &[&str], different: &[(&str, &str)]) {
    let (_served, addr) = served().await;
    let cases = versions::cases(group);
    assert_eq!(cases.len(), count, "every case of {group}");
    let differing = versions::replay_reading_protobuf(addr, &cases, verbatim, read_protobuf).await;
    replay::assert_differ_exactly(&differing, different);
}

/// Issue 41's first section: continue tokens the API server would accept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_is_answered_as_kube_apiserver_1_28_answered_it() {
    // The expired token's snapshot is meant to be gone.
    let verbatim = ["continue-expired-410"];
    let different = [
        (
            "page-all-pods-limit500-page1",
            "the corpus holds golden-v's 30 pods, not the recorded cluster's 20,050: one page, no token",
        ),
        (
            "page-all-pods-limit500-page2",
            "its token (rv 52894) is the recorded cluster's, never this sim's: 410",
        ),
        (
            "page-all-pods-limit500-page3",
            "its token (rv 52894) is the recorded cluster's, never this sim's: 410",
        ),
        (
            "continue-cross-path",
            "its token is page-all-pods' (rv 52894), which this replay never had: 410",
        ),
    ];
    replay("pagination", 21, &verbatim, &different).await;
}

/// Issue 41's fourth section: `?pretty` and curl-like User-Agents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pretty_printing_is_kube_apiserver_s() {
    replay("pretty", 26, &[], &[]).await;
}

/// Issue 41's fourth section: `Accept: application/yaml`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_is_kube_apiserver_s() {
    let age = "the Age cell: the sim's objects were created at the replay, not minutes before";
    let different = [
        (
            "yaml-pod-list-limit2",
            "its continue token carries the sim's resourceVersion (loosened in JSON bodies only)",
        ),
        ("yaml-table-get", age),
        ("yaml-table-list", age),
        ("yaml-table-yaml-then-yaml", age),
        ("yaml-table-json-then-yaml", age),
    ];
    replay("yaml", 10, &[], &different).await;
}

/// Issue 41's third section: strings that are not UTF-8 (ConfigMaps
/// created over protobuf), kept as Go keeps them: their bytes in protobuf,
/// Go's `\ufffd` in JSON, U+FFFD in YAML.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_is_kept_as_go_keeps_it() {
    replay("invalid-utf8", 13, &[], &[]).await;
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

/// Issue 41's fifth section: the reviews `kubectl auth` sends, passed
/// through to the sim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_and_kubectl_auth_are_answered_as_kube_apiserver_answered_them() {
    let different = [
        (
            "version",
            "the sim's /version is its own (gitVersion v1.28.0-kubecache-sim, its build), not v1.28.4's",
        ),
        (
            "version-anonymous",
            "the sim's /version is its own (gitVersion v1.28.0-kubecache-sim, its build), not v1.28.4's",
        ),
    ];
    replay("version-auth", 12, &[], &different).await;
}
