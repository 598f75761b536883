//! What kubecache does not answer from a cache passes through: writes,
//! uncached resources, discovery, and reads outside a cache's scope get the
//! API server's own answer (code and body), and a client reads its own
//! writes back at once.

use crate::common;

use std::sync::Arc;

use common::{Setup, WatchLines, client_as, exchange, get, serve};
use http_body_util::Full;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{DeleteParams, GetParams, ListParams, Patch, PatchParams, PostParams};
use kubecache_loadtest::sim::{SimConfig, ids};
use kubecache_reflector::upstream::ResourceSpec;
use kubecache_server::auth::Auth;
use kubecache_server::{Caches, PassThrough, ServeSettings};
use serde_json::{Value, json};

/// The header only answers from a cache carry.
const FROM_CACHE: &str = "x-kubecache-resource-version";

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "data": {"a": "1"}
    }))
    .unwrap()
}

fn pod(name: &str, namespace: &str, labels: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap()
}

/// `request` sent to both kubecache and the API server (`path` on each):
/// code and body from each.
async fn both(
    kubecache: &str,
    sim: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> [(u16, bytes::Bytes); 2] {
    let mut answers = Vec::new();
    for base in [kubecache, sim] {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .body(Full::new(bytes::Bytes::from(body.to_string())))
            .unwrap();
        let response = exchange(base, request).await;
        answers.push((response.status().as_u16(), response.into_body()));
    }
    answers.try_into().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_uncached_resources_get_the_api_servers_answers() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 100,
            configmaps: 20,
            ..SimConfig::default()
        },
        ..Setup::default()
    })
    .await;
    let sim = served.sim.url().to_string();
    let pods = served.sim.state(ids::PODS);
    let ns = pods[0].namespace.clone();
    let via = client_as(&served.url, "alice");
    let direct = client_as(&sim, "alice");

    // Config maps are not cached: every verb passes through.
    let maps: Api<ConfigMap> = Api::namespaced(via.clone(), &ns);
    let maps_direct: Api<ConfigMap> = Api::namespaced(direct.clone(), &ns);
    let created = maps
        .create(&PostParams::default(), &config_map("through"))
        .await
        .unwrap();
    assert_eq!(created, maps_direct.get("through").await.unwrap());
    let patch = Patch::Merge(json!({"data": {"b": "2"}}));
    let patched = maps
        .patch("through", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(patched, maps_direct.get("through").await.unwrap());
    assert_eq!(patched.data.as_ref().unwrap()["b"], "2");
    let mut next = patched.clone();
    next.data.as_mut().unwrap().insert("c".into(), "3".into());
    let replaced = maps
        .replace("through", &PostParams::default(), &next)
        .await
        .unwrap();
    assert_eq!(replaced, maps_direct.get("through").await.unwrap());
    assert_eq!(
        maps.get("through").await.unwrap(),
        replaced,
        "an uncached get"
    );
    assert_eq!(
        maps.list(&ListParams::default()).await.unwrap().items,
        maps_direct
            .list(&ListParams::default())
            .await
            .unwrap()
            .items,
        "an uncached list"
    );

    // Reads and discovery: the same code and body, byte for byte.
    let node = pods[0].json();
    let node: Value = serde_json::from_slice(&node).unwrap();
    let node = node["spec"]["nodeName"].as_str().unwrap().to_string();
    for path in [
        format!("/api/v1/namespaces/{ns}/configmaps"),
        "/api/v1/configmaps?limit=5".to_string(),
        format!("/api/v1/namespaces/{ns}/configmaps/through"),
        format!("/api/v1/namespaces/{ns}/configmaps/nope"),
        "/api".to_string(),
        "/api/v1".to_string(),
        "/apis".to_string(),
        "/apis/example.com/v1".to_string(),
        "/version".to_string(),
        "/apis/apps/v1/deployments".to_string(),
        // A field kubecache has no index on: the API server selects.
        format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{node}"),
        format!("/api/v1/namespaces/{ns}/pods/{}/status", pods[0].name),
    ] {
        assert_eq!(
            get(&served.url, &path).await,
            get(&sim, &path).await,
            "{path}"
        );
    }
    let prefixed = get(&served.url, "/predicates/generation/api/v1").await;
    assert_eq!(
        prefixed,
        get(&sim, "/api/v1").await,
        "discovery under a prefix"
    );

    // A watch of an uncached resource flows as the API server sends it.
    let list: Value = serde_json::from_slice(
        &get(&sim, &format!("/api/v1/namespaces/{ns}/configmaps"))
            .await
            .1,
    )
    .unwrap();
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    let watch = format!("/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}");
    let through = WatchLines::open(&served.url, &watch).await;
    let straight = WatchLines::open(&sim, &watch).await;
    assert_eq!((through.code, straight.code), (200, 200));
    maps_direct
        .create(&PostParams::default(), &config_map("watched"))
        .await
        .unwrap();
    let seen = through.events(1).await;
    assert_eq!(seen[0]["type"], "ADDED");
    assert_eq!(seen, straight.events(1).await);

    maps.delete("through", &DeleteParams::default())
        .await
        .unwrap();
    assert!(maps_direct.get_opt("through").await.unwrap().is_none());

    // Pods are cached: writes pass through, reads come from the cache.
    let pods_via: Api<Pod> = Api::namespaced(via.clone(), &ns);
    let pods_direct: Api<Pod> = Api::namespaced(direct.clone(), &ns);
    let created = pods_via
        .create(&PostParams::default(), &pod("written", &ns, json!({})))
        .await
        .unwrap();
    assert_eq!(created, pods_direct.get("written").await.unwrap());
    let patch = Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}}));
    let patched = pods_via
        .patch("written", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(patched, pods_direct.get("written").await.unwrap());
    let read = pods_via.get("written").await.unwrap();
    assert_eq!(read.metadata.labels, patched.metadata.labels);
    pods_via
        .delete("written", &DeleteParams::default())
        .await
        .unwrap();
    assert!(pods_direct.get_opt("written").await.unwrap().is_none());
    assert!(pods_via.get_opt("written").await.unwrap().is_none());
}

