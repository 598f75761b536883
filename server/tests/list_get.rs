//! Lists and gets through kubecache equal the simulated API server's state.

mod common;

use common::{Setup, get, serve};
use kubecache_loadtest::sim::ids;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paginated_list_returns_every_pod_of_the_sim_once_in_key_order() {
    let served = serve(Setup::default()).await;
    let mut names = Vec::new();
    let mut token = String::new();
    let mut rv = None;
    loop {
        let (code, body) = get(
            &served.url,
            &format!("/api/v1/pods?limit=300&continue={token}"),
        )
        .await;
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        let page: Value = serde_json::from_slice(&body).unwrap();
        let page_rv = page["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(rv.get_or_insert(page_rv.clone()), &page_rv, "one snapshot");
        for item in page["items"].as_array().unwrap() {
            let meta = &item["metadata"];
            names.push(format!(
                "{}/{}",
                meta["namespace"].as_str().unwrap(),
                meta["name"].as_str().unwrap()
            ));
        }
        match page["metadata"]["continue"].as_str() {
            Some(next) => token = next.to_string(),
            None => break,
        }
    }
    let expected: Vec<String> = served
        .sim
        .state(ids::PODS)
        .iter()
        .map(|o| o.key.clone())
        .collect();
    assert_eq!(names, expected);
}
