//! Round trips, compatibility with the official schema (via prost and
//! `k8s-pb`), envelope, lists, watch framing, and hostile input.

use prost::Message as _;
use serde_json::{Value, json};

use super::*;

/// A realistic Pod (shared with the reflector's tests).
const POD: &str = include_str!("../../fixtures/pod.json");

const CONFIG_MAP: &str = r#"{"kind":"ConfigMap","apiVersion":"v1",
  "metadata":{"name":"web-config","namespace":"shop","uid":"11111111-2222-3333-4444-555555555555",
    "resourceVersion":"812","creationTimestamp":"2023-12-31T23:59:59Z"},
  "data":{"app.yaml":"port: 8080\nlog: info\n","empty":""},
  "binaryData":{"logo.png":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="},
  "immutable":false}"#;

const NAMESPACE: &str = r#"{"kind":"Namespace","apiVersion":"v1",
  "metadata":{"name":"shop","uid":"aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee","resourceVersion":"12",
    "creationTimestamp":"2023-06-01T00:00:00Z","labels":{"kubernetes.io/metadata.name":"shop"}},
  "spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}}"#;

const STATUS: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
  "message":"Pod \"web\" is invalid: spec.containers[0].image: Required value","reason":"Invalid",
  "details":{"name":"web","kind":"pods","causes":[{"reason":"FieldValueRequired",
    "message":"Required value","field":"spec.containers[0].image"}],"retryAfterSeconds":2},
  "code":422}"#;

const BOOKMARK: &str = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"23736","creationTimestamp":null},"spec":{"containers":null},"status":{}}"#;

fn ty(api_version: &str, kind: &str) -> MessageType {
    message_type(api_version, kind).unwrap_or_else(|| panic!("no message for {api_version} {kind}"))
}

/// Drops what has no protobuf form or is dropped on output: `null`, empty
/// strings, arrays and objects; and `kind`/`apiVersion` at the top.
fn normalize(v: Value) -> Value {
    fn walk(v: Value) -> Option<Value> {
        match v {
            Value::Null => None,
            Value::String(s) if s.is_empty() => None,
            Value::Array(a) => {
                let a: Vec<Value> = a
                    .into_iter()
                    .map(|v| walk(v).unwrap_or(Value::Null))
                    .collect();
                (!a.is_empty()).then_some(Value::Array(a))
            }
            Value::Object(o) => {
                let o: serde_json::Map<String, Value> = o
                    .into_iter()
                    .filter_map(|(k, v)| walk(v).map(|v| (k, v)))
                    .collect();
                (!o.is_empty()).then_some(Value::Object(o))
            }
            other => Some(other),
        }
    }
    let mut v = walk(v).unwrap_or(Value::Null);
    if let Value::Object(o) = &mut v {
        o.remove("kind");
        o.remove("apiVersion");
    }
    v
}

fn parse(json: &[u8]) -> Value {
    serde_json::from_slice(json).unwrap_or_else(|e| {
        panic!(
            "invalid JSON output ({e}): {}",
            String::from_utf8_lossy(json)
        )
    })
}

/// JSON -> proto -> JSON equals the input up to normalization; a second
/// round trip is byte-identical.
fn assert_round_trip(ty: MessageType, json: &str) -> Vec<u8> {
    let proto = json_to_proto(ty, json.as_bytes()).unwrap_or_else(|e| panic!("encode: {e}"));
    let back = proto_to_json(ty, &proto).unwrap_or_else(|e| panic!("decode: {e}"));
    assert_eq!(normalize(parse(&back)), normalize(parse(json.as_bytes())));
    let proto2 = json_to_proto(ty, &back).unwrap();
    assert_eq!(proto_to_json(ty, &proto2).unwrap(), back);
    proto
}

