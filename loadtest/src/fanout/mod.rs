//! `kubecache-loadtest fanout`: one load of `run`'s against several servers
//! one after another (the sim, kubecache, a real API server), and how each
//! compares with the first (issue 40).
//!
//! Every target gets the same [`Scenario`]: its watchers, their protocol
//! and source addresses, the writer's schedule on the upstream, with the
//! target's own URL, bearer token and CA in place of `--url`, `--token` and
//! `--ca-file` (which are the targets' defaults). The upstream's reference
//! watch checks every watcher of every target. The report has a row per
//! target: deliveries/s, MB/s, delivery lag, the writer's achieved rate and
//! latency, events lost, and deliveries/s and lag p99 as ratios of the
//! first target's. With `--target-pids`, also the CPU its server processes
//! spent and the deliveries per CPU-second, the measure that still
//! compares when every server delivers all that is offered, or when the
//! load generator, not the server, runs out of cores.

mod cpu;
mod report;

use std::str::FromStr;

use anyhow::{Context, bail};

use crate::run::Scenario;
use report::Measured;
pub use report::{FanoutReport, Row};

/// A fan-out comparison, from flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Fanout {
    /// The load run against each target (`--url` is not used: each
    /// target's URL is).
    #[command(flatten)]
    pub load: Scenario,
    /// A server to load, `NAME=URL`; repeated, run in order; the first is
    /// the one the others are compared with.
    #[arg(long = "target", required = true)]
    pub targets: Vec<Named>,
    /// A target's own bearer token, `NAME=TOKEN` (default: `--token`).
    #[arg(long = "target-token")]
    pub target_tokens: Vec<Named>,
    /// A target's own CA, `NAME=FILE` (default: `--ca-file`).
    #[arg(long = "target-ca-file")]
    pub target_ca_files: Vec<Named>,
    /// The processes serving a target, `NAME=PID[,PID...]` (the API server
    /// and etcd; kubecache, and what is behind it if it is to be counted):
    /// their CPU time over the target's run is reported.
    #[arg(long = "target-pids")]
    pub target_pids: Vec<Named>,
}

/// `NAME=VALUE`: a target's name and its URL, token or CA file.
#[derive(Debug, Clone)]
pub struct Named {
    /// The target's name in the report.
    pub name: String,
    /// What the flag gives it.
    pub value: String,
}

impl FromStr for Named {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once('=') {
            Some((name, value)) if !name.is_empty() && !value.is_empty() => Ok(Named {
                name: name.into(),
                value: value.into(),
            }),
            _ => Err(format!("expected NAME=VALUE, got {s:?}")),
        }
    }
}

impl Fanout {
    /// Each target's name, scenario and serving processes.
    fn scenarios(&self) -> anyhow::Result<Vec<(String, Scenario, Vec<u32>)>> {
        if self.targets.is_empty() {
            bail!("fanout: at least one --target NAME=URL");
        }
        if self.load.url != Scenario::default().url {
            bail!("fanout: name the servers with --target NAME=URL, not --url");
        }
        for (i, target) in self.targets.iter().enumerate() {
            if self.targets[..i].iter().any(|t| t.name == target.name) {
                bail!("--target: {:?} is named twice", target.name);
            }
        }
        let given = [
            ("--target-token", &self.target_tokens),
            ("--target-ca-file", &self.target_ca_files),
            ("--target-pids", &self.target_pids),
        ];
        for (flag, named) in given {
            for n in named {
                if !self.targets.iter().any(|t| t.name == n.name) {
                    bail!("{flag}: no --target is named {:?}", n.name);
                }
            }
        }
        let of = |named: &[Named], name: &str| {
            named
                .iter()
                .rfind(|n| n.name == name)
                .map(|n| n.value.clone())
        };
        self.targets
            .iter()
            .map(|target| {
                let mut scenario = self.load.clone();
                scenario.url = target.value.clone();
                scenario.json = None;
                if let Some(token) = of(&self.target_tokens, &target.name) {
                    scenario.token = Some(token);
                }
                if let Some(ca) = of(&self.target_ca_files, &target.name) {
                    scenario.ca_file = Some(ca.into());
                }
                scenario
                    .validate()
                    .with_context(|| format!("--target {}", target.name))?;
                let pids = of(&self.target_pids, &target.name)
                    .map(|pids| cpu::pids(&pids))
                    .transpose()
                    .with_context(|| format!("--target-pids {}", target.name))?
                    .unwrap_or_default();
                Ok((target.name.clone(), scenario, pids))
            })
            .collect()
    }
}

/// Runs the load against every target in turn. A target whose run cannot
/// start (unreachable, a watch refused) gets a failed row; the others
/// still run.
pub async fn fanout(config: Fanout) -> anyhow::Result<FanoutReport> {
    let scenarios = config.scenarios()?;
    let mut rows = Vec::new();
    for (name, scenario, pids) in scenarios {
        eprintln!(
            "== {name} ({}): {} watchers over {:?} from {} source addresses, {} writes/s",
            scenario.url,
            scenario.watchers,
            scenario.protocol,
            scenario.addresses,
            scenario.writes_per_sec
        );
        let url = scenario.url.clone();
        let before = cpu::seconds(&pids)?;
        let run = crate::run::run(scenario).await;
        let cpu = match before {
            Some(before) => cpu::seconds(&pids)?.map(|after| after - before),
            None => None,
        };
        eprintln!();
        match &run {
            Ok(report) => eprint!("{report}"),
            Err(e) => eprintln!("{name}: {e:#}"),
        }
        rows.push(Measured {
            target: name,
            url,
            run: run.context("the run did not start"),
            cpu_seconds: cpu,
        });
    }
    Ok(FanoutReport::new(config.load, rows))
}
