//! The decisions of reviews, kept for a while: bounded, expiring, and
//! asked once however many requests want the same answer at the same time.
//!
//! On moka's cache: its TinyLFU admission keeps the answers asked often
//! (a controller's token, its usual requests) when a flood of new keys (a
//! client sending a new random token each time) fills it, where evicting
//! arbitrary or least recent entries would make the hot ones be reviewed
//! again; and its `try_get_with` runs one review per key, sharing the
//! answer, or the error, with every request waiting for it.

use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use moka::future::Cache;
use moka::ops::compute::Op;
use tokio::time::Instant;

/// Answers to reviews by key, each kept for the time-to-live its answer
/// gives it, until then revoked with everything kept or with its scope
/// (the namespace of a request, the ServiceAccount of a token: what a
/// watched change can affect). A review that fails answers every request
/// waiting for it with its error, at once, and is not kept: the next
/// request asks again. (Were the error not shared, each waiter would retry
/// in turn, and the k-th of many would wait k review timeouts.)
pub struct DecisionCache<K, V, S> {
    entries: Cache<K, Kept<V, S>>,
    /// Keys whose expired answer one request is asking again, while the
    /// others are served that answer.
    refreshing: DashMap<K, ()>,
    revoked: Revocations<S>,
    longest_ttl: Duration,
}

/// How long, and under what scope, an answer is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keep<S> {
    /// Its time-to-live.
    pub ttl: Duration,
    /// How long after its review it may still be served, not revoked,
    /// while the API server cannot answer it again (at least `ttl`).
    pub stale_ttl: Duration,
    /// What revokes it besides [`DecisionCache::revoke_all`].
    pub scope: Option<S>,
}

impl<S> Keep<S> {
    /// How long after its review it may be served at all: fresh, then
    /// stale.
    fn served_for(&self) -> Duration {
        self.stale_ttl.max(self.ttl)
    }
}

/// An answer and when it expires, by the tokio clock (paused in tests;
/// moka's own clock only reclaims the memory of expired answers).
#[derive(Debug, Clone)]
struct Kept<V, S> {
    answer: V,
    keep: Keep<S>,
    expires: Instant,
    /// Until when it may be served while it cannot be asked again.
    stale_until: Instant,
    /// [`Revocations::epoch`] when its review started: a revocation after
    /// that (of everything, or of its scope) revokes it, even if it was
    /// still being asked (the API server may have answered from the state
    /// before the change).
    epoch: u64,
}

/// What was revoked, and when, in revocation epochs.
struct Revocations<S> {
    /// Bumped by each revocation.
    epoch: AtomicU64,
    /// The epoch of the last revocation of everything.
    everything: AtomicU64,
    /// The epoch of the last revocation of each scope, and when it was:
    /// pruned of those older than any answer can be.
    scopes: DashMap<S, (u64, Instant)>,
}

impl<S: Hash + Eq> Revocations<S> {
    /// Scopes remembered before the old ones are pruned.
    const SCOPES_KEPT: usize = 4096;

    /// Whether an answer asked at `epoch`, of `scope`, stands: nothing
    /// revoked since, which costs one atomic load while nothing is.
    fn stands(&self, epoch: u64, scope: Option<&S>) -> bool {
        if epoch == self.epoch.load(Ordering::Acquire) {
            return true;
        }
        epoch >= self.everything.load(Ordering::Acquire)
            && scope
                .and_then(|scope| self.scopes.get(scope))
                .is_none_or(|revoked| epoch >= revoked.0)
    }

    /// Whether `scope` was revoked less than `within` before `now`.
    fn recently(&self, scope: Option<&S>, within: Duration, now: Instant) -> bool {
        scope
            .and_then(|scope| self.scopes.get(scope))
            .is_some_and(|revoked| now.duration_since(revoked.1) < within)
    }

