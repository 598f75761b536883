//! One stored object version: its JSON pre-serialized once at write time, so
//! that lists and watches only copy bytes.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::{Map, Value};

use super::resources::Resource;

/// Keys of `metadata` in the order the API server writes them (Go's
/// `ObjectMeta` field order); unknown keys follow in their own order.
const METADATA_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// An immutable object version as the API server stores it.
#[derive(Debug)]
pub struct StoredObject {
    /// `namespace/name`, or `name` for cluster-scoped objects: the etcd key
    /// below the resource prefix, which orders lists.
    pub key: String,
    /// The namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The revision that wrote this version (its `metadata.resourceVersion`).
    pub revision: u64,
    /// `metadata.generation`, if the resource keeps one.
    pub generation: Option<i64>,
    /// The whole object as JSON, `kind` and `apiVersion` first.
    pub json: Bytes,
    /// Length of the `{"kind":…,"apiVersion":…,` prefix: list items of
    /// built-in kinds leave it out, as the API server does.
    type_meta_len: usize,
    /// Labels, for label selectors.
    pub labels: Vec<(String, String)>,
    /// Values of the resource's extra field-selector labels, in the order of
    /// [`Resource::extra_fields`].
    pub fields: Vec<String>,
    /// The protobuf message, encoded on first use and kept.
    proto: OnceLock<Bytes>,
    /// The `PartialObjectMetadata` JSON and protobuf message, likewise.
    metadata_json: OnceLock<Bytes>,
    metadata_proto: OnceLock<Bytes>,
}

impl StoredObject {
    /// Builds the stored form of `object`, whose metadata must already hold
    /// name, namespace and resourceVersion.
    pub fn new(resource: &Resource, mut object: Value, revision: u64) -> Arc<Self> {
        let map = object.as_object_mut().expect("objects are JSON objects");
        let meta = map
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let name = meta_str(&meta, "name");
        let namespace = meta_str(&meta, "namespace");
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
        let (json, type_meta_len) = serialize(resource, object);
        let key = if namespace.is_empty() {
            name.clone()
        } else {
            format!("{namespace}/{name}")
        };
        Arc::new(StoredObject {
            key,
            namespace,
            name,
            revision,
            generation,
            json,
            type_meta_len,
            labels,
            fields,
            proto: OnceLock::new(),
            metadata_json: OnceLock::new(),
            metadata_proto: OnceLock::new(),
        })
    }

    /// The object as a JSON value (for writes, which are rare).
    pub fn to_value(&self) -> Value {
        serde_json::from_slice(&self.json).expect("stored JSON parses")
    }

    /// The object as a list item: without `kind`/`apiVersion` for built-in
    /// kinds (the API server leaves them out), whole for custom resources.
    /// Returned as the two pieces to write one after the other.
    pub fn list_item(&self) -> (&'static [u8], Bytes) {
        if self.type_meta_len == 0 {
            (b"", self.json.clone())
        } else {
            (b"{", self.json.slice(self.type_meta_len..))
        }
    }

    /// The protobuf message bytes of this object (no envelope), encoded once.
    pub fn proto(&self, resource: &Resource) -> Result<Bytes, String> {
        if let Some(bytes) = self.proto.get() {
            return Ok(bytes.clone());
        }
        let encoded = super::encoding::object_to_proto(resource, &self.json)?;
        Ok(self.proto.get_or_init(|| encoded).clone())
    }

    /// The object as a `meta.k8s.io/v1` `PartialObjectMetadata` in JSON
    /// (its `kind` and `apiVersion` first, then the object's `metadata` as
    /// stored), made once.
    pub fn metadata_json(&self) -> Bytes {
        self.metadata_json
            .get_or_init(|| {
                #[derive(serde::Deserialize)]
                struct Metadata<'a> {
                    #[serde(borrow)]
                    metadata: &'a serde_json::value::RawValue,
                }
                let object: Metadata<'_> =
                    serde_json::from_slice(&self.json).expect("stored objects have metadata");
                Bytes::from(format!(
                    r#"{{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{}}}"#,
                    object.metadata.get()
                ))
            })
            .clone()
    }

    /// The `PartialObjectMetadata` protobuf message (no envelope), made once.
    pub fn metadata_proto(&self) -> Result<Bytes, String> {
        if let Some(bytes) = self.metadata_proto.get() {
            return Ok(bytes.clone());
        }
        let ty = kubecache_wire::partial_object_metadata();
        let json = self.metadata_json();
        // `PartialObjectMetadata` has no TypeMeta in protobuf: only its
        // `metadata` is encoded.
        let metadata =
            &json[br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","#.len()..];
        let encoded = kubecache_wire::protobuf::json_to_proto(ty, &[b"{", metadata].concat())
            .map(Bytes::from)
            .map_err(|e| format!("{} metadata does not encode as protobuf: {e}", self.key))?;
        Ok(self.metadata_proto.get_or_init(|| encoded).clone())
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

/// Serializes with `kind`, `apiVersion`, `metadata` first and metadata keys
/// in the API server's order. Returns the bytes and the type-meta prefix
/// length (0 for custom resources, whose list items keep their type meta).
fn serialize(resource: &Resource, object: Value) -> (Bytes, usize) {
    let Value::Object(mut map) = object else {
        unreachable!("objects are JSON objects")
    };
    let mut ordered = Map::with_capacity(map.len() + 2);
    ordered.insert("kind".into(), Value::from(resource.kind));
    ordered.insert("apiVersion".into(), Value::from(resource.api_version()));
    map.shift_remove("kind");
    map.shift_remove("apiVersion");
    if let Some(Value::Object(mut meta)) = map.shift_remove("metadata") {
        let mut sorted = Map::with_capacity(meta.len());
        for key in METADATA_ORDER {
            if let Some(v) = meta.shift_remove(*key) {
                sorted.insert((*key).into(), v);
            }
        }
        sorted.extend(meta);
        ordered.insert("metadata".into(), Value::Object(sorted));
    }
    ordered.extend(map);
    let json = serde_json::to_vec(&Value::Object(ordered)).expect("JSON values serialize");
    let type_meta_len = if resource.builtin {
        // `{"kind":"Pod","apiVersion":"v1",` — the strings need no escaping.
        r#"{"kind":"","apiVersion":"","#.len() + resource.kind.len() + resource.api_version().len()
    } else {
        0
    };
    (Bytes::from(json), type_meta_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::resources::{RESOURCES, ids};
    use serde_json::json;

    #[test]
    fn list_items_of_builtin_kinds_leave_out_type_meta() {
        let pod = json!({"spec": {"nodeName": "n1"}, "metadata": {"resourceVersion": "7", "name": "a", "namespace": "ns"}});
        let stored = StoredObject::new(&RESOURCES[ids::PODS], pod, 7);
        assert!(stored.json.starts_with(br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"7"}"#));
        let (head, rest) = stored.list_item();
        let item: Value = serde_json::from_slice(&[head, &rest[..]].concat()).unwrap();
        assert_eq!(
            item,
            json!({"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "7"}, "spec": {"nodeName": "n1"}})
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
    fn list_items_of_custom_resources_keep_type_meta() {
        let widget = json!({"metadata": {"name": "w", "namespace": "ns"}});
        let stored = StoredObject::new(&RESOURCES[ids::WIDGETS], widget, 3);
        let (head, rest) = stored.list_item();
        assert!(head.is_empty());
        assert!(rest.starts_with(br#"{"kind":"Widget","apiVersion":"example.com/v1""#));
    }
}
