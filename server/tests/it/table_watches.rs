//! Table watches (`kubectl get -w`) by the hundred (issue 30, finding 4):
//! each event's row is rendered once and shared, initial rows off the
//! async workers.

use crate::common;

use common::{Setup, WatchLines, get, resource_version, serve};
use kubecache_loadtest::sim::resources::ids;
use kubecache_testkit::{scrape, wait};
use serde_json::json;

const PODS: &str = "/api/v1/pods";

/// What `kubectl get pods -w` asks for.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// The value of `series` in kubecache's `/metrics` (0 when absent).
async fn metric(url: &str, series: &str) -> f64 {
    let (code, body) = get(url, "/metrics").await;
    assert_eq!(code, 200);
    scrape::value(&String::from_utf8_lossy(&body), series).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_table_watchers_share_one_rendered_row_per_event() {
    let served = serve(Setup {
        metrics_alone: true,
        ..Setup::default()
    })
    .await;
    let url = served.url.as_str();
    let rv = resource_version(url, PODS).await;
    let path = format!("{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=600");
    let mut watches = Vec::new();
    for _ in 0..100 {
        let watch = WatchLines::open_accepting(url, &path, TABLE).await;
        assert_eq!(watch.code, 200);
        watches.push(watch);
    }
    wait::until_async("every Table watcher dispatched", async || {
        metric(url, r#"kubecache_watchers_dispatched{resource="pods"}"#).await == 100.0
    })
    .await;
    let rendered = metric(url, "kubecache_table_rows_rendered_total").await;

    let pod = &served.sim.state(ids::PODS)[0];
    let labels = json!({"metadata": {"labels": {"storm": "one"}}});
    served
        .sim
        .store()
        .merge_patch(ids::PODS, &pod.namespace, &pod.name, &labels)
        .unwrap();
    let mut lines = Vec::new();
    for watch in &mut watches {
        lines.push(
            wait::within("the event's line", watch.next_line())
                .await
                .unwrap(),
        );
    }

    // Every watcher got the same bytes: the first line of its watch, with
    // the columns, one row of the patched pod.
    assert!(lines.iter().all(|line| *line == lines[0]));
    let line: serde_json::Value = serde_json::from_slice(&lines[0]).unwrap();
    assert_eq!(line["type"], "MODIFIED");
    let table = &line["object"];
    assert_eq!(table["kind"], "Table");
    assert!(table["columnDefinitions"].as_array().unwrap().len() > 2);
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["cells"][0], pod.name.as_str());
    assert_eq!(rows[0]["object"]["metadata"]["labels"]["storm"], "one");
    // Rendered once, not once per watcher.
    let now = metric(url, "kubecache_table_rows_rendered_total").await;
    assert_eq!(now - rendered, 1.0);

    // A Table watch from the current state renders its 1,000 initial rows
    // off the async workers.
    let offloaded = metric(url, "kubecache_offloaded_requests_total").await;
    let path = format!("{PODS}?watch=1&resourceVersion=0&timeoutSeconds=600");
    let mut watch = WatchLines::open_accepting(url, &path, TABLE).await;
    for _ in 0..1000 {
        let line = wait::within("an initial row", watch.next()).await.unwrap();
        assert_eq!(line["type"], "ADDED");
    }
    let now = metric(url, "kubecache_offloaded_requests_total").await;
    assert_eq!(now - offloaded, 1.0);
}
