//! Read-your-writes against a cache held behind: the API server refuses
//! every watch, so the cache applies nothing. A client that wrote through
//! kubecache waits for its write (and gets it once the cache catches up);
//! another client reads the cache as it is. Alone in its binary: it watches
//! a process-wide gauge.

use crate::common;

use std::time::Duration;

use common::{Setup, serve};
use kubecache_loadtest::sim::{Fault, FaultSpec, FaultTarget, SimConfig, ids};
use kubecache_server::ServeSettings;
use kubecache_testkit::wait::until_async;
use serde_json::json;

/// Reads waiting for their client's own write of pods, from `/metrics`.
async fn waiting(url: &str) -> f64 {
    let (_, body) = common::get(url, "/metrics").await;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|line| {
            line.strip_prefix(r#"kubecache_read_your_writes_waiting{resource="pods"} "#)
        })
        .map_or(0.0, |value| value.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_wait_for_their_clients_write_and_only_theirs() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 100,
            ..SimConfig::default()
        },
        settings: ServeSettings {
            // Longer than the reflector's backoff once watches work again.
            read_wait: Duration::from_secs(60),
            ..ServeSettings::default()
        },
        ..Setup::default()
    })
    .await;
    let target = &served.sim.state(ids::PODS)[3];
    let (ns, name) = (target.namespace.clone(), target.name.clone());
    let object = format!("/api/v1/namespaces/{ns}/pods/{name}");

    // Hold the cache: every watch fails, the reflector's included.
    let mut status = served.caches.iter().next().unwrap().status.clone();
    served.sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::InternalError,
        times: u32::MAX,
    });
    served.sim.cut_watches();
    status.wait_for(|s| s.phase == "backing_off").await.unwrap();

    let request = http::Request::patch(&object)
        .header("authorization", "Bearer writer")
        .header("content-type", "application/merge-patch+json")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            json!({"metadata": {"labels": {"written": "yes"}}}).to_string(),
        )))
        .unwrap();
    let (code, body) = common::send(&served.url, request).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));

    // Another client reads the cache as it is: without the write.
    let (code, other) =
        common::get_as(&served.url, &format!("{object}?resourceVersion=0"), "other").await;
    assert_eq!(code, 200);
    assert!(other["metadata"]["labels"].get("written").is_none());

    // The writer's reads wait, whatever their resourceVersion.
    let list = format!(
        "/api/v1/namespaces/{ns}/pods?resourceVersion=0&fieldSelector=metadata.name%3D{name}"
    );
    let url = served.url.clone();
    let mut get = tokio::spawn({
        let (url, object) = (url.clone(), object.clone());
        async move { common::get_as(&url, &format!("{object}?resourceVersion=0"), "writer").await }
    });
    let mut listed = tokio::spawn(async move { common::get_as(&url, &list, "writer").await });
    tokio::select! {
        answer = &mut get => panic!("the get answered before the cache had the write: {:?}", answer.map(|(code, _)| code)),
        answer = &mut listed => panic!("the list answered before the cache had the write: {:?}", answer.map(|(code, _)| code)),
        () = until_async("both of the writer's reads wait for its write", async || {
            waiting(&served.url).await >= 2.0
        }) => {}
    }

    // Watches work again: the cache catches up and the reads answer.
    served.sim.clear_faults();
    let (code, pod) = get.await.unwrap();
    assert_eq!(code, 200);
    assert_eq!(pod["metadata"]["labels"]["written"], "yes");
    let (code, list) = listed.await.unwrap();
    assert_eq!(code, 200);
    assert_eq!(list["items"][0]["metadata"]["labels"]["written"], "yes");
}
