//! What a client sees when it fails over to another replica: a watch
//! resumed from its last resourceVersion, and reads `NotOlderThan` it, on a
//! replica that is behind (it has not reached that resourceVersion yet).
//! A replica ahead serves it as any resume; one whose event log no longer
//! reaches back answers 410 (`watch.rs`,
//! `a_watch_replays_from_its_resource_version_and_one_too_old_gets_410`).

mod common;
use common::{Served, Setup, WatchLines, describe, get, serve};
use std::sync::Arc;
use std::time::Duration;

use kubecache_loadtest::sim::{Fault, FaultSpec, FaultTarget, ids};
use kubecache_server::ServeSettings;
use kubecache_wire::Status;
use serde_json::{Value, json};

const PODS: &str = "/api/v1/pods";

/// Holds the replica's store back: its upstream watch is cut and every
/// watch it opens again hangs until the sim's faults are cleared. Returns
/// once the new watch has reached the sim (the old stream has ended), so
/// no later write reaches the store until then.
async fn hold_back(served: &Served) {
    let watches = || served.sim.counters()["pods"].watches;
    let before = watches();
    served.sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::Hang,
        times: u32::MAX,
    });
    served.sim.cut_watches();
    while watches() == before {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Labels the first `n` pods, one write each; their resourceVersions.
fn label_pods(served: &Served, n: usize, value: &str) -> Vec<u64> {
    let patch = json!({"metadata": {"labels": {"failover": value}}});
    served
        .sim
        .state(ids::PODS)
        .iter()
        .take(n)
        .map(|pod| {
            let written = served
                .sim
                .store()
                .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
                .expect("no churn: the pod exists");
            written.revision
        })
        .collect()
}

fn store_revision(served: &Served) -> u64 {
    served
        .caches
        .by_name("pods")
        .unwrap()
        .reader
        .current_resource_version()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_replica_behind_a_resumed_watch_starts_at_once_and_gets_every_later_event_and_reads_wait_for_it()
 {
    let served = Arc::new(serve(Setup::default()).await);
    hold_back(&served).await;
    let held = store_revision(&served);
    let written = label_pods(&served, 10, "b");
    let (seen, last) = (written[4], written[9]);
    let pod = &served.sim.state(ids::PODS)[9];

    // The client saw up to `seen` on its old replica.
    let resumed = WatchLines::open(
        &served.url,
        &format!("{PODS}?watch=1&resourceVersion={seen}"),
    )
    .await;
    assert_eq!(resumed.code, 200, "answered while the replica is behind");
    let list = tokio::spawn({
        let served = served.clone();
        async move {
            let query = format!("resourceVersion={last}&resourceVersionMatch=NotOlderThan");
            get(&served.url, &format!("{PODS}?{query}")).await
        }
    });
    let one = tokio::spawn({
        let (served, path) = (
            served.clone(),
            format!(
                "/api/v1/namespaces/{}/pods/{}?resourceVersion={last}",
                pod.namespace, pod.name
            ),
        );
        async move { get(&served.url, &path).await }
    });
    assert_eq!(store_revision(&served), held, "still behind");
    assert!(held < seen);

    served.sim.clear_faults();
    let reference = WatchLines::open(
        served.sim.url(),
        &format!("{PODS}?watch=1&resourceVersion={seen}"),
    )
    .await
    .events(5)
    .await;
    let got: Vec<String> = resumed.events(5).await.iter().map(describe).collect();
    let want: Vec<String> = reference.iter().map(describe).collect();
    assert_eq!(got, want, "every event after the client's, once");

    let (code, body) = list.await.unwrap();
    assert_eq!(code, 200);
    let list: Value = serde_json::from_slice(&body).unwrap();
    let at: u64 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(at >= last, "the list is as of {at}, not older than {last}");
    let labelled = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["labels"]["failover"] == "b")
        .count();
    assert_eq!(labelled, 10);
    let (code, body) = one.await.unwrap();
    assert_eq!(code, 200);
    let object: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(object["metadata"]["resourceVersion"], last.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_does_not_reach_a_resource_version_within_the_read_wait_answers_as_the_api_server()
 {
    let served = serve(Setup {
        settings: ServeSettings {
            read_wait: Duration::from_millis(300),
            ..ServeSettings::default()
        },
        ..Setup::default()
    })
    .await;
    hold_back(&served).await;
    let held = store_revision(&served);
    let rv = label_pods(&served, 1, "late")[0];
    let expected: Value =
        serde_json::from_slice(&Status::too_large_resource_version(rv, held).to_json()).unwrap();

    let not_older = format!("{PODS}?resourceVersion={rv}&resourceVersionMatch=NotOlderThan");
    let (code, body) = get(&served.url, &not_older).await;
    assert_eq!(code, 504);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), expected);

    // A streaming list from there: 200, then the same Status as an ERROR
    // event (the cacher's `newErrWatcher`).
    let streaming = WatchLines::open(
        &served.url,
        &format!("{PODS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={rv}"),
    )
    .await;
    assert_eq!(streaming.code, 200);
    let lines = streaming.collect().await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "ERROR");
    assert_eq!(lines[0]["object"], expected);

    // A plain watch from there is no error: it waits for its events.
    let resumed =
        WatchLines::open(&served.url, &format!("{PODS}?watch=1&resourceVersion={rv}")).await;
    assert_eq!(resumed.code, 200);

    served.sim.clear_faults();
    let pods = &served.caches.by_name("pods").unwrap().reader;
    pods.wait_for(rv, Duration::from_secs(30)).await.unwrap();
    let (code, _) = get(&served.url, &not_older).await;
    assert_eq!(code, 200, "once caught up");
    let next = label_pods(&served, 1, "later")[0];
    let events = resumed.events(1).await;
    assert_eq!(events[0]["type"], "MODIFIED");
    assert_eq!(
        events[0]["object"]["metadata"]["resourceVersion"],
        next.to_string(),
        "the first event after {rv}, not the one at it"
    );
}
