//! The writer: merge patches of random objects (of the first
//! [`Scenario::write_objects`] listed) on the API server, offered
//! at a fixed rate (open loop), each remembered by the resourceVersion it
//! produced.
//!
//! Open loop: write `i` is due at `i / rate` from the start, whatever the
//! earlier ones are doing; up to [`Scenario::writes_in_flight`] are in
//! flight at once. A write due while that many are in flight waits for
//! one to finish, and its latency (due → acknowledged) counts the wait:
//! a busy machine shows as slower writes, not as fewer writes offered.
//! Writes due by the run's deadline but not sent by then are offered, not
//! done. Concurrent writes may be acknowledged out of order; watchers are
//! checked by resourceVersion against the API server's own history, so
//! that does not matter (see `report`).
//!
//! [`Scenario::writes_in_flight`]: super::Scenario::writes_in_flight
//! [`Scenario::write_objects`]: super::Scenario::write_objects

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::RunContext;
use super::latency::Latency;
use super::targets::Targets;

/// When each write's resourceVersion was acknowledged by the API server.
#[derive(Clone, Default)]
pub struct Writes {
    acked: Arc<Mutex<HashMap<u64, Instant>>>,
}

impl Writes {
    /// When the write that produced `rv` was acknowledged, if the load
    /// generator made it.
    pub fn acked(&self, rv: u64) -> Option<Instant> {
        self.acked.lock().get(&rv).copied()
    }
}

/// What the writer did.
#[derive(Debug, Default)]
pub struct Written {
    /// Writes due before the deadline.
    pub offered: u64,
    /// Writes acknowledged (objects deleted meanwhile, 404, not counted).
    pub done: u64,
    /// From when each done write was due to its acknowledgement.
    pub latency: Latency,
}

/// The merge patch of write number `number` of the run that started at
/// resourceVersion `run`: both in an annotation (so that no write repeats
/// one of an earlier run, a no-op that makes no event), and `pad` in
/// another when not empty (events of the size under test).
fn patch(run: u64, number: u64, pad: &str) -> serde_json::Value {
    let mut annotations =
        serde_json::json!({"loadtest.kubecache.io/write": format!("{run}-{number}")});
    if !pad.is_empty() {
        annotations["loadtest.kubecache.io/pad"] = pad.into();
    }
    serde_json::json!({"metadata": {"annotations": annotations}})
}

/// Offers writes from `started` until `deadline`, then waits for those in
/// flight.
pub async fn run(
    ctx: Arc<RunContext>,
    targets: Arc<Targets>,
    writes: Writes,
    (started, deadline): (Instant, Instant),
) -> anyhow::Result<Written> {
    let rate = ctx.scenario.writes_per_sec;
    if rate <= 0.0 {
        return Ok(Written::default());
    }
    let (prefix, plural) = ctx
        .scenario
        .path
        .rsplit_once('/')
        .context("path: expected a collection path like /api/v1/pods")?;
    let pad: Arc<str> = "x".repeat(ctx.scenario.write_pad_bytes).into();
    let mut tick = tokio::time::interval_at(started.into(), Duration::from_secs_f64(1.0 / rate));
    // Late ticks fire at once: writes stay due at their own times.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let slots = Arc::new(Semaphore::new(ctx.scenario.writes_in_flight.max(1)));
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let written = match ctx.scenario.write_objects {
        0 => targets.objects.len(),
        n => n.min(targets.objects.len()),
    };
    let mut in_flight = JoinSet::new();
    let mut latencies = Vec::new();
    let mut offered = 0u64;
    loop {
        let due = tick.tick().await.into_std();
        if due >= deadline {
            break;
        }
        let number = offered;
        offered += 1;
        while let Some(joined) = in_flight.try_join_next() {
            settle(joined, &writes, &mut latencies)?;
        }
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot?,
            () = tokio::time::sleep_until(deadline.into()) => continue,
        };
        if Instant::now() >= deadline {
            continue;
        }
        let object = targets.object(rng.random_range(0..written));
        let url = format!(
            "{}{prefix}/namespaces/{}/{plural}/{}",
            ctx.scenario.upstream, object.namespace, object.name
        );
        let body = patch(targets.resource_version, number, &pad).to_string();
        let ctx = ctx.clone();
        in_flight.spawn(async move {
            let acked = write(&ctx, &url, body).await?;
            drop(slot);
            Ok(acked.map(|(rv, at)| Acked { rv, at, due }))
        });
    }
    while let Some(joined) = in_flight.join_next().await {
        settle(joined, &writes, &mut latencies)?;
    }
    Ok(Written {
        offered,
        done: latencies.len() as u64,
        latency: Latency::of(&mut latencies),
    })
}

/// A write the API server acknowledged.
struct Acked {
    /// The resourceVersion it produced.
    rv: u64,
    /// When it was acknowledged.
    at: Instant,
    /// When it was due.
    due: Instant,
}

