//! The simulated API server answers like kube-apiserver (see
//! `shared/APISERVER-PROTOCOL.md`): every test starts a real server on
//! 127.0.0.1 and talks HTTP to it, over a socket or, where a test asserts
//! on (paused) time, to its router in process ([`serve`]).

use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use kubecache_loadtest::sim::{
    Fault, FaultSpec, FaultTarget, HistoryWindow, Policy, ServingCost, Sim, SimConfig, ids,
};
use kubecache_testkit::wait::until;
use kubecache_wire::protobuf;
use serde_json::{Value, json};
use tower::ServiceExt as _;

async fn sim(config: SimConfig) -> (String, Sim) {
    Sim::start(config).await.expect("sim starts")
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn get_json(url: &str) -> (u16, Value) {
    let response = client().get(url).send().await.expect("request");
    let code = response.status().as_u16();
    let body = response.bytes().await.expect("body");
    (
        code,
        serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&body))),
    )
}

/// Reads watch lines until the stream ends or `n` lines arrived.
async fn watch_lines(url: &str, n: usize, within: Duration) -> Vec<Value> {
    let response = client().get(url).send().await.expect("watch");
    assert_eq!(response.status(), 200, "watch {url}");
    read_lines(response.bytes_stream(), n, within).await
}

/// A GET of `path` for [`serve`].
fn get(path: &str) -> axum::http::Request<axum::body::Body> {
    axum::http::Request::get(path)
        .body(axum::body::Body::empty())
        .unwrap()
}

/// `request` answered by the sim's router `app` in process, not over a
/// socket: the paused clock then advances only when every task waits for a
/// timer, so times are the sim's exactly (over a socket it also advances
/// while bytes are in the kernel).
async fn serve(
    app: &axum::Router,
    request: axum::http::Request<axum::body::Body>,
) -> axum::response::Response {
    app.clone()
        .oneshot(request)
        .await
        .expect("the router answers")
}

/// [`get_json`] of `path`, in process.
async fn serve_json(app: &axum::Router, path: &str) -> (u16, Value) {
    let response = serve(app, get(path)).await;
    let code = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (
        code,
        serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&body))),
    )
}

/// [`watch_lines`] of `path`, in process.
async fn serve_watch_lines(
    app: &axum::Router,
    path: &str,
    n: usize,
    within: Duration,
) -> Vec<Value> {
    let response = serve(app, get(path)).await;
    assert_eq!(response.status(), 200, "watch {path}");
    read_lines(response.into_body().into_data_stream(), n, within).await
}

/// The watch lines of `stream` until it ends, `n` lines arrived or
/// `within` passed.
async fn read_lines<E>(
    stream: impl futures::Stream<Item = Result<bytes::Bytes, E>>,
    n: usize,
    within: Duration,
) -> Vec<Value> {
    let mut stream = std::pin::pin!(stream);
    let mut buf = Vec::new();
    let mut lines = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    while lines.len() < n {
        let Ok(next) = tokio::time::timeout_at(deadline, stream.next()).await else {
            break;
        };
        let Some(Ok(chunk)) = next else { break };
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            lines.push(serde_json::from_slice(&line).expect("a watch line is one JSON object"));
        }
    }
    lines
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .parse()
        .expect("numeric")
}

#[tokio::test(start_paused = true)]
async fn pages_of_one_list_share_a_snapshot_while_churn_runs() {
    let (url, sim) = sim(SimConfig {
        pods: 2_000,
        churn_per_sec: 400.0,
        ..SimConfig::default()
    })
    .await;
    let mut next = String::new();
    let mut snapshot = None;
    let mut keys = Vec::new();
    let mut pages = 0;
    loop {
        let (code, page) = get_json(&format!("{url}/api/v1/pods?limit=150{next}")).await;
        assert_eq!(code, 200);
        pages += 1;
        let page_rv = rv(&page);
        assert_eq!(
            *snapshot.get_or_insert(page_rv),
            page_rv,
            "every page carries the snapshot of page 1"
        );
        for item in page["items"].as_array().unwrap() {
            assert!(
                item.get("kind").is_none(),
                "list items of built-in kinds carry no kind"
            );
            keys.push(format!(
                "{}/{}",
                item["metadata"]["namespace"].as_str().unwrap(),
                item["metadata"]["name"].as_str().unwrap()
            ));
        }
        match page["metadata"]["continue"].as_str() {
            Some(token) => {
                let remaining = page["metadata"]["remainingItemCount"]
                    .as_u64()
                    .expect("remainingItemCount with continue");
                assert_eq!(
                    remaining as usize,
                    expected_total(&sim, page_rv) - keys.len()
                );
                next = format!("&continue={token}");
            }
            None => {
                assert!(page["metadata"].get("remainingItemCount").is_none());
                break;
            }
        }
        let now = sim.store().revision();
        until("churn writes between pages", || {
            sim.store().revision() > now
        })
        .await;
    }
    assert!(pages > 10);
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "items come in key order");
    let snapshot = snapshot.unwrap();
    assert!(
        sim.store().revision() > snapshot,
        "churn ran during the list"
    );
    let read = kubecache_loadtest::sim::store::ListRead {
        revision: snapshot,
        namespace: None,
        start: None,
        limit: 0,
        before: Some(0),
    };
    let expected: Vec<String> = sim
        .store()
        .list(ids::PODS, read, |_| true)
        .unwrap()
        .items
        .iter()
        .map(|o| o.key.clone())
        .collect();
    assert_eq!(
        keys, expected,
        "the pages together are the state at the snapshot"
    );
}

