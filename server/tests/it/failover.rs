//! What a client sees when it fails over to another replica: a watch
//! resumed from its last resourceVersion, and reads `NotOlderThan` it, on a
//! replica that is behind (it has not reached that resourceVersion yet).
//! A replica ahead serves it as any resume (`watch.rs`,
//! `a_watch_replays_from_its_resource_version_and_one_too_old_gets_410`);
//! one whose event log no longer reaches back sends the API server's 410
//! `ERROR` event, byte for byte, and the client relists.
//! And the whole of it: two `kubecache` processes in front of one sim
//! under churn, `kubecache-loadtest run` watching both, one killed; and
//! the same with the survivor held behind its watchers until the kill.

use crate::common;
use common::process::{Process, kubecache};
use common::{Served, Setup, WatchLines, describe, get, serve};
use std::sync::Arc;
use std::time::Duration;

use kubecache_loadtest::run::{Scenario, run};
use kubecache_loadtest::sim::{Fault, FaultSpec, FaultTarget, Sim, SimConfig, ids};
use kubecache_reflector::{EventLogConfig, StoreConfig};
use kubecache_server::ServeSettings;
use kubecache_testkit::wait::{until, until_async};
use kubecache_testkit::{golden, scrape};
use kubecache_wire::Status;
use serde_json::{Value, json};

const PODS: &str = "/api/v1/pods";

/// Holds the replica's store back: its upstream watch is cut and every
/// watch it opens again hangs until the sim's faults are cleared. Returns
/// once the new watch has reached the sim (the old stream has ended), so
/// no later write reaches the store until then.
async fn hold_back(served: &Served) {
    let watches = || served.sim.counters()["pods"].watches;
    let before = watches();
    served.sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::Hang,
        times: u32::MAX,
    });
    served.sim.cut_watches();
    until("the replica's new watch reaches the sim", || {
        watches() != before
    })
    .await;
}

/// Labels the first `n` pods, one write each; their resourceVersions.
fn label_pods(served: &Served, n: usize, value: &str) -> Vec<u64> {
    let patch = json!({"metadata": {"labels": {"failover": value}}});
    served
        .sim
        .state(ids::PODS)
        .iter()
        .take(n)
        .map(|pod| {
            let written = served
                .sim
                .store()
                .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
                .expect("no churn: the pod exists");
            written.revision
        })
        .collect()
}