/// Pass-through within a few connections: many writes at once each get
/// their answer, and the connections they leave pooled do not keep
/// kubecache's own requests (discovery) waiting for a free one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_passthrough_connections_wait_for_one_and_all_are_answered() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 10,
            ..SimConfig::default()
        },
        max_passthrough_connections: 4,
        ..Setup::default()
    })
    .await;
    let sim = served.sim.url().to_string();
    let ns = served.sim.state(ids::PODS)[0].namespace.clone();
    let maps: Api<ConfigMap> = Api::namespaced(client_as(&served.url, "alice"), &ns);
    let created = futures::future::join_all((0..24).map(|i| {
        let maps = maps.clone();
        async move {
            maps.create(&PostParams::default(), &config_map(&format!("at-once-{i}")))
                .await
        }
    }))
    .await;
    let direct: Api<ConfigMap> = Api::namespaced(client_as(&sim, "alice"), &ns);
    for (i, created) in created.into_iter().enumerate() {
        let created = created.unwrap_or_else(|e| panic!("write {i}: {e}"));
        assert_eq!(created, direct.get(&format!("at-once-{i}")).await.unwrap());
    }
    // Each document is fetched with kubecache's own client.
    for path in ["/api", "/apis", "/api/v1", "/version"] {
        let [through, straight] = both(&served.url, &sim, "GET", path, "", "").await;
        assert_eq!(through, straight, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_come_back_as_the_api_server_gave_them() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 50,
            configmaps: 5,
            ..SimConfig::default()
        },
        ..Setup::default()
    })
    .await;
    let sim = served.sim.url().to_string();
    let maps = served.sim.state(ids::CONFIGMAPS);
    let (ns, name) = (&maps[0].namespace, &maps[0].name);
    let json = "application/json";
    let stale = json!({"metadata": {"name": name, "resourceVersion": "1"}}).to_string();
    let cases = [
        // AlreadyExists.
        (
            "POST",
            format!("/api/v1/namespaces/{ns}/configmaps"),
            json,
            json!({"metadata": {"name": name}}).to_string(),
            409,
        ),
        // Conflict: a stale resourceVersion.
        (
            "PUT",
            format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
            json,
            stale,
            409,
        ),
        // Invalid: no name.
        (
            "POST",
            format!("/api/v1/namespaces/{ns}/configmaps"),
            json,
            "{}".to_string(),
            422,
        ),
        // A cached resource's missing object.
        (
            "DELETE",
            format!("/api/v1/namespaces/{ns}/pods/nope"),
            json,
            String::new(),
            404,
        ),
        // A body that is not JSON.
        (
            "PATCH",
            format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
            "application/merge-patch+json",
            "{".to_string(),
            400,
        ),
    ];
    for (method, path, content_type, body, code) in cases {
        let [through, straight] = both(&served.url, &sim, method, &path, content_type, &body).await;
        assert_eq!(through, straight, "{method} {path}");
        assert_eq!(through.0, code, "{method} {path}");
    }
    // Every patch type, whatever the API server makes of it: each patch
    // sets what it sets, so sent twice it answers the same.
    let path = format!("/api/v1/namespaces/{ns}/configmaps/{name}");
    for (content_type, body) in [
        (
            "application/json-patch+json",
            json!([{"op": "add", "path": "/data/json", "value": "patched"}]),
        ),
        (
            "application/strategic-merge-patch+json",
            json!({"data": {"strategic": "patched"}}),
        ),
        (
            "application/merge-patch+json",
            json!({"data": {"merge": "patched"}}),
        ),
    ] {
        let body = body.to_string();
        let [through, straight] =
            both(&served.url, &sim, "PATCH", &path, content_type, &body).await;
        assert_eq!(through, straight, "{content_type}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reads_its_own_write_back_at_once() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 200,
            ..SimConfig::default()
        },
        ..Setup::default()
    })
    .await;
    let target = &served.sim.state(ids::PODS)[7];
    let (ns, name) = (target.namespace.clone(), target.name.clone());
    let writer = client_as(&served.url, "writer");
    let pods: Api<Pod> = Api::namespaced(writer, &ns);
    for i in 0..10 {
        let value = format!("v{i}");
        let patch = Patch::Merge(json!({"metadata": {"labels": {"written": value}}}));
        let written = pods
            .patch(&name, &PatchParams::default(), &patch)
            .await
            .unwrap();
        let labelled = |pod: &Pod| pod.metadata.labels.as_ref().unwrap()["written"] == value;
        assert!(
            labelled(&pods.get(&name).await.unwrap()),
            "a consistent get"
        );
        assert!(
            labelled(&pods.get_with(&name, &GetParams::any()).await.unwrap()),
            "a get at resourceVersion 0"
        );
        let selector = format!("written={value}");
        for params in [
            ListParams::default().labels(&selector),
            ListParams::default().labels(&selector).match_any(),
        ] {
            let list = pods.list(&params).await.unwrap();
            assert_eq!(list.items.len(), 1, "{params:?}");
            assert_eq!(
                list.items[0].metadata.resource_version,
                written.metadata.resource_version
            );
        }
        let request = http::Request::get(format!("/v1/pods/index/label/written={value}/count"))
            .header("authorization", "Bearer writer")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let (code, body) = common::send(&served.url, request).await;
        assert_eq!(code, 200);
        assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["count"], 1);
    }
}

