//! Request workers: gets, lists and index queries in a closed loop.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

use super::RunContext;
use super::report::OpStats;
use super::targets::Targets;

/// A request kind of the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `GET` of one object.
    Get,
    /// A list of the collection.
    List,
    /// An index query of the query API.
    Index,
}

impl Op {
    /// All kinds, in report order.
    pub const ALL: [Op; 3] = [Op::Get, Op::List, Op::Index];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::List => "list",
            Op::Index => "index",
        }
    }
}

/// What the workers measured, per kind (in [`Op::ALL`] order).
pub type Measured = Vec<OpStats>;

/// Runs the workers until `deadline` (or the request bound).
pub async fn run(
    ctx: Arc<RunContext>,
    targets: Arc<Targets>,
    deadline: Instant,
) -> anyhow::Result<Measured> {
    let scenario = &ctx.scenario;
    let weights = [scenario.gets, scenario.lists, scenario.index_queries];
    let total: f64 = weights.iter().sum();
    let mut workers = Vec::new();
    if total > 0.0 {
        for worker in 0..scenario.concurrency {
            let (ctx, targets) = (ctx.clone(), targets.clone());
            workers.push(tokio::spawn(async move {
                work(&ctx, &targets, weights, total, deadline, worker as u64).await
            }));
        }
    }
    let mut measured: Measured = Op::ALL.iter().map(|op| OpStats::new(op.name())).collect();
    for worker in workers {
        for (all, one) in measured.iter_mut().zip(worker.await??) {
            all.merge(one);
        }
    }
    Ok(measured)
}

async fn work(
    ctx: &RunContext,
    targets: &Targets,
    weights: [f64; 3],
    total: f64,
    deadline: Instant,
    seed: u64,
) -> anyhow::Result<Measured> {
    let scenario = &ctx.scenario;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut stats: Measured = Op::ALL.iter().map(|op| OpStats::new(op.name())).collect();
    let (prefix, plural) = scenario
        .path
        .rsplit_once('/')
        .unwrap_or(("", &scenario.path));
    let rv = match scenario.read_resource_version.as_str() {
        "" => String::new(),
        rv => format!("resourceVersion={rv}"),
    };
    let server = scenario.servers()[0];
    while Instant::now() < deadline {
        if scenario.max_requests > 0
            && ctx.requests.fetch_add(1, Ordering::Relaxed) >= scenario.max_requests
        {
            break;
        } else if scenario.max_requests == 0 {
            ctx.requests.fetch_add(1, Ordering::Relaxed);
        }
        let mut pick = rng.random_range(0.0..total);
        let at = weights
            .iter()
            .position(|w| {
                pick -= w;
                pick < 0.0
            })
            .unwrap_or(0);
        let object = targets.object(rng.random_range(0..targets.objects.len()));
        let path = match Op::ALL[at] {
            Op::Get => format!(
                "{prefix}/namespaces/{}/{plural}/{}?{rv}",
                object.namespace, object.name
            ),
            Op::List if scenario.list_limit > 0 => {
                format!("{}?{rv}&limit={}", scenario.path, scenario.list_limit)
            }
            Op::List => format!("{}?{rv}", scenario.path),
            Op::Index => scenario
                .index_path
                .replace("{namespace}", &object.namespace)
                .replace("{node}", &object.node),
        };
        let url = format!("{server}{path}");
        let mut request = ctx.client.get(&url).timeout(Duration::from_secs(30));
        if let Some(token) = &scenario.token {
            request = request.bearer_auth(token);
        }
        let started = Instant::now();
        let outcome = match request.send().await {
            Ok(response) => {
                let status = response.status();
                match response.bytes().await {
                    Ok(body) if status.is_success() => Ok(body.len()),
                    Ok(body) => Err(format!(
                        "GET {path}: {status}: {}",
                        String::from_utf8_lossy(&body)
                    )),
                    Err(e) => Err(format!("GET {path}: {:#}", anyhow::Error::new(e))),
                }
            }
            Err(e) => Err(format!("GET {path}: {:#}", anyhow::Error::new(e))),
        };
        stats[at].record(started.elapsed(), outcome);
    }
    Ok(stats)
}
