//! What kubecache serves is the API server's own bytes, whichever wire it
//! reads the API server in: every object of a list, of a get and of a watch
//! equals, byte for byte, the simulated API server's JSON for it. Built-in
//! kinds are read over JSON and over protobuf (transcoded at ingest to what
//! Go's `encoding/json` writes, as the API server does); a custom resource
//! over JSON, keeping the API server's key order (sorted, `apiVersion`
//! first). The caches keep managedFields here, so nothing is stripped.

use crate::common;

use std::collections::HashMap;

use common::{Served, Setup, WatchLines, get, serve};
use kubecache_loadtest::sim::SimConfig;
use kubecache_reflector::upstream::{ApiResource, RequestEncoding};
use kubecache_wire::Transform;
use serde_json::value::RawValue;

/// The collections served, and their resources.
fn collections() -> Vec<(&'static str, ApiResource)> {
    vec![
        ("/api/v1/pods", ApiResource::pods()),
        (
            "/api/v1/configmaps",
            common::resource("", "configmaps", "ConfigMap", true),
        ),
        (
            "/api/v1/namespaces",
            common::resource("", "namespaces", "Namespace", false),
        ),
        (
            "/apis/example.com/v1/widgets",
            common::resource("example.com", "widgets", "Widget", true),
        ),
    ]
}

/// kubecache over `wire` in front of a sim, caching [`collections`] with
/// managedFields kept.
async fn serve_collections(wire: RequestEncoding) -> Served {
    serve(Setup {
        sim: SimConfig {
            pods: 300,
            configmaps: 60,
            namespaces: 8,
            widgets: 40,
            ..SimConfig::default()
        },
        resources: collections().into_iter().map(|(_, r)| r).collect(),
        wire,
        transform: Transform::keep_everything(),
        ..Setup::default()
    })
    .await
}

/// A get of `path` from kubecache answers the sim's bytes.
async fn assert_same_get(served: &Served, path: &str, wire: RequestEncoding) {
    let (_, want) = get(served.sim.url(), path).await;
    let (code, ours) = get(&served.url, path).await;
    assert_eq!(code, 200, "{path}");
    assert!(
        ours.trim_ascii_end() == want.trim_ascii_end(),
        "{wire} {path}:\n{}\n{}",
        String::from_utf8_lossy(&ours),
        String::from_utf8_lossy(&want)
    );
}

/// The items of a list body, each as the bytes it was written with.
fn items(body: &[u8]) -> Vec<String> {
    let list: HashMap<String, Box<RawValue>> = serde_json::from_slice(body).expect("a list");
    let items: Vec<Box<RawValue>> = serde_json::from_str(list["items"].get()).expect("items");
    items
        .into_iter()
        .map(|item| item.get().to_string())
        .collect()
}

/// The `object` of the first event of a watch from `rv`, as written.
async fn first_watched_object(base: &str, collection: &str, rv: u64) -> String {
    let path = format!("{collection}?watch=1&resourceVersion={rv}&timeoutSeconds=30");
    let mut lines = WatchLines::open(base, &path).await;
    assert_eq!(lines.code, 200, "{base}{path}");
    let line = lines.next_line().await.expect("an event");
    let event: HashMap<String, Box<RawValue>> = serde_json::from_slice(&line).unwrap();
    event["object"].get().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_objects_are_the_api_servers_bytes_over_either_wire() {
    for wire in [RequestEncoding::Json, RequestEncoding::Auto] {
        let served = serve_collections(wire).await;
        let sim = served.sim.url().to_string();
        for (collection, _) in collections() {
            let (code, want) = get(&sim, collection).await;
            assert_eq!(code, 200, "{collection}");
            let (code, ours) = get(&served.url, collection).await;
            assert_eq!(code, 200, "{collection}");
            let (want, ours) = (items(&want), items(&ours));
            assert!(!want.is_empty(), "{collection}: the sim has objects");
            assert_eq!(ours.len(), want.len(), "{wire} {collection}");
            for (ours, want) in ours.iter().zip(&want) {
                assert!(ours == want, "{wire} {collection}:\n{ours}\n{want}");
            }
            // A get answers the object, kind and apiVersion included.
            let first: serde_json::Value = serde_json::from_str(&want[0]).unwrap();
            let meta = &first["metadata"];
            let path = match meta["namespace"].as_str() {
                Some(ns) => {
                    let (prefix, plural) = collection.rsplit_once('/').unwrap();
                    format!(
                        "{prefix}/namespaces/{ns}/{plural}/{}",
                        meta["name"].as_str().unwrap()
                    )
                }
                None => format!("{collection}/{}", meta["name"].as_str().unwrap()),
            };
            assert_same_get(&served, &path, wire).await;
        }
        // A watch event's object, for a pod created after the caches synced.
        let rv = common::resource_version(&served.url, "/api/v1/pods").await;
        served.sim.create_pods(1).unwrap();
        let want = first_watched_object(&sim, "/api/v1/pods", rv).await;
        let ours = first_watched_object(&served.url, "/api/v1/pods", rv).await;
        assert!(ours == want, "{wire} watch:\n{ours}\n{want}");
    }
}

/// Strings Go's `encoding/json` escapes, written by the sim as Go writes
/// them (`\u003c\u0026\u003e`, `\u2028`, `\u0008`; non-ASCII as it is), are
/// kubecache's bytes too: a pod read over protobuf (transcoded) and over
/// JSON, and a custom resource over JSON, in a watch event and in a get
/// from the cache (`resourceVersion=0`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strings_go_escapes_are_the_api_servers_bytes_over_either_wire() {
    use kubecache_loadtest::sim::resources::ids;
    let annotations = serde_json::json!({
        "a": "<&>",
        "b": "\u{2028}\u{2029} \u{8}\u{c}\u{1} é日本🙂 \"\\\n\t",
    });
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "escaped", "namespace": "escaping", "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "nginx", "args": ["a<b", "c&&d"]}]}});
    let widget = serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "escaped", "namespace": "escaping", "annotations": annotations},
        "spec": {"size": 1, "color": "<red & blue>"}});
    for wire in [RequestEncoding::Json, RequestEncoding::Auto] {
        let served = serve_collections(wire).await;
        let sim = served.sim.url().to_string();
        let rv = common::resource_version(&served.url, "/api/v1/pods").await;
        served.sim.seed(ids::PODS, [pod.clone()]).unwrap();
        served.sim.seed(ids::WIDGETS, [widget.clone()]).unwrap();
        for (collection, path) in [
            ("/api/v1/pods", "/api/v1/namespaces/escaping/pods/escaped"),
            (
                "/apis/example.com/v1/widgets",
                "/apis/example.com/v1/namespaces/escaping/widgets/escaped",
            ),
        ] {
            let want = first_watched_object(&sim, collection, rv).await;
            assert!(
                want.contains(r#""a":"\u003c\u0026\u003e","b":"\u2028\u2029 \u0008\u000c\u0001 é日本🙂 \"\\\n\t""#),
                "the sim writes Go's bytes: {want}"
            );
            let ours = first_watched_object(&served.url, collection, rv).await;
            assert!(ours == want, "{wire} watch {collection}:\n{ours}\n{want}");
            // The watch event was served: the cache has the object.
            let path = format!("{path}?resourceVersion=0");
            assert_same_get(&served, &path, wire).await;
        }
    }
}
