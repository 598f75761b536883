//! Writes on the simulated API server as clients make them: the four patch
//! types, deletecollection, the `status`, `log` and `eviction`
//! subresources, and the watch events every write makes, at the revisions
//! the writes answered with.

use crate::common;

use std::time::Duration;

use common::{OTHER_NAMESPACE, call, demo_sim, pod, token, watch_events};
use futures::StreamExt;
use kubecache_loadtest::sim::auth::demo::{ADMIN, NAMESPACE};
use kubecache_loadtest::sim::{Policy, RoleRef, Rule, Subject, User, ids};
use kubecache_wire::protobuf;
use serde_json::{Value, json};

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn web0() -> String {
    format!("/api/v1/namespaces/{NAMESPACE}/pods/web-0")
}

fn rv(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {object}"))
}

async fn admin(url: &str, method: &str, path: &str, body: Option<(&str, String)>) -> (u16, Value) {
    call(url, method, path, Some(&token(ADMIN)), body).await
}

#[tokio::test(start_paused = true)]
async fn every_patch_type_patches_as_kube_apiserver_does() {
    let (url, _sim) = demo_sim().await;
    let (code, merged) = admin(
        &url,
        "PATCH",
        &web0(),
        Some((
            MERGE,
            json!({"metadata": {"labels": {"tier": "front"}}}).to_string(),
        )),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        merged["metadata"]["labels"],
        json!({"app": "web", "tier": "front"})
    );

    let ops = json!([
        {"op": "test", "path": "/metadata/labels/tier", "value": "front"},
        {"op": "replace", "path": "/spec/containers/1/image", "value": "proxy:2"},
        {"op": "remove", "path": "/metadata/labels/tier"}
    ]);
    let (code, patched) = admin(&url, "PATCH", &web0(), Some((JSON_PATCH, ops.to_string()))).await;
    assert_eq!(code, 200);
    assert_eq!(patched["spec"]["containers"][1]["image"], "proxy:2");
    assert!(rv(&patched) > rv(&merged));
    let failing = json!([{"op": "test", "path": "/metadata/labels/tier", "value": "front"}]);
    let (code, status) = admin(
        &url,
        "PATCH",
        &web0(),
        Some((JSON_PATCH, failing.to_string())),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        status["details"]["causes"][0],
        json!({"reason": "UnexpectedServerResponse", "message": "testing value /metadata/labels/tier failed: test failed"})
    );

    let smp = json!({"spec": {"containers": [{"name": "app", "image": "web:2", "env": [{"name": "DEBUG", "value": "1"}]}]}});
    let (code, patched) = admin(&url, "PATCH", &web0(), Some((STRATEGIC, smp.to_string()))).await;
    assert_eq!(code, 200);
    let containers = &patched["spec"]["containers"];
    assert_eq!(
        containers.as_array().map(Vec::len),
        Some(2),
        "the sidecar stays"
    );
    assert_eq!(containers[0]["image"], "web:2");
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "MODE", "value": "prod"}, {"name": "DEBUG", "value": "1"}])
    );
    let widgets = format!("/apis/example.com/v1/namespaces/{NAMESPACE}/widgets");
    let (_, list) = admin(&url, "GET", &widgets, None).await;
    let widget = list["items"][0]["metadata"]["name"]
        .as_str()
        .expect("a widget")
        .to_string();
    let (code, status) = admin(
        &url,
        "PATCH",
        &format!("{widgets}/{widget}"),
        Some((STRATEGIC, "{}".into())),
    )
    .await;
    assert_eq!(code, 415);
    assert_eq!(
        status["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
    let (code, _) = admin(&url, "PATCH", &web0(), Some(("text/plain", "{}".into()))).await;
    assert_eq!(code, 415);
}

#[tokio::test(start_paused = true)]
async fn server_side_apply_creates_updates_and_removes_what_it_no_longer_applies() {
    let (url, _sim) = demo_sim().await;
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps/settings");
    let applied = |data: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels:\n    team: payments\ndata:\n{data}"
        )
    };
    let with = |query: &str| format!("{path}{query}");
    let (code, status) = admin(&url, "PATCH", &path, Some((APPLY, applied("  a: \"1\"\n")))).await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let (code, created) = admin(
        &url,
        "PATCH",
        &with("?fieldManager=deployer"),
        Some((APPLY, applied("  a: \"1\"\n  b: \"2\"\n"))),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(
        created["metadata"]["managedFields"][0]["manager"],
        "deployer"
    );
    let (_, _) = admin(
        &url,
        "PATCH",
        &path,
        Some((MERGE, json!({"data": {"c": "3"}}).to_string())),
    )
    .await;
    let (code, updated) = admin(
        &url,
        "PATCH",
        &with("?fieldManager=deployer"),
        Some((APPLY, applied("  a: \"9\"\n"))),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        updated["data"],
        json!({"a": "9", "c": "3"}),
        "b, no longer applied, is gone; c was never the deployer's"
    );
    assert!(rv(&updated) > rv(&created));
    let (code, _) = admin(
        &url,
        "PATCH",
        &with("?force=true"),
        Some((MERGE, "{}".into())),
    )
    .await;
    assert_eq!(code, 422, "force is for apply only");
}