fn store_revision(served: &Served) -> u64 {
    served
        .caches
        .by_name("pods")
        .unwrap()
        .reader
        .current_resource_version()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_replica_behind_a_resumed_watch_starts_at_once_and_gets_every_later_event_and_reads_wait_for_it()
 {
    let served = Arc::new(serve(Setup::default()).await);
    hold_back(&served).await;
    let held = store_revision(&served);
    let written = label_pods(&served, 10, "b");
    let (seen, last) = (written[4], written[9]);
    let pod = &served.sim.state(ids::PODS)[9];

    // The client saw up to `seen` on its old replica.
    let resumed = WatchLines::open(
        &served.url,
        &format!("{PODS}?watch=1&resourceVersion={seen}"),
    )
    .await;
    assert_eq!(resumed.code, 200, "answered while the replica is behind");
    let list = tokio::spawn({
        let served = served.clone();
        async move {
            let query = format!("resourceVersion={last}&resourceVersionMatch=NotOlderThan");
            get(&served.url, &format!("{PODS}?{query}")).await
        }
    });
    let one = tokio::spawn({
        let (served, path) = (
            served.clone(),
            format!(
                "/api/v1/namespaces/{}/pods/{}?resourceVersion={last}",
                pod.namespace, pod.name
            ),
        );
        async move { get(&served.url, &path).await }
    });
    assert_eq!(store_revision(&served), held, "still behind");
    assert!(held < seen);

    served.sim.clear_faults();
    let reference = WatchLines::open(
        served.sim.url(),
        &format!("{PODS}?watch=1&resourceVersion={seen}"),
    )
    .await
    .events(5)
    .await;
    let got: Vec<String> = resumed.events(5).await.iter().map(describe).collect();
    let want: Vec<String> = reference.iter().map(describe).collect();
    assert_eq!(got, want, "every event after the client's, once");

    let (code, body) = list.await.unwrap();
    assert_eq!(code, 200);
    let list: Value = serde_json::from_slice(&body).unwrap();
    let at = resource_version_of(&list);
    assert!(at >= last, "the list is as of {at}, not older than {last}");
    let labelled = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["labels"]["failover"] == "b")
        .count();
    assert_eq!(labelled, 10);
    let (code, body) = one.await.unwrap();
    assert_eq!(code, 200);
    let object: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(object["metadata"]["resourceVersion"], last.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_does_not_reach_a_resource_version_within_the_read_wait_answers_as_the_api_server()
 {
    let served = serve(Setup {
        settings: ServeSettings {
            read_wait: Duration::from_millis(300),
            ..ServeSettings::default()
        },
        ..Setup::default()
    })
    .await;
    hold_back(&served).await;
    let held = store_revision(&served);
    let rv = label_pods(&served, 1, "late")[0];
    let expected: Value =
        serde_json::from_slice(&Status::too_large_resource_version(rv, held).to_json()).unwrap();

    let not_older = format!("{PODS}?resourceVersion={rv}&resourceVersionMatch=NotOlderThan");
    let (code, body) = get(&served.url, &not_older).await;
    assert_eq!(code, 504);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), expected);

    // A streaming list from there: 200, then the same Status as an ERROR
    // event (the cacher's `newErrWatcher`).
    let streaming = WatchLines::open(
        &served.url,
        &format!("{PODS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={rv}"),
    )
    .await;
    assert_eq!(streaming.code, 200);
    let lines = streaming.collect().await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "ERROR");
    assert_eq!(lines[0]["object"], expected);

    // A plain watch from there is no error: it waits for its events.
    let resumed =
        WatchLines::open(&served.url, &format!("{PODS}?watch=1&resourceVersion={rv}")).await;
    assert_eq!(resumed.code, 200);

    served.sim.clear_faults();
    let pods = &served.caches.by_name("pods").unwrap().reader;
    pods.wait_for(rv, Duration::from_secs(30)).await.unwrap();
    let (code, _) = get(&served.url, &not_older).await;
    assert_eq!(code, 200, "once caught up");
    let next = label_pods(&served, 1, "later")[0];
    let events = resumed.events(1).await;
    assert_eq!(events[0]["type"], "MODIFIED");
    assert_eq!(
        events[0]["object"]["metadata"]["resourceVersion"],
        next.to_string(),
        "the first event after {rv}, not the one at it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_from_before_the_replicas_event_log_gets_the_api_servers_410_event_byte_for_byte()
{
    let served = serve(Setup {
        store: StoreConfig {
            event_log: EventLogConfig {
                max_events: 20,
                ..EventLogConfig::default()
            },
            ..StoreConfig::default()
        },
        ..Setup::default()
    })
    .await;
    let first = label_pods(&served, 1, "gone")[0];
    let last = *label_pods(&served, 30, "later").last().unwrap();
    let pods = &served.caches.by_name("pods").unwrap().reader;
    pods.wait_for(last, Duration::from_secs(30)).await.unwrap();
    let oldest = pods.event_log_status().oldest;
    assert!(oldest > first);

    let mut watch = WatchLines::open(
        &served.url,
        &format!("{PODS}?watch=1&resourceVersion={first}"),
    )
    .await;
    assert_eq!(watch.code, 200);
    let line = watch.next_line().await.unwrap();
    // The real server's answer to a watch from resourceVersion 1, whose
    // event log started after 94491.
    let recorded = String::from_utf8(golden::read("errors/watch-rv1.json")).unwrap();
    let expected = recorded.replace(
        "too old resource version: 1 (94491)",
        &format!("too old resource version: {first} ({oldest})"),
    );
    assert_eq!(String::from_utf8(line).unwrap(), expected);
    assert!(watch.next_line().await.is_none(), "then the end");
}

/// A `kubecache` process in front of an API server, killed (SIGKILL) when
/// dropped.
struct Replica {
    url: String,
    process: Process,
}

impl Replica {
    /// Starts the binary with `kubeconfig`, caching pods, without
    /// authorization; returns once `/readyz` answers 200.
    async fn start(kubeconfig: &std::path::Path) -> Replica {
        let kubeconfig = kubeconfig.to_str().unwrap();
        let (process, addr) = kubecache(
            &[
                "--resources",
                "pods",
                "--auth",
                "none",
                "--kubeconfig",
                kubeconfig,
            ],
            &[],
        );
        let replica = Replica {
            url: format!("http://{addr}"),
            process,
        };
        replica
            .process
            .until("ready", async || {
                matches!(try_get(&replica.url, "/readyz").await, Some((200, _)))
            })
            .await;
        replica
    }

    /// Its metric `name` of pods (0 while it cannot be scraped).
    async fn metric(&self, name: &str) -> u64 {
        let Some((200, body)) = try_get(&self.url, "/metrics").await else {
            return 0;
        };
        let series = format!(r#"{name}{{resource="pods"}}"#);
        scrape::value(&String::from_utf8_lossy(&body), &series).map_or(0, |n| n as u64)
    }

    /// Its store's resourceVersion of pods.
    async fn resource_version(&self) -> u64 {
        self.metric("kubecache_resource_version").await
    }

    /// SIGKILL, and reaped.
    fn kill(&self) {
        self.process.kill();
    }
}

/// A sim of 1,000 pods under churn (30 writes/s) and two replicas in front
/// of it; their kubeconfig is in the returned directory.
async fn two_replicas(test: &str) -> (Sim, std::path::PathBuf, [Replica; 2]) {
    let (_, sim) = Sim::start(SimConfig {
        pods: 1000,
        churn_per_sec: 30.0,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let dir =
        std::env::temp_dir().join(format!("kubecache-failover-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig()).unwrap();
    let a = Replica::start(&kubeconfig).await;
    let b = Replica::start(&kubeconfig).await;
    (sim, dir, [a, b])
}

/// A GET, or `None` when nothing listens (the server is not up yet).
async fn try_get(url: &str, path: &str) -> Option<(u16, bytes::Bytes)> {
    let address = url.trim_start_matches("http://");
    tokio::net::TcpStream::connect(address).await.ok()?;
    Some(get(url, path).await)
}

/// The resourceVersion in an answer's `metadata`.
fn resource_version_of(answer: &Value) -> u64 {
    answer["metadata"]["resourceVersion"]
        .as_str()
        .expect("a resourceVersion")
        .parse()
        .expect("a number")
}

/// The load on two replicas `urls` of `sim`: 12 watchers spread over
/// them, 50 writes/s to the sim, no gets.
fn load(sim: &Sim, urls: [&str; 2]) -> Scenario {
    Scenario {
        url: urls.join(","),
        upstream: sim.url().to_string(),
        gets: 0.0,
        watchers: 12,
        // Not `node`: without a node index, kubecache passes those through.
        watch_filters: vec!["all".into(), "namespace".into(), "label".into()],
        writes_per_sec: 50.0,
        ..Scenario::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_of_a_replica_killed_mid_run_resume_on_the_other_with_every_event_once_in_order() {
    let (sim, dir, [survivor, killed]) = two_replicas("killed").await;
    let scenario = Scenario {
        duration_secs: 6,
        settle_secs: 2,
        concurrency: 1,
        lists: 1.0,
        list_limit: 200,
        ..load(&sim, [&survivor.url, &killed.url])
    };
    let watchers = scenario.watchers as u64;
    let running = tokio::spawn(run(scenario));
    // Once the killed replica's watchers have events, SIGKILL it.
    until_async("the killed replica's watchers have events", async || {
        killed.metric("kubecache_watch_events_sent_total").await >= watchers
    })
    .await;
    killed.kill();
    let report = running.await.unwrap().unwrap();
    eprintln!("{report}");
    assert!(report.ok(), "{report}");
    let watch = report.watch.as_ref().unwrap();
    assert!(
        watch.failovers >= watchers / 2,
        "every watcher of the killed replica failed over: {report}"
    );
    assert!(watch.reference_events > 100, "{report}");

    // Reads NotOlderThan the newest resourceVersion any watcher saw wait
    // on the survivor until it is there.
    let newest = sim.store().revision();
    let (code, body) = get(
        &survivor.url,
        &format!("{PODS}?resourceVersion={newest}&resourceVersionMatch=NotOlderThan"),
    )
    .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let list: Value = serde_json::from_slice(&body).unwrap();
    let at = resource_version_of(&list);
    assert!(
        at >= newest,
        "listed at {at}, asked not older than {newest}"
    );
    let pod = &list["items"][0]["metadata"];
    let one = format!(
        "/api/v1/namespaces/{}/pods/{}?resourceVersion={newest}",
        pod["namespace"].as_str().unwrap(),
        pod["name"].as_str().unwrap()
    );
    let (code, _) = get(&survivor.url, &one).await;
    assert_eq!(code, 200);
    drop(survivor);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_on_a_replica_still_catching_up_wait_for_it_and_get_every_event_across_a_failover()
{
    let (sim, dir, [a, b]) = two_replicas("behind").await;
    // Hold one replica back: the first watch after the cut hangs.
    let watches = || sim.counters()["pods"].watches;
    let before = watches();
    sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::Hang,
        times: 1,
    });
    sim.cut_watches();
    until("both replicas watch again", || watches() >= before + 2).await;
    // The one that moves on with the churn is not held.
    let reached = a.resource_version().await.max(b.resource_version().await);
    let mut a_is_ahead = false;
    until_async("one replica moves past the other's reach", async || {
        a_is_ahead = a.resource_version().await > reached;
        a_is_ahead || b.resource_version().await > reached
    })
    .await;
    let (ahead, behind) = if a_is_ahead { (a, b) } else { (b, a) };
    let held = behind.resource_version().await;

    let scenario = Scenario {
        duration_secs: 8,
        settle_secs: 4,
        ..load(&sim, [&ahead.url, &behind.url])
    };
    let watchers = scenario.watchers as u64;
    let running = tokio::spawn(run(scenario));
    // The replica behind has its watchers open, all from the first list's
    // resourceVersion, which it has not reached; the other has sent events.
    until_async(
        "the watchers are open and the one ahead has sent events",
        async || {
            behind.metric("kubecache_watchers").await >= watchers / 2
                && ahead.metric("kubecache_watch_events_sent_total").await >= watchers
        },
    )
    .await;
    assert_eq!(behind.resource_version().await, held, "still behind");
    // Kill the one ahead: its watchers resume on the one behind, which
    // then catches up.
    ahead.kill();
    sim.clear_faults();
    let report = running.await.unwrap().unwrap();
    eprintln!("{report}");
    assert!(report.ok(), "{report}");
    let watch = report.watch.as_ref().unwrap();
    assert!(watch.failovers >= watchers / 2, "{report}");
    assert!(watch.deliveries > watchers, "{report}");
    drop(behind);
    let _ = std::fs::remove_dir_all(&dir);
}
