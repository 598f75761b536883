//! kubecache passes `kubectl auth`'s reviews through unchanged: the review
//! cases of the versions corpus (`testdata/apiserver-golden/versions`,
//! group `version-auth`: `whoami`, `can-i list pods` allowed and not,
//! `can-i --list`, in JSON and protobuf) sent to kubecache in front of a
//! sim with the corpus's identities and RBAC (`Policy::edges`, and
//! kubecache's own service account) get the recorded status, `Content-Type`
//! and body byte for byte but the stamped times, as the sim alone does
//! (`loadtest/tests/it/kubectl_auth.rs`).

use crate::common;

use std::net::SocketAddr;

use common::{Setup, serve};
use kubecache_loadtest::sim::{Policy, SimConfig};
use kubecache_reflector::upstream::ApiResource;
use kubecache_testkit::auth_reviews;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_passes_through_kubecache_as_kube_apiserver_answered_it() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 0,
            configmaps: 0,
            policy: Some(Policy::edges().with_kubecache()),
            ..SimConfig::default()
        },
        resources: vec![ApiResource::pods()],
        auth: Some(common::matrix_auth()),
        ..Setup::default()
    })
    .await;
    let addr: SocketAddr = served
        .url
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("an address");
    let cases = auth_reviews::cases();
    assert_eq!(cases.len(), 10, "every review case of version-auth");
    let differing = auth_reviews::replay(addr, &cases).await;
    assert!(differing.is_empty(), "{differing:#?}");
}