#[tokio::test(start_paused = true)]
async fn an_apply_that_creates_needs_create_permission() {
    let (url, sim) = demo_sim().await;
    let patcher = Policy::demo()
        .user(User::new("patcher", "patcher-token"))
        .role(
            NAMESPACE,
            "patch-only",
            vec![Rule::resources(&["patch"], &[""], &["configmaps"])],
        )
        .binding(
            NAMESPACE,
            "patcher",
            RoleRef::Role("patch-only".into()),
            vec![Subject::User("patcher".into())],
        );
    sim.set_policy(Some(patcher));
    let config = |name: &str| {
        format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}\"}},\"data\":{{\"k\":\"v\"}}}}"
        )
    };
    let path =
        |name: &str| format!("/api/v1/namespaces/{NAMESPACE}/configmaps/{name}?fieldManager=m");
    let (code, status) = call(
        &url,
        "PATCH",
        &path("new"),
        Some("patcher-token"),
        Some((APPLY, config("new"))),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        r#"configmaps "new" is forbidden: User "patcher" cannot create resource "configmaps" in API group "" in the namespace "payments-prod""#
    );
    admin(
        &url,
        "POST",
        &format!("/api/v1/namespaces/{NAMESPACE}/configmaps"),
        Some(("application/json", config("old"))),
    )
    .await;
    let (code, _) = call(
        &url,
        "PATCH",
        &path("old"),
        Some("patcher-token"),
        Some((APPLY, config("old"))),
    )
    .await;
    assert_eq!(code, 200, "updating needs patch only");
}

