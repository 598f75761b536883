//! Table watches (`kubectl get -w`) by the hundred (issue 30, finding 4):
//! each event's row is rendered once and shared, initial rows as they are
//! written; and never-reading ones (issue 43, finding 1).

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Setup, WatchLines, get, resource_version, serve};
use kubecache_loadtest::sim::SimConfig;
use kubecache_loadtest::sim::resources::ids;
use kubecache_server::ServeSettings;
use kubecache_testkit::{scrape, wait};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

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
    // as they are written, a chunk at a time: none ahead, nothing offloaded.
    let offloaded = metric(url, "kubecache_offloaded_requests_total").await;
    let path = format!("{PODS}?watch=1&resourceVersion=0&timeoutSeconds=600");
    let mut watch = WatchLines::open_accepting(url, &path, TABLE).await;
    for _ in 0..1000 {
        let line = wait::within("an initial row", watch.next()).await.unwrap();
        assert_eq!(line["type"], "ADDED");
    }
    let now = metric(url, "kubecache_offloaded_requests_total").await;
    assert_eq!(now - offloaded, 0.0);
}

/// Issue 43, finding 1: Table watches of every pod from resourceVersion 0
/// that never read, on small receive buffers. Each has rows rendered only
/// as its connection takes them, never its whole table ahead; and every
/// one is answered and cut: seated in turn (a stalled one's seat goes to
/// the next), then closed at the write-stall limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_read_table_watches_are_rendered_no_further_than_read_and_cut() {
    const POD_COUNT: usize = 10_000;
    const WATCHERS: usize = 8;
    let served = serve(Setup {
        sim: SimConfig {
            pods: POD_COUNT,
            ..SimConfig::default()
        },
        settings: ServeSettings {
            initial_send_seats: 1,
            ..ServeSettings::default()
        },
        write_stall: Duration::from_secs(3),
        metrics_alone: true,
        ..Setup::default()
    })
    .await;
    let url = served.url.as_str();
    let rendered = metric(url, "kubecache_table_rows_rendered_total").await;
    let address: SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let request = format!(
        "GET {PODS}?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: {address}\r\nAccept: {TABLE}\r\n\r\n"
    );
    let mut unread = Vec::new();
    for _ in 0..WATCHERS {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket.connect(address).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        unread.push(stream);
    }
    // Every watcher seated in turn and cut; all the while, at most a few
    // megabytes of rows (what the sockets' and hyper's buffers take) per
    // watcher, not the table of every pod.
    let bound = (WATCHERS * POD_COUNT / 2) as f64;
    let mut most_unsent: f64 = 0.0;
    wait::until_async("every never-reading watcher cut", async || {
        let rows = metric(url, "kubecache_table_rows_rendered_total").await - rendered;
        assert!(
            rows < bound,
            "{rows} rows rendered for {WATCHERS} watchers that read nothing"
        );
        most_unsent = most_unsent.max(metric(url, "kubecache_watch_unsent_bytes").await);
        let seated = metric(url, "kubecache_initial_send_wait_seconds_count").await;
        let refused = metric(
            url,
            r#"kubecache_initial_send_rejected_total{reason="queue_wait"}"#,
        )
        .await;
        seated + refused >= WATCHERS as f64
            && metric(url, "kubecache_initial_send_queue").await == 0.0
            && metric(url, "kubecache_initial_send_seats_in_use").await == 0.0
            && metric(url, r#"kubecache_watchers{resource="pods"}"#).await == 0.0
    })
    .await;
    assert!(
        most_unsent <= (WATCHERS * 128 * 1024) as f64,
        "at most a chunk made and not taken per watch: {most_unsent}"
    );
    // Each was answered (200, or 429 if it waited 15 s for its seat) and
    // then closed.
    for mut stream in unread {
        let mut answer = Vec::new();
        let read = wait::within("the end of a cut watch", stream.read_to_end(&mut answer)).await;
        assert!(read.is_ok() || !answer.is_empty());
        let head = String::from_utf8_lossy(&answer[..answer.len().min(12)]).into_owned();
        assert!(head == "HTTP/1.1 200" || head == "HTTP/1.1 429", "{head:?}");
    }
}
