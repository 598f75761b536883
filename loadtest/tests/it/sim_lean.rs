//! A lean sim (`SimConfig::lean`: objects' JSON packed, no other encoding
//! kept) answers with the bytes of a sim that keeps its objects whole:
//! lists page by page, gets and watches, in JSON and protobuf, whole and
//! metadata-only. Both start from one population (the same objects and
//! `creationTimestamp`s) and take the same writes; they are asked in
//! process on a paused clock, so a watch's `timeoutSeconds` ends it.

use kubecache_loadtest::sim::{Sim, SimConfig, ids};
use serde_json::{Value, json};
use tower::ServiceExt as _;

const JSON: &str = "application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const METADATA_LIST_PROTOBUF: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const METADATA_PROTOBUF: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// The code and body of a GET of `path` with `accept`, in process.
async fn get(sim: &Sim, path: &str, accept: &str) -> (u16, bytes::Bytes) {
    let request = axum::http::Request::get(path)
        .header("accept", accept)
        .body(axum::body::Body::empty())
        .expect("a request");
    let response = sim.router().oneshot(request).await.expect("an answer");
    let code = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body");
    (code, body)
}

/// Asks both sims; asserts they answer 200 and the same bytes, and
/// returns them.
async fn same(whole: &Sim, lean: &Sim, path: &str, accept: &str) -> bytes::Bytes {
    let (code, body) = get(whole, path, accept).await;
    let (lean_code, lean_body) = get(lean, path, accept).await;
    assert_eq!(
        code,
        200,
        "{path} {accept}: {}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(lean_code, code, "{path} {accept}");
    assert!(
        lean_body == body,
        "{path} {accept}: the lean sim answered other bytes ({} against {})",
        lean_body.len(),
        body.len()
    );
    body
}

#[tokio::test(start_paused = true)]
async fn a_lean_sim_answers_every_request_with_the_bytes_of_a_sim_keeping_objects_whole() {
    let config = SimConfig {
        seed: 40,
        pods: 240,
        configmaps: 12,
        widgets: 12,
        shared_population: true,
        ..SimConfig::default()
    };
    let (_, whole) = Sim::start(config.clone()).await.expect("sim starts");
    let (_, lean) = Sim::start(SimConfig {
        lean: true,
        ..config
    })
    .await
    .expect("lean sim starts");
    let from = whole.store().revision();
    assert_eq!(lean.store().revision(), from);

    // The same writes to both: a label added to some pods (one of them
    // then leaves a watch's selector), one pod deleted.
    let pods = whole.state(ids::PODS);
    for sim in [&whole, &lean] {
        for pod in pods.iter().take(3) {
            let patch = json!({"metadata": {"labels": {"lean": "yes"}}});
            let store = sim.store();
            store
                .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
                .expect("patched");
        }
        let patch = json!({"metadata": {"labels": {"lean": "no"}}});
        sim.store()
            .merge_patch(ids::PODS, &pods[0].namespace, &pods[0].name, &patch)
            .expect("patched");
        sim.delete_object(ids::PODS, &pods[1].namespace, &pods[1].name)
            .expect("deleted");
    }
    assert_eq!(lean.store().revision(), whole.store().revision());

    // Every page of pods, as JSON; the same pages in the other forms.
    let mut pages = vec!["/api/v1/pods?limit=70".to_string()];
    let mut items = 0;
    loop {
        let page = same(&whole, &lean, pages.last().expect("a page"), JSON).await;
        let page: Value = serde_json::from_slice(&page).expect("a JSON list");
        items += page["items"].as_array().expect("items").len();
        match page["metadata"]["continue"].as_str() {
            Some(token) => pages.push(format!("/api/v1/pods?limit=70&continue={token}")),
            None => break,
        }
    }
    assert_eq!(items, 239, "every pod but the deleted one");
    assert_eq!(pages.len(), 4);
    for page in &pages {
        for accept in [PROTOBUF, METADATA_LIST, METADATA_LIST_PROTOBUF] {
            same(&whole, &lean, page, accept).await;
        }
    }
    for list in [
        "/api/v1/namespaces",
        "/api/v1/configmaps",
        "/apis/example.com/v1/widgets",
    ] {
        same(&whole, &lean, list, JSON).await;
    }
    same(&whole, &lean, "/api/v1/configmaps", PROTOBUF).await;

    // Gets of a written pod and of one as it was filled.
    for pod in [&pods[0], &pods[5]] {
        let path = format!("/api/v1/namespaces/{}/pods/{}", pod.namespace, pod.name);
        for accept in [JSON, PROTOBUF, METADATA, METADATA_PROTOBUF] {
            same(&whole, &lean, &path, accept).await;
        }
    }

    // Watches from before the writes, of all pods and of those the label
    // selects (the one that leaves it is seen deleted).
    for watch in [
        format!("/api/v1/pods?watch=1&resourceVersion={from}&timeoutSeconds=1"),
        format!(
            "/api/v1/pods?watch=1&resourceVersion={from}&timeoutSeconds=1&labelSelector=lean%3Dyes"
        ),
    ] {
        let events = same(&whole, &lean, &watch, JSON).await;
        let events = String::from_utf8_lossy(&events);
        assert!(events.contains(r#""type":"DELETED""#), "{watch}: {events}");
        same(&whole, &lean, &watch, PROTOBUF).await;
    }
}
