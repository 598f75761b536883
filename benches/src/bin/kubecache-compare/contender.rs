//! One contender, run alone in this process: sync every pod of the server,
//! then measure what it cost and print one JSON line ([`Measurement`]).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Config};
use kubecache_reflector::upstream::{ApiResource, RequestEncoding, ResourceSpec, Upstream};
use kubecache_reflector::{Reflector, ReflectorConfig, Strategy};
use kubecache_reflector::{StoreConfig, StoreReader, store};
use serde::{Deserialize, Serialize};

use kubecache_benches::procstat;

/// Objects per list page for every contender (client-go, kube-runtime and
/// kubecache all default to 500).
const PAGE_SIZE: usize = 500;

/// The watch timeout of the relist contenders: once the fault is armed, the
/// open watch ends within this and its successor gets the 410.
const RELIST_WATCH_TIMEOUT_SECS: u32 = 5;

/// Every contender, in the order the orchestrator runs them.
pub const ALL: &[&str] = &[
    "raw",
    "raw-protobuf",
    "kube-runtime-listwatch",
    "kube-runtime-streaming",
    "kubecache-list-watch",
    "kubecache-parallel",
    "kubecache-streaming",
    "kubecache-sharded",
    "kubecache-parallel-protobuf",
    "kubecache-sharded-protobuf",
    "kubecache-streaming-protobuf",
    "kube-runtime-listwatch-relist",
    "kubecache-parallel-relist",
];

/// What one contender measured, one JSON line on stdout.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measurement {
    /// The contender's name.
    pub contender: String,
    /// Objects in its store when ready (`None` for `raw`, which keeps none).
    pub objects: Option<u64>,
    /// Wall time from the start of the sync to ready.
    pub ready_seconds: f64,
    /// kubecache: wall time until the list was applied (for list-watch,
    /// readiness then waits up to 1 s for the watch to prove itself).
    pub listed_seconds: Option<f64>,
    /// VmRSS after ready and a settle pause.
    pub rss_bytes: u64,
    /// VmHWM at that point: the peak of the whole sync.
    pub peak_rss_bytes: u64,
    /// User + system CPU of the process until ready.
    pub cpu_seconds: f64,
    /// kubecache: the JSON bytes it holds (`CachedObject::json`, stripped
    /// of managedFields). raw: the bytes it read.
    pub json_bytes: Option<u64>,
    /// The relist contenders: memory around a forced relist.
    pub relist: Option<RelistMeasurement>,
}

/// Memory around a relist forced by a 410 on the watch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RelistMeasurement {
    /// VmRSS in steady state before the relist.
    pub steady_rss_bytes: u64,
    /// VmHWM from just before the relist until it completed.
    pub peak_rss_bytes: u64,
    /// VmRSS after the relist and a settle pause.
    pub after_rss_bytes: u64,
    /// Objects in the store after the relist.
    pub objects: u64,
}

/// Runs contender `name` against `server` and returns what it measured.
pub async fn run(name: &str, server: &str, settle: Duration) -> anyhow::Result<Measurement> {
    let started = Instant::now();
    let mut m = match name {
        "raw" => raw(name, server, started, JSON).await?,
        "raw-protobuf" => raw(name, server, started, PROTOBUF).await?,
        "kube-runtime-listwatch" => kube_runtime(name, server, started, false, false).await?,
        "kube-runtime-streaming" => kube_runtime(name, server, started, true, false).await?,
        "kube-runtime-listwatch-relist" => kube_runtime(name, server, started, false, true).await?,
        other => match kubecache_contender(other) {
            Some((strategy, wire, relist)) => {
                kubecache(name, server, started, strategy, wire, relist).await?
            }
            None => bail!(
                "unknown contender {other:?}; known: {}, or any kubecache-{{strategy}}[-protobuf][-relist]",
                ALL.join(", ")
            ),
        },
    };
    if m.relist.is_none() {
        tokio::time::sleep(settle).await;
        (m.rss_bytes, m.peak_rss_bytes) = procstat::rss()?;
    }
    Ok(m)
}

