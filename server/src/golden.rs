//! The golden corpus of a real kube-apiserver's answers (read by
//! `kubecache_testkit::golden`), for the unit tests that compare kubecache's
//! encodings with it.

use kubecache_wire::{CachedObject, Transform, decode_object};
use serde_json::Value;

pub use kubecache_testkit::golden::{dir, read};

/// `object` as the store keeps it, managed fields included (the corpus has
/// them).
pub fn object(object: &[u8], kind: &str, api_version: &str) -> CachedObject {
    decode_object(object, kind, api_version, &Transform::keep_everything())
        .unwrap_or_else(|e| panic!("{kind}: {e}"))
}

/// `value` without Go's zero values of non-pointer fields (`""`, `0`,
/// `false`), recursively: what a real server's protobuf carries and its JSON
/// leaves out. Writing them as Go does is the protobuf encoder's part,
/// checked by its own tests; here the encodings are compared without them.
pub fn without_zero_values(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| **v != "" && **v != 0 && **v != false)
                .map(|(k, v)| (k.clone(), without_zero_values(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_zero_values).collect()),
        other => other.clone(),
    }
}
