//! Real clients pointed at kubecache instead of the API server: kube-runtime's
//! watcher + reflector converge to the API server's state under churn, with
//! both initial-list strategies, and kubectl gets, prints and watches.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Setup, serve};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};
use kubecache_loadtest::sim::{SimConfig, ids};

/// kube-runtime's reflector of pods through kubecache, under churn, then
/// equal to the sim's state once the churn stops.
async fn kube_runtime_through_kubecache_converges(config: watcher::Config) {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 5_000,
            churn_per_sec: 300.0,
            ..SimConfig::default()
        },
        ..Setup::default()
    })
    .await;
    let (reader, writer) = reflector::store::<Pod>();
    let api = Api::<Pod>::all(common::client(&served.url));
    let stream = reflector(writer, watcher(api, config))
        .default_backoff()
        .applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(Duration::from_secs(60), reader.wait_until_ready())
        .await
        .expect("kube-runtime syncs through kubecache within a minute")
        .expect("store ready");
    // Keep churning while it watches through kubecache.
    tokio::time::sleep(Duration::from_secs(3)).await;
    served.sim.set_churn(0.0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let want: BTreeMap<String, String> = served
        .sim
        .state(ids::PODS)
        .iter()
        .map(|o| (o.key.clone(), o.revision.to_string()))
        .collect();
    let mut got = BTreeMap::new();
    for _ in 0..300 {
        got = reader
            .state()
            .iter()
            .map(|p| {
                (
                    format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()),
                    p.resource_version().unwrap_or_default(),
                )
            })
            .collect();
        if got == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    task.abort();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "kube-runtime's store equals the API server's state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_list_watch_through_kubecache_converges_under_churn() {
    kube_runtime_through_kubecache_converges(watcher::Config::default().page_size(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_streaming_list_through_kubecache_converges_under_churn() {
    kube_runtime_through_kubecache_converges(watcher::Config::default().streaming_lists()).await;
}
