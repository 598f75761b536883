//! `metadata.managedFields`: entries, the FieldsV1 sets of the fields a manager
//! wrote, and their updates as managers write more.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::{as_map, ts};

pub(super) fn managed_entry(
    manager: &str,
    api_version: &str,
    time: Value,
    subresource: Option<&str>,
    fields: Value,
) -> Value {
    let mut entry = Map::new();
    entry.insert("apiVersion".into(), api_version.into());
    entry.insert("fieldsType".into(), "FieldsV1".into());
    entry.insert("fieldsV1".into(), fields);
    entry.insert("manager".into(), manager.into());
    entry.insert("operation".into(), "Update".into());
    if let Some(s) = subresource {
        entry.insert("subresource".into(), s.into());
    }
    entry.insert("time".into(), time);
    Value::Object(entry)
}

/// The managedFields entry of `manager` (and `subresource`).
///
/// # Panics
///
/// If `object` has no such entry.
pub(super) fn managed_entry_mut<'a>(
    object: &'a mut Value,
    manager: &str,
    subresource: Option<&str>,
) -> &'a mut Value {
    object["metadata"]["managedFields"]
        .as_array_mut()
        .and_then(|entries| {
            entries
                .iter_mut()
                .find(|e| e["manager"] == manager && e["subresource"].as_str() == subresource)
        })
        .unwrap_or_else(|| panic!("no managedFields entry of {manager}"))
}

/// Adds `fields` to the entry of `manager` (made if missing) and sets its time.
pub(super) fn upsert_managed(
    object: &mut Value,
    manager: &str,
    api_version: &str,
    now: DateTime<Utc>,
    subresource: Option<&str>,
    fields: Value,
) {
    let entries = object["metadata"]["managedFields"]
        .as_array_mut()
        .expect("managedFields");
    match entries
        .iter_mut()
        .find(|e| e["manager"] == manager && e["subresource"].as_str() == subresource)
    {
        Some(entry) => {
            merge(&mut entry["fieldsV1"], fields);
            entry["time"] = ts(now).into();
        }
        None => entries.push(managed_entry(
            manager,
            api_version,
            ts(now).into(),
            subresource,
            fields,
        )),
    }
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert_with(|| json!({})), v);
            }
        }
        (into, from) => *into = from,
    }
}

/// Removes the field at `path` (and the sets it leaves empty but for `.`).
pub(super) fn remove_path(fields: &mut Value, path: &[&str]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(map) = fields.as_object_mut() else {
        return;
    };
    if rest.is_empty() {
        map.remove(*first);
        return;
    }
    if let Some(child) = map.get_mut(*first) {
        remove_path(child, rest);
        if child
            .as_object()
            .is_some_and(|m| m.keys().all(|k| k == "."))
        {
            map.remove(*first);
        }
    }
}

/// How a list is merged, which decides how its items appear in FieldsV1.
enum ListType {
    /// Replaced as a whole: `"f:list": {}`.
    Atomic,
    /// Items keyed by these fields: `"k:{\"name\":\"x\"}": {...}`.
    Map(&'static [&'static str]),
    /// Items keyed by value: `"v:\"x\"": {}`.
    Set,
}

/// The list types of the Pod, ConfigMap and Widget fields (by field name,
/// which is unambiguous within these kinds).
fn list_type(field: &str) -> ListType {
    match field {
        "containers" | "initContainers" | "env" | "volumes" | "imagePullSecrets" => {
            ListType::Map(&["name"])
        }
        "ports" => ListType::Map(&["containerPort", "protocol"]),
        "volumeMounts" => ListType::Map(&["mountPath"]),
        "ownerReferences" => ListType::Map(&["uid"]),
        "conditions" => ListType::Map(&["type"]),
        "podIPs" => ListType::Map(&["ip"]),
        "finalizers" => ListType::Set,
        _ => ListType::Atomic,
    }
}

/// The FieldsV1 set of the fields of `object`: `{"f:name": ...}` for each.
/// Used for `f:metadata` and a built-in kind's `f:spec` and `f:status`,
/// which are required structs and so carry no `"."`; a custom resource's
/// `spec` and `status` and a config map's `data` are optional fields and go
/// through [`field_set`]. Also the `spec` of a SelfSubjectAccessReview
/// (`sim::http::reviews`).
pub(crate) fn fields_v1(object: &Map<String, Value>) -> Map<String, Value> {
    object
        .iter()
        .map(|(k, v)| (format!("f:{k}"), field_set(k, v)))
        .collect()
}

/// The FieldsV1 set of one field: `{}` for a leaf, atomic list or empty
/// object; `{".": {}, ...children}` otherwise.
pub(super) fn field_set(name: &str, value: &Value) -> Value {
    let mut set = Map::new();
    match value {
        Value::Object(m) if !m.is_empty() => {
            set.insert(".".into(), json!({}));
            set.extend(fields_v1(m));
        }
        Value::Array(items) => match list_type(name) {
            ListType::Atomic => {}
            ListType::Map(keys) => {
                set.insert(".".into(), json!({}));
                for item in items {
                    let mut key = String::from("k:{");
                    for (i, k) in keys.iter().enumerate() {
                        if i > 0 {
                            key.push(',');
                        }
                        let _ = write!(key, "\"{k}\":{}", item[*k]);
                    }
                    key.push('}');
                    let mut child = Map::new();
                    child.insert(".".into(), json!({}));
                    child.extend(fields_v1(as_map(item)));
                    set.insert(key, Value::Object(child));
                }
            }
            ListType::Set => {
                set.insert(".".into(), json!({}));
                for item in items {
                    set.insert(format!("v:{item}"), json!({}));
                }
            }
        },
        _ => {}
    }
    Value::Object(set)
}

/// The FieldsV1 key of a list item keyed by one string field.
pub(super) fn keyed(key: &str, value: &str) -> String {
    format!("k:{{\"{key}\":{}}}", Value::from(value))
}