/// The strategy, wire and relist of a contender named
/// `kubecache-{strategy}[-protobuf][-relist]` (JSON without `-protobuf`).
fn kubecache_contender(name: &str) -> Option<(Strategy, RequestEncoding, bool)> {
    let rest = name.strip_prefix("kubecache-")?;
    let (rest, relist) = match rest.strip_suffix("-relist") {
        Some(rest) => (rest, true),
        None => (rest, false),
    };
    let (rest, wire) = match rest.strip_suffix("-protobuf") {
        Some(rest) => (rest, RequestEncoding::Protobuf),
        None => (rest, RequestEncoding::Json),
    };
    Some((rest.parse().ok()?, wire, relist))
}

/// A measurement at the moment of ready: wall time and CPU (memory is read
/// after the settle pause).
fn at_ready(name: &str, started: Instant) -> anyhow::Result<Measurement> {
    Ok(Measurement {
        contender: name.to_string(),
        objects: None,
        ready_seconds: started.elapsed().as_secs_f64(),
        listed_seconds: None,
        rss_bytes: 0,
        peak_rss_bytes: 0,
        cpu_seconds: procstat::cpu_seconds()?,
        json_bytes: None,
        relist: None,
    })
}

/// `Accept` of the JSON raw read.
const JSON: &str = "application/json";
/// `Accept` of the protobuf raw read.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The raw paginated read in one encoding: the floor of the contenders
/// reading that encoding.
async fn raw(
    name: &str,
    server: &str,
    started: Instant,
    accept: &str,
) -> anyhow::Result<Measurement> {
    let report =
        kubecache_loadtest::raw::read_all(server, "/api/v1/pods", PAGE_SIZE, accept, None).await?;
    let mut m = at_ready(name, started)?;
    m.json_bytes = Some(report.bytes);
    Ok(m)
}

fn client(server: &str) -> anyhow::Result<Client> {
    let url = server.parse().context("the server URL")?;
    Client::try_from(Config::new(url)).context("a kube client")
}

/// kube-runtime's watcher + reflector store of typed Pods, as an operator
/// runs it (no transform: the store keeps whole Pods, managedFields
/// included).
async fn kube_runtime(
    name: &str,
    server: &str,
    started: Instant,
    streaming: bool,
    relist: bool,
) -> anyhow::Result<Measurement> {
    let mut config = watcher::Config::default().page_size(PAGE_SIZE as u32);
    if streaming {
        config = config.streaming_lists();
    }
    if relist {
        config = config.timeout(RELIST_WATCH_TIMEOUT_SECS);
    }
    let (reader, writer) = reflector::store::<Pod>();
    // Counts completed initial lists (InitDone), to see a relist finish.
    let (lists, mut lists_rx) = tokio::sync::watch::channel(0u32);
    let stream = reflector(writer, watcher(Api::<Pod>::all(client(server)?), config))
        .default_backoff()
        .for_each(move |event| {
            if let Ok(watcher::Event::InitDone) = event {
                lists.send_modify(|n| *n += 1);
            }
            async {}
        });
    let task = tokio::spawn(stream);
    reader
        .wait_until_ready()
        .await
        .context("kube-runtime's store never became ready")?;
    let mut m = at_ready(name, started)?;
    m.objects = Some(reader.state().len() as u64);
    if relist {
        m.relist = Some(
            measure_relist(server, &mut m, || reader.state().len() as u64, async {
                lists_rx.wait_for(|n| *n >= 2).await.map(|_| ())
            })
            .await?,
        );
    }
    task.abort();
    Ok(m)
}

