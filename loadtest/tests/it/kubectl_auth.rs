//! The sim against the `kubectl auth` cases of the versions corpus
//! (`testdata/apiserver-golden/versions`, group `version-auth`):
//! `kubectl auth whoami`, `kubectl auth can-i list pods` (allowed and not)
//! and `kubectl auth can-i --list`, as kubectl sends them (JSON) and in
//! protobuf, sent to a sim with the corpus's identities and RBAC
//! ([`Policy::edges`]: the same server's), must get the recorded status,
//! `Content-Type` and body byte for byte but the stamped times
//! ([`auth_reviews`]).

use std::net::SocketAddr;

use kubecache_loadtest::sim::{Policy, Sim, SimConfig};
use kubecache_testkit::auth_reviews;

#[tokio::test]
async fn the_sim_answers_kubectl_auth_as_kube_apiserver_did_in_json_and_protobuf() {
    let (url, _sim) = Sim::start(SimConfig {
        pods: 0,
        configmaps: 0,
        policy: Some(Policy::edges()),
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let addr: SocketAddr = url
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("an address");
    let cases = auth_reviews::cases();
    assert_eq!(cases.len(), 10, "every review case of version-auth");
    let differing = auth_reviews::replay(addr, &cases).await;
    assert!(differing.is_empty(), "{differing:#?}");
}
