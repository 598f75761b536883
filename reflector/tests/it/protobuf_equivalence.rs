//! What the reflector reads over protobuf is what it would read over JSON:
//! for every kind the simulated API server serves, each object of a list, of
//! a streaming list and of a watch's ERROR event, transcoded at ingest, is
//! the JSON the server serves for it, byte for byte (the sim writes built-in
//! kinds as Go does, and the transcoder writes what Go writes), and decodes
//! to the same stored object.

use crate::common;
use common::start;
use std::time::Duration;

use bytes::Bytes;
use kubecache_loadtest::sim::{Sim, SimConfig};
use kubecache_reflector::Strategy;
use kubecache_reflector::upstream::{
    ApiResource, Query, RequestEncoding, ResourceSpec, Upstream, UpstreamError, WatchEvent,
};
use kubecache_wire::{CachedObject, Encoding, Transform, WatchEventType, decode_object};
use serde_json::Value;

fn resource(plural: &str, kind: &str, namespaced: bool) -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        plural: plural.into(),
        kind: kind.into(),
        namespaced,
    }
}

/// Every kind the simulator serves with protobuf.
fn builtin_kinds() -> [ApiResource; 3] {
    [
        resource("pods", "Pod", true),
        resource("configmaps", "ConfigMap", true),
        resource("namespaces", "Namespace", false),
    ]
}

fn upstream(url: &str, resource: &ApiResource, wire: RequestEncoding) -> Upstream {
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    Upstream::new(client, ResourceSpec::all(resource.clone())).with_wire(wire)
}

fn value(json: &[u8]) -> Value {
    serde_json::from_slice(json).expect("valid JSON")
}