/// Records a finished write: its acknowledgement, for the watchers' lag,
/// and its latency (µs) in `latencies`.
fn settle(
    joined: Result<anyhow::Result<Option<Acked>>, tokio::task::JoinError>,
    writes: &Writes,
    latencies: &mut Vec<u64>,
) -> anyhow::Result<()> {
    if let Some(acked) = joined.context("writer task")?? {
        writes.acked.lock().insert(acked.rv, acked.at);
        latencies.push(acked.at.saturating_duration_since(acked.due).as_micros() as u64);
    }
    Ok(())
}

/// Sends one merge patch; the resourceVersion it produced and when it was
/// acknowledged, or `None` for an object someone else deleted (404).
async fn write(
    ctx: &RunContext,
    url: &str,
    body: String,
) -> anyhow::Result<Option<(u64, Instant)>> {
    let mut request = ctx
        .client
        .patch(url)
        .header("content-type", "application/merge-patch+json")
        .body(body);
    if let Some(token) = &ctx.scenario.upstream_token {
        request = request.bearer_auth(token);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("PATCH {url}"))?;
    let status = response.status();
    let body = response.bytes().await?;
    let acked = Instant::now();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    anyhow::ensure!(
        status.is_success(),
        "PATCH {url}: {status}: {}",
        String::from_utf8_lossy(&body)
    );
    let written: serde_json::Value = serde_json::from_slice(&body)?;
    let rv: u64 = written["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .with_context(|| format!("PATCH {url}: no resourceVersion in the answer"))?;
    Ok(Some((rv, acked)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

    use crate::run::Scenario;
    use crate::run::targets::ObjectFacts;

    /// An API server that holds the first `held` patches until that many
    /// wait at once, answers the rest at once, and notes the most it saw
    /// in flight.
    async fn holding_server(held: usize) -> (String, Arc<AtomicUsize>) {
        let gate = Arc::new(tokio::sync::Barrier::new(held));
        let (in_flight, most, served) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicU64::new(0)),
        );
        let seen = most.clone();
        let app = axum::Router::new().fallback(move || {
            let (gate, in_flight, most, served) = (
                gate.clone(),
                in_flight.clone(),
                most.clone(),
                served.clone(),
            );
            async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let number = served.fetch_add(1, Ordering::SeqCst);
                if number < held as u64 {
                    gate.wait().await;
                }
                in_flight.fetch_sub(1, Ordering::SeqCst);
                axum::Json(
                    serde_json::json!({"metadata": {"resourceVersion": (number + 1).to_string()}}),
                )
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, seen)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_are_sent_when_due_up_to_the_bound_not_when_the_last_is_answered() {
        // Closed loop, the first write would wait for three more that are
        // never sent: the run would not end.
        let (upstream, most) = holding_server(4).await;
        let ctx = Arc::new(RunContext {
            scenario: Scenario {
                upstream,
                writes_per_sec: 64.0,
                writes_in_flight: 4,
                ..Scenario::default()
            },
            client: reqwest::Client::new(),
            watch_clients: Vec::new(),
            stop: AtomicBool::new(false),
            requests: AtomicU64::new(0),
            deliveries: AtomicU64::new(0),
        });
        let targets = Arc::new(Targets {
            resource_version: 1,
            objects: vec![ObjectFacts {
                namespace: "default".into(),
                name: "a".into(),
                ..ObjectFacts::default()
            }],
            list_time: Duration::ZERO,
        });
        let writes = Writes::default();
        let started = Instant::now();
        let window = (started, started + Duration::from_secs(1));
        let written = tokio::time::timeout(
            Duration::from_secs(60),
            run(ctx, targets, writes.clone(), window),
        )
        .await
        .expect("the writer waited for an answer before sending the next write")
        .unwrap();
        // 64 due in the second (1/64 s apart, exactly), never more than 4
        // in flight; each write done is remembered by its resourceVersion.
        assert_eq!(written.offered, 64);
        assert_eq!(most.load(Ordering::SeqCst), 4);
        assert!(written.done >= 4, "{written:?}");
        assert_eq!(written.latency.count as u64, written.done);
        assert!((1..=written.done).all(|rv| writes.acked(rv).is_some()));
    }

    #[test]
    fn a_padded_write_carries_the_pad_beside_its_number() {
        let padded = patch(100, 3, &"x".repeat(4096));
        let annotations = &padded["metadata"]["annotations"];
        assert_eq!(annotations["loadtest.kubecache.io/write"], "100-3");
        assert_eq!(
            annotations["loadtest.kubecache.io/pad"]
                .as_str()
                .unwrap()
                .len(),
            4096
        );
        let plain = patch(100, 3, "");
        assert_eq!(
            plain,
            serde_json::json!({"metadata": {"annotations": {"loadtest.kubecache.io/write": "100-3"}}})
        );
    }
}
