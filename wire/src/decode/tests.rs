//! The decoder against a serde_json::Value reference on a realistic Pod,
//! hostile input (every truncation, random mutations), and a throughput
//! measurement.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value};

use super::*;
use crate::{CachedObject, with_resource_version};

/// A realistic 6.7 KB Pod (5.5 KB compact): managedFields, labels,
/// annotations with escapes, two owners, numbers of every form, nested arrays.
const POD: &str = include_str!("pod_fixture.json");

fn pod() -> Value {
    serde_json::from_str(POD).expect("the fixture is JSON")
}

fn compact(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("a Value serializes")
}

fn without_type_meta(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.shift_remove("kind");
        o.shift_remove("apiVersion");
    }
    v
}

/// What [`decode_object`] must produce, computed the slow way: parse, remove
/// the paths, put kind and apiVersion first.
fn reference(input: &Value, kind: &str, api_version: &str, strip: &[&str]) -> Value {
    fn remove(v: &mut Value, segs: &[&str]) {
        match segs {
            [] => {}
            [last] => {
                if let Some(o) = v.as_object_mut() {
                    o.shift_remove(*last);
                }
            }
            [first, rest @ ..] => {
                if let Some(next) = v.as_object_mut().and_then(|o| o.get_mut(*first)) {
                    remove(next, rest);
                }
            }
        }
    }
    let mut v = input.clone();
    for path in strip {
        let path = FieldPath::parse(path).unwrap();
        remove(&mut v, &path.segments().collect::<Vec<_>>());
    }
    let mut out = Map::new();
    out.insert("kind".into(), kind.into());
    out.insert("apiVersion".into(), api_version.into());
    for (k, val) in v.as_object().unwrap() {
        if k != "kind" && k != "apiVersion" {
            out.insert(k.clone(), val.clone());
        }
    }
    Value::Object(out)
}

/// `decode_object` with `strip` added to the default transform.
fn decode_with(raw: &[u8], strip: &[&str]) -> Result<CachedObject, DecodeError> {
    let mut t = Transform::default();
    for path in strip {
        t = t.strip(path).unwrap();
    }
    decode_object(raw, "Pod", "v1", &t)
}

/// The object's JSON equals `expected`, key order included, and its type
/// meta prefix can be cut off.
fn assert_json(obj: &CachedObject, expected: &Value) {
    let ours: Value = serde_json::from_slice(&obj.json).unwrap_or_else(|e| {
        panic!(
            "output is not JSON ({e}): {}",
            String::from_utf8_lossy(&obj.json)
        )
    });
    assert_eq!(
        serde_json::to_string(&ours).unwrap(),
        serde_json::to_string(expected).unwrap(),
        "output differs from the reference"
    );
    let kind = expected["kind"].as_str().unwrap();
    let api_version = expected["apiVersion"].as_str().unwrap();
    let prefix = format!("{{\"kind\":{kind:?},\"apiVersion\":{api_version:?}");
    assert!(obj.json.starts_with(prefix.as_bytes()));
    let mut bare = b"{".to_vec();
    bare.extend_from_slice(&obj.without_type_meta());
    let bare: Value = serde_json::from_slice(&bare).expect("`{` + without_type_meta() is JSON");
    assert_eq!(
        serde_json::to_string(&bare).unwrap(),
        serde_json::to_string(&without_type_meta(expected)).unwrap()
    );
}

