//! Real clients pointed at kubecache instead of the API server: kube-runtime's
//! watcher + reflector converge to the API server's state under churn, with
//! both initial-list strategies, and kubectl gets, prints and watches.

use crate::common;

use std::time::Duration;

use common::{Setup, serve};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};
use kubecache_loadtest::sim::{SimConfig, ids};
use kubecache_reflector::upstream::ApiResource;
use kubecache_testkit::kubectl;
use kubecache_testkit::process::Process;

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
    let from = served.sim.store().revision();
    kubecache_testkit::wait::until("900 writes of churn", || {
        served.sim.store().revision() >= from + 900
    })
    .await;
    served.sim.set_churn(0.0);
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
    let (want, got) = served
        .sim
        .converged(ids::PODS, Duration::from_secs(30), view)
        .await;
    task.abort();
    assert_eq!(got.len(), want.len());
    assert!(
        got == want,
        "kube-runtime's store equals the API server's state"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_list_watch_through_kubecache_converges_under_churn() {
    kube_runtime_through_kubecache_converges(watcher::Config::default().page_size(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_streaming_list_through_kubecache_converges_under_churn() {
    kube_runtime_through_kubecache_converges(watcher::Config::default().streaming_lists()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_prints_tables_and_watches_through_kubecache() {
    if !kubectl::available() {
        return;
    }
    let served = serve(Setup {
        sim: SimConfig {
            pods: 150,
            configmaps: 20,
            widgets: 7,
            ..SimConfig::default()
        },
        resources: vec![
            ApiResource::pods(),
            common::resource("", "configmaps", "ConfigMap", true),
            common::resource("example.com", "widgets", "Widget", true),
        ],
        ..Setup::default()
    })
    .await;
    let url = served.url.clone();
    let run = move |args: &'static [&'static str]| {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            kubectl::ok(&[&["--server", url.as_str()], args].concat())
        })
    };

    // The table: kube-apiserver's pod columns, one row per pod.
    let table = run(&["get", "pods", "-A"]).await.unwrap();
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    let pods = served.sim.state(ids::PODS);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), pods.len());
    for (row, pod) in rows.iter().zip(&pods) {
        assert_eq!(
            (row[0], row[1]),
            (pod.namespace.as_str(), pod.name.as_str())
        );
        let value: serde_json::Value = serde_json::from_slice(&pod.json()).unwrap();
        let containers = value["spec"]["containers"].as_array().unwrap().len();
        assert!(row[2].ends_with(&format!("/{containers}")), "{row:?}");
        // RESTARTS: the count, with the last restart's age when there was
        // one (`3 (27d ago)`, as kube-apiserver prints it).
        let statuses = value["status"]["containerStatuses"].as_array();
        let restarts: i64 = statuses
            .into_iter()
            .flatten()
            .map(|s| s["restartCount"].as_i64().unwrap_or(0))
            .sum();
        let cell = row[4..row.len() - 1].join(" ");
        if restarts == 0 {
            assert_eq!(cell, "0", "{row:?}");
        } else {
            let restarted = format!("{restarts} (");
            assert!(
                cell.starts_with(&restarted) && cell.ends_with(" ago)"),
                "{row:?}"
            );
        }
    }
    let wide = run(&["get", "pods", "-A", "-o", "wide"]).await.unwrap();
    assert!(wide.lines().next().unwrap().contains("NODE"));
    let configmaps = run(&["get", "configmaps", "-A"]).await.unwrap();
    assert!(configmaps.starts_with("NAMESPACE"), "{configmaps}");
    assert!(configmaps.lines().next().unwrap().contains("DATA"));
    let widgets = run(&["get", "widgets", "-A", "-o", "name"]).await.unwrap();
    assert_eq!(widgets.lines().count(), 7);

    // -o json and -o yaml: the objects themselves.
    let json = run(&["get", "pods", "-A", "-o", "json"]).await.unwrap();
    let list: serde_json::Value = serde_json::from_str(&json).unwrap();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    let want: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, want);
    let yaml = run(&["get", "configmaps", "-A", "-o", "yaml"])
        .await
        .unwrap();
    assert_eq!(yaml.matches("kind: ConfigMap").count(), 20);

    // -w: a change made upstream is printed as a row. The change is made
    // once kubectl's watch is open (dispatched), so it cannot miss it.
    let watching = Process::spawn(kubectl::command().arg("--server").arg(&served.url).args([
        "get",
        "pods",
        "-A",
        "-w",
        "--watch-only",
    ]));
    let cache = served.caches.find("", "v1", "pods").unwrap();
    watching
        .until("kubectl's watch is open", async || {
            cache.dispatched_watchers() == 1
        })
        .await;
    let target = &pods[3];
    served
        .sim
        .store()
        .merge_patch(
            ids::PODS,
            &target.namespace,
            &target.name,
            &serde_json::json!({"metadata": {"labels": {"watched": "yes"}}}),
        )
        .unwrap();
    watching
        .logged("kubectl -w prints the change", |printed| {
            printed.lines().any(|l| l.contains(&target.name))
        })
        .await;
}
