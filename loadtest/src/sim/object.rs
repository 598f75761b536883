//! One stored object version: its JSON pre-serialized once at write time, so
//! that lists and watches only copy bytes.
//!
//! A Go string holds any bytes, and the API server stores them: a string
//! that is not UTF-8 (written over protobuf) is kept as its bytes beside
//! the JSON ([`RawStrings`], as kubecache keeps them, through the wire
//! crate), which holds Go's replacement of it: its protobuf is the bytes,
//! its JSON `\ufffd` for each byte that starts no UTF-8 sequence.
//!
//! A lean store keeps the JSON packed ([`Packed`]) and makes the other
//! encodings again for each use, where a store keeps them once made.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::{Map, Value};

use kubecache_wire::protobuf::{self, RawStrings};

use super::packed::{Dictionary, Packed};
use super::resources::Resource;

/// An immutable object version as the API server stores it.
#[derive(Debug, Clone)]
pub struct StoredObject {
    /// `namespace/name`, or `name` for cluster-scoped objects: the etcd key
    /// below the resource prefix, which orders lists.
    pub key: String,
    /// The namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// The name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// The revision that wrote this version (its `metadata.resourceVersion`).
    pub revision: u64,
    /// `metadata.generation`, if the resource keeps one.
    pub generation: Option<i64>,
    /// The whole object as JSON (see [`StoredObject::json`]).
    json: Json,
    /// Length of the `{"kind":…,"apiVersion":…,` prefix: list items of
    /// built-in kinds leave it out, as the API server does.
    type_meta_len: usize,
    /// Labels, for label selectors.
    pub labels: Vec<(String, String)>,
    /// Values of the resource's extra field-selector labels, in the order of
    /// [`Resource::extra_fields`].
    pub fields: Vec<String>,
    /// The bytes of its strings that are not UTF-8, which its JSON holds
    /// Go's replacement of; `None` for almost every object.
    raw_strings: Option<Arc<RawStrings>>,
    /// The protobuf message, encoded on first use and kept (unless the
    /// JSON is packed).
    proto: OnceLock<Bytes>,
    /// The `PartialObjectMetadata` JSON and protobuf message, likewise.
    metadata_json: OnceLock<Bytes>,
    metadata_proto: OnceLock<Bytes>,
}

/// An object's JSON as kept.
#[derive(Debug, Clone)]
enum Json {
    /// As it is.
    Whole(Bytes),
    /// Packed, as a lean store keeps it: unpacked for each use.
    Packed(Packed),
}

impl StoredObject {
    /// Builds the stored form of `object`, whose metadata must already hold
    /// name, namespace and resourceVersion.
    pub fn new(resource: &Resource, object: Value, revision: u64) -> Arc<Self> {
        Self::with_strings(resource, object, revision, None)
    }

    /// [`StoredObject::new`], with the bytes of the strings of `object`
    /// that are not UTF-8 (`object` holds a replacement of each: U+FFFD
    /// for each byte that starts no UTF-8 sequence).
    pub fn with_strings(
        resource: &Resource,
        mut object: Value,
        revision: u64,
        raw_strings: Option<Arc<RawStrings>>,
    ) -> Arc<Self> {
        let map = object.as_object_mut().expect("objects are JSON objects");
        let meta = map
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let name = meta_str(&meta, "name");
        let namespace = meta_str(&meta, "namespace");
        let uid = meta_str(&meta, "uid");
        let generation = meta.get("generation").and_then(Value::as_i64);
        let labels = meta
            .get("labels")
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let fields = resource
            .extra_fields
            .iter()
            .map(|label| field_value(&object, label))
            .collect();
        let (json, type_meta_len) = serialize(resource, object, raw_strings.as_deref());
        let key = if namespace.is_empty() {
            name.clone()
        } else {
            format!("{namespace}/{name}")
        };
        Arc::new(StoredObject {
            key,
            namespace,
            name,
            uid,
            revision,
            generation,
            json: Json::Whole(json),
            type_meta_len,
            labels,
            fields,
            raw_strings,
            proto: OnceLock::new(),
            metadata_json: OnceLock::new(),
            metadata_proto: OnceLock::new(),
        })
    }

    /// This version as a lean store keeps it: its JSON packed against
    /// `dictionary`, its other encodings not kept.
    pub(crate) fn packed(self: Arc<Self>, dictionary: &Arc<Dictionary>) -> Arc<Self> {
        let json = Json::Packed(Packed::new(&self.json(), dictionary));
        let mut object = Arc::unwrap_or_clone(self);
        object.json = json;
        object.proto = OnceLock::new();
        object.metadata_json = OnceLock::new();
        object.metadata_proto = OnceLock::new();
        Arc::new(object)
    }

    /// The whole object as JSON, as the API server writes it (see
    /// `serialize`): `kind` and `apiVersion` first for built-in kinds.
    pub fn json(&self) -> Bytes {
        match &self.json {
            Json::Whole(json) => json.clone(),
            Json::Packed(packed) => packed.unpack(),
        }
    }