/// Pods with this label in this namespace are all the restricted cache
/// holds.
const HELD_NAMESPACE: &str = "kube-system";
const HELD_LABEL: &str = "tier=cached";

fn held(resource: kubecache_reflector::upstream::ApiResource) -> ResourceSpec {
    ResourceSpec {
        namespace: Some(HELD_NAMESPACE.into()),
        label_selector: Some(HELD_LABEL.into()),
        ..ResourceSpec::all(resource)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restricted_cache_answers_only_what_it_holds() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 100,
            ..SimConfig::default()
        },
        spec: held,
        ..Setup::default()
    })
    .await;
    let sim = served.sim.url().to_string();
    let direct: Api<Pod> = Api::namespaced(client_as(&sim, "admin"), HELD_NAMESPACE);
    for (name, labels) in [
        ("in-1", json!({"tier": "cached", "app": "a"})),
        ("in-2", json!({"tier": "cached"})),
        ("out", json!({"tier": "other"})),
    ] {
        direct
            .create(&PostParams::default(), &pod(name, HELD_NAMESPACE, labels))
            .await
            .unwrap();
    }
    let held_list = format!("/api/v1/namespaces/{HELD_NAMESPACE}/pods?labelSelector=tier%3Dcached");
    // The cache has caught up once a consistent read from it lists both.
    let (code, body) = get(&served.url, &held_list).await;
    assert_eq!(code, 200);
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 2);

    let answer = |path: String| {
        let url = served.url.clone();
        async move {
            let request = http::Request::get(&path)
                .body(http_body_util::Empty::<bytes::Bytes>::new())
                .unwrap();
            let response = exchange(&url, request).await;
            let cached = response.headers().contains_key(FROM_CACHE);
            (
                path,
                cached,
                response.status().as_u16(),
                response.into_body(),
            )
        }
    };
    let ns = HELD_NAMESPACE;
    for (path, from_cache) in [
        (held_list.clone(), true),
        (format!("{held_list},app%3Da"), true),
        (format!("{held_list}&watch=1&timeoutSeconds=1"), true),
        (format!("/api/v1/namespaces/{ns}/pods/in-1"), true),
        // Outside the selector, or the namespace: the API server answers.
        (format!("/api/v1/namespaces/{ns}/pods"), false),
        (
            format!("/api/v1/namespaces/{ns}/pods?labelSelector=app%3Da"),
            false,
        ),
        (
            "/api/v1/pods?labelSelector=tier%3Dcached".to_string(),
            false,
        ),
        (
            "/api/v1/namespaces/default/pods?labelSelector=tier%3Dcached".to_string(),
            false,
        ),
        // Not held: it may exist outside the selector.
        (format!("/api/v1/namespaces/{ns}/pods/out"), false),
        (format!("/api/v1/namespaces/{ns}/pods/nope"), false),
    ] {
        let (path, cached, code, body) = answer(path).await;
        assert_eq!(cached, from_cache, "{path}");
        if !from_cache {
            let (direct_code, direct) = get(&sim, &path).await;
            assert_eq!(code, direct_code, "{path}");
            assert_eq!(
                without_managed_fields(&body),
                without_managed_fields(&direct),
                "{path}: the API server's answer, in the cache's shape"
            );
        } else {
            assert_eq!(code, 200, "{path}");
        }
    }
}