    /// Revokes everything, or `scope`, asked before now.
    fn revoke(&self, scope: Option<S>, longest_ttl: Duration) {
        let epoch = self.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        let Some(scope) = scope else {
            self.everything.fetch_max(epoch, Ordering::AcqRel);
            return;
        };
        let now = Instant::now();
        self.scopes.insert(scope, (epoch, now));
        if self.scopes.len() > Self::SCOPES_KEPT {
            // An answer older than the longest TTL has expired anyway.
            self.scopes
                .retain(|_, (_, at)| now.duration_since(*at) <= longest_ttl);
        }
    }
}

/// moka expires each answer after its own time-to-live.
struct ByTtl;

impl<K, V, S> moka::Expiry<K, Kept<V, S>> for ByTtl {
    fn expire_after_create(
        &self,
        _: &K,
        kept: &Kept<V, S>,
        _: std::time::Instant,
    ) -> Option<Duration> {
        Some(kept.keep.served_for())
    }

    /// A refreshed answer lives as long as its own review says (moka
    /// would keep the old one's remaining time).
    fn expire_after_update(
        &self,
        key: &K,
        kept: &Kept<V, S>,
        at: std::time::Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        self.expire_after_create(key, kept, at)
    }
}

/// Whether an answer came from the cache or from a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A kept answer (or one a concurrent request was already asking for).
    Cached,
    /// This request's own review.
    Reviewed,
    /// An expired answer, within its stale TTL, served because the API
    /// server could not answer it again (or another request is asking).
    Stale,
}

/// The answer one connection was last given from a [`DecisionCache`]:
/// asked again over the same connection (a client repeating its request
/// with its credential), it is served after the same checks as a kept one
/// (unexpired, nothing revoked since its review), without the shared
/// cache's hashing, lookup and bookkeeping.
pub struct Slot<K, V, S>(std::sync::Mutex<Option<(K, Kept<V, S>)>>);

impl<K, V, S> Default for Slot<K, V, S> {
    fn default() -> Self {
        Slot(std::sync::Mutex::new(None))
    }
}

impl<K: Eq + Clone, V: Clone, S: Clone> Slot<K, V, S> {
    /// The answer held, if `is_key` says its key is the one asked for and
    /// `fresh` says it stands; `None` when another stream of the connection
    /// holds the slot. (A predicate, not a key: the key asked for need not
    /// be built to be compared.)
    fn recall(
        &self,
        is_key: impl Fn(&K) -> bool,
        fresh: impl Fn(&Kept<V, S>) -> bool,
    ) -> Option<V> {
        let held = self.0.try_lock().ok()?;
        let (held_key, kept) = held.as_ref()?;
        (is_key(held_key) && fresh(kept)).then(|| kept.answer.clone())
    }

    /// Holds `kept`, the answer for `key`, instead of the last one.
    fn hold(&self, key: &K, kept: &Kept<V, S>) {
        if let Ok(mut held) = self.0.try_lock() {
            *held = Some((key.clone(), kept.clone()));
        }
    }
}

/// Removes a key from [`DecisionCache::refreshing`] when its review ends.
struct Refreshing<'a, K: Hash + Eq>(&'a DashMap<K, ()>, &'a K);

impl<K: Hash + Eq> Drop for Refreshing<'_, K> {
    fn drop(&mut self) {
        self.0.remove(self.1);
    }
}