#[test]
fn kinds_and_their_lists_have_message_types() {
    assert_eq!(ty("v1", "Pod").full_name(), "k8s.io.api.core.v1.Pod");
    assert_eq!(
        ty("v1", "PodList").full_name(),
        "k8s.io.api.core.v1.PodList"
    );
    assert_eq!(
        ty("v1", "ConfigMapList").full_name(),
        "k8s.io.api.core.v1.ConfigMapList"
    );
    assert_eq!(
        ty("v1", "NamespaceList").full_name(),
        "k8s.io.api.core.v1.NamespaceList"
    );
    assert_eq!(
        ty("v1", "Status").full_name(),
        "k8s.io.apimachinery.pkg.apis.meta.v1.Status"
    );
    assert_eq!(
        ty("apps/v1", "Deployment").full_name(),
        "k8s.io.api.apps.v1.Deployment"
    );
    assert_eq!(
        ty("apps/v1", "DeploymentList").full_name(),
        "k8s.io.api.apps.v1.DeploymentList"
    );
    assert_eq!(message_type("v1", "Nope"), None);
    assert_eq!(
        message_type("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        None
    );
    assert_eq!(
        MessageType::from_full_name("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta")
            .map(MessageType::full_name),
        Some("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    );
}

#[test]
fn realistic_pod_round_trips() {
    let proto = assert_round_trip(ty("v1", "Pod"), POD);
    // Smaller than the compact JSON, as on a real server.
    let compact = serde_json::to_vec(&parse(POD.as_bytes())).unwrap();
    assert!(
        proto.len() * 10 < compact.len() * 7,
        "{} vs {}",
        proto.len(),
        compact.len()
    );
}

#[test]
fn pod_encoding_is_the_official_protobuf_schema() {
    use k8s_pb::api::core::v1 as core;
    let proto = json_to_proto(ty("v1", "Pod"), POD.as_bytes()).unwrap();
    let pod = core::Pod::decode(proto.as_slice()).expect("prost decodes our Pod");

    let meta = pod.metadata.as_ref().unwrap();
    assert_eq!(meta.name.as_deref(), Some("web-7d4b9c8f6d-x2k9p"));
    assert_eq!(meta.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        meta.creation_timestamp.and_then(|t| t.seconds),
        Some(1_704_164_645)
    );
    assert_eq!(meta.owner_references[0].controller, Some(true));
    let fields: Value =
        serde_json::from_slice(meta.managed_fields[0].fields_v1.as_ref().unwrap().raw()).unwrap();
    assert!(fields["f:spec"]["f:containers"].is_object());
    assert!(meta.annotations["note"].contains("\u{e9} and \n newline"));

    let spec = pod.spec.as_ref().unwrap();
    let images: Vec<_> = spec.containers.iter().map(|c| c.image()).collect();
    assert_eq!(
        images,
        [
            "registry.example.com/shop/web:1.4.2",
            "registry.example.com/tools/proxy:2.0"
        ]
    );
    let web = &spec.containers[0];
    let limits = &web.resources.as_ref().unwrap().limits;
    assert_eq!(limits["cpu"].string.as_deref(), Some("500m"));
    let liveness = web
        .liveness_probe
        .as_ref()
        .unwrap()
        .handler
        .as_ref()
        .unwrap();
    let port = liveness.http_get.as_ref().unwrap().port.as_ref().unwrap();
    assert_eq!((port.r#type, port.int_val), (Some(0), Some(8080)));
    let readiness = web
        .readiness_probe
        .as_ref()
        .unwrap()
        .handler
        .as_ref()
        .unwrap();
    let port = readiness.http_get.as_ref().unwrap().port.as_ref().unwrap();
    assert_eq!(
        (port.r#type, port.str_val.as_deref()),
        (Some(1), Some("http"))
    );
    assert_eq!(
        web.env[1]
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path(),
        "status.podIP"
    );
    assert_eq!(
        web.env[2]
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap()
            .optional,
        Some(false)
    );
    // Inline (embedded) Go structs are nested messages on the wire.
    let config = spec.volumes[0]
        .volume_source
        .as_ref()
        .unwrap()
        .config_map
        .as_ref()
        .unwrap();
    assert_eq!(
        config.local_object_reference.as_ref().unwrap().name(),
        "web-config"
    );
    assert_eq!(config.default_mode, Some(420));
    let projected = spec.volumes[1]
        .volume_source
        .as_ref()
        .unwrap()
        .projected
        .as_ref()
        .unwrap();
    let token = projected.sources[0].service_account_token.as_ref().unwrap();
    assert_eq!(token.expiration_seconds, Some(3607));
    assert_eq!(spec.tolerations[0].toleration_seconds, Some(300));
    assert_eq!(spec.tolerations[1].toleration_seconds, Some(0));
    assert_eq!(spec.automount_service_account_token, Some(false));
    assert_eq!(spec.priority, Some(0));
    assert_eq!(spec.node_name(), "node-17");

    let status = pod.status.as_ref().unwrap();
    assert_eq!(status.qos_class(), "Burstable");
    assert_eq!(status.pod_ips.len(), 2);
    let running = status.container_statuses[1]
        .state
        .as_ref()
        .unwrap()
        .running
        .as_ref()
        .unwrap();
    assert_eq!(
        running.started_at.and_then(|t| t.seconds),
        Some(1_704_164_651)
    );
    // Go's zero time: an empty message, as Go writes a non-pointer Time.
    let zero = status.conditions[0].last_probe_time.as_ref().unwrap();
    assert_eq!((zero.seconds, zero.nanos), (None, None));
}

#[test]
fn prost_encoded_pod_decodes_to_the_same_json() {
    // Bytes produced by another encoder (fields in tag order, not JSON order).
    let ours = json_to_proto(ty("v1", "Pod"), POD.as_bytes()).unwrap();
    let pod = k8s_pb::api::core::v1::Pod::decode(ours.as_slice()).unwrap();
    let theirs = pod.encode_to_vec();
    let back = proto_to_json(ty("v1", "Pod"), &theirs).unwrap();
    assert_eq!(normalize(parse(&back)), normalize(parse(POD.as_bytes())));
}

#[test]
fn config_map_namespace_and_status_round_trip() {
    let proto = assert_round_trip(ty("v1", "ConfigMap"), CONFIG_MAP);
    let cm = k8s_pb::api::core::v1::ConfigMap::decode(proto.as_slice()).unwrap();
    assert_eq!(&cm.binary_data["logo.png"][..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(cm.data["app.yaml"], "port: 8080\nlog: info\n");
    assert_eq!(cm.data["empty"], "");
    assert_eq!(cm.immutable, Some(false));

    let proto = assert_round_trip(ty("v1", "Namespace"), NAMESPACE);
    let ns = k8s_pb::api::core::v1::Namespace::decode(proto.as_slice()).unwrap();
    assert_eq!(ns.spec.unwrap().finalizers, ["kubernetes"]);

    let proto = assert_round_trip(ty("v1", "Status"), STATUS);
    let status =
        k8s_pb::apimachinery::pkg::apis::meta::v1::Status::decode(proto.as_slice()).unwrap();
    assert_eq!(status.code, Some(422));
    assert_eq!(
        status.details.unwrap().causes[0].field(),
        "spec.containers[0].image"
    );
}

#[test]
fn the_crates_status_type_transcodes() {
    let status = crate::Status::failure(410, "Expired", "too old resource version: 1700 (24223)");
    let json = serde_json::to_vec(&status).unwrap();
    let proto = json_to_proto(ty("v1", "Status"), &json).unwrap();
    let mut back = Vec::new();
    let tm = TypeMeta {
        api_version: "v1",
        kind: "Status",
    };
    proto_to_json_into(ty("v1", "Status"), &proto, Some(tm), &mut back).unwrap();
    let again: crate::Status = serde_json::from_slice(&back).unwrap();
    assert_eq!(again, status);
}

#[test]
fn bookmark_round_trips_and_keeps_kind_first() {
    let proto = assert_round_trip(ty("v1", "Pod"), BOOKMARK);
    let mut out = Vec::new();
    let tm = TypeMeta {
        api_version: "v1",
        kind: "Pod",
    };
    proto_to_json_into(ty("v1", "Pod"), &proto, Some(tm), &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"23736","creationTimestamp":null},"spec":{"containers":null},"status":{}}"#
    );
}

#[test]
fn strings_that_are_not_utf8_are_written_as_go_writes_them() {
    // Go's protobuf unmarshalling keeps a string's bytes unchecked, and its
    // JSON writes each byte that starts no UTF-8 sequence as U+FFFD: in a
    // string field, a map key and a map value.
    let json = br#"{"metadata":{"name":"XX","annotations":{"XYk":"XYv"},"finalizers":["XY"]}}"#;
    let mut proto = json_to_proto(ty("v1", "ConfigMap"), json).unwrap();
    for (from, to) in [(b"XX", [0xe2, 0x80]), (b"XY", [0xff, b'Y'])] {
        while let Some(at) = proto.windows(2).position(|w| w == from) {
            proto[at..at + 2].copy_from_slice(&to);
        }
    }
    assert_eq!(
        String::from_utf8(proto_to_json(ty("v1", "ConfigMap"), &proto).unwrap()).unwrap(),
        r#"{"metadata":{"name":"\ufffd\ufffd","creationTimestamp":null,"annotations":{"\ufffdYk":"\ufffdYv"},"finalizers":["\ufffdY"]}}"#
    );
}

/// `proto` with every `from` replaced by `to` (of the same length).
fn with_bytes(mut proto: Vec<u8>, replacements: &[(&[u8], &[u8])]) -> Vec<u8> {
    for (from, to) in replacements {
        assert_eq!(from.len(), to.len());
        while let Some(at) = proto.windows(from.len()).position(|w| w == *from) {
            proto[at..at + from.len()].copy_from_slice(to);
        }
    }
    proto
}

#[test]
fn a_config_map_with_invalid_utf8_in_its_data_round_trips_through_json_and_its_strings() {
    // Issue 41, section 3: `41 FF FE 42` in a ConfigMap's data, as the
    // `versions/` corpus created it over protobuf.
    let cm = ty("v1", "ConfigMap");
    let json = br#"{"metadata":{"name":"bad-utf8-fffe","namespace":"golden-v"},"data":{"fffe":"AXXB","valid-euro":"\u20ac ok"}}"#;
    let proto = with_bytes(
        json_to_proto(cm, json).unwrap(),
        &[(b"AXXB", b"A\xff\xfeB")],
    );
    let mut decoded = Vec::new();
    let strings = proto_to_json_with_strings(cm, &proto, None, &mut decoded)
        .unwrap()
        .expect("a string that is not UTF-8");
    assert_eq!(
        String::from_utf8(decoded.clone()).unwrap(),
        "{\"metadata\":{\"name\":\"bad-utf8-fffe\",\"namespace\":\"golden-v\",\"creationTimestamp\":null},\"data\":{\"fffe\":\"A\\ufffd\\ufffdB\",\"valid-euro\":\"\u{20ac} ok\"}}"
    );
    assert_eq!(
        format!("{strings:?}"),
        r#"[value "/data/fffe" = [41, ff, fe, 42]]"#
    );
    // JSON and its strings give the bytes back; JSON alone gives U+FFFD.
    let mut back = Vec::new();
    json_to_proto_with_strings(cm, &decoded, Some(&strings), &mut back).unwrap();
    assert_eq!(back, proto);
    let lossy = json_to_proto(cm, &decoded).unwrap();
    assert!(
        lossy.windows(8).any(|w| w == b"A\xef\xbf\xbd\xef\xbf\xbdB"),
        "U+FFFD without the strings"
    );
    // The strings apply only where the JSON still holds their replacement.
    let changed =
        br#"{"metadata":{"name":"bad-utf8-fffe","namespace":"golden-v"},"data":{"fffe":"AB"}}"#;
    let mut out = Vec::new();
    json_to_proto_with_strings(cm, changed, Some(&strings), &mut out).unwrap();
    assert_eq!(out, json_to_proto(cm, changed).unwrap());
    // A message whose strings are UTF-8 reports none.
    assert_eq!(
        proto_to_json_with_strings(cm, &json_to_proto(cm, json).unwrap(), None, &mut Vec::new()),
        Ok(None)
    );
}

#[test]
fn strings_that_are_not_utf8_are_found_anywhere_and_written_back_where_they_were() {
    // A value nested in a list of messages, a list item, a map key (which
    // moves in Go's key order: by bytes), an IntOrString, a string list.
    let pod = ty("v1", "Pod");
    let json = br#"{"metadata":{"name":"p","labels":{"Xb":"1","Ya":"2"},"finalizers":["ok","FX"]},"spec":{"containers":[{"name":"c","args":["a","AX/~"],"ports":[{"containerPort":80}],"readinessProbe":{"httpGet":{"port":"PX"}}}]}}"#;
    let proto = with_bytes(
        json_to_proto(pod, json).unwrap(),
        &[
            (b"Xb", b"\x80b"),
            (b"Ya", b"\xffa"),
            (b"FX", b"F\x80"),
            (b"AX/~", b"A\xe2/~"),
            (b"PX", b"P\xc0"),
        ],
    );
    let mut decoded = Vec::new();
    let strings = proto_to_json_with_strings(pod, &proto, None, &mut decoded)
        .unwrap()
        .unwrap();
    let mut found: Vec<String> = strings.iter().map(|s| format!("{s:?}")).collect();
    found.sort();
    assert_eq!(
        found,
        [
            "key \"/metadata/labels/\u{fffd}a\" = [ff, 61]",
            "key \"/metadata/labels/\u{fffd}b\" = [80, 62]",
            r#"value "/metadata/finalizers/1" = [46, 80]"#,
            r#"value "/spec/containers/0/args/1" = [41, e2, 2f, 7e]"#,
            r#"value "/spec/containers/0/readinessProbe/httpGet/port" = [50, c0]"#,
        ]
    );
    let value: Value = serde_json::from_slice(&decoded).unwrap();
    for string in strings.iter().filter(|s| !s.is_key()) {
        assert_eq!(
            value.pointer(string.pointer()),
            Some(&Value::from(string.replaced())),
            "{string:?}"
        );
    }
    // Go writes map keys in the order of their bytes, in JSON too: not the
    // order of the replaced keys, which the encoder sorts by their bytes.
    let labels: Vec<&String> = value["metadata"]["labels"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(labels, ["\u{fffd}b", "\u{fffd}a"]);
    let mut back = Vec::new();
    json_to_proto_with_strings(pod, &decoded, Some(&strings), &mut back).unwrap();
    assert_eq!(back, proto);

    // `ExtraValue` (a list of strings in JSON) in a map of a review.
    let review = ty("authorization.k8s.io/v1", "SubjectAccessReview");
    let json = br#"{"spec":{"user":"u","extra":{"k":["a","EX"]}}}"#;
    let proto = with_bytes(json_to_proto(review, json).unwrap(), &[(b"EX", b"E\xfe")]);
    let mut decoded = Vec::new();
    let strings = proto_to_json_with_strings(review, &proto, None, &mut decoded)
        .unwrap()
        .unwrap();
    assert_eq!(
        format!("{strings:?}"),
        r#"[value "/spec/extra/k/1" = [45, fe]]"#
    );
    let mut back = Vec::new();
    json_to_proto_with_strings(review, &decoded, Some(&strings), &mut back).unwrap();
    assert_eq!(back, proto);
}

#[test]
fn special_types_transcode_like_go() {
    // MicroTime and an IntOrString-free core Event.
    let event = r#"{"metadata":{"name":"e","namespace":"shop"},"involvedObject":{"kind":"Pod","name":"web"},
        "reason":"Pulled","eventTime":"2024-01-02T03:04:05.123456Z","count":3,"type":"Normal",
        "firstTimestamp":"2024-01-02T03:04:05Z","lastTimestamp":"2024-01-02T03:04:06Z"}"#;
    let proto = assert_round_trip(ty("v1", "Event"), event);
    let e = k8s_pb::api::core::v1::Event::decode(proto.as_slice()).unwrap();
    assert_eq!(e.event_time.unwrap().nanos, Some(123_456_000));

    // Duration (metrics.k8s.io PodMetrics.window), Quantity maps.
    let metrics = r#"{"metadata":{"name":"web"},"timestamp":"2024-01-02T03:04:05Z","window":"1m30s",
        "containers":[{"name":"web","usage":{"cpu":"12m","memory":"100Mi"}}]}"#;
    let metrics_ty =
        MessageType::from_full_name("k8s.io.metrics.pkg.apis.metrics.v1beta1.PodMetrics").unwrap();
    assert_round_trip(metrics_ty, metrics);

    // Time: fractions are dropped (Go keeps seconds), offsets become UTC, the
    // zero time becomes null; a bare number is a valid Quantity.
    let ns = r#"{"metadata":{"name":"a","creationTimestamp":"2024-01-02T05:04:05.9+02:00",
        "deletionTimestamp":"0001-01-01T00:00:00Z"}}"#;
    let proto = json_to_proto(ty("v1", "Namespace"), ns.as_bytes()).unwrap();
    let back = proto_to_json(ty("v1", "Namespace"), &proto).unwrap();
    assert_eq!(
        String::from_utf8(back).unwrap(),
        r#"{"metadata":{"name":"a","creationTimestamp":"2024-01-02T03:04:05Z","deletionTimestamp":null},"spec":{},"status":{}}"#
    );
    let quota = r#"{"spec":{"hard":{"pods":10,"cpu":"1.5"}}}"#;
    let proto = json_to_proto(ty("v1", "ResourceQuota"), quota.as_bytes()).unwrap();
    let back = proto_to_json(ty("v1", "ResourceQuota"), &proto).unwrap();
    assert_eq!(
        String::from_utf8(back).unwrap(),
        r#"{"metadata":{"creationTimestamp":null},"spec":{"hard":{"cpu":"1.5","pods":"10"}},"status":{}}"#
    );

    // RawExtension (ControllerRevision.data) keeps its JSON as is;
    // StringList wrappers (APIResource.verbs) are arrays.
    let rev = r#"{"metadata":{"name":"r"},"data":{"spec":{"template":{"a":[1,2.5,"x",null]}}},"revision":3}"#;
    assert_round_trip(ty("apps/v1", "ControllerRevision"), rev);
    let resources = r#"{"groupVersion":"v1","resources":[{"name":"pods","singularName":"pod",
        "namespaced":true,"kind":"Pod","verbs":["get","list","watch"],"shortNames":["po"]}]}"#;
    let rl = MessageType::from_full_name("k8s.io.apimachinery.pkg.apis.meta.v1.APIResourceList")
        .unwrap();
    assert_round_trip(rl, resources);
}

