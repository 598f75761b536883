//! Strategic merge patch (`k8s.io/apimachinery/pkg/util/strategicpatch`),
//! the subset clients send: objects merge key by key and `null` removes a
//! key; lists merge as the kind's [`Schema`] declares (item by item on a
//! merge key, as a set, or replaced whole); the directives `$patch:
//! replace | delete | merge` (on an object, or as a list item),
//! `$retainKeys`, `$deleteFromPrimitiveList/<field>` are honoured, and
//! `$setElementOrder/<field>` is accepted but the order it gives is not
//! (merged lists keep the original's order, new items last).

use kubecache_wire::Status;
use serde_json::{Map, Value};

use super::schema::{ListMerge, Schema};

/// Applies the strategic merge patch `patch` to `doc`.
pub fn strategic_merge(doc: &mut Value, patch: &Value, schema: &Schema) -> Result<(), Status> {
    let Value::Object(patch) = patch else {
        return Err(Status::bad_request(
            "json: cannot unmarshal the patch into Go value of type map[string]interface {}",
        ));
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Value::Object(doc) = doc else {
        return Ok(());
    };
    merge_map(doc, patch, &mut Vec::new(), schema)
}

/// The `$patch` directive of an object, if any.
fn directive(object: &Map<String, Value>) -> Result<Option<&str>, Status> {
    match object.get("$patch") {
        None => Ok(None),
        Some(Value::String(d)) if matches!(d.as_str(), "replace" | "delete" | "merge") => {
            Ok(Some(d.as_str()))
        }
        Some(other) => Err(Status::bad_request(format!("Unknown patch type: {other}"))),
    }
}

/// Merges `patch` into `original`; `path` is the field path of `original`
/// (list items left out), for the schema.
pub(super) fn merge_map(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
    schema: &Schema,
) -> Result<(), Status> {
    match directive(patch)? {
        Some("replace") => {
            original.clear();
            return merge_map(original, &without_directives(patch), path, schema);
        }
        Some("delete") => {
            original.clear();
            return Ok(());
        }
        _ => {}
    }
    if let Some(retain) = patch.get("$retainKeys") {
        let keys: Vec<&str> = retain
            .as_array()
            .map(|keys| keys.iter().filter_map(Value::as_str).collect())
            .ok_or_else(|| Status::bad_request("invalid patch format of retainKeys"))?;
        original.retain(|k, _| keys.contains(&k.as_str()));
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let values = value
                .as_array()
                .ok_or_else(|| Status::bad_request("invalid patch format of primitive list"))?;
            if let Some(Value::Array(list)) = original.get_mut(field) {
                list.retain(|v| !values.contains(v));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        path.push(key.clone());
        match value {
            Value::Null => {
                original.shift_remove(key);
            }
            Value::Object(p) if directive(p)? == Some("delete") => {
                original.shift_remove(key);
            }
            Value::Object(p) => {
                let entry = original
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !entry.is_object() {
                    *entry = Value::Object(Map::new());
                }
                if let Value::Object(o) = entry {
                    merge_map(o, p, path, schema)?;
                }
            }
            Value::Array(items) => {
                let merged = merge_list(original.get(key), items, path, schema)?;
                original.insert(key.clone(), merged);
            }
            other => {
                original.insert(key.clone(), other.clone());
            }
        }
        path.pop();
    }
    Ok(())
}

fn merge_list(
    original: Option<&Value>,
    patch: &[Value],
    path: &mut Vec<String>,
    schema: &Schema,
) -> Result<Value, Status> {
    let is_directive = |v: &Value, d: &str| {
        v.as_object()
            .is_some_and(|o| o.len() == 1 && o.get("$patch").and_then(Value::as_str) == Some(d))
    };
    let replace = patch.iter().any(|v| is_directive(v, "replace"));
    let items: Vec<&Value> = patch
        .iter()
        .filter(|v| !is_directive(v, "replace"))
        .collect();
    let mut merged: Vec<Value> = match original {
        Some(Value::Array(existing)) if !replace => existing.clone(),
        _ => Vec::new(),
    };
    match schema.list(path) {
        _ if replace => merged = items.into_iter().map(strip).collect(),
        ListMerge::Atomic => merged = items.into_iter().cloned().collect(),
        ListMerge::Set => {
            for item in items {
                if !merged.contains(item) {
                    merged.push(item.clone());
                }
            }
        }
        ListMerge::Keyed(merge_key) => {
            for item in items {
                let Some(object) = item.as_object() else {
                    return Err(Status::bad_request(format!(
                        "the items of {} must be objects with a {merge_key}",
                        path.join(".")
                    )));
                };
                let Some(key) = object.get(merge_key) else {
                    return Err(Status::internal(format!(
                        "Internal error occurred: map: {item} does not contain declared merge key: {merge_key}"
                    )));
                };
                let at = merged.iter().position(|m| m.get(merge_key) == Some(key));
                match (directive(object)?, at) {
                    (Some("delete"), Some(at)) => {
                        merged.remove(at);
                    }
                    (Some("delete"), None) => {}
                    (_, Some(at)) => {
                        if let Value::Object(existing) = &mut merged[at] {
                            merge_map(existing, object, path, schema)?;
                        }
                    }
                    (_, None) => {
                        let mut fresh = Map::new();
                        merge_map(&mut fresh, object, path, schema)?;
                        merged.push(Value::Object(fresh));
                    }
                }
            }
        }
    }
    Ok(Value::Array(merged))
}

/// An object without its directives (keys starting with `$`), at every depth.
fn without_directives(object: &Map<String, Value>) -> Map<String, Value> {
    object
        .iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), strip(v)))
        .collect()
}

