//! kubecache's ingest of a real kube-apiserver's bytes: the golden corpus in
//! `testdata/apiserver-golden` (kube-apiserver v1.28, see its README).
//!
//! Every list decodes, over JSON and over protobuf, through the reflector's
//! own page reader into the same stored objects, byte for byte; the JSON path
//! keeps the server's bytes (a built-in kind's list item is its stored
//! object without `kind`/`apiVersion`; a custom resource's, and a
//! CustomResourceDefinition's, are kept whole); single objects and the JSON
//! and protobuf watch streams of one window give the same bytes. (The
//! transcoder's own byte fidelity against the corpus, both ways, is tested
//! in `wire/tests/golden_transcode.rs`.)

use crate::common;

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

/// The streaming lists a real kube-apiserver v1.28.4 sent under churn
/// (`versions/`, group `watchlist`), replayed chunk by chunk into the
/// reflector with `auto`: the changes before the initial-events-end
/// bookmark (6–12 in each run with a writer, an ADDED among them in the
/// `mixed` runs) are applied with the initial objects, so the first list
/// succeeds, the store ends at the server's state, and the events after
/// the bookmark each reach the event log once, in order.
mod recorded_streaming_lists {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use kubecache_reflector::Strategy;
    use kubecache_reflector::upstream::RequestEncoding;
    use kubecache_testkit::golden;
    use kubecache_testkit::wait;
    use parking_lot::Mutex;
    use serde_json::Value;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::common;

    /// One recorded event: type, name, resourceVersion.
    type Recorded = (String, String, u64);

    struct Case {
        id: String,
        body: Vec<u8>,
        /// The body's chunks as they arrived: (milliseconds after the
        /// request, bytes).
        chunks: Vec<(f64, usize)>,
        events: Vec<Recorded>,
        /// The index of the initial-events-end bookmark in `events`.
        end: usize,
        protobuf: bool,
    }

    fn cases() -> Vec<Case> {
        let lines = |file: &str| -> Vec<Value> {
            String::from_utf8(golden::read(file))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        golden::json("versions/manifest.json")
            .as_array()
            .unwrap()
            .iter()
            .filter(|case| case["group"] == "watchlist")
            .map(|case| {
                let id = case["id"].as_str().unwrap().to_string();
                let stream = format!("versions/streams/{id}");
                let events: Vec<Recorded> = lines(&format!("{stream}.events.jsonl"))
                    .iter()
                    .map(|e| {
                        let rv = e["rv"].as_str().unwrap().parse().unwrap();
                        let name = e["name"].as_str().unwrap_or_default().to_string();
                        (e["type"].as_str().unwrap().to_string(), name, rv)
                    })
                    .collect();
                let end = lines(&format!("{stream}.events.jsonl"))
                    .iter()
                    .position(|e| e["initial_events_end"] == true)
                    .expect("every recorded streaming list reached its bookmark");
                Case {
                    body: golden::read(&format!(
                        "versions/{}",
                        case["body_file"].as_str().unwrap()
                    )),
                    chunks: lines(&format!("{stream}.chunks.jsonl"))
                        .iter()
                        .map(|c| {
                            (
                                c["t_ms"].as_f64().unwrap(),
                                c["size"].as_u64().unwrap() as usize,
                            )
                        })
                        .collect(),
                    protobuf: id.contains("-pb"),
                    id,
                    events,
                    end,
                }
            })
            .collect()
    }

    /// The objects' resourceVersions by name after `events`.
    fn state(events: &[Recorded]) -> BTreeMap<String, u64> {
        let mut state = BTreeMap::new();
        for (kind, name, rv) in events {
            match kind.as_str() {
                "ADDED" | "MODIFIED" => {
                    state.insert(name.clone(), *rv);
                }
                "DELETED" => {
                    state.remove(name);
                }
                _ => {}
            }
        }
        state
    }

    /// Answers the first streaming list with the recorded body, in its
    /// chunks and at a tenth of its pace, then ends it; every later watch
    /// (the reflector's resumption) is held open with nothing sent. Every
    /// request's target is logged.
    async fn replay(case: Arc<Case>) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        tokio::spawn(async move {
            loop {
                let (socket, _) = listener.accept().await.unwrap();
                tokio::spawn(answer(socket, case.clone(), log.clone()));
            }
        });
        (url, requests)
    }

