//! Discovery documents are answered by kubecache from its own copies: byte
//! for byte the API server's, to whoever the API server would answer, and
//! without asking it again while they are fresh.

mod common;

use common::{Setup, serve};
use kubecache_loadtest::sim::{Policy, SimConfig};
use kubecache_server::auth::AuthSettings;

/// The documents asked for.
const PATHS: [&str; 6] = [
    "/version",
    "/api",
    "/api/v1",
    "/apis",
    "/apis/example.com",
    "/apis/example.com/v1",
];

/// GET `path` from `url` as `token`: status, `Content-Type` and body.
async fn get(url: &str, path: &str, token: Option<&str>) -> (u16, String, bytes::Bytes) {
    let mut request = http::Request::get(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = common::exchange(url, request).await;
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (
        response.status().as_u16(),
        content_type,
        response.into_body(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_is_answered_from_kubecache_s_copies_to_whoever_may_read_it() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 10,
            policy: Some(Policy::demo()),
            ..SimConfig::default()
        },
        auth: Some(AuthSettings::default()),
        ..Setup::default()
    })
    .await;
    let sim = served.sim.url().to_string();
    // The API server's bytes, and its refusals, for each caller.
    for token in [Some("alice-token"), Some("eve-token"), None] {
        for path in PATHS {
            assert_eq!(
                get(&served.url, path, token).await,
                get(&sim, path, token).await,
                "{path} as {token:?}"
            );
        }
    }
    // Asked again and again (as kubectl asks on every invocation): from
    // kubecache's copies. (A copy is fresh for 30 s; were the machine that
    // slow, each would be fetched once more.)
    let before = served.sim.discovery_requests();
    for _ in 0..100 {
        for path in PATHS {
            assert_eq!(get(&served.url, path, Some("alice-token")).await.0, 200);
        }
    }
    let asked = served.sim.discovery_requests() - before;
    assert!(
        asked <= PATHS.len() as u64,
        "{asked} discovery requests reached the API server"
    );
}
