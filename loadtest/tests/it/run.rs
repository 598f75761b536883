//! `kubecache-loadtest run` checks completeness for real: it passes against
//! a server that delivers every event and fails against one that does not.

use kubecache_loadtest::run::{Scenario, ShardBy, run};
use kubecache_loadtest::sim::{Fault, FaultSpec, FaultTarget, Sim, SimConfig};

fn scenario(url: &str, upstream: &str) -> Scenario {
    Scenario {
        url: url.into(),
        upstream: upstream.into(),
        duration_secs: 2,
        settle_secs: 1,
        concurrency: 2,
        gets: 1.0,
        lists: 0.05,
        watchers: 12,
        writes_per_sec: 40.0,
        ..Scenario::default()
    }
}

fn sim_config() -> SimConfig {
    SimConfig {
        pods: 300,
        ..SimConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watcher_of_the_api_server_itself_gets_every_event() {
    let (url, _sim) = Sim::start(sim_config()).await.unwrap();
    let report = run(scenario(&url, &url)).await.unwrap();
    let watch = report.watch.as_ref().unwrap();
    assert!(report.ok(), "{report}");
    assert!(report.writes > 0 && watch.reference_events > 0, "{report}");
    // 2 s at 40/s; the writes, several in flight at once, are acknowledged
    // in any order, and every watcher still gets every event in order.
    assert_eq!(report.writes_offered, 80, "{report}");
    assert!(
        watch.deliveries >= watch.reference_events as u64,
        "{report}"
    );
    assert!(
        report
            .requests
            .iter()
            .any(|r| r.op == "get" && r.latency.count > 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_on_the_same_api_server_makes_an_event_of_every_write() {
    // The writer picks the same objects in every run (a fixed seed): were
    // its patches the same too, they would change nothing the second time.
    let (url, _sim) = Sim::start(sim_config()).await.unwrap();
    let first = run(scenario(&url, &url)).await.unwrap();
    assert!(first.ok(), "{first}");
    let second = run(scenario(&url, &url)).await.unwrap();
    assert!(second.ok(), "{second}");
    let watch = second.watch.as_ref().unwrap();
    assert!(second.writes > 0, "{second}");
    assert!(watch.reference_events as u64 >= second.writes, "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_of_a_server_that_misses_the_writes_fail_the_run() {
    // Two simulators with the same seed start identical; the writes go to
    // one and the watchers watch the other, which never sees them.
    let (upstream, _a) = Sim::start(sim_config()).await.unwrap();
    let (other, _b) = Sim::start(sim_config()).await.unwrap();
    let report = run(scenario(&other, &upstream)).await.unwrap();
    assert!(!report.ok(), "{report}");
    let watch = report.watch.as_ref().unwrap();
    assert!(!watch.complete && !watch.failures.is_empty(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_the_server_ends_are_resumed_from_their_last_resource_version() {
    // Watches of `timeoutSeconds=1` over a 3 s run each end at least
    // twice; every event still arrives once, in order.
    let (url, _sim) = Sim::start(sim_config()).await.unwrap();
    let scenario = Scenario {
        duration_secs: 3,
        watch_timeout_secs: 1,
        ..scenario(&url, &url)
    };
    let watchers = scenario.watchers as u64;
    let report = run(scenario).await.unwrap();
    assert!(report.ok(), "{report}");
    let watch = report.watch.as_ref().unwrap();
    assert!(watch.resumes >= 2 * watchers, "{report}");
    assert_eq!(watch.failovers, 0, "{report}");
    assert!(watch.reference_events > 0, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_opened_again_into_a_429_waits_its_retry_after_and_tries_again() {
    // Once every watch is open, the next reopenings (after each watch's
    // 1 s timeout) are refused 429, as kube-apiserver's priority and
    // fairness refuses them; each waits its Retry-After and tries again.
    let (url, sim) = Sim::start(sim_config()).await.unwrap();
    let scenario = Scenario {
        duration_secs: 4,
        watch_timeout_secs: 1,
        ..scenario(&url, &url)
    };
    let watchers = scenario.watchers as u32;
    let running = tokio::spawn(run(scenario));
    kubecache_testkit::wait::until("every watch open", || {
        sim.open_watches() > watchers as usize
    })
    .await;
    sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::TooManyRequests {
            retry_after_secs: 1,
        },
        times: watchers,
    });
    let report = running.await.unwrap().unwrap();
    assert!(report.ok(), "{report}");
    let watch = report.watch.as_ref().unwrap();
    assert!(watch.throttled > 0, "{report}");
    assert!(watch.resumes >= u64::from(watchers), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_cut_off_resume_on_the_next_server_from_their_last_resource_version() {
    // The sim twice: two servers of one history, as replicas are.
    let (url, sim) = Sim::start(sim_config()).await.unwrap();
    let servers = format!("{url},{url}");
    let scenario = Scenario {
        duration_secs: 3,
        ..scenario(&servers, &url)
    };
    let watchers = scenario.watchers;
    let running = tokio::spawn(run(scenario));
    // Once the reference and every watcher watch, cut them all.
    kubecache_testkit::wait::until("every watch open", || sim.open_watches() > watchers).await;
    sim.cut_watches();
    let report = running.await.unwrap().unwrap();
    assert!(report.ok(), "{report}");
    let watch = report.watch.as_ref().unwrap();
    assert!(watch.failovers >= watchers as u64, "{report}");
    assert!(watch.reference_events > 0, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_watchers_of_the_api_server_together_get_the_unsharded_stream() {
    let (url, _sim) = Sim::start(sim_config()).await.unwrap();
    for shard_by in [ShardBy::Uid, ShardBy::Namespace] {
        let report = run(Scenario {
            watchers: 0,
            shards: 3,
            shard_replicas: 2,
            shard_by,
            ..scenario(&url, &url)
        })
        .await
        .unwrap();
        assert!(report.ok(), "{report}");
        let watch = report.watch.as_ref().unwrap();
        assert_eq!(watch.watchers, 1 + 3 * 2, "{report}");
        let sharding = watch.sharding.as_ref().unwrap();
        assert_eq!(sharding.shards.len(), 3, "{report}");
        assert!(sharding.unsharded_events > 0, "{report}");
        let events: u64 = sharding.shards.iter().map(|s| s.events).sum();
        assert_eq!(events, sharding.unsharded_events, "{report}");
        assert!(
            sharding
                .shards
                .iter()
                .all(|s| s.replicas == 2 && s.bytes < sharding.unsharded_bytes),
            "{report}"
        );
    }
}

#[tokio::test]
async fn a_non_loopback_url_is_refused() {
    let error = run(scenario("http://10.0.0.1:8080", "http://127.0.0.1:1"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("loopback"), "{error}");
}
