//! A horizontally scaled controller with kube-rs: N replicas, each
//! reconciling only the pods of its shard (an equal range of the hash of
//! their uid), each listing and watching only its range through kubecache
//! with `shardSelector` (KEP-5866). See README.md beside this file.
//!
//! kube-rs 5 has no shard selector in its list and watch parameters yet,
//! so a tower layer adds `shardSelector` to every request of a replica's
//! client: the controller's lists (every page) and watches.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::Parser;
use futures::StreamExt;
use http::{Request, Uri};
use k8s_openapi::api::core::v1::Pod;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use kubecache_wire::{ShardField, ShardSelector};

/// A sharded pod controller through kubecache.
#[derive(Parser)]
struct Args {
    /// Kubeconfig of kubecache (the `--simulate` demo writes one and logs
    /// where).
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Its context (default: the current one).
    #[arg(long)]
    context: Option<String>,
    /// Shards, one replica each.
    #[arg(long, default_value_t = 3)]
    shards: usize,
    /// Run only this replica (from 0), as one pod of a StatefulSet would;
    /// without it, every replica runs in this process.
    #[arg(long)]
    shard: Option<usize>,
    /// Stop after this many seconds (0: at Ctrl-C).
    #[arg(long, default_value_t = 0)]
    duration_secs: u64,
}

/// One replica's state, shared with its reconciler.
struct Replica {
    index: usize,
    selector: ShardSelector,
    /// Pods reconciled.
    reconciled: AtomicU64,
    /// Pods outside the shard the server sent anyway (an API server that
    /// ignores `shardSelector`), left to their own replica.
    skipped: AtomicU64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.shards > 0, "--shards: at least one");
    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig)?;
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?;
    let selectors = ShardSelector::equal_split(ShardField::Uid, args.shards);
    let replicas = selectors
        .into_iter()
        .enumerate()
        .filter(|(index, _)| args.shard.is_none_or(|shard| shard == *index))
        .map(|(index, selector)| run(config.clone(), index, selector));
    let all = futures::future::try_join_all(replicas);
    let stop = async {
        match args.duration_secs {
            0 => tokio::signal::ctrl_c().await.map_err(Into::into),
            secs => {
                tokio::time::sleep(Duration::from_secs(secs)).await;
                Ok(())
            }
        }
    };
    tokio::select! {
        result = all => result.map(drop),
        result = stop => result,
    }
}

/// Runs replica `index` of the shard `selector` until its controller ends,
/// saying every 5 s what it holds.
async fn run(config: kube::Config, index: usize, selector: ShardSelector) -> anyhow::Result<()> {
    let client = sharded_client(config, &selector.to_string())?;
    let sharded = server_shards(&client).await?;
    println!(
        "replica {index}: {selector}, filtered by {}",
        if sharded {
            "the server"
        } else {
            "this replica (the server ignored shardSelector)"
        }
    );
    let replica = Arc::new(Replica {
        index,
        selector,
        reconciled: AtomicU64::new(0),
        skipped: AtomicU64::new(0),
    });
    let controller = Controller::new(Api::<Pod>::all(client), watcher::Config::default());
    let store = controller.store();
    let running = controller
        .run(reconcile, error_policy, replica.clone())
        .for_each(|result| async move {
            match result {
                // A pod deleted before its turn came.
                Ok(_) | Err(controller::Error::ObjectNotFound(_)) => {}
                Err(e) => eprintln!("replica {index}: {e}"),
            }
        });
    tokio::pin!(running);
    let mut every = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            () = &mut running => return Ok(()),
            _ = every.tick() => report(&replica, &store),
        }
    }
}

fn report(replica: &Replica, store: &Store<Pod>) {
    println!(
        "replica {}: {} pods in its store, {} reconciled, {} outside its shard skipped",
        replica.index,
        store.state().len(),
        replica.reconciled.load(Ordering::Relaxed),
        replica.skipped.load(Ordering::Relaxed)
    );
}

/// What a real controller would do with its pod; here, counting it.
async fn reconcile(pod: Arc<Pod>, replica: Arc<Replica>) -> Result<Action, kube::Error> {
    let (uid, namespace) = (pod.uid().unwrap_or_default(), pod.namespace());
    if replica
        .selector
        .matches(&uid, namespace.as_deref().unwrap_or_default())
    {
        replica.reconciled.fetch_add(1, Ordering::Relaxed);
    } else {
        replica.skipped.fetch_add(1, Ordering::Relaxed);
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Pod>, _: &kube::Error, _: Arc<Replica>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

/// A client that sends `selector` as `shardSelector` with every request.
fn sharded_client(config: kube::Config, selector: &str) -> anyhow::Result<Client> {
    let parameter = form_urlencoded::Serializer::new(String::new())
        .append_pair("shardSelector", selector)
        .finish();
    let layer =
        tower::util::MapRequestLayer::new(move |mut request: Request<kube::client::Body>| {
            let uri = request.uri();
            let query = match uri.query() {
                Some(query) => format!("{}?{query}&{parameter}", uri.path()),
                None => format!("{}?{parameter}", uri.path()),
            };
            let mut parts = uri.clone().into_parts();
            parts.path_and_query = Some(query.parse().expect("a query of encoded pairs"));
            *request.uri_mut() = Uri::from_parts(parts).expect("the same URI, one more pair");
            request
        });
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build())
}

/// Whether the server shards: a list answered under a shard selector
/// echoes it in `metadata.shardInfo`; an API server without the
/// `ShardedListAndWatch` gate ignores the parameter and sends everything.
async fn server_shards(client: &Client) -> anyhow::Result<bool> {
    let request = Request::get("/api/v1/pods?limit=1").body(Vec::new())?;
    let list: serde_json::Value = client.request(request).await?;
    Ok(list["metadata"]["shardInfo"]["selector"].is_string())
}
