//! kubecache's ingest of a real kube-apiserver's bytes: the golden corpus in
//! `../shared/apiserver-golden` (kube-apiserver v1.28, see its README).
//!
//! Every list decodes, over JSON and over protobuf, through the reflector's
//! own page reader into the same objects; every protobuf item round-trips
//! through the transcoder (protobuf -> JSON -> protobuf -> JSON gives the same
//! JSON bytes; the protobuf bytes differ only in field order: Go writes fields
//! in tag order, the transcoder in the JSON's order); the JSON and protobuf
//! watch streams of one window decode to the same events. "The same" is equality of JSON values once Go's zero values are
//! dropped: protobuf carries the zero values of non-pointer fields that the
//! API server's JSON omits, and writing them back out exactly as the JSON
//! does is the transcoder's part of byte fidelity, not checked here. Nor is
//! the `kind`/`apiVersion` of objects embedded in others (a StatefulSet's
//! `volumeClaimTemplates`): the API server's JSON has them, its protobuf
//! cannot carry them (they are Go's TypeMeta, not message fields).

use std::io::Read;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kubecache_reflector::upstream::{Encoding, ListResponse};
use kubecache_wire::protobuf::{
    self, WatchFrameDecoder, decode_list, decode_unknown, json_to_proto, message_type,
};
use kubecache_wire::{CachedObject, Transform, decode_object, parse_watch_line};
use serde_json::Value;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/apiserver-golden")
}

/// A corpus file's bytes as the server sent them (`.gz` files were
/// compressed after recording).
fn read(relative: &str) -> Vec<u8> {
    let path = corpus().join(relative);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if relative.ends_with(".gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        bytes
    }
}

/// The lists recorded in both encodings that kubecache reads in both:
/// `(json file, protobuf file, kind, apiVersion)`. Custom resources
/// (`widgets`) have no protobuf form; kinds without a protobuf schema
/// (`CustomResourceDefinition`) are asked for in JSON.
fn list_pairs() -> Vec<(String, String, String, String)> {
    let mut pairs: Vec<_> = std::fs::read_dir(corpus().join("lists"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
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
        .collect();
    pairs.sort();
    pairs
}

/// `value` without Go's zero values (`""`, `0`, `false`, `null`, `{}`, `[]`),
/// recursively.
fn without_zero_values(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, without_zero_values(v)))
                .filter(|(_, v)| !is_zero(v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_zero_values).collect()),
        other => other,
    }
}

/// Where `a` and `b` first differ, for a failure message.
fn first_difference(a: &Value, b: &Value, at: String) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x
            .keys()
            .chain(y.keys())
            .find(|k| x.get(*k) != y.get(*k))
            .map(|k| match (x.get(k), y.get(k)) {
                (Some(p), Some(q)) => first_difference(p, q, format!("{at}.{k}")),
                (p, q) => format!("{at}.{k}: {p:?} != {q:?}"),
            })
            .unwrap_or_default(),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find(|(_, (p, q))| p != q)
            .map(|(i, (p, q))| first_difference(p, q, format!("{at}[{i}]")))
            .unwrap_or_default(),
        _ => format!("{at}: {a} != {b}"),
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// `value` with the `kind` and `apiVersion` of nested objects removed
/// (protobuf has no field for them; see the module doc).
fn without_nested_type_meta(mut value: Value) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("kind");
                map.remove("apiVersion");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    if let Value::Object(map) = &mut value {
        map.values_mut().for_each(strip);
    }
    value
}

/// The objects of one list body, read as the reflector reads a page.
fn decode_page(body: Vec<u8>, encoding: Encoding, kind: &str, api_version: &str) -> Page {
    let response = ListResponse::new(Bytes::from(body), encoding);
    let page = response.page().expect("the page decodes");
    let mut objects = Vec::new();
    page.for_each_json(|item| {
        objects.push(
            decode_object(item, kind, api_version, &Transform::keep_everything())
                .expect("the item decodes"),
        );
        Ok(())
    })
    .expect("every item decodes");
    Page {
        resource_version: page.resource_version,
        objects,
    }
}