fn strip(value: &Value) -> Value {
    match value {
        Value::Object(o) => Value::Object(without_directives(o)),
        Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::resources::{RESOURCES, ids};
    use serde_json::json;

    fn pod_patch(doc: Value, patch: Value) -> Result<Value, Status> {
        let mut doc = doc;
        strategic_merge(&mut doc, &patch, &Schema::of(&RESOURCES[ids::PODS])).map(|()| doc)
    }

    fn pod() -> Value {
        json!({
            "metadata": {"labels": {"a": "1"}, "finalizers": ["x"]},
            "spec": {
                "containers": [
                    {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}], "args": ["-v"]},
                    {"name": "sidecar", "image": "proxy:1"}
                ],
                "tolerations": [{"key": "t"}]
            },
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}
        })
    }

    #[test]
    fn keyed_lists_merge_item_by_item_and_other_lists_are_replaced() {
        let patched = pod_patch(
            pod(),
            json!({
                "metadata": {"labels": {"a": null, "b": "2"}, "finalizers": ["y"]},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}], "args": ["-q"]},
                        {"name": "new", "image": "new:1"}
                    ],
                    "tolerations": [{"key": "u"}]
                },
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            }),
        )
        .unwrap();
        assert_eq!(
            patched,
            json!({
                "metadata": {"labels": {"b": "2"}, "finalizers": ["x", "y"]},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "app:2", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "args": ["-q"]},
                        {"name": "sidecar", "image": "proxy:1"},
                        {"name": "new", "image": "new:1"}
                    ],
                    "tolerations": [{"key": "u"}]
                },
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            })
        );
    }

    #[test]
    fn directives_delete_replace_and_retain() {
        let patched = pod_patch(
            pod(),
            json!({
                "metadata": {"$deleteFromPrimitiveList/finalizers": ["x"], "labels": {"$patch": "replace", "z": "9"}},
                "spec": {
                    "containers": [{"name": "sidecar", "$patch": "delete"}],
                    "$setElementOrder/containers": [{"name": "app"}]
                },
                "status": {"$retainKeys": ["phase"], "phase": "Running"}
            }),
        )
        .unwrap();
        assert_eq!(
            patched["metadata"],
            json!({"labels": {"z": "9"}, "finalizers": []})
        );
        assert_eq!(patched["spec"]["containers"].as_array().unwrap().len(), 1);
        assert_eq!(patched["status"], json!({"phase": "Running"}));
        let replaced = pod_patch(
            pod(),
            json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "only"}]}}),
        )
        .unwrap();
        assert_eq!(replaced["spec"]["containers"], json!([{"name": "only"}]));
    }

    #[test]
    fn bad_patches_are_refused() {
        assert_eq!(pod_patch(pod(), json!([1])).unwrap_err().code, 400);
        assert_eq!(
            pod_patch(pod(), json!({"spec": {"$patch": "explode"}}))
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            pod_patch(pod(), json!({"spec": {"containers": [{"image": "x"}]}}))
                .unwrap_err()
                .code,
            500
        );
    }
}
