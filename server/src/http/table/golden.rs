//! Tables against a real kube-apiserver v1.28's (`testdata/apiserver-golden`,
//! see its README): each recorded `table/` answer is
//! rendered from the full objects of the same state, with the request's
//! recorded time as "now", and must equal the recorded bytes.
//!
//! What is taken from the recording as input, not compared: the request
//! time, and the resourceVersion of the state the table was served at
//! (`metadata.resourceVersion`). The objects come from `lists/` where the
//! list recorded there is the same state (checked: each row's metadata
//! equals its object's), from the `includeObject=Object` table for pods
//! (the list of `lists/` is older), and from `lists/` plus the recorded
//! watch for config maps.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use kubecache_reflector::upstream::ApiResource;
use kubecache_testkit::golden::{self, json as corpus_json, read as corpus};
use kubecache_wire::{CachedObject, Transform, decode_object, parse_list};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{IncludeObject, TableMeta, bookmark_line, event_line, render};

/// When `file` was requested, and its path.
fn recorded(file: &str) -> (DateTime<Utc>, String) {
    let entry = golden::recorded(file);
    let time = DateTime::parse_from_rfc3339(entry["time_utc"].as_str().unwrap())
        .unwrap()
        .with_timezone(&Utc);
    (time, entry["path"].as_str().unwrap().to_string())
}

fn resource(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        kind: kind.into(),
        namespaced,
    }
}

/// An object (its JSON, as recorded) as kubecache holds it: all of it,
/// `kind` and `apiVersion` first.
fn cached(resource: &ApiResource, json: &[u8]) -> Arc<CachedObject> {
    let object = decode_object(
        json,
        &resource.kind,
        &resource.api_version(),
        &Transform::keep_everything(),
    )
    .unwrap();
    Arc::new(object)
}

/// The items of a recorded list, as recorded.
fn items(file: &str) -> Vec<Vec<u8>> {
    let body = corpus(file);
    let list = parse_list(&body).unwrap();
    list.items.iter().map(|item| item.to_vec()).collect()
}

/// An event or row: its `type` (if any) and its object, as recorded.
#[derive(Deserialize)]
struct Entry<'a> {
    #[serde(default, rename = "type")]
    type_: String,
    #[serde(borrow)]
    object: &'a RawValue,
}

/// Renders `file`'s table from `objects` and compares it with the
/// recorded bytes.
fn check(file: &str, resource: &ApiResource, include: IncludeObject, objects: &[Vec<u8>]) {
    let want = corpus(file);
    let recorded_table: Value = serde_json::from_slice(&want).unwrap();
    let rows = recorded_table["rows"].as_array().unwrap();
    assert_eq!(rows.len(), objects.len(), "{file}: one row per object");
    if include == IncludeObject::Metadata {
        for (row, object) in rows.iter().zip(objects) {
            let object: Value = serde_json::from_slice(object).unwrap();
            let meta = |m: &Value| (m["name"].clone(), m["resourceVersion"].clone());
            assert_eq!(
                meta(&row["object"]["metadata"]),
                meta(&object["metadata"]),
                "{file}: the objects are the state the table shows"
            );
        }
    }
    let (now, _) = recorded(file);
    let objects: Vec<Arc<CachedObject>> = objects.iter().map(|o| cached(resource, o)).collect();
    let meta = TableMeta {
        resource_version: recorded_table["metadata"]["resourceVersion"]
            .as_str()
            .map(|rv| rv.parse().unwrap()),
        ..TableMeta::default()
    };
    let got = render(resource, "v1", include, &meta, &objects, now);
    if got[..] != want[..] {
        let got: Value = serde_json::from_slice(&got).expect("a table");
        let got_rows = got["rows"].as_array().unwrap();
        for (g, w) in got_rows.iter().zip(rows) {
            assert_eq!(g["cells"], w["cells"], "{file}: cells");
        }
        assert_eq!(got, recorded_table, "{file}");
        panic!("{file}: equal as JSON values, but not byte for byte");
    }
}

/// The pods of the tables, from the `includeObject=Object` table.
fn pods() -> Vec<Vec<u8>> {
    #[derive(Deserialize)]
    struct Table<'a> {
        #[serde(borrow)]
        rows: Vec<Entry<'a>>,
    }
    let body = corpus("table/pods.table.includeObject-Object.json.gz");
    let table: Table = serde_json::from_slice(&body).unwrap();
    table
        .rows
        .iter()
        .map(|row| row.object.get().as_bytes().to_vec())
        .collect()
}

