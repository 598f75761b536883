//! `RESULTS.md`: a table per scenario, ratios to the raw read and to
//! kube-runtime's list-watch, and each DESIGN.md target met or missed.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::contender::Measurement;

const RAW: &str = "raw";
/// The raw read in protobuf: the floor of the contenders named `*-protobuf`.
const RAW_PROTOBUF: &str = "raw-protobuf";
const KUBE_RUNTIME_LW: &str = "kube-runtime-listwatch";
const KUBECACHE: &[&str] = &[
    "kubecache-list-watch",
    "kubecache-parallel",
    "kubecache-streaming",
];

/// MB as 10^6 bytes, the unit of the report and of DESIGN.md's "30 MB".
const MB: f64 = 1e6;

/// Everything measured, by one `run` or several (`--keep-previous`); kept
/// as JSON beside the Markdown so that later runs can add scenarios.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Report {
    /// The commands that measured it, with their notes.
    runs: Vec<RunInfo>,
    pub scenarios: Vec<Scenario>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RunInfo {
    command: String,
    note: String,
    nproc: usize,
}

/// One simulated API server: its pods and page latency, and what every
/// contender run against it measured.
#[derive(Debug, Serialize, Deserialize)]
pub struct Scenario {
    pub pods: usize,
    pub page_latency_ms: u64,
    /// The sim ran with `--serving-cost` (a real server's throughput), so
    /// the server, not the client, bounds the time to ready.
    #[serde(default)]
    pub serving_cost: bool,
    date: String,
    load_average: String,
    pub measurements: Vec<Measurement>,
}

impl Scenario {
    /// A scenario starting now.
    pub fn new(pods: usize, page_latency_ms: u64, serving_cost: bool) -> Self {
        Scenario {
            pods,
            page_latency_ms,
            serving_cost,
            date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
            load_average: std::fs::read_to_string("/proc/loadavg")
                .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
                .unwrap_or_default(),
            measurements: Vec::new(),
        }
    }

    /// The median run of `contender` (by time to ready), if it ran.
    fn median(&self, contender: &str) -> Option<&Measurement> {
        let mut runs: Vec<&Measurement> = self
            .measurements
            .iter()
            .filter(|m| m.contender == contender)
            .collect();
        runs.sort_by(|a, b| a.ready_seconds.total_cmp(&b.ready_seconds));
        runs.get(runs.len().saturating_sub(1) / 2).copied()
    }

    fn runs(&self, contender: &str) -> usize {
        self.measurements
            .iter()
            .filter(|m| m.contender == contender)
            .count()
    }

    fn contenders(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for m in &self.measurements {
            if !names.contains(&m.contender.as_str()) {
                names.push(&m.contender);
            }
        }
        names
    }

    fn title(&self) -> String {
        format!(
            "{} pods, page latency {} ms{}",
            thousands(self.pods as u64),
            self.page_latency_ms,
            if self.serving_cost {
                ", serving cost"
            } else {
                ""
            }
        )
    }

    /// The server bounds the time to ready: slow pages or its serving cost.
    fn server_bound(&self) -> bool {
        self.page_latency_ms > 0 || self.serving_cost
    }
}

impl Report {
    /// Records a run of `command`.
    pub fn add_run(&mut self, command: String, note: String) {
        self.runs.push(RunInfo {
            command,
            note,
            nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
        });
    }

    /// Adds a scenario in (pods, latency) order, replacing an earlier
    /// measurement of the same one.
    pub fn put(&mut self, scenario: Scenario) {
        let id = (scenario.pods, scenario.page_latency_ms);
        self.scenarios.retain(|s| (s.pods, s.page_latency_ms) != id);
        self.scenarios.push(scenario);
        self.scenarios.sort_by_key(|s| (s.pods, s.page_latency_ms));
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let w = &mut out;
        let _ = writeln!(
            w,
            "# kubecache against kube-runtime: initial sync and memory\n"
        );
        let _ = writeln!(w, "Measured by:\n");
        for run in &self.runs {
            let _ = writeln!(
                w,
                "- `{}` (`nproc` = {}). {}",
                run.command, run.nproc, run.note
            );
        }
        let _ = writeln!(w, "\n{METHOD}");
        for s in &self.scenarios {
            render_scenario(w, s);
        }
        render_targets(w, &self.scenarios);
        let _ = writeln!(
            w,
            "\nEvery run's measurement (one JSON object per contender run, as printed by \
             `kubecache-compare contender`) is in the JSON file beside this one."
        );
        out
    }
}

