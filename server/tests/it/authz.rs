//! Every client reads and writes exactly what the API server would let it.
//!
//! kubecache authenticates and authorizes with the sim's `TokenReview` and
//! `SubjectAccessReview`, which judge by the sim's RBAC policy (the demo
//! users). The oracle is the sim itself: for every user and every read or
//! write, kubecache answers with the code the sim answers the same request
//! with, and a 401 or 403 with the same body.

use crate::common;

use std::time::Duration;

use common::{Served, Setup, open};
use kubecache_loadtest::sim::auth::demo::{DEVELOPER, NAMESPACE};
use kubecache_loadtest::sim::faults::{Fault, FaultSpec, Target};
use kubecache_loadtest::sim::resources::ids;
use kubecache_loadtest::sim::{Policy, SimConfig};
use kubecache_reflector::upstream::ApiResource;
use kubecache_server::auth::AuthSettings;
use kubecache_testkit::wait::until_async;

/// Who asks: a token of the demo policy, a token nobody knows, or none.
const CALLERS: [Option<&str>; 7] = [
    Some("admin-token"),
    Some("kubecache-token"),
    Some("alice-token"),
    Some("bob-token"),
    Some("eve-token"),
    Some("not-a-token"),
    None,
];

async fn served(auth: AuthSettings) -> Served {
    common::serve(Setup {
        sim: SimConfig {
            pods: 400,
            configmaps: 100,
            widgets: 20,
            namespaces: 6,
            policy: Some(Policy::demo()),
            ..SimConfig::default()
        },
        resources: vec![
            ApiResource::pods(),
            common::resource("", "configmaps", "ConfigMap", true),
            common::resource("", "namespaces", "Namespace", false),
            common::resource("example.com", "widgets", "Widget", true),
        ],
        auth: Some(auth),
        ..Setup::default()
    })
    .await
}