#[tokio::test(start_paused = true)]
async fn creates_take_json_yaml_and_protobuf_bodies() {
    let (url, _sim) = demo_sim().await;
    let configmaps = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n";
    let (code, created) = admin(
        &url,
        "POST",
        &configmaps,
        Some(("application/yaml", yaml.into())),
    )
    .await;
    assert_eq!((code, &created["data"]), (201, &json!({"k": "v"})));
    let ty = protobuf::message_type("v1", "ConfigMap").unwrap();
    let object = json!({"metadata": {"name": "from-protobuf"}, "data": {"k": "v"}});
    let raw = protobuf::json_to_proto(ty, object.to_string().as_bytes()).unwrap();
    let response = reqwest::Client::new()
        .post(format!("{url}{configmaps}"))
        .bearer_auth(token(ADMIN))
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(protobuf::encode_unknown("v1", "ConfigMap", &raw))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let widgets = format!("/apis/example.com/v1/namespaces/{NAMESPACE}/widgets");
    let (code, status) = admin(
        &url,
        "POST",
        &widgets,
        Some(("application/vnd.kubernetes.protobuf", "x".into())),
    )
    .await;
    assert_eq!(code, 415);
    assert_eq!(
        status["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    );
}

#[tokio::test(start_paused = true)]
async fn deletecollection_deletes_what_the_selectors_select_and_answers_with_the_list() {
    let (url, sim) = demo_sim().await;
    sim.seed(ids::PODS, [pod(NAMESPACE, "web-1"), pod(NAMESPACE, "db-0")])
        .unwrap();
    admin(
        &url,
        "PATCH",
        &format!("/api/v1/namespaces/{NAMESPACE}/pods/db-0"),
        Some((
            MERGE,
            json!({"metadata": {"labels": {"app": "db"}}}).to_string(),
        )),
    )
    .await;
    let before = sim.store().revision();
    let collection = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    let (code, list) = admin(
        &url,
        "DELETE",
        &format!("{collection}?labelSelector=app%3Dweb"),
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "PodList");
    assert_eq!(
        rv(&list),
        before,
        "the list as it was read, before the deletions"
    );
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web-0", "web-1"]);
    let (_, left) = admin(&url, "GET", &collection, None).await;
    let left: Vec<&str> = left["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .filter(|n| ["web-0", "web-1", "db-0"].contains(n))
        .collect();
    assert_eq!(left, ["db-0"]);
    let (_, other) = admin(
        &url,
        "GET",
        &format!("/api/v1/namespaces/{OTHER_NAMESPACE}/pods/web-0"),
        None,
    )
    .await;
    assert_eq!(
        other["metadata"]["name"], "web-0",
        "other namespaces are untouched"
    );
    let (code, _) = admin(&url, "DELETE", "/api/v1/namespaces", None).await;
    assert_eq!(code, 405, "namespaces cannot be deleted as a collection");
}

#[tokio::test(start_paused = true)]
async fn a_delete_answers_with_the_object_at_its_revision_or_a_success_status() {
    let (url, _sim) = demo_sim().await;
    let (code, deleted) = admin(&url, "DELETE", &web0(), None).await;
    assert_eq!(code, 200);
    assert_eq!(deleted["kind"], "Pod");
    let (_, created) = admin(
        &url,
        "POST",
        &format!("/api/v1/namespaces/{NAMESPACE}/configmaps"),
        Some((
            "application/json",
            json!({"metadata": {"name": "gone"}}).to_string(),
        )),
    )
    .await;
    assert!(
        rv(&created) > rv(&deleted),
        "the pod's answer carries the deletion's revision"
    );
    let (code, status) = admin(
        &url,
        "DELETE",
        &format!("/api/v1/namespaces/{NAMESPACE}/configmaps/gone"),
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "gone", "kind": "configmaps", "uid": created["metadata"]["uid"]}})
    );
}

