//! The simulated API server against a real kube-apiserver v1.28: the same
//! requests as those recorded in the golden corpus (`testdata/apiserver-golden`,
//! see its README) get the same answers from the sim,
//! compared as JSON values with only what varies between servers made equal:
//! revisions, and the fields the sim assigns to the objects it stores.
//!
//! Requests are taken from the corpus's `manifest.json`, so each check asks
//! exactly what the real server was asked.

use base64::Engine as _;
use kubecache_loadtest::sim::{Policy, Sim, SimConfig, ids};
use kubecache_testkit::golden::{self, json as corpus_json, read as corpus};
use kubecache_wire::protobuf;
use serde_json::{Value, json};

const JSON: &str = "application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn json_lines(body: &[u8]) -> Vec<Value> {
    body.split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("one JSON object per line"))
        .collect()
}

/// The recorded request of a corpus file: path with query, status, Accept.
struct Recorded {
    path: String,
    status: u16,
    accept: String,
}

fn recorded(file: &str) -> Recorded {
    let entry = golden::recorded(file);
    Recorded {
        path: entry["path"].as_str().unwrap().to_string(),
        status: entry["status"].as_u64().unwrap() as u16,
        accept: entry["accept"].as_str().unwrap().to_string(),
    }
}

/// A sim serving namespace `golden` with the pods of the corpus's unpaginated
/// list at its last recorded revision (298 pods).
async fn golden_sim() -> (String, Sim) {
    let (url, sim) = Sim::start(SimConfig::default()).await.expect("sim starts");
    let pods = corpus_json("errors/limit-with-rv0.json.gz");
    sim.seed(ids::PODS, items(&pods)).unwrap();
    (url, sim)
}

fn items(list: &Value) -> Vec<Value> {
    list["items"].as_array().expect("a list").clone()
}

async fn get(url: &str, path: &str, accept: &str) -> (u16, Vec<u8>) {
    let response = reqwest::Client::new()
        .get(format!("{url}{path}"))
        .header("Accept", accept)
        .send()
        .await
        .expect("request");
    let code = response.status().as_u16();
    (code, response.bytes().await.expect("body").to_vec())
}

/// A `k8s\0` + runtime.Unknown body as JSON, with the envelope's type meta.
fn from_protobuf(body: &[u8]) -> Value {
    let unknown = protobuf::decode_unknown(body).expect("k8s\\0 + runtime.Unknown");
    let ty = protobuf::message_type(unknown.api_version, unknown.kind).expect("a known type");
    let json = protobuf::proto_to_json(ty, unknown.raw).expect("transcodes");
    let mut value: Value = serde_json::from_slice(&json).unwrap();
    let map = value.as_object_mut().unwrap();
    map.insert("apiVersion".into(), unknown.api_version.into());
    map.insert("kind".into(), unknown.kind.into());
    value
}

/// The events of a protobuf watch body, each as `{"type", "object"}` JSON.
fn protobuf_events(body: &[u8]) -> Vec<Value> {
    let mut decoder = protobuf::WatchFrameDecoder::default();
    decoder.push(body);
    let mut events = Vec::new();
    while let Some(event) = decoder.next_event().expect("well-framed") {
        events.push(json!({"type": event.event_type, "object": from_protobuf(&event.object)}));
    }
    events
}

/// What legitimately differs between two servers' answers: revisions
/// (`resourceVersion`, and the numbers in messages such as `too old
/// resource version: 1 (94491)`) become `#`.
fn normalised(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("resourceVersion", Value::String(_)) => json!("#"),
                        ("message", Value::String(m)) => json!(digits_out(m)),
                        _ => normalised(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normalised).collect()),
        other => other.clone(),
    }
}

fn digits_out(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '0'..='9' if out.ends_with('#') => {}
            '0'..='9' => out.push('#'),
            c => out.push(c),
        }
    }
    out
}

/// The fields a server assigns to an object it stores: a copy of recorded
/// objects stored in the sim differs from them in these only. (Pods of a
/// 1.28 server have no `generation`; the sim keeps one for every pod, as
/// servers with pod generation tracking (1.33+) do.)
fn without_assigned(object: &Value) -> Value {
    let mut object = object.clone();
    let meta = object["metadata"].as_object_mut().expect("metadata");
    for assigned in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
        meta.shift_remove(assigned);
    }
    object
}