/// The fields read from `obj` equal those of `input` read the slow way.
fn assert_reads(obj: &CachedObject, input: &Value) {
    let meta = &input["metadata"];
    let s = |v: &Value| v.as_str().map(str::to_owned);
    let key = crate::ObjectKey::new(
        meta["namespace"].as_str().unwrap_or(""),
        meta["name"].as_str().unwrap(),
    );
    assert_eq!(obj.key, key);
    assert_eq!(
        obj.resource_version,
        meta["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    );
    assert_eq!(
        Some(obj.uid.to_string()),
        s(&meta["uid"]).or(Some(String::new()))
    );
    assert_eq!(obj.generation, meta["generation"].as_i64());
    let labels: BTreeMap<&str, &str> = meta["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
                .collect()
        })
        .unwrap_or_default();
    let ours: Vec<(&str, &str)> = obj.labels.iter().map(|(k, v)| (&**k, &**v)).collect();
    assert_eq!(ours, labels.into_iter().collect::<Vec<_>>());
    let annotations: BTreeMap<&str, &str> = meta["annotations"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
                .collect()
        })
        .unwrap_or_default();
    let mut h = DefaultHasher::new();
    annotations.len().hash(&mut h);
    for (k, v) in &annotations {
        k.hash(&mut h);
        v.hash(&mut h);
    }
    assert_eq!(obj.annotations_hash, h.finish(), "annotations hash");
    let owners: Vec<&str> = meta["ownerReferences"]
        .as_array()
        .map(|a| a.iter().filter_map(|o| o["uid"].as_str()).collect())
        .unwrap_or_default();
    let ours: Vec<&str> = obj.owner_uids.iter().map(|u| &**u).collect();
    assert_eq!(ours, owners);
}

#[test]
fn a_realistic_pod_decodes_to_the_serde_json_reference_minus_managed_fields() {
    let input = pod();
    for raw in [POD.as_bytes().to_vec(), compact(&input)] {
        let obj = decode_with(&raw, &[]).unwrap();
        assert_json(
            &obj,
            &reference(&input, "Pod", "v1", &["metadata.managedFields"]),
        );
        assert_reads(&obj, &input);
    }
    let obj = decode_with(&compact(&input), &[]).unwrap();
    assert_eq!(obj.key.as_str(), "shop/checkout-6f9c7d5b8-q4zxw");
    assert_eq!(obj.resource_version, 184467);
    assert_eq!(obj.generation, Some(3));
    assert_eq!(obj.label("app.kubernetes.io/name"), Some("checkout"));
    assert_eq!(obj.owner_uids.len(), 2);
    // From serde_json's own compact form, the output is byte for byte what
    // serde_json writes for the reference.
    let expected = compact(&reference(&input, "Pod", "v1", &["metadata.managedFields"]));
    assert_eq!(obj.json, expected);
}

#[test]
fn keep_everything_copies_the_object_and_only_moves_type_meta_first() {
    let mut input = pod();
    // Type meta last in the input: the output still starts with it.
    let o = input.as_object_mut().unwrap();
    let kind = o.shift_remove("kind").unwrap();
    o.insert("kind".into(), kind);
    let raw = compact(&input);
    let obj = decode_object(&raw, "Pod", "v1", &Transform::keep_everything()).unwrap();
    assert_json(&obj, &reference(&input, "Pod", "v1", &[]));
    assert_eq!(obj.json.len(), raw.len());
}

#[test]
fn the_same_object_gives_the_same_bytes_with_or_without_type_meta() {
    let input = pod();
    let with = compact(&input);
    let without = compact(&without_type_meta(&input));
    for strip in [
        &[][..],
        &["status"],
        &["spec.containers", "metadata.labels"],
    ] {
        let a = decode_with(&with, strip).unwrap();
        let b = decode_with(&without, strip).unwrap();
        assert_eq!(a.json, b.json, "strip {strip:?}");
        assert_eq!(a.type_meta_len, b.type_meta_len);
        assert_eq!(
            &a.json[..a.type_meta_len],
            br#"{"kind":"Pod","apiVersion":"v1","#
        );
        assert_eq!(a.annotations_hash, b.annotations_hash);
    }
}

#[test]
fn a_builtin_kinds_kind_and_api_version_come_from_the_arguments() {
    let raw = br#"{"metadata":{"name":"a","resourceVersion":"1"}}"#;
    let obj = decode_object(raw, "ConfigMap", "v1", &Transform::default()).unwrap();
    assert_eq!(
        &obj.json[..],
        br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"1"}}"#
    );
    assert_eq!(
        &obj.without_type_meta()[..],
        br#""metadata":{"name":"a","resourceVersion":"1"}}"#
    );
}

