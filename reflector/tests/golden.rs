//! kubecache's ingest of a real kube-apiserver's bytes: the golden corpus in
//! `../shared/apiserver-golden` (kube-apiserver v1.28, see its README).
//!
//! Every list decodes, over JSON and over protobuf, through the reflector's
//! own page reader into the same stored objects, byte for byte; the JSON path
//! keeps the server's bytes (a built-in kind's list item is its stored
//! object without `kind`/`apiVersion`; a custom resource's, and a
//! CustomResourceDefinition's, are kept whole); single objects and the JSON
//! and protobuf watch streams of one window give the same bytes. (The
//! transcoder's own byte fidelity against the corpus, both ways, is tested
//! in `reflector/wire/tests/golden_transcode.rs`.)

use bytes::Bytes;
use kubecache_reflector::upstream::ListResponse;
use kubecache_testkit::golden::{self, read};
use kubecache_wire::Encoding;
use kubecache_wire::protobuf::{KubeVersion, WatchFrameDecoder, decode_unknown, message_type};
use kubecache_wire::{CachedObject, Transform, builtin_kind, decode_object, parse_watch_line};
use serde_json::Value;

/// The lists recorded in both encodings that kubecache reads in both:
/// `(json file, protobuf file, kind, apiVersion)`. Custom resources
/// (`widgets`) have no protobuf form; kinds without a protobuf schema
/// (`CustomResourceDefinition`) are asked for in JSON.
fn list_pairs() -> Vec<(String, String, String, String)> {
    golden::files("lists")
        .into_iter()
        .filter(|name| name.contains(".list.json") && !name.starts_with("widgets."))
        .filter_map(|json| {
            let pb = json.replace(".list.json", ".list.pb");
            let list: Value = serde_json::from_slice(&read(&format!("lists/{json}"))).unwrap();
            let kind = list["kind"].as_str()?.trim_end_matches("List").to_string();
            let api_version = list["apiVersion"].as_str()?.to_string();
            message_type(&api_version, &kind)?;
            Some((
                format!("lists/{json}"),
                format!("lists/{pb}"),
                kind,
                api_version,
            ))
        })
        .collect()
}

/// The corpus's server's Kubernetes version (1.28), as kubecache learns
/// it from `/version`: protobuf is read as its Go types wrote it.
fn corpus_version() -> KubeVersion {
    KubeVersion::from_version_json(&read("version.json")).expect("the corpus's /version")
}

/// The objects of one list body, read as the reflector reads a page.
fn decode_page(body: Vec<u8>, encoding: Encoding, kind: &str, api_version: &str) -> Page {
    let response = ListResponse::new(Bytes::from(body), encoding, corpus_version());
    let page = response.page().expect("the page decodes");
    let mut objects = Vec::new();
    let mut items = Vec::new();
    page.for_each_json(|item| {
        objects.push(
            decode_object(item, kind, api_version, &Transform::keep_everything())
                .expect("the item decodes"),
        );
        items.push(item.to_vec());
        Ok(())
    })
    .expect("every item decodes");
    Page {
        resource_version: page.resource_version,
        objects,
        items,
    }
}

struct Page {
    resource_version: u64,
    objects: Vec<CachedObject>,
    /// Each item's JSON as the page reader gave it.
    items: Vec<Vec<u8>>,
}

/// A stored object as kubecache serves it in a list: without `kind` and
/// `apiVersion` for a built-in kind, whole for a custom resource.
fn as_list_item(object: &CachedObject, kind: &str, api_version: &str) -> Vec<u8> {
    if builtin_kind(api_version, kind) {
        [&b"{"[..], &object.without_type_meta()].concat()
    } else {
        object.json.to_vec()
    }
}

#[test]
fn every_list_decodes_to_the_same_objects_over_json_and_over_protobuf() {
    let pairs = list_pairs();
    assert!(pairs.len() >= 29, "the corpus has its lists: {pairs:?}");
    for (json_file, pb_file, kind, api_version) in pairs {
        let (kind, api_version) = (kind.as_str(), api_version.as_str());
        let json_body = read(&json_file);
        let list: Value = serde_json::from_slice(&json_body).unwrap();
        let from_json = decode_page(json_body.clone(), Encoding::Json, kind, api_version);
        let from_pb = decode_page(read(&pb_file), Encoding::Protobuf, kind, api_version);
        assert_eq!(
            from_json.resource_version.to_string(),
            list["metadata"]["resourceVersion"].as_str().unwrap(),
            "{json_file}"
        );
        assert_eq!(
            from_pb.resource_version, from_json.resource_version,
            "{pb_file}"
        );
        let items = list["items"].as_array().unwrap();
        assert_eq!(from_json.objects.len(), items.len(), "{json_file}");
        assert_eq!(from_pb.objects.len(), items.len(), "{pb_file}");
        for ((json, pb), raw) in from_json
            .objects
            .iter()
            .zip(&from_pb.objects)
            .zip(&from_json.items)
        {
            let name = json.key.name();
            // The JSON path keeps the server's bytes: a list item is the
            // stored object without the `kind` and `apiVersion` it gained.
            assert!(
                as_list_item(json, kind, api_version) == *raw,
                "{json_file} {name}"
            );
            assert_eq!(pb.key, json.key, "{pb_file}");
            assert_eq!(
                pb.resource_version, json.resource_version,
                "{pb_file} {name}"
            );
            assert_eq!(pb.uid, json.uid, "{pb_file} {name}");
            assert_eq!(pb.labels, json.labels, "{pb_file} {name}");
            assert!(
                pb.json == json.json,
                "{pb_file} {name}:\n{}\n{}",
                String::from_utf8_lossy(&pb.json),
                String::from_utf8_lossy(&json.json)
            );
        }
    }
}