#[tokio::test(start_paused = true)]
async fn the_status_subresource_changes_the_status_only() {
    let (url, _sim) = demo_sim().await;
    let status_path = format!("{}/status", web0());
    let (code, got) = admin(&url, "GET", &status_path, None).await;
    assert_eq!((code, got["kind"].as_str()), (200, Some("Pod")));
    let patch = json!({"metadata": {"labels": {"x": "y"}}, "spec": {"nodeName": "elsewhere"}, "status": {"phase": "Failed"}});
    let (code, patched) = admin(
        &url,
        "PATCH",
        &status_path,
        Some((MERGE, patch.to_string())),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(patched["status"]["phase"], "Failed");
    assert_eq!(patched["spec"]["nodeName"], "node-1");
    assert_eq!(patched["metadata"]["labels"], json!({"app": "web"}));
    let conditions = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Initialized", "status": "True"}]}});
    let (_, patched) = admin(
        &url,
        "PATCH",
        &status_path,
        Some((STRATEGIC, conditions.to_string())),
    )
    .await;
    // As the API server writes them: a condition's times are non-pointer
    // `metav1.Time`s, `null` when zero.
    assert_eq!(
        patched["status"]["conditions"],
        json!([{"type": "Ready", "status": "False", "lastProbeTime": null, "lastTransitionTime": null},
               {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": null}])
    );

    let mut replaced = patched.clone();
    replaced["status"] = json!({"phase": "Succeeded"});
    replaced["spec"]["nodeName"] = json!("elsewhere");
    let (code, put) = admin(
        &url,
        "PUT",
        &status_path,
        Some(("application/json", replaced.to_string())),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        (put["status"].clone(), put["spec"]["nodeName"].clone()),
        (json!({"phase": "Succeeded"}), json!("node-1"))
    );
    let (code, status) = admin(
        &url,
        "PUT",
        &status_path,
        Some(("application/json", replaced.to_string())),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (409, Some("Conflict")),
        "a stale resourceVersion"
    );
    let (code, _) = admin(
        &url,
        "GET",
        &format!("/api/v1/namespaces/{NAMESPACE}/configmaps/any/status"),
        None,
    )
    .await;
    assert_eq!(code, 404, "configmaps have no status");
}

async fn text(url: &str, path: &str) -> (u16, String) {
    let (code, body) = admin(url, "GET", path, None).await;
    (
        code,
        body.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| body.to_string()),
    )
}

#[tokio::test(start_paused = true)]
async fn pods_have_logs_per_container_tailed_and_followed() {
    let (url, sim) = demo_sim().await;
    let log = format!("{}/log", web0());
    let (code, status) = admin(&url, "GET", &log, None).await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        "a container name must be specified for pod web-0, choose one of: [app sidecar]"
    );
    let (code, all) = text(&url, &format!("{log}?container=app")).await;
    assert_eq!(code, 200);
    assert_eq!(all.lines().count(), 10);
    assert_eq!(
        all.lines().next(),
        Some("line 1 of app in payments-prod/web-0")
    );
    let (_, again) = text(&url, &format!("{log}?container=app")).await;
    assert_eq!(all, again, "logs are deterministic");
    let (_, tail) = text(
        &url,
        &format!("{log}?container=sidecar&tailLines=2&timestamps=true"),
    )
    .await;
    assert_eq!(
        tail,
        "2026-01-01T00:00:08.000000000Z line 9 of sidecar in payments-prod/web-0
2026-01-01T00:00:09.000000000Z line 10 of sidecar in payments-prod/web-0
"
    );
    let (code, _) = admin(&url, "GET", &format!("{log}?container=nope"), None).await;
    assert_eq!(code, 400);

    let response = reqwest::Client::new()
        .get(format!("{url}{log}?container=app&follow=true&tailLines=1"))
        .bearer_auth(token(ADMIN))
        .header("accept", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/plain");
    let mut stream = response.bytes_stream();
    let mut followed = String::new();
    while followed.lines().count() < 4 {
        let chunk = stream.next().await.expect("more log").expect("a chunk");
        followed.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(
        followed.lines().collect::<Vec<_>>(),
        [
            "line 10 of app in payments-prod/web-0",
            "line 11 of app in payments-prod/web-0",
            "line 12 of app in payments-prod/web-0",
            "line 13 of app in payments-prod/web-0"
        ]
    );
    sim.store().delete(ids::PODS, NAMESPACE, "web-0").unwrap();
    let rest = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(Ok(_)) = stream.next().await {}
    })
    .await;
    assert!(rest.is_ok(), "following ends when the pod is deleted");
}

#[tokio::test(start_paused = true)]
async fn an_eviction_deletes_the_pod_and_other_subresources_answer_as_without_kubelets() {
    let (url, _sim) = demo_sim().await;
    let eviction = |name: &str| {
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NAMESPACE}}).to_string()
    };
    let evict = format!("{}/eviction", web0());
    let (code, status) = admin(
        &url,
        "POST",
        &evict,
        Some(("application/json", eviction("other"))),
    )
    .await;
    assert_eq!(
        (code, status["message"].as_str()),
        (
            400,
            Some("name in URL does not match name in Eviction object")
        )
    );
    let (code, status) = admin(
        &url,
        "POST",
        &format!("{}/exec?command=ls&stdout=true", web0()),
        None,
    )
    .await;
    assert_eq!(
        (code, status["message"].as_str()),
        (400, Some("Upgrade request required"))
    );
    let (code, status) = admin(&url, "GET", &format!("{}/proxy/healthz", web0()), None).await;
    assert_eq!(code, 503);
    assert_eq!(
        status["message"],
        "error trying to reach service: dial tcp 10.128.0.7:80: connect: connection refused"
    );
    let (code, status) = admin(
        &url,
        "POST",
        &evict,
        Some(("application/json", eviction("web-0"))),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
    );
    let (code, _) = admin(&url, "GET", &web0(), None).await;
    assert_eq!(code, 404);
    let (code, _) = admin(
        &url,
        "POST",
        &evict,
        Some(("application/json", eviction("web-0"))),
    )
    .await;
    assert_eq!(code, 404);
    let (code, _) = admin(&url, "GET", &format!("{}/binding", web0()), None).await;
    assert_eq!(code, 404, "a subresource not served");
}