    /// The object as a JSON value (for writes, which are rare). A string
    /// that is not UTF-8 is Go's replacement of it: its bytes are
    /// [`raw_strings`](Self::raw_strings).
    pub fn to_value(&self) -> Value {
        serde_json::from_slice(&self.json()).expect("stored JSON parses")
    }

    /// The bytes of its strings that are not UTF-8.
    pub fn raw_strings(&self) -> Option<&Arc<RawStrings>> {
        self.raw_strings.as_ref()
    }

    /// The object as a list item: without `kind`/`apiVersion` for built-in
    /// kinds (the API server leaves them out), whole for custom resources.
    /// Returned as the two pieces to write one after the other.
    pub fn list_item(&self) -> (&'static [u8], Bytes) {
        let json = self.json();
        if self.type_meta_len == 0 {
            (b"", json)
        } else {
            (b"{", json.slice(self.type_meta_len..))
        }
    }

    /// The protobuf message bytes of this object (no envelope).
    pub fn proto(&self, resource: &Resource) -> Result<Bytes, String> {
        self.kept(&self.proto, || {
            super::encoding::object_to_proto(resource, &self.json(), self.raw_strings.as_deref())
        })
    }

    /// The `PartialObjectMetadata` protobuf message (no envelope) of the
    /// object's `metadata`.
    pub fn metadata_proto(&self) -> Result<Bytes, String> {
        self.kept(&self.metadata_proto, || {
            #[derive(serde::Deserialize)]
            struct Metadata<'a> {
                #[serde(borrow)]
                metadata: &'a serde_json::value::RawValue,
            }
            let whole = self.json();
            let object: Metadata<'_> =
                serde_json::from_slice(&whole).expect("stored objects have metadata");
            // Under `/metadata`, as in the object: its strings' places hold.
            let json = format!(r#"{{"metadata":{}}}"#, object.metadata.get());
            let mut encoded = Vec::new();
            protobuf::json_to_proto_with_strings(
                kubecache_wire::partial_object_metadata(),
                json.as_bytes(),
                self.raw_strings.as_deref(),
                &mut encoded,
            )
            .map_err(|e| format!("{} metadata does not encode as protobuf: {e}", self.key))?;
            Ok(Bytes::from(encoded))
        })
    }

    /// The object as a `meta.k8s.io/v1` `PartialObjectMetadata` in JSON.
    /// The API server decodes it into the Go struct and writes that, so it
    /// is the protobuf message transcoded: `ObjectMeta`'s field order and
    /// a null `creationTimestamp`, for custom resources too.
    pub fn metadata_json(&self) -> Result<Bytes, String> {
        self.kept(&self.metadata_json, || {
            let proto = self.metadata_proto()?;
            let type_meta = protobuf::TypeMeta {
                api_version: kubecache_wire::METADATA_API_VERSION,
                kind: "PartialObjectMetadata",
            };
            let mut json = Vec::new();
            protobuf::proto_to_json_into(
                kubecache_wire::partial_object_metadata(),
                &proto,
                Some(type_meta),
                &mut json,
            )
            .map_err(|e| format!("{} metadata does not transcode: {e}", self.key))?;
            Ok(Bytes::from(json))
        })
    }

    /// An encoding of the object, made by `make` once and kept in `cell`,
    /// or, when the JSON is packed, made again for each use.
    fn kept(
        &self,
        cell: &OnceLock<Bytes>,
        make: impl FnOnce() -> Result<Bytes, String>,
    ) -> Result<Bytes, String> {
        if let Some(bytes) = cell.get() {
            return Ok(bytes.clone());
        }
        let made = make()?;
        Ok(match self.json {
            Json::Whole(_) => cell.get_or_init(|| made).clone(),
            Json::Packed(_) => made,
        })
    }

    /// The value of a label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of a field-selector label; missing fields read as empty,
    /// as in Kubernetes.
    pub fn field(&self, resource: &Resource, label: &str) -> Option<&str> {
        match label {
            "metadata.name" => Some(&self.name),
            "metadata.namespace" => Some(&self.namespace),
            _ => resource
                .extra_fields
                .iter()
                .position(|f| *f == label)
                .map(|i| self.fields[i].as_str()),
        }
    }
}