struct Page {
    resource_version: u64,
    objects: Vec<CachedObject>,
}

fn json_of(object: &CachedObject) -> Value {
    without_zero_values(serde_json::from_slice(&object.json).unwrap())
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
        for ((json, pb), item) in from_json.objects.iter().zip(&from_pb.objects).zip(items) {
            let name = item["metadata"]["name"].as_str().unwrap();
            assert_eq!(json.key.name(), name, "{json_file}");
            assert_eq!(pb.key, json.key, "{pb_file}");
            assert_eq!(
                pb.resource_version, json.resource_version,
                "{pb_file} {name}"
            );
            assert_eq!(pb.uid, json.uid, "{pb_file} {name}");
            assert_eq!(pb.labels, json.labels, "{pb_file} {name}");
            // The JSON path keeps the server's bytes; list items of built-in
            // kinds gain only `kind` and `apiVersion`.
            let mut want = item.clone();
            want["kind"] = kind.into();
            want["apiVersion"] = api_version.into();
            assert_eq!(
                json_of(json),
                without_zero_values(want),
                "{json_file} {name}"
            );
            let pb = without_nested_type_meta(json_of(pb));
            let json = without_nested_type_meta(json_of(json));
            assert!(
                pb == json,
                "{pb_file} {name}: {}",
                first_difference(&pb, &json, String::new())
            );
        }
    }
}

#[test]
fn every_protobuf_list_item_round_trips_through_json_to_the_servers_bytes() {
    let mut items = 0;
    for (_, pb_file, kind, api_version) in list_pairs() {
        let ty = message_type(&api_version, &kind).expect("listed pairs have a schema");
        let body = read(&pb_file);
        let unknown = decode_unknown(&body).expect("the envelope decodes");
        for item in decode_list(unknown.raw).expect("the list decodes").items {
            let json = protobuf::proto_to_json(ty, item).expect("the item transcodes");
            let back = json_to_proto(ty, &json).expect("its JSON transcodes back");
            let again = protobuf::proto_to_json(ty, &back).expect("and forth again");
            assert!(
                again == json,
                "{pb_file}: item {items} round-trips:\n{}\n{}",
                String::from_utf8_lossy(&json),
                String::from_utf8_lossy(&again),
            );
            assert_eq!(
                back.len(),
                item.len(),
                "{pb_file}: item {items}: same fields"
            );
            items += 1;
        }
    }
    assert!(items > 400, "{items} items");
}

#[test]
fn single_objects_decode_to_the_same_object_over_both_wires() {
    let names = std::fs::read_dir(corpus().join("single"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".pb"));
    let mut checked = 0;
    for pb_file in names {
        let json: Value = serde_json::from_slice(&read(&format!(
            "single/{}",
            pb_file.replace(".pb", ".json")
        )))
        .unwrap();
        let pb = read(&format!("single/{pb_file}"));
        let unknown = decode_unknown(&pb).expect("the envelope decodes");
        assert_eq!(unknown.kind, json["kind"], "{pb_file}");
        let transcoded = unknown.to_json().expect("a schema").expect("transcodes");
        let object = decode_object(
            &transcoded,
            unknown.kind,
            unknown.api_version,
            &Transform::keep_everything(),
        )
        .expect("decodes");
        assert_eq!(json_of(&object), without_zero_values(json), "{pb_file}");
        checked += 1;
    }
    assert!(checked >= 8, "{checked} objects");
}

/// `(type, namespace/name, resourceVersion, object without zero values)`.
type Seen = (String, String, String, Value);

fn seen(event_type: &str, object: &[u8]) -> Seen {
    let object: Value = serde_json::from_slice(object).unwrap();
    let meta = &object["metadata"];
    (
        event_type.to_string(),
        format!(
            "{}/{}",
            meta["namespace"].as_str().unwrap_or(""),
            meta["name"].as_str().unwrap_or("")
        ),
        meta["resourceVersion"].as_str().unwrap().to_string(),
        without_zero_values(object),
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
