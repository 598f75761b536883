//! Lists and gets through kubecache answer as the simulated API server
//! answers the same request, follow its consistency rules, and refuse bad
//! input with the right `Status`.

use crate::common;

use std::time::Duration;

use common::{Setup, get, serve};
use kubecache_loadtest::sim::ids;
use kubecache_server::ServeSettings;
use serde_json::{Value, json};

/// `namespace/name@resourceVersion` of every item of every page of a list
/// from `base`, following continue tokens.
async fn list_all(base: &str, path: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut token = String::new();
    let mut rv = None;
    loop {
        let separator = if path.contains('?') { '&' } else { '?' };
        let (code, body) = get(base, &format!("{path}{separator}continue={token}")).await;
        assert_eq!(code, 200, "{path}: {}", String::from_utf8_lossy(&body));
        let page: Value = serde_json::from_slice(&body).unwrap();
        let page_rv = page["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            rv.get_or_insert(page_rv.clone()),
            &page_rv,
            "{path}: one snapshot"
        );
        for item in page["items"].as_array().unwrap() {
            let meta = &item["metadata"];
            items.push(format!(
                "{}/{}@{}",
                meta["namespace"].as_str().unwrap_or_default(),
                meta["name"].as_str().unwrap(),
                meta["resourceVersion"].as_str().unwrap()
            ));
        }
        match page["metadata"]["continue"].as_str() {
            Some(next) => token = next.to_string(),
            None => return items,
        }
    }
}