fn meta_str(meta: &Map<String, Value>, key: &str) -> String {
    meta.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The string value at a dotted path, or empty.
fn field_value(object: &Value, label: &str) -> String {
    Resource::field_path(label)
        .try_fold(object, |v, seg| v.get(seg))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Serializes the object as the API server writes it. Returns the bytes,
/// and the type-meta prefix length (0 for custom resources, whose list
/// items keep their type meta). The protobuf message made on the way is
/// dropped: encoded again from the JSON when first asked for, it is the
/// same bytes, and a million pods would otherwise keep 4.6 GB of it.
///
/// The API server decodes a built-in kind into its Go struct and writes
/// that with `encoding/json`, so the object is encoded to protobuf and
/// transcoded back: Go's key order, `omitempty`, `null`s and zero structs,
/// the bytes a real API server serves (an object the protobuf schema
/// refuses keeps the plain form, and fails when asked for in protobuf). A
/// custom resource is an unstructured map in the API server, whose JSON has
/// its keys sorted at every level.
///
/// A built-in kind's `raw_strings` are written as their bytes in the
/// protobuf, so that its JSON holds Go's replacement of them (`\ufffd`),
/// where `object`, a serde value, holds U+FFFD, which Go writes as it is.
fn serialize(
    resource: &Resource,
    object: Value,
    raw_strings: Option<&RawStrings>,
) -> (Bytes, usize) {
    let Value::Object(mut map) = object else {
        unreachable!("objects are JSON objects")
    };
    map.shift_remove("kind");
    map.shift_remove("apiVersion");
    if !resource.builtin {
        let mut typed = Map::with_capacity(map.len() + 2);
        typed.insert("apiVersion".into(), Value::from(resource.api_version()));
        typed.insert("kind".into(), Value::from(resource.kind));
        typed.extend(map);
        let sorted = sorted_keys(Value::Object(typed));
        let json = super::go_json::to_vec(&sorted);
        return (Bytes::from(json), 0);
    }
    let mut ordered = Map::with_capacity(map.len() + 2);
    ordered.insert("kind".into(), Value::from(resource.kind));
    ordered.insert("apiVersion".into(), Value::from(resource.api_version()));
    ordered.extend(map);
    let json = super::go_json::to_vec(&Value::Object(ordered));
    // `{"kind":"Pod","apiVersion":"v1",` — the strings need no escaping.
    let type_meta_len =
        r#"{"kind":"","apiVersion":"","#.len() + resource.kind.len() + resource.api_version().len();
    let Ok(proto) = super::encoding::object_to_proto(resource, &json, raw_strings) else {
        return (Bytes::from(json), type_meta_len);
    };
    let ty = protobuf::message_type(resource.api_version(), resource.kind);
    let type_meta = protobuf::TypeMeta {
        api_version: resource.api_version(),
        kind: resource.kind,
    };
    let mut canonical = Vec::with_capacity(json.len());
    match ty.map(|ty| protobuf::proto_to_json_into(ty, &proto, Some(type_meta), &mut canonical)) {
        Some(Ok(())) => {
            // Kept for the object's life: no spare capacity.
            canonical.shrink_to_fit();
            (Bytes::from(canonical), type_meta_len)
        }
        _ => (Bytes::from(json), type_meta_len),
    }
}

/// `value` with the keys of every object sorted, as Go writes a map.
fn sorted_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sorted_keys(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted_keys).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::resources::{RESOURCES, ids};
    use serde_json::json;

    #[test]
    fn the_protobuf_encoded_again_from_the_stored_json_is_the_message_the_json_came_from() {
        let mut generator = crate::sim::data::Generator::new(
            crate::sim::data::GeneratorConfig {
                seed: 7,
                namespaces: 10,
                nodes: 20,
            },
            chrono::Utc::now(),
        );
        let resource = &RESOURCES[ids::PODS];
        for _ in 0..200 {
            let pod = generator.pod();
            let original = serde_json::to_vec(&pod).unwrap();
            let message = crate::sim::encoding::object_to_proto(resource, &original, None).unwrap();
            let stored = StoredObject::new(resource, pod, 7);
            assert_eq!(stored.proto(resource).unwrap(), message, "{}", stored.key);
        }
    }

    #[test]
    fn list_items_of_builtin_kinds_leave_out_type_meta_and_read_as_go_writes_them() {
        // Go's struct order, `omitempty`, a nil slice without it (`containers`),
        // zero structs and times, as the API server writes any Pod.
        let pod = json!({"spec": {"nodeName": "n1"}, "metadata": {"resourceVersion": "7", "name": "a", "namespace": "ns", "generateName": ""}});
        let stored = StoredObject::new(&RESOURCES[ids::PODS], pod, 7);
        assert_eq!(
            std::str::from_utf8(&stored.json()).unwrap(),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"7","creationTimestamp":null},"spec":{"containers":null,"nodeName":"n1"},"status":{}}"#
        );
        let (head, rest) = stored.list_item();
        assert_eq!(
            [head, &rest[..]].concat(),
            br#"{"metadata":{"name":"a","namespace":"ns","resourceVersion":"7","creationTimestamp":null},"spec":{"containers":null,"nodeName":"n1"},"status":{}}"#
        );
        assert_eq!(
            stored.field(&RESOURCES[ids::PODS], "spec.nodeName"),
            Some("n1")
        );
        assert_eq!(
            stored.field(&RESOURCES[ids::PODS], "status.phase"),
            Some("")
        );
        assert_eq!(stored.key, "ns/a");
    }

    #[test]
    fn custom_resources_keep_type_meta_in_list_items_and_sorted_keys() {
        let widget = json!({"metadata": {"name": "w", "namespace": "ns"}, "spec": {"size": 2, "color": "red"}});
        let stored = StoredObject::new(&RESOURCES[ids::WIDGETS], widget, 3);
        let (head, rest) = stored.list_item();
        assert!(head.is_empty());
        assert_eq!(
            std::str::from_utf8(&rest).unwrap(),
            r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"color":"red","size":2}}"#
        );
    }
}