#[test]
fn pod_tables_are_the_api_servers_with_restart_ages_and_each_include_object() {
    let pods_resource = resource("", "v1", "pods", "Pod", true);
    let pods = pods();
    check(
        "table/pods.table.json.gz",
        &pods_resource,
        IncludeObject::Metadata,
        &pods,
    );
    check(
        "table/pods.table.limit500.json.gz",
        &pods_resource,
        IncludeObject::Metadata,
        &pods,
    );
    check(
        "table/pods.table.includeObject-Object.json.gz",
        &pods_resource,
        IncludeObject::Object,
        &pods,
    );
    check(
        "table/pods.table.includeObject-None.json",
        &pods_resource,
        IncludeObject::None,
        &pods,
    );
    let single = "table/pods.table.single-analytics-backup-28681014-5p6rq.json";
    let pod = pods
        .iter()
        .find(|p| {
            let pod: Value = serde_json::from_slice(p).unwrap();
            pod["metadata"]["name"] == "analytics-backup-28681014-5p6rq"
        })
        .unwrap();
    check(
        single,
        &pods_resource,
        IncludeObject::Metadata,
        std::slice::from_ref(pod),
    );
}

/// Each kind with a printer: its recorded table, from its recorded list.
#[test]
fn tables_of_every_printed_kind_are_the_api_servers() {
    let kinds = [
        (
            "daemonsets",
            resource("apps", "v1", "daemonsets", "DaemonSet", true),
        ),
        ("events", resource("", "v1", "events", "Event", true)),
        (
            "events.events.k8s.io",
            resource("events.k8s.io", "v1", "events", "Event", true),
        ),
        (
            "horizontalpodautoscalers",
            resource(
                "autoscaling",
                "v2",
                "horizontalpodautoscalers",
                "HorizontalPodAutoscaler",
                true,
            ),
        ),
        (
            "deployments",
            resource("apps", "v1", "deployments", "Deployment", true),
        ),
        (
            "replicasets",
            resource("apps", "v1", "replicasets", "ReplicaSet", true),
        ),
        (
            "statefulsets",
            resource("apps", "v1", "statefulsets", "StatefulSet", true),
        ),
        ("jobs", resource("batch", "v1", "jobs", "Job", true)),
        (
            "cronjobs",
            resource("batch", "v1", "cronjobs", "CronJob", true),
        ),
        ("services", resource("", "v1", "services", "Service", true)),
        ("secrets", resource("", "v1", "secrets", "Secret", true)),
        (
            "serviceaccounts",
            resource("", "v1", "serviceaccounts", "ServiceAccount", true),
        ),
        (
            "roles",
            resource("rbac.authorization.k8s.io", "v1", "roles", "Role", true),
        ),
        (
            "rolebindings",
            resource(
                "rbac.authorization.k8s.io",
                "v1",
                "rolebindings",
                "RoleBinding",
                true,
            ),
        ),
        (
            "persistentvolumeclaims",
            resource(
                "",
                "v1",
                "persistentvolumeclaims",
                "PersistentVolumeClaim",
                true,
            ),
        ),
        (
            "endpoints",
            resource("", "v1", "endpoints", "Endpoints", true),
        ),
        (
            "endpointslices",
            resource(
                "discovery.k8s.io",
                "v1",
                "endpointslices",
                "EndpointSlice",
                true,
            ),
        ),
        (
            "leases",
            resource("coordination.k8s.io", "v1", "leases", "Lease", true),
        ),
        (
            "poddisruptionbudgets",
            resource(
                "policy",
                "v1",
                "poddisruptionbudgets",
                "PodDisruptionBudget",
                true,
            ),
        ),
        (
            "networkpolicies",
            resource(
                "networking.k8s.io",
                "v1",
                "networkpolicies",
                "NetworkPolicy",
                true,
            ),
        ),
        (
            "ingresses",
            resource("networking.k8s.io", "v1", "ingresses", "Ingress", true),
        ),
        (
            "limitranges",
            resource("", "v1", "limitranges", "LimitRange", true),
        ),
        ("nodes", resource("", "v1", "nodes", "Node", false)),
        (
            "priorityclasses",
            resource(
                "scheduling.k8s.io",
                "v1",
                "priorityclasses",
                "PriorityClass",
                false,
            ),
        ),
        (
            "storageclasses",
            resource(
                "storage.k8s.io",
                "v1",
                "storageclasses",
                "StorageClass",
                false,
            ),
        ),
        (
            "clusterroles",
            resource(
                "rbac.authorization.k8s.io",
                "v1",
                "clusterroles",
                "ClusterRole",
                false,
            ),
        ),
        (
            "customresourcedefinitions",
            resource(
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
            ),
        ),
    ];
    for (name, resource) in kinds {
        let objects = items(&format!("lists/{name}.list.json"));
        check(
            &format!("table/{name}.table.json"),
            &resource,
            IncludeObject::Metadata,
            &objects,
        );
    }
}

