//! `kubecache-loadtest chaos`: can hostile clients and a failing API server
//! starve well-behaved ones?
//!
//! One run, three phases with the same well-behaved load ([`crate::run`]:
//! watchers checked for completeness against the API server's history,
//! gets and lists measured): a *baseline* phase alone, then a *hostile*
//! phase with the [`Hostile`] clients attacking kubecache and, when the
//! upstream is the simulated API server, watch faults driven through its
//! `/sim/` endpoints every few seconds, then an *after* phase alone again
//! (as long as the baseline), once kubecache follows the API server again
//! ([`caught_up`]), to see kubecache recover. Throughout,
//! `/healthz` is probed every 100 ms on a fresh connection (as a kubelet
//! probes), a well-behaved tenant's large list every second, kubecache's RSS is sampled and the reviews the simulated API
//! server is asked are counted. The report compares the phases; any lost
//! event or failed well-behaved request fails the run.

mod attack;
mod caught_up;
mod faults;
mod health;
mod hostile;
mod hostile_h2;
mod report;
mod reviews;
mod rss;
mod victim;

use std::time::Instant;

use serde::Serialize;

use crate::run::Scenario;
pub use attack::HostileReport;
pub use hostile::Hostile;
pub use hostile_h2::H2Hostile;
pub use report::{ChaosReport, PhaseReport, PhaseRss, RssReport};
pub use reviews::ReviewRates;
pub use rss::slope_per_minute;

/// A chaos run, from flags.
#[derive(Debug, Clone, clap::Args, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Chaos {
    /// The well-behaved load of each phase; its `--duration-secs` is the
    /// hostile phase's length.
    #[command(flatten)]
    #[serde(flatten)]
    pub load: Scenario,
    /// Seconds of the baseline phase (default: `--duration-secs`).
    #[arg(long)]
    pub baseline_secs: Option<u64>,
    /// The hostile clients of the hostile phase.
    #[command(flatten)]
    #[serde(flatten)]
    pub hostile: Hostile,
    /// Seconds between upstream watch faults in the hostile phase, driven
    /// through the simulated API server's `/sim/` endpoints (0: none).
    #[arg(long, default_value_t = 5)]
    pub fault_interval_secs: u64,
    /// Objects of the well-behaved tenant's large list, probed every
    /// second through every phase (`limit`; 0: no probe). More than 500
    /// takes a seat among large sends.
    #[arg(long, default_value_t = 1600)]
    pub large_list: usize,
    /// kubecache's process id, to sample its RSS from `/proc`.
    #[arg(long)]
    pub kubecache_pid: Option<u32>,
    /// kubecache's metrics URL, to sample `process_resident_memory_bytes`
    /// instead (with `--token`).
    #[arg(long, conflicts_with = "kubecache_pid")]
    pub metrics_url: Option<String>,
    /// Seconds between RSS samples.
    #[arg(long, default_value_t = 5)]
    pub rss_interval_secs: u64,
    /// Seconds at the start of each phase left out of its RSS slope.
    #[arg(long, default_value_t = 30)]
    pub rss_warmup_secs: u64,
}

impl Default for Chaos {
    fn default() -> Self {
        crate::flag_defaults()
    }
}

/// Runs the baseline phase, then the hostile one; the report says whether
/// the well-behaved clients got everything in both.
pub async fn chaos(config: Chaos) -> anyhow::Result<ChaosReport> {
    let started = Instant::now();
    let tls = crate::tls::ClientTls::load(config.load.ca_file.as_deref())?;
    let health = health::Prober::healthz(&config.load, &tls)?;
    let large_list = (config.large_list > 0)
        .then(|| health::Prober::large_list(&config.load, &tls, config.large_list))
        .transpose()?;
    let rss = rss::Sampler::start(&config, started, &tls)?;
    let mut phases = Vec::new();
    let reviews = reviews::Counter::new(&config.load.upstream);
    for (name, hostile) in [("baseline", false), ("hostile", true), ("after", false)] {
        let mut load = config.load.clone();
        if !hostile {
            load.duration_secs = config.baseline_secs.unwrap_or(load.duration_secs);
        }
        if name == "after" {
            match caught_up::wait(&config.load, &tls).await {
                Some(waited) => eprintln!("kubecache follows again after {waited:.1?}"),
                None => eprintln!("kubecache's catching up unknown: the after phase shows it"),
            }
        }
        let start_secs = started.elapsed().as_secs_f64();
        eprintln!("phase {name}: {} s", load.duration_secs);
        health.restart();
        large_list.as_ref().map(health::Prober::restart);
        let reviewed = reviews.count().await;
        let attack = hostile.then(|| hostile::start(&config, &tls)).transpose()?;
        let faults =
            (hostile && config.fault_interval_secs > 0).then(|| faults::Driver::start(&config));
        let run = crate::run::run(load).await;
        eprintln!();
        let attacked = attack.map(attack::Attack::stop).unwrap_or_default();
        if hostile {
            // Alone again: the stalls the attack armed for reviews it did
            // not cause are disarmed, as the watch faults are spent.
            disarm_faults(&config.load.upstream).await;
        }
        let end_secs = started.elapsed().as_secs_f64();
        phases.push(PhaseReport {
            name,
            start_secs,
            end_secs,
            healthz: health.restart().report(end_secs - start_secs),
            large_list: large_list
                .as_ref()
                .map(|probe| probe.restart().report(end_secs - start_secs)),
            hostile: attacked,
            faults: faults.map(faults::Driver::stop).unwrap_or_default(),
            reviews_per_sec: reviews.rate_since(reviewed, end_secs - start_secs).await,
            failure: run.as_ref().err().map(|e| format!("{e:#}")),
            run: run.ok(),
        });
    }
    let rss = rss.finish(&phases, config.rss_warmup_secs as f64);
    Ok(ChaosReport {
        config,
        phases,
        rss,
    })
}

/// Disarms the faults still armed on the simulated API server at
/// `upstream` (`DELETE /sim/faults`); a server that is not the sim has
/// none, and its answer is ignored.
async fn disarm_faults(upstream: &str) {
    let _ = reqwest::Client::new()
        .delete(format!("{upstream}/sim/faults"))
        .send()
        .await;
}