/// kubecache's reflector with one strategy and wire format and its default
/// transform (managedFields stripped).
async fn kubecache(
    name: &str,
    server: &str,
    started: Instant,
    strategy: Strategy,
    wire: RequestEncoding,
    relist: bool,
) -> anyhow::Result<Measurement> {
    let (writer, reader) = store(StoreConfig::default());
    let mut config = ReflectorConfig {
        strategy,
        wire,
        page_size: PAGE_SIZE,
        ..ReflectorConfig::default()
    };
    if relist {
        config.watch_timeout = Duration::from_secs(RELIST_WATCH_TIMEOUT_SECS.into());
    }
    let upstream = Upstream::new(client(server)?, ResourceSpec::all(ApiResource::pods()));
    let reflector = Reflector::new(upstream, config, writer);
    let mut status = reflector.status();
    let task = tokio::spawn(reflector.run());
    reader
        .ready()
        .await
        .context("kubecache's store closed before it was ready")?;
    let mut m = at_ready(name, started)?;
    m.listed_seconds = status
        .borrow()
        .last_list
        .as_ref()
        .map(|(at, _)| at.duration_since(started).as_secs_f64());
    m.objects = Some(reader.snapshot().len() as u64);
    m.json_bytes = Some(json_bytes(&reader));
    if relist {
        m.relist = Some(
            measure_relist(server, &mut m, || reader.snapshot().len() as u64, async {
                status.wait_for(|s| s.lists >= 2).await.map(|_| ())
            })
            .await?,
        );
    }
    task.abort();
    Ok(m)
}

fn json_bytes(reader: &StoreReader) -> u64 {
    reader
        .snapshot()
        .range(None, None)
        .map(|o| o.json.len() as u64)
        .sum()
}

/// After ready: settles, reads the steady state, resets the peak, arms a
/// 410 for the next watch (the open one ends within its short timeout),
/// waits for the relist to complete and reads the peak and the state after.
async fn measure_relist<E>(
    server: &str,
    m: &mut Measurement,
    objects: impl Fn() -> u64,
    relisted: impl Future<Output = Result<(), E>>,
) -> anyhow::Result<RelistMeasurement> {
    tokio::time::sleep(Duration::from_secs(2)).await;
    (m.rss_bytes, m.peak_rss_bytes) = procstat::rss()?;
    let steady_rss_bytes = m.rss_bytes;
    procstat::reset_peak()?;
    arm_watch_gone(server).await?;
    let deadline = Duration::from_secs(300);
    tokio::time::timeout(deadline, relisted)
        .await
        .context("no relist within 5 minutes of arming the 410")?
        .map_err(|_| anyhow::anyhow!("the reflector stopped before relisting"))?;
    let (_, peak_rss_bytes) = procstat::rss()?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (after_rss_bytes, _) = procstat::rss()?;
    Ok(RelistMeasurement {
        steady_rss_bytes,
        peak_rss_bytes,
        after_rss_bytes,
        objects: objects(),
    })
}

async fn arm_watch_gone(server: &str) -> anyhow::Result<()> {
    let response = reqwest::Client::new()
        .post(format!("{server}/sim/faults"))
        .header("Content-Type", "application/json")
        .body(r#"{"target":"watch","fault":{"type":"watchGone"},"times":1}"#)
        .send()
        .await
        .context("arming the watchGone fault")?;
    if !response.status().is_success() {
        bail!("arming the watchGone fault: {}", response.status());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubecache_contenders_are_read_from_their_names() {
        assert_eq!(
            kubecache_contender("kubecache-sharded-protobuf"),
            Some((Strategy::Sharded, RequestEncoding::Protobuf, false))
        );
        assert_eq!(
            kubecache_contender("kubecache-list-watch"),
            Some((Strategy::ListWatch, RequestEncoding::Json, false))
        );
        assert_eq!(
            kubecache_contender("kubecache-parallel-protobuf-relist"),
            Some((Strategy::Parallel, RequestEncoding::Protobuf, true))
        );
        assert_eq!(kubecache_contender("kubecache-fast"), None);
        assert_eq!(kubecache_contender("raw"), None);
        for name in ALL.iter().filter(|n| n.starts_with("kubecache-")) {
            assert!(kubecache_contender(name).is_some(), "{name}");
        }
    }
}
