//! The API server's current resourceVersion, for the consistent reads of
//! every resource.
//!
//! A consistent read may only trust a resourceVersion `R` learnt by a
//! request *sent after the read arrived*: an answer to a request sent
//! earlier could predate writes the read must see. The revision is global
//! (one etcd revision for every resource), so one answer serves the reads
//! of every cached resource alike.
//!
//! The clock is pipelined: a read that arrives when no request has been
//! sent since starts one at once if fewer than `max_in_flight` are in
//! flight, else it takes the next slot that frees; every read waiting when
//! a request is sent shares its answer. Under load a read thus waits about
//! one round trip, and throughput is not bounded by one batch per round
//! trip.
//!
//! The request is a `limit=1` list of one cached resource: its
//! `metadata.resourceVersion` is the API server's current revision (a list
//! without resourceVersion is read from etcd, by quorum). The resource asked
//! is the cheapest: one without label or field selector (the API server
//! would filter through objects to fill the page), then the one with the
//! fewest objects (etcd counts the remaining keys of the range it reads).
//! A resource answering 403 or 404 (kubecache may list it only in some
//! namespaces, or it went away) is tried last from then on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use kubecache_reflector::StoreReader;
use kubecache_reflector::upstream::{Query, Upstream, UpstreamError};
use kubecache_wire::Status;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// An answer: the API server's current resourceVersion.
type Answer = Result<u64, Status>;

/// The API server's current resourceVersion, learnt after each ask.
#[derive(Debug)]
pub(crate) struct Clock {
    asks: mpsc::UnboundedSender<oneshot::Sender<Answer>>,
}

/// A resource the clock may list.
pub(crate) struct Source {
    upstream: Upstream,
    reader: StoreReader,
    /// It answered 403 or 404.
    refused: AtomicBool,
}

impl Source {
    /// Lists `upstream`, whose store is `reader`.
    pub(crate) fn new(upstream: Upstream, reader: StoreReader) -> Self {
        Source {
            upstream,
            reader,
            refused: AtomicBool::new(false),
        }
    }

    /// Lower is cheaper (see the module doc).
    fn cost(&self) -> (bool, bool, usize) {
        let spec = self.upstream.spec();
        let filtered = spec.label_selector.is_some() || spec.field_selector.is_some();
        (
            self.refused.load(Ordering::Relaxed),
            filtered,
            self.reader.snapshot().len(),
        )
    }
}

impl Clock {
    /// Asks through `sources`, at most `max_in_flight` requests at once.
    /// Spawns the request loop; it ends when the clock is dropped.
    pub(crate) fn start(sources: Vec<Source>, max_in_flight: usize) -> Self {
        let (asks, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(sources.into(), max_in_flight.max(1), rx));
        Clock { asks }
    }

    /// The API server's resourceVersion, from a request sent after this
    /// call.
    ///
    /// # Errors
    ///
    /// 504 when the API server cannot be asked or does not answer by
    /// `deadline`.
    pub(crate) async fn now(&self, deadline: Instant) -> Answer {
        let (tx, rx) = oneshot::channel();
        if self.asks.send(tx).is_err() {
            return Err(unavailable("the request loop has stopped"));
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(unavailable("the request loop has stopped")),
            Err(_) => Err(unavailable("the API server did not answer in time")),
        }
    }
}

/// The request loop: sends a request for the reads waiting whenever a slot
/// is free, and answers them.
async fn run(
    sources: Arc<[Source]>,
    max_in_flight: usize,
    mut asks: mpsc::UnboundedReceiver<oneshot::Sender<Answer>>,
) {
    let mut waiting = Vec::new();
    let mut in_flight =
        FuturesUnordered::<BoxFuture<'static, (Vec<oneshot::Sender<Answer>>, Answer)>>::new();
    loop {
        tokio::select! {
            ask = asks.recv() => match ask {
                Some(ask) => waiting.push(ask),
                None => return,
            },
            Some((readers, answer)) = in_flight.next() => {
                for reader in readers {
                    let _ = reader.send(answer.clone());
                }
            }
        }
        while let Ok(ask) = asks.try_recv() {
            waiting.push(ask);
        }
        if !waiting.is_empty() && in_flight.len() < max_in_flight {
            let readers = std::mem::take(&mut waiting);
            let sources = sources.clone();
            in_flight.push(Box::pin(async move { (readers, current(&sources).await) }));
        }
    }
}

/// One `limit=1` list of the cheapest source that does not refuse it.
async fn current(sources: &[Source]) -> Answer {
    let mut order: Vec<&Source> = sources.iter().collect();
    order.sort_by_cached_key(|s| s.cost());
    let mut refusal = None;
    for source in order {
        metrics::counter!("kubecache_freshness_requests_total", "kind" => "current").increment(1);
        let query = Query {
            limit: Some(1),
            ..Query::default()
        };
        match source.upstream.list(&query).await {
            Ok(body) => {
                return body
                    .page()
                    .map(|page| page.resource_version)
                    .map_err(|e| unavailable(&format!("its list could not be read: {e}")));
            }
            Err(
                e @ UpstreamError::Client {
                    code: 403 | 404, ..
                },
            ) => {
                source.refused.store(true, Ordering::Relaxed);
                refusal = Some(e);
            }
            Err(e) => return Err(unavailable(&e.to_string())),
        }
    }
    Err(unavailable(&refusal.map_or_else(
        || "no resource is cached".to_string(),
        |e| e.to_string(),
    )))
}

/// 504 for a consistent read that could not learn the API server's state.
pub(crate) fn unavailable(why: &str) -> Status {
    Status::failure(
        504,
        "Timeout",
        format!(
            "a consistent read needs the API server's current resourceVersion, and {why}; retry, or read with resourceVersion=0 to accept the cache's current state"
        ),
    )
}