    async fn answer(mut socket: TcpStream, case: Arc<Case>, log: Arc<Mutex<Vec<String>>>) {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        let target = String::from_utf8_lossy(&head)
            .split(' ')
            .nth(1)
            .unwrap_or_default()
            .to_string();
        let first = {
            let mut log = log.lock();
            log.push(target.clone());
            log.iter()
                .filter(|t| t.contains("sendInitialEvents"))
                .count()
                == 1
        };
        let media = if case.protobuf {
            "application/vnd.kubernetes.protobuf;stream=watch"
        } else {
            "application/json"
        };
        let headers = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {media}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        socket.write_all(headers.as_bytes()).await.unwrap();
        if !(first && target.contains("sendInitialEvents")) {
            // Held open: no event until the test ends.
            std::future::pending::<()>().await;
        }
        let (mut offset, mut at) = (0, 0.0);
        for &(t_ms, size) in &case.chunks {
            tokio::time::sleep(Duration::from_secs_f64((t_ms - at).max(0.0) / 10_000.0)).await;
            at = t_ms;
            let chunk = &case.body[offset..offset + size];
            offset += size;
            let framed = [format!("{size:x}\r\n").as_bytes(), chunk, b"\r\n"].concat();
            if socket.write_all(&framed).await.is_err() {
                return;
            }
        }
        let _ = socket.write_all(b"0\r\n\r\n").await;
    }

    #[tokio::test]
    async fn changes_before_the_initial_events_end_bookmark_are_applied_in_order() {
        let cases = cases();
        assert_eq!(cases.len(), 8, "the corpus's eight streaming lists");
        let mut before_bookmark = 0;
        for case in cases {
            let case = Arc::new(case);
            let bookmark_rv = case.events[case.end].2;
            let (url, requests) = replay(case.clone()).await;
            let wire = if case.protobuf {
                RequestEncoding::Protobuf
            } else {
                RequestEncoding::Json
            };
            let running = common::start(&url, Strategy::Auto, wire, 500);
            let last_rv = case.events.iter().map(|e| e.2).max().unwrap();
            wait::until(&format!("{}: ready at the last event", case.id), || {
                running.reader.is_ready() && running.reader.current_resource_version() >= last_rv
            })
            .await;
            let status = running.status.borrow().clone();
            assert_eq!(
                (
                    status.list_attempts,
                    status.lists,
                    status.failures,
                    status.strategy
                ),
                (1, 1, 0, "streaming"),
                "{}: one streaming list, no failure ({:?}); requests {:?}",
                case.id,
                status.last_error,
                requests.lock()
            );
            let held: BTreeMap<String, u64> = running
                .reader
                .snapshot()
                .range(None, None)
                .map(|o| (o.key.name().to_string(), o.resource_version))
                .collect();
            assert_eq!(held, state(&case.events), "{}: the server's state", case.id);
            let logged: Vec<Recorded> = running
                .reader
                .events_since(bookmark_rv)
                .unwrap()
                .iter()
                .map(|e| {
                    let name = e.object.key.name().to_string();
                    (e.kind.as_str().to_string(), name, e.object.resource_version)
                })
                .collect();
            let after: Vec<Recorded> = case.events[case.end + 1..].to_vec();
            assert_eq!(
                logged, after,
                "{}: every event after the bookmark once, in order",
                case.id
            );
            before_bookmark += case.events[..case.end]
                .iter()
                .filter(|e| e.0 == "MODIFIED")
                .count();
        }
        assert!(
            before_bookmark > 0,
            "the corpus has changes before its bookmarks"
        );
    }
}
