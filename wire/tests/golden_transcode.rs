//! The transcoder against a real kube-apiserver's bytes: the golden corpus in
//! `testdata/apiserver-golden` (kube-apiserver v1.28, see its README), whose
//! lists, single objects and watch streams were recorded in both encodings
//! at the same resourceVersion.
//!
//! Protobuf -> JSON gives exactly the API server's JSON bytes (key order,
//! omitted zero values, `null`s, times, quantities, trailing newline), and
//! JSON -> protobuf exactly its protobuf bytes (Go's field order and zero
//! values), for every built-in kind in the corpus, written as the Go types
//! of the corpus's server (Kubernetes 1.28, from its `/version`) with no
//! allowance. Kinds without protobuf
//! are left out: custom resources (`widgets`, answered 406 in protobuf) and
//! CustomResourceDefinitions (kubecache reads them in JSON; see
//! `protobuf/mod.rs`).

use std::collections::HashMap;

use kubecache_testkit::golden::{self, read};
use kubecache_wire::protobuf::{
    KubeVersion, TypeMeta, WatchFrameDecoder, decode_unknown, encode_unknown, encode_watch_event,
    json_to_proto, json_to_proto_with_strings, message_type, proto_to_json_into,
    proto_to_json_with_strings,
};
use kubecache_wire::{Transform, decode_object};
use serde_json::Value;
use serde_json::value::RawValue;

/// `(protobuf file, JSON file)` of each list and single object recorded in
/// both encodings whose kind has a protobuf schema.
fn pairs() -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for dir in ["lists", "single"] {
        for name in golden::files(dir) {
            let Some(stem) = name
                .strip_suffix(".pb.gz")
                .or_else(|| name.strip_suffix(".pb"))
            else {
                continue;
            };
            let gz = if name.ends_with(".gz") { ".gz" } else { "" };
            let json = format!("{dir}/{stem}.json{gz}");
            let value: Value = serde_json::from_slice(&read(&json)).unwrap();
            let (Some(api_version), Some(kind)) =
                (value["apiVersion"].as_str(), value["kind"].as_str())
            else {
                continue;
            };
            if message_type(api_version, kind).is_some() {
                pairs.push((format!("{dir}/{name}"), json));
            }
        }
    }
    pairs.sort();
    pairs
}

/// The JSON body for a protobuf body: the envelope's object with its `kind`
/// and `apiVersion`, and the newline of Go's `json.Encoder`.
fn transcode(pb: &[u8]) -> Vec<u8> {
    let unknown = decode_unknown(pb).expect("the envelope decodes");
    let ty = message_type(unknown.api_version, unknown.kind).expect("a schema");
    let type_meta = TypeMeta {
        api_version: unknown.api_version,
        kind: unknown.kind,
    };
    let mut json = Vec::new();
    proto_to_json_into(
        ty.as_of(corpus_version()),
        unknown.raw,
        Some(type_meta),
        &mut json,
    )
    .expect("transcodes");
    json.push(b'\n');
    json
}

/// The corpus's server's Kubernetes version (1.28), whose Go types the
/// transcoder writes as: the schema is 1.36's.
fn corpus_version() -> KubeVersion {
    KubeVersion::from_version_json(&read("version.json")).expect("the corpus's /version")
}

/// The protobuf body for a JSON body (an object with `kind` and `apiVersion`).
fn encode(json: &[u8]) -> Vec<u8> {
    let value: Value = serde_json::from_slice(json).unwrap();
    let (api_version, kind) = (
        value["apiVersion"].as_str().unwrap(),
        value["kind"].as_str().unwrap(),
    );
    let ty = message_type(api_version, kind).expect("a schema");
    let raw = json_to_proto(ty.as_of(corpus_version()), json).expect("encodes");
    encode_unknown(api_version, kind, &raw)
}

/// Where two byte strings first differ, with some context, for a failure.
fn difference(got: &[u8], want: &[u8]) -> String {
    let at = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    let context = |b: &[u8]| {
        String::from_utf8_lossy(&b[at.saturating_sub(80)..(at + 80).min(b.len())]).into_owned()
    };
    format!(
        "first difference at byte {at} (lengths {} and {}):\n got: {}\nwant: {}",
        got.len(),
        want.len(),
        context(got),
        context(want)
    )
}