#[test]
fn a_custom_resource_keeps_its_bytes_and_key_order() {
    // As the API server writes a custom resource: keys sorted, so
    // `apiVersion` before `kind`, in list items too.
    let raw = br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","resourceVersion":"1","managedFields":[]},"spec":{"b":1,"a":[null,1.50]}}"#;
    let obj = decode_object(raw, "Widget", "example.com/v1", &Transform::default()).unwrap();
    assert_eq!(
        &obj.json[..],
        br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","resourceVersion":"1"},"spec":{"b":1,"a":[null,1.50]}}"#
    );
    assert_eq!(obj.type_meta_len, 0);
    // A CustomResourceDefinition is a built-in kind.
    let crd = br#"{"metadata":{"name":"widgets.example.com","resourceVersion":"1"}}"#;
    let obj = decode_object(
        crd,
        "CustomResourceDefinition",
        "apiextensions.k8s.io/v1",
        &Transform::default(),
    )
    .unwrap();
    assert!(obj.json.starts_with(
        br#"{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1","metadata""#
    ));
}

#[test]
fn stripping_nested_paths_rewrites_only_the_objects_that_hold_them() {
    let input = pod();
    let raw = compact(&input);
    for strip in [
        &["spec.containers"][..],
        &["status"],
        &["metadata"][..0],
        &["spec.securityContext.fsGroup"],
        &["metadata.annotations[\"kubectl.kubernetes.io/last-applied-configuration\"]"],
        &[
            "metadata.labels",
            "metadata.annotations",
            "metadata.ownerReferences",
        ],
        &["spec.volumes", "spec.x-scores", "status.qosClass"],
        &["metadata.generateName", "metadata.finalizers"],
        &[
            "spec.x-scores.matrix",
            "spec.x-scores.ratio",
            "spec.containers.image",
        ],
        &[
            "status.phase",
            "status",
            "nothing.here",
            "spec.nodeName.deeper",
        ],
    ] {
        let mut all = vec!["metadata.managedFields"];
        all.extend_from_slice(strip);
        let obj = decode_with(&raw, strip).unwrap();
        assert_json(&obj, &reference(&input, "Pod", "v1", &all));
        assert_reads(&obj, &input);
    }
    // Removing the only key of an object leaves `{}`; untouched siblings are
    // copied byte for byte.
    let obj = decode_with(&raw, &["spec.securityContext.fsGroup"]).unwrap();
    let text = String::from_utf8(obj.json.to_vec()).unwrap();
    assert!(text.contains(
        r#""nodeName":"node-17.eu-west-1.compute.internal","securityContext":{},"schedulerName""#
    ));
}

