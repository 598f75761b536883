//! The API server's current resourceVersion, for the consistent reads of
//! every resource.
//!
//! A consistent read may only trust a resourceVersion `R` learnt by a
//! request *sent after the read arrived*: an answer to a request sent
//! earlier could predate writes the read must see. The revision is global
//! (one etcd revision for every resource), so one answer serves the reads
//! of every cached resource alike.
//!
//! The clock is a [`Pipeline`]: a read that arrives when no request has
//! been sent since starts one at once if fewer than `max_in_flight` are in
//! flight, else it takes the next slot that frees; every read waiting when
//! a request is sent shares its answer.
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

use futures::FutureExt;
use kubecache_reflector::StoreReader;
use kubecache_reflector::upstream::{Query, Upstream, UpstreamError};
use kubecache_wire::Status;
use tokio::time::Instant;

use super::pipeline::{Pipeline, Request};

/// An answer: the API server's current resourceVersion.
type Answer = Result<u64, Status>;

/// The API server's current resourceVersion, learnt after each ask.
pub(crate) struct Clock {
    pipeline: Arc<Pipeline<(), Answer>>,
    request: Request<Answer>,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
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
    pub(crate) fn new(sources: Vec<Source>, max_in_flight: usize) -> Self {
        let sources: Arc<[Source]> = sources.into();
        Clock {
            pipeline: Pipeline::new(max_in_flight),
            request: Arc::new(move || {
                let sources = sources.clone();
                async move { current(&sources).await }.boxed()
            }),
        }
    }

    /// The API server's resourceVersion, from a request sent after this
    /// call.
    ///
    /// # Errors
    ///
    /// 504 when the API server cannot be asked or does not answer by
    /// `deadline`.
    pub(crate) async fn now(&self, deadline: Instant) -> Answer {
        let asked = self.pipeline.ask((), self.request.clone());
        match tokio::time::timeout_at(deadline, asked).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(unavailable("its request ended")),
            Err(_) => Err(unavailable("the API server did not answer in time")),
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::SeqCst;
    use std::time::Duration;

    use super::*;
    use crate::cacher::fake_api::FakeApi;

    fn clock(api: &Arc<FakeApi>, plurals: &[&str], max_in_flight: usize) -> Arc<Clock> {
        let sources = plurals
            .iter()
            .map(|p| {
                Source::new(
                    api.upstream(p),
                    kubecache_reflector::store(Default::default()).1,
                )
            })
            .collect();
        Arc::new(Clock::new(sources, max_in_flight))
    }

    /// Reads arriving 10 ms apart, each after a write: the revision when
    /// each arrives is its index. Their answers, in order.
    async fn reads(api: &Arc<FakeApi>, clock: &Arc<Clock>, n: u64, then: u64) -> Vec<u64> {
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut reads = Vec::new();
        for i in 1..=n {
            api.revision.store(i, SeqCst);
            let clock = clock.clone();
            reads.push(tokio::spawn(async move { clock.now(deadline).await }));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        api.revision.store(then, SeqCst);
        let mut answers = Vec::new();
        for read in reads {
            answers.push(read.await.unwrap().unwrap());
        }
        answers
    }

    #[tokio::test(start_paused = true)]
    async fn reads_arriving_while_requests_are_in_flight_send_their_own_up_to_the_cap() {
        let api = Arc::new(FakeApi {
            latency: Duration::from_millis(50),
            ..FakeApi::default()
        });
        let clock = clock(&api, &["pods"], 2);
        // The first two are sent at once; the third when the first is back
        // (at 50 ms), after the revision moved to 9 (at 30 ms).
        assert_eq!(reads(&api, &clock, 3, 9).await, [1, 2, 9]);
        assert_eq!(api.count("limit=1"), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn every_read_waiting_when_a_request_is_sent_shares_it() {
        let api = Arc::new(FakeApi {
            latency: Duration::from_millis(50),
            ..FakeApi::default()
        });
        let clock = clock(&api, &["pods"], 1);
        assert_eq!(reads(&api, &clock, 4, 9).await, [1, 9, 9, 9]);
        assert_eq!(api.count("limit=1"), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_resource_that_refuses_is_asked_last_from_then_on() {
        let api = Arc::new(FakeApi {
            forbidden: vec!["/api/v1/pods".into()],
            ..FakeApi::default()
        });
        let clock = clock(&api, &["pods", "configmaps"], 1);
        let deadline = Instant::now() + Duration::from_secs(3);
        api.revision.store(7, SeqCst);
        assert_eq!(clock.now(deadline).await.unwrap(), 7);
        assert_eq!(clock.now(deadline).await.unwrap(), 7);
        assert_eq!(api.count("/api/v1/pods?"), 1);
        assert_eq!(api.count("/api/v1/configmaps?"), 2);
    }
}