/// A corpus: the simulator's realistic pods (system, monitoring, logging,
/// ingress and team workloads, with managedFields, probes, volumes, owner
/// references and status), Helm-style config maps and namespaces.
async fn corpus() -> Sim {
    let (_, sim) = Sim::start(SimConfig {
        pods: 3_000,
        configmaps: 400,
        namespaces: 30,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    sim
}

/// Each list item as JSON, in list order, and the list's resourceVersion.
async fn list_items(upstream: &Upstream, expected: Encoding) -> (u64, Vec<Vec<u8>>) {
    let body = upstream.list(&Query::default()).await.unwrap();
    assert_eq!(body.encoding(), expected);
    let page = body.page().unwrap();
    let mut items = Vec::new();
    page.for_each_json(|item| {
        items.push(item.to_vec());
        Ok(())
    })
    .unwrap();
    (page.resource_version, items)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listed_object_transcodes_to_the_json_the_server_serves_for_it() {
    let sim = corpus().await;
    let transform = Transform::default();
    for kind in builtin_kinds() {
        let (json_rv, json) = list_items(
            &upstream(sim.url(), &kind, RequestEncoding::Json),
            Encoding::Json,
        )
        .await;
        let (proto_rv, proto) = list_items(
            &upstream(sim.url(), &kind, RequestEncoding::Auto),
            Encoding::Protobuf,
        )
        .await;
        assert_eq!(json_rv, proto_rv, "{}: the same snapshot", kind.plural);
        assert_eq!(json.len(), proto.len(), "{}: the same objects", kind.plural);
        assert!(!json.is_empty(), "{}: the corpus is not empty", kind.plural);
        for (j, p) in json.iter().zip(&proto) {
            assert!(
                p == j,
                "{}: item\n{}\n{}",
                kind.plural,
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(j)
            );
            let from_json = decode_object(j, &kind.kind, "v1", &transform).unwrap();
            let from_proto = decode_object(p, &kind.kind, "v1", &transform).unwrap();
            assert!(
                from_proto.json == from_json.json,
                "{}: stored form",
                from_json.key
            );
            let without_json = |o: &CachedObject| CachedObject {
                json: Bytes::new(),
                type_meta_len: 0,
                ..o.clone()
            };
            assert!(
                without_json(&from_proto) == without_json(&from_json),
                "{}: what the store indexes",
                from_json.key
            );
        }
    }
    sim.shutdown().await;
}

/// The events of a streaming list, up to and including its end bookmark.
async fn streaming_list(upstream: &Upstream) -> Vec<WatchEvent> {
    let query = Query {
        watch: true,
        send_initial_events: true,
        version_match: Some("NotOlderThan"),
        ..Query::default()
    };
    let mut events = upstream.watch(&query).await.unwrap();
    let mut out = Vec::new();
    while let Some(event) = events.next_event().await.unwrap() {
        let end = {
            let line = event.line().unwrap();
            line.event_type == WatchEventType::Bookmark
                && line.bookmark().unwrap().initial_events_end
        };
        out.push(event);
        if end {
            return out;
        }
    }
    panic!("the streaming list ended before its bookmark");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watched_object_and_bookmark_transcodes_to_the_json_the_server_serves() {
    let sim = corpus().await;
    for kind in builtin_kinds() {
        let json = streaming_list(&upstream(sim.url(), &kind, RequestEncoding::Json)).await;
        let proto = streaming_list(&upstream(sim.url(), &kind, RequestEncoding::Protobuf)).await;
        assert_eq!(json.len(), proto.len(), "{}: the same events", kind.plural);
        let by_key = |events: &[WatchEvent]| {
            let mut lines: Vec<(String, Vec<u8>)> = events
                .iter()
                .map(|e| {
                    let line = e.line().unwrap();
                    let object = value(line.object);
                    let key = format!(
                        "{} {}/{}",
                        line.event_type,
                        object["metadata"]["namespace"].as_str().unwrap_or_default(),
                        object["metadata"]["name"].as_str().unwrap_or_default()
                    );
                    (key, line.object.to_vec())
                })
                .collect();
            // A streaming list's initial events come in no particular order.
            lines.sort_by(|a, b| a.0.cmp(&b.0));
            lines
        };
        let (json, proto) = (by_key(&json), by_key(&proto));
        for ((jk, jv), (pk, pv)) in json.iter().zip(&proto) {
            assert_eq!(pk, jk);
            assert!(pv == jv, "{jk}: the object, kind and apiVersion included");
        }
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_410_reaches_the_reflector_the_same_from_a_protobuf_watch_and_a_protobuf_list() {
    let sim = corpus().await;
    sim.create_pods(3).unwrap();
    sim.store().compact_at(sim.store().revision());
    let pods = builtin_kinds()[0].clone();
    for wire in [RequestEncoding::Json, RequestEncoding::Protobuf] {
        let upstream = upstream(sim.url(), &pods, wire);
        // A watch from a compacted revision: 200, then an ERROR event with the Status.
        let query = Query {
            watch: true,
            resource_version: Some(1),
            ..Query::default()
        };
        let mut events = upstream.watch(&query).await.unwrap();
        let event = events.next_event().await.unwrap().expect("an ERROR event");
        let line = event.line().unwrap();
        assert_eq!(line.event_type, WatchEventType::Error, "{wire}");
        let status = line.status().unwrap();
        assert_eq!(
            (status.code, status.reason.as_str()),
            (410, "Expired"),
            "{wire}"
        );
        assert!(
            status.message.starts_with("too old resource version: 1 ("),
            "{wire}: {}",
            status.message
        );
        // A list at a compacted revision: 410 with the Status as the body.
        let query = Query {
            limit: Some(10),
            resource_version: Some(1),
            version_match: Some("Exact"),
            ..Query::default()
        };
        match upstream.list(&query).await {
            Err(UpstreamError::Gone { message, .. }) => assert_eq!(
                message, "The resourceVersion for the provided list is too old.",
                "{wire}"
            ),
            other => panic!("{wire}: expected 410, got {other:?}"),
        }
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflector_over_protobuf_stores_what_a_reflector_over_json_stores() {
    let sim = corpus().await;
    let over_json = start(sim.url(), Strategy::Parallel, RequestEncoding::Json, 500);
    let over_protobuf = start(sim.url(), Strategy::Parallel, RequestEncoding::Auto, 500);
    for running in [&over_json, &over_protobuf] {
        tokio::time::timeout(Duration::from_secs(60), running.reader.ready())
            .await
            .expect("ready in time")
            .expect("store open");
    }
    for running in [&over_json, &over_protobuf] {
        let status = running.status.borrow();
        assert_eq!(status.failures, 0, "{status:?}");
    }
    let (json, proto) = (over_json.reader.snapshot(), over_protobuf.reader.snapshot());
    assert_eq!(json.resource_version(), proto.resource_version());
    let (json, proto): (Vec<_>, Vec<_>) = (
        json.range(None, None).collect(),
        proto.range(None, None).collect(),
    );
    assert_eq!(json.len(), proto.len());
    for (j, p) in json.iter().zip(&proto) {
        assert!(p.json == j.json, "{}", j.key);
        assert!(
            p.json
                .starts_with(br#"{"kind":"Pod","apiVersion":"v1","metadata":{"#)
        );
    }
    sim.shutdown().await;
}
