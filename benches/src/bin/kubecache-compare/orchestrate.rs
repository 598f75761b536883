//! `kubecache-compare run`: per scenario (pods x page latency) one
//! simulated API server in its own process, and every contender in its own
//! process after the other against it, so that each resident size is the
//! contender's alone.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::contender::{ALL, Measurement};
use crate::report::{Report, Scenario};

/// Options of `kubecache-compare run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Pod counts, one scenario each.
    #[arg(long, value_delimiter = ',', default_value = "10000,50000")]
    pods: Vec<usize>,
    /// Page latencies in ms (slow etcd), one scenario each per pod count.
    #[arg(long, value_delimiter = ',', default_value = "0,20")]
    page_latency_ms: Vec<u64>,
    /// Contenders to run (default: all).
    #[arg(long, value_delimiter = ',')]
    contenders: Vec<String>,
    /// Runs of each contender per scenario; the report shows the median.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Where to write the report.
    #[arg(long, default_value_os_t = crate::default_out())]
    out: PathBuf,
    /// The `kubecache-loadtest` binary (default: next to this one).
    #[arg(long)]
    loadtest_bin: Option<PathBuf>,
    /// A note on the conditions, printed at the top of the report.
    #[arg(long, default_value = "")]
    note: String,
    /// Run the simulated API server with `--serving-cost` (a real server's
    /// throughput per encoding and path).
    #[arg(long)]
    serving_cost: bool,
    /// Keep the scenarios of earlier runs (from the JSON beside `--out`)
    /// that this run does not measure again.
    #[arg(long)]
    keep_previous: bool,
}

/// Runs every scenario and writes the report.
pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    let me = std::env::current_exe().context("locating this binary")?;
    let loadtest = match &args.loadtest_bin {
        Some(path) => path.clone(),
        None => me.with_file_name("kubecache-loadtest"),
    };
    if !loadtest.exists() {
        bail!(
            "{} not found: build it (cargo build --release -p kubecache-loadtest) or pass --loadtest-bin",
            loadtest.display()
        );
    }
    let contenders: Vec<String> = if args.contenders.is_empty() {
        ALL.iter().map(|s| s.to_string()).collect()
    } else {
        args.contenders.clone()
    };
    let json = args.out.with_extension("json");
    let mut report = if args.keep_previous && json.exists() {
        read(&json)?
    } else {
        Report::default()
    };
    report.add_run(
        std::env::args().collect::<Vec<_>>().join(" "),
        args.note.clone(),
    );
    for &pods in &args.pods {
        for &latency in &args.page_latency_ms {
            eprintln!("== {pods} pods, page latency {latency} ms");
            let sim = SimProcess::start(&loadtest, pods, latency, args.serving_cost)?;
            let mut scenario = Scenario::new(pods, latency, args.serving_cost);
            for name in &contenders {
                for round in 0..args.repeat {
                    // Let the server drop the last contender's connections.
                    std::thread::sleep(Duration::from_secs(1));
                    let m = run_contender(&me, name, &sim.url)
                        .with_context(|| format!("contender {name}, {pods} pods, {latency} ms"))?;
                    eprintln!("   {name} #{round}: {}", serde_json::to_string(&m)?);
                    scenario.measurements.push(m);
                }
            }
            drop(sim);
            report.put(scenario);
            // Written after every scenario: a long run that fails late keeps
            // what it measured.
            write(&args.out, &report.render())?;
            write(&json, &serde_json::to_string_pretty(&report)?)?;
        }
    }
    eprintln!("report written to {}", args.out.display());
    Ok(())
}

/// Renders the report at `out` again from the JSON beside it.
pub fn rewrite(out: &Path) -> anyhow::Result<()> {
    let report = read(&out.with_extension("json"))?;
    write(out, &report.render())
}

fn read(json: &Path) -> anyhow::Result<Report> {
    let text =
        std::fs::read_to_string(json).with_context(|| format!("reading {}", json.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", json.display()))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// `kubecache-loadtest sim` as a child process; killed when dropped.
struct SimProcess {
    child: Child,
    url: String,
}

impl SimProcess {
    fn start(
        loadtest: &Path,
        pods: usize,
        latency_ms: u64,
        serving_cost: bool,
    ) -> anyhow::Result<Self> {
        let log =
            std::env::temp_dir().join(format!("kubecache-compare-sim-{pods}-{latency_ms}.log"));
        let mut child = Command::new(loadtest)
            .args(["sim", "--listen", "127.0.0.1:0"])
            .args(["--pods", &pods.to_string()])
            .args(["--page-latency-ms", &latency_ms.to_string()])
            .args(serving_cost.then_some("--serving-cost"))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).context("creating the sim log")?)
            .spawn()
            .with_context(|| format!("starting {}", loadtest.display()))?;
        let stdout = child.stdout.take().context("the sim's stdout")?;
        // The URL is the first line on stdout, printed once the sim is filled.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let started = Instant::now();
        let url = match rx.recv_timeout(Duration::from_secs(600)) {
            Ok(line) if line.starts_with("http://") => line.trim().to_string(),
            other => {
                let _ = child.kill();
                bail!(
                    "the sim did not print its URL ({other:?}); see {}",
                    log.display()
                );
            }
        };
        eprintln!(
            "   sim at {url}, filled in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(SimProcess { child, url })
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `kubecache-compare contender NAME` and reads its JSON line.
fn run_contender(me: &Path, name: &str, url: &str) -> anyhow::Result<Measurement> {
    let mut child = Command::new(me)
        .args(["contender", name, "--server", url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the contender")?;
    let stdout = child.stdout.take().context("the contender's stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            out = line;
        }
        let _ = tx.send(out);
    });
    let deadline = Duration::from_secs(900);
    let line = match rx.recv_timeout(deadline) {
        Ok(line) => line,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("no result within {} s", deadline.as_secs());
        }
    };
    let status = child.wait()?;
    if !status.success() {
        bail!("exited with {status}");
    }
    serde_json::from_str(&line).with_context(|| format!("parsing its output {line:?}"))
}