fn expected_total(sim: &Sim, revision: u64) -> usize {
    let read = kubecache_loadtest::sim::store::ListRead {
        revision,
        namespace: None,
        start: None,
        limit: 0,
        before: Some(0),
    };
    sim.store()
        .list(ids::PODS, read, |_| true)
        .unwrap()
        .items
        .len()
}

#[tokio::test(start_paused = true)]
async fn resource_version_zero_ignores_the_limit() {
    let (url, _sim) = sim(SimConfig {
        pods: 300,
        ..SimConfig::default()
    })
    .await;
    let (code, list) = get_json(&format!("{url}/api/v1/pods?limit=10&resourceVersion=0")).await;
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 300);
    assert!(list["metadata"].get("continue").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_compacted_exact_list_is_410_expired() {
    let (url, sim) = sim(SimConfig {
        pods: 20,
        ..SimConfig::default()
    })
    .await;
    let old = sim.store().revision();
    sim.create_pods(5).unwrap();
    sim.store().compact_at(sim.store().revision());
    for query in [
        format!("resourceVersion={old}&resourceVersionMatch=Exact&limit=5"),
        format!("resourceVersion={old}&limit=5"),
    ] {
        let (code, status) = get_json(&format!("{url}/api/v1/pods?{query}")).await;
        assert_eq!(code, 410);
        assert_eq!(
            status,
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The resourceVersion for the provided list is too old.","reason":"Expired","code":410})
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_expired_continue_token_gets_410_and_an_inconsistent_token_that_continues() {
    let (url, sim) = sim(SimConfig {
        pods: 50,
        ..SimConfig::default()
    })
    .await;
    let (_, first) = get_json(&format!("{url}/api/v1/pods?limit=20")).await;
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    sim.create_pods(3).unwrap();
    sim.store().compact_at(sim.store().revision());
    let (code, status) = get_json(&format!("{url}/api/v1/pods?limit=20&continue={token}")).await;
    assert_eq!(code, 410);
    assert_eq!(status["reason"], "Expired");
    assert!(status["message"].as_str().unwrap().starts_with(
        "The provided continue parameter is too old to display a consistent list result."
    ));
    let inconsistent = status["metadata"]["continue"].as_str().unwrap();
    let decoded: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(inconsistent)
            .expect("unpadded URL-safe base64, as kube-apiserver's"),
    )
    .unwrap();
    assert_eq!(decoded["rv"], -1);
    let (code, rest) = get_json(&format!(
        "{url}/api/v1/pods?limit=100&continue={inconsistent}"
    ))
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        rest["items"].as_array().unwrap().len(),
        53 - 20,
        "the rest at the current revision"
    );
}

#[tokio::test(start_paused = true)]
async fn the_expire_continue_fault_gives_the_same_410() {
    let (url, sim) = sim(SimConfig {
        pods: 30,
        ..SimConfig::default()
    })
    .await;
    sim.inject(FaultSpec {
        target: FaultTarget::Continue,
        fault: Fault::ExpireContinue,
        times: 1,
    });
    let (_, first) = get_json(&format!("{url}/api/v1/pods?limit=10")).await;
    let token = first["metadata"]["continue"].as_str().unwrap();
    let (code, status) = get_json(&format!("{url}/api/v1/pods?limit=10&continue={token}")).await;
    assert_eq!((code, status["reason"].as_str()), (410, Some("Expired")));
    let (code, _) = get_json(&format!("{url}/api/v1/pods?limit=10&continue={token}")).await;
    assert_eq!(code, 200, "the fault hit once");
}

#[tokio::test(start_paused = true)]
async fn a_watch_from_a_compacted_revision_gets_200_then_one_error_event() {
    let (url, sim) = sim(SimConfig {
        pods: 10,
        ..SimConfig::default()
    })
    .await;
    let old = sim.store().revision() - 1;
    sim.create_pods(2).unwrap();
    sim.store().compact_at(sim.store().revision());
    let compacted = sim.store().watch_horizon();
    let lines = watch_lines(
        &format!("{url}/api/v1/pods?watch=1&resourceVersion={old}"),
        10,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(
        lines.len(),
        1,
        "one event, then the stream closes: {lines:?}"
    );
    assert_eq!(
        lines[0],
        json!({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":format!("too old resource version: {old} ({compacted})"),"reason":"Expired","code":410}})
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_replays_every_event_after_its_revision_in_order() {
    let (url, sim) = sim(SimConfig {
        pods: 100,
        churn_per_sec: 500.0,
        ..SimConfig::default()
    })
    .await;
    let from = sim.store().revision();
    // Pacing the churn, not a wait: no socket is in use yet, so the paused
    // clock moves only by the churn's ticks and this sleep (about 250 writes).
    tokio::time::sleep(Duration::from_millis(500)).await;
    sim.set_churn(0.0);
    let (history, _) = sim
        .store()
        .events_after(ids::PODS, from, usize::MAX)
        .unwrap();
    assert!(history.len() > 50, "churn wrote events");
    let lines = watch_lines(
        &format!("{url}/api/v1/pods?watch=1&resourceVersion={from}"),
        history.len(),
        Duration::from_secs(10),
    )
    .await;
    let got: Vec<(String, u64)> = lines
        .iter()
        .map(|l| (l["type"].as_str().unwrap().to_string(), rv(&l["object"])))
        .collect();
    let want: Vec<(String, u64)> = history
        .iter()
        .map(|e| (e.kind.as_str().to_string(), e.revision()))
        .collect();
    assert_eq!(got, want);
    for (line, event) in lines.iter().zip(&history) {
        assert_eq!(
            serde_json::to_vec(&line["object"]).unwrap().len(),
            event.object.json().len()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_label_selector_watch_sees_objects_leave_and_enter_it() {
    let (url, sim) = sim(SimConfig::default()).await;
    let store = sim.store();
    let pod = json!({"metadata": {"name": "p", "namespace": "default", "labels": {"tier": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    store.create(ids::PODS, pod).unwrap();
    let from = store.revision();
    let patch = |tier: &str| {
        store
            .merge_patch(
                ids::PODS,
                "default",
                "p",
                &json!({"metadata": {"labels": {"tier": tier}}}),
            )
            .unwrap()
    };
    patch("db");
    patch("web");
    patch("web2");
    let lines = watch_lines(&format!("{url}/api/v1/namespaces/default/pods?watch=1&resourceVersion={from}&labelSelector=tier%3Dweb"), 3, Duration::from_secs(5)).await;
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["DELETED", "ADDED", "DELETED"]);
}

#[tokio::test(start_paused = true)]
async fn bookmarks_carry_the_kinds_empty_shape_and_come_before_the_timeout() {
    let (url, sim) = sim(SimConfig {
        pods: 5,
        bookmark_interval: Duration::from_millis(300),
        ..SimConfig::default()
    })
    .await;
    let now = sim.store().revision();
    let lines = watch_lines(&format!("{url}/api/v1/pods?watch=1&resourceVersion={now}&allowWatchBookmarks=true&timeoutSeconds=3"), 100, Duration::from_secs(10)).await;
    assert_eq!(lines.len(), 4, "periodic and final bookmarks: {lines:?}");
    for line in &lines {
        assert_eq!(
            line,
            &json!({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":now.to_string(),"creationTimestamp":null},"spec":{"containers":null},"status":{}}})
        );
    }
    let without = watch_lines(
        &format!("{url}/api/v1/pods?watch=1&resourceVersion={now}&timeoutSeconds=1"),
        100,
        Duration::from_secs(5),
    )
    .await;
    assert!(without.is_empty(), "no bookmarks unless asked");
}

/// The lines of a watch of `path`, in process, with the (paused) time each
/// arrived, counted from the request, and when the stream ended.
async fn timed_watch(app: &axum::Router, path: &str) -> (Vec<(Duration, Value)>, Duration) {
    let start = tokio::time::Instant::now();
    let response = serve(app, get(path)).await;
    assert_eq!(response.status(), 200, "watch {path}");
    let mut stream = response.into_body().into_data_stream();
    let mut lines = Vec::new();
    let mut buf = Vec::new();
    while let Some(Ok(chunk)) = stream.next().await {
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            lines.push((
                start.elapsed(),
                serde_json::from_slice(&line).expect("JSON"),
            ));
        }
    }
    (lines, start.elapsed())
}

/// Whether `got` is `want`, or at most 100 ms after it. In process
/// ([`timed_watch`]) the times come at `want` exactly; the 100 ms dates
/// from watches over a socket, when paused time moved on to the sim's next
/// timer while a chunk crossed loopback.
fn at(got: Duration, want_ms: u64) -> bool {
    let want = Duration::from_millis(want_ms);
    got >= want && got < want + Duration::from_millis(100)
}

#[tokio::test(start_paused = true)]
async fn bookmarks_come_as_the_api_servers_cacher_sends_them() {
    let (_, sim) = sim(SimConfig {
        pods: 5,
        ..SimConfig::default()
    })
    .await;
    let app = sim.router();
    let now = sim.store().revision();
    let watch = |timeout: u64| {
        format!(
            "/api/v1/pods?watch=1&resourceVersion={now}&allowWatchBookmarks=true&timeoutSeconds={timeout}"
        )
    };
    let (lines, ended) = timed_watch(&app, &watch(3)).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(at(lines[0].0, 1_000), "2 s before the deadline: {lines:?}");
    assert_eq!(lines[0].1["type"], "BOOKMARK");
    assert!(at(ended, 3_000), "{ended:?}");
    let (lines, ended) = timed_watch(&app, &watch(2)).await;
    assert!(
        lines.is_empty(),
        "none when 2 s before the deadline is now: {lines:?}"
    );
    assert!(at(ended, 2_000), "{ended:?}");

    let (_, sim) = self::sim(SimConfig {
        pods: 5,
        bookmark_interval: Duration::from_millis(700),
        ..SimConfig::default()
    })
    .await;
    let app = sim.router();
    let now = sim.store().revision();
    let (lines, ended) = timed_watch(
        &app,
        &format!(
            "/api/v1/pods?watch=1&resourceVersion={now}&allowWatchBookmarks=true&timeoutSeconds=4"
        ),
    )
    .await;
    let times: Vec<Duration> = lines.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        times.len(),
        3,
        "every interval, then 2 s before the deadline: {times:?}"
    );
    for (got, want) in times.iter().zip([700, 1_400, 2_000]) {
        assert!(at(*got, want), "{times:?}");
    }
    assert!(at(ended, 4_000), "{ended:?}");
}

#[tokio::test(start_paused = true)]
async fn reads_without_resource_version_wait_for_etcds_quorum_read_and_are_counted() {
    let latency = Duration::from_secs(5);
    let (_, sim) = sim(SimConfig {
        pods: 5,
        consistent_read_latency: latency,
        ..SimConfig::default()
    })
    .await;
    let app = sim.router();
    let pod = sim.state(ids::PODS)[0].clone();
    let pod_path = format!("/api/v1/namespaces/{}/pods/{}", pod.namespace, pod.name);
    let timed = async |path: String| {
        let start = tokio::time::Instant::now();
        let (code, _) = serve_json(&app, &path).await;
        assert_eq!(code, 200, "{path}");
        start.elapsed()
    };
    for consistent in [
        pod_path.clone(),
        format!("{pod_path}/status"),
        "/api/v1/pods".to_string(),
        "/api/v1/pods?limit=1".to_string(),
    ] {
        let took = timed(consistent.clone()).await;
        assert!(took >= latency, "{consistent}: {took:?}");
    }
    for from_cache in [
        format!("{pod_path}?resourceVersion=0"),
        "/api/v1/pods?resourceVersion=0&limit=1".to_string(),
    ] {
        let took = timed(from_cache.clone()).await;
        assert!(took < Duration::from_secs(1), "{from_cache}: {took:?}");
    }
    let now = sim.store().revision();
    let watch = format!("/api/v1/pods?watch=1&resourceVersion={now}&timeoutSeconds=1");
    assert!(
        serve_watch_lines(&app, &watch, 1, Duration::from_secs(2))
            .await
            .is_empty()
    );

    let pods = kubecache_loadtest::sim::Counts {
        consistent_lists: 2,
        consistent_gets: 2,
        limit_one_lists: 2,
        watches: 1,
        lists: 3,
        streaming_lists_changed_before_end: 0,
        lists_waiting_for_watch_cache: 0,
    };
    let counters = sim.counters();
    assert_eq!(counters["pods"], pods);
    assert_eq!(counters["configmaps"], Default::default());
    let (code, served) = serve_json(&app, "/sim/counters").await;
    assert_eq!(code, 200);
    assert_eq!(served, serde_json::to_value(&counters).unwrap());
    assert_eq!(
        served["pods"],
        json!({
            "consistentLists": 2, "consistentGets": 2, "limitOneLists": 2, "watches": 1, "lists": 3,
            "streamingListsChangedBeforeEnd": 0, "listsWaitingForWatchCache": 0
        })
    );
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_sends_every_object_then_the_initial_events_end_bookmark_and_counts_as_a_list()
 {
    let (url, sim) = sim(SimConfig {
        pods: 200,
        ..SimConfig::default()
    })
    .await;
    let at = sim.store().revision();
    let lines = watch_lines(
        &format!("{url}/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
        201,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(lines.len(), 201);
    assert_eq!(
        sim.counters()["pods"].lists,
        1,
        "a streaming list is a list"
    );
    assert!(lines[..200].iter().all(|l| l["type"] == "ADDED"));
    assert_eq!(lines[200]["type"], "BOOKMARK");
    assert_eq!(
        lines[200]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(rv(&lines[200]["object"]), at);
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_from_a_revision_not_reached_in_time_is_200_then_a_too_large_error_event()
{
    let (url, sim) = sim(SimConfig {
        pods: 20,
        ..SimConfig::default()
    })
    .await;
    let current = sim.store().revision();
    let ahead = current + 1000;
    let lines = watch_lines(
        &format!("{url}/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={ahead}"),
        2,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(lines.len(), 1, "one event, then the end: {lines:?}");
    assert_eq!(lines[0]["type"], "ERROR");
    let expected = kubecache_wire::Status::too_large_resource_version(ahead, current);
    assert_eq!(
        lines[0]["object"],
        serde_json::from_slice::<Value>(&expected.to_json()).unwrap()
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_from_a_revision_not_reached_yet_is_200_and_sends_the_events_after_it() {
    let (url, sim) = sim(SimConfig {
        pods: 20,
        ..SimConfig::default()
    })
    .await;
    let ahead = sim.store().revision() + 2;
    let response = client()
        .get(format!("{url}/api/v1/pods?watch=1&resourceVersion={ahead}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "answered before {ahead} exists");
    let pods = sim.state(ids::PODS);
    let patch = json!({"metadata": {"labels": {"ahead": "yes"}}});
    let mut written = Vec::new();
    for pod in pods.iter().take(3) {
        let object = sim
            .store()
            .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
            .unwrap();
        written.push(object.revision);
    }
    assert_eq!(written[1], ahead);
    let mut stream = response.bytes_stream();
    let mut line = Vec::new();
    while !line.contains(&b'\n') {
        line.extend_from_slice(&stream.next().await.unwrap().unwrap());
    }
    let end = line.iter().position(|b| *b == b'\n').unwrap();
    let first: Value = serde_json::from_slice(&line[..end]).unwrap();
    assert_eq!(
        rv(&first["object"]),
        written[2],
        "only what came after {ahead}"
    );
}

#[tokio::test(start_paused = true)]
async fn streaming_list_misuse_gets_the_api_servers_422s() {
    let (url, _sim) = sim(SimConfig::default()).await;
    let cases = [
        (
            "watch=1&sendInitialEvents=true",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=1",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"",
        ),
        (
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list]",
        ),
    ];
    for (query, message) in cases {
        let (code, status) = get_json(&format!("{url}/api/v1/pods?{query}")).await;
        assert_eq!(
            (code, status["reason"].as_str(), status["message"].as_str()),
            (422, Some("Invalid"), Some(message)),
            "{query}"
        );
    }
    let (url, _old) = sim(SimConfig {
        watch_list: false,
        ..SimConfig::default()
    })
    .await;
    let (code, status) = get_json(&format!("{url}/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")).await;
    assert_eq!(code, 422);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .ends_with("unless the WatchList feature gate is enabled")
    );
}

#[tokio::test(start_paused = true)]
async fn selectors_filter_lists_and_malformed_ones_are_400() {
    let (url, sim) = sim(SimConfig {
        pods: 500,
        nodes: 5,
        ..SimConfig::default()
    })
    .await;
    let state = sim.state(ids::PODS);
    let node = state[0]
        .field(
            &kubecache_loadtest::sim::RESOURCES[ids::PODS],
            "spec.nodeName",
        )
        .unwrap()
        .to_string();
    let (code, list) = get_json(&format!(
        "{url}/api/v1/pods?fieldSelector=spec.nodeName%3D{node}"
    ))
    .await;
    assert_eq!(code, 200);
    let want = state.iter().filter(|o| o.fields[0] == node).count();
    assert_eq!(list["items"].as_array().unwrap().len(), want);
    assert!(want > 0 && want < 500);
    let (label, value) = state[0].labels[0].clone();
    let (_, list) = get_json(&format!(
        "{url}/api/v1/pods?labelSelector={}",
        urlencode(&format!("{label}!={value}"))
    ))
    .await;
    let want = state
        .iter()
        .filter(|o| o.label(&label) != Some(value.as_str()))
        .count();
    assert_eq!(list["items"].as_array().unwrap().len(), want);
    for bad in [
        "labelSelector=a%20in%20(b",
        "labelSelector=%3D%3Dx",
        "fieldSelector=spec.foo%3Dx",
        "fieldSelector=nonsense",
    ] {
        let (code, status) = get_json(&format!("{url}/api/v1/pods?{bad}")).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (400, Some("BadRequest")),
            "{bad}: {status}"
        );
        assert!(!status["message"].as_str().unwrap().is_empty());
    }
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[tokio::test(start_paused = true)]
async fn protobuf_lists_carry_the_same_objects_as_json() {
    let (url, _sim) = sim(SimConfig {
        pods: 40,
        configmaps: 10,
        ..SimConfig::default()
    })
    .await;
    for path in [
        "/api/v1/pods?limit=25",
        "/api/v1/configmaps",
        "/api/v1/namespaces",
    ] {
        let (_, json_list) = get_json(&format!("{url}{path}")).await;
        let response = client()
            .get(format!("{url}{path}"))
            .header(
                "Accept",
                "application/vnd.kubernetes.protobuf, application/json",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.headers()["content-type"],
            "application/vnd.kubernetes.protobuf"
        );
        let body = response.bytes().await.unwrap();
        let unknown = protobuf::decode_unknown(&body).expect("k8s\\0 + runtime.Unknown");
        let ty = protobuf::message_type(unknown.api_version, unknown.kind)
            .expect("list kind has a type");
        let decoded: Value =
            serde_json::from_slice(&protobuf::proto_to_json(ty, unknown.raw).unwrap()).unwrap();
        let (got, want) = (semantic(&decoded["items"]), semantic(&json_list["items"]));
        assert!(
            got == want,
            "{path}: first difference at {}",
            first_difference(&got, &want, String::new())
        );
        assert_eq!(decoded["metadata"], json_list["metadata"], "{path}");
    }
}

/// Kubernetes makes no difference between a null field and an absent one;
/// protobuf has no nulls.
fn semantic(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), semantic(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(semantic).collect()),
        other => other.clone(),
    }
}

fn first_difference(a: &Value, b: &Value, at: String) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                if x.get(key) != y.get(key) {
                    return first_difference(
                        x.get(key).unwrap_or(&Value::Null),
                        y.get(key).unwrap_or(&Value::Null),
                        format!("{at}.{key}"),
                    );
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                if p != q {
                    return first_difference(p, q, format!("{at}[{i}]"));
                }
            }
        }
        _ => {}
    }
    format!("{at}: {a} != {b}")
}

#[tokio::test(start_paused = true)]
async fn custom_resources_have_no_protobuf_but_fall_back_to_json() {
    let (url, _sim) = sim(SimConfig {
        widgets: 3,
        ..SimConfig::default()
    })
    .await;
    let response = client()
        .get(format!("{url}/apis/example.com/v1/widgets"))
        .header("Accept", "application/vnd.kubernetes.protobuf")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 406);
    let body = response.bytes().await.unwrap();
    let unknown = protobuf::decode_unknown(&body).expect("a protobuf Status");
    assert_eq!(unknown.kind, "Status");
    let response = client()
        .get(format!("{url}/apis/example.com/v1/widgets"))
        .header(
            "Accept",
            "application/vnd.kubernetes.protobuf, application/json",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let list: Value = response.json().await.unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 3);
    assert_eq!(
        list["items"][0]["kind"], "Widget",
        "custom resource list items keep their type meta"
    );
}

#[tokio::test(start_paused = true)]
async fn a_protobuf_watch_is_length_framed_watch_events() {
    let (url, sim) = sim(SimConfig {
        pods: 3,
        ..SimConfig::default()
    })
    .await;
    let from = sim.store().revision();
    sim.create_pods(4).unwrap();
    let response = client()
        .get(format!(
            "{url}/api/v1/pods?watch=1&resourceVersion={from}&timeoutSeconds=1"
        ))
        .header("Accept", "application/vnd.kubernetes.protobuf;stream=watch")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let body = response.bytes().await.unwrap();
    let mut decoder = protobuf::WatchFrameDecoder::default();
    decoder.push(&body);
    let mut names = Vec::new();
    while let Some(event) = decoder.next_event().unwrap() {
        assert_eq!(event.event_type, "ADDED");
        let unknown = protobuf::decode_unknown(&event.object).unwrap();
        let ty = protobuf::message_type(unknown.api_version, unknown.kind).unwrap();
        let pod: Value =
            serde_json::from_slice(&protobuf::proto_to_json(ty, unknown.raw).unwrap()).unwrap();
        names.push(pod["metadata"]["name"].as_str().unwrap().to_string());
    }
    let state: Vec<String> = sim
        .store()
        .events_after(ids::PODS, from, 100)
        .unwrap()
        .0
        .iter()
        .map(|e| e.object.name.clone())
        .collect();
    assert_eq!(names, state);
}

#[tokio::test(start_paused = true)]
async fn writes_keep_uid_bump_generation_on_spec_only_and_check_preconditions() {
    let (url, _sim) = sim(SimConfig::default()).await;
    let c = client();
    let pods = format!("{url}/api/v1/namespaces/default/pods");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w"}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}});
    let created: Value = c
        .post(&pods)
        .json(&pod)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(created["metadata"]["generation"], 1);
    assert!(
        created["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36)
    );
    let again = c.post(&pods).json(&pod).send().await.unwrap();
    assert_eq!(again.status(), 409);
    let patch = |body: Value| {
        c.patch(format!("{pods}/w"))
            .header("Content-Type", "application/merge-patch+json")
            .body(body.to_string())
            .send()
    };
    let labelled: Value = patch(json!({"metadata": {"labels": {"a": "b"}}}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        labelled["metadata"]["generation"], 1,
        "metadata changes leave generation alone"
    );
    assert!(rv(&labelled) > rv(&created));
    let respec: Value = patch(json!({"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(respec["metadata"]["generation"], 2);
    assert_eq!(respec["metadata"]["uid"], created["metadata"]["uid"]);
    let mut stale = labelled.clone();
    stale["metadata"]["labels"]["a"] = json!("c");
    let conflict = c
        .put(format!("{pods}/w"))
        .json(&stale)
        .send()
        .await
        .unwrap();
    assert_eq!(conflict.status(), 409);
    let noop = c
        .put(format!("{pods}/w"))
        .json(&respec)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        rv(&noop),
        rv(&respec),
        "a write that changes nothing takes no revision"
    );
    let deleted = c.delete(format!("{pods}/w")).send().await.unwrap();
    assert_eq!(deleted.status(), 200);
    let (code, status) = get_json(&format!("{pods}/w")).await;
    assert_eq!(
        (code, status["message"].as_str()),
        (404, Some("pods \"w\" not found"))
    );
    let garbage = c
        .post(&pods)
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), 400);
    let nowhere = c
        .post(format!("{url}/api/v1/namespaces/nope/pods"))
        .json(&pod)
        .send()
        .await
        .unwrap();
    assert_eq!(nowhere.status(), 404);
}

#[tokio::test(start_paused = true)]
async fn injected_upstream_faults_look_like_the_real_ones() {
    let (url, sim) = sim(SimConfig {
        pods: 400,
        ..SimConfig::default()
    })
    .await;
    sim.inject(FaultSpec {
        target: FaultTarget::List,
        fault: Fault::TooManyRequests {
            retry_after_secs: 2,
        },
        times: 1,
    });
    let response = client()
        .get(format!("{url}/api/v1/pods"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "2");
    sim.inject(FaultSpec {
        target: FaultTarget::Any,
        fault: Fault::InternalError,
        times: 1,
    });
    assert_eq!(
        client()
            .get(format!("{url}/api/v1/pods"))
            .send()
            .await
            .unwrap()
            .status(),
        500
    );
    sim.inject(FaultSpec {
        target: FaultTarget::List,
        fault: Fault::TruncateBody,
        times: 1,
    });
    let truncated = client()
        .get(format!("{url}/api/v1/pods"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await;
    assert!(truncated.is_err(), "a truncated body fails to read");
    let from = sim.store().revision();
    sim.create_pods(10).unwrap();
    sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::DropWatch { after_events: 4 },
        times: 1,
    });
    let lines = watch_lines(
        &format!("{url}/api/v1/pods?watch=1&resourceVersion={from}"),
        10,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(lines.len(), 4, "the watch was cut after 4 events");
    sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::WatchGone,
        times: 1,
    });
    let lines = watch_lines(
        &format!("{url}/api/v1/pods?watch=1&resourceVersion={from}"),
        10,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(
        (lines.len(), lines[0]["object"]["code"].as_u64()),
        (1, Some(410))
    );
}

#[tokio::test(start_paused = true)]
async fn a_required_token_is_checked_like_the_api_server_does() {
    let (url, _sim) = sim(SimConfig {
        policy: Some(Policy::admin_only("s3cret")),
        ..SimConfig::default()
    })
    .await;
    let (code, status) = get_json(&format!("{url}/api/v1/pods")).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        "pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\" in API group \"\" at the cluster scope"
    );
    let bad = client()
        .get(format!("{url}/api/v1/pods"))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);
    let good = client()
        .get(format!("{url}/api/v1/pods"))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(good.status(), 200);
}

#[tokio::test(start_paused = true)]
async fn history_older_than_the_window_is_compacted_by_age() {
    let window = HistoryWindow {
        max_revisions: None,
        max_age: Some(Duration::from_millis(300)),
    };
    let (_, sim) = sim(SimConfig {
        pods: 10,
        history: window,
        ..SimConfig::default()
    })
    .await;
    let app = sim.router();
    let old = sim.store().revision();
    sim.create_pods(1).unwrap();
    let exact = format!("/api/v1/pods?resourceVersion={old}&resourceVersionMatch=Exact");
    // In process, the paused clock moves only by these sleeps and the sim's
    // timers: they place the reads between its compactions exactly.
    // Compaction runs every 100 ms: at 250 ms nothing is older than 300 ms.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(sim.store().compacted(), old, "still inside the window");
    assert_eq!(serve_json(&app, &exact).await.0, 200);
    // At 450 ms the compaction at 400 ms has forgotten what was written at 0.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        sim.store().compacted(),
        old + 1,
        "the newest revision older than the window stays readable"
    );
    assert_eq!(serve_json(&app, &exact).await.0, 410);
}

#[tokio::test(start_paused = true)]
async fn the_watch_cache_forgets_events_long_before_etcd_compacts() {
    let watch_cache = HistoryWindow {
        max_revisions: None,
        max_age: Some(Duration::from_millis(300)),
    };
    let (_, sim) = sim(SimConfig {
        pods: 10,
        watch_cache,
        ..SimConfig::default()
    })
    .await;
    let app = sim.router();
    let old = sim.store().revision();
    sim.create_pods(1).unwrap();
    let watch = format!("/api/v1/pods?watch=1&resourceVersion={old}");
    // In process, the paused clock moves only by these sleeps and the sim's
    // timers: they place the watches between its compactions exactly.
    // Compaction runs every 100 ms: at 250 ms nothing is older than 300 ms.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let lines = serve_watch_lines(&app, &watch, 1, Duration::from_secs(5)).await;
    assert_eq!(
        lines[0]["type"], "ADDED",
        "inside the window the watch replays: {lines:?}"
    );
    // At 450 ms the compaction at 400 ms has forgotten what was written at 0.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let lines = serve_watch_lines(&app, &watch, 5, Duration::from_secs(5)).await;
    assert_eq!(
        (lines.len(), lines[0]["type"].as_str()),
        (1, Some("ERROR")),
        "the watch from {old} is too old: {lines:?}"
    );
    let (code, _) = serve_json(
        &app,
        &format!("/api/v1/pods?resourceVersion={old}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(code, 200, "etcd still has revision {old}");
}

#[tokio::test(start_paused = true)]
async fn cut_watches_end_every_open_watch_without_a_clean_end() {
    let (url, sim) = sim(SimConfig {
        pods: 3,
        ..SimConfig::default()
    })
    .await;
    let response = client()
        .get(format!(
            "{url}/api/v1/pods?watch=1&resourceVersion={}",
            sim.store().revision()
        ))
        .send()
        .await
        .unwrap();
    until("the watch is open", || sim.open_watches() == 1).await;
    sim.cut_watches();
    let body = tokio::time::timeout(Duration::from_secs(5), response.bytes())
        .await
        .expect("the watch ends at once");
    assert!(
        body.is_err(),
        "the stream breaks rather than ending cleanly"
    );
}

#[tokio::test(start_paused = true)]
async fn post_sim_cut_watches_cuts_them_from_outside_without_credentials() {
    let (url, sim) = sim(SimConfig {
        pods: 3,
        policy: Some(Policy::admin_only("admin-token")),
        ..SimConfig::default()
    })
    .await;
    let response = client()
        .get(format!(
            "{url}/api/v1/pods?watch=1&resourceVersion={}",
            sim.store().revision()
        ))
        .bearer_auth("admin-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let cut = client()
        .post(format!("{url}/sim/cut-watches"))
        .send()
        .await
        .unwrap();
    assert_eq!(cut.status(), 204);
    let body = tokio::time::timeout(Duration::from_secs(5), response.bytes())
        .await
        .expect("the watch ends at once");
    assert!(
        body.is_err(),
        "the stream breaks rather than ending cleanly"
    );
}

#[tokio::test(start_paused = true)]
async fn with_a_serving_cost_each_body_takes_its_bytes_over_the_throughput_of_its_encoding_and_path()
 {
    const MB: f64 = 1e6;
    let cost = ServingCost {
        etcd_json: 4.0 * MB,
        etcd_protobuf: 8.0 * MB,
        cache_json: 16.0 * MB,
        cache_protobuf: 32.0 * MB,
        quorum_reads_per_sec: f64::INFINITY,
    };
    let (_, sim) = sim(SimConfig {
        pods: 400,
        serving_cost: Some(cost),
        ..SimConfig::default()
    })
    .await;
    // In process, not over a socket: the paused clock then advances only
    // when every task waits for a timer, so times are the model's exactly.
    let app = sim.router();
    for (query, accept, rate) in [
        ("limit=500", "application/json", cost.etcd_json),
        (
            "limit=500",
            "application/vnd.kubernetes.protobuf",
            cost.etcd_protobuf,
        ),
        ("resourceVersion=0", "application/json", cost.cache_json),
        (
            "resourceVersion=0",
            "application/vnd.kubernetes.protobuf",
            cost.cache_protobuf,
        ),
    ] {
        let request = axum::http::Request::get(format!("/api/v1/pods?{query}"))
            .header("Accept", accept)
            .body(axum::body::Body::empty())
            .unwrap();
        let started = tokio::time::Instant::now();
        let response = app.clone().oneshot(request).await.unwrap();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let took = started.elapsed().as_secs_f64();
        let cost = body.len() as f64 / rate;
        // Each chunk's sleep rounds up to tokio's 1 ms timer tick.
        let chunks = body.len().div_ceil(256 * 1024) as f64;
        assert!(
            took >= cost && took <= cost + chunks * 0.001,
            "{query} as {accept}: {} bytes in {took:.4} s (paused time), not the {cost:.4} s the cost gives",
            body.len()
        );
    }
    sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn with_a_serving_cost_a_list_of_one_object_named_in_its_namespace_is_served_as_a_get() {
    // One byte a second: any paced body takes seconds.
    let cost = ServingCost {
        etcd_json: 1.0,
        etcd_protobuf: 1.0,
        cache_json: 1.0,
        cache_protobuf: 1.0,
        quorum_reads_per_sec: f64::INFINITY,
    };
    let (_, sim) = sim(SimConfig {
        pods: 10,
        serving_cost: Some(cost),
        consistent_read_latency: Duration::ZERO,
        ..SimConfig::default()
    })
    .await;
    let pod = &sim.state(kubecache_loadtest::sim::ids::PODS)[0];
    let by_name = format!("fieldSelector=metadata.name%3D{}", pod.name);
    let app = sim.router();
    let took = async |path: String| {
        let request = axum::http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let started = tokio::time::Instant::now();
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await;
        let items = serde_json::from_slice::<Value>(&body.unwrap()).unwrap()["items"].clone();
        (started.elapsed(), items.as_array().unwrap().len())
    };
    // kube-apiserver reads it as one key (`MatchesSingle`), as a GET.
    let path = format!("/api/v1/namespaces/{}/pods?{by_name}", pod.namespace);
    assert_eq!(took(path).await, (Duration::ZERO, 1));
    // Across namespaces it reads a range: paced as every list.
    let (elapsed, items) = took(format!("/api/v1/pods?{by_name}")).await;
    assert_eq!(items, 1);
    assert!(elapsed >= Duration::from_secs(100), "{elapsed:?}");
    sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn with_a_serving_cost_consistent_reads_beyond_the_quorum_rate_queue_up() {
    let cost = ServingCost {
        quorum_reads_per_sec: 10.0,
        ..ServingCost::default()
    };
    let (_, sim) = sim(SimConfig {
        pods: 5,
        consistent_read_latency: Duration::ZERO,
        serving_cost: Some(cost),
        ..SimConfig::default()
    })
    .await;
    // In process, not over a socket: the paused clock then advances only
    // when every task waits for a timer, so times are the model's exactly.
    let app = sim.router();
    let pod = sim.state(ids::PODS)[0].clone();
    let path = format!("/api/v1/namespaces/{}/pods/{}", pod.namespace, pod.name);
    let reads = |query: &'static str| {
        let (app, path) = (app.clone(), path.clone());
        futures::future::join_all((0..20).map(move |_| {
            let request = axum::http::Request::get(format!("{path}{query}"))
                .body(axum::body::Body::empty())
                .unwrap();
            let app = app.clone();
            async move { app.oneshot(request).await.unwrap().status() }
        }))
    };
    let started = tokio::time::Instant::now();
    let codes = reads("?resourceVersion=0").await;
    assert!(codes.iter().all(|c| c.is_success()), "{codes:?}");
    assert_eq!(started.elapsed(), Duration::ZERO, "from the cache, at once");
    let started = tokio::time::Instant::now();
    let codes = reads("").await;
    assert!(codes.iter().all(|c| c.is_success()), "{codes:?}");
    // The 20th read takes the slot 19 intervals of 100 ms after the first.
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1_900) && took < Duration::from_millis(2_000),
        "20 consistent gets at 10/s took {took:?}"
    );
    sim.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn with_the_dispatch_timer_a_bookmark_comes_at_the_tick_of_the_second_it_is_due_in() {
    let (_, sim) = sim(SimConfig {
        pods: 3,
        bookmark_dispatch: Some(kubecache_loadtest::sim::BOOKMARK_DISPATCH),
        ..SimConfig::default()
    })
    .await;
    // In process: the paused clock is the sim's exactly.
    let app = sim.router();
    let revision = sim.store().revision();
    let watch = |timeout: u64| {
        let app = app.clone();
        async move {
            let request = axum::http::Request::get(format!(
                "/api/v1/pods?watch=1&resourceVersion={revision}&allowWatchBookmarks=true&timeoutSeconds={timeout}"
            ))
            .body(axum::body::Body::empty())
            .unwrap();
            let started = tokio::time::Instant::now();
            let body = app.oneshot(request).await.unwrap().into_body();
            let mut stream = body.into_data_stream();
            let mut arrived = Vec::new();
            while let Some(Ok(chunk)) = stream.next().await {
                for line in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                    let line: Value = serde_json::from_slice(line).unwrap();
                    arrived.push((started.elapsed(), line["type"].clone()));
                }
            }
            arrived
        }
    };
    // Half a second past a tick, a watch of 3 s is due a bookmark 1 s in,
    // at 1.5 s of the timer: it comes at the tick of that second, early,
    // and, still due before the deadline's 2 s lead, once more at the next
    // tick (as the recorded `watch/pods-meta.watch.json` ends with two).
    // The sleep is a place on the paused clock, in process: not a wait.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let arrived = watch(3).await;
    let bookmark = |ms| (Duration::from_millis(ms), json!("BOOKMARK"));
    assert_eq!(arrived, [bookmark(500), bookmark(1_500)]);
    sim.shutdown().await;
}
