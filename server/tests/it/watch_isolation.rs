//! No watcher can starve another: clients that never read are cut and their
//! connections closed, `timeoutSeconds` holds whatever the client does,
//! watchers that end leave the dispatcher at once, one client's watches are
//! bounded, and no `timeoutSeconds` makes the server fail.
//!
//! No wall-clock windows: every wait is for a condition, bounded only so
//! that a bug fails rather than hangs.

use crate::common;

use std::time::Duration;

use common::{Served, Setup, WatchLines, describe, resource_version, serve};
use kubecache_loadtest::sim::{Policy, SimConfig, ids};
use kubecache_server::ServeSettings;
use kubecache_server::auth::AuthSettings;
use kubecache_testkit::wait::{until, until_async};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PODS: &str = "/api/v1/pods";

fn pods(served: &Served) -> &kubecache_server::Cache {
    served.caches.iter().next().unwrap()
}

/// A watch of `path` on a socket with a small receive buffer, never read.
async fn never_read(served: &Served, path: &str) -> TcpStream {
    let authority = served.url.trim_start_matches("http://");
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(authority.parse().unwrap()).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

/// `rounds` patches of the first `n` pods, each with a 10 KB annotation:
/// megabytes for every watcher of all pods. Returns how many.
async fn big_patches(served: &Served, n: usize, rounds: usize) -> usize {
    let pods = served.sim.state(ids::PODS);
    let padding = "x".repeat(10 * 1024);
    for round in 0..rounds {
        for (i, pod) in pods.iter().take(n).enumerate() {
            let patch = json!({"metadata": {"annotations": {"pad": format!("{round}{padding}")}}});
            served
                .sim
                .store()
                .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
                .unwrap();
            if i % 50 == 49 {
                // Let the readers read: pacing the producer, not a wait. No
                // assertion depends on it: the readers' tests write at most
                // 600 events, within a watcher's 1,024-event queue.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    n.min(pods.len()) * rounds
}

/// Waits until kubecache's store has reached the sim's current revision.
async fn caught_up(served: &Served) {
    let target = served.sim.store().revision();
    pods(served)
        .reader
        .wait_for(target, Duration::from_secs(30))
        .await
        .expect("kubecache catches up with the API server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_that_never_read_are_all_cut_while_a_reader_gets_every_event_in_order() {
    let served = serve(Setup {
        write_stall: Duration::from_secs(2),
        ..Setup::default()
    })
    .await;
    let rv = resource_version(&served.url, PODS).await;
    let query = format!("{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=3600");
    const STALLED: usize = 150;
    let mut stalled = Vec::new();
    for _ in 0..STALLED {
        stalled.push(never_read(&served, &query).await);
    }
    until("every stalled watch is open", || {
        pods(&served).dispatched_watchers() == STALLED
    })
    .await;
    let reader = WatchLines::open(&served.url, &query).await;
    let reference = WatchLines::open(served.sim.url(), &query).await;
    until("the reader has joined", || {
        pods(&served).dispatched_watchers() == STALLED + 1
    })
    .await;
    let (pods_n, rounds) = (200, 3);
    let writes = pods_n * rounds;
    let reader = tokio::spawn(reader.events(writes));
    let reference = tokio::spawn(reference.events(writes));

    assert_eq!(big_patches(&served, pods_n, rounds).await, writes);
    caught_up(&served).await;
    let expected: Vec<String> = reference.await.unwrap().iter().map(describe).collect();
    let got: Vec<String> = reader.await.unwrap().iter().map(describe).collect();
    assert_eq!(expected.len(), writes);
    assert_eq!(got, expected, "the reader got every event in order");

    until("every stalled watcher is cut", || {
        pods(&served).watchers() == 0 && pods(&served).dispatched_watchers() == 0
    })
    .await;
    // And its connection closed: what was sent, then the end.
    for mut socket in stalled {
        let mut rest = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(60), socket.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "the server closed the connection");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_never_reads_still_ends_at_its_timeout() {
    let served = serve(Setup {
        // Only the timeout can end it.
        write_stall: Duration::from_secs(3600),
        ..Setup::default()
    })
    .await;
    let rv = resource_version(&served.url, PODS).await;
    let _socket = never_read(
        &served,
        &format!("{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=5"),
    )
    .await;
    until("the watch is open", || {
        pods(&served).dispatched_watchers() == 1
    })
    .await;
    // Far more than the socket's buffers: its writer waits on the client.
    big_patches(&served, 500, 3).await;
    until("the watch ended at its timeout", || {
        pods(&served).watchers() == 0 && pods(&served).dispatched_watchers() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_whose_clients_leave_leave_the_dispatcher_at_once() {
    let served = serve(Setup::default()).await;
    let rv = resource_version(&served.url, PODS).await;
    // A set-based selector no index serves, matching nothing: such a
    // watcher is offered no event, so only its leaving can remove it.
    let values: Vec<String> = (0..50).map(|i| format!("value-{i}")).collect();
    let nothing = format!(
        "{PODS}?watch=1&resourceVersion={rv}&labelSelector=absent%20in%20({})",
        values.join(",")
    );
    let mut dead = Vec::new();
    for _ in 0..100 {
        let watch = WatchLines::open(&served.url, &nothing).await;
        assert_eq!(watch.code, 200);
        dead.push(watch);
    }
    until("every selector watch has joined", || {
        pods(&served).dispatched_watchers() == 100
    })
    .await;
    drop(dead);
    until("the closed watches left the dispatcher", || {
        pods(&served).dispatched_watchers() == 0 && pods(&served).watchers() == 0
    })
    .await;

    let rv = resource_version(&served.url, PODS).await;
    let query = format!("{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=600");
    let writes = 2 * 300;
    let live = WatchLines::open(&served.url, &query).await;
    until("the live watcher has joined", || {
        pods(&served).dispatched_watchers() == 1
    })
    .await;
    let live = tokio::spawn(live.events(writes));
    let reference = tokio::spawn(
        WatchLines::open(served.sim.url(), &query)
            .await
            .events(writes),
    );
    assert_eq!(big_patches(&served, 300, 2).await, writes);
    caught_up(&served).await;
    let expected: Vec<String> = reference.await.unwrap().iter().map(describe).collect();
    let got: Vec<String> = live.await.unwrap().iter().map(describe).collect();
    assert_eq!(expected.len(), writes);
    assert_eq!(got, expected, "the live watcher got every event in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_timeout_seconds_gets_a_normal_watch_or_the_api_servers_answer() {
    let served = serve(Setup::default()).await;
    let rv = resource_version(&served.url, PODS).await;
    let pod = served.sim.state(ids::PODS)[0].clone();
    // The longest Go's time.Duration holds: a watch (capped at a year).
    let timeout = i64::MAX / 1_000_000_000;
    let mut watch = WatchLines::open(
        &served.url,
        &format!("{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds={timeout}"),
    )
    .await;
    assert_eq!(watch.code, 200);
    let patch = json!({"metadata": {"labels": {"timeout": "huge"}}});
    served
        .sim
        .store()
        .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
        .unwrap();
    let event = watch.next().await.expect("the watch goes on");
    assert_eq!(event["type"], "MODIFIED");
    // Beyond it, or not a number: the API server's 400.
    for bad in ["18446744073709551615", "9223372036854775808", "1.5"] {
        let (code, body) =
            common::get(&served.url, &format!("{PODS}?watch=1&timeoutSeconds={bad}")).await;
        assert_eq!(code, 400, "timeoutSeconds={bad}");
        let status: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["reason"], "BadRequest");
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .contains(&format!("strconv.ParseInt: parsing \"{bad}\"")),
            "{status}"
        );
    }
    // Negative, or so large that Go's seconds-to-nanoseconds wraps below
    // zero: a watch already over, as kube-apiserver's.
    for over in ["-1".to_string(), i64::MAX.to_string()] {
        let path = format!("{PODS}?watch=1&timeoutSeconds={over}");
        let watch = WatchLines::open(&served.url, &path).await;
        assert_eq!(watch.code, 200, "{path}");
        assert_eq!(watch.collect().await, Vec::<Value>::new(), "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_gets_its_watch_limit_then_429_while_another_is_unaffected() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 100,
            policy: Some(Policy::demo()),
            ..SimConfig::default()
        },
        settings: ServeSettings {
            watches_per_client: 3,
            ..ServeSettings::default()
        },
        auth: Some(AuthSettings::default()),
        ..Setup::default()
    })
    .await;
    let query = format!("{PODS}?watch=1&resourceVersion=0&timeoutSeconds=600");
    let mut admin = Vec::new();
    for _ in 0..3 {
        let watch = WatchLines::open_as(&served.url, &query, "admin-token").await;
        assert_eq!(watch.code, 200);
        admin.push(watch);
    }
    let request = http::Request::get(query.as_str())
        .header(http::header::AUTHORIZATION, "Bearer admin-token")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let refused = common::exchange(&served.url, request).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()[http::header::RETRY_AFTER], "1");
    let status: Value = serde_json::from_slice(refused.body()).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["details"]["retryAfterSeconds"], 1);
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("already has 3 open") && message.contains("maxWatchesPerClient"),
        "{message}"
    );

    let bob = WatchLines::open_as(&served.url, &query, "bob-token").await;
    assert_eq!(bob.code, 200, "another user is unaffected");

    drop(admin.pop());
    until_async("closing a watch frees its slot", async || {
        let watch = WatchLines::open_as(&served.url, &query, "admin-token").await;
        if watch.code != 200 {
            assert_eq!(watch.code, 429);
        }
        watch.code == 200
    })
    .await;
}
