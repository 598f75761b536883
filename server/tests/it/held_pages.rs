//! Paginated lists under another client's traffic: a client's list keeps
//! its snapshot however many lists another client starts, and the other
//! client's own oldest lists are the ones that go.

use crate::common;

use common::{Setup, get_as as list, names, serve};
use kubecache_loadtest::sim::SimConfig;
use serde_json::Value;

fn continue_token(list: &Value) -> String {
    list["metadata"]["continue"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_client_s_lists_never_evict_a_client_s_pagination() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 200,
            namespaces: 1,
            ..SimConfig::default()
        },
        ..Setup::default()
    })
    .await;
    let url = served.url.as_str();
    let (code, first) = list(url, "/api/v1/pods?limit=10", "patient").await;
    assert_eq!(code, 200);
    let rv = first["metadata"]["resourceVersion"].clone();

    // Forty lists of another client, each at a newer resourceVersion (a
    // consistent read after a write).
    let mut theirs = Vec::new();
    for _ in 0..40 {
        served.sim.create_pods(1).unwrap();
        let (code, page) = list(url, "/api/v1/pods?limit=1", "hasty").await;
        assert_eq!(code, 200);
        theirs.push((
            page["metadata"]["resourceVersion"].clone(),
            continue_token(&page),
        ));
    }
    let distinct: std::collections::BTreeSet<String> =
        theirs.iter().map(|(rv, _)| rv.to_string()).collect();
    assert_eq!(distinct.len(), 40, "forty snapshots were asked to be held");

    // The patient client's next page: same snapshot, right after its first.
    let path = format!("/api/v1/pods?limit=10&continue={}", continue_token(&first));
    let (code, next) = list(url, &path, "patient").await;
    assert_eq!(code, 200, "{next}");
    assert_eq!(next["metadata"]["resourceVersion"], rv);
    let (first, next) = (names(&first), names(&next));
    assert_eq!(next.len(), 10);
    assert!(first.last() < next.first(), "{first:?} then {next:?}");

    // The hasty client's own oldest lists are gone; its newest are held.
    let page = |token: &str| format!("/api/v1/pods?limit=1&continue={token}");
    let (code, expired) = list(url, &page(&theirs[0].1), "hasty").await;
    assert_eq!(code, 410, "{expired}");
    assert_eq!(expired["reason"], "Expired");
    let (code, _) = list(url, &page(&theirs[39].1), "hasty").await;
    assert_eq!(code, 200);
}