#[tokio::test(start_paused = true)]
async fn every_write_is_one_watch_event_at_the_revision_it_answered() {
    let (url, sim) = demo_sim().await;
    let from = sim.store().revision();
    let pods = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    let watch = tokio::spawn({
        let url = url.clone();
        let path = format!("{pods}?watch=1&resourceVersion={from}");
        async move { watch_events(&url, &path, &token(ADMIN), 8).await }
    });
    let mut answered = Vec::new();
    let json_body = |v: Value| Some(("application/json", v.to_string()));
    let (_, o) = admin(
        &url,
        "POST",
        &format!("/api/v1/namespaces/{NAMESPACE}/pods"),
        json_body(pod(NAMESPACE, "web-1")),
    )
    .await;
    answered.push(("ADDED", rv(&o)));
    let (_, o) = admin(
        &url,
        "PATCH",
        &web0(),
        Some((
            MERGE,
            json!({"metadata": {"labels": {"a": "1"}}}).to_string(),
        )),
    )
    .await;
    answered.push(("MODIFIED", rv(&o)));
    let (_, o) = admin(
        &url,
        "PATCH",
        &web0(),
        Some((
            JSON_PATCH,
            json!([{"op": "add", "path": "/metadata/labels/b", "value": "2"}]).to_string(),
        )),
    )
    .await;
    answered.push(("MODIFIED", rv(&o)));
    let (_, o) = admin(
        &url,
        "PATCH",
        &web0(),
        Some((
            STRATEGIC,
            json!({"spec": {"containers": [{"name": "app", "image": "web:3"}]}}).to_string(),
        )),
    )
    .await;
    answered.push(("MODIFIED", rv(&o)));
    let (_, o) = admin(
        &url,
        "PATCH",
        &format!("{}?fieldManager=m", web0()),
        Some((
            APPLY,
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-0\n  annotations:\n    x: y\n"
                .into(),
        )),
    )
    .await;
    answered.push(("MODIFIED", rv(&o)));
    let (_, o) = admin(
        &url,
        "PATCH",
        &format!("{}/status", web0()),
        Some((MERGE, json!({"status": {"phase": "Failed"}}).to_string())),
    )
    .await;
    answered.push(("MODIFIED", rv(&o)));
    let (_, o) = admin(&url, "DELETE", &web0(), None).await;
    answered.push(("DELETED", rv(&o)));
    admin(
        &url,
        "POST",
        &format!("/api/v1/namespaces/{NAMESPACE}/pods/web-1/eviction"),
        json_body(json!({"metadata": {"name": "web-1"}})),
    )
    .await;
    answered.push(("DELETED", sim.store().revision()));
    let seen: Vec<(&str, u64)> = watch
        .await
        .unwrap()
        .iter()
        .map(|e| {
            let kind = match e["type"].as_str() {
                Some("ADDED") => "ADDED",
                Some("MODIFIED") => "MODIFIED",
                Some("DELETED") => "DELETED",
                other => panic!("unexpected event {other:?}"),
            };
            (kind, rv(&e["object"]))
        })
        .collect();
    assert_eq!(seen, answered);
}
