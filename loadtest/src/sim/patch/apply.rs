//! Server-side apply (`application/apply-patch+yaml`), a subset of what
//! kube-apiserver's field manager does:
//!
//! - the applied configuration (YAML or JSON) is merged into the object
//!   (into an empty one when it does not exist yet) as a strategic merge
//!   without directives: objects key by key, lists as the kind's
//!   [`Schema`] says;
//! - the fields it sets become the manager's, recorded in
//!   `metadata.managedFields` as an `Apply` entry (`fieldsV1`, with `f:`,
//!   `k:` and `v:` keys as the real sets, without the `.` markers of maps);
//! - fields the manager applied before and applies no longer are removed,
//!   unless another manager's entry lists them.
//!
//! Left out: conflicts (applying a field another manager owns with another
//! value succeeds, as with `force=true`), and `Update` entries for the
//! other writes, which keep the managedFields they are given.

use kubecache_wire::Status;
use serde_json::{Map, Value, json};

use super::schema::{ListMerge, Schema};
use super::strategic::merge_map;

/// Metadata the field manager never tracks.
const UNTRACKED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "selfLink",
    "managedFields",
];

/// Applies `config` for `manager` to `live` (`None` when the object does
/// not exist); `api_version` is the resource's, `now` the time to record.
pub fn apply(
    live: Option<Value>,
    config: &Value,
    manager: &str,
    schema: &Schema,
    api_version: &str,
    now: &str,
) -> Result<Value, Status> {
    let Value::Object(config) = config else {
        return Err(Status::bad_request(
            "error decoding YAML: the applied configuration is not an object",
        ));
    };
    let version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if version != api_version {
        return Err(Status::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {version}, expected: {api_version}"
        )));
    }
    let mut object = match live {
        Some(Value::Object(live)) => live,
        _ => Map::new(),
    };
    let mut entries: Vec<Value> = object
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_ours = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
    };
    let fields_of = |e: &Value| e.get("fieldsV1").and_then(Value::as_object).cloned();
    let previous = entries.iter().find(|e| is_ours(e)).and_then(fields_of);
    let others: Vec<Map<String, Value>> = entries
        .iter()
        .filter(|e| !is_ours(e))
        .filter_map(fields_of)
        .collect();
    let applied = field_set(config, &mut Vec::new(), schema);

    let mut config = config.clone();
    if let Some(Value::Object(meta)) = config.get_mut("metadata") {
        meta.shift_remove("managedFields");
    }
    merge_map(&mut object, &config, &mut Vec::new(), schema)?;
    if let Some(previous) = previous {
        let others: Vec<&Map<String, Value>> = others.iter().collect();
        let mut whole = Value::Object(object);
        prune(&mut whole, &previous, Some(&applied), &others);
        object = match whole {
            Value::Object(object) => object,
            _ => Map::new(),
        };
    }

    let entry = json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": applied,
    });
    match entries.iter().position(is_ours) {
        Some(at) => entries[at] = entry,
        None => entries.push(entry),
    }
    let meta = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
    Ok(Value::Object(object))
}

/// The `fieldsV1` set of the fields an object sets.
fn field_set(
    object: &Map<String, Value>,
    path: &mut Vec<String>,
    schema: &Schema,
) -> Map<String, Value> {
    let mut set = Map::new();
    for (key, value) in object {
        let untracked = match path.as_slice() {
            [] => key == "apiVersion" || key == "kind",
            [meta] => meta == "metadata" && UNTRACKED_METADATA.contains(&key.as_str()),
            _ => false,
        };
        if untracked {
            continue;
        }
        path.push(key.clone());
        let child = match value {
            Value::Object(inner) => field_set(inner, path, schema),
            Value::Array(items) => match schema.list(path) {
                ListMerge::Keyed(merge_key) => items
                    .iter()
                    .filter_map(Value::as_object)
                    .filter_map(|item| {
                        let id = item.get(merge_key)?;
                        let mut fields = Map::new();
                        fields.insert(".".into(), json!({}));
                        fields.extend(field_set(item, path, schema));
                        Some((
                            format!("k:{}", json!({ merge_key: id })),
                            Value::Object(fields),
                        ))
                    })
                    .collect(),
                ListMerge::Set => items
                    .iter()
                    .map(|item| (format!("v:{item}"), json!({})))
                    .collect(),
                ListMerge::Atomic => Map::new(),
            },
            _ => Map::new(),
        };
        path.pop();
        set.insert(format!("f:{key}"), Value::Object(child));
    }
    set
}