#[test]
fn stripping_the_first_the_last_or_every_key_keeps_commas_valid() {
    let raw = br#"{ "metadata" : {"name":"a","resourceVersion":"1"} , "a" : {"x":1,"y":[2],"z":{}} , "b" : 2 }"#;
    let input: Value = serde_json::from_slice(raw).unwrap();
    for strip in [
        &["a.x"][..],
        &["a.z"],
        &["a.y"],
        &["a.x", "a.z"],
        &["a.x", "a.y", "a.z"],
        &["a"],
        &["b"],
        &["a", "b"],
    ] {
        let obj = decode_with(raw, strip).unwrap();
        assert_json(&obj, &reference(&input, "Pod", "v1", strip));
    }
    let obj = decode_with(raw, &["a", "b"]).unwrap();
    assert_eq!(
        &obj.json[..],
        br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"1"}}"#
    );
    let obj = decode_with(raw, &["a.x", "a.y", "a.z"]).unwrap();
    assert!(obj.json.ends_with(br#","a":{},"b" : 2}"#), "{:?}", obj.json);
}

#[test]
fn index_fields_read_strings_numbers_and_booleans_and_nothing_else() {
    let raw = POD.as_bytes();
    let mut t = Transform::default().strip("status").unwrap();
    for path in [
        "spec.nodeName",
        "status.phase",
        "spec.priority",
        "spec.x-scores.tiny",
        "spec.enableServiceLinks",
        "spec.securityContext",
        "spec.containers",
        "spec.overhead",
        "spec.missing",
        "spec.nodeName.deeper",
        "metadata.name",
        "metadata.labels.tier",
        "metadata.annotations.description",
    ] {
        t = t.index_field(path).unwrap();
    }
    let obj = decode_object(raw, "Pod", "v1", &t).unwrap();
    let fields: Vec<Option<&str>> = obj.fields.iter().map(|f| f.as_deref()).collect();
    assert_eq!(
        fields,
        [
            Some("node-17.eu-west-1.compute.internal"),
            Some("Running"),
            Some("-10"),
            Some("2.5E-3"),
            Some("true"),
            None,
            None,
            None,
            None,
            None,
            Some("checkout-6f9c7d5b8-q4zxw"),
            Some("backend"),
            Some(
                "Café checkout — handles \"orders\" and C:\\payments\\ / rocket 🚀 and raw é 日本"
            ),
        ]
    );
    assert!(
        !obj.json.windows(8).any(|w| w == b"\"status\""),
        "status was stripped after it was read"
    );
}

#[test]
fn escaped_keys_and_values_are_read_unescaped() {
    let raw = br#"{"metadata":{"n\u0061me":"caf\u00e9","resourceVersion":"\u0031\u0032","labels":{"k\u00e9y":"v\"q","a":"1"},"ownerReferences":[{"\u0075id":"o\/1"},{"name":"no-uid"},{"uid":null}]}}"#;
    let obj = decode_object(raw, "Pod", "v1", &Transform::default()).unwrap();
    assert_eq!(obj.key.as_str(), "café");
    assert_eq!(obj.resource_version, 12);
    let labels: Vec<(&str, &str)> = obj.labels.iter().map(|(k, v)| (&**k, &**v)).collect();
    assert_eq!(labels, [("a", "1"), ("kéy", "v\"q")]);
    assert_eq!(&*obj.owner_uids, [Box::<str>::from("o/1")]);
    assert_eq!(&*obj.uid, "");
    assert_eq!(obj.generation, None);
}

#[test]
fn repeated_keys_read_like_serde_json_the_last_one_wins() {
    let raw = br#"{"metadata":{"name":"old","labels":{"a":"1","a":"2"}},"metadata":{"name":"new","resourceVersion":"5","labels":{"b":"1","a":"3","b":"2"}}}"#;
    let obj = decode_object(raw, "Pod", "v1", &Transform::default()).unwrap();
    assert_eq!(obj.key.as_str(), "new");
    let labels: Vec<(&str, &str)> = obj.labels.iter().map(|(k, v)| (&**k, &**v)).collect();
    assert_eq!(labels, [("a", "3"), ("b", "2")]);
    let input: Value = serde_json::from_slice(raw).unwrap();
    assert_json(&obj, &reference(&input, "Pod", "v1", &[]));
}

#[test]
fn objects_without_what_the_store_needs_are_refused_naming_the_field() {
    for (raw, message) in [
        (&br#"{"metadata":{"resourceVersion":"1"}}"#[..], "missing `metadata.name`"),
        (br#"{"metadata":{"name":"a"}}"#, "missing `metadata.resourceVersion`"),
        (br#"{"spec":{}}"#, "missing `metadata.name`"),
        (br#"{"metadata":null}"#, "missing `metadata.name`"),
        (
            br#"{"metadata":{"name":"a","resourceVersion":"-1"}}"#,
            r#"invalid `metadata.resourceVersion` at byte 42: expected a decimal number, got "-1""#,
        ),
        (
            br#"{"metadata":{"name":"a","resourceVersion":"99999999999999999999"}}"#,
            r#"invalid `metadata.resourceVersion` at byte 42: expected a decimal number, got "99999999999999999999""#,
        ),
        (
            br#"{"metadata":{"name":1,"resourceVersion":"1"}}"#,
            "invalid `metadata.name` at byte 20: expected a string",
        ),
        (
            br#"{"metadata":{"name":"a","resourceVersion":"1","generation":1.5}}"#,
            "invalid `metadata.generation` at byte 59: expected an integer",
        ),
        (
            br#"{"metadata":{"name":"a","resourceVersion":"1","labels":{"app":true}}}"#,
            r#"invalid `metadata.labels["app"]` at byte 62: expected a string"#,
        ),
        (
            br#"{"metadata":{"name":"a","resourceVersion":"1","ownerReferences":[{"uid":7}]}}"#,
            "invalid `metadata.ownerReferences[0].uid` at byte 72: expected a string",
        ),
        (br#"[]"#, "malformed JSON at byte 0: expected an object"),
        (
            br#"{"metadata":{"name":"a","resourceVersion":"1"}} {}"#,
            "malformed JSON at byte 48: trailing characters after the JSON value",
        ),
        (
            br#"{"metadata":{"name":"a","resourceVersion":"1"},"spec":{"containers":[{"image":"x"}{}]}}"#,
            "malformed JSON at byte 82 (in `spec.containers`): expected `,` or `]` after an array element",
        ),
    ] {
        let err = decode_object(raw, "Pod", "v1", &Transform::default())
            .expect_err(&String::from_utf8_lossy(raw));
        assert_eq!(err.to_string(), message, "{}", String::from_utf8_lossy(raw));
    }
}

#[test]
fn truncating_the_pod_at_any_byte_is_an_error_never_a_panic() {
    let t = Transform::default()
        .index_field("spec.nodeName")
        .and_then(|t| t.strip("spec.securityContext.fsGroup"))
        .unwrap();
    let pretty = POD.trim_end().as_bytes();
    let raw = compact(&pod());
    for input in [pretty, &raw[..]] {
        for end in 0..input.len() {
            let cut = &input[..end];
            match decode_object(cut, "Pod", "v1", &t) {
                Err(DecodeError::Syntax { .. }) => {}
                other => panic!("cut at {end}: {other:?}"),
            }
            assert!(parse_watch_line(cut).is_err());
        }
    }
    let mut list = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"abc","remainingItemCount":3},"items":["#.to_vec();
    list.extend_from_slice(&compact(&without_type_meta(&pod())));
    list.push(b',');
    list.extend_from_slice(&raw);
    list.extend_from_slice(b"]}");
    assert_eq!(parse_list(&list).unwrap().items.len(), 2);
    for end in 0..list.len() {
        assert!(parse_list(&list[..end]).is_err(), "list cut at {end}");
    }
    let line = [&br#"{"type":"MODIFIED","object":"#[..], &raw, b"}"].concat();
    assert_eq!(parse_watch_line(&line).unwrap().object, &raw[..]);
    for end in 0..line.len() {
        assert!(parse_watch_line(&line[..end]).is_err(), "line cut at {end}");
    }
    // The key is still there for the log line when the rest is cut off.
    let cut = &raw[..raw.len() / 2];
    assert_eq!(
        peek_object_key(cut).map(|k| k.to_string()).as_deref(),
        Some("shop/checkout-6f9c7d5b8-q4zxw")
    );
    assert_eq!(peek_object_key(b"garbage"), None);
}

/// splitmix64: a deterministic generator for the randomized tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Bytes that mean something to a JSON scanner, and some that must not appear.
const INTERESTING: &[u8] =
    b"{}[]\":,\\ \n\t0123456789-+.eEtrufalsnu\x00\x01\x1f\x7f\x80\xbf\xc3\xa9\xe2\xed\xf0\xff";

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut m = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(m.len() + 1);
        let byte = if rng.below(4) == 0 {
            rng.next() as u8
        } else {
            INTERESTING[rng.below(INTERESTING.len())]
        };
        match rng.below(6) {
            0 | 1 if at < m.len() => m[at] = byte,
            2 => m.insert(at, byte),
            3 if at < m.len() => {
                m.remove(at);
            }
            4 => {
                let len = rng.below(64).min(m.len() - at.min(m.len()));
                let piece = m[at.min(m.len())..at.min(m.len()) + len].to_vec();
                let to = rng.below(m.len() + 1);
                m.splice(to..to, piece);
            }
            _ => m.truncate(at),
        }
    }
    m
}

#[test]
fn random_mutations_are_decoded_exactly_or_refused_as_serde_json_would() {
    let mut rng = Rng(0x6b75_6265_6361_6368);
    let raw = compact(&pod());
    let t = Transform::default()
        .strip("spec.securityContext.fsGroup")
        .and_then(|t| t.strip("status.conditions"))
        .and_then(|t| t.index_field("spec.nodeName"))
        .unwrap();
    let strip = [
        "metadata.managedFields",
        "spec.securityContext.fsGroup",
        "status.conditions",
    ];
    let (mut decoded, mut refused) = (0, 0);
    for round in 0..4000 {
        let m = if round % 50 == 49 {
            (0..rng.below(200)).map(|_| rng.next() as u8).collect()
        } else {
            mutate(&mut rng, &raw)
        };
        let theirs = serde_json::from_slice::<Value>(&m);
        match decode_object(&m, "Pod", "v1", &t) {
            Ok(obj) => {
                decoded += 1;
                let input = theirs.unwrap_or_else(|e| {
                    panic!(
                        "accepted what serde_json refuses ({e}): {}",
                        String::from_utf8_lossy(&m)
                    )
                });
                assert_json(&obj, &reference(&input, "Pod", "v1", &strip));
                assert_reads(&obj, &input);
            }
            Err(DecodeError::Syntax { .. }) => {
                refused += 1;
                assert!(
                    theirs.is_err(),
                    "refused what serde_json accepts: {}",
                    String::from_utf8_lossy(&m)
                );
            }
            Err(_) => refused += 1,
        }
        // The envelopes agree with serde_json on validity too.
        let line = [&br#"{"type":"ADDED","object":"#[..], &m, b"}"].concat();
        let ok = parse_watch_line(&line).is_ok();
        let valid = serde_json::from_slice::<Value>(&line).is_ok_and(|v| v["object"].is_object());
        assert_eq!(ok, valid, "{}", String::from_utf8_lossy(&line));
        let list = [
            &br#"{"metadata":{"resourceVersion":"1"},"items":["#[..],
            &m,
            b"]}",
        ]
        .concat();
        let ok = parse_list(&list).is_ok();
        let valid = serde_json::from_slice::<Value>(&list).is_ok_and(|v| {
            v["items"]
                .as_array()
                .is_some_and(|a| a.iter().all(Value::is_object))
        });
        assert_eq!(ok, valid, "{}", String::from_utf8_lossy(&list));
    }
    assert!(
        decoded > 100 && refused > 100,
        "{decoded} decoded, {refused} refused"
    );
}

/// A random JSON value whose objects draw keys from a small alphabet, so
/// that random paths hit.
fn random_value(rng: &mut Rng, depth: usize) -> Value {
    const KEYS: &[&str] = &["a", "b", "c", "kind", "x.y", "\u{e9}\"q"];
    match rng.below(if depth >= 4 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 1),
        2 => Value::from(rng.next() as i64 >> rng.below(64)),
        3 => Value::from((rng.next() % 100_000) as f64 / 7.0),
        4 => Value::from(
            [
                "",
                "v",
                "with \"quote\"",
                "caf\u{e9}",
                "tab\there",
                "\u{1f680}",
            ][rng.below(6)],
        ),
        5 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.below(5))
                .map(|_| {
                    (
                        KEYS[rng.below(KEYS.len())].to_owned(),
                        random_value(rng, depth + 1),
                    )
                })
                .collect(),
        ),
    }
}

/// A random path over the same alphabet.
fn random_path(rng: &mut Rng) -> String {
    const SEGMENTS: &[&str] = &["a", "b", "c", "[\"x.y\"]", "[\"\u{e9}\\\"q\"]"];
    let mut path = String::new();
    for i in 0..1 + rng.below(3) {
        let seg = SEGMENTS[rng.below(SEGMENTS.len())];
        if i > 0 && !seg.starts_with('[') {
            path.push('.');
        }
        path.push_str(seg);
    }
    path
}

#[test]
fn random_objects_with_random_strip_paths_and_index_fields_match_the_reference() {
    let mut rng = Rng(0x7374_7269_7021);
    for _ in 0..1500 {
        // A root object with the metadata the store needs somewhere among
        // random entries, serialized compact or pretty.
        let mut root = Map::new();
        let metadata_at = rng.below(4);
        for i in 0..4 {
            if i == metadata_at {
                let mut meta = serde_json::json!({"name": "n", "resourceVersion": "7"});
                if let Value::Object(extra) = random_value(&mut rng, 1) {
                    meta.as_object_mut().unwrap().extend(extra);
                }
                root.insert("metadata".into(), meta);
            } else {
                let key = ["a", "b", "c", "kind", "apiVersion"][rng.below(5)];
                root.insert(key.into(), random_value(&mut rng, 1));
            }
        }
        let generated = Value::Object(root);
        let raw = if rng.below(2) == 0 {
            compact(&generated)
        } else {
            serde_json::to_vec_pretty(&generated).unwrap()
        };
        // The reference reads the same bytes (serde_json does not read
        // every float back exactly as it wrote it).
        let input: Value = serde_json::from_slice(&raw).unwrap();
        let strip: Vec<String> = (0..rng.below(4)).map(|_| random_path(&mut rng)).collect();
        let index: Vec<String> = (0..rng.below(3)).map(|_| random_path(&mut rng)).collect();
        let mut t = Transform::keep_everything();
        for path in &strip {
            t = t.strip(path).unwrap();
        }
        for path in &index {
            t = t.index_field(path).unwrap();
        }
        let obj = decode_object(&raw, "ConfigMap", "v1", &t).unwrap();
        let strip: Vec<&str> = strip.iter().map(String::as_str).collect();
        assert_json(&obj, &reference(&input, "ConfigMap", "v1", &strip));
        for (path, got) in index.iter().zip(&obj.fields) {
            let path = FieldPath::parse(path).unwrap();
            let mut v = Some(&input);
            for seg in path.segments() {
                v = v.and_then(|v| v.as_object()).and_then(|o| o.get(seg));
            }
            match v {
                Some(Value::String(s)) => assert_eq!(got.as_deref(), Some(&**s), "{path}"),
                Some(v @ (Value::Number(_) | Value::Bool(_))) => {
                    // The JSON text, as written in the input.
                    let text = got.as_deref().unwrap_or_else(|| panic!("{path}: None"));
                    assert_eq!(&serde_json::from_str::<Value>(text).unwrap(), v, "{path}");
                }
                _ => assert_eq!(got, &None, "{path}"),
            }
        }
    }
}

#[test]
#[ignore = "a measurement: cargo test -p kubecache-reflector --release -- --ignored throughput --nocapture"]
fn throughput() {
    use std::hint::black_box;
    use std::time::{Duration, Instant};

    /// Time this thread has spent on a CPU: the machine is shared, and
    /// wall time would count the other tenants' turns.
    fn cpu_time() -> Option<Duration> {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        let ns = stat.split_whitespace().next()?.parse().ok()?;
        Some(Duration::from_nanos(ns))
    }

    fn rate(name: &str, bytes: usize, mut f: impl FnMut()) -> f64 {
        for _ in 0..50 {
            f();
        }
        let (wall, cpu) = (Instant::now(), cpu_time());
        let mut runs = 0u64;
        while wall.elapsed() < Duration::from_secs(2) {
            for _ in 0..20 {
                f();
            }
            runs += 20;
        }
        let secs = match (cpu, cpu_time()) {
            (Some(start), Some(end)) => (end - start).as_secs_f64(),
            _ => wall.elapsed().as_secs_f64(),
        };
        let mbps = bytes as f64 * runs as f64 / secs / 1e6;
        println!(
            "{name:<58} {mbps:>8.0} MB/s  {:>9.2} µs/run",
            secs * 1e6 / runs as f64
        );
        mbps
    }

    let raw = compact(&pod());
    let with_index = Transform::default()
        .index_field("spec.nodeName")
        .and_then(|t| t.index_field("status.phase"))
        .unwrap();
    println!("MB/s of input per second of CPU time of this thread");
    println!("one Pod, {} bytes compact:", raw.len());
    let ours = rate("decode_object (strip managedFields)", raw.len(), || {
        black_box(decode_object(black_box(&raw), "Pod", "v1", &Transform::default()).unwrap());
    });
    rate(
        "decode_object (+ index spec.nodeName, status.phase)",
        raw.len(),
        || {
            black_box(decode_object(black_box(&raw), "Pod", "v1", &with_index).unwrap());
        },
    );
    rate("decode_object (keep everything)", raw.len(), || {
        black_box(
            decode_object(black_box(&raw), "Pod", "v1", &Transform::keep_everything()).unwrap(),
        );
    });
    let theirs = rate("serde_json::from_slice::<Value>", raw.len(), || {
        black_box(serde_json::from_slice::<Value>(black_box(&raw)).unwrap());
    });
    rate(
        "serde_json Value + remove managedFields + to_vec",
        raw.len(),
        || {
            let mut v: Value = serde_json::from_slice(black_box(&raw)).unwrap();
            v["metadata"]
                .as_object_mut()
                .unwrap()
                .shift_remove("managedFields");
            black_box(serde_json::to_vec(&v).unwrap());
        },
    );
    rate("scan only (skip_value)", raw.len(), || {
        let mut sc = crate::scan::Scanner::new(black_box(&raw));
        black_box(sc.skip_value(0).unwrap());
    });

    let item = compact(&without_type_meta(&pod()));
    let mut list = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"abc","remainingItemCount":3},"items":["#.to_vec();
    for i in 0..500 {
        if i > 0 {
            list.push(b',');
        }
        list.extend_from_slice(&item);
    }
    list.extend_from_slice(b"]}");
    println!("a page of 500 Pods, {} bytes:", list.len());
    rate("parse_list", list.len(), || {
        black_box(parse_list(black_box(&list)).unwrap());
    });
    rate(
        "parse_list + decode_object of every item",
        list.len(),
        || {
            let page = parse_list(black_box(&list)).unwrap();
            for item in page.items {
                black_box(decode_object(item, "Pod", "v1", &Transform::default()).unwrap());
            }
        },
    );
    rate(
        "serde_json::from_slice::<Value> of the page",
        list.len(),
        || {
            black_box(serde_json::from_slice::<Value>(black_box(&list)).unwrap());
        },
    );
    println!("decode_object / serde_json Value: {:.1}x", ours / theirs);
}

#[test]
fn a_resource_version_is_restamped_in_place_wherever_metadata_stands() {
    // `metadata` last, the pattern inside a string, an escaped key before it.
    let json = br#"{"spec":{"x":"\"resourceVersion\":\"7\""},"metadata":{"name":"a","annotations":{"x":"\"resourceVersion\":\"7\""},"resourceVersion":"7","uid":"u"}}"#;
    let restamped = with_resource_version(json, 12).unwrap();
    let mut want: Value = serde_json::from_slice(json).unwrap();
    want["metadata"]["resourceVersion"] = "12".into();
    assert_eq!(serde_json::from_slice::<Value>(&restamped).unwrap(), want);
    assert_eq!(restamped.len(), json.len() + 1, "only the value changed");
    assert_eq!(with_resource_version(b"{}", 12), None);
    assert_eq!(
        with_resource_version(br#"{"metadata":{"resourceVersion":7}}"#, 12),
        None
    );
    assert_eq!(with_resource_version(b"{\"metadata\":", 12), None);
    let object = decode_with(json, &[]).unwrap().at_resource_version(12);
    assert_eq!(object.resource_version, 12);
    assert_eq!(
        serde_json::from_slice::<Value>(&object.json).unwrap()["metadata"]["resourceVersion"],
        "12"
    );
}