/// Keys of an object, in order.
fn keys(value: &Value) -> Vec<&str> {
    value
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// The decoded JSON of a continue token.
fn token(value: &Value) -> Value {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(value.as_str().expect("a continue token"))
        .expect("unpadded URL-safe base64");
    serde_json::from_slice(&bytes).expect("a JSON token")
}

#[tokio::test(start_paused = true)]
async fn mistakes_in_a_list_or_get_get_the_real_servers_status() {
    let (url, _sim) = golden_sim().await;
    for file in [
        "errors/list-rv1-exact.json",
        "errors/list-rv1-exact.pb",
        "errors/bad-labelselector.json",
        "errors/bad-labelselector.pb",
        "errors/unknown-fieldselector.json",
        "errors/not-found.json",
        "errors/not-found.pb",
        "errors/not-found-namespace-list.json",
        "errors/unknown-resource.json",
        "errors/sendinitialevents-without-rvmatch.json",
        "errors/sendinitialevents-on-list.json",
        "errors/rvmatch-without-rv.json",
        "errors/invalid-resourceversion.json",
        "errors/rv-too-large.json",
        "errors/invalid-continue-token.json",
    ] {
        let request = recorded(file);
        let (code, body) = get(&url, &request.path, &request.accept).await;
        let (got, want) = if file.ends_with(".pb") {
            (from_protobuf(&body), from_protobuf(&corpus(file)))
        } else {
            let got = serde_json::from_slice(&body)
                .unwrap_or_else(|e| panic!("{file}: {e}: {}", String::from_utf8_lossy(&body)));
            (got, corpus_json(file))
        };
        assert_eq!(code, request.status, "{file}: {}", request.path);
        assert_eq!(normalised(&got), normalised(&want), "{file}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_watch_from_a_compacted_revision_is_200_then_the_real_servers_expired_event() {
    let (url, _sim) = golden_sim().await;
    for file in ["errors/watch-rv1.json", "errors/watch-rv1.pb"] {
        let request = recorded(file);
        let (code, body) = get(&url, &request.path, &request.accept).await;
        assert_eq!(code, request.status, "{file}");
        let (got, want) = if file.ends_with(".pb") {
            (protobuf_events(&body), protobuf_events(&corpus(file)))
        } else {
            (json_lines(&body), json_lines(&corpus(file)))
        };
        assert_eq!(want.len(), 1, "{file}: the real server sent one event");
        assert_eq!(normalised(&json!(got)), normalised(&json!(want)), "{file}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_expired_continue_token_is_the_real_servers_410_with_an_inconsistent_token() {
    let (url, sim) = golden_sim().await;
    for file in [
        "errors/expired-continue-token.json",
        "errors/expired-continue-token.pb",
    ] {
        let request = recorded(file);
        let accept = request.accept.clone();
        let (_, first) = get(&url, "/api/v1/namespaces/golden/pods?limit=50", JSON).await;
        let first: Value = serde_json::from_slice(&first).unwrap();
        let issued = first["metadata"]["continue"].clone();
        sim.create_pods(1).unwrap();
        sim.store().compact_at(sim.store().revision());
        let path = format!(
            "/api/v1/namespaces/golden/pods?limit=50&continue={}",
            issued.as_str().unwrap()
        );
        let (code, body) = get(&url, &path, &accept).await;
        assert_eq!(code, request.status, "{file}");
        let (mut got, mut want) = if file.ends_with(".pb") {
            (from_protobuf(&body), from_protobuf(&corpus(file)))
        } else {
            (serde_json::from_slice(&body).unwrap(), corpus_json(file))
        };
        let want_issued = request.path.split("continue=").nth(1).unwrap();
        for (status, issued) in [
            (&mut got, token(&issued)),
            (&mut want, token(&json!(want_issued))),
        ] {
            let inconsistent = token(&status["metadata"]["continue"]);
            assert_eq!(
                inconsistent,
                json!({"v": "meta.k8s.io/v1", "rv": -1, "start": issued["start"]}),
                "{file}: the new token continues from the expired one's key at the newest revision"
            );
            status["metadata"]["continue"] = json!("<inconsistent token>");
        }
        assert_eq!(got, want, "{file}");
    }
}

#[tokio::test(start_paused = true)]
async fn pages_have_the_real_servers_shape_order_and_counts() {
    let (url, sim) = golden_sim().await;
    let exact = format!(
        "/api/v1/namespaces/golden/pods?limit=5&resourceVersion={}&resourceVersionMatch=Exact",
        sim.store().revision()
    );
    for (file, path) in [
        (
            "errors/list-rv1-notolderthan.json",
            recorded("errors/list-rv1-notolderthan.json").path,
        ),
        ("errors/limit-with-rv-exact.json", exact),
    ] {
        let (code, body) = get(&url, &path, JSON).await;
        assert_eq!(code, 200, "{path}");
        let (got, want): (Value, Value) =
            (serde_json::from_slice(&body).unwrap(), corpus_json(file));
        assert_eq!(
            keys(&got),
            ["kind", "apiVersion", "metadata", "items"],
            "{path}"
        );
        assert_eq!(keys(&got), keys(&want));
        assert_eq!(
            keys(&got["metadata"]),
            ["resourceVersion", "continue", "remainingItemCount"]
        );
        assert_eq!(keys(&got["metadata"]), keys(&want["metadata"]));
        assert_eq!(
            got["metadata"]["remainingItemCount"], want["metadata"]["remainingItemCount"],
            "{path}"
        );
        let (got_token, want_token) = (
            token(&got["metadata"]["continue"]),
            token(&want["metadata"]["continue"]),
        );
        assert_eq!(
            got_token["start"], want_token["start"],
            "{path}: the next page starts after the same key"
        );
        assert_eq!(
            got_token["rv"].to_string(),
            got["metadata"]["resourceVersion"].as_str().unwrap()
        );
        let strip = |list: &Value| items(list).iter().map(without_assigned).collect::<Vec<_>>();
        assert_eq!(strip(&got), strip(&want), "{path}: the same first items");
    }
    let file = "errors/limit-with-rv0.json.gz";
    let (code, body) = get(&url, &recorded(file).path, JSON).await;
    let (got, want): (Value, Value) = (serde_json::from_slice(&body).unwrap(), corpus_json(file));
    assert_eq!(code, 200);
    assert_eq!(
        keys(&got["metadata"]),
        ["resourceVersion"],
        "resourceVersion=0 ignores the limit"
    );
    assert_eq!(keys(&got["metadata"]), keys(&want["metadata"]));
    assert_eq!(items(&got).len(), items(&want).len());
}

#[tokio::test(start_paused = true)]
async fn recorded_objects_stored_in_the_sim_come_back_equal_in_json_and_protobuf() {
    let (url, sim) = Sim::start(SimConfig::default()).await.expect("sim starts");
    for (resource, file, path) in [
        (
            ids::CONFIGMAPS,
            "lists/configmaps.list.json",
            "/api/v1/namespaces/golden/configmaps",
        ),
        (
            ids::PODS,
            "lists/pods.list.json.gz",
            "/api/v1/namespaces/golden/pods",
        ),
        (
            ids::SERVICEACCOUNTS,
            "lists/serviceaccounts.list.json",
            "/api/v1/namespaces/golden/serviceaccounts",
        ),
        (
            ids::ROLES,
            "lists/roles.list.json",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/golden/roles",
        ),
        (
            ids::ROLEBINDINGS,
            "lists/rolebindings.list.json",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/golden/rolebindings",
        ),
        (
            ids::CLUSTERROLES,
            "lists/clusterroles.list.json",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        ),
    ] {
        let recorded = corpus_json(file);
        sim.seed(resource, items(&recorded)).unwrap();
        let want: Vec<Value> = items(&recorded).iter().map(without_assigned).collect();
        let (_, body) = get(&url, path, JSON).await;
        let list: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(list["kind"], recorded["kind"]);
        let got: Vec<Value> = items(&list).iter().map(without_assigned).collect();
        assert_eq!(got, want, "{path} in JSON");
        let (_, body) = get(&url, path, PROTOBUF).await;
        let list = from_protobuf(&body);
        assert_eq!(list["kind"], recorded["kind"]);
        let got: Vec<Value> = items(&list).iter().map(without_assigned).collect();
        assert_eq!(got, want, "{path} in protobuf");
    }
    for file in [
        "single/pod-analytics-backup-28681014-5p6rq",
        "single/pod-analytics-backup-28681014-2t7c6",
        "single/pod-analytics-cleanup-28841847-49226",
        "single/configmap-binary-config",
    ] {
        let request = recorded(&format!("{file}.json"));
        let want = without_assigned(&corpus_json(&format!("{file}.json")));
        let (code, body) = get(&url, &request.path, JSON).await;
        assert_eq!(code, 200, "{file}");
        let got: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            keys(&got)[..2],
            ["kind", "apiVersion"],
            "{file}: single objects carry type meta first"
        );
        assert_eq!(without_assigned(&got), want, "{file} in JSON");
        let (_, body) = get(&url, &request.path, PROTOBUF).await;
        assert_eq!(
            without_assigned(&from_protobuf(&body)),
            want,
            "{file} in protobuf"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn bookmarks_have_the_real_servers_shape() {
    let (url, sim) = golden_sim().await;
    sim.seed(
        ids::CONFIGMAPS,
        items(&corpus_json("lists/configmaps.list.json")),
    )
    .unwrap();
    for file in [
        "watch/configmaps.watch.json",
        "watch/pods-meta.watch.json",
        "watch/pods.metadata.watch.json",
    ] {
        let request = recorded(file);
        let (path, _) = request.path.split_once("&resourceVersion=").unwrap();
        let (_, rest) = request.path.split_once("&allowWatchBookmarks").unwrap();
        let path = format!(
            "{path}&resourceVersion={}&allowWatchBookmarks{rest}",
            sim.store().revision()
        );
        let (code, body) = get(&url, &path, &request.accept).await;
        assert_eq!(code, 200, "{path}");
        let bookmark = |lines: Vec<Value>| {
            lines
                .into_iter()
                .find(|l| l["type"] == "BOOKMARK")
                .expect("a bookmark before the timeout")
        };
        let (got, want) = (
            bookmark(json_lines(&body)),
            bookmark(json_lines(&corpus(file))),
        );
        assert_eq!(keys(&got["object"]), keys(&want["object"]), "{file}");
        assert_eq!(normalised(&got), normalised(&want), "{file}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_is_the_real_servers_added_events_then_its_end_bookmark() {
    let (url, sim) = Sim::start(SimConfig::default()).await.expect("sim starts");
    let file = "watch/configmaps.watchlist-initial-events.json";
    let recorded_lines = json_lines(&corpus(file));
    let (added, end) = recorded_lines.split_at(recorded_lines.len() - 1);
    sim.seed(ids::CONFIGMAPS, added.iter().map(|l| l["object"].clone()))
        .unwrap();
    let request = recorded(file);
    let (code, body) = get(&url, &request.path, JSON).await;
    assert_eq!(code, 200);
    // The real server's 3 s watch ended after its end bookmark; the sim also
    // sends its bookmark ahead of the timeout, which may only follow it.
    let mut lines = json_lines(&body);
    assert!(
        lines[recorded_lines.len()..].iter().all(
            |l| l["type"] == "BOOKMARK" && l["object"]["metadata"].get("annotations").is_none()
        ),
        "{lines:?}"
    );
    lines.truncate(recorded_lines.len());
    let by_name = |lines: &[Value]| {
        let mut objects: Vec<(String, Value)> = lines
            .iter()
            .map(|l| {
                assert_eq!(keys(l), ["type", "object"]);
                assert_eq!(l["type"], "ADDED");
                let name = l["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string();
                (name, without_assigned(&l["object"]))
            })
            .collect();
        objects.sort_by(|a, b| a.0.cmp(&b.0));
        objects
    };
    let (got_added, got_end) = lines.split_at(lines.len() - 1);
    assert_eq!(
        by_name(got_added),
        by_name(added),
        "ADDED for every object, in no particular order"
    );
    assert_eq!(normalised(&got_end[0]), normalised(&end[0]));
    assert_eq!(
        got_end[0]["object"]["metadata"]["resourceVersion"].as_str(),
        Some(sim.store().revision().to_string().as_str()),
        "the end bookmark carries the snapshot's revision"
    );
}

#[tokio::test(start_paused = true)]
async fn malformed_numbers_and_a_negative_timeout_are_the_real_servers_answers_byte_for_byte() {
    let (url, _sim) = Sim::start(SimConfig::default()).await.expect("sim starts");
    for id in [
        "req-timeout-uint64max-alice",
        "req-timeout-neg-alice",
        "req-timeout-abc-alice",
        "req-limit-abc-alice",
        "req-rv-abc-list-alice",
        "req-rv-abc-get-alice",
        "req-rv-abc-watch-alice",
    ] {
        let case = golden::edge(id);
        let (code, body) = get(&url, case["path"].as_str().unwrap(), JSON).await;
        assert_eq!(code, case["status"], "{id}");
        assert_eq!(
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(&golden::edge_body(&case)),
            "{id}"
        );
    }
    let (code, body) = get(&url, "/api/v1/configmaps?limit=-1", JSON).await;
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(code, 200, "req-limit-neg-alice");
    assert_eq!(list["metadata"].get("continue"), None, "no limit");
}

#[tokio::test(start_paused = true)]
async fn write_conflicts_are_the_real_servers_409s() {
    let (url, sim) = Sim::start(SimConfig::default()).await.expect("sim starts");
    let configmaps = items(&corpus_json("lists/configmaps.list.json"));
    sim.seed(ids::CONFIGMAPS, configmaps.clone()).unwrap();
    let app_config = configmaps
        .iter()
        .find(|c| c["metadata"]["name"] == "app-config")
        .unwrap();
    let client = reqwest::Client::new();
    let mut fresh = without_assigned(app_config);
    fresh["apiVersion"] = json!("v1");
    fresh["kind"] = json!("ConfigMap");
    let file = "errors/create-already-exists.json";
    let request = recorded(file);
    let response = client
        .post(format!("{url}{}", request.path))
        .json(&fresh)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), request.status, "{file}");
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        corpus_json(file),
        "{file}"
    );
    let file = "errors/update-conflict.json";
    let request = recorded(file);
    let mut stale = fresh.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let response = client
        .put(format!("{url}{}", request.path))
        .json(&stale)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), request.status, "{file}");
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        corpus_json(file),
        "{file}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_unknown_token_is_the_real_servers_401() {
    let (url, _sim) = Sim::start(SimConfig {
        policy: Some(Policy::admin_only("known")),
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let file = "errors/unauthorized.json";
    let request = recorded(file);
    let response = reqwest::Client::new()
        .get(format!("{url}{}", request.path))
        .bearer_auth("unknown")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), request.status);
    // Byte for byte: the same fields in the same order, and the trailing
    // newline of Go's json.Encoder.
    assert_eq!(
        String::from_utf8(response.bytes().await.unwrap().to_vec()).unwrap(),
        String::from_utf8(corpus(file)).unwrap()
    );
}

/// A `PartialObjectMetadata` protobuf body as JSON, with its envelope's type
/// meta (the kind is not in the schema's table of kinds: it is
/// `meta.k8s.io`'s, converted to by the server).
fn metadata_from_protobuf(body: &[u8]) -> Value {
    let unknown = protobuf::decode_unknown(body).expect("k8s\\0 + runtime.Unknown");
    let ty = match unknown.kind {
        "PartialObjectMetadata" => kubecache_wire::partial_object_metadata(),
        "PartialObjectMetadataList" => protobuf::MessageType::from_full_name(
            "k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList",
        )
        .unwrap(),
        other => panic!("not metadata: {other}"),
    };
    let json = protobuf::proto_to_json(ty, unknown.raw).expect("transcodes");
    let mut value: Value = serde_json::from_slice(&json).unwrap();
    let map = value.as_object_mut().unwrap();
    map.insert("apiVersion".into(), unknown.api_version.into());
    map.insert("kind".into(), unknown.kind.into());
    value
}

/// A metadata-only object or list item: its metadata without what the
/// server assigns (the protobuf of an item has no type meta).
fn metadata_without_assigned(object: &Value) -> Value {
    without_assigned(&json!({"metadata": object["metadata"]}))
}

#[tokio::test(start_paused = true)]
async fn metadata_only_gets_and_lists_are_the_real_servers_in_json_and_protobuf() {
    let (url, sim) = Sim::start(SimConfig::default()).await.expect("sim starts");
    let pod = "single/pod-analytics-backup-28681014-5p6rq.json";
    sim.seed(ids::PODS, vec![corpus_json(pod)]).unwrap();
    for file in [
        "metadata/pod-analytics-backup-28681014-5p6rq.metadata.json",
        "metadata/pod-analytics-backup-28681014-5p6rq.metadata.pb",
    ] {
        let request = recorded(file);
        let (code, body) = get(&url, &request.path, &request.accept).await;
        assert_eq!(code, request.status, "{file}");
        let (got, want) = if file.ends_with(".pb") {
            (
                metadata_from_protobuf(&body),
                metadata_from_protobuf(&corpus(file)),
            )
        } else {
            assert_eq!(
                body.last(),
                Some(&b'\n'),
                "{file}: JSON ends with a newline"
            );
            (serde_json::from_slice(&body).unwrap(), corpus_json(file))
        };
        assert_eq!(keys(&got), keys(&want), "{file}");
        assert_eq!(
            (&got["kind"], &got["apiVersion"]),
            (&want["kind"], &want["apiVersion"])
        );
        assert_eq!(
            metadata_without_assigned(&got),
            metadata_without_assigned(&want),
            "{file}"
        );
    }
    // The recorded widgets, stored as the sim's custom resource: their
    // metadata-only list is served in protobuf too, where the whole list is
    // a 406 (itself in protobuf).
    sim.seed(ids::WIDGETS, items(&corpus_json("lists/widgets.list.json")))
        .unwrap();
    let path = "/apis/example.com/v1/namespaces/golden/widgets";
    for file in [
        "metadata/widgets.metadata.list.json",
        "metadata/widgets.metadata.list.pb",
    ] {
        let request = recorded(file);
        let (code, body) = get(&url, path, &request.accept).await;
        assert_eq!(code, request.status, "{file}");
        let (got, want) = if file.ends_with(".pb") {
            (
                metadata_from_protobuf(&body),
                metadata_from_protobuf(&corpus(file)),
            )
        } else {
            (serde_json::from_slice(&body).unwrap(), corpus_json(file))
        };
        assert_eq!(
            (&got["kind"], &got["apiVersion"]),
            (&want["kind"], &want["apiVersion"])
        );
        assert_eq!(keys(&got["metadata"]), keys(&want["metadata"]), "{file}");
        let metadata = |list: &Value| {
            items(list)
                .iter()
                .map(metadata_without_assigned)
                .collect::<Vec<_>>()
        };
        assert_eq!(metadata(&got), metadata(&want), "{file}");
        if file.ends_with(".json") {
            for (got, want) in items(&got).iter().zip(items(&want)) {
                assert_eq!(
                    keys(got),
                    keys(&want),
                    "{file}: items carry their type meta"
                );
            }
        }
    }
    // The whole list is the API server's unstructured list: sorted keys,
    // `continue` always there.
    let file = "lists/widgets.list.json";
    let (code, body) = get(&url, path, &recorded(file).accept).await;
    let (got, want): (Value, Value) = (serde_json::from_slice(&body).unwrap(), corpus_json(file));
    assert_eq!(code, 200, "{file}");
    assert_eq!(keys(&got), keys(&want), "{file}");
    assert_eq!(keys(&got["metadata"]), keys(&want["metadata"]), "{file}");
    assert_eq!(got["metadata"]["continue"], want["metadata"]["continue"]);
    assert_eq!(body.last(), Some(&b'\n'), "{file}");
    let file = "lists/widgets.list.pb";
    let request = recorded(file);
    let (code, body) = get(&url, path, &request.accept).await;
    assert_eq!(code, 406, "{file}");
    assert_eq!(from_protobuf(&body), from_protobuf(&corpus(file)), "{file}");
}

#[tokio::test(start_paused = true)]
async fn metadata_asked_of_the_wrong_shape_is_the_real_servers_406() {
    let (url, _sim) = golden_sim().await;
    let single = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json";
    let (code, body) = get(&url, "/api/v1/namespaces/golden/pods", single).await;
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((code, &status["reason"]), (406, &json!("NotAcceptable")));
    assert_eq!(
        status["message"],
        "you requested PartialObjectMetadata, but the requested object is a list (*v1.PodList)"
    );
}

#[tokio::test(start_paused = true)]
async fn the_served_resources_are_discovered_as_the_real_server_lists_them() {
    let (url, _sim) = Sim::start(SimConfig::default()).await.expect("sim starts");
    let rbac = "discovery/apis_rbac.authorization.k8s.io_v1.json";
    let (code, body) = get(&url, "/apis/rbac.authorization.k8s.io/v1", JSON).await;
    assert_eq!(code, 200);
    assert_eq!(
        String::from_utf8_lossy(&body),
        String::from_utf8_lossy(&corpus(rbac)),
        "byte for byte"
    );
    // The core group's entries (subresources included), each as recorded;
    // `serviceaccounts/token` is not served (the sim issues no tokens).
    let (_, body) = get(&url, "/api/v1", JSON).await;
    let served: Value = serde_json::from_slice(&body).unwrap();
    let recorded = corpus_json("discovery/api_v1.json");
    let entries = |document: &Value| document["resources"].as_array().unwrap().clone();
    for entry in entries(&served) {
        assert!(entries(&recorded).contains(&entry), "{entry}");
    }
    let names: Vec<Value> = entries(&served).iter().map(|e| e["name"].clone()).collect();
    assert!(names.contains(&json!("serviceaccounts")), "{names:?}");
}