#[test]
fn config_map_tables_are_the_api_servers() {
    // The list of `lists/` is older than the table: the recorded watch's
    // changes bring it to the table's state.
    let mut objects = items("lists/configmaps.list.json");
    let name_of = |json: &[u8]| {
        let object: Value = serde_json::from_slice(json).unwrap();
        object["metadata"]["name"].as_str().unwrap().to_string()
    };
    let watch = corpus("watch/configmaps.watch.json");
    for line in watch.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let event: Entry = serde_json::from_slice(line).unwrap();
        if event.type_ == "BOOKMARK" {
            continue;
        }
        let object = event.object.get().as_bytes().to_vec();
        let at = objects.iter().position(|o| name_of(o) == name_of(&object));
        match (event.type_.as_str(), at) {
            ("ADDED" | "MODIFIED", Some(at)) => objects[at] = object,
            ("ADDED" | "MODIFIED", None) => objects.push(object),
            ("DELETED", Some(at)) => {
                objects.remove(at);
            }
            _ => {}
        }
    }
    objects.sort_by_key(|o| name_of(o));
    let configmaps = resource("", "v1", "configmaps", "ConfigMap", true);
    check(
        "table/configmaps.table.json",
        &configmaps,
        IncludeObject::Metadata,
        &objects,
    );
}

#[test]
fn a_table_watch_is_the_api_servers_column_definitions_once_then_rows_and_bookmarks() {
    let pods_resource = resource("", "v1", "pods", "Pod", true);
    let want = corpus("watch/pods.table.watch.json");
    let full = corpus("watch/pods-meta.watch.json");
    // When each write was made: the moment its event was printed.
    let writes = corpus_json("watch/pods-meta.watch.writes.json");
    let written = |name: &str| {
        let write = writes
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w[2] == name)
            .unwrap_or_else(|| panic!("a write of {name}"));
        DateTime::parse_from_rfc3339(write[0].as_str().unwrap())
            .unwrap()
            .with_timezone(&Utc)
    };
    let want_lines: Vec<&[u8]> = want.split_inclusive(|b| *b == b'\n').collect();
    let full_lines: Vec<&[u8]> = full.split_inclusive(|b| *b == b'\n').collect();
    assert_eq!(want_lines.len(), full_lines.len());
    for (i, (want, full)) in want_lines.iter().zip(&full_lines).enumerate() {
        let event: Entry = serde_json::from_slice(full).unwrap();
        let object: Value = serde_json::from_str(event.object.get()).unwrap();
        let got = if event.type_ == "BOOKMARK" {
            let rv = object["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            bookmark_line(
                &pods_resource,
                "v1",
                IncludeObject::Metadata,
                rv,
                false,
                i == 0,
            )
        } else {
            let name = object["metadata"]["name"].as_str().unwrap();
            event_line(
                &event.type_,
                &pods_resource,
                "v1",
                IncludeObject::Metadata,
                event.object.get().as_bytes(),
                i == 0,
                written(name),
            )
        };
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "line {i}"
        );
    }
}

#[test]
fn resource_quota_rows_are_the_api_servers() {
    // Only rows whose object's recorded list is the table's state are
    // compared: the other quota's usage moved on between the two.
    let quotas = resource("", "v1", "resourcequotas", "ResourceQuota", true);
    let file = "table/resourcequotas.table.json";
    let (now, _) = recorded(file);
    let table = corpus_json(file);
    let mut compared = 0;
    for (object, want) in items("lists/resourcequotas.list.json")
        .iter()
        .zip(table["rows"].as_array().unwrap())
    {
        let value: Value = serde_json::from_slice(object).unwrap();
        if value["metadata"] != want["object"]["metadata"] {
            continue;
        }
        let one = render(
            &quotas,
            "v1",
            IncludeObject::Metadata,
            &TableMeta::default(),
            &[cached(&quotas, object)],
            now,
        );
        let got: Value = serde_json::from_slice(&one).unwrap();
        assert_eq!(&got["rows"][0], want);
        compared += 1;
    }
    assert_eq!(compared, 1);
}
