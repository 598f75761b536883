//! A storm of streaming lists (issue 30, finding 5): large initial sends
//! queue for seats, every member gets its whole state then live events,
//! and everything else is answered meanwhile. Its own test binary: it
//! reads process-wide gauges.

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;

use common::{Setup, WatchLines, get, serve};
use kubecache_loadtest::sim::SimConfig;
use kubecache_loadtest::sim::resources::ids;
use kubecache_server::ServeSettings;
use kubecache_testkit::{scrape, wait};
use serde_json::json;
use tokio::sync::watch;

/// The value of `series` in kubecache's `/metrics` (0 when absent).
async fn metric(url: &str, series: &str) -> f64 {
    let (code, body) = get(url, "/metrics").await;
    assert_eq!(code, 200);
    scrape::value(&String::from_utf8_lossy(&body), series).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_storm_queues_for_seats_and_gets_are_answered_meanwhile() {
    const SEATS: usize = 2;
    const STORM: usize = 6;
    // Enough pods that a send does not fit in the sockets' buffers: a
    // member that does not read holds its seat (until, stalled a second,
    // it is taken back for a waiting member).
    const PODS: usize = 10_000;
    let served = serve(Setup {
        sim: SimConfig {
            pods: PODS,
            ..SimConfig::default()
        },
        settings: ServeSettings {
            initial_send_seats: SEATS,
            ..ServeSettings::default()
        },
        // No member is cut for not reading while the test looks.
        write_stall: std::time::Duration::from_secs(600),
        metrics_alone: true,
        ..Setup::default()
    })
    .await;
    let url = served.url.clone();
    let pods = served.sim.state(ids::PODS);
    let patched = pods[0].clone();

    // Each member opens its streaming list, reads nothing until `go`, then
    // reads its initial events to their end, says so, and reads on until
    // the patched pod's change.
    let (go, gone) = watch::channel(false);
    let (ended, ends) = watch::channel(0usize);
    let ended = Arc::new(ended);
    let path = "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=600";
    let members: Vec<_> = (0..STORM)
        .map(|_| {
            let (url, mut gone, ended) = (url.clone(), gone.clone(), ended.clone());
            let (namespace, name) = (patched.namespace.clone(), patched.name.clone());
            tokio::spawn(async move {
                let mut watch = WatchLines::open(&url, path).await;
                assert_eq!(watch.code, 200);
                gone.wait_for(|go| *go).await.unwrap();
                let mut names = HashSet::new();
                loop {
                    let line = watch.next().await.expect("the stream goes on");
                    match line["type"].as_str().unwrap() {
                        "ADDED" => {
                            let meta = &line["object"]["metadata"];
                            names.insert(format!("{}/{}", meta["namespace"], meta["name"]));
                        }
                        "BOOKMARK" => {
                            let annotations = &line["object"]["metadata"]["annotations"];
                            if annotations["k8s.io/initial-events-end"] == "true" {
                                break;
                            }
                        }
                        other => panic!("{other} among the initial events"),
                    }
                }
                ended.send_modify(|n| *n += 1);
                loop {
                    let line = watch.next().await.expect("the stream goes on");
                    let meta = &line["object"]["metadata"];
                    if line["type"] == "MODIFIED"
                        && meta["namespace"] == namespace
                        && meta["name"] == name
                    {
                        return names.len();
                    }
                }
            })
        })
        .collect();

    // Two members are seated, blocked on clients that do not read; the
    // others queue (a stalled member whose seat is taken back queues
    // again).
    wait::until_async("the seats taken and the rest queued", async || {
        metric(&url, "kubecache_initial_send_seats_in_use").await == SEATS as f64
            && metric(&url, "kubecache_initial_send_queue").await == (STORM - SEATS) as f64
    })
    .await;
    // A GET in the middle of the storm is answered.
    let (code, body) = get(
        &url,
        &format!(
            "/api/v1/namespaces/{}/pods/{}",
            patched.namespace, patched.name
        ),
    )
    .await;
    assert_eq!(code, 200);
    let pod: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(pod["metadata"]["name"], patched.name.as_str());
    assert!(
        metric(&url, "kubecache_initial_send_seats_in_use").await <= SEATS as f64,
        "never more than the seats"
    );

    // Once they read, every member gets every pod, then live events.
    go.send_replace(true);
    let mut ends = ends;
    wait::within(
        "every member's initial events",
        ends.wait_for(|n| *n == STORM),
    )
    .await
    .unwrap();
    let labels = json!({"metadata": {"labels": {"storm": "over"}}});
    served
        .sim
        .store()
        .merge_patch(ids::PODS, &patched.namespace, &patched.name, &labels)
        .unwrap();
    for member in members {
        let names = wait::within("a member's live event", member).await.unwrap();
        assert_eq!(names, PODS);
    }
    assert_eq!(
        metric(&url, "kubecache_initial_send_seats_in_use").await,
        0.0
    );
    assert_eq!(metric(&url, "kubecache_initial_send_queue").await, 0.0);
    assert!(
        metric(&url, "kubecache_initial_send_wait_seconds_count").await >= STORM as f64,
        "every member seated"
    );
}

/// Issue 43, finding 2: with one seat and a storm of streaming lists
/// queued behind a member that holds it, a tenant's large list is seated
/// first: it takes the seat of the storm's (larger) send and is answered
/// while the storm's members still wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_list_is_seated_before_a_storms_queued_sends() {
    const STORM: usize = 6;
    const PODS: usize = 10_000;
    let served = serve(Setup {
        sim: SimConfig {
            pods: PODS,
            ..SimConfig::default()
        },
        settings: ServeSettings {
            initial_send_seats: 1,
            ..ServeSettings::default()
        },
        write_stall: std::time::Duration::from_secs(600),
        metrics_alone: true,
        ..Setup::default()
    })
    .await;
    let url = served.url.clone();
    // The storm's members open their streaming lists and read nothing.
    let path = "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=600";
    let storm: Vec<_> = (0..STORM)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let watch = WatchLines::open(&url, path).await;
                std::future::pending::<()>().await;
                drop(watch);
            })
        })
        .collect();
    wait::until_async("one member seated, the rest queued", async || {
        metric(&url, "kubecache_initial_send_seats_in_use").await == 1.0
            && metric(&url, "kubecache_initial_send_queue").await == (STORM - 1) as f64
    })
    .await;
    // A list of 1,600 pods (a consistent read of a page).
    let (code, body) = get(&url, "/api/v1/pods?limit=1600").await;
    assert_eq!(code, 200);
    let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 1600);
    assert!(
        metric(&url, "kubecache_initial_send_queue").await > 0.0,
        "answered while the storm still waits"
    );
    assert!(metric(&url, "kubecache_initial_send_seats_preempted_total").await >= 1.0);
    for member in storm {
        member.abort();
    }
}
