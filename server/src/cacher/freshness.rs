//! Consistent reads: waiting until the store holds every change up to a
//! resourceVersion, proving it when other resources moved the revision.
//!
//! # How a read becomes consistent
//!
//! A read with no resourceVersion must see every write the API server had
//! accepted when the read arrived. It learns the API server's current
//! resourceVersion `R` from the shared [`Clock`] (a request sent after the
//! read arrived), then waits until the store is complete through `R`.
//!
//! `R` is the API server's *global* revision: writes to other resources move
//! it too, and the store only moves with events of its own resource (and
//! with the reflector's bookmarks, about once a minute). The store at `S <
//! R` then needs a proof that its resource has no change in `(S, R]`.
//!
//! # Probes
//!
//! A probe is a short watch from the resourceVersion `S` the store is
//! complete through, read until its first bookmark at `B`. The API server
//! sends every change of the watched resource in `(S, B]` before that
//! bookmark (events and bookmarks leave kube-apiserver's cacher in revision
//! order, and a bookmark carries the revision the cacher has processed). So
//! if the probe saw no event, the resource has no change in `(S, B]` and
//! the store is complete through `B` at once; if its last event was at `L`,
//! the store is complete through `B` once it has itself reached `L` (its
//! own watch delivers the same changes). Proven resourceVersions are kept
//! (later reads up to them need no probe) and wake the waiting reads.
//!
//! kube-apiserver sends a watch's bookmark 2 s before its deadline (not at
//! all if that moment is not after the watch starts), else about once a
//! minute (`nextBookmarkTime` in `cacher/cacher.go`); a probe of
//! `timeoutSeconds=3` gets it about 1 s in. So while reads of the resource
//! wait for a proof (consistent lists, `NotOlderThan`), or waited within
//! [`KEEP_WARM`], a probe starts every `probe_interval`
//! (staggered), each closed after its bookmark, at most [`max_probes`] at
//! once: against a server that honours each watch's own bookmark time, a
//! bookmark then comes every `probe_interval`, and a waiting read is proven
//! by the first one sent after the API server reached its `R`; against
//! kube-apiserver, by the first tick of its bookmark timer after that.
//!
//! # GETs of one object
//!
//! kube-apiserver dispatches due bookmarks on a timer of 1–1.25 s
//! (`dispatchEvents` in `cacher/cacher.go`, every version), so a read that
//! needs a proof waits about half a second on average however often probes
//! start. A consistent GET of one object need not: [`Freshness::consistent_or`]
//! takes a `fetch` (the object read from the API server by a request sent
//! after the read arrived, shared by every read of it waiting when it is
//! sent; see [`super::fetch`]), consistent by construction, whenever the
//! store is not complete through `R`. Such a GET starts no probe: against a
//! real v1.28.4, one client reading a quiet pod had a p99 of 44 ms while
//! each read kept probes coming (a watch, so a TLS handshake, every
//! `probe_interval`), 5.8 ms without them.
//!
//! Learning `R` first and then fetching would cost two round trips, twice
//! the API server's own latency. So when the `R` learnt last found the
//! store behind too (a quiet resource: other resources move `R`, its store
//! stays where its own last change left it), the fetch is sent at once,
//! without asking the clock. Its answer carries the API server's
//! resourceVersion too, learnt as the clock's: a resource whose store
//! keeps up (its own changes move `R`) goes back to the clock's answer
//! alone, and sends no fetch. A consistent list is never fetched (its
//! answer may be huge): it waits for the next proof.
//!
//! One read at a time cannot go faster than this through any cache: each
//! needs one round trip to the API server sent after it arrived (the
//! clock's or the fetch's), which costs about what the client's own GET
//! would, and kubecache's hop comes on top. Concurrent reads share those
//! round trips (see [`super::pipeline`]).
//!
//! The cost of probes: while reads wait, about one watch opened per
//! `probe_interval` per resource, and each open probe receives its
//! resource's events until its bookmark (about ten probes: ten times the
//! resource's event rate). A probe is not ended early when it sees events,
//! although its resource moves by itself: the store's own events end a
//! read's wait only if more come, and a writer waiting for its read sends
//! none.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use kubecache_reflector::StoreReader;
use kubecache_reflector::upstream::{Query, Upstream};
use kubecache_wire::{Status, WatchEventType};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

use super::clock::{Clock, Source, unavailable};
use super::fetch::Fetched;

