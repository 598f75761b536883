//! Discovery and OpenAPI documents are answered by kubecache from its own
//! copies: byte for byte the API server's (and, where the sim serves what
//! a real one does, the golden corpus's), in each form asked for (legacy,
//! aggregated), to whoever the API server would answer, and without
//! asking it again while they are fresh.

use crate::common;

use common::{Served, Setup, serve};
use kubecache_loadtest::sim::{Policy, SimConfig};
use kubecache_testkit::golden;

/// The documents asked for.
const PATHS: [&str; 9] = [
    "/version",
    "/api",
    "/api/v1",
    "/apis",
    "/apis/example.com",
    "/apis/example.com/v1",
    "/openapi/v2",
    "/openapi/v3",
    "/openapi/v3/api/v1",
];

/// What kubectl and client-go accept for `/api` and `/apis`: aggregated
/// discovery first.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

/// GET `path` from `url` as `token`, accepting `accept` (if any): status,
/// `Content-Type` and body.
async fn get(
    url: &str,
    path: &str,
    token: Option<&str>,
    accept: Option<&str>,
) -> (u16, String, bytes::Bytes) {
    let response = exchange(url, path, token, accept).await;
    let content_type = header(&response, "content-type");
    (
        response.status().as_u16(),
        content_type,
        response.into_body(),
    )
}

async fn exchange(
    url: &str,
    path: &str,
    token: Option<&str>,
    accept: Option<&str>,
) -> http::Response<bytes::Bytes> {
    let mut request = http::Request::get(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    let request = request
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    common::exchange(url, request).await
}

fn header(response: &http::Response<bytes::Bytes>, name: &str) -> String {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

/// kubecache with authentication in front of a sim with the demo's users
/// and RBAC.
async fn served_with_the_demo_policy() -> Served {
    serve(Setup {
        sim: SimConfig {
            pods: 10,
            policy: Some(Policy::demo()),
            ..SimConfig::default()
        },
        auth: Some(common::matrix_auth()),
        ..Setup::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_is_answered_from_kubecache_s_copies_to_whoever_may_read_it() {
    let served = served_with_the_demo_policy().await;
    let sim = served.sim.url().to_string();
    // The API server's bytes, and its refusals, for each caller.
    for token in [Some("alice-token"), Some("eve-token"), None] {
        for path in PATHS {
            assert_eq!(
                get(&served.url, path, token, None).await,
                get(&sim, path, token, None).await,
                "{path} as {token:?}"
            );
        }
        for path in ["/api", "/apis"] {
            assert_eq!(
                get(&served.url, path, token, Some(AGGREGATED)).await,
                get(&sim, path, token, Some(AGGREGATED)).await,
                "{path} aggregated as {token:?}"
            );
        }
    }
    // Each form as its own copy: aggregated v2 for kubectl, the legacy
    // form for a client that accepts only v2beta1 (gone from v1.34) or
    // plain JSON, and every document there is.
    let alice = Some("alice-token");
    for path in PATHS {
        assert_eq!(get(&served.url, path, alice, None).await.0, 200, "{path}");
    }
    let aggregated = get(&served.url, "/apis", alice, Some(AGGREGATED)).await;
    assert_eq!(
        aggregated.1,
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let beta_only = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    let legacy = get(&served.url, "/apis", alice, Some(beta_only)).await;
    assert_eq!(legacy, get(&served.url, "/apis", alice, None).await);
    assert_eq!(legacy.1, "application/json");
    // Asked again and again (as kubectl asks on every invocation): from
    // kubecache's copies. (A copy is fresh for 30 s; were the machine that
    // slow, each would be fetched once more.)
    let before = served.sim.discovery_requests();
    for _ in 0..100 {
        for path in PATHS {
            assert_eq!(get(&served.url, path, alice, None).await.0, 200);
        }
    }
    let asked = served.sim.discovery_requests() - before;
    assert!(
        asked <= PATHS.len() as u64,
        "{asked} discovery requests reached the API server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_bytes_are_the_api_server_s_and_openapi_is_served_for_kubectl_s_cache() {
    let served = served_with_the_demo_policy().await;
    let alice = Some("alice-token");

    // Where the sim serves what a real API server serves, kubecache's
    // bytes are the corpus's: `/api` whole, and the core resources'
    // entries of `/api/v1`.
    let (code, _, api) = get(&served.url, "/api", alice, None).await;
    assert_eq!(code, 200);
    assert_eq!(&api[..], &golden::read("discovery/api.json")[..]);
    let (_, _, v1) = get(&served.url, "/api/v1", alice, None).await;
    let entries = |document: &[u8]| -> Vec<String> {
        let document: serde_json::Value = serde_json::from_slice(document).unwrap();
        document["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| ["pods", "configmaps", "namespaces"].contains(&r["name"].as_str().unwrap()))
            .map(|r| serde_json::to_string(r).unwrap())
            .collect()
    };
    let recorded = golden::read("discovery/api_v1.json");
    let mut ours = entries(&v1);
    let mut theirs = entries(&recorded);
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs);
    for entry in &ours {
        let recorded = String::from_utf8_lossy(&recorded);
        assert!(recorded.contains(entry.as_str()), "{entry}");
    }
    assert!(v1.starts_with(br#"{"kind":"APIResourceList","groupVersion":"v1","#));
    assert!(v1.ends_with(b"]}\n"));

    // The OpenAPI v3 index names each group-version's document by its
    // hash; asked for by that URL (as kubectl does), kubecache answers it
    // as the API server does: cacheable for good, 304 for its ETag.
    let (_, _, index) = get(&served.url, "/openapi/v3", alice, None).await;
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    let url = index["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let hash = url.split_once("?hash=").unwrap().1.to_string();
    let document = exchange(&served.url, &url, alice, Some("application/json")).await;
    assert_eq!(document.status(), 200);
    assert_eq!(header(&document, "cache-control"), "public, immutable");
    assert_eq!(header(&document, "etag"), format!("\"{hash}\""));
    let openapi: serde_json::Value = serde_json::from_slice(document.body()).unwrap();
    let pod = &openapi["components"]["schemas"]["io.k8s.api.core.v1.Pod"];
    assert_eq!(
        pod["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "", "kind": "Pod", "version": "v1"}])
    );
    assert!(
        pod["description"]
            .as_str()
            .unwrap()
            .starts_with("Pod is a collection of containers")
    );
    let mut request = http::Request::get(&url)
        .header("authorization", "Bearer alice-token")
        .header("accept", "application/json")
        .header("if-none-match", format!("\"{hash}\""))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    assert_eq!(common::exchange(&served.url, request).await.status(), 304);
    // A stale hash is sent on to the current one, as the API server does.
    request = http::Request::get("/openapi/v3/api/v1?hash=0123")
        .header("authorization", "Bearer alice-token")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let moved = common::exchange(&served.url, request).await;
    assert_eq!(moved.status(), 301);
    assert_eq!(header(&moved, "location"), url);
}