/// A protobuf GET of an object outside a restricted cache's selectors is
/// asked of the API server in protobuf: the bytes of its strings that are
/// not UTF-8 reach the client (JSON would have lost them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_get_outside_a_restricted_cache_keeps_strings_that_are_not_utf8() {
    use kubecache_wire::protobuf;
    let served = serve(Setup {
        sim: SimConfig {
            pods: 0,
            configmaps: 0,
            ..SimConfig::default()
        },
        resources: vec![common::resource("", "configmaps", "ConfigMap", true)],
        spec: held,
        ..Setup::default()
    })
    .await;
    let sim = served.sim.url().to_string();
    let ty = protobuf::message_type("v1", "ConfigMap").unwrap();
    let json = format!(
        r#"{{"metadata":{{"name":"raw","namespace":"{HELD_NAMESPACE}"}},"data":{{"fffe":"AXXB"}}}}"#
    );
    let mut raw = protobuf::json_to_proto(ty, json.as_bytes()).unwrap();
    let at = raw.windows(4).position(|w| w == b"AXXB").unwrap();
    raw[at..at + 4].copy_from_slice(b"A\xff\xfeB");
    let request = http::Request::post(format!("/api/v1/namespaces/{HELD_NAMESPACE}/configmaps"))
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(Full::new(bytes::Bytes::from(protobuf::encode_unknown(
            "v1",
            "ConfigMap",
            &raw,
        ))))
        .unwrap();
    assert_eq!(common::send(&sim, request).await.0, 201);
    let request = http::Request::get(format!(
        "/api/v1/namespaces/{HELD_NAMESPACE}/configmaps/raw"
    ))
    .header("accept", "application/vnd.kubernetes.protobuf")
    .body(http_body_util::Empty::<bytes::Bytes>::new())
    .unwrap();
    let response = exchange(&served.url, request).await;
    assert_eq!(response.status(), 200);
    assert!(!response.headers().contains_key(FROM_CACHE), "not held");
    let unknown = protobuf::decode_unknown(response.body()).unwrap();
    let (_, strings) = unknown.to_json_with_strings().unwrap().unwrap();
    assert_eq!(
        format!("{strings:?}"),
        r#"Some([value "/data/fffe" = [41, ff, fe, 42]])"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_bodies_upgrades_and_an_unreachable_api_server_get_a_status() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 10,
            ..SimConfig::default()
        },
        // Lingering as long as the client takes to send its rest.
        linger: std::time::Duration::from_secs(3600),
        ..Setup::default()
    })
    .await;
    let status = |body: &[u8]| serde_json::from_slice::<Value>(body).unwrap();

    // A body beyond the limit: its 413 reaches the client still sending it
    // (a plain close lost it to a reset, a failed write of the body).
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        3 * 1024 * 1024 + 1
    );
    let addr = served.url.trim_start_matches("http://");
    let (first, rest) = (vec![b' '; 64 * 1024], vec![b' '; 1024 * 1024]);
    let (code, _, body) = common::answered_early(addr, &head, &first, &rest).await;
    assert_eq!(code, 413);
    assert_eq!(status(body.as_bytes())["reason"], "RequestEntityTooLarge");

    let request = http::Request::post("/api/v1/namespaces/default/pods/p/exec?command=sh")
        .header("connection", "Upgrade")
        .header("upgrade", "SPDY/3.1")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let (code, body) = common::send(&served.url, request).await;
    assert_eq!(code, 501);
    assert!(
        status(&body)["message"]
            .as_str()
            .unwrap()
            .contains("send them to the API server directly")
    );

    // An API server nobody listens for.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let upstream = PassThrough::new(&kube::Config::new(gone.parse().unwrap()), 1).unwrap();
    let caches = Arc::new(Caches::new(Vec::new(), ServeSettings::default()));
    let router = kubecache_server::router(caches, Arc::new(Auth::None), upstream);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        kubecache_server::transport::Server::new(listener, router).serve(std::future::pending()),
    );
    for path in ["/api", "/api/v1/namespaces/default/configmaps/x"] {
        let (code, body) = get(&url, path).await;
        assert_eq!(code, 503, "{path}");
        let status = status(&body);
        assert_eq!(status["kind"], "Status");
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .contains("could not reach the API server"),
            "{status}"
        );
    }
}