/// `timeoutSeconds` of a probe watch: the shortest for which kube-apiserver
/// sends a bookmark before closing (2 s before the timeout).
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long after the last read that waited for a proof probes keep
/// coming: a resource read now and then stays warm.
pub(crate) const KEEP_WARM: Duration = Duration::from_secs(2);

/// Most probes of one resource at once: one starts every `interval`, and
/// each ends by its bookmark (about 1 s in on kube-apiserver) or by its
/// [`PROBE_TIMEOUT`] at the latest.
pub(crate) fn max_probes(interval: Duration) -> usize {
    let interval = interval.max(Duration::from_millis(1));
    PROBE_TIMEOUT.as_nanos().div_ceil(interval.as_nanos()) as usize
}

/// Consistent reads of one store.
pub(crate) struct Freshness {
    shared: Arc<Shared>,
    /// When a read last arrived or ended waiting (`None`: never); wakes
    /// the probe cadence.
    demand: watch::Sender<Option<Instant>>,
}

struct Shared {
    reader: StoreReader,
    upstream: Upstream,
    /// The store is complete through this resourceVersion, as probes have
    /// proven beyond its own.
    proven: watch::Sender<u64>,
    /// Reads waiting for a proof now.
    waiting: AtomicUsize,
    /// The API server's newest resourceVersion learnt so far.
    learnt: AtomicU64,
    /// Whether the store was not complete through the resourceVersion
    /// learnt last.
    behind: AtomicBool,
}

impl Shared {
    fn complete_through(&self) -> u64 {
        self.reader
            .current_resource_version()
            .max(*self.proven.borrow())
    }

    /// The API server was at `current` after a read arrived: whether the
    /// store is complete through it.
    fn learn(&self, current: u64) -> bool {
        self.learnt.fetch_max(current, Ordering::AcqRel);
        let complete = self.complete_through() >= current;
        self.behind.store(!complete, Ordering::Release);
        complete
    }
}

impl Freshness {
    /// Serves consistent reads of `reader`, probing `upstream` every
    /// `probe_interval` while reads wait. Spawns the probe cadence; it ends
    /// when this is dropped.
    pub(crate) fn new(upstream: Upstream, reader: StoreReader, probe_interval: Duration) -> Self {
        let shared = Arc::new(Shared {
            reader,
            upstream,
            proven: watch::Sender::new(0),
            waiting: AtomicUsize::new(0),
            learnt: AtomicU64::new(0),
            // Until the API server's revision is learnt, the store may be.
            behind: AtomicBool::new(true),
        });
        let (demand, idle) = watch::channel(None);
        tokio::spawn(cadence(shared.clone(), idle, probe_interval));
        Freshness { shared, demand }
    }

    /// What the [`Clock`] may list to learn the API server's revision.
    pub(crate) fn source(&self) -> Source {
        Source::new(self.shared.upstream.clone(), self.shared.reader.clone())
    }

    /// The newest resourceVersion up to which the store is known to hold
    /// every change.
    pub(crate) fn complete_through(&self) -> u64 {
        self.shared.complete_through()
    }

    /// How far the store is behind the API server's resourceVersion last
    /// learnt by a consistent read (0 when caught up, or never asked).
    pub(crate) fn lag(&self) -> u64 {
        self.shared
            .learnt
            .load(Ordering::Acquire)
            .saturating_sub(self.complete_through())
    }

    /// Waits until the store holds every change up to the API server's
    /// current resourceVersion, learnt from `clock`; that resourceVersion.
    ///
    /// # Errors
    ///
    /// 504 when the API server cannot be asked, or the store does not catch
    /// up within `timeout`.
    pub(crate) async fn consistent(&self, clock: &Clock, timeout: Duration) -> Result<u64, Status> {
        let deadline = Instant::now() + timeout;
        let current = clock.now(deadline).await?;
        self.shared.learn(current);
        self.wait(current, deadline, true).await?;
        Ok(current)
    }

