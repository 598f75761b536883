//! Warm restart (`--state-dir`): the real `kubecache` binary, stopped and
//! started again in front of one simulated API server in this process,
//! starts from its state file with no list, serves what the sim holds, and
//! lets a watcher resume across the restart; a damaged, foreign or stale
//! file is refused with one log line and a full list.
//!
//! No wall-clock windows: every wait polls a condition (a bound only fails
//! the test when the condition never comes).

use crate::common;
use common::process::{Process, kubecache};
use common::{WatchLines, describe, get};

use std::collections::BTreeMap;
use std::path::PathBuf;

use kubecache_loadtest::sim::{Fault, FaultSpec, FaultTarget, Sim, SimConfig, ids};
use kubecache_testkit::wait::within;
use serde_json::Value;

/// A scratch directory of one test, removed with it.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "kubecache-warm-restart-{test}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn sim(seed: u64) -> Sim {
    let (_, sim) = Sim::start(SimConfig {
        seed,
        pods: 300,
        configmaps: 40,
        churn_per_sec: 0.0,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    sim
}

/// A running `kubecache` in front of a sim, keeping its state in a
/// scratch directory.
struct Kubecache {
    process: Process,
    url: String,
}

impl Kubecache {
    /// Starts the binary against `sim` (its kubeconfig written in
    /// `scratch`), keeping its state in `scratch`'s `state`, with `args`.
    fn start(sim: &Sim, scratch: &Scratch, args: &[&str]) -> Kubecache {
        let kubeconfig = scratch.path(&format!("kubeconfig-{}", sim.url().replace([':', '/'], "")));
        std::fs::write(&kubeconfig, sim.kubeconfig()).unwrap();
        let state = scratch.path("state");
        let mut all = vec![
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            "--auth",
            "none",
        ];
        all.extend_from_slice(args);
        let (process, addr) = kubecache(&all, &[]);
        Kubecache {
            url: format!("http://{addr}"),
            process,
        }
    }

    fn output(&self) -> String {
        self.process.output()
    }

    /// Waits until `condition` holds of the output.
    async fn logged(&self, what: &str, condition: impl Fn(&str) -> bool) {
        self.process.logged(what, condition).await;
    }

    /// Waits until `condition` holds (see [`Process::until`]).
    async fn until(&self, what: &str, condition: impl AsyncFnMut() -> bool) {
        self.process.until(what, condition).await;
    }

    async fn ready(&self) {
        let addr = self.url.trim_start_matches("http://").to_owned();
        self.until("ready", async || {
            // `get` needs a listener.
            tokio::net::TcpStream::connect(&addr).await.is_ok()
                && matches!(get(&self.url, "/readyz").await, (200, _))
        })
        .await;
    }

    /// Waits until kubecache's pods and configmaps (read at
    /// `resourceVersion=0`) are the sim's, key by key and resourceVersion
    /// by resourceVersion.
    async fn converged(&self, sim: &Sim) {
        self.converged_to(
            sim,
            &[
                (ids::PODS, "/api/v1/pods"),
                (ids::CONFIGMAPS, "/api/v1/configmaps"),
            ],
        )
        .await;
    }

    /// The same of pods only.
    async fn converged_pods(&self, sim: &Sim) {
        self.converged_to(sim, &[(ids::PODS, "/api/v1/pods")]).await;
    }

    async fn converged_to(&self, sim: &Sim, collections: &[(usize, &str)]) {
        for &(resource, collection) in collections {
            let what = format!("{collection} equal to the sim's");
            self.until(&what, async || {
                versions(&self.url, collection).await == sim.versions(resource)
            })
            .await;
        }
    }

    async fn status(&self, resource: &str) -> Value {
        let (code, body) = get(&self.url, &format!("/v1/{resource}/status")).await;
        assert_eq!(code, 200);
        serde_json::from_slice(&body).unwrap()
    }

    /// SIGTERM, and a clean exit after the final save.
    async fn stop(&mut self) {
        self.process.signal("-TERM");
        let status = self.process.exited().await;
        assert!(status.success(), "{status}\n{}", self.output());
        self.logged("the final save", |out| {
            out.contains("state saved") && out.contains("reason=shutdown")
        })
        .await;
    }

    /// SIGKILL: no final save.
    async fn kill(&mut self) {
        self.process.signal("-KILL");
        self.process.exited().await;
    }
}

/// `key -> resourceVersion` of kubecache's `collection` at
/// `resourceVersion=0` (empty while it answers otherwise than 200).
async fn versions(url: &str, collection: &str) -> BTreeMap<String, String> {
    let (code, body) = get(url, &format!("{collection}?resourceVersion=0")).await;
    if code != 200 {
        return BTreeMap::new();
    }
    keyed(&serde_json::from_slice(&body).unwrap())
}

/// `key -> resourceVersion` of a list's items.
fn keyed(list: &Value) -> BTreeMap<String, String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let meta = &item["metadata"];
            let key = format!(
                "{}/{}",
                meta["namespace"].as_str().unwrap(),
                meta["name"].as_str().unwrap()
            );
            (key, meta["resourceVersion"].as_str().unwrap().to_string())
        })
        .collect()
}

