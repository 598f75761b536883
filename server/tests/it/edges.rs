//! kubecache against the edge-case corpus (`testdata/apiserver-golden/edges`;
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
//! One test a group; the cases kubecache answers otherwise are listed in
//! it, each with why: it fails when the set that differs changes, for
//! better or worse. (`loadtest/tests/it/edges.rs` holds the sim to the same
//! cases; `client_certificates.rs` replays the client-cert group over TLS.)

use crate::common;

use std::net::SocketAddr;

use common::Served;
use kubecache_loadtest::sim::SimConfig;
use kubecache_testkit::{edges, golden, replay};

/// kubecache in front of the corpus's sim, holding the objects its cases
/// name, and where it listens.
async fn served() -> (Served, SocketAddr) {
    common::serve_corpus(SimConfig::default().kube_version, golden::edge_objects()).await
}

/// Replays the cases of `group` (`count` of them) against kubecache: those
/// answered otherwise must be exactly `different`.
async fn replay(group: &str, count: usize, different: &[(&str, &str)]) {
    let (_served, addr) = served().await;
    let cases = edges::cases(&[group]);
    assert_eq!(
        cases.len(),
        count,
        "every case of {group} (none by certificate)"
    );
    let differing = edges::replay(addr, &cases).await;
    replay::assert_differ_exactly(&differing, different);
}

/// Issue 29's first two findings: reads from the cache ran as the caller,
/// not as whom it impersonated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_is_honoured_as_kube_apiserver_honours_it() {
    replay("impersonation", 49, &[]).await;
}

/// Issue 29's fourth finding: `Bearer  t`, a non-ASCII token, extra words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_header_is_read_as_kube_apiserver_reads_it() {
    let different = [(
        "ah-control-char",
        "hyper, not Go's net/http, refuses the header: its 400 has no body",
    )];
    replay("authorization-header", 18, &different).await;
}

/// Issue 29's fifth finding: authorization before routing, negotiation and
/// parameters; and the request edges (paths, methods, `watch=` values, bad
/// parameters, `Accept` variants, resourceNames, huge requests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_edges_are_authorized_first_and_answered_as_kube_apiserver_did() {
    let different = [
        (
            "req-request-line-100k-alice",
            "the http crate's URI holds at most 64 KiB: hyper answers 414",
        ),
        (
            "req-request-line-1100k-alice",
            "hyper's 431 has no body; Go's says 431 Request Header Fields Too Large",
        ),
    ];
    replay("request-edges", 62, &different).await;
}

/// Issue 39: kube-apiserver's `Warning` for `Bearer  t` on an answer
/// kubecache passes through, as on those it gives itself: the header goes
/// upstream as none (anonymous), so the API server does not warn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignored_authorization_header_is_warned_of_on_answers_passed_through() {
    let (_served, addr) = served().await;
    let recorded = golden::edge("ah-bearer-two-spaces");
    let mut case = recorded.clone();
    // Services are not cached: the sim's 403 comes back.
    case["path"] = "/api/v1/namespaces/payments-prod/services?limit=1".into();
    let answer = replay::exchange(addr, replay::request_bytes("edges", &case, addr)).await;
    let body = String::from_utf8_lossy(&answer.body);
    assert_eq!(answer.status, 403, "{body}");
    assert!(
        body.contains(r#"services is forbidden: User \"system:anonymous\""#),
        "{body}"
    );
    assert_eq!(answer.values("warning"), edges::warnings(&recorded));
}
