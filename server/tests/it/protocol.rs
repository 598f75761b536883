//! The corners of the protocol where a careless client meets kube-apiserver's
//! exact behaviour: each answered by kubecache as the simulated API server
//! (and the real one, see the golden corpus) answers it.

use crate::common;

use common::{Setup, WatchLines, describe, exchange, get, resource_version, serve};
use kubecache_loadtest::sim::ids;
use kubecache_testkit::golden::{self, gunzip};
use serde_json::{Value, json};

const PODS: &str = "/api/v1/pods";

/// GET `path` from `url` with `headers`: the whole response.
async fn get_with(url: &str, path: &str, headers: &[(&str, &str)]) -> http::Response<bytes::Bytes> {
    let mut request = http::Request::get(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    exchange(
        url,
        request
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap(),
    )
    .await
}

/// Relabels the `n` first pods of the sim, one write each.
fn relabel(served: &common::Served, n: usize, value: &str) {
    for pod in served.sim.state(ids::PODS).iter().take(n) {
        let patch = json!({"metadata": {"labels": {"protocol-test": value}}});
        served
            .sim
            .store()
            .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
            .unwrap();
    }
}

/// The events (bookmarks left out) of every line.
fn described(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|line| line["type"] != "BOOKMARK")
        .map(describe)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_with_timeout_seconds_0_is_open_as_with_no_timeout() {
    let served = serve(Setup::default()).await;
    let rv = resource_version(&served.url, PODS).await;
    let path = format!("{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=0");
    let reference = WatchLines::open(served.sim.url(), &path).await;
    let watch = WatchLines::open(&served.url, &path).await;
    assert_eq!((watch.code, reference.code), (200, 200));
    relabel(&served, 3, "a");
    // A watch ended at once would have no event to give.
    let want: Vec<String> = reference.events(3).await.iter().map(describe).collect();
    let got: Vec<String> = watch.events(3).await.iter().map(describe).collect();
    assert_eq!(want.len(), 3);
    assert_eq!(got, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_resource_version_newer_than_the_cache_is_200_and_waits_for_it() {
    let served = serve(Setup::default()).await;
    let ahead = served.sim.store().revision() + 3;
    let path =
        format!("{PODS}?watch=1&resourceVersion={ahead}&allowWatchBookmarks=true&timeoutSeconds=3");
    let reference = WatchLines::open(served.sim.url(), &path).await;
    // Answered before the cache (or the API server) reaches `ahead`: no
    // write has been made yet.
    let watch = WatchLines::open(&served.url, &path).await;
    assert_eq!((watch.code, reference.code), (200, 200));
    relabel(&served, 6, "b");
    let (want, got) = tokio::join!(reference.collect(), watch.collect());
    // The writes after `ahead` only, in order.
    assert_eq!(described(&want).len(), 3, "{want:?}");
    assert_eq!(described(&got), described(&want));
    for bookmark in got.iter().filter(|line| line["type"] == "BOOKMARK") {
        let at: u64 = bookmark["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(at >= ahead, "a bookmark below the watch's start: {at}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_segments_are_percent_decoded() {
    let served = serve(Setup::default()).await;
    let pod = served.sim.state(ids::PODS)[5].clone();
    let encode = |segment: &str| segment.replace('-', "%2D");
    let (ns, name) = (encode(&pod.namespace), encode(&pod.name));
    assert_ne!(ns, pod.namespace, "a namespace with a dash");
    for (plain, encoded) in [
        (
            format!("/api/v1/namespaces/{}/pods", pod.namespace),
            format!("/api/v1/namespaces/{ns}/pods"),
        ),
        (
            format!("/api/v1/namespaces/{}/pods/{}", pod.namespace, pod.name),
            format!("/api/v1/namespaces/{ns}/pods/{name}"),
        ),
    ] {
        let (code, want) = get(&served.url, &plain).await;
        assert_eq!(code, 200);
        let (code, got) = get(&served.url, &encoded).await;
        assert_eq!(code, 200, "{encoded}");
        assert_eq!(got, want, "{encoded}");
        let (code, sim) = get(served.sim.url(), &encoded).await;
        assert_eq!(code, 200, "the sim: {encoded}");
        let names = |body: &[u8]| {
            let value: Value = serde_json::from_slice(body).unwrap();
            match value["items"].as_array() {
                Some(items) => items
                    .iter()
                    .map(|i| i["metadata"]["name"].clone())
                    .collect(),
                None => vec![value["metadata"]["name"].clone()],
            }
        };
        assert_eq!(names(&got), names(&sim), "{encoded}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_query_parameters_take_the_first_value() {
    let served = serve(Setup::default()).await;
    let state = served.sim.state(ids::PODS);
    let first = &state[0].namespace;
    for path in [
        format!("{PODS}?limit=3&limit=500"),
        format!(
            "{PODS}?fieldSelector=metadata.namespace%3D{first}&fieldSelector=metadata.namespace%3Dnone"
        ),
        format!("{PODS}?labelSelector=nothing-has-this&labelSelector="),
        format!("{PODS}?resourceVersionMatch=&resourceVersionMatch=Exact&limit=4"),
    ] {
        let (want_code, want) = get(served.sim.url(), &path).await;
        let (code, got) = get(&served.url, &path).await;
        assert_eq!((code, want_code), (200, 200), "{path}");
        let names = |body: &[u8]| {
            let list: Value = serde_json::from_slice(body).unwrap();
            common::names(&list)
        };
        assert_eq!(names(&got), names(&want), "{path}");
    }
    let (_, limited) = get(&served.url, &format!("{PODS}?limit=3&limit=500")).await;
    let limited: Value = serde_json::from_slice(&limited).unwrap();
    assert_eq!(common::names(&limited).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_version_with_a_sign_is_the_api_servers_500_or_etcds_400() {
    let served = serve(Setup::default()).await;
    for (path, want_code) in [
        (format!("{PODS}?resourceVersion=%2B5"), 500),
        (format!("{PODS}?resourceVersion=-5&watch=1"), 500),
        (format!("{PODS}?resourceVersion=%205&limit=1"), 400),
        // Field labels are converted before the storage reads the version.
        (
            format!("{PODS}?resourceVersion=-5&fieldSelector=bogus%3D1"),
            400,
        ),
    ] {
        let (sim_code, want) = get(served.sim.url(), &path).await;
        let (code, got) = get(&served.url, &path).await;
        assert_eq!((code, sim_code), (want_code, want_code), "{path}");
        let status = |body: &[u8]| serde_json::from_slice::<Value>(body).unwrap();
        assert_eq!(status(&got), status(&want), "{path}");
    }
}

/// kubecache caching config maps, as the `edges/` corpus's request-edges
/// cases ask them.
async fn configmaps() -> common::Served {
    serve(Setup {
        sim: kubecache_loadtest::sim::SimConfig {
            pods: 0,
            configmaps: 30,
            ..Default::default()
        },
        resources: vec![common::resource("", "configmaps", "ConfigMap", true)],
        ..Setup::default()
    })
    .await
}

/// The recorded request-edges case `id` asked of kubecache: its status,
/// and its body byte for byte.
async fn answers_as_recorded(served: &common::Served, id: &str) {
    let case = golden::edge(id);
    let (code, body) = get(&served.url, case["path"].as_str().unwrap()).await;
    assert_eq!(code, case["status"], "{id}");
    assert_eq!(
        String::from_utf8_lossy(&body),
        String::from_utf8_lossy(&golden::edge_body(&case)),
        "{id}"
    );
}

/// One test per recorded case, named for it: kubecache answers as
/// recorded.
macro_rules! recorded_cases {
    ($($test:ident: $id:literal,)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            answers_as_recorded(&configmaps().await, $id).await;
        }
    )*};
}

recorded_cases! {
    req_timeout_uint64max_alice: "req-timeout-uint64max-alice",
    req_timeout_neg_alice: "req-timeout-neg-alice",
    req_timeout_abc_alice: "req-timeout-abc-alice",
    req_limit_abc_alice: "req-limit-abc-alice",
    req_rv_abc_list_alice: "req-rv-abc-list-alice",
    req_rv_abc_get_alice: "req-rv-abc-get-alice",
    req_rv_abc_watch_alice: "req-rv-abc-watch-alice",
}

/// `req-limit-neg-alice`: the whole list, with no continue token (its
/// recorded body holds the real server's objects).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req_limit_neg_alice() {
    let served = configmaps().await;
    let (code, body) = get(&served.url, "/api/v1/configmaps?limit=-1").await;
    assert_eq!(code, 200);
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["metadata"].get("continue"), None);
    assert_eq!(common::names(&list).len(), 30);
}

/// go-restful's route selection compares media types exactly
/// (`Route.matchesAccept`), before kube-apiserver's negotiation, which
/// matches them in any case and refuses a range with `q=0`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_types_are_routed_exactly_and_q_0_refuses_one() {
    let served = serve(Setup::default()).await;
    let path = format!("{PODS}?limit=1");
    for (accept, want) in [
        ("Application/JSON", 406),
        ("application/json;q=0.5", 200),
        ("application/json;q=0", 406),
        ("text/html, APPLICATION/json", 406),
        ("text/html, application/json", 200),
    ] {
        let sim = get_with(served.sim.url(), &path, &[("accept", accept)]).await;
        let got = get_with(&served.url, &path, &[("accept", accept)]).await;
        assert_eq!(sim.status().as_u16(), want, "the sim: {accept}");
        assert_eq!(got.status().as_u16(), want, "{accept}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deprecated_watch_paths_are_watches() {
    let served = serve(Setup::default()).await;
    let pod = served.sim.state(ids::PODS)[7].clone();
    let ns = &pod.namespace;
    for path in [
        "/api/v1/watch/pods?timeoutSeconds=1&watch=0".to_string(),
        format!("/api/v1/watch/namespaces/{ns}/pods?timeoutSeconds=1"),
        format!(
            "/api/v1/watch/namespaces/{ns}/pods/{}?timeoutSeconds=1",
            pod.name
        ),
    ] {
        let reference = WatchLines::open(served.sim.url(), &path).await;
        let watch = WatchLines::open(&served.url, &path).await;
        assert_eq!((watch.code, reference.code), (200, 200), "{path}");
        let (want, got) = tokio::join!(reference.collect(), watch.collect());
        assert!(!want.is_empty(), "{path}");
        assert_eq!(described(&got), described(&want), "{path}");
    }
    let one = format!(
        "/api/v1/watch/namespaces/{ns}/pods/{}?timeoutSeconds=1",
        pod.name
    );
    let lines = WatchLines::open(&served.url, &one).await.collect().await;
    assert_eq!(described(&lines).len(), 1, "the one object named");
    // A field selector of another name contradicts the path.
    let path = format!(
        "/api/v1/watch/namespaces/{ns}/pods/{}?fieldSelector=metadata.name%3Dother",
        pod.name
    );
    let (want_code, want) = get(served.sim.url(), &path).await;
    let (code, got) = get(&served.url, &path).await;
    assert_eq!((code, want_code), (400, 400));
    assert_eq!(
        serde_json::from_slice::<Value>(&got).unwrap(),
        serde_json::from_slice::<Value>(&want).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_over_128_kib_are_gzipped_for_clients_that_accept_gzip() {
    let served = serve(Setup::default()).await;
    let rv = resource_version(&served.url, PODS).await;
    let gzip = [("accept-encoding", "gzip")];
    let large = format!("{PODS}?resourceVersion={rv}&resourceVersionMatch=NotOlderThan");
    let plain = get_with(&served.url, &large, &[]).await;
    assert!(plain.body().len() > 128 * 1024, "a large list");
    assert!(plain.headers().get("content-encoding").is_none());
    let compressed = get_with(&served.url, &large, &gzip).await;
    assert_eq!(compressed.status(), 200);
    assert_eq!(compressed.headers()["content-encoding"], "gzip");
    assert_eq!(compressed.headers()["vary"], "Accept-Encoding");
    assert!(compressed.body().len() < plain.body().len() / 3);
    assert_eq!(gunzip(compressed.body()), plain.body().to_vec());
    // Tables too: the same rule for every answer of a read.
    let table = [
        ("accept-encoding", "gzip"),
        ("accept", "application/json;as=Table;v=v1;g=meta.k8s.io"),
    ];
    let compressed = get_with(&served.url, &large, &table).await;
    assert_eq!(compressed.headers()["content-encoding"], "gzip");
    let table: Value = serde_json::from_slice(&gunzip(compressed.body())).unwrap();
    assert_eq!(table["kind"], "Table");

    // Small answers go as they are, with their length.
    let small = format!("{PODS}?limit=2");
    let answer = get_with(&served.url, &small, &gzip).await;
    assert!(answer.headers().get("content-encoding").is_none());
    assert_eq!(
        answer.headers()["content-length"],
        answer.body().len().to_string().as_str()
    );
    // Watches never.
    let watch = format!("{PODS}?watch=1&timeoutSeconds=1");
    let answer = get_with(&served.url, &watch, &gzip).await;
    assert!(answer.headers().get("content-encoding").is_none());
    assert!(answer.body().len() > 128 * 1024, "every pod ADDED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_of_known_length_has_a_content_length() {
    let served = serve(Setup::default()).await;
    let pod = served.sim.state(ids::PODS)[0].clone();
    let path = format!("/api/v1/namespaces/{}/pods/{}", pod.namespace, pod.name);
    let answer = get_with(&served.url, &path, &[]).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.headers()["content-length"],
        answer.body().len().to_string().as_str()
    );
    assert!(answer.headers().get("transfer-encoding").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_asked_for_in_protobuf_only_is_the_api_servers_406() {
    let served = serve(Setup::default()).await;
    let accept = "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io";
    let answer = get_with(&served.url, PODS, &[("accept", accept)]).await;
    assert_eq!(answer.status(), 406);
    assert_eq!(answer.headers()["content-type"], "application/json");
    let want = golden::read("table/pods.table.protobuf-request.txt");
    assert_eq!(
        String::from_utf8_lossy(answer.body()),
        String::from_utf8_lossy(&want)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_tables_list_get_and_watch_with_column_definitions_once() {
    let served = serve(Setup::default()).await;
    let kubectl = [(
        "accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
    )];
    let pod = served.sim.state(ids::PODS)[3].clone();
    let path = format!("/api/v1/namespaces/{}/pods/{}", pod.namespace, pod.name);
    let answer = get_with(&served.url, &path, &kubectl).await;
    assert_eq!(answer.status(), 200);
    assert!(answer.body().ends_with(b"}\n"), "the trailing newline");
    let table: Value = serde_json::from_slice(answer.body()).unwrap();
    assert_eq!(
        table["metadata"]["resourceVersion"].as_str().unwrap(),
        pod.revision.to_string(),
        "a single object's table is at its resourceVersion"
    );
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "IP",
            "Node",
            "Nominated Node",
            "Readiness Gates"
        ]
    );
    let row = &table["rows"][0];
    assert_eq!(row["cells"][0], pod.name.as_str());
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");

    // kubectl get -w: the first event has the definitions, the others null.
    let rv = resource_version(&served.url, PODS).await;
    let mut request = http::Request::get(format!(
        "{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=2"
    ));
    request = request.header(kubectl[0].0, kubectl[0].1);
    let mut request = request
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let mut sender = common::open(&served.url, &mut request).await;
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    relabel(&served, 2, "table");
    use http_body_util::BodyExt;
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let lines: Vec<Value> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let events: Vec<&Value> = lines.iter().filter(|l| l["type"] == "MODIFIED").collect();
    assert_eq!(events.len(), 2, "{lines:?}");
    assert!(lines[0]["object"]["columnDefinitions"].is_array());
    for line in &lines[1..] {
        assert!(line["object"]["columnDefinitions"].is_null(), "{line}");
        assert_eq!(line["object"]["kind"], "Table");
    }
}