impl<K, V, S> DecisionCache<K, V, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
    S: Hash + Eq + Clone + Send + Sync + 'static,
{
    /// How long an answer of a scope revoked less than its TTL ago is
    /// kept: the API server's own caches of the state before a change
    /// (kube-apiserver keeps a token 10 s; its authorizers read informers)
    /// may still answer as before it, and are asked again each second
    /// until they answer as after.
    const AFTER_REVOCATION: Duration = Duration::from_secs(1);

    /// A cache of at most `capacity` keys, none kept longer than
    /// `longest_ttl`.
    pub fn new(capacity: usize, longest_ttl: Duration) -> Self {
        DecisionCache {
            entries: Cache::builder()
                .max_capacity(capacity.max(1) as u64)
                .expire_after(ByTtl)
                .build(),
            refreshing: DashMap::new(),
            revoked: Revocations {
                epoch: AtomicU64::new(0),
                everything: AtomicU64::new(0),
                scopes: DashMap::new(),
            },
            longest_ttl,
        }
    }

    /// How many keys it holds (moka's count, which may lag a moment).
    pub fn len(&self) -> usize {
        self.entries.entry_count() as usize
    }

    /// Revokes every kept answer; reviews in flight finish for their own
    /// requests, and their answers are not served to later ones.
    pub fn revoke_all(&self) {
        self.revoked.revoke(None, self.longest_ttl);
        self.entries.invalidate_all();
    }

    /// Revokes the answers kept under `scope`, and those being asked.
    pub fn revoke(&self, scope: S) {
        self.revoked.revoke(Some(scope), self.longest_ttl);
    }

    /// The answer `slot` holds for the key `is_key` tells, if it stands as
    /// a kept one would: unexpired, nothing revoked since its review.
    pub fn recall(&self, slot: &Slot<K, V, S>, is_key: impl Fn(&K) -> bool) -> Option<V> {
        let now = Instant::now();
        slot.recall(is_key, |kept| self.fresh(kept, now))
    }

    /// Whether `kept` may be served at `now`: unexpired, nothing revoked
    /// since its review.
    fn fresh(&self, kept: &Kept<V, S>, now: Instant) -> bool {
        kept.expires > now && self.stands(kept)
    }

    /// Whether nothing was revoked since `kept`'s review.
    fn stands(&self, kept: &Kept<V, S>) -> bool {
        self.revoked.stands(kept.epoch, kept.keep.scope.as_ref())
    }

    /// The answer for `key`: kept, or asked of `review()` and kept as
    /// `keep(answer)` says. An expired answer within its stale TTL is asked
    /// again by one request at a time, the others served it meanwhile; if
    /// that review fails, it is served too ([`Source::Stale`]). A fresh
    /// answer is also held in `slot`, the asking connection's, and served
    /// from there while it stands.
    ///
    /// The hit path is every request's: the review is made only when
    /// asked, and what only a miss awaits is boxed, so that the future a
    /// request moves through its handlers stays small.
    ///
    /// # Errors
    ///
    /// The error of the review this request waited for, which is not kept.
    pub async fn get_or_review<E, F>(
        &self,
        key: &K,
        slot: Option<&Slot<K, V, S>>,
        keep: impl Fn(&V) -> Keep<S>,
        review: impl FnOnce() -> F,
    ) -> Result<(V, Source), E>
    where
        E: Clone + Send + Sync + 'static,
        F: Future<Output = Result<V, E>>,
    {
        let mut review = Some(review);
        loop {
            let epoch = self.revoked.epoch.load(Ordering::Acquire);
            let now = Instant::now();
            let stands = |kept: &Kept<V, S>| self.stands(kept);
            let fresh = move |kept: &Kept<V, S>| self.fresh(kept, now);
            if let Some(answer) = slot.and_then(|slot| self.recall(slot, |held| held == key)) {
                return Ok((answer, Source::Cached));
            }
            let hold = |kept: &Kept<V, S>| {
                if let Some(slot) = slot {
                    slot.hold(key, kept);
                }
            };
            let kept_answer = |answer: V| {
                let mut keep = keep(&answer);
                let now = Instant::now();
                if self.revoked.recently(keep.scope.as_ref(), keep.ttl, now) {
                    // The API server may have answered from its own state
                    // before the change (its informers, its token cache):
                    // asked again soon, never served stale.
                    keep.ttl = keep.ttl.min(Self::AFTER_REVOCATION);
                    keep.stale_ttl = keep.ttl;
                }
                Kept {
                    expires: now + keep.ttl,
                    stale_until: now + keep.served_for(),
                    answer,
                    keep,
                    epoch,
                }
            };
            if let Some(kept) = self.entries.get(key).await {
                if fresh(&kept) {
                    hold(&kept);
                    return Ok((kept.answer, Source::Cached));
                }
                if kept.stale_until > now && stands(&kept) {
                    if self.refreshing.insert(key.clone(), ()).is_some() {
                        return Ok((kept.answer, Source::Stale));
                    }
                    let _refreshing = Refreshing(&self.refreshing, key);
                    let review = review.take().expect("asked once: the loop ends after it");
                    return match Box::pin(review()).await {
                        Ok(answer) => {
                            let fresh = kept_answer(answer);
                            hold(&fresh);
                            let answer = fresh.answer.clone();
                            Box::pin(self.entries.insert(key.clone(), fresh)).await;
                            Ok((answer, Source::Reviewed))
                        }
                        Err(_) => Ok((kept.answer, Source::Stale)),
                    };
                }
                // Stale: removed unless another request has just replaced it.
                Box::pin(
                    self.entries
                        .entry_by_ref(key)
                        .and_compute_with(|entry| async move {
                            match entry {
                                Some(entry) if !fresh(entry.value()) => Op::Remove,
                                _ => Op::Nop,
                            }
                        }),
                )
                .await;
            }
            let review = &mut review;
            let kept = Box::pin(self.entries.try_get_with_by_ref(key, async {
                let review = review.take().expect("asked once: the loop ends after it");
                Ok(kept_answer(review().await?))
            }))
            .await
            .map_err(|error: Arc<E>| E::clone(&error))?;
            // Shared with a request that asked before a revocation this
            // one came after: asked again.
            if review.is_some() && !fresh(&kept) {
                continue;
            }
            hold(&kept);
            let source = match review {
                None => Source::Reviewed,
                Some(_) => Source::Cached,
            };
            return Ok((kept.answer, source));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    /// Kept [`TTL`], answers of even keys under scope 0, odd ones under 1.
    type Test = DecisionCache<u32, u32, u32>;

    fn new(capacity: usize) -> Test {
        DecisionCache::new(capacity, TTL)
    }

    fn keep(answer: &u32) -> Keep<u32> {
        Keep {
            ttl: TTL,
            stale_ttl: TTL,
            scope: Some(answer / 2 % 2),
        }
    }

    fn for_ttl<V>(_: &V) -> Keep<u32> {
        Keep {
            ttl: TTL,
            stale_ttl: TTL,
            scope: None,
        }
    }

    async fn ask(cache: &Test, key: u32, reviews: &AtomicUsize) -> Source {
        ask_over(cache, None, key, reviews).await
    }

    /// [`ask`] over a connection holding `slot`.
    async fn ask_over(
        cache: &Test,
        slot: Option<&Slot<u32, u32, u32>>,
        key: u32,
        reviews: &AtomicUsize,
    ) -> Source {
        let (answer, source) = cache
            .get_or_review(&key, slot, keep, || async move {
                reviews.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ()>(key * 2)
            })
            .await
            .unwrap();
        assert_eq!(answer, key * 2);
        source
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_is_kept_for_its_ttl_then_asked_again() {
        let cache = new(10);
        let reviews = AtomicUsize::new(0);
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
        tokio::time::advance(TTL - Duration::from_millis(1)).await;
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Cached);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
        assert_eq!(reviews.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_recalls_its_last_answer_only_while_a_kept_one_would_stand() {
        let cache = new(10);
        let slot = Slot::default();
        let reviews = AtomicUsize::new(0);
        let ask = |key| ask_over(&cache, Some(&slot), key, &reviews);
        // Key 3's answer is under scope 1, key 2's under scope 0.
        assert_eq!(ask(3).await, Source::Reviewed);
        assert_eq!(ask(3).await, Source::Cached);
        assert_eq!(slot.recall(|key| *key == 3, |_| true), Some(6));
        assert_eq!(
            slot.recall(|key| *key == 2, |_| true),
            None,
            "it holds one key"
        );
        cache.revoke(0);
        assert_eq!(ask(3).await, Source::Cached, "another scope's revocation");
        cache.revoke(1);
        assert_eq!(ask(3).await, Source::Reviewed, "its scope revoked");
        cache.revoke_all();
        assert_eq!(ask(3).await, Source::Reviewed, "everything revoked");
        tokio::time::advance(TTL).await;
        assert_eq!(ask(3).await, Source::Reviewed, "expired");
        assert_eq!(ask(2).await, Source::Reviewed);
        assert_eq!(
            slot.recall(|key| *key == 2, |_| true),
            Some(4),
            "the last one asked"
        );
        assert_eq!(reviews.load(Ordering::SeqCst), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_requests_share_one_review() {
        let cache = new(10);
        let reviews = AtomicUsize::new(0);
        let slow = |key: u32| {
            let (cache, reviews) = (&cache, &reviews);
            async move {
                cache
                    .get_or_review(&key, None, for_ttl, || async move {
                        reviews.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        Ok::<_, ()>(key)
                    })
                    .await
                    .unwrap()
                    .1
            }
        };
        let sources = futures::future::join_all((0..50).map(|_| slow(7))).await;
        assert_eq!(reviews.load(Ordering::SeqCst), 1);
        assert_eq!(
            sources.iter().filter(|s| **s == Source::Reviewed).count(),
            1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_review_is_not_kept() {
        let cache = new(10);
        let failed = cache
            .get_or_review(&1, None, for_ttl, || async move { Err(()) })
            .await;
        assert_eq!(failed, Err(()));
        let reviews = AtomicUsize::new(0);
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_failing_review_fails_every_waiter_at_once() {
        let cache = new(10);
        let reviews = &AtomicUsize::new(0);
        let started = Instant::now();
        let waiters = (0..200).map(|_| {
            cache.get_or_review(&1, None, for_ttl, || async move {
                reviews.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(10)).await;
                Err("timed out")
            })
        });
        let answers = futures::future::join_all(waiters).await;
        assert!(answers.iter().all(|a| *a == Err("timed out")));
        assert_eq!(reviews.load(Ordering::SeqCst), 1, "one review for all");
        assert_eq!(started.elapsed(), Duration::from_secs(10), "not 200 × 10 s");
    }

    #[tokio::test(start_paused = true)]
    async fn it_holds_at_most_its_capacity() {
        let cache = new(64);
        let reviews = AtomicUsize::new(0);
        for key in 0..1000 {
            ask(&cache, key, &reviews).await;
        }
        cache.entries.run_pending_tasks().await;
        assert!(cache.len() <= 64, "{}", cache.len());
    }

    #[tokio::test(start_paused = true)]
    async fn hot_answers_stay_while_a_flood_of_new_keys_churns_through() {
        let hot = 1_000_000..1_000_100;
        let cache = new(1_000);
        let reviews = AtomicUsize::new(0);
        for key in hot.clone() {
            assert_eq!(ask(&cache, key, &reviews).await, Source::Reviewed);
        }
        for key in 0..10_000 {
            ask(&cache, key, &reviews).await;
            if key % 100 == 0 {
                for key in hot.clone() {
                    let source = ask(&cache, key, &reviews).await;
                    assert_eq!(source, Source::Cached, "{key} re-reviewed");
                }
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_of_a_review_in_flight_when_all_is_revoked_is_not_kept() {
        let cache = new(10);
        let reviews = &AtomicUsize::new(0);
        let in_flight = cache.get_or_review(&1, None, for_ttl, || async move {
            reviews.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok::<_, ()>(2)
        });
        let clear = async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cache.revoke_all();
        };
        let (answer, ()) = tokio::join!(in_flight, clear);
        assert_eq!(answer, Ok((2, Source::Reviewed)), "its own request served");
        assert_eq!(ask(&cache, 1, reviews).await, Source::Reviewed);
        assert_eq!(reviews.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_scope_s_revocation_revokes_its_answers_only() {
        let cache = new(10);
        let reviews = AtomicUsize::new(0);
        // Answers 0 and 2 (keys 0 and 1) are under scopes 0 and 1.
        for key in [0, 1] {
            assert_eq!(ask(&cache, key, &reviews).await, Source::Reviewed);
        }
        cache.revoke(1);
        assert_eq!(ask(&cache, 0, &reviews).await, Source::Cached);
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Cached, "once");
        cache.revoke(7);
        assert_eq!(ask(&cache, 0, &reviews).await, Source::Cached);
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Cached);
        assert_eq!(reviews.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_in_flight_when_its_scope_is_revoked_serves_no_later_request() {
        let cache = new(10);
        let reviews = AtomicUsize::new(0);
        let slow = |started: &'static str| {
            let (cache, reviews) = (&cache, &reviews);
            async move {
                cache
                    .get_or_review(&1, None, keep, || async move {
                        reviews.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        Ok::<_, ()>(2)
                    })
                    .await
                    .map(|(_, source)| (started, source))
            }
        };
        let later = async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cache.revoke(1);
            slow("after").await
        };
        let (before, after) = tokio::join!(slow("before"), later);
        assert_eq!(before, Ok(("before", Source::Reviewed)));
        assert_eq!(after, Ok(("after", Source::Reviewed)), "asked again");
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Cached);
        assert_eq!(reviews.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn old_revocations_are_forgotten_past_the_longest_ttl() {
        let cache = new(10);
        for scope in 0..=Revocations::<u32>::SCOPES_KEPT as u32 {
            cache.revoke(scope);
        }
        tokio::time::advance(TTL + Duration::from_millis(1)).await;
        cache.revoke(u32::MAX);
        assert_eq!(cache.revoked.scopes.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_answer_is_served_while_it_cannot_be_asked_again_until_its_stale_ttl() {
        let cache = new(10);
        let stale = |_: &u32| Keep {
            ttl: TTL,
            stale_ttl: 6 * TTL,
            scope: None,
        };
        let ask = |answer: Result<u32, ()>, stall: Duration| {
            let cache = &cache;
            async move {
                cache
                    .get_or_review(&1, None, stale, || async move {
                        tokio::time::sleep(stall).await;
                        answer
                    })
                    .await
            }
        };
        assert_eq!(ask(Ok(2), Duration::ZERO).await, Ok((2, Source::Reviewed)));
        tokio::time::advance(TTL).await;
        // Expired: one request asks again (stalled, then failing); the
        // others are served the old answer at once.
        let started = Instant::now();
        let (asking, served) = tokio::join!(ask(Err(()), TTL), async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let answer = ask(Ok(3), Duration::ZERO).await;
            (answer, started.elapsed())
        });
        assert_eq!(asking, Ok((2, Source::Stale)));
        assert_eq!(served, (Ok((2, Source::Stale)), Duration::from_millis(1)));
        // Asked again, answered: fresh again.
        assert_eq!(ask(Ok(3), Duration::ZERO).await, Ok((3, Source::Reviewed)));
        assert_eq!(ask(Err(()), Duration::ZERO).await, Ok((3, Source::Cached)));
        // Past its stale TTL, or revoked, a failing review fails the request.
        tokio::time::advance(6 * TTL).await;
        assert_eq!(ask(Err(()), Duration::ZERO).await, Err(()));
        assert_eq!(ask(Ok(4), Duration::ZERO).await, Ok((4, Source::Reviewed)));
        tokio::time::advance(TTL).await;
        cache.revoke_all();
        assert_eq!(ask(Err(()), Duration::ZERO).await, Err(()));
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_of_a_scope_revoked_within_its_ttl_is_kept_a_second() {
        let cache = new(10);
        let reviews = AtomicUsize::new(0);
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
        cache.revoke(1);
        // Asked again at once; the API server may still answer as before.
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
        tokio::time::advance(Duration::from_millis(999)).await;
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Cached);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
        // A TTL after the revocation, kept its whole TTL again; other
        // scopes never shortened.
        tokio::time::advance(TTL).await;
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
        tokio::time::advance(TTL - Duration::from_millis(1)).await;
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Cached);
        assert_eq!(ask(&cache, 0, &reviews).await, Source::Reviewed);
        assert_eq!(reviews.load(Ordering::SeqCst), 5);
    }
}