    /// As [`Self::consistent`], for a GET of one object that `fetch` (a
    /// request sent when first polled) answers instead when the store is
    /// not complete through the API server's resourceVersion. When the
    /// resourceVersion learnt last found the store behind too (a quiet
    /// resource), `fetch` is sent at once, without asking the clock: one
    /// round trip. No probe starts. See the module doc.
    ///
    /// # Errors
    ///
    /// As [`Self::consistent`], and `fetch`'s.
    pub(crate) async fn consistent_or(
        &self,
        clock: &Clock,
        timeout: Duration,
        fetch: impl Future<Output = Result<Fetched, Status>>,
    ) -> Result<Consistent, Status> {
        let deadline = Instant::now() + timeout;
        if !self.shared.behind.load(Ordering::Acquire) {
            let current = clock.now(deadline).await?;
            if self.shared.learn(current) {
                return Ok(Consistent::Proven(current));
            }
        }
        let fetched = tokio::time::timeout_at(deadline, fetch)
            .await
            .map_err(|_| unavailable("the API server did not answer in time"))??;
        // The API server's resourceVersion when it read the object.
        self.shared.learn(fetched.resource_version);
        Ok(Consistent::Fetched(fetched))
    }

    /// Waits until the store holds every change up to `rv`, probing when
    /// it lags (`rv` may come from another resource).
    ///
    /// # Errors
    ///
    /// 504 `Too large resource version` when it does not within `timeout`,
    /// as kube-apiserver answers (clients retry after a second).
    pub(crate) async fn not_older_than(&self, rv: u64, timeout: Duration) -> Result<(), Status> {
        self.wait(rv, Instant::now() + timeout, true).await
    }

    /// Waits until the store itself reaches `rv`, a resourceVersion of this
    /// resource's own change (a client's write): its event brings the store
    /// there, no probe is needed.
    ///
    /// # Errors
    ///
    /// As [`Self::not_older_than`].
    pub(crate) async fn reached(&self, rv: u64, timeout: Duration) -> Result<(), Status> {
        self.wait(rv, Instant::now() + timeout, false).await
    }

    async fn wait(&self, rv: u64, deadline: Instant, probe: bool) -> Result<(), Status> {
        if self.complete_through() >= rv {
            return Ok(());
        }
        // Only a read that waits keeps probes coming (see the module doc).
        if probe {
            self.keep_warm();
        }
        let _waiting = probe.then(|| Waiting::new(self));
        let mut proven = self.shared.proven.subscribe();
        loop {
            let complete = self.complete_through();
            if complete >= rv {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Status::too_large_resource_version(rv, complete));
            }
            tokio::select! {
                _ = self.shared.reader.wait_for(rv, left) => {}
                _ = proven.changed() => {}
            }
        }
    }
}

impl Freshness {
    /// Keeps (or starts) the probe cadence for [`KEEP_WARM`] from now:
    /// every read that waits for a proof calls it, so a resource read
    /// consistently has its bookmarks coming before the next read needs one.
    /// Refreshed at most every quarter of it, sparing the lock.
    fn keep_warm(&self) {
        let now = Instant::now();
        let last = *self.demand.borrow();
        if last.is_none_or(|last| now.duration_since(last) >= KEEP_WARM / 4) {
            self.demand.send_replace(Some(now));
        }
    }
}

/// What [`Freshness::consistent_or`] found.
#[derive(Debug)]
pub(crate) enum Consistent {
    /// The store holds every change up to this resourceVersion, the API
    /// server's when the read arrived.
    Proven(u64),
    /// It may not: the API server's answer to a request sent after the
    /// read arrived.
    Fetched(Fetched),
}

/// A read waiting for a proof, counted while it lives.
struct Waiting<'f>(&'f Freshness);

impl<'f> Waiting<'f> {
    fn new(freshness: &'f Freshness) -> Self {
        freshness.shared.waiting.fetch_add(1, Ordering::AcqRel);
        Waiting(freshness)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.shared.waiting.fetch_sub(1, Ordering::AcqRel);
        self.0.demand.send_replace(Some(Instant::now()));
    }
}

/// Starts a probe every `interval` while reads wait or arrived within
/// [`KEEP_WARM`]; ends when the [`Freshness`] is dropped.
async fn cadence(
    shared: Arc<Shared>,
    mut demand: watch::Receiver<Option<Instant>>,
    interval: Duration,
) {
    let max = max_probes(interval);
    let mut probes = JoinSet::new();
    while demand.changed().await.is_ok() {
        let mut tick = tokio::time::interval(interval.max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let last = *demand.borrow_and_update();
            let cold = last.is_none_or(|last| last.elapsed() >= KEEP_WARM);
            if shared.waiting.load(Ordering::Acquire) == 0 && cold {
                break;
            }
            tokio::select! {
                _ = tick.tick() => {
                    while probes.try_join_next().is_some() {}
                    if probes.len() < max {
                        probes.spawn(probe(shared.clone()));
                    }
                }
                changed = demand.changed() => if changed.is_err() { return },
            }
        }
    }
}