/// GETs `path` from `url` as `token`: the code, and the body unless it is
/// a watch (whose head is all that is read).
async fn read(url: &str, path: &str, token: Option<&str>) -> (u16, Option<bytes::Bytes>) {
    use http_body_util::BodyExt;
    let mut request = http::Request::get(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let mut request = request
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let mut sender = open(url, &mut request).await;
    let response = sender.send_request(request).await.unwrap();
    let code = response.status().as_u16();
    if path.contains("watch=") {
        return (code, None);
    }
    (
        code,
        Some(response.into_body().collect().await.unwrap().to_bytes()),
    )
}

/// A pod of `NAMESPACE` and a pod of another namespace, and that namespace.
fn pods(served: &Served) -> (String, String, String) {
    let state = served.sim.state(ids::PODS);
    let mine = state.iter().find(|p| p.namespace == NAMESPACE).unwrap();
    let other = state.iter().find(|p| p.namespace != NAMESPACE).unwrap();
    (
        mine.name.clone(),
        other.namespace.clone(),
        other.name.clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_user_reads_exactly_what_the_api_server_lets_them() {
    let served = served(common::matrix_auth()).await;
    let (mine, other_ns, other) = pods(&served);
    let ns = NAMESPACE;
    let paths = [
        "/api/v1/pods".to_string(),
        "/api/v1/pods?watch=1".into(),
        format!("/api/v1/namespaces/{ns}/pods"),
        format!("/api/v1/namespaces/{ns}/pods?watch=1&labelSelector=app"),
        format!("/api/v1/namespaces/{ns}/pods/{mine}"),
        format!("/api/v1/namespaces/{other_ns}/pods"),
        format!("/api/v1/namespaces/{other_ns}/pods/{other}"),
        format!("/api/v1/namespaces/{other_ns}/pods?fieldSelector=metadata.name%3D{other}"),
        "/api/v1/configmaps".into(),
        format!("/api/v1/namespaces/{ns}/configmaps?limit=5"),
        format!("/api/v1/namespaces/{other_ns}/configmaps"),
        "/api/v1/namespaces".into(),
        format!("/api/v1/namespaces/{ns}"),
        "/apis/example.com/v1/widgets".into(),
        format!("/apis/example.com/v1/namespaces/{ns}/widgets"),
        format!("/apis/example.com/v1/namespaces/{other_ns}/widgets?watch=1"),
    ];
    let mut seen = std::collections::BTreeMap::new();
    for token in CALLERS {
        for path in &paths {
            let (want, want_body) = read(served.sim.url(), path, token).await;
            let (got, got_body) = read(&served.url, path, token).await;
            assert_eq!(got, want, "{token:?} GET {path}");
            if want == 401 || want == 403 {
                assert_eq!(got_body, want_body, "{token:?} GET {path}: the Status");
            }
            *seen.entry(want).or_insert(0) += 1;
        }
    }
    // The matrix has allowed, forbidden and unauthorized cells.
    for code in [200, 401, 403] {
        assert!(
            seen.get(&code).copied().unwrap_or(0) > 0,
            "no {code} in {seen:?}"
        );
    }

    // The query API and the metrics: authorized as the reads they are.
    let query = [
        (
            format!("/v1/pods/index/namespace/{ns}"),
            format!("/api/v1/namespaces/{ns}/pods"),
        ),
        (
            format!("/v1/pods/index/namespace/{other_ns}/count"),
            format!("/api/v1/namespaces/{other_ns}/pods"),
        ),
        ("/v1/pods/index/label/app=web".into(), "/api/v1/pods".into()),
        ("/v1/configmaps/count".into(), "/api/v1/configmaps".into()),
    ];
    for token in CALLERS {
        for (lookup, equivalent) in &query {
            let (want, _) = read(served.sim.url(), equivalent, token).await;
            let (got, _) = read(&served.url, lookup, token).await;
            assert_eq!(got, want, "{token:?} GET {lookup} (as {equivalent})");
        }
        for path in ["/metrics", "/v1/status"] {
            // The sim serves neither path: a 404 there means "allowed".
            let (want, _) = read(served.sim.url(), path, token).await;
            let want = if want == 404 { 200 } else { want };
            let (got, _) = read(&served.url, path, token).await;
            assert_eq!(got, want, "{token:?} GET {path}");
        }
        let (health, _) = read(&served.url, "/readyz", token).await;
        assert_eq!(health, 200, "health is open");
    }
}

/// Sends `method path` with `body` of `content_type` to `url` as `token`:
/// the code and the body.
async fn write(
    url: &str,
    token: Option<&str>,
    (method, path, content_type, body): (&str, &str, &str, &str),
) -> (u16, bytes::Bytes) {
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .unwrap();
    common::send(url, request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_user_writes_exactly_what_the_api_server_lets_them() {
    let served = served(AuthSettings::default()).await;
    let (mine, other_ns, _) = pods(&served);
    let ns = NAMESPACE;
    let (json, merge, apply) = (
        "application/json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    );
    let mut seen = std::collections::BTreeMap::new();
    for (caller, token) in CALLERS.iter().enumerate() {
        // The same writes through kubecache and, on objects of their own,
        // directly: the same answers. Each write's object is its caller's.
        for (via, url) in [
            ("through", served.url.as_str()),
            ("direct", served.sim.url()),
        ] {
            let name = format!("{via}-{caller}");
            let created = format!(r#"{{"metadata":{{"name":"{name}"}},"data":{{"k":"v"}}}}"#);
            let writes = [
                (
                    "POST",
                    format!("/api/v1/namespaces/{ns}/configmaps"),
                    json,
                    created.clone(),
                ),
                (
                    "POST",
                    format!("/api/v1/namespaces/{other_ns}/configmaps"),
                    json,
                    created,
                ),
                (
                    "PATCH",
                    format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
                    merge,
                    r#"{"data":{"k":"patched"}}"#.into(),
                ),
                (
                    "PATCH",
                    format!("/api/v1/namespaces/{ns}/configmaps/{name}-applied?fieldManager=t"),
                    apply,
                    format!(
                        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}-applied\"}}}}"
                    ),
                ),
                (
                    "PATCH",
                    format!("/api/v1/namespaces/{ns}/pods/{mine}"),
                    merge,
                    format!(r#"{{"metadata":{{"labels":{{"touched-{via}":"{caller}"}}}}}}"#),
                ),
                (
                    "PATCH",
                    format!("/api/v1/namespaces/{ns}/pods/{mine}/status"),
                    merge,
                    format!(r#"{{"status":{{"message":"{via}-{caller}"}}}}"#),
                ),
                (
                    "DELETE",
                    format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
                    json,
                    String::new(),
                ),
                (
                    "DELETE",
                    format!("/api/v1/namespaces/{other_ns}/configmaps?labelSelector=none"),
                    json,
                    String::new(),
                ),
            ];
            for (i, (method, path, content_type, body)) in writes.iter().enumerate() {
                let (code, body) = write(url, *token, (method, path, content_type, body)).await;
                let status = (code >= 400).then_some(body);
                seen.entry((caller, i))
                    .or_insert_with(Vec::new)
                    .push((code, status));
            }
        }
    }
    let mut codes = std::collections::BTreeSet::new();
    for ((caller, i), answers) in &seen {
        let [through, direct] = &answers[..] else {
            unreachable!()
        };
        let token = CALLERS[*caller];
        assert_eq!(
            through.0, direct.0,
            "{token:?}, write {i}: through kubecache vs directly"
        );
        if matches!(through.0, 401 | 403) {
            // The Status names the object; only the names differ.
            let through =
                String::from_utf8_lossy(through.1.as_ref().unwrap()).replace("through-", "direct-");
            let direct = String::from_utf8_lossy(direct.1.as_ref().unwrap()).into_owned();
            assert_eq!(through, direct, "{token:?}, write {i}: the Status");
        }
        codes.insert(through.0);
    }
    // Allowed, forbidden and unauthorized writes, all of them.
    for code in [200, 201, 401, 403] {
        assert!(codes.contains(&code), "no {code} in {codes:?}");
    }
}

/// Reads lines of a watch until `done` says so.
async fn watch_until(
    url: &str,
    path: &str,
    token: &str,
    mut done: impl FnMut(&serde_json::Value) -> bool,
) -> Vec<serde_json::Value> {
    use http_body_util::BodyExt;
    let mut request = http::Request::get(path)
        .header("authorization", format!("Bearer {token}"))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let mut sender = open(url, &mut request).await;
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200, "watch {path}");
    let mut body = response.into_body();
    let (mut buffer, mut events) = (Vec::new(), Vec::new());
    while let Some(frame) = body.frame().await {
        buffer.extend_from_slice(frame.unwrap().data_ref().map_or(&[][..], |d| d));
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let event: serde_json::Value = serde_json::from_slice(&line).unwrap();
            let stop = done(&event);
            events.push(event);
            if stop {
                return events;
            }
        }
    }
    panic!("the watch ended before the awaited event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_event_of_a_namespace_the_user_may_not_read_reaches_them() {
    let served = served(AuthSettings::default()).await;
    let (_, other_ns, _) = pods(&served);
    let admin = common::client_as(served.sim.url(), "admin-token");
    let rv = served.sim.store().revision();
    // Cluster-wide: refused, as the API server refuses it.
    let (code, _) = read(&served.url, "/api/v1/pods?watch=1", Some("alice-token")).await;
    assert_eq!(code, 403);
    // Writes in another namespace, then one in alice's: if anything of the
    // other namespace leaked, it would arrive before the last one.
    let create = |ns: &str, name: &str| {
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(admin.clone(), ns);
        let pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }))
        .unwrap();
        async move { pods.create(&Default::default(), &pod).await.unwrap() }
    };
    let watch = tokio::spawn({
        let url = served.url.clone();
        async move {
            let path = format!("/api/v1/namespaces/{NAMESPACE}/pods?watch=1&resourceVersion={rv}");
            watch_until(&url, &path, "alice-token", |event| {
                event["object"]["metadata"]["name"] == "last"
            })
            .await
        }
    });
    for i in 0..20 {
        create(&other_ns, &format!("secret-{i}")).await;
    }
    create(NAMESPACE, "last").await;
    let events = tokio::time::timeout(Duration::from_secs(60), watch)
        .await
        .expect("alice's watch sees her namespace's write")
        .unwrap();
    for event in &events {
        assert_eq!(
            event["object"]["metadata"]["namespace"], NAMESPACE,
            "{event}"
        );
    }
}

/// Polls `path` as `token` until it answers `code`.
async fn eventually(served: &Served, path: &str, token: &str, code: u16) {
    let what = format!("{path} as {token} answers {code}");
    until_async(&what, async || {
        read(&served.url, path, Some(token)).await.0 == code
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_permission_stops_and_a_new_grant_starts_within_the_ttls() {
    let served = served(AuthSettings {
        allowed_ttl: Duration::from_secs(1),
        denied_ttl: Duration::from_secs(1),
        ..AuthSettings::default()
    })
    .await;
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    assert_eq!(read(&served.url, &path, Some("alice-token")).await.0, 200);
    assert_eq!(read(&served.url, &path, Some("eve-token")).await.0, 403);
    // Revoke alice's team binding; give eve a cluster-admin one.
    let mut policy = Policy::demo();
    let before = policy.bindings.len();
    policy.bindings.retain(|b| {
        !b.subjects
            .iter()
            .any(|s| format!("{s:?}").contains("payments-devs"))
    });
    assert!(
        policy.bindings.len() < before,
        "the demo binds alice's group"
    );
    let mut admin = policy
        .bindings
        .iter()
        .find(|b| {
            b.subjects
                .iter()
                .any(|s| format!("{s:?}").contains("system:masters"))
        })
        .expect("a cluster-admin binding")
        .clone();
    admin.name = "eve-admin".into();
    admin.subjects = vec![kubecache_loadtest::sim::Subject::User("eve".into())];
    policy.bindings.push(admin);
    served.sim.set_policy(Some(policy));
    eventually(&served, &path, "alice-token", 403).await;
    eventually(&served, &path, "eve-token", 200).await;
    // A revoked token: gone from the policy, refused with 401.
    let mut policy = Policy::demo();
    policy.users.retain(|u| u.name != DEVELOPER);
    served.sim.set_policy(Some(policy));
    eventually(&served, &path, "alice-token", 401).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_takes_effect_at_once_when_the_kept_answers_are_forgotten() {
    let served = served(AuthSettings::default()).await;
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    assert_eq!(read(&served.url, &path, Some("alice-token")).await.0, 200);
    let mut policy = Policy::demo();
    policy.users.retain(|u| u.name != DEVELOPER);
    served.sim.set_policy(Some(policy));
    // Kept for the allowed TTL (a minute)...
    assert_eq!(read(&served.url, &path, Some("alice-token")).await.0, 200);
    // ...unless forgotten (SIGHUP).
    served.forget_reviews();
    assert_eq!(read(&served.url, &path, Some("alice-token")).await.0, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_reviews_cannot_be_asked_requests_fail_closed_and_recover() {
    let served = served(AuthSettings::default()).await;
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    // Each case with a token or request never seen, so nothing is kept.
    for (target, token, recovered) in [
        (Target::TokenReview, "eve-token", 403),
        (Target::SubjectAccessReview, "alice-token", 200),
    ] {
        served.sim.inject(FaultSpec {
            target,
            fault: Fault::ServiceUnavailable,
            times: u32::MAX,
        });
        let (code, body) = read(&served.url, &path, Some(token)).await;
        assert_eq!(code, 503, "{target:?} down: {body:?}");
        let status: serde_json::Value = serde_json::from_slice(&body.unwrap()).unwrap();
        assert_eq!(status["reason"], "ServiceUnavailable");
        served.sim.clear_faults();
        assert_eq!(read(&served.url, &path, Some(token)).await.0, recovered);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_reads_and_writes_through_kubecache_as_each_user() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
    let served = served(AuthSettings::default()).await;
    let (mine, other_ns, _) = pods(&served);
    let alice: Api<Pod> = Api::namespaced(common::client_as(&served.url, "alice-token"), NAMESPACE);
    let bob: Api<Pod> = Api::namespaced(common::client_as(&served.url, "bob-token"), NAMESPACE);
    // alice writes in her namespace; her next get and list see it at once.
    let patch = serde_json::json!({"metadata": {"labels": {"reviewed": "yes"}}});
    let written = alice
        .patch(&mine, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("alice may patch her pods");
    let read = alice.get(&mine).await.unwrap();
    assert_eq!(
        read.metadata.resource_version,
        written.metadata.resource_version
    );
    let listed = alice
        .list(&ListParams::default().labels("reviewed=yes"))
        .await
        .unwrap();
    assert!(
        listed
            .items
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(&*mine))
    );
    // bob reads everywhere but writes nowhere: the API server refuses his
    // patch, with its own words.
    assert!(bob.get(&mine).await.is_ok());
    let refused = bob
        .patch(&mine, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(status) if status.code == 403),
        "{refused:?}"
    );
    // alice reads nothing outside her namespace.
    let elsewhere: Api<Pod> =
        Api::namespaced(common::client_as(&served.url, "alice-token"), &other_ns);
    let refused = elsewhere.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(status) if status.code == 403),
        "{refused:?}"
    );

    // alice watches her config maps while she applies one and deletes it:
    // her watch gets both, in order.
    let config_maps: Api<ConfigMap> =
        Api::namespaced(common::client_as(&served.url, "alice-token"), NAMESPACE);
    let from = config_maps
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let watch = config_maps
        .watch(&WatchParams::default(), &from)
        .await
        .expect("alice may watch her namespace");
    let applied = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "from-kube-rs"}, "data": {"k": "applied"},
    });
    config_maps
        .patch(
            "from-kube-rs",
            &PatchParams::apply("authz-test"),
            &Patch::Apply(&applied),
        )
        .await
        .expect("alice may apply in her namespace");
    let read = config_maps.get("from-kube-rs").await.unwrap();
    assert_eq!(read.data.unwrap()["k"], "applied");
    config_maps
        .delete("from-kube-rs", &Default::default())
        .await
        .expect("alice may delete in her namespace");
    let events: Vec<_> = tokio::time::timeout(
        Duration::from_secs(60),
        watch
            .map(|event| match event.unwrap() {
                WatchEvent::Added(cm) => ("ADDED", cm.metadata.name.unwrap()),
                WatchEvent::Modified(cm) => ("MODIFIED", cm.metadata.name.unwrap()),
                WatchEvent::Deleted(cm) => ("DELETED", cm.metadata.name.unwrap()),
                other => panic!("{other:?}"),
            })
            .filter(|(_, name)| std::future::ready(name == "from-kube-rs"))
            .take(2)
            .collect(),
    )
    .await
    .expect("the apply and the delete reach alice's watch");
    assert_eq!(
        events,
        [
            ("ADDED", "from-kube-rs".into()),
            ("DELETED", "from-kube-rs".into())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_is_authorized_on_the_parameters_it_is_served_with() {
    use kubecache_loadtest::sim::{RoleRef, Rule, Subject, User};
    let served = served(AuthSettings::default()).await;
    let (mine, _, _) = pods(&served);
    // carol may read one pod, by name, and nothing else.
    let policy = Policy::demo()
        .user(User::new("carol", "carol-token"))
        .role(
            NAMESPACE,
            "one-pod",
            vec![Rule::resources(&["get", "list"], &[""], &["pods"]).named(&[&mine])],
        )
        .binding(
            NAMESPACE,
            "carol-one-pod",
            RoleRef::Role("one-pod".into()),
            vec![Subject::User("carol".into())],
        );
    served.sim.set_policy(Some(policy));
    let base = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    let named = format!("{base}?fieldSelector=metadata.name%3D{mine}");
    let (code, body) = read(&served.url, &named, Some("carol-token")).await;
    assert_eq!(code, 200, "her pod, by name");
    let list: serde_json::Value = serde_json::from_slice(&body.unwrap()).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    // The first of repeated parameters counts, as kube-apiserver reads
    // them, both when the request is authorized and when it is served: a
    // second selector or `watch` changes nothing, a first one is judged as
    // what it asks for, as the API server judges it.
    let selector = format!("fieldSelector=metadata.name%3D{mine}");
    for (path, want) in [
        (format!("{named}&fieldSelector="), 200),
        (format!("{named}&watch=false&watch=true"), 200),
        (format!("{base}?fieldSelector=&{selector}"), 403),
        (format!("{base}?watch=true&watch=false&{selector}"), 403),
    ] {
        let (code, _) = read(&served.url, &path, Some("carol-token")).await;
        let (sim, _) = read(served.sim.url(), &path, Some("carol-token")).await;
        assert_eq!((code, sim), (want, want), "GET {path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn percent_encoded_paths_and_watch_paths_are_authorized_as_the_api_server_reads_them() {
    let served = served(AuthSettings::default()).await;
    let encoded = NAMESPACE.replace('-', "%2D");
    assert_ne!(encoded, NAMESPACE, "the namespace has a dash to encode");
    let paths = [
        format!("/api/v1/namespaces/{encoded}/pods"),
        format!("/api/v1/namespaces/{encoded}/configmaps?limit=3"),
        format!("/api/v1/watch/namespaces/{encoded}/pods?timeoutSeconds=1"),
        format!("/api/v1/watch/namespaces/{NAMESPACE}/pods?timeoutSeconds=1"),
        "/api/v1/watch/pods?timeoutSeconds=1".into(),
        format!(
            "/api/v1/namespaces/{NAMESPACE}/pods?limit=2&labelSelector=app&labelSelector=nothing"
        ),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for token in ["alice-token", "bob-token", "eve-token"] {
        for path in &paths {
            let (want, want_body) = read(served.sim.url(), path, Some(token)).await;
            let (got, got_body) = read(&served.url, path, Some(token)).await;
            assert_eq!(got, want, "{token} GET {path}");
            // The 403's message names the namespace as authorization read
            // it: decoded.
            if want == 403 {
                assert_eq!(got_body, want_body, "{token} GET {path}");
            }
            seen.insert(want);
        }
    }
    assert!(seen.contains(&200) && seen.contains(&403), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_from_the_cache_run_as_the_impersonated_user() {
    let served = served(AuthSettings::default()).await;
    // Gets and watches are authorized as the impersonated user too: admin
    // as alice in her group reads payments-prod only.
    let (mine, other_ns, other) = pods(&served);
    let as_user = |user: &str, path: String| {
        let mut request = http::Request::get(path)
            .header("authorization", "Bearer admin-token")
            .header("impersonate-user", user);
        if user == DEVELOPER {
            request = request.header("impersonate-group", "payments-devs");
        }
        request
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap()
    };
    let get = |namespace: &str, name: &str| format!("/api/v1/namespaces/{namespace}/pods/{name}");
    let watch =
        |namespace: &str| format!("/api/v1/namespaces/{namespace}/pods?watch=1&timeoutSeconds=1");
    for (user, path, code) in [
        (DEVELOPER, get(NAMESPACE, &mine), 200),
        (DEVELOPER, get(&other_ns, &other), 403),
        ("eve", get(NAMESPACE, &mine), 403),
        (DEVELOPER, watch(NAMESPACE), 200),
        (DEVELOPER, watch(&other_ns), 403),
        ("eve", watch(NAMESPACE), 403),
    ] {
        let (got, _) = common::send(&served.url, as_user(user, path.clone())).await;
        assert_eq!(got, code, "{user}: {path}");
    }
}

/// GETs `path` as `token` (anonymously: `None`) over a connection from
/// the loopback address `source` (as another client host): the code,
/// `Retry-After` and body.
async fn read_from(
    url: &str,
    source: &str,
    path: &str,
    token: Option<&str>,
) -> (u16, Option<String>, serde_json::Value) {
    use http_body_util::BodyExt;
    let authority = url.trim_start_matches("http://");
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    let stream = socket.connect(authority.parse().unwrap()).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let mut request = http::Request::get(path).header("host", authority);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let code = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (code, retry_after, serde_json::from_slice(&body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_churning_tokens_costs_the_api_server_a_bounded_number_of_reviews() {
    // A bound so low that nothing refills during the test: one review of
    // a new token per address, then 429s.
    let served = served(AuthSettings {
        token_reviews_per_second: 0.001,
        ..AuthSettings::default()
    })
    .await;
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    let (url, churner) = (&served.url, "127.0.0.2");
    // A token it used before the churn stays served from the cache.
    assert_eq!(
        read_from(url, churner, &path, Some("alice-token")).await.0,
        200
    );
    let before = served.sim.reviews().token_reviews;
    let mut codes = std::collections::BTreeMap::<u16, usize>::new();
    for n in 0..50 {
        let (code, retry_after, status) =
            read_from(url, churner, &path, Some(&format!("churn-{n}"))).await;
        *codes.entry(code).or_default() += 1;
        if code == 429 {
            assert_eq!(retry_after.as_deref(), Some("1"));
            assert_eq!(status["reason"], "TooManyRequests", "{status}");
            let message = status["message"].as_str().unwrap();
            assert!(message.contains("tokenReviewsPerSecond"), "{message}");
        }
    }
    assert_eq!(codes, [(429, 50)].into(), "the one review went to alice");
    assert_eq!(
        served.sim.reviews().token_reviews,
        before,
        "no review asked"
    );
    assert_eq!(
        read_from(url, churner, &path, Some("alice-token")).await.0,
        200
    );
    // Another address is unaffected: its new tokens are reviewed.
    let other = "127.0.0.3";
    assert_eq!(read_from(url, other, &path, Some("churn-0")).await.0, 401);
    assert_eq!(
        read_from(url, other, &path, Some("alice-token")).await.0,
        200
    );
    assert_eq!(served.sim.reviews().token_reviews, before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anonymous_client_making_up_paths_costs_the_api_server_a_bounded_number_of_reviews() {
    // One review per address, then 429s (nothing refills during the test).
    let served = served(AuthSettings {
        token_reviews_per_second: 0.001,
        ..AuthSettings::default()
    })
    .await;
    let url = &served.url;
    let pod = |n: usize| format!("/api/v1/namespaces/{NAMESPACE}/pods/made-up-{n}");
    let before = served.sim.reviews().subject_access_reviews;
    let mut codes = std::collections::BTreeMap::<u16, usize>::new();
    for n in 0..50 {
        let (code, _, status) = read_from(url, "127.0.0.2", &pod(n), None).await;
        *codes.entry(code).or_default() += 1;
        if code == 429 {
            let message = status["message"].as_str().unwrap();
            assert!(message.contains("anonymous requests"), "{message}");
        }
    }
    assert_eq!(codes, [(403, 1), (429, 49)].into());
    assert_eq!(served.sim.reviews().subject_access_reviews, before + 1);
    // A path it was answered stays answered from the cache.
    assert_eq!(read_from(url, "127.0.0.2", &pod(0), None).await.0, 403);
    // Another address is reviewed.
    assert_eq!(read_from(url, "127.0.0.3", &pod(1), None).await.0, 403);
    assert_eq!(served.sim.reviews().subject_access_reviews, before + 2);
}

/// GETs `path` as `token`, impersonating `user` if given: the code,
/// `Retry-After` and the Status.
async fn read_as(
    url: &str,
    path: &str,
    token: &str,
    user: Option<&str>,
) -> (u16, Option<String>, serde_json::Value) {
    let mut request = http::Request::get(path).header("authorization", format!("Bearer {token}"));
    if let Some(user) = user {
        request = request.header("impersonate-user", user);
    }
    let request = request
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = common::exchange(url, request).await;
    let code = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (
        code,
        retry_after,
        serde_json::from_slice(response.body()).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_making_up_requests_gets_429s_beyond_its_reviews_and_others_are_reviewed_at_once() {
    // Five reviews per user, then 429s (nothing refills during the test).
    let served = served(AuthSettings {
        user_reviews_per_second: 0.001,
        user_review_burst: 5,
        ..AuthSettings::default()
    })
    .await;
    let url = &served.url;
    let made_up = |n: usize| format!("/api/v1/namespaces/made-up-{n}/pods");
    let reviews = || served.sim.reviews().subject_access_reviews;
    let before = reviews();
    let mut codes = std::collections::BTreeMap::<u16, usize>::new();
    for n in 0..50 {
        let (code, retry_after, status) = read_as(url, &made_up(n), "alice-token", None).await;
        *codes.entry(code).or_default() += 1;
        if code == 429 {
            assert_eq!(retry_after.as_deref(), Some("1"));
            assert_eq!(status["reason"], "TooManyRequests", "{status}");
            let message = status["message"].as_str().unwrap();
            assert!(
                message.starts_with("Too many requests, please try again later")
                    && message.contains("auth.userReviewsPerSecond"),
                "{message}"
            );
        }
    }
    assert_eq!(codes, [(403, 5), (429, 45)].into());
    assert_eq!(reviews(), before + 5, "a review per answer, none beyond");
    // What it was answered stays answered, from the cache.
    assert_eq!(read_as(url, &made_up(0), "alice-token", None).await.0, 403);
    // Another user's first request is reviewed at once.
    assert_eq!(read_as(url, &made_up(7), "bob-token", None).await.0, 200);
    assert_eq!(reviews(), before + 6);

    // Impersonating a new user each time costs the impersonator: a check
    // and a review of the request as the user made up, then 429s.
    let before = reviews();
    let mut codes = std::collections::BTreeMap::<u16, usize>::new();
    for n in 0..20 {
        let user = format!("made-up-user-{n}");
        let (code, _, _) = read_as(url, &made_up(0), "admin-token", Some(&user)).await;
        *codes.entry(code).or_default() += 1;
    }
    assert_eq!(codes, [(403, 2), (429, 18)].into());
    assert_eq!(reviews(), before + 5);
    // Alice's budget is hers alone: still empty.
    assert_eq!(read_as(url, &made_up(8), "alice-token", None).await.0, 429);
}