/// Removes from `value` what `previous` lists and neither `current` nor
/// any of `others` does.
fn prune(
    value: &mut Value,
    previous: &Map<String, Value>,
    current: Option<&Map<String, Value>>,
    others: &[&Map<String, Value>],
) {
    for (key, previous_child) in previous {
        if key == "." {
            continue;
        }
        let current_child = current.and_then(|c| c.get(key));
        let other_children: Vec<&Map<String, Value>> = others
            .iter()
            .filter_map(|o| o.get(key).and_then(Value::as_object))
            .collect();
        if current_child.is_none() && other_children.is_empty() {
            remove_element(value, key);
            continue;
        }
        if let (Some(previous_child), Some(element)) =
            (previous_child.as_object(), element_mut(value, key))
        {
            prune(
                element,
                previous_child,
                current_child.and_then(Value::as_object),
                &other_children,
            );
        }
    }
}

/// Whether a list item is the one a `k:` or `v:` key names.
fn names(key: &str, item: &Value) -> bool {
    if let Some(id) = key.strip_prefix("k:") {
        let Ok(Value::Object(id)) = serde_json::from_str::<Value>(id) else {
            return false;
        };
        return id.iter().all(|(k, v)| item.get(k) == Some(v));
    }
    key.strip_prefix("v:")
        .and_then(|v| serde_json::from_str::<Value>(v).ok())
        .is_some_and(|v| v == *item)
}

fn element_mut<'a>(value: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    match value {
        Value::Object(map) => map.get_mut(key.strip_prefix("f:")?),
        Value::Array(items) => items.iter_mut().find(|item| names(key, item)),
        _ => None,
    }
}

fn remove_element(value: &mut Value, key: &str) {
    match value {
        Value::Object(map) => {
            if let Some(field) = key.strip_prefix("f:") {
                map.shift_remove(field);
            }
        }
        Value::Array(items) => items.retain(|item| !names(key, item)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::resources::{RESOURCES, ids};

    fn pods() -> Schema {
        Schema::of(&RESOURCES[ids::PODS])
    }

    fn config(labels: Value, containers: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": labels},
            "spec": {"containers": containers}
        })
    }

    #[test]
    fn apply_records_the_managers_fields() {
        let applied = apply(
            None,
            &config(json!({"app": "a"}), json!([{"name": "c", "image": "i:1"}])),
            "tool",
            &pods(),
            "v1",
            "2026-01-01T00:00:00Z",
        )
        .unwrap();
        let entry = &applied["metadata"]["managedFields"][0];
        assert_eq!(entry["manager"], "tool");
        assert_eq!(entry["operation"], "Apply");
        assert_eq!(
            entry["fieldsV1"],
            json!({
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:name": {}, "f:image": {}}}}
            })
        );
    }

    #[test]
    fn what_a_manager_stops_applying_is_removed_unless_another_owns_it() {
        let first = apply(
            None,
            &config(
                json!({"app": "a", "tier": "web"}),
                json!([{"name": "c", "image": "i:1"}, {"name": "d", "image": "j:1"}]),
            ),
            "tool",
            &pods(),
            "v1",
            "t1",
        )
        .unwrap();
        let mut shared = first.clone();
        shared["metadata"]["managedFields"]
            .as_array_mut()
            .unwrap()
            .push(json!({"manager": "other", "operation": "Update", "fieldsV1": {"f:metadata": {"f:labels": {"f:tier": {}}}}}));
        let second = apply(
            Some(shared),
            &config(json!({"app": "b"}), json!([{"name": "c", "image": "i:2"}])),
            "tool",
            &pods(),
            "v1",
            "t2",
        )
        .unwrap();
        assert_eq!(
            second["metadata"]["labels"],
            json!({"app": "b", "tier": "web"})
        );
        assert_eq!(
            second["spec"]["containers"],
            json!([{"name": "c", "image": "i:2"}])
        );
        assert_eq!(
            second["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn the_applied_version_must_be_the_resources() {
        let status = apply(
            None,
            &json!({"apiVersion": "v2", "kind": "Pod"}),
            "m",
            &pods(),
            "v1",
            "t",
        )
        .unwrap_err();
        assert_eq!(
            status.message,
            "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1"
        );
    }
}
