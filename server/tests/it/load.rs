//! `kubecache-loadtest run` against kubecache: simulated operators (filtered
//! and unfiltered watchers, gets, lists, index queries, writes upstream)
//! find every event delivered to every matching watcher, in order, as the
//! API server's own history has it.

use crate::common;

use common::{Setup, serve};
use kubecache_loadtest::run::{Scenario, ShardBy, run};
use kubecache_loadtest::sim::SimConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_operators_get_every_event_and_answer_through_kubecache() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 2_000,
            ..SimConfig::default()
        },
        store: common::node_index(),
        ..Setup::default()
    })
    .await;
    let report = run(Scenario {
        url: served.url.clone(),
        upstream: served.sim.url().to_string(),
        duration_secs: 3,
        settle_secs: 2,
        concurrency: 4,
        gets: 1.0,
        lists: 0.02,
        list_limit: 500,
        index_queries: 0.5,
        index_path: "/v1/pods/index/node/{node}".into(),
        watchers: 40,
        writes_per_sec: 100.0,
        ..Scenario::default()
    })
    .await
    .unwrap();
    assert!(report.ok(), "{report}");
    let watch = report.watch.as_ref().unwrap();
    assert!(watch.complete, "{report}");
    assert!(report.writes > 100 && watch.deliveries > 1_000, "{report}");
    for op in ["get", "list", "index"] {
        assert!(
            report
                .requests
                .iter()
                .any(|r| r.op == op && r.latency.count > 0 && r.errors == 0),
            "{op}: {report}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_through_kubecache_together_get_the_unsharded_stream() {
    let served = serve(Setup {
        sim: SimConfig {
            pods: 2_000,
            ..SimConfig::default()
        },
        ..Setup::default()
    })
    .await;
    for (shard_by, shards) in [(ShardBy::Uid, 4), (ShardBy::Namespace, 3)] {
        let report = run(Scenario {
            url: served.url.clone(),
            upstream: served.sim.url().to_string(),
            duration_secs: 2,
            settle_secs: 2,
            concurrency: 1,
            gets: 0.0,
            shards,
            shard_replicas: 2,
            shard_by,
            writes_per_sec: 100.0,
            ..Scenario::default()
        })
        .await
        .unwrap();
        assert!(report.ok(), "{report}");
        let sharding = report.watch.as_ref().unwrap().sharding.as_ref().unwrap();
        let bytes: u64 = sharding.shards.iter().map(|s| s.bytes).sum();
        // Each shard its own slice; together about the unsharded bytes.
        assert!(
            sharding
                .shards
                .iter()
                .all(|s| s.bytes < sharding.unsharded_bytes),
            "{report}"
        );
        assert!(
            bytes.abs_diff(sharding.unsharded_bytes) < sharding.unsharded_bytes / 100,
            "{report}"
        );
    }
}