/// JSON -> protobuf -> JSON, as text.
fn through_protobuf(ty: MessageType, json: &str) -> String {
    let proto = json_to_proto(ty, json.as_bytes()).unwrap();
    String::from_utf8(proto_to_json(ty, &proto).unwrap()).unwrap()
}

#[test]
fn omitempty_zero_values_are_left_out_and_the_others_written() {
    // `namespace` and `image` are omitempty strings; a container's `name` is
    // not; `generation` is an omitempty int64.
    let json = r#"{"metadata":{"name":"x","namespace":"","generation":0},"spec":{"containers":[{"name":"","image":""}]}}"#;
    assert_eq!(
        through_protobuf(ty("v1", "Pod"), json),
        r#"{"metadata":{"name":"x","creationTimestamp":null},"spec":{"containers":[{"name":"","resources":{}}]},"status":{}}"#
    );
}

#[test]
fn pointers_on_the_wire_are_written_even_when_zero() {
    // A pointer set to "" or 0 differs from an absent one (a PVC's
    // storageClassName "" means "no class"; replicas 0 is not the default 1).
    let pvc = r#"{"metadata":{"name":"x"},"spec":{"storageClassName":"","resources":{}}}"#;
    assert_eq!(
        through_protobuf(ty("v1", "PersistentVolumeClaim"), pvc),
        r#"{"metadata":{"name":"x","creationTimestamp":null},"spec":{"resources":{},"storageClassName":""},"status":{}}"#
    );
    let deployment = r#"{"metadata":{"name":"d"},"spec":{"replicas":0}}"#;
    let back = through_protobuf(ty("apps/v1", "Deployment"), deployment);
    assert!(back.contains(r#""spec":{"replicas":0,"selector":null,"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":null}},"strategy":{}}"#), "{back}");
}

#[test]
fn absent_fields_without_omitempty_are_go_zero_values() {
    // A Role's `rules` and an EndpointSlice's `endpoints` are nil slices
    // without omitempty: `null`; a Container's `lastState` is a struct.
    assert_eq!(
        through_protobuf(
            ty("rbac.authorization.k8s.io/v1", "Role"),
            r#"{"metadata":{"name":"r"}}"#
        ),
        r#"{"metadata":{"name":"r","creationTimestamp":null},"rules":null}"#
    );
    assert_eq!(
        through_protobuf(
            ty("discovery.k8s.io/v1", "EndpointSlice"),
            r#"{"metadata":{"name":"e"},"addressType":"IPv4"}"#
        ),
        r#"{"metadata":{"name":"e","creationTimestamp":null},"addressType":"IPv4","endpoints":null,"ports":null}"#
    );
    let status = r#"{"status":{"containerStatuses":[{"name":"c"}]}}"#;
    let back = through_protobuf(ty("v1", "Pod"), status);
    assert!(back.contains(r#""containerStatuses":[{"name":"c","state":{},"lastState":{},"ready":false,"restartCount":0,"image":"","imageID":""}]"#), "{back}");
}

#[test]
fn volume_claim_templates_carry_the_type_meta_the_api_server_sets() {
    let sts = r#"{"metadata":{"name":"s"},"spec":{"volumeClaimTemplates":[{"kind":"PersistentVolumeClaim","apiVersion":"v1","metadata":{"name":"data"}}]}}"#;
    let back = through_protobuf(ty("apps/v1", "StatefulSet"), sts);
    assert!(back.contains(r#""volumeClaimTemplates":[{"kind":"PersistentVolumeClaim","apiVersion":"v1","metadata":{"name":"data","creationTimestamp":null},"spec":{"resources":{}},"status":{}}]"#), "{back}");
}

#[test]
fn the_encoder_writes_go_zero_values_in_field_number_order() {
    // ObjectMeta as Go writes it: name=1, generateName=2 "", namespace=3,
    // selfLink=4 "", uid=5 "", resourceVersion=6 "", generation=7 0,
    // creationTimestamp=8 (empty: the zero time); then labels=11, sorted.
    let json = r#"{"metadata":{"labels":{"b":"2","a":"1"},"namespace":"ns","name":"n"}}"#;
    let proto = json_to_proto(ty("v1", "ConfigMap"), json.as_bytes()).unwrap();
    let meta = [
        &[0x0a, 1, b'n'][..],
        &[0x12, 0],
        &[0x1a, 2, b'n', b's'],
        &[0x22, 0, 0x2a, 0, 0x32, 0, 0x38, 0, 0x42, 0],
        &[0x5a, 6, 0x0a, 1, b'a', 0x12, 1, b'1'],
        &[0x5a, 6, 0x0a, 1, b'b', 0x12, 1, b'2'],
    ]
    .concat();
    let mut want = vec![0x0a, meta.len() as u8];
    want.extend_from_slice(&meta);
    assert_eq!(proto, want);
}

#[test]
fn unknown_fields_are_errors_naming_their_path() {
    let json = r#"{"kind":"Pod","spec":{"containers":[{"name":"a"},{"name":"b","imagee":"x"}]}}"#;
    let err = json_to_proto(ty("v1", "Pod"), json.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        ProtoError::UnknownField {
            path: "spec.containers[1].imagee".into(),
            message: "k8s.io.api.core.v1.Container",
        }
    );
    // kind/apiVersion are only TypeMeta on kinds, not on nested messages.
    let err = json_to_proto(ty("v1", "Pod"), br#"{"spec":{"kind":"x"}}"#).unwrap_err();
    assert!(
        matches!(err, ProtoError::UnknownField { ref path, .. } if path == "spec.kind"),
        "{err}"
    );
    // A protobuf field number the schema lacks.
    let err =
        proto_to_json(ty("v1", "Namespace"), &[0x1a, 0x02, 0x08 | (9 << 3), 0x01]).unwrap_err();
    assert!(
        matches!(err, ProtoError::UnknownTag { tag: 9, ref path, .. } if path == "status"),
        "{err}"
    );
}

#[test]
fn invalid_values_are_errors_with_paths() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"metadata":{"creationTimestamp":"yesterday"}}"#,
            "invalid value at `metadata.creationTimestamp`",
        ),
        (
            r#"{"spec":{"containers":[{"ports":[{"containerPort":4294967296}]}]}}"#,
            "invalid value at `spec.containers[0].ports[0].containerPort`",
        ),
        (
            r#"{"metadata":{"labels":{"a":1}}}"#,
            "invalid JSON at `metadata.labels[\"a\"]`",
        ),
        (
            r#"{"spec":{"nodeName":true}}"#,
            "invalid JSON at `spec.nodeName`",
        ),
        (
            r#"{"spec":{"containers":[{"ports":[{"containerPort":1.5}]}]}}"#,
            "invalid JSON at `spec.containers[0].ports[0].containerPort`",
        ),
        (
            r#"{"spec":{"containers":{}}}"#,
            "invalid JSON at `spec.containers`",
        ),
        (
            r#"{"metadata":{"name":"x"}} trailing"#,
            "invalid JSON at ``",
        ),
        (r#"{"metadata":{"name":"x""#, "invalid JSON at `metadata`"),
        ("null", "invalid JSON at ``"),
    ];
    for (json, expected) in cases {
        let err = json_to_proto(ty("v1", "Pod"), json.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(expected), "{json}: {err}");
    }
    let err = json_to_proto(
        ty("v1", "ConfigMap"),
        br#"{"binaryData":{"k":"not base64!"}}"#,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid value at `binaryData[\"k\"]`: bad base64"),
        "{err}"
    );
    let err = json_to_proto(
        ty("v1", "Service"),
        br#"{"spec":{"ports":[{"targetPort":true}]}}"#,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid JSON at `spec.ports[0].targetPort`"),
        "{err}"
    );
    // The output buffer is untouched on error.
    let mut out = b"keep".to_vec();
    assert!(json_to_proto_into(ty("v1", "Pod"), br#"{"spec":{"x":1}}"#, &mut out).is_err());
    assert_eq!(out, b"keep");
}

#[test]
fn envelope_round_trips_and_matches_runtime_unknown() {
    let raw = json_to_proto(ty("v1", "Pod"), POD.as_bytes()).unwrap();
    let body = encode_unknown("v1", "Pod", &raw);
    assert_eq!(&body[..4], b"k8s\0");
    let unknown = decode_unknown(&body).unwrap();
    assert_eq!(
        (unknown.api_version, unknown.kind, unknown.raw),
        ("v1", "Pod", raw.as_slice())
    );
    assert_eq!((unknown.content_encoding, unknown.content_type), ("", ""));
    let official = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&body[4..]).unwrap();
    let type_meta = official.type_meta.unwrap();
    assert_eq!((type_meta.api_version(), type_meta.kind()), ("v1", "Pod"));
    assert_eq!(official.raw.as_deref(), Some(raw.as_slice()));
    assert_eq!(official.content_type.as_deref(), Some(""));

    let json = unknown.to_json().unwrap().unwrap();
    assert!(json.starts_with(br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-"#));
    assert_eq!(normalize(parse(&json)), normalize(parse(POD.as_bytes())));

    assert_eq!(
        decode_unknown(b"{\"kind\":\"Pod\"}"),
        Err(ProtoError::MissingMagic)
    );
    let mut into = vec![1, 2];
    encode_unknown_into("v1", "Pod", &raw, &mut into);
    assert_eq!(&into[2..], body.as_slice());
}

/// A shard selector, as a sharded list echoes it.
const HALF: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";

#[test]
fn list_bodies_are_built_from_encoded_items() {
    let pod = json_to_proto(ty("v1", "Pod"), POD.as_bytes()).unwrap();
    let bookmark = json_to_proto(ty("v1", "Pod"), BOOKMARK.as_bytes()).unwrap();
    let items = [pod.as_slice(), bookmark.as_slice(), pod.as_slice()];
    let meta = ListMeta {
        resource_version: "24000",
        continue_token: Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"),
        remaining_item_count: Some(1234),
        shard_selector: Some(HALF),
    };
    let mut body = Vec::new();
    encode_list_unknown("v1", "PodList", &meta, &items, &mut body);
    let unknown = decode_unknown(&body).unwrap();
    assert_eq!(unknown.kind, "PodList");

    let list = k8s_pb::api::core::v1::PodList::decode(unknown.raw).unwrap();
    let list_meta = list.metadata.unwrap();
    assert_eq!(list_meta.resource_version(), "24000");
    assert_eq!(list_meta.r#continue(), "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ");
    assert_eq!(list_meta.remaining_item_count, Some(1234));
    assert_eq!(list.items.len(), 3);
    assert_eq!(
        list.items[0].metadata.as_ref().unwrap().name(),
        "web-7d4b9c8f6d-x2k9p"
    );
    assert_eq!(
        list.items[1].metadata.as_ref().unwrap().resource_version(),
        "23736"
    );

    let mut raw = Vec::new();
    encode_list(&meta, &items, &mut raw);
    assert_eq!(raw, unknown.raw);
    let parts = decode_list(unknown.raw).unwrap();
    assert_eq!(parts.meta, meta);
    assert_eq!(parts.items, items);
    // Go writes `selfLink` and `continue` even when empty: an empty token is no token.
    let official = k8s_pb::apimachinery::pkg::apis::meta::v1::ListMeta {
        self_link: Some(String::new()),
        resource_version: Some("7".into()),
        r#continue: Some(String::new()),
        remaining_item_count: None,
    };
    let mut go_like = Vec::new();
    encode_list(&ListMeta::default(), &[pod.as_slice()], &mut go_like);
    let mut raw = vec![0x0a];
    super::wire::put_varint(&mut raw, official.encoded_len() as u64);
    raw.extend_from_slice(&official.encode_to_vec());
    raw.extend_from_slice(&go_like[go_like.len() - pod.len() - 3..]);
    let parts = decode_list(&raw).unwrap();
    assert_eq!(
        (parts.meta.resource_version, parts.meta.continue_token),
        ("7", None)
    );
    assert_eq!(parts.items, [pod.as_slice()]);
    assert!(decode_list(&raw[..raw.len() - 1]).is_err());

    let json = parse(&unknown.to_json().unwrap().unwrap());
    assert_eq!(json["kind"], "PodList");
    assert_eq!(
        json["metadata"],
        json!({"resourceVersion": "24000", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ", "remainingItemCount": 1234, "shardInfo": {"selector": HALF}})
    );
    assert_eq!(
        normalize(json["items"][2].clone()),
        normalize(parse(POD.as_bytes()))
    );

    // The last page: no continue, no remainingItemCount, no items.
    let mut body = Vec::new();
    let last = ListMeta {
        resource_version: "24000",
        ..ListMeta::default()
    };
    encode_list_unknown::<&[u8]>("v1", "PodList", &last, &[], &mut body);
    let json = parse(&decode_unknown(&body).unwrap().to_json().unwrap().unwrap());
    assert_eq!(
        json,
        json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "24000"}, "items": []})
    );
}

fn watch_stream() -> (Vec<(&'static str, Vec<u8>)>, Vec<u8>) {
    let pod = encode_unknown(
        "v1",
        "Pod",
        &json_to_proto(ty("v1", "Pod"), POD.as_bytes()).unwrap(),
    );
    let bookmark = encode_unknown(
        "v1",
        "Pod",
        &json_to_proto(ty("v1", "Pod"), BOOKMARK.as_bytes()).unwrap(),
    );
    let status = encode_unknown(
        "v1",
        "Status",
        &json_to_proto(ty("v1", "Status"), STATUS.as_bytes()).unwrap(),
    );
    let events = vec![
        ("ADDED", pod.clone()),
        ("MODIFIED", pod),
        ("BOOKMARK", bookmark),
        ("ERROR", status),
    ];
    let mut stream = Vec::new();
    for (t, object) in &events {
        encode_watch_event_into(t, object, &mut stream);
    }
    (events, stream)
}

#[test]
fn watch_frames_round_trip_in_any_chunking() {
    let (events, stream) = watch_stream();
    // The frame is a length prefix and a meta.v1.WatchEvent, as the official schema says.
    let first_len = u32::from_be_bytes(stream[..4].try_into().unwrap()) as usize;
    let official =
        k8s_pb::apimachinery::pkg::apis::meta::v1::WatchEvent::decode(&stream[4..4 + first_len])
            .unwrap();
    assert_eq!(official.r#type(), "ADDED");
    assert_eq!(official.object.unwrap().raw(), events[0].1.as_slice());
    assert_eq!(
        encode_watch_event("ADDED", &events[0].1),
        &stream[..4 + first_len]
    );

    let mut rng = Rng(7);
    for round in 0..50 {
        let mut decoder = WatchFrameDecoder::new();
        let mut got = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            let n = if round == 0 { 1 } else { 1 + rng.below(700) };
            let end = (at + n).min(stream.len());
            decoder.push(&stream[at..end]);
            at = end;
            while let Some(event) = decoder.next_event().unwrap() {
                got.push(event);
            }
        }
        decoder.finish().unwrap();
        assert_eq!(decoder.buffered(), 0);
        let got: Vec<(&str, &[u8])> = got
            .iter()
            .map(|e| (e.event_type.as_str(), &e.object[..]))
            .collect();
        let want: Vec<(&str, &[u8])> = events.iter().map(|(t, o)| (*t, o.as_slice())).collect();
        assert_eq!(got, want);
    }
}

#[test]
fn watch_decoder_reports_truncated_and_oversized_frames() {
    let (_, stream) = watch_stream();
    let mut decoder = WatchFrameDecoder::new();
    decoder.push(&stream[..stream.len() - 3]);
    let mut n = 0;
    while decoder.next_event().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 3);
    assert!(
        matches!(decoder.finish(), Err(ProtoError::TruncatedFrame { needed, buffered }) if needed == buffered + 3)
    );

    let mut decoder = WatchFrameDecoder::new();
    decoder.push(&[0, 0]);
    assert_eq!(decoder.next_event(), Ok(None));
    assert_eq!(
        decoder.finish(),
        Err(ProtoError::TruncatedFrame {
            buffered: 2,
            needed: 4
        })
    );

    let mut decoder = WatchFrameDecoder::with_max_frame_len(1000);
    decoder.push(&stream);
    let err = decoder.next_event().unwrap_err();
    assert!(
        matches!(err, ProtoError::FrameTooLarge { limit: 1000, .. }),
        "{err}"
    );
    assert_eq!(decoder.next_event(), Err(err.clone()), "errors are sticky");
    assert_eq!(decoder.finish(), Err(err));

    let mut decoder = WatchFrameDecoder::new();
    decoder.push(&[0xff, 0xff, 0xff, 0xff]);
    assert!(matches!(
        decoder.next_event(),
        Err(ProtoError::FrameTooLarge {
            len: 0xffff_ffff,
            ..
        })
    ));

    // A frame whose body is not a WatchEvent.
    let mut decoder = WatchFrameDecoder::new();
    decoder.push(&[0, 0, 0, 2, 0x08, 0x01]);
    assert!(decoder.next_event().is_err());
}

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Runs every decoder on `bytes`; none may panic, and a decoded document is valid JSON.
fn decode_everything(bytes: &[u8]) {
    for ty in [
        ty("v1", "Pod"),
        ty("v1", "PodList"),
        ty("v1", "ConfigMap"),
        ty("v1", "Status"),
    ] {
        if let Ok(json) = proto_to_json(ty, bytes) {
            parse(&json);
        }
    }
    if let Ok(unknown) = decode_unknown(bytes) {
        let _ = unknown.to_json();
    }
    let mut decoder = WatchFrameDecoder::with_max_frame_len(1 << 20);
    decoder.push(bytes);
    while let Ok(Some(_)) = decoder.next_event() {}
    let _ = decoder.finish();
    let _ = json_to_proto(ty("v1", "Pod"), bytes);
}

#[test]
fn hostile_input_is_an_error_never_a_panic() {
    let mut rng = Rng(0x5eed);
    let pod = json_to_proto(ty("v1", "Pod"), POD.as_bytes()).unwrap();
    let (_, stream) = watch_stream();
    let envelope = encode_unknown("v1", "Pod", &pod);

    // Every truncation of valid encodings.
    for valid in [&pod, &stream, &envelope] {
        for end in 0..valid.len() {
            decode_everything(&valid[..end]);
        }
    }
    // Every truncation of the JSON must be an encoding error.
    for end in 0..POD.len() - 1 {
        assert!(json_to_proto(ty("v1", "Pod"), &POD.as_bytes()[..end]).is_err());
    }
    // Random corruption of valid encodings and random bytes.
    for _ in 0..3000 {
        let mut bytes = match rng.below(3) {
            0 => pod.clone(),
            1 => envelope.clone(),
            _ => stream.clone(),
        };
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len());
            bytes[at] = rng.next() as u8;
        }
        decode_everything(&bytes);
        let random: Vec<u8> = (0..rng.below(300)).map(|_| rng.next() as u8).collect();
        decode_everything(&random);
    }
    // Deep nesting of a self-similar shape is bounded.
    let mut deep = Vec::new();
    for _ in 0..10_000 {
        let mut outer = vec![0x0a];
        super::wire::put_varint(&mut outer, deep.len() as u64);
        outer.extend_from_slice(&deep);
        deep = outer;
        if deep.len() > 100_000 {
            break;
        }
    }
    decode_everything(&deep);
}

/// Throughput on the realistic Pod (not a timing assertion; run with
/// `cargo test -p kubecache-reflector --release --lib protobuf::tests::throughput -- --ignored --nocapture`).
#[test]
#[ignore = "measurement, run by hand in release mode"]
fn throughput() {
    let json = serde_json::to_vec(&parse(POD.as_bytes())).unwrap();
    let pod = ty("v1", "Pod");
    let proto = json_to_proto(pod, &json).unwrap();
    let n = 20_000;
    let mut out = Vec::with_capacity(json.len() * 2);
    let start = std::time::Instant::now();
    for _ in 0..n {
        out.clear();
        json_to_proto_into(pod, &json, &mut out).unwrap();
    }
    let encode = start.elapsed();
    let start = std::time::Instant::now();
    for _ in 0..n {
        out.clear();
        proto_to_json_into(pod, &proto, None, &mut out).unwrap();
    }
    let decode = start.elapsed();
    let start = std::time::Instant::now();
    for _ in 0..n {
        let v: Value = serde_json::from_slice(&json).unwrap();
        std::hint::black_box(v);
    }
    let value = start.elapsed();
    let mb = (json.len() * n) as f64 / 1e6;
    println!(
        "pod: {} B JSON, {} B proto; encode {:.0} MB/s of JSON, decode {:.0} MB/s of JSON; serde_json::Value parse {:.0} MB/s",
        json.len(),
        proto.len(),
        mb / encode.as_secs_f64(),
        mb / decode.as_secs_f64(),
        mb / value.as_secs_f64(),
    );
}

/// The field numbers of a message, and the bytes of each message-typed one.
fn fields_of(message: &[u8]) -> Vec<(u32, &[u8])> {
    wire::Fields::new(message)
        .map(|item| match item.unwrap() {
            (tag, wire::WireValue::Len(bytes)) => (tag, bytes),
            (tag, _) => (tag, &[][..]),
        })
        .collect()
}

fn field(message: &[u8], tag: u32) -> Option<&[u8]> {
    fields_of(message)
        .into_iter()
        .find(|(t, _)| *t == tag)
        .map(|(_, b)| b)
}

#[test]
fn a_pod_written_for_1_28_has_no_observed_generation_and_one_for_1_36_has_them() {
    let pod = br#"{"metadata":{"name":"web"},"spec":{"containers":[]},
        "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#;
    let tags = |version: u32| {
        let raw = json_to_proto(ty("v1", "Pod").as_of(KubeVersion::new(version)), pod).unwrap();
        let status = field(&raw, 3).unwrap().to_vec();
        let condition = field(&status, 2).unwrap().to_vec();
        let tags = |m: &[u8]| fields_of(m).iter().map(|(t, _)| *t).collect::<Vec<_>>();
        (tags(&status), tags(&condition))
    };
    // PodStatus.observedGeneration is field 17, PodCondition's field 7: both
    // Kubernetes 1.33, both non-pointers Go writes even when zero.
    for version in [28, 32] {
        let (status, condition) = tags(version);
        assert!(
            !status.contains(&17) && !condition.contains(&7),
            "1.{version}"
        );
    }
    for version in [33, 36] {
        let (status, condition) = tags(version);
        assert!(
            status.contains(&17) && condition.contains(&7),
            "1.{version}"
        );
    }
    assert_eq!(ty("v1", "Pod").version(), KubeVersion::NEWEST);
    // Read back as either version, the JSON is the same: omitempty.
    let raw = json_to_proto(ty("v1", "Pod"), pod).unwrap();
    let as_28 = proto_to_json(ty("v1", "Pod").as_of(KubeVersion::new(28)), &raw).unwrap();
    assert_eq!(as_28, proto_to_json(ty("v1", "Pod"), &raw).unwrap());
}

#[test]
fn a_pod_failure_policy_read_for_1_28_writes_its_unset_fields_as_null_as_1_28_did() {
    let job = br#"{"metadata":{"name":"backup"},"spec":{"template":{"spec":{"containers":[]}},
        "podFailurePolicy":{"rules":[{"action":"FailJob","onExitCodes":{"operator":"In","values":[42]}}]}}}"#;
    let raw = json_to_proto(ty("batch/v1", "Job"), job).unwrap();
    let json = |version: u32| {
        let ty = ty("batch/v1", "Job").as_of(KubeVersion::new(version));
        let json: Value = serde_json::from_slice(&proto_to_json(ty, &raw).unwrap()).unwrap();
        json["spec"]["podFailurePolicy"]["rules"][0].clone()
    };
    assert_eq!(
        json(28),
        json!({"action":"FailJob","onExitCodes":{"containerName":null,"operator":"In","values":[42]},"onPodConditions":null})
    );
    for version in [29, 36] {
        assert_eq!(
            json(version),
            json!({"action":"FailJob","onExitCodes":{"operator":"In","values":[42]}})
        );
    }
}
