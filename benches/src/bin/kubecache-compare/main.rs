//! `kubecache-compare`: kubecache's reflector side by side with
//! kube-runtime's and with a raw paginated read, one process per contender
//! against one simulated API server, written up as `benches/RESULTS.md`.
//!
//! - `kubecache-compare run --pods 10000,50000 --page-latency-ms 0,20 --out benches/RESULTS.md`
//!   starts `kubecache-loadtest sim` per scenario and every contender in turn.
//! - `kubecache-compare contender NAME --server URL` runs one contender and
//!   prints its measurement as one JSON line (what `run` starts).

mod contender;
mod orchestrate;
mod report;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "kubecache against kube-runtime and the raw read floor, one process each")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs every scenario (pods x page latency) and writes the report.
    Run(orchestrate::RunArgs),
    /// Runs one contender and prints its measurement as a JSON line.
    Contender {
        /// One of: raw, raw-protobuf, kube-runtime-listwatch,
        /// kube-runtime-streaming, kube-runtime-listwatch-relist, or
        /// kubecache-{strategy}[-protobuf][-relist] (e.g. kubecache-parallel,
        /// kubecache-sharded-protobuf, kubecache-parallel-relist).
        name: String,
        /// Base URL of the API server.
        #[arg(long)]
        server: String,
        /// Pause between ready and reading the resident size, in ms.
        #[arg(long, default_value_t = 1000)]
        settle_ms: u64,
    },
    /// Writes the report again from the JSON a run left beside it.
    Report {
        /// The report to write; its data is read from the same path with
        /// the extension `.json`.
        #[arg(long, default_value_os_t = default_out())]
        out: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Run(args) => orchestrate::run(&args),
        Command::Report { out } => orchestrate::rewrite(&out),
        Command::Contender {
            name,
            server,
            settle_ms,
        } => {
            // Two worker threads: the machine has two cores, and every
            // contender gets the same runtime.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            let m = runtime.block_on(contender::run(
                &name,
                &server,
                Duration::from_millis(settle_ms),
            ))?;
            println!("{}", serde_json::to_string(&m)?);
            // Do not wait for the dropped watch tasks to wind down.
            runtime.shutdown_timeout(Duration::from_millis(100));
            Ok(())
        }
    }
}

/// The default report path, relative to the workspace.
fn default_out() -> PathBuf {
    PathBuf::from("benches/RESULTS.md")
}