/// One probe (see the module doc).
async fn probe(shared: Arc<Shared>) {
    let from = shared.complete_through();
    if from == 0 {
        return;
    }
    metrics::counter!("kubecache_freshness_requests_total", "kind" => "probe").increment(1);
    let query = Query {
        watch: true,
        resource_version: Some(from),
        timeout: Some(PROBE_TIMEOUT),
        ..Query::default()
    };
    let Ok(mut events) = shared.upstream.watch(&query).await else {
        return;
    };
    let mut last_event = None;
    let bookmark = loop {
        let Ok(Some(event)) = events.next_event().await else {
            return;
        };
        let Ok(line) = event.line() else {
            return;
        };
        let Ok(rv) = line.resource_version() else {
            return;
        };
        match line.event_type {
            WatchEventType::Bookmark => break rv,
            WatchEventType::Error => return,
            _ => last_event = Some(rv),
        }
    };
    drop(events);
    if let Some(last) = last_event
        && shared.reader.wait_for(last, PROBE_TIMEOUT).await.is_err()
    {
        return;
    }
    shared.proven.send_if_modified(|proven| {
        let newer = bookmark > *proven;
        *proven = (*proven).max(bookmark);
        newer
    });
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::SeqCst;

    use super::*;
    use crate::cacher::fake_api::FakeApi;

    const INTERVAL: Duration = Duration::from_millis(100);
    const WAIT: Duration = Duration::from_secs(3);

    /// A store at resourceVersion 5 (with its writer, to move it), served
    /// through `api`, whose revision is 10: other resources moved it.
    fn quiet(api: &Arc<FakeApi>) -> (kubecache_reflector::StoreWriter, Freshness) {
        let (mut writer, reader) = kubecache_reflector::store(Default::default());
        writer.mark_listed(5);
        api.revision.store(10, SeqCst);
        let freshness = Freshness::new(api.upstream("configmaps"), reader, INTERVAL);
        (writer, freshness)
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_resource_is_proven_complete_by_a_probes_bookmark() {
        let api = Arc::new(FakeApi::default());
        let (_writer, freshness) = quiet(&api);
        let started = Instant::now();
        freshness.not_older_than(10, WAIT).await.unwrap();
        assert_eq!(freshness.complete_through(), 10);
        assert!(api.count("watch=1&allowWatchBookmarks=true&resourceVersion=5") >= 1);
        // Cold: the first probe's bookmark, 1 s in.
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn once_warm_a_read_is_proven_within_one_probe_interval() {
        let api = Arc::new(FakeApi::default());
        let (_writer, freshness) = quiet(&api);
        freshness.not_older_than(10, WAIT).await.unwrap();
        for rv in 11..20 {
            tokio::time::sleep(Duration::from_millis(370)).await;
            api.revision.store(rv, SeqCst);
            let started = Instant::now();
            freshness.not_older_than(rv, WAIT).await.unwrap();
            assert!(
                started.elapsed() <= INTERVAL,
                "{rv}: {:?}",
                started.elapsed()
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_sent_while_no_read_waits() {
        let api = Arc::new(FakeApi::default());
        let (_writer, freshness) = quiet(&api);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(api.count(""), 0, "before any read");
        freshness.not_older_than(10, WAIT).await.unwrap();
        tokio::time::sleep(KEEP_WARM + PROBE_TIMEOUT).await;
        let sent = api.count("watch=1");
        assert!(sent >= 1, "the read was proven by a probe");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(api.count(""), sent, "nothing a minute after the last read");
    }

    /// A fetch from `api`, one round trip of `latency`: the revision it
    /// read at.
    async fn fetch(api: &FakeApi, latency: Duration) -> Result<Fetched, Status> {
        tokio::time::sleep(latency).await;
        Ok(Fetched {
            resource_version: api.revision.load(SeqCst),
            object: None,
        })
    }

    /// What a read was answered by: `Ok(rv)` proven at `rv`, `Err(rv)`
    /// fetched at `rv`.
    fn answered(consistent: Result<Consistent, Status>) -> Result<u64, u64> {
        match consistent.unwrap() {
            Consistent::Proven(rv) => Ok(rv),
            Consistent::Fetched(fetched) => Err(fetched.resource_version),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_get_the_store_cannot_prove_is_fetched_at_once_and_sends_no_probe() {
        let api = Arc::new(FakeApi::default());
        let (_writer, freshness) = quiet(&api);
        let clock = Clock::new(vec![freshness.source()], 1);
        for rv in 10..15 {
            api.revision.store(rv, SeqCst);
            let started = Instant::now();
            let answer = freshness.consistent_or(&clock, WAIT, fetch(&api, Duration::ZERO));
            assert_eq!(answered(answer.await), Err(rv));
            assert_eq!(started.elapsed(), Duration::ZERO, "no wait for a probe");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        tokio::time::sleep(KEEP_WARM + PROBE_TIMEOUT).await;
        assert_eq!(api.count("watch=1"), 0, "no probe for fetched reads");
        // Not to be fetched, a read waits for the probe.
        api.revision.store(15, SeqCst);
        assert_eq!(freshness.consistent(&clock, WAIT).await.unwrap(), 15);
        assert!(api.count("watch=1") >= 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_get_takes_one_round_trip_against_a_server_whose_bookmarks_come_once_a_second()
    {
        const RTT: Duration = Duration::from_millis(5);
        let api = Arc::new(FakeApi {
            latency: RTT,
            bookmark_tick: Some(Duration::from_secs(1)),
            ..FakeApi::default()
        });
        let (_writer, freshness) = quiet(&api);
        let clock = Clock::new(vec![freshness.source()], 2);
        // One at a time, 300 ms apart, while other resources move the
        // revision: each read is answered at the revision of a request sent
        // after it arrived, one round trip later (not the clock's and then
        // the fetch's), whatever the tick.
        for rv in 11..40 {
            api.revision.store(rv, SeqCst);
            let started = Instant::now();
            let answer = freshness.consistent_or(&clock, WAIT, fetch(&api, RTT));
            assert_eq!(answered(answer.await), Err(rv));
            assert_eq!(started.elapsed(), RTT, "{rv}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert_eq!(api.count("limit=1"), 0, "the clock was not asked");
        assert_eq!(api.count("watch=1"), 0, "nor probes sent");
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_keeps_up_is_read_without_fetching() {
        let api = Arc::new(FakeApi {
            bookmark_tick: Some(Duration::from_secs(1)),
            ..FakeApi::default()
        });
        let (mut writer, freshness) = quiet(&api);
        let clock = Clock::new(vec![freshness.source()], 2);
        let fetched = AtomicUsize::new(0);
        let counted = || async {
            fetched.fetch_add(1, SeqCst);
            fetch(&api, Duration::from_millis(5)).await
        };
        for rv in 10..20 {
            // The resource's own writes move the revision: its store
            // reaches it by its own events.
            api.revision.store(rv, SeqCst);
            writer.advance(rv);
            let answer = freshness.consistent_or(&clock, WAIT, counted()).await;
            if rv > 10 {
                assert_eq!(answered(answer), Ok(rv));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        // Only the first read, before the API server's resourceVersion
        // was learnt, was fetched; and once learnt, no read waited, so no
        // probe was sent after the first read's.
        assert_eq!(fetched.load(SeqCst), 1);
        let probes = api.count("watch=1");
        tokio::time::sleep(Duration::from_secs(5)).await;
        for rv in 20..30 {
            api.revision.store(rv, SeqCst);
            writer.advance(rv);
            let answer = freshness.consistent_or(&clock, WAIT, counted()).await;
            assert_eq!(answered(answer), Ok(rv));
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert_eq!(
            api.count("watch=1"),
            probes,
            "no probe for reads the store answers"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_clients_own_write_is_waited_for_without_probes() {
        let api = Arc::new(FakeApi::default());
        let (mut writer, freshness) = quiet(&api);
        let reached = tokio::spawn(async move {
            freshness.reached(8, WAIT).await.unwrap();
            freshness
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        writer.advance(8);
        let freshness = reached.await.unwrap();
        assert_eq!(freshness.complete_through(), 8);
        assert_eq!(api.count(""), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_the_store_cannot_reach_in_time_gets_too_large_resource_version() {
        let api = Arc::new(FakeApi::default());
        let (_writer, freshness) = quiet(&api);
        let status = freshness.not_older_than(11, WAIT).await.unwrap_err();
        assert_eq!(status.code, 504);
        assert!(
            status.message.contains("Too large resource version"),
            "{}",
            status.message
        );
    }
}
