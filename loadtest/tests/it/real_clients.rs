//! Real client libraries and tools work against the simulated API server:
//! kube-runtime's watcher + reflector (both initial-list strategies) and
//! kubectl (see `kubecache_testkit::kubectl` for when it may be missing).

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Config, ResourceExt};
use kubecache_loadtest::sim::{Sim, SimConfig, ids};
use kubecache_testkit::kubectl;

fn client(url: &str) -> Client {
    Client::try_from(Config::new(url.parse().expect("sim URL"))).expect("kube client")
}

/// Syncs kube-runtime's reflector with the sim under churn, stops the churn
/// and checks that the reflector's store ends up equal to the sim's state.
async fn kube_runtime_reflector_converges(config: watcher::Config) {
    let (url, sim) = Sim::start(SimConfig {
        pods: 20_000,
        churn_per_sec: 300.0,
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let (reader, writer) = reflector::store::<Pod>();
    let stream = reflector(writer, watcher(Api::<Pod>::all(client(&url)), config))
        .default_backoff()
        .applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(Duration::from_secs(120), reader.wait_until_ready())
        .await
        .expect("kube-runtime syncs within 2 minutes")
        .expect("store ready");
    sim.set_churn(0.0);
    let view = || {
        reader
            .state()
            .iter()
            .map(|p| {
                (
                    format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()),
                    p.resource_version().unwrap_or_default(),
                )
            })
            .collect()
    };
    let (want, got) = sim
        .converged(ids::PODS, Duration::from_secs(30), view)
        .await;
    task.abort();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "kube-runtime's store equals the sim's state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_list_watch_syncs_twenty_thousand_pods_under_churn() {
    kube_runtime_reflector_converges(watcher::Config::default().page_size(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_streaming_list_syncs_twenty_thousand_pods_under_churn() {
    kube_runtime_reflector_converges(watcher::Config::default().streaming_lists()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_pods_and_widgets() {
    if !kubectl::available() {
        return;
    }
    let (_url, sim) = Sim::start(SimConfig {
        pods: 120,
        widgets: 7,
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let dir = std::env::temp_dir().join(format!("kubecache-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig()).unwrap();
    let path = kubeconfig.to_str().expect("a UTF-8 path").to_owned();
    let (pods, widgets) = tokio::task::spawn_blocking(move || {
        (
            kubectl::ok(&["--kubeconfig", &path, "get", "pods", "-A", "--no-headers"]),
            kubectl::ok(&["--kubeconfig", &path, "get", "widgets", "-A", "-o", "name"]),
        )
    })
    .await
    .unwrap();
    let names: Vec<&str> = pods
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    let want: Vec<String> = sim
        .state(ids::PODS)
        .iter()
        .map(|o| o.name.clone())
        .collect();
    assert_eq!(names.len(), want.len());
    assert!(want.iter().all(|n| names.contains(&n.as_str())));
    assert_eq!(
        widgets
            .lines()
            .filter(|l| l.starts_with("widget.example.com/"))
            .count(),
        7
    );
    std::fs::remove_dir_all(&dir).ok();
}
