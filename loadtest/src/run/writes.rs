//! The writer: merge patches of random objects on the API server at a fixed
//! rate, each remembered by the resourceVersion it produced.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};

use super::RunContext;
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

/// The merge patch of write number `done`: its number in an annotation,
/// and `pad` in another when not empty (events of the size under test).
fn patch(done: u64, pad: &str) -> serde_json::Value {
    let mut annotations = serde_json::json!({"loadtest.kubecache.io/write": done.to_string()});
    if !pad.is_empty() {
        annotations["loadtest.kubecache.io/pad"] = pad.into();
    }
    serde_json::json!({"metadata": {"annotations": annotations}})
}

/// Writes until `deadline`; returns how many writes succeeded. Objects that
/// someone else deleted meanwhile (404) are skipped.
pub async fn run(
    ctx: Arc<RunContext>,
    targets: Arc<Targets>,
    writes: Writes,
    deadline: Instant,
) -> anyhow::Result<u64> {
    let rate = ctx.scenario.writes_per_sec;
    if rate <= 0.0 {
        return Ok(0);
    }
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let (prefix, plural) = ctx
        .scenario
        .path
        .rsplit_once('/')
        .context("path: expected a collection path like /api/v1/pods")?;
    let pad = "x".repeat(ctx.scenario.write_pad_bytes);
    let mut done = 0u64;
    while Instant::now() < deadline {
        tick.tick().await;
        let object = targets.object(rng.random_range(0..targets.objects.len()));
        let url = format!(
            "{}{prefix}/namespaces/{}/{plural}/{}",
            ctx.scenario.upstream, object.namespace, object.name
        );
        let patch = patch(done, &pad);
        let mut request = ctx
            .client
            .patch(&url)
            .header("content-type", "application/merge-patch+json")
            .body(patch.to_string());
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
            continue;
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
        writes.acked.lock().insert(rv, acked);
        done += 1;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_padded_write_carries_the_pad_beside_its_number() {
        let padded = patch(3, &"x".repeat(4096));
        let annotations = &padded["metadata"]["annotations"];
        assert_eq!(annotations["loadtest.kubecache.io/write"], "3");
        assert_eq!(
            annotations["loadtest.kubecache.io/pad"]
                .as_str()
                .unwrap()
                .len(),
            4096
        );
        let plain = patch(3, "");
        assert_eq!(
            plain,
            serde_json::json!({"metadata": {"annotations": {"loadtest.kubecache.io/write": "3"}}})
        );
    }
}
