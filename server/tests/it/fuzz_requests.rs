//! No input makes kubecache panic or answer without a Status: requests
//! built at random (proptest) from paths, every query parameter, headers
//! and methods, valid and hostile, against kubecache in front of the sim.
//!
//! Each answer must arrive (a panicking handler drops its connection), be
//! no 5xx but 503/504 (the API server unavailable or a read waiting too
//! long), and, when it is an error in JSON, a `Status` with the answer's
//! code. The corpus of inputs that once broke kubecache or sit at a bound
//! is `fuzz_requests/corpus.txt` (run first, every time); proptest records
//! the seed of any new failure in `fuzz_requests.regressions`, and replays
//! it first from then on (commit it with the fix).

use crate::common;

use std::time::Duration;

use common::{Setup, serve};
use http_body_util::BodyExt;
use kubecache_loadtest::sim::SimConfig;
use kubecache_reflector::upstream::ApiResource;
use kubecache_server::ServeSettings;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};

/// One request: method, path with query, headers.
#[derive(Debug, Clone)]
struct Request {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
}

/// The bound of one answer's head; a bug fails after it, never hangs.
const PATIENCE: Duration = Duration::from_secs(30);

/// Sends `request` to `url`: the response, or `None` for what no client
/// could send.
async fn send(
    url: &str,
    request: &Request,
) -> Result<Option<http::Response<hyper::body::Incoming>>, String> {
    let mut builder = http::Request::builder()
        .method(request.method.as_str())
        .uri(request.target.as_str());
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let Ok(mut built) = builder.body(http_body_util::Full::new(bytes::Bytes::from_static(
        b"{not json",
    ))) else {
        return Ok(None);
    };
    let mut sender = common::open(url, &mut built).await;
    let response = tokio::time::timeout(PATIENCE, sender.send_request(built))
        .await
        .map_err(|_| format!("no answer within {PATIENCE:?}"))?
        .map_err(|e| format!("no answer (a panic drops the connection?): {e}"))?;
    Ok(Some(response))
}

/// `header` as the sim can answer it: the sim serves no Tables (it answers
/// 406), where the API server negotiates a Table before it reads the rest
/// of the request, then answers a bad one as it would in JSON (a malformed
/// `resourceVersion` of a GET is its 500 in either, as v1.28.4 answered).
fn without_table((name, value): &(String, String)) -> (String, String) {
    let table = name.eq_ignore_ascii_case("accept") && value.contains("as=Table");
    let value = if table { "application/json" } else { value };
    (name.clone(), value.to_string())
}

/// Sends `request` to kubecache at `url` and checks its answer; a 5xx is
/// fine when the API server at `upstream` answers the same request with it
/// (kubecache passed its answer through, without any `/predicates/{list}`
/// prefix).
async fn check(url: &str, upstream: &str, request: &Request) -> Result<(), String> {
    let Some(response) = send(url, request).await? else {
        return Ok(());
    };
    let code = response.status().as_u16();
    if code >= 500 && code != 503 && code != 504 {
        let target = request
            .target
            .strip_prefix("/predicates/")
            .and_then(|rest| rest.find('/').map(|slash| &rest[slash..]))
            .unwrap_or(&request.target);
        let passed = Request {
            target: target.to_string(),
            headers: request.headers.iter().map(without_table).collect(),
            ..request.clone()
        };
        let theirs = send(upstream, &passed).await?.map(|r| r.status().as_u16());
        if theirs != Some(code) {
            return Err(format!("answered {code}; the API server {theirs:?}"));
        }
    }
    let json = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if code < 400 || !json || request.method == "HEAD" {
        // A success (perhaps a watch, streaming on): the head is enough.
        return Ok(());
    }
    let body = tokio::time::timeout(PATIENCE, response.into_body().collect())
        .await
        .map_err(|_| "the error body never ended".to_string())?
        .map_err(|e| format!("the error body broke: {e}"))?
        .to_bytes();
    let status: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| format!("{code}, a body that is not JSON ({e}): {body:?}"))?;
    if status["kind"] != "Status" || status["code"] != code {
        return Err(format!("{code}, not its Status: {status}"));
    }
    Ok(())
}

/// A path segment: a word kubecache knows, or anything, percent-encoded.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "api", "apis", "v1", "namespaces", "pods", "configmaps", "default", "payments-prod",
            "kube-system", "status", "log", "watch", "index", "namespace", "label", "count",
            "example.com", "widgets", "predicates", "generation", "", "..", "%2F", "%00",
            "a%2Fb", "app.kubernetes.io%2Fname=web",
        ])
        .prop_map(str::to_string),
        1 => any::<String>().prop_map(|s| encode(&s)),
    ]
}