fn with_node_index() -> Setup {
    Setup {
        store: common::node_index(),
        ..Setup::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_with_selectors_and_pages_equal_the_api_servers_answers() {
    let served = serve(with_node_index()).await;
    let state = served.sim.state(ids::PODS);
    let sample: Value = serde_json::from_slice(&state[state.len() / 2].json()).unwrap();
    let ns = sample["metadata"]["namespace"].as_str().unwrap();
    let name = sample["metadata"]["name"].as_str().unwrap();
    let node = sample["spec"]["nodeName"].as_str().unwrap();
    let (label, value) = sample["metadata"]["labels"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .unwrap();
    let queries = [
        "/api/v1/pods".to_string(),
        "/api/v1/pods?limit=97".to_string(),
        format!("/api/v1/namespaces/{ns}/pods?limit=7"),
        format!("/api/v1/pods?labelSelector={label}%3D{value}&limit=5"),
        format!("/api/v1/pods?labelSelector={label}%20in%20({value},x),{label}!%3Dy"),
        format!("/api/v1/pods?labelSelector=!{label}&limit=50"),
        format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{node}&limit=3"),
        format!("/api/v1/pods?fieldSelector=spec.nodeName!%3D{node},metadata.namespace%3D{ns}"),
        format!("/api/v1/pods?fieldSelector=metadata.name%3D{name}"),
        format!(
            "/api/v1/namespaces/{ns}/pods?fieldSelector=spec.nodeName%3D{node}&labelSelector={label}"
        ),
    ];
    for query in &queries {
        let expected = list_all(served.sim.url(), query).await;
        let answered = list_all(&served.url, query).await;
        assert!(
            !expected.is_empty() || query.contains('!'),
            "{query} selects something"
        );
        assert_eq!(answered, expected, "{query}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_answers_the_object_and_a_missing_one_is_not_found() {
    let served = serve(Setup::default()).await;
    let state = served.sim.state(ids::PODS);
    let object = &state[3];
    let (code, body) = get(
        &served.url,
        &format!(
            "/api/v1/namespaces/{}/pods/{}",
            object.namespace, object.name
        ),
    )
    .await;
    assert_eq!(code, 200);
    let got: Value = serde_json::from_slice(&body).unwrap();
    let mut expected: Value = serde_json::from_slice(&object.json()).unwrap();
    expected["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    assert_eq!(got, expected, "the object minus managedFields");

    let (code, body) = get(&served.url, "/api/v1/namespaces/default/pods/nope").await;
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(code, 404);
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["message"], "pods \"nope\" not found");
}

/// A fresh pod in the first namespace of the sim's state.
fn new_pod(served: &common::Served, name: &str) -> (String, u64) {
    let state = served.sim.state(ids::PODS);
    let mut pod: Value = serde_json::from_slice(&state[0].json()).unwrap();
    let ns = pod["metadata"]["namespace"].as_str().unwrap().to_string();
    pod["metadata"] = json!({"name": name, "namespace": ns});
    let created = served.sim.store().create(ids::PODS, pod).unwrap();
    (ns, created.revision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_at_a_writes_resource_version_sees_the_write() {
    let served = serve(Setup::default()).await;
    for i in 0..20 {
        let name = format!("ryw-{i}");
        let (ns, rv) = new_pod(&served, &name);
        let path = format!("/api/v1/namespaces/{ns}/pods/{name}?resourceVersion={rv}");
        let (code, body) = get(&served.url, &path).await;
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        let list = format!(
            "/api/v1/namespaces/{ns}/pods?resourceVersion={rv}&resourceVersionMatch=NotOlderThan&fieldSelector=metadata.name%3D{name}"
        );
        let (code, body) = get(&served.url, &list).await;
        let list: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(code, 200);
        assert_eq!(list["items"].as_array().unwrap().len(), 1, "{name} listed");
        let served_at: u64 = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(served_at >= rv, "served at {served_at} < {rv}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_without_resource_version_sees_every_write_made_before_it() {
    let served = serve(Setup::default()).await;
    for i in 0..20 {
        let name = format!("consistent-{i}");
        let (ns, _) = new_pod(&served, &name);
        let (code, _) = get(&served.url, &format!("/api/v1/namespaces/{ns}/pods/{name}")).await;
        assert_eq!(code, 200, "a consistent get sees {name}");
        let list = format!("/api/v1/pods?fieldSelector=metadata.name%3D{name}");
        let (_, body) = get(&served.url, &list).await;
        let list: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            list["items"].as_array().unwrap().len(),
            1,
            "a consistent list sees {name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_read_succeeds_when_only_other_resources_were_written() {
    // Writes to configmaps (not cached) move the API server's revision past
    // every pod event: the store must learn that nothing of its own changed.
    let served = serve(Setup {
        sim: kubecache_loadtest::sim::SimConfig {
            pods: 100,
            configmaps: 10,
            ..kubecache_loadtest::sim::SimConfig::default()
        },
        settings: ServeSettings {
            read_wait: Duration::from_secs(10),
            ..ServeSettings::default()
        },
        ..Setup::default()
    })
    .await;
    let state = served.sim.state(ids::CONFIGMAPS);
    let configmap = &state[0];
    for i in 0..3 {
        let patch = json!({"data": {"touched": i.to_string()}});
        served
            .sim
            .store()
            .merge_patch(
                ids::CONFIGMAPS,
                &configmap.namespace,
                &configmap.name,
                &patch,
            )
            .unwrap();
        let (code, body) = get(&served.url, "/api/v1/pods?limit=1").await;
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    }
}

/// The code, reason and message of a `Status` response to `path`.
async fn status_of(base: &str, path: &str) -> (u16, String, String) {
    let (code, body) = get(base, path).await;
    let status: Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "{path}: not a Status ({e}): {}",
            String::from_utf8_lossy(&body)
        )
    });
    assert_eq!(status["kind"], "Status", "{path}");
    assert_eq!(status["code"], code, "{path}");
    (
        code,
        status["reason"].as_str().unwrap_or_default().to_string(),
        status["message"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_a_status_that_says_what_is_wrong() {
    let served = serve(Setup {
        settings: ServeSettings {
            read_wait: Duration::from_millis(300),
            ..ServeSettings::default()
        },
        ..Setup::default()
    })
    .await;
    let url = &served.url;
    let cases: &[(&str, u16, &str, &str)] = &[
        (
            "/api/v1/pods?labelSelector=a%20in%20(b",
            400,
            "BadRequest",
            "unable to parse requirement",
        ),
        (
            "/api/v1/pods?fieldSelector=spec.foo%3Dbar",
            400,
            "BadRequest",
            "field label not supported: spec.foo",
        ),
        (
            "/api/v1/pods?limit=ten",
            400,
            "BadRequest",
            "strconv.ParseInt: parsing \"ten\": invalid syntax",
        ),
        (
            "/api/v1/pods?continue=garbage!",
            400,
            "BadRequest",
            "continue key is not valid",
        ),
        (
            "/api/v1/pods?resourceVersion=abc",
            500,
            "",
            "resourceVersion: Invalid value: \"abc\"",
        ),
        (
            "/api/v1/pods?resourceVersion=abc&limit=5",
            400,
            "BadRequest",
            "invalid resource version",
        ),
        (
            "/api/v1/pods?resourceVersionMatch=NotOlderThan",
            422,
            "Invalid",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "/api/v1/pods?sendInitialEvents=true",
            422,
            "Invalid",
            "sendInitialEvents is forbidden for list",
        ),
        (
            "/api/v1/pods?resourceVersion=999999999&resourceVersionMatch=NotOlderThan",
            504,
            "Timeout",
            "Too large resource version: 999999999",
        ),
        (
            "/api/v1/pods?resourceVersion=1&resourceVersionMatch=Exact",
            410,
            "Expired",
            "too old",
        ),
        (
            "/api/v1/pods?predicates=status",
            400,
            "BadRequest",
            "unknown change predicate \"status\"",
        ),
        (
            "/predicates/spec/api/v1/pods",
            400,
            "BadRequest",
            "unknown change predicate \"spec\"",
        ),
        (
            "/api/v1/services",
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
        (
            "/apis/apps/v1/deployments",
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
        (
            "/api/v1/pods/name-without-namespace",
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
        (
            "/api/v1/namespaces/default/pods/x/status",
            404,
            "NotFound",
            "pods \"x\" not found",
        ),
    ];
    for (path, code, reason, message) in cases {
        let (got_code, got_reason, got_message) = status_of(url, path).await;
        assert_eq!(
            (got_code, got_reason.as_str()),
            (*code, *reason),
            "{path}: {got_message}"
        );
        assert!(
            got_message.contains(message),
            "{path}: {got_message:?} lacks {message:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continue_token_outliving_its_snapshot_gets_410_with_an_inconsistent_token() {
    let served = serve(Setup {
        settings: ServeSettings {
            // Held for no time at all: every continue token has outlived its
            // snapshot by its next request, with no clock to wait on.
            continue_ttl: Duration::ZERO,
            ..ServeSettings::default()
        },
        ..Setup::default()
    })
    .await;
    let (_, body) = get(&served.url, "/api/v1/pods?limit=10").await;
    let first = item_keys(&body);
    let page: Value = serde_json::from_slice(&body).unwrap();
    let token = page["metadata"]["continue"].as_str().unwrap();
    // The store moves on (a consistent read waits until it has): the
    // token's state is gone. (Unchanged, the store itself is that state.)
    served.sim.create_pods(1).unwrap();
    let (code, _) = get(&served.url, "/api/v1/pods?limit=1").await;
    assert_eq!(code, 200);
    let (code, body) = get(
        &served.url,
        &format!("/api/v1/pods?limit=10&continue={token}"),
    )
    .await;
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(code, 410);
    assert_eq!(status["reason"], "Expired");
    let inconsistent = status["metadata"]["continue"].as_str().unwrap();
    // One page for the rest: with nothing held, a further page would expire too.
    let rest = list_all(
        &served.url,
        &format!("/api/v1/pods?limit=100000&continue={inconsistent}"),
    )
    .await;
    let last = first.last().unwrap();
    let after = served
        .sim
        .state(ids::PODS)
        .iter()
        .filter(|pod| &format!("{}/{}", pod.namespace, pod.name) > last)
        .count();
    assert_eq!(rest.len(), after, "the rest of the list");
}

/// `namespace/name` of the items of a list body.
fn item_keys(body: &[u8]) -> Vec<String> {
    let list: Value = serde_json::from_slice(body).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["metadata"]["namespace"].as_str().unwrap(),
                i["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_query_api_finds_and_counts_by_every_index_as_a_scan_of_the_api_servers_state() {
    let served = serve(with_node_index()).await;
    let state = served.sim.state(ids::PODS);
    let objects: Vec<Value> = state
        .iter()
        .map(|o| serde_json::from_slice(&o.json()).unwrap())
        .collect();
    let sample = &objects[objects.len() / 3];
    let owner = sample["metadata"]["ownerReferences"][0]["uid"]
        .as_str()
        .unwrap();
    let lookups = [
        (
            format!(
                "namespace/{}",
                sample["metadata"]["namespace"].as_str().unwrap()
            ),
            Box::new(|o: &Value| o["metadata"]["namespace"] == sample["metadata"]["namespace"])
                as Box<dyn Fn(&Value) -> bool>,
        ),
        (
            format!(
                "label/app.kubernetes.io%2Fname={}",
                sample["metadata"]["labels"]["app.kubernetes.io/name"]
                    .as_str()
                    .unwrap()
            ),
            Box::new(|o: &Value| {
                o["metadata"]["labels"]["app.kubernetes.io/name"]
                    == sample["metadata"]["labels"]["app.kubernetes.io/name"]
            }),
        ),
        (
            format!("owner/{owner}"),
            Box::new(|o: &Value| {
                o["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|refs| refs.iter().any(|r| r["uid"] == owner))
            }),
        ),
        (
            format!("node/{}", sample["spec"]["nodeName"].as_str().unwrap()),
            Box::new(|o: &Value| o["spec"]["nodeName"] == sample["spec"]["nodeName"]),
        ),
    ];
    for (lookup, selects) in lookups {
        let want: Vec<String> = state
            .iter()
            .zip(&objects)
            .filter(|(_, o)| selects(o))
            .map(|(s, _)| s.key.clone())
            .collect();
        assert!(!want.is_empty(), "{lookup}");
        let path = format!(
            "/v1/pods/index/{lookup}?resourceVersion={}",
            served.sim.store().revision()
        );
        let (code, body) = get(&served.url, &path).await;
        assert_eq!(code, 200, "{lookup}: {}", String::from_utf8_lossy(&body));
        assert_eq!(item_keys(&body), want, "{lookup}");
        let (code, body) = get(&served.url, &format!("/v1/pods/index/{lookup}/count")).await;
        assert_eq!(code, 200);
        let count: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(count["count"], want.len(), "{lookup}");
    }
    let (_, body) = get(&served.url, "/v1/pods/count").await;
    let count: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(count["count"], state.len());

    let (_, body) = get(&served.url, "/v1/status").await;
    let status: Value = serde_json::from_slice(&body).unwrap();
    let pods = &status["resources"][0];
    assert_eq!(pods["resource"], "pods");
    assert_eq!(pods["ready"], true);
    assert_eq!(pods["objects"], state.len());
    assert_eq!(pods["indexes"][0]["path"], "spec.nodeName");
    assert!(pods["eventLog"]["newestResourceVersion"].is_string());

    for (path, code, words) in [
        (
            "/v1/pods/index/colour/red",
            404,
            "no index named \"colour\"",
        ),
        ("/v1/secrets/count", 404, "does not cache \"secrets\""),
        ("/v1/pods/index/label/app", 400, "name=value"),
    ] {
        let (got, reason, message) = status_of(&served.url, path).await;
        assert_eq!(got, code, "{path}: {reason} {message}");
        assert!(message.contains(words), "{path}: {message}");
    }
    let request = http::Request::post("/v1/pods/count")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let (code, body) = common::send(&served.url, request).await;
    assert_eq!(code, 405);
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["reason"], "MethodNotAllowed");
}