#[test]
fn custom_resources_and_crds_keep_the_api_servers_json_bytes() {
    for (file, kind, api_version) in [
        ("lists/widgets.list.json", "Widget", "golden.example.com/v1"),
        (
            "lists/customresourcedefinitions.list.json",
            "CustomResourceDefinition",
            "apiextensions.k8s.io/v1",
        ),
    ] {
        let page = decode_page(read(file), Encoding::Json, kind, api_version);
        assert!(!page.objects.is_empty(), "{file}");
        for (object, raw) in page.objects.iter().zip(&page.items) {
            assert!(
                as_list_item(object, kind, api_version) == *raw,
                "{file}:\n{}\n{}",
                String::from_utf8_lossy(&object.json),
                String::from_utf8_lossy(raw)
            );
        }
    }
}

#[test]
fn single_objects_decode_to_the_same_object_over_both_wires() {
    let names = golden::files("single")
        .into_iter()
        .filter(|name| name.ends_with(".pb"));
    let mut checked = 0;
    for pb_file in names {
        let json = read(&format!("single/{}", pb_file.replace(".pb", ".json")));
        let pb = read(&format!("single/{pb_file}"));
        let unknown = decode_unknown(&pb).expect("the envelope decodes");
        let transcoded = unknown.to_json().expect("a schema").expect("transcodes");
        let decode = |json: &[u8]| {
            decode_object(
                json,
                unknown.kind,
                unknown.api_version,
                &Transform::keep_everything(),
            )
            .expect("decodes")
        };
        assert!(decode(&transcoded).json == decode(&json).json, "{pb_file}");
        checked += 1;
    }
    assert!(checked >= 8, "{checked} objects");
}

/// `(type, namespace/name, resourceVersion, the object's JSON bytes)`.
type Seen = (String, String, String, Vec<u8>);

fn seen(event_type: &str, bytes: &[u8]) -> Seen {
    let object: Value = serde_json::from_slice(bytes).unwrap();
    let meta = &object["metadata"];
    (
        event_type.to_string(),
        format!(
            "{}/{}",
            meta["namespace"].as_str().unwrap_or(""),
            meta["name"].as_str().unwrap_or("")
        ),
        meta["resourceVersion"].as_str().unwrap().to_string(),
        bytes.to_vec(),
    )
}

#[test]
fn json_and_protobuf_watch_streams_of_one_window_decode_to_the_same_events() {
    for (json_file, pb_file) in [
        ("watch/pods.watch.json.gz", "watch/pods.watch.pb.gz"),
        ("watch/configmaps.watch.json", "watch/configmaps.watch.pb"),
        (
            "watch/configmaps.watchlist-initial-events.json",
            "watch/configmaps.watchlist-initial-events.pb",
        ),
    ] {
        let json_body = read(json_file);
        let mut from_json: Vec<Seen> = json_body
            .split_inclusive(|b| *b == b'\n')
            .map(|line| {
                let line = parse_watch_line(line).expect("the line parses");
                seen(line.event_type.as_str(), line.object)
            })
            .collect();
        let mut frames = WatchFrameDecoder::new();
        frames.push(&read(pb_file));
        let mut from_pb = Vec::new();
        while let Some(event) = frames.next_event().expect("the frame decodes") {
            let unknown = decode_unknown(&event.object).expect("the envelope decodes");
            let json = unknown.to_json().expect("a schema").expect("transcodes");
            from_pb.push(seen(&event.event_type, &json));
        }
        frames.finish().expect("no partial frame");
        if json_file.contains("watchlist") {
            // A streaming list's initial events come in no particular order.
            from_pb.sort_by(|a, b| (&a.2, &a.1).cmp(&(&b.2, &b.1)));
            from_json.sort_by(|a, b| (&a.2, &a.1).cmp(&(&b.2, &b.1)));
        }
        assert!(
            from_json.len() >= 5,
            "{json_file}: {} events",
            from_json.len()
        );
        assert_eq!(from_pb.len(), from_json.len(), "{pb_file}");
        for (pb, json) in from_pb.iter().zip(&from_json) {
            assert_eq!(pb, json, "{pb_file}");
        }
    }
}
