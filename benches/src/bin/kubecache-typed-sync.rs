//! `kubecache-typed-sync`: the initial list of an informer, as a typed
//! client does it, timed. Pages of `resourceVersion=0&limit=500` (what
//! client-go's reflector asks first; the API server answers `0` from its
//! watch cache in one piece, kubecache honours the limit), each body decoded
//! into typed objects: protobuf into `k8s-pb`'s prost messages (what a Go
//! client's generated types are), JSON into `k8s-openapi`'s structs. Prints
//! one JSON line: objects, pages, bytes, seconds.
//!
//! `benches/run-protobuf-sync` runs it against the simulated API server and
//! kubecache in front of it, in the same run.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use k8s_openapi::api::core::v1::Pod;
use kubecache_wire::protobuf;
use prost::Message;

#[derive(Clone, Copy, ValueEnum)]
enum Encoding {
    Protobuf,
    Json,
}

#[derive(Parser)]
#[command(about = "An informer's initial list of pods, decoded into typed objects, timed")]
struct Args {
    /// Base URL of the API server or kubecache.
    #[arg(long)]
    server: String,
    /// What to ask for.
    #[arg(long, value_enum, default_value_t = Encoding::Protobuf)]
    encoding: Encoding,
    /// Objects per page.
    #[arg(long, default_value_t = 500)]
    limit: usize,
    /// A label for the output line.
    #[arg(long, default_value = "")]
    label: String,
}

/// One page decoded: its objects and its continue token.
fn decode(encoding: Encoding, body: &[u8]) -> anyhow::Result<(usize, Option<String>)> {
    match encoding {
        Encoding::Protobuf => {
            let unknown = protobuf::decode_unknown(body)?;
            let list = k8s_pb::api::core::v1::PodList::decode(unknown.raw)?;
            let token = list.metadata.and_then(|m| m.r#continue);
            Ok((list.items.len(), token.filter(|t| !t.is_empty())))
        }
        Encoding::Json => {
            let list: k8s_openapi::List<Pod> = serde_json::from_slice(body)?;
            Ok((list.items.len(), list.metadata.continue_))
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let accept = match args.encoding {
        Encoding::Protobuf => "application/vnd.kubernetes.protobuf",
        Encoding::Json => "application/json",
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()?;
    let started = Instant::now();
    let (mut objects, mut pages, mut bytes) = (0usize, 0usize, 0usize);
    let mut next: Option<String> = None;
    loop {
        let url = format!("{}/api/v1/pods", args.server);
        let limit = args.limit.to_string();
        let query: &[(&str, &str)] = match &next {
            None => &[("resourceVersion", "0"), ("limit", &limit)],
            Some(token) => &[("limit", &limit), ("continue", token)],
        };
        let response = client
            .get(&url)
            .query(query)
            .header("Accept", accept)
            .send()
            .await
            .with_context(|| format!("GET {url}"))?;
        if !response.status().is_success() {
            bail!("GET {url}: {}", response.status());
        }
        let body = response.bytes().await?;
        let (n, token) = decode(args.encoding, &body).with_context(|| format!("decoding {url}"))?;
        objects += n;
        pages += 1;
        bytes += body.len();
        next = token;
        if next.is_none() {
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "label": args.label,
            "encoding": accept,
            "objects": objects,
            "pages": pages,
            "bytes": bytes,
            "seconds": seconds,
        })
    );
    Ok(())
}