/// A path: a known prefix, then segments.
fn path() -> impl Strategy<Value = String> {
    let prefix = prop::sample::select(vec![
        "/api/v1",
        "/apis/example.com/v1",
        "/api/v1/namespaces/default",
        "/v1/pods",
        "/v1",
        "/predicates/generation/api/v1",
        "",
    ]);
    (prefix, prop::collection::vec(segment(), 0..5))
        .prop_map(|(prefix, segments)| format!("{prefix}/{}", segments.join("/")))
}

/// A query parameter's value: numbers at and past every bound, selector
/// grammar, or anything.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "1",
            "-1",
            "+5",
            "1e3",
            "0x10",
            "007",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999",
            "true",
            "false",
            "1.5",
            "NotOlderThan",
            "Exact",
            "app",
            "app=web",
            "app!=web",
            "app in (a,b)",
            "!app",
            "app notin ()",
            "a,b,",
            "metadata.name=x",
            "spec.nodeName=n",
            "status.phase!=Running",
            "=",
            "!",
            "(",
            ")",
            "generation",
            "labels,annotations",
            "Object",
            "None",
            "",
        ])
        .prop_map(str::to_string),
        any::<String>(),
        "[a-z=!,() ]{0,64}",
    ]
}

fn query() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "timeoutSeconds",
        "watch",
        "allowWatchBookmarks",
        "sendInitialEvents",
        "predicates",
        "includeObject",
        "pretty",
        "fieldManager",
        "dryRun",
        "x",
    ]);
    prop::collection::vec((key, value()), 0..5).prop_map(|params| {
        params
            .iter()
            .map(|(key, value)| format!("{key}={}", encode(value)))
            .collect::<Vec<_>>()
            .join("&")
    })
}

fn headers() -> impl Strategy<Value = Vec<(String, String)>> {
    let accept = prop::sample::select(vec![
        "application/json",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        "application/vnd.kubernetes.protobuf",
        "application/yaml",
        "*/*",
        "text/html;q=0",
        ";;;",
    ])
    .prop_map(|accept| ("accept".to_string(), accept.to_string()));
    let authorization = prop::sample::select(vec!["Bearer ", "Bearer x", "Basic eDp5", "bearer"])
        .prop_map(|value| ("authorization".to_string(), value.to_string()));
    (
        prop::option::of(accept),
        prop::option::of(authorization),
        prop::option::of("[a-z/+;=.*]{0,40}".prop_map(|v| ("content-type".to_string(), v))),
    )
        .prop_map(|(a, b, c)| [a, b, c].into_iter().flatten().collect())
}

fn requests() -> impl Strategy<Value = Request> {
    let method = prop::sample::select(vec![
        "GET", "GET", "GET", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS",
    ]);
    (method, path(), query(), headers()).prop_map(|(method, path, query, headers)| Request {
        method: method.to_string(),
        target: if query.is_empty() {
            path
        } else {
            format!("{path}?{query}")
        },
        headers,
    })
}

/// Percent-encodes everything but unreserved characters.
fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The corpus: one request per line, `METHOD TARGET [Header: value]...`
/// (headers separated by ` | `).
fn corpus() -> Vec<Request> {
    include_str!("fuzz_requests/corpus.txt")
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| {
            let mut parts = line.split(" | ");
            let (method, target) = parts.next().unwrap().split_once(' ').unwrap();
            Request {
                method: method.to_string(),
                target: target.to_string(),
                headers: parts
                    .map(|h| {
                        let (name, value) = h.split_once(": ").unwrap();
                        (name.to_string(), value.to_string())
                    })
                    .collect(),
            }
        })
        .collect()
}

#[test]
fn no_request_gets_a_panic_or_an_answer_without_a_status() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let served = runtime.block_on(serve(Setup {
        sim: SimConfig {
            pods: 200,
            configmaps: 20,
            widgets: 5,
            ..SimConfig::default()
        },
        resources: vec![
            ApiResource::pods(),
            common::resource("", "configmaps", "ConfigMap", true),
            common::resource("", "namespaces", "Namespace", false),
            common::resource("example.com", "widgets", "Widget", true),
        ],
        settings: ServeSettings {
            // A read waiting for a resourceVersion from the future answers
            // 504 soon.
            read_wait: Duration::from_millis(50),
            ..ServeSettings::default()
        },
        ..Setup::default()
    }));
    let (url, upstream) = (served.url.clone(), served.sim.url().to_string());
    for request in corpus() {
        if let Err(error) = runtime.block_on(check(&url, &upstream, &request)) {
            panic!("{request:?}: {error}");
        }
    }
    let mut runner = TestRunner::new(Config {
        cases: 3000,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        source_file: Some(file!()),
        ..Config::default()
    });
    let outcome = runner.run(&requests(), |request| {
        runtime
            .block_on(check(&url, &upstream, &request))
            .map_err(|error| TestCaseError::fail(format!("{request:?}: {error}")))
    });
    if let Err(error) = outcome {
        panic!("{error}");
    }
}