/// The sim's lists of each resource so far (every page, streaming lists
/// included).
fn lists(sim: &Sim) -> BTreeMap<String, u64> {
    sim.counters()
        .into_iter()
        .map(|(resource, counts)| (resource, counts.lists))
        .collect()
}

/// `n` pod writes in the sim, a create, an update and a delete in turn;
/// each as a watcher sees it (`TYPE namespace/name@resourceVersion`).
fn churn(sim: &Sim, round: &str, n: usize) -> Vec<String> {
    let store = sim.store();
    let mut written = Vec::new();
    for i in 0..n {
        let pods = sim.state(ids::PODS);
        let pick = &pods[(i * 7919) % pods.len()];
        let mut object: Value = serde_json::from_slice(&pick.json()).unwrap();
        let (kind, stored) = match i % 3 {
            0 => {
                let meta = object["metadata"].as_object_mut().unwrap();
                for assigned in ["uid", "resourceVersion", "creationTimestamp"] {
                    meta.remove(assigned);
                }
                meta.insert("name".into(), format!("warm-{round}-{i}").into());
                ("ADDED", store.create(ids::PODS, object).unwrap())
            }
            1 => {
                object["metadata"]["labels"]["warm"] = format!("{round}-{i}").into();
                ("MODIFIED", store.update(ids::PODS, object).unwrap())
            }
            _ => (
                "DELETED",
                store
                    .delete(ids::PODS, &pick.namespace, &pick.name)
                    .unwrap(),
            ),
        };
        written.push(format!("{kind} {}@{}", stored.key, stored.revision));
    }
    written
}

/// Whether `output` logs a save of `resource` (at `rv`, if given).
fn saved(output: &str, resource: &str, rv: Option<u64>) -> bool {
    output.lines().any(|line| {
        line.contains("state saved")
            && line.contains(&format!("resource={resource} "))
            && rv.is_none_or(|rv| line.contains(&format!("resource_version={rv} ")))
    })
}

/// What a watch of pods from `rv` on `kubecache` delivers: its first `n`
/// events.
async fn watched(kubecache: &Kubecache, rv: u64, n: usize) -> Vec<String> {
    let path = format!("/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=60");
    let lines = WatchLines::open(&kubecache.url, &path).await;
    assert_eq!(lines.code, 200);
    let events = within("every event", lines.events(n)).await;
    events.iter().map(describe).collect()
}

