//! What the tests of the simulated API server over HTTP share: a sim with
//! the demo policy and a pod of a known shape in two namespaces, one
//! request helper, one watch reader and the reviews.

use kubecache_loadtest::sim::auth::demo;
use kubecache_loadtest::sim::{Policy, Sim, SimConfig, ids};
use serde_json::{Value, json};

/// The namespace [`demo::DEVELOPER`] may not touch.
pub const OTHER_NAMESPACE: &str = "checkout-prod";

/// A sim enforcing the demo policy, with pod `web-0` (containers `app`
/// and `sidecar`, label `app=web`) in [`demo::NAMESPACE`] and in
/// [`OTHER_NAMESPACE`], and configmaps and widgets spread over both.
pub async fn demo_sim() -> (String, Sim) {
    let (url, sim) = Sim::start(SimConfig {
        namespaces: 4,
        configmaps: 8,
        widgets: 8,
        policy: Some(Policy::demo()),
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    sim.seed(
        ids::PODS,
        [pod(demo::NAMESPACE, "web-0"), pod(OTHER_NAMESPACE, "web-0")],
    )
    .expect("pods seeded");
    (url, sim)
}

/// A running pod with two containers.
pub fn pod(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
        "spec": {
            "nodeName": "node-1",
            "containers": [
                {"name": "app", "image": "web:1", "env": [{"name": "MODE", "value": "prod"}]},
                {"name": "sidecar", "image": "proxy:1"}
            ]
        },
        "status": {
            "phase": "Running",
            "hostIP": "172.16.0.10",
            "podIP": "10.128.0.7",
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    })
}

/// The token of a demo user.
pub fn token(user: &str) -> String {
    Policy::demo()
        .token_of(user)
        .expect("a demo user")
        .to_string()
}

/// One request: `token` as bearer (none: anonymous), `body` with its
/// content type. Returns the code and the body (JSON when it parses,
/// else a JSON string of the text).
pub async fn call(
    url: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<(&str, String)>,
) -> (u16, Value) {
    let mut request =
        reqwest::Client::new().request(method.parse().expect("a method"), format!("{url}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some((content_type, body)) = body {
        request = request.header("content-type", content_type).body(body);
    }
    let response = request.send().await.expect("the sim answers");
    let code = response.status().as_u16();
    let text = response.text().await.expect("a body");
    (
        code,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The first `n` events of the watch at `path`, read as `token`.
pub async fn watch_events(url: &str, path: &str, token: &str, n: usize) -> Vec<Value> {
    use futures::StreamExt;
    let response = reqwest::Client::new()
        .get(format!("{url}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("the sim answers");
    let mut stream = response.bytes_stream();
    let (mut buf, mut lines) = (Vec::new(), Vec::new());
    while lines.len() < n {
        let chunk = stream.next().await.expect("more events").expect("a chunk");
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            lines.push(serde_json::from_slice(&line).expect("a JSON event"));
        }
    }
    lines
}

/// Posts a `TokenReview` or (any other `kind`) a `SubjectAccessReview`
/// as `token`: the code and the answer.
pub async fn review(url: &str, kind: &str, token: &str, body: Value) -> (u16, Value) {
    let path = match kind {
        "TokenReview" => "/apis/authentication.k8s.io/v1/tokenreviews",
        _ => "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    };
    call(
        url,
        "POST",
        path,
        Some(token),
        Some(("application/json", body.to_string())),
    )
    .await
}

/// A TokenReview of `token`.
pub fn token_review(token: &str) -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
}

/// A SubjectAccessReview of what `user` in `groups` may do: `attributes`
/// of a resource, or of a path when they have one.
pub fn access_review(user: &str, groups: &[&str], attributes: Value) -> Value {
    let mut spec = json!({"user": user, "groups": groups});
    let key = if attributes.get("path").is_some() {
        "nonResourceAttributes"
    } else {
        "resourceAttributes"
    };
    spec[key] = attributes;
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
}
