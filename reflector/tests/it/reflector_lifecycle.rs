//! The reflector's lifecycle against the simulated API server: persistent
//! failures (403, 404, a panicking filter) make the store not ready with the
//! reason and recover by themselves once lifted; transient ones keep it
//! ready; a reflector that is gone leaves its store not ready.
//!
//! Time is paused, so backoffs (up to 30 s) pass at once. No wait here is
//! bounded by time: the sim serves on real sockets, and the paused clock
//! jumps to the next timer whenever the runtime waits on them. A wait for
//! something the reflector should reach is bounded by its failures instead.

use crate::common;
use common::{Running, start, start_with};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kubecache_loadtest::sim::{Fault, FaultSpec, FaultTarget, Sim, SimConfig, ids};
use kubecache_reflector::Readiness;
use kubecache_reflector::upstream::RequestEncoding;
use kubecache_reflector::{ObjectFilter, ReflectorConfig, Strategy};

/// kube-apiserver's answer to a service account without `watch` on pods.
const FORBIDDEN_WATCH: &str = r#"403 from the API server: pods is forbidden: User "system:serviceaccount:kubecache:kubecache" cannot watch resource "pods" in API group "" at the cluster scope"#;

async fn sim(pods: usize) -> Sim {
    let (_, sim) = Sim::start(SimConfig {
        pods,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    sim
}

/// Arms `fault` on every request until [`Sim::clear_faults`].
fn arm(sim: &Sim, fault: Fault) {
    sim.inject(FaultSpec {
        target: FaultTarget::Any,
        fault,
        times: u32::MAX,
    });
}

/// Waits for `until`, or fails the test once the reflector has failed 20
/// more times: a reflector that keeps failing never gets there.
async fn unless_failing<F: Future>(running: &Running, what: &str, until: F) -> F::Output {
    let mut status = running.status.clone();
    let failures = status.borrow().failures + 20;
    tokio::select! {
        output = until => output,
        _ = status.wait_for(|s| s.failures >= failures) => {
            panic!("{what}: not after 20 more failures: {:?}", running.reader.readiness())
        }
    }
}

/// Waits until the reflector is `failing`; the store's reason then.
async fn failing(running: &Running) -> String {
    let mut status = running.status.clone();
    unless_failing(
        running,
        "failing",
        status.wait_for(|s| s.phase == "failing"),
    )
    .await
    .unwrap();
    match running.reader.readiness() {
        Readiness::NotReady { reason } => reason.to_string(),
        Readiness::Ready => panic!("a failing reflector's store is ready"),
    }
}

/// Waits for the next list to complete; the store must be ready then
/// (parallel and streaming lists hold a working watch: their store is ready
/// at once).
async fn listed(running: &Running) {
    let mut status = running.status.clone();
    let lists = status.borrow().lists + 1;
    unless_failing(running, "listed", status.wait_for(|s| s.lists >= lists))
        .await
        .unwrap();
    assert_eq!(running.reader.readiness(), Readiness::Ready);
}

/// Checks that the store holds exactly the sim's pods at their
/// resourceVersions, once it has reached the sim's revision.
async fn holds_the_sims_state(sim: &Sim, running: &Running) {
    let revision = sim.store().revision();
    let reached = running.reader.wait_for(revision, Duration::MAX);
    unless_failing(running, "caught up", reached).await.unwrap();
    let cached: BTreeMap<String, String> = running
        .reader
        .snapshot()
        .range(None, None)
        .map(|o| (o.key.to_string(), o.resource_version.to_string()))
        .collect();
    assert_eq!(cached, sim.versions(ids::PODS), "key -> resourceVersion");
}

#[tokio::test(start_paused = true)]
async fn a_403_keeps_the_store_not_ready_with_the_servers_reason_until_access_is_granted() {
    let sim = sim(300).await;
    arm(&sim, Fault::Forbidden);
    let mut running = start(sim.url(), Strategy::Auto, RequestEncoding::Json, 100);
    assert_eq!(failing(&running).await, FORBIDDEN_WATCH);
    // Failing still retries (with backoff): granting access needs no restart.
    running
        .status
        .wait_for(|s| s.list_attempts >= 3)
        .await
        .unwrap();
    assert_eq!(
        running.reader.readiness(),
        Readiness::NotReady {
            reason: Arc::from(FORBIDDEN_WATCH)
        },
        "no retry succeeded"
    );
    sim.create_pods(10).unwrap();
    sim.clear_faults();
    listed(&running).await;
    holds_the_sims_state(&sim, &running).await;
}

#[tokio::test(start_paused = true)]
async fn a_404_on_the_watch_of_a_ready_store_fails_it_until_the_resource_is_back_and_a_relist_catches_up()
 {
    let sim = sim(300).await;
    let running = start(
        sim.url(),
        Strategy::Parallel,
        RequestEncoding::Protobuf,
        100,
    );
    listed(&running).await;
    arm(&sim, Fault::NotFound);
    sim.cut_watches();
    assert_eq!(
        failing(&running).await,
        "404 from the API server: the server could not find the requested resource"
    );
    sim.create_pods(10).unwrap();
    sim.clear_faults();
    listed(&running).await;
    holds_the_sims_state(&sim, &running).await;
}

#[tokio::test(start_paused = true)]
async fn server_errors_and_broken_watches_keep_a_ready_store_ready_while_retried() {
    let sim = sim(300).await;
    let mut running = start(sim.url(), Strategy::Parallel, RequestEncoding::Json, 100);
    listed(&running).await;
    let failures = running.status.borrow().failures;
    sim.inject(FaultSpec {
        target: FaultTarget::Any,
        fault: Fault::InternalError,
        times: 3,
    });
    sim.cut_watches();
    // The cut watch, then 3 refused reopenings. (kube's client retries 429
    // itself: the reflector never sees one from the sim.)
    while running.status.borrow_and_update().failures < failures + 4 {
        assert!(
            running.reader.is_ready(),
            "{:?}",
            running.reader.readiness()
        );
        running.status.changed().await.unwrap();
    }
    assert!(
        running.reader.is_ready(),
        "{:?}",
        running.reader.readiness()
    );
    sim.create_pods(10).unwrap();
    holds_the_sims_state(&sim, &running).await;
}

#[tokio::test(start_paused = true)]
async fn an_aborted_reflector_leaves_its_store_closed_and_not_ready() {
    let sim = sim(100).await;
    let mut running = start(sim.url(), Strategy::Parallel, RequestEncoding::Json, 50);
    listed(&running).await;
    running.task.abort();
    assert!((&mut running.task).await.unwrap_err().is_cancelled());
    assert_eq!(
        running.reader.readiness(),
        Readiness::NotReady {
            reason: Arc::from("the reflector stopped")
        }
    );
    assert!(running.reader.is_closed());
}

#[tokio::test(start_paused = true)]
async fn a_panicking_filter_fails_the_store_with_the_panic_message_and_recovers_once_fixed() {
    let sim = sim(300).await;
    let broken = Arc::new(AtomicBool::new(false));
    let filter: ObjectFilter = {
        let broken = broken.clone();
        Arc::new(move |_| {
            assert!(!broken.load(Ordering::SeqCst), "the filter is broken");
            true
        })
    };
    let running = start_with(
        sim.url(),
        ReflectorConfig {
            strategy: Strategy::Parallel,
            page_size: 100,
            filter: Some(filter),
            ..ReflectorConfig::default()
        },
    );
    listed(&running).await;
    broken.store(true, Ordering::SeqCst);
    // The watch event of the new pod reaches the filter.
    sim.create_pods(1).unwrap();
    assert_eq!(
        failing(&running).await,
        "the reflector panicked: the filter is broken"
    );
    broken.store(false, Ordering::SeqCst);
    listed(&running).await;
    holds_the_sims_state(&sim, &running).await;
    assert!(!running.task.is_finished(), "the reflector lives on");
}

#[tokio::test(start_paused = true)]
async fn a_watch_cut_after_it_delivered_is_reopened_without_backing_off() {
    let sim = sim(300).await;
    let running = start(sim.url(), Strategy::Parallel, RequestEncoding::Json, 100);
    listed(&running).await;
    let watches = || sim.counters()["pods"].watches;
    for round in 0..3 {
        // An event, so that the watch has delivered before it is cut.
        sim.create_pods(1).unwrap();
        holds_the_sims_state(&sim, &running).await;
        let opened = watches();
        sim.cut_watches();
        // Looked at every (paused) millisecond: a backoff lasts 400 or more.
        let mut phases = std::collections::BTreeSet::new();
        let reopened = async {
            while watches() == opened {
                phases.insert(running.status.borrow().phase);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        unless_failing(&running, "reopened", reopened).await;
        assert!(
            !phases.contains("backing_off"),
            "round {round}: backed off before reopening: {phases:?}"
        );
    }
    sim.create_pods(1).unwrap();
    holds_the_sims_state(&sim, &running).await;
}