/// A stop, changes while kubecache is down, and a start from the state
/// file: no list, the sim's state, and a watch from before the stop.
async fn restarts_warm(stop: impl AsyncFnOnce(&mut Kubecache, u64), test: &str, args: &[&str]) {
    let scratch = Scratch::new(test);
    let sim = sim(1).await;
    let mut first = Kubecache::start(&sim, &scratch, args);
    first.ready().await;
    first.converged(&sim).await;
    let before = sim.store().revision();
    let mut history = churn(&sim, "up", 30);
    first.converged(&sim).await;
    let saved = sim.store().revision();
    stop(&mut first, saved).await;
    history.extend(churn(&sim, "down", 30));
    let lists_before = lists(&sim);

    let second = Kubecache::start(&sim, &scratch, args);
    second.ready().await;
    let restored = &second.status("pods").await["restored"];
    assert_eq!(restored["resourceVersion"], saved.to_string(), "{restored}");
    second.converged(&sim).await;
    assert_eq!(
        lists(&sim),
        lists_before,
        "no list from the restarted kubecache:\n{}",
        second.output()
    );
    for resource in ["pods", "configmaps"] {
        second
            .until("the resumed watch confirmed", async || {
                second.status(resource).await["restored"]["caughtUp"] == true
            })
            .await;
        let status = second.status(resource).await;
        assert_eq!(status["lists"], 0, "{status}");
    }
    assert_eq!(
        lists(&sim),
        lists_before,
        "no list from the restarted kubecache:\n{}",
        second.output()
    );
    assert!(second.output().contains("restored from the state file"));
    // Every pod change since `before`, in order, across the restart.
    assert_eq!(watched(&second, before, history.len()).await, history);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigterm_a_restart_lists_nothing_serves_the_sims_state_and_a_watcher_resumes_from_before_it()
 {
    restarts_warm(
        async |kubecache, _| kubecache.stop().await,
        "sigterm",
        &["--resources", "pods,configmaps"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_a_restart_resumes_from_the_last_periodic_save_and_lists_nothing() {
    restarts_warm(
        async |kubecache, rv| {
            // Periodic saves of pods as they are now and of configmaps
            // (unchanged since their list), then the kill.
            kubecache
                .logged("periodic saves", |out| {
                    saved(out, "pods", Some(rv)) && saved(out, "configmaps", None)
                })
                .await;
            kubecache.kill().await;
        },
        "sigkill",
        &[
            "--resources",
            "pods,configmaps",
            "--state-save-interval-seconds",
            "0.2",
        ],
    )
    .await;
}

/// The pods state file of a kubecache of `sim` stopped with SIGTERM, in
/// `scratch`.
async fn saved_file(sim: &Sim, scratch: &Scratch) -> PathBuf {
    let mut first = Kubecache::start(sim, scratch, &RESOURCES);
    first.ready().await;
    first.converged(sim).await;
    first.stop().await;
    scratch.path("state").join("pods.v1.state")
}

const RESOURCES: [&str; 2] = ["--resources", "pods,configmaps"];

/// A kubecache started on a state file that `damage` spoiled, against
/// `sim`, with `args`: it logs `refused` once for the file, counts it as
/// `kind`, lists pods in full and serves the sim's state.
async fn refused_then_listed(
    sim: &Sim,
    scratch: &Scratch,
    args: &[&str],
    refused: &str,
    kind: &str,
) {
    let file = scratch.path("state").join("pods.v1.state");
    churn(sim, "down", 9);
    let lists_before = lists(sim);
    let second = Kubecache::start(sim, scratch, args);
    second.ready().await;
    second.converged(sim).await;
    assert!(
        lists(sim)["pods"] > lists_before["pods"],
        "a full list of pods"
    );
    let status = second.status("pods").await;
    assert_eq!(status["lists"], 1, "{status}");
    assert_eq!(status["restored"], Value::Null, "{status}");
    let output = second.output();
    let lines: Vec<&str> = output
        .lines()
        .filter(|l| l.contains("state file refused"))
        .filter(|l| l.contains(&format!("file={}", file.display())))
        .collect();
    assert_eq!(lines.len(), 1, "one line for the file:\n{output}");
    assert!(lines[0].contains(refused), "{}", lines[0]);
    let (_, metrics) = get(&second.url, "/metrics").await;
    let metrics = String::from_utf8_lossy(&metrics);
    let series = format!(r#"kubecache_state_loads_total{{resource="pods",result="{kind}"}} 1"#);
    assert!(metrics.contains(&series), "{series} in\n{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_state_file_is_refused_with_a_log_line_and_a_full_list() {
    let (scratch, sim) = (Scratch::new("truncated"), sim(1).await);
    let file = saved_file(&sim, &scratch).await;
    let length = std::fs::metadata(&file).unwrap().len();
    let cut = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    cut.set_len(length / 2).unwrap();
    refused_then_listed(
        &sim,
        &scratch,
        &RESOURCES,
        "error=truncated state file",
        "truncated",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_file_with_a_flipped_byte_is_refused_with_a_log_line_and_a_full_list() {
    let (scratch, sim) = (Scratch::new("flipped"), sim(1).await);
    let file = saved_file(&sim, &scratch).await;
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&file, bytes).unwrap();
    refused_then_listed(
        &sim,
        &scratch,
        &RESOURCES,
        "error=damaged state file: the checksum of its body does not match",
        "checksum",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_file_of_another_format_version_is_refused_with_a_log_line_and_a_full_list() {
    let (scratch, sim) = (Scratch::new("version"), sim(1).await);
    let file = saved_file(&sim, &scratch).await;
    let mut bytes = std::fs::read(&file).unwrap();
    // The version follows the 8-byte magic.
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&file, bytes).unwrap();
    refused_then_listed(
        &sim,
        &scratch,
        &RESOURCES,
        "error=state file of format version 99; this kubecache reads version 1",
        "foreign_version",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_file_of_another_cluster_is_refused_with_a_log_line_and_a_full_list() {
    let (scratch, sim) = (Scratch::new("cluster"), sim(1).await);
    saved_file(&sim, &scratch).await;
    // Another cluster: another kube-system UID (another seed) and address.
    let other = self::sim(2).await;
    refused_then_listed(
        &other,
        &scratch,
        &RESOURCES,
        "error=state file of another cluster",
        "foreign_cluster",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_file_written_under_another_configuration_is_refused_with_a_log_line_and_a_full_list()
 {
    let (scratch, sim) = (Scratch::new("config"), sim(1).await);
    saved_file(&sim, &scratch).await;
    // Now pods keep their managedFields: other bytes, another transform.
    let config = scratch.path("config.yaml");
    std::fs::write(
        &config,
        "resources:\n  - resource: pods\n    stripFields: []\n  - resource: configmaps\n",
    )
    .unwrap();
    let args = ["--config", config.to_str().unwrap()];
    refused_then_listed(
        &sim,
        &scratch,
        &args,
        "error=state file written under another configuration",
        "config_changed",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_resource_version_the_api_server_no_longer_has_is_relisted_as_a_diff() {
    let (scratch, sim) = (Scratch::new("gone"), sim(1).await);
    saved_file(&sim, &scratch).await;
    let changes = churn(&sim, "down", 30);
    // etcd and the watch cache forget everything up to now.
    sim.store().compact_at(sim.store().revision());
    let lists_before = lists(&sim);

    let second = Kubecache::start(&sim, &scratch, &RESOURCES);
    second.ready().await;
    second.converged(&sim).await;
    let status = second.status("pods").await;
    assert_eq!(status["lists"], 1, "{status}");
    assert!(status["gone"].as_u64().unwrap() >= 1, "{status}");
    assert!(lists(&sim)["pods"] > lists_before["pods"]);
    assert!(second.output().contains("restored from the state file"));
    // The relist was applied as a diff: the event log holds the
    // differences (at most one per change), not every pod again.
    let events = status["eventLog"]["events"].as_u64().unwrap();
    assert!(
        events > 0 && events <= changes.len() as u64,
        "{events} events for {} changes: {status}",
        changes.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_save_is_logged_and_counted_and_kubecache_serves_on() {
    let (scratch, sim) = (Scratch::new("save-fails"), sim(1).await);
    let args = [&RESOURCES[..], &["--state-save-interval-seconds", "0.1"]].concat();
    let kubecache = Kubecache::start(&sim, &scratch, &args);
    kubecache.ready().await;
    // The directory gone: no temporary file can be created in it. Moved
    // away at once (deleting it races with the saves that keep writing
    // into it every 0.1 s).
    std::fs::rename(scratch.path("state"), scratch.path("state-gone")).unwrap();
    churn(&sim, "up", 3);
    kubecache
        .logged("a failed save", |out| {
            out.contains("saving the state file failed: serving on")
        })
        .await;
    kubecache.converged(&sim).await;
    assert_eq!(get(&kubecache.url, "/readyz").await.0, 200);
    let (_, metrics) = get(&kubecache.url, "/metrics").await;
    let metrics = String::from_utf8_lossy(&metrics);
    let failed = r#"kubecache_state_saves_total{resource="pods",result="failed"}"#;
    assert!(metrics.contains(failed), "{failed} in\n{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_store_serves_at_once_and_readyz_says_it_is_catching_up_until_its_watch_resumes()
{
    let (scratch, sim) = (Scratch::new("catching-up"), sim(1).await);
    saved_file(&sim, &scratch).await;
    let lists_before = lists(&sim);
    // Watches wait, unanswered, until the faults are cleared.
    sim.inject(FaultSpec {
        target: FaultTarget::Watch,
        fault: Fault::Hang,
        times: u32::MAX,
    });
    let second = Kubecache::start(&sim, &scratch, &RESOURCES);
    second.ready().await;
    let status = second.status("pods").await;
    assert_eq!(status["restored"]["caughtUp"], false, "{status}");
    let rv = status["restored"]["resourceVersion"].as_str().unwrap();
    let (_, body) = get(&second.url, "/readyz").await;
    let body = String::from_utf8_lossy(&body);
    let line = format!(
        "[+]cache pods ok (restored from the state file at resourceVersion {rv}, catching up)\n"
    );
    assert!(body.contains(&line), "{body}");
    assert_eq!(
        versions(&second.url, "/api/v1/pods").await,
        sim.versions(ids::PODS),
        "served from the file"
    );

    sim.clear_faults();
    for resource in ["pods", "configmaps"] {
        second
            .until("the resumed watch confirmed", async || {
                second.status(resource).await["restored"]["caughtUp"] == true
            })
            .await;
    }
    let (code, body) = get(&second.url, "/readyz").await;
    let body = String::from_utf8_lossy(&body);
    assert_eq!(code, 200);
    assert!(body.contains("[+]cache pods ok\n"), "{body}");
    assert_eq!(lists(&sim), lists_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_three_replicas_under_churn_sends_no_list_upstream() {
    let sim = sim(1).await;
    // Each replica with its own volume.
    let volumes: Vec<Scratch> = (0..3)
        .map(|i| Scratch::new(&format!("rolling-{i}")))
        .collect();
    let mut replicas: Vec<Kubecache> = volumes
        .iter()
        .map(|volume| Kubecache::start(&sim, volume, &RESOURCES))
        .collect();
    for replica in &replicas {
        replica.ready().await;
        replica.converged(&sim).await;
    }
    let lists_before = lists(&sim);
    // As a StatefulSet rolls: one replica at a time, the next once this
    // one is ready; the API server changes throughout.
    for (i, volume) in volumes.iter().enumerate() {
        churn(&sim, &format!("roll-{i}-a"), 12);
        replicas[i].stop().await;
        churn(&sim, &format!("roll-{i}-b"), 12);
        replicas[i] = Kubecache::start(&sim, volume, &RESOURCES);
        replicas[i].ready().await;
    }
    for replica in &replicas {
        replica.converged(&sim).await;
        assert_eq!(replica.status("pods").await["lists"], 0);
    }
    assert_eq!(lists(&sim), lists_before, "no list during the rollout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_read_of_a_restored_store_holds_every_write_before_it() {
    let (scratch, sim) = (Scratch::new("consistent"), sim(1).await);
    saved_file(&sim, &scratch).await;
    churn(&sim, "down", 9);
    let second = Kubecache::start(&sim, &scratch, &RESOURCES);
    second.ready().await;
    churn(&sim, "up", 9);
    // No resourceVersion: the answer holds every write the sim accepted
    // before the request, at once, no polling.
    let want = sim.versions(ids::PODS);
    let (code, body) = get(&second.url, "/api/v1/pods").await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(keyed(&serde_json::from_slice(&body).unwrap()), want);
}

/// Time to ready after a restart, cold (no state file: a full list) and
/// warm (from the state file written at SIGTERM), at 10k, 100k and 150k of
/// the sim's realistic pods, one sim per size, the same run; and the state
/// file's bytes per pod. A measurement, not a check: run it alone, on a
/// release build (`cargo test --release -p kubecache-server --features
/// simulate --test warm_restart -- --ignored --nocapture`); the table is in
/// benches/README.md.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run alone, on a release build"]
async fn measure_time_to_ready_warm_and_cold() {
    let sizes: Vec<usize> = std::env::var("WARM_RESTART_PODS")
        .unwrap_or_else(|_| "10000,100000,150000".into())
        .split(',')
        .map(|n| n.trim().parse().expect("a number of pods"))
        .collect();
    println!("| pods | cold: start to ready | warm: start to ready | state file | bytes/pod |");
    println!("|---|---|---|---|---|");
    for pods in sizes {
        let scratch = Scratch::new(&format!("measure-{pods}"));
        let (_, sim) = Sim::start(SimConfig {
            pods,
            configmaps: 0,
            widgets: 0,
            churn_per_sec: 0.0,
            ..SimConfig::default()
        })
        .await
        .unwrap();
        let args = ["--resources", "pods"];
        let started = std::time::Instant::now();
        let mut cold = Kubecache::start(&sim, &scratch, &args);
        cold.ready().await;
        let cold_ready = started.elapsed();
        cold.stop().await;
        let bytes = std::fs::metadata(scratch.path("state").join("pods.v1.state"))
            .unwrap()
            .len();
        let lists_before = lists(&sim);
        let started = std::time::Instant::now();
        let warm = Kubecache::start(&sim, &scratch, &args);
        warm.ready().await;
        let warm_ready = started.elapsed();
        warm.converged_pods(&sim).await;
        assert_eq!(lists(&sim), lists_before, "the warm start listed");
        println!(
            "| {pods} | {:.2} s | {:.2} s | {:.1} MB | {} |",
            cold_ready.as_secs_f64(),
            warm_ready.as_secs_f64(),
            bytes as f64 / 1e6,
            bytes / pods as u64
        );
        drop(warm);
        sim.shutdown().await;
    }
}