/// A JSON answer without `metadata.managedFields`, which kubecache strips
/// from every object it answers, its own or the API server's.
fn without_managed_fields(body: &[u8]) -> Value {
    let mut value: Value = serde_json::from_slice(body).unwrap();
    if let Some(metadata) = value["metadata"].as_object_mut() {
        metadata.remove("managedFields");
    }
    value
}

/// A chunk of a request body the test sends.
type Chunk = Result<hyper::body::Frame<bytes::Bytes>, std::io::Error>;

/// A POST of config maps in `namespace` as `token` whose body is what is
/// sent on the returned channel.
fn streamed_post(
    namespace: &str,
    token: Option<&str>,
) -> (
    http::Request<http_body_util::StreamBody<futures::channel::mpsc::Receiver<Chunk>>>,
    futures::channel::mpsc::Sender<Chunk>,
) {
    let (sender, receiver) = futures::channel::mpsc::channel(4);
    let mut request = http::Request::post(format!("/api/v1/namespaces/{namespace}/configmaps"))
        .header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request
        .body(http_body_util::StreamBody::new(receiver))
        .unwrap();
    (request, sender)
}

/// kubecache, authorizing, in front of a small sim that judges requests by
/// the demo users' policy.
async fn served_with_the_demo_policy() -> common::Served {
    serve(Setup {
        sim: SimConfig {
            pods: 10,
            namespaces: 3,
            policy: Some(kubecache_loadtest::sim::Policy::demo()),
            ..SimConfig::default()
        },
        auth: Some(Default::default()),
        ..Setup::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_streams_to_the_api_server_which_refuses_before_it_is_whole() {
    use futures::SinkExt;
    use hyper::body::Frame;
    use kubecache_loadtest::sim::auth::demo::NAMESPACE;
    let served = served_with_the_demo_policy().await;
    let chunk = |text: &str| Ok(Frame::data(bytes::Bytes::from(text.to_string())));

    // Anonymous, with a body that never ends: the API server's 403 comes
    // at once (kubecache used to wait for the whole body first, holding it).
    let (request, mut body) = streamed_post(NAMESPACE, None);
    body.send(chunk("{\"apiVersion\":\"v1\",")).await.unwrap();
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        common::exchange(&served.url, request),
    )
    .await
    .expect("answered while the body is still open");
    assert_eq!(answer.status(), 403);
    drop(body);

    // A chunked body of alice's arrives whole, as it was sent.
    let (request, mut body) = streamed_post(NAMESPACE, Some("alice-token"));
    let url = served.url.clone();
    let created = tokio::spawn(async move { common::exchange(&url, request).await });
    for part in [
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",",
        "\"metadata\":{\"name\":\"streamed\"},",
        "\"data\":{\"step\":\"streamed\"}}",
    ] {
        body.send(chunk(part)).await.unwrap();
    }
    drop(body);
    assert_eq!(created.await.unwrap().status(), 201);
    let state = served.sim.state(ids::CONFIGMAPS);
    assert!(
        state
            .iter()
            .any(|o| o.namespace == NAMESPACE && o.name == "streamed")
    );

    // A chunked body (no Content-Length) past the limit is cut: 413. The
    // client sends one byte past 3 MiB and then nothing until the answer
    // has come: kubecache has read every byte sent, so its close after
    // answering is clean (bytes still in flight would make it a reset that
    // can reach the client before the answer).
    let (request, mut body) = streamed_post(NAMESPACE, Some("alice-token"));
    let url = served.url.clone();
    let refused = tokio::spawn(async move { common::exchange(&url, request).await });
    let mib = " ".repeat(1024 * 1024);
    for part in [mib.as_str(), &mib, &mib, " "] {
        body.send(chunk(part)).await.unwrap();
    }
    let refused = refused.await.unwrap();
    drop(body);
    assert_eq!(refused.status(), 413);
    let status: Value = serde_json::from_slice(refused.body()).unwrap();
    assert_eq!(status["reason"], "RequestEntityTooLarge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_expecting_100_continue_is_asked_for_only_once_the_api_server_allows_it() {
    use kubecache_loadtest::sim::auth::demo::NAMESPACE;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let served = served_with_the_demo_policy().await;
    let addr = served.url.trim_start_matches("http://").to_string();
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"expected"}}"#;
    // A POST whose body waits for `100 Continue`, sent as `authorization`.
    let post = |authorization: &str| {
        format!(
            "POST /api/v1/namespaces/{NAMESPACE}/configmaps HTTP/1.1\r\nHost: {addr}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n{authorization}\
             Connection: close\r\nExpect: 100-continue\r\n\r\n",
            body.len()
        )
    };
    let bound = std::time::Duration::from_secs(30);

    // Anonymous: the API server's 403 with no 100 before it, the body
    // never asked for, and the connection closed after it.
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stream.write_all(post("").as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(bound, stream.read_to_end(&mut answer))
        .await
        .expect("answered and closed without the body")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(!answer.contains("100 Continue"), "{answer}");

    // Allowed: 100 first, then the body is sent and the object created.
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let post = post("Authorization: Bearer alice-token\r\n");
    stream.write_all(post.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    tokio::time::timeout(bound, async {
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "closed");
            head.push(byte[0]);
        }
    })
    .await
    .expect("a 100 Continue");
    assert_eq!(
        String::from_utf8_lossy(&head),
        "HTTP/1.1 100 Continue\r\n\r\n"
    );
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(bound, stream.read_to_end(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 201 "), "{answer}");
    let state = served.sim.state(ids::CONFIGMAPS);
    assert!(state.iter().any(|o| o.name == "expected"));
}