#[test]
fn every_protobuf_list_and_object_transcodes_to_the_servers_json_bytes() {
    let pairs = pairs();
    assert!(
        pairs.len() >= 37,
        "the corpus has its lists and objects: {pairs:?}"
    );
    let mut failures = Vec::new();
    for (pb, json) in &pairs {
        let (got, want) = (transcode(&read(pb)), read(json));
        if got != want {
            failures.push(format!("{pb}: {}", difference(&got, &want)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_servers_json_list_and_object_encodes_to_its_protobuf_bytes() {
    let mut failures = Vec::new();
    for (pb, json) in &pairs() {
        let (got, want) = (encode(&read(json)), read(pb));
        if got != want {
            failures.push(format!("{json}: {}", difference(&got, &want)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The watch streams recorded in both encodings: `(protobuf, JSON)`.
const WATCHES: [(&str, &str); 4] = [
    ("watch/pods.watch.pb.gz", "watch/pods.watch.json.gz"),
    ("watch/configmaps.watch.pb", "watch/configmaps.watch.json"),
    (
        "watch/configmaps.watchlist-initial-events.pb",
        "watch/configmaps.watchlist-initial-events.json",
    ),
    ("watch/pods-meta.watch.pb", "watch/pods-meta.watch.json"),
];

/// Each frame of a protobuf watch stream: (type, the object's envelope).
fn frames(pb: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut decoder = WatchFrameDecoder::new();
    decoder.push(pb);
    let mut frames = Vec::new();
    while let Some(event) = decoder.next_event().expect("the frame decodes") {
        frames.push((event.event_type, event.object.to_vec()));
    }
    decoder.finish().expect("no partial frame");
    frames
}

/// Lines of a JSON watch stream, each with its newline.
fn lines(json: &[u8]) -> Vec<&[u8]> {
    json.split_inclusive(|b| *b == b'\n').collect()
}

#[test]
fn every_protobuf_watch_frame_transcodes_to_the_servers_json_line() {
    let mut failures = Vec::new();
    for (pb, json) in WATCHES {
        let json = read(json);
        let mut want = lines(&json);
        let mut got: Vec<Vec<u8>> = frames(&read(pb))
            .iter()
            .map(|(event_type, object)| {
                let unknown = decode_unknown(object).expect("the envelope decodes");
                let ty = message_type(unknown.api_version, unknown.kind)
                    .expect("a schema")
                    .as_of(corpus_version());
                let mut line = format!("{{\"type\":{event_type:?},\"object\":").into_bytes();
                let type_meta = TypeMeta {
                    api_version: unknown.api_version,
                    kind: unknown.kind,
                };
                proto_to_json_into(ty, unknown.raw, Some(type_meta), &mut line)
                    .expect("transcodes");
                line.extend_from_slice(b"}\n");
                line
            })
            .collect();
        assert_eq!(got.len(), want.len(), "{pb}");
        assert!(got.len() >= 5, "{pb}: {} events", got.len());
        if pb.contains("watchlist") {
            // A streaming list's initial events come in no particular order
            // (each of the two streams has its own): compared as sets.
            got.sort();
            want.sort();
        }
        for (n, (got, want)) in got.iter().zip(want).enumerate() {
            if got != want {
                failures.push(format!("{pb} event {n}: {}", difference(got, want)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_servers_json_watch_line_encodes_to_its_protobuf_frame() {
    let mut failures = Vec::new();
    for (pb, json) in WATCHES {
        let json = read(json);
        let mut got: Vec<Vec<u8>> = lines(&json)
            .into_iter()
            .map(|line| {
                let event: HashMap<String, Box<RawValue>> = serde_json::from_slice(line).unwrap();
                let event_type: String = serde_json::from_str(event["type"].get()).unwrap();
                let object = encode(event["object"].get().as_bytes());
                encode_watch_event(&event_type, &object)
            })
            .collect();
        let mut want: Vec<Vec<u8>> = {
            let body = read(pb);
            let mut frames = Vec::new();
            let mut at = 0;
            while at < body.len() {
                let len = u32::from_be_bytes(body[at..at + 4].try_into().unwrap()) as usize;
                frames.push(body[at..at + 4 + len].to_vec());
                at += 4 + len;
            }
            frames
        };
        assert_eq!(got.len(), want.len(), "{pb}");
        if pb.contains("watchlist") {
            // Initial events in no particular order: compared as sets.
            got.sort();
            want.sort();
        }
        for (n, (got, want)) in got.iter().zip(&want).enumerate() {
            if got != want {
                failures.push(format!("{pb} frame {n}: {}", difference(got, want)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Annotations carrying what Go's `encoding/json` escapes, as Go writes
/// them: `<`, `>`, `&`, U+2028, U+2029, 0x08, 0x0C and other controls, the
/// short escapes, and non-ASCII that stays as it is; in a key too. `a` and
/// `a<b` sort before the corpus's own annotation keys, as Go sorts a map.
const ESCAPED_ANNOTATIONS: &str = concat!(
    r#""a":"\u003c\u0026\u003e","#,
    r#""a\u003cb":"x \u2028\u2029 \u0008\u000c\u0001\u001f \"\\\n\r\t é 日本 🙂 \u003e/","#,
);

/// `json` with [`ESCAPED_ANNOTATIONS`] first in every object's annotations,
/// or `None` when nothing in it has annotations.
fn with_escaped_annotations(json: &[u8]) -> Option<Vec<u8>> {
    let text = String::from_utf8(json.to_vec()).unwrap();
    let with = text
        .replace(
            r#""annotations":{}"#,
            &format!(
                r#""annotations":{{{}}}"#,
                ESCAPED_ANNOTATIONS.trim_end_matches(',')
            ),
        )
        .replace(
            r#""annotations":{""#,
            &format!(r#""annotations":{{{ESCAPED_ANNOTATIONS}""#),
        );
    (with != text).then(|| with.into_bytes())
}

#[test]
fn strings_go_escapes_round_trip_through_protobuf_to_gos_bytes_in_every_corpus_object() {
    let mut tested = 0;
    let mut failures = Vec::new();
    for (_, json) in &pairs() {
        let Some(want) = with_escaped_annotations(&read(json)) else {
            continue;
        };
        // Over protobuf: the object's message, transcoded back.
        let got = transcode(&encode(&want));
        if got != want {
            failures.push(format!("{json} over protobuf: {}", difference(&got, &want)));
        }
        // Over JSON: what the reflector stores of the server's bytes.
        if json.starts_with("single/") {
            let value: Value = serde_json::from_slice(&want).unwrap();
            let (api_version, kind) = (value["apiVersion"].as_str(), value["kind"].as_str());
            let object = decode_object(
                want.trim_ascii_end(),
                kind.unwrap(),
                api_version.unwrap(),
                &Transform::keep_everything(),
            )
            .unwrap();
            if object.json != want.trim_ascii_end() {
                failures.push(format!(
                    "{json} over JSON: {}",
                    difference(&object.json, &want)
                ));
            }
        }
        tested += 1;
    }
    assert!(tested >= 15, "{tested} objects with annotations");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Raw JSON kept as a client sent it (a `runtime.RawExtension` stores the
/// request's bytes, and protobuf carries them as they are), written as
/// kube-apiserver writes it to JSON: Go's `compact` with HTML escaping, the
/// rest of the object as Go writes strings.
#[test]
fn raw_json_comes_out_compacted_and_escaped_as_go_writes_a_marshalers_output() {
    let raw = "{ \"note\" : \"<&> \u{2028}\u{2029} \\b\\u0041 é 日本\",\n  \"n\": [1, 2] }";
    let sent = format!(
        r#"{{"kind":"ControllerRevision","apiVersion":"apps/v1","metadata":{{"name":"web-7d4b","namespace":"golden","uid":"0c7c1b9e-5d0b-4b3e-9a3e-1f2d3c4b5a69","resourceVersion":"1234","creationTimestamp":"2026-11-23T22:01:02Z","annotations":{{"a":"<&>"}},"managedFields":[{{"manager":"kubectl","operation":"Update","apiVersion":"apps/v1","time":"2026-11-23T22:01:02Z","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata": {{"f:annotations":{{".":{{}},"f:a<b":{{}}}}}}}}}}]}},"data":{raw},"revision":3}}"#
    );
    let want = concat!(
        r#"{"kind":"ControllerRevision","apiVersion":"apps/v1","metadata":{"name":"web-7d4b","namespace":"golden","uid":"0c7c1b9e-5d0b-4b3e-9a3e-1f2d3c4b5a69","resourceVersion":"1234","creationTimestamp":"2026-11-23T22:01:02Z","annotations":{"a":"\u003c\u0026\u003e"},"#,
        r#""managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"apps/v1","time":"2026-11-23T22:01:02Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:a\u003cb":{}}}}}]},"#,
        r#""data":{"note":"\u003c\u0026\u003e \u2028\u2029 \b\u0041 é 日本","n":[1,2]},"revision":3}"#,
        "\n"
    );
    let got = transcode(&encode(sent.as_bytes()));
    assert!(
        got == want.as_bytes(),
        "{}",
        difference(&got, want.as_bytes())
    );
    // Over JSON the reflector keeps the server's bytes, which are these.
    let stored = decode_object(
        want.trim_end().as_bytes(),
        "ControllerRevision",
        "apps/v1",
        &Transform::keep_everything(),
    )
    .unwrap();
    assert_eq!(stored.json, want.trim_end().as_bytes());
}

/// The `versions/` corpus's ConfigMaps created over protobuf with strings
/// that are not UTF-8 (issue 41, section 3; the corpus's README, group
/// `invalid-utf8`), each read back in protobuf and in JSON, and their list.
const INVALID_UTF8: [(&str, &str); 4] = [
    (
        "versions/bodies/utf8-get-bad-utf8-fffe-pb.pb",
        "versions/bodies/utf8-create-bad-utf8-fffe.json",
    ),
    (
        "versions/bodies/utf8-get-bad-utf8-lone-continuation-pb.pb",
        "versions/bodies/utf8-create-bad-utf8-lone-continuation.json",
    ),
    (
        "versions/bodies/utf8-get-bad-utf8-truncated-pb.pb",
        "versions/bodies/utf8-create-bad-utf8-truncated.json",
    ),
    (
        "versions/bodies/utf8-list-pb.pb",
        "versions/bodies/utf8-list-json.json",
    ),
];

#[test]
fn strings_that_are_not_utf8_are_go_s_replacement_in_json_and_their_bytes_back_in_protobuf() {
    for (pb_file, json_file) in INVALID_UTF8 {
        let pb = read(pb_file);
        let unknown = decode_unknown(&pb).expect("the envelope decodes");
        let ty = message_type(unknown.api_version, unknown.kind)
            .expect("a schema")
            .as_of(corpus_version());
        let type_meta = TypeMeta {
            api_version: unknown.api_version,
            kind: unknown.kind,
        };
        let mut json = Vec::new();
        let strings = proto_to_json_with_strings(ty, unknown.raw, Some(type_meta), &mut json)
            .expect("transcodes");
        json.push(b'\n');
        let recorded = read(json_file);
        assert!(
            json == recorded,
            "{pb_file}: {}",
            difference(&json, &recorded)
        );
        let strings = strings.unwrap_or_else(|| panic!("{pb_file} has strings that are not UTF-8"));
        for string in strings.iter() {
            assert!(std::str::from_utf8(string.bytes()).is_err(), "{string:?}");
        }
        // The recorded JSON and the strings give the recorded bytes back;
        // the JSON alone gives U+FFFD for each replaced byte.
        let mut raw = Vec::new();
        json_to_proto_with_strings(ty, &recorded, Some(&strings), &mut raw).expect("encodes");
        let body = encode_unknown(unknown.api_version, unknown.kind, &raw);
        assert!(body == pb, "{json_file}: {}", difference(&body, &pb));
        let without = json_to_proto(ty, &recorded).expect("encodes");
        assert!(without != unknown.raw, "{json_file}");
    }
}