const METHOD: &str = "\
How: one `kubecache-loadtest sim` process per scenario (realistic pods of 4–8 KB of JSON, \
about half of it managedFields; no churn), and each contender in its own process \
(`kubecache-compare contender NAME`), one after the other against that same server and data. \
The server and the contender share the machine's cores. \
`ready` is the wall time from the contender's start of sync until its store is ready \
(kube-runtime: `wait_until_ready`; kubecache: `reader.ready()`); CPU is the contender \
process's user + system time until then; RSS is VmRSS 1 s after ready; peak is VmHWM by then. \
`× raw` and `× kr-lw` divide by the raw read in the same wire format (`raw-protobuf` for the \
`*-protobuf` contenders, JSON `raw` otherwise) and by kube-runtime's list-watch in the same \
scenario (below 1 is faster or smaller). kube-runtime keeps whole typed Pods \
(managedFields included, no transform), as an operator using it does by default; kubecache \
strips managedFields, and `stripped JSON` is the sum of the JSON it holds. \
kubecache list-watch is ready only once its watch has delivered an event or stayed open \
for 1 s without error (the 410-at-once check), so with no churn its `ready` is its list time \
(`listed`) plus up to 1 s. MB = 10^6 bytes.";

fn render_scenario(w: &mut String, s: &Scenario) {
    let _ = writeln!(w, "\n## {}\n", s.title());
    let _ = writeln!(
        w,
        "Started {}; load average then: {}.\n",
        s.date, s.load_average
    );
    let raw = s.median(RAW);
    let kr = s.median(KUBE_RUNTIME_LW);
    if let Some(raw) = raw {
        let _ = write!(w, "Raw read: {} of JSON. ", mb(raw.json_bytes.unwrap_or(0)));
    }
    if let Some(bytes) = stripped_json(s) {
        let _ = write!(w, "Stripped JSON held by kubecache: {}. ", mb(bytes));
    }
    let runs = s.contenders().iter().map(|c| s.runs(c)).max().unwrap_or(0);
    let _ = writeln!(
        w,
        "{}\n",
        if runs > 1 {
            format!("Median of {runs} runs (by time to ready).")
        } else {
            "One run each.".to_string()
        }
    );
    let _ = writeln!(
        w,
        "| contender | objects | ready (s) | × raw (same wire) | × kr-lw | listed (s) | CPU (s) | RSS (MB) | × kr-lw | peak RSS (MB) | RSS / stripped JSON |"
    );
    let _ = writeln!(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let stripped = stripped_json(s);
    for name in s.contenders() {
        let Some(m) = s.median(name) else { continue };
        if m.relist.is_some() {
            continue;
        }
        let ratio = |base: Option<&Measurement>, f: fn(&Measurement) -> f64| {
            base.filter(|b| f(b) > 0.0)
                .map_or("–".to_string(), |b| format!("{:.2}", f(m) / f(b)))
        };
        let _ = writeln!(
            w,
            "| {name} | {} | {:.2} | {} | {} | {} | {:.2} | {:.0} | {} | {:.0} | {} |",
            m.objects.map_or("–".into(), thousands),
            m.ready_seconds,
            ratio(
                if name.ends_with("-protobuf") {
                    s.median(RAW_PROTOBUF)
                } else {
                    raw
                },
                |m| m.ready_seconds
            ),
            ratio(kr, |m| m.ready_seconds),
            m.listed_seconds.map_or("–".into(), |t| format!("{t:.2}")),
            m.cpu_seconds,
            m.rss_bytes as f64 / MB,
            ratio(kr, |m| m.rss_bytes as f64),
            m.peak_rss_bytes as f64 / MB,
            stripped.map_or("–".into(), |j| format!(
                "{:.2}",
                m.rss_bytes as f64 / j as f64
            )),
        );
    }
    let relists: Vec<&Measurement> = s
        .contenders()
        .into_iter()
        .filter_map(|c| s.median(c))
        .filter(|m| m.relist.is_some())
        .collect();
    if !relists.is_empty() {
        let _ = writeln!(
            w,
            "\nRelist forced after ready (a 410 on the next watch; the open watch ends within 5 s):\n"
        );
        let _ = writeln!(
            w,
            "| contender | objects after | steady RSS (MB) | relist peak (MB) | peak / steady | RSS after (MB) |"
        );
        let _ = writeln!(w, "|---|--:|--:|--:|--:|--:|");
        for m in relists {
            let Some(r) = &m.relist else { continue };
            let _ = writeln!(
                w,
                "| {} | {} | {:.0} | {:.0} | {:.2} | {:.0} |",
                m.contender,
                thousands(r.objects),
                r.steady_rss_bytes as f64 / MB,
                r.peak_rss_bytes as f64 / MB,
                r.peak_rss_bytes as f64 / r.steady_rss_bytes.max(1) as f64,
                r.after_rss_bytes as f64 / MB,
            );
        }
    }
}

/// The stripped JSON bytes, as the kubecache contenders report them (all
/// hold the same objects; the first one found is taken).
fn stripped_json(s: &Scenario) -> Option<u64> {
    KUBECACHE
        .iter()
        .chain(&["kubecache-parallel-relist"])
        .filter_map(|c| s.median(c))
        .find_map(|m| m.json_bytes)
}

fn render_targets(w: &mut String, scenarios: &[Scenario]) {
    let _ = writeln!(w, "\n## DESIGN.md targets\n");
    let _ = writeln!(
        w,
        "**RSS after the initial sync <= 1.5 x stripped JSON + 30 MB** (kube-runtime: about 8 x the JSON):\n"
    );
    for s in scenarios {
        let Some(json) = stripped_json(s) else {
            continue;
        };
        let limit = 1.5 * json as f64 + 30.0 * MB;
        for name in KUBECACHE {
            let Some(m) = s.median(name) else { continue };
            let rss = m.rss_bytes as f64;
            let _ = writeln!(
                w,
                "- {}, {name}: RSS {:.0} MB, limit {:.0} MB: {}",
                s.title(),
                rss / MB,
                limit / MB,
                verdict_at_most(rss, limit, "MB", MB)
            );
        }
        if let Some(kr) = s.median(KUBE_RUNTIME_LW) {
            let full = s.median(RAW).and_then(|r| r.json_bytes).unwrap_or(0).max(1);
            let _ = writeln!(
                w,
                "- {}, reference kube-runtime list-watch: RSS {:.0} MB = {:.1} x the full JSON \
                 ({:.1} x the stripped JSON)",
                s.title(),
                kr.rss_bytes as f64 / MB,
                kr.rss_bytes as f64 / full as f64,
                kr.rss_bytes as f64 / json as f64
            );
        }
    }
    let _ = writeln!(
        w,
        "\n**Time to ready, server-bound (slow pages or the serving cost) <= 1.2 x the raw paginated read**:\n"
    );
    for s in scenarios.iter().filter(|s| s.server_bound()) {
        let Some(raw) = s.median(RAW) else { continue };
        for name in KUBECACHE {
            let Some(m) = s.median(name) else { continue };
            let ratio = m.ready_seconds / raw.ready_seconds;
            let _ = writeln!(
                w,
                "- {}, {name}: {:.2} s = {ratio:.2} x raw ({:.2} s): {}",
                s.title(),
                m.ready_seconds,
                raw.ready_seconds,
                verdict_at_most(ratio, 1.2, "x", 1.0)
            );
        }
    }
    let _ = writeln!(
        w,
        "\n**Time to ready, client-bound (no page latency, no serving cost; the target is stated for 100k pods) >= 3 x faster than kube-runtime list-watch**:\n"
    );
    if scenarios.iter().all(|s| s.server_bound()) {
        let _ = writeln!(
            w,
            "- not measured: every scenario of this report is server-bound"
        );
    }
    for s in scenarios.iter().filter(|s| !s.server_bound()) {
        let Some(kr) = s.median(KUBE_RUNTIME_LW) else {
            continue;
        };
        for name in KUBECACHE {
            let Some(m) = s.median(name) else { continue };
            let speedup = kr.ready_seconds / m.ready_seconds;
            let _ = writeln!(
                w,
                "- {}, {name}: {:.2} s against {:.2} s = {speedup:.2} x faster: {}",
                s.title(),
                m.ready_seconds,
                kr.ready_seconds,
                verdict_at_least(speedup, 3.0)
            );
        }
    }
    let _ = writeln!(
        w,
        "\n**Peak RSS during a relist <= 1.3 x steady state** (kube-runtime: about 2 x):\n"
    );
    for s in scenarios {
        for name in ["kubecache-parallel-relist", "kube-runtime-listwatch-relist"] {
            let Some(r) = s.median(name).and_then(|m| m.relist.as_ref()) else {
                continue;
            };
            let ratio = r.peak_rss_bytes as f64 / r.steady_rss_bytes.max(1) as f64;
            let verdict = if name.starts_with("kubecache") {
                verdict_at_most(ratio, 1.3, "x", 1.0)
            } else {
                "reference".to_string()
            };
            let _ = writeln!(
                w,
                "- {}, {name}: {:.0} MB peak over {:.0} MB steady = {ratio:.2} x: {verdict}",
                s.title(),
                r.peak_rss_bytes as f64 / MB,
                r.steady_rss_bytes as f64 / MB,
            );
        }
    }
    let _ = writeln!(
        w,
        "\nNot measured by this harness: list longer than the compaction window (see the \
         reflector's integration tests), GET and index-query latency over HTTP, full list over \
         HTTP, watch fan-out, stalled watchers, minimum-resourceVersion reads, objects per replica."
    );
}

/// "met (…)" or "missed by …" for a value that must stay at or below `limit`.
fn verdict_at_most(value: f64, limit: f64, unit: &str, scale: f64) -> String {
    if value <= limit {
        format!(
            "**met** ({:.0} % headroom)",
            (limit - value) / limit * 100.0
        )
    } else {
        format!(
            "**missed** by {:.2} {unit} ({:.0} % over)",
            (value - limit) / scale,
            (value - limit) / limit * 100.0
        )
    }
}

/// Same for a value that must reach `target`.
fn verdict_at_least(value: f64, target: f64) -> String {
    if value >= target {
        format!("**met** ({value:.2} x against {target:.1} x)")
    } else {
        format!(
            "**missed** by {:.2} x ({:.0} % short)",
            target - value,
            (target - value) / target * 100.0
        )
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / MB)
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contender::RelistMeasurement;

    fn m(name: &str, ready: f64, rss_mb: f64, json_mb: Option<f64>) -> Measurement {
        Measurement {
            contender: name.into(),
            objects: Some(10_000),
            ready_seconds: ready,
            listed_seconds: None,
            rss_bytes: (rss_mb * MB) as u64,
            peak_rss_bytes: (rss_mb * MB) as u64,
            cpu_seconds: 1.0,
            json_bytes: json_mb.map(|j| (j * MB) as u64),
            relist: None,
        }
    }

    #[test]
    fn the_report_states_ratios_and_which_targets_are_met_or_missed() {
        let mut s = Scenario::new(10_000, 20, false);
        s.measurements = vec![
            m(RAW, 1.0, 20.0, Some(70.0)),
            m(KUBE_RUNTIME_LW, 4.0, 400.0, None),
            m("kubecache-parallel", 1.1, 60.0, Some(40.0)),
            m("kubecache-streaming", 1.5, 100.0, Some(40.0)),
        ];
        let mut relist = m("kubecache-parallel-relist", 1.1, 60.0, Some(40.0));
        relist.relist = Some(RelistMeasurement {
            steady_rss_bytes: 60_000_000,
            peak_rss_bytes: 90_000_000,
            after_rss_bytes: 61_000_000,
            objects: 10_000,
        });
        s.measurements.push(relist);
        let mut report = Report::default();
        report.add_run("test".into(), String::new());
        report.put(s);
        let text = report.render();
        assert!(
            text.contains("| kubecache-parallel | 10,000 | 1.10 | 1.10 | 0.28 |"),
            "{text}"
        );
        // limit = 1.5 x 40 + 30 = 90 MB
        assert!(
            text.contains("kubecache-parallel: RSS 60 MB, limit 90 MB: **met**"),
            "{text}"
        );
        assert!(
            text.contains("kubecache-streaming: RSS 100 MB, limit 90 MB: **missed** by 10.00 MB"),
            "{text}"
        );
        assert!(
            text.contains("kubecache-parallel: 1.10 s = 1.10 x raw (1.00 s): **met**"),
            "{text}"
        );
        assert!(
            text.contains(
                "kubecache-streaming: 1.50 s = 1.50 x raw (1.00 s): **missed** by 0.30 x"
            ),
            "{text}"
        );
        assert!(text.contains("= 1.50 x: **missed** by 0.20 x"), "{text}");
    }

    #[test]
    fn a_serving_cost_scenario_is_judged_against_the_raw_read_not_kube_runtime() {
        let mut s = Scenario::new(10_000, 0, true);
        s.measurements = vec![
            m(RAW, 2.0, 20.0, Some(70.0)),
            m(KUBE_RUNTIME_LW, 3.0, 400.0, None),
            m("kubecache-parallel", 2.2, 60.0, Some(40.0)),
        ];
        let mut report = Report::default();
        report.add_run("test".into(), String::new());
        report.put(s);
        let text = report.render();
        assert!(
            text.contains(
                "serving cost, kubecache-parallel: 2.20 s = 1.10 x raw (2.00 s): **met**"
            ),
            "{text}"
        );
        assert!(
            text.contains("- not measured: every scenario of this report is server-bound"),
            "{text}"
        );
        assert!(!text.contains("x faster:"), "{text}");
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
