//! Expensive requests: selectors bounded in requirements (a set of values
//! is one requirement, however long), lists that examine or render many
//! objects built off the async workers, and their answers unchanged. The
//! sim answers the same requests as the oracle.

use crate::common;

use common::{Setup, get, names, serve};
use kubecache_loadtest::sim::SimConfig;
use kubecache_loadtest::sim::resources::ids;
use kubecache_server::ServeSettings;
use serde_json::Value;

/// `kubecache_offloaded_requests_total` as kubecache's `/metrics` says.
async fn offloaded(url: &str) -> f64 {
    let (code, body) = get(url, "/metrics").await;
    assert_eq!(code, 200);
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|line| line.strip_prefix("kubecache_offloaded_requests_total "))
        .map_or(0.0, |value| value.trim().parse().unwrap())
}

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_are_bounded_and_heavy_lists_are_offloaded_with_the_same_answers() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 6000,
            ..SimConfig::default()
        },
        settings: ServeSettings {
            max_selector_requirements: 20,
            ..ServeSettings::default()
        },
        metrics_alone: true,
        ..Setup::default()
    })
    .await;
    let (url, sim) = (served.url.as_str(), served.sim.url());
    // An app some pods run.
    let app = served.sim.state(ids::PODS)[0]
        .labels
        .iter()
        .find(|(key, _)| key == "app")
        .map(|(_, value)| value.clone())
        .unwrap();

    // Too many requirements: 400, naming the limit, for lists and watches;
    // label and field requirements count together.
    let labels = |n: usize| {
        (0..n)
            .map(|i| format!("k{i}!=v"))
            .collect::<Vec<_>>()
            .join(",")
    };
    for path in [
        format!("/api/v1/pods?labelSelector={}", labels(21)),
        format!("/api/v1/pods?watch=1&labelSelector={}", labels(21)),
        format!(
            "/api/v1/pods?labelSelector={}&fieldSelector=metadata.name!=a",
            labels(20)
        ),
    ] {
        let (code, body) = get(url, &path).await;
        assert_eq!(code, 400, "{path}");
        let status = json(&body);
        assert_eq!(status["reason"], "BadRequest");
        let message = status["message"].as_str().unwrap();
        assert!(
            message.contains("at most 20") && message.contains("--max-selector-requirements"),
            "{message}"
        );
    }
    let (code, _) = get(url, &format!("/api/v1/pods?labelSelector={}", labels(20))).await;
    assert_eq!(code, 200, "at the limit");

    // A set of thousands of values is one requirement; the same pods as
    // the API server selects.
    let values: Vec<String> = (0..5000)
        .map(|i| format!("no-{i}"))
        .chain([app.clone()])
        .collect();
    let path = format!("/api/v1/pods?labelSelector=app+in+({})", values.join(","));
    let (code, body) = get(url, &path).await;
    assert_eq!(code, 200);
    let (_, want) = get(sim, &path).await;
    assert_eq!(names(&json(&body)), names(&json(&want)));
    assert!(!names(&json(&want)).is_empty(), "the selector selects pods");

    // Heavy lists (a selector examining every pod, a Table of every pod)
    // are offloaded and answer as before; a page of 10 is not offloaded.
    let before = offloaded(url).await;
    let (code, _) = get(url, "/api/v1/pods?limit=10").await;
    assert_eq!(code, 200);
    assert_eq!(offloaded(url).await, before, "light work stays put");
    let path = format!("/api/v1/pods?labelSelector=app%21%3D{app}");
    let (code, body) = get(url, &path).await;
    assert_eq!(code, 200);
    let (_, want) = get(sim, &path).await;
    assert_eq!(names(&json(&body)), names(&json(&want)));
    let request = http::Request::get("/api/v1/pods")
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let (code, body) = common::send(url, request).await;
    assert_eq!(code, 200);
    assert_eq!(json(&body)["rows"].as_array().unwrap().len(), 6000);
    assert_eq!(offloaded(url).await, before + 2.0);

    // `remainingItemCount` only when no selector filters, as the API
    // server sets it.
    for path in [
        "/api/v1/pods?limit=5".to_string(),
        format!("/api/v1/pods?limit=5&labelSelector=app%3D{app}"),
    ] {
        let (_, body) = get(url, &path).await;
        let (_, want) = get(sim, &path).await;
        assert_eq!(
            json(&body)["metadata"].get("remainingItemCount").is_some(),
            json(&want)["metadata"].get("remainingItemCount").is_some(),
            "{path}"
        );
    }
}
