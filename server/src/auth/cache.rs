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

use moka::future::Cache;
use moka::ops::compute::Op;
use tokio::time::Instant;

/// Answers to reviews by key, each kept for the time-to-live its answer
/// gives it. A review that fails answers every request waiting for it
/// with its error, at once, and is not kept: the next request asks again.
/// (Were the error not shared, each waiter would retry in turn, and the
/// k-th of many would wait k review timeouts.)
pub struct DecisionCache<K, V> {
    entries: Cache<K, Kept<V>>,
    /// Bumped by [`DecisionCache::clear`]: an answer of an older generation
    /// (of a review in flight when it was cleared) is not served.
    generation: AtomicU64,
}

/// An answer and when it expires, by the tokio clock (paused in tests;
/// moka's own clock only reclaims the memory of expired answers).
#[derive(Debug, Clone)]
struct Kept<V> {
    answer: V,
    ttl: Duration,
    expires: Instant,
    generation: u64,
}

/// moka expires each answer after its own time-to-live.
struct ByTtl;

impl<K, V> moka::Expiry<K, Kept<V>> for ByTtl {
    fn expire_after_create(
        &self,
        _: &K,
        kept: &Kept<V>,
        _: std::time::Instant,
    ) -> Option<Duration> {
        Some(kept.ttl)
    }
}

/// Whether an answer came from the cache or from a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A kept answer (or one a concurrent request was already asking for).
    Cached,
    /// This request's own review.
    Reviewed,
}

impl<K, V> DecisionCache<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// A cache of at most `capacity` keys.
    pub fn new(capacity: usize) -> Self {
        DecisionCache {
            entries: Cache::builder()
                .max_capacity(capacity.max(1) as u64)
                .expire_after(ByTtl)
                .build(),
            generation: AtomicU64::new(0),
        }
    }

    /// How many keys it holds (moka's count, which may lag a moment).
    pub fn len(&self) -> usize {
        self.entries.entry_count() as usize
    }

    /// Forgets every kept answer; reviews in flight finish for their own
    /// requests, and their answers are not served to later ones.
    pub fn clear(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.entries.invalidate_all();
    }

    /// The answer for `key`: kept, or asked of `review` and kept for
    /// `ttl(answer)`.
    ///
    /// # Errors
    ///
    /// The error of the review this request waited for, which is not kept.
    pub async fn get_or_review<E, F>(
        &self,
        key: &K,
        ttl: impl Fn(&V) -> Duration,
        review: F,
    ) -> Result<(V, Source), E>
    where
        E: Clone + Send + Sync + 'static,
        F: Future<Output = Result<V, E>>,
    {
        let generation = self.generation.load(Ordering::Acquire);
        let now = Instant::now();
        let fresh = move |kept: &Kept<V>| kept.expires > now && kept.generation == generation;
        if let Some(kept) = self.entries.get(key).await {
            if fresh(&kept) {
                return Ok((kept.answer, Source::Cached));
            }
            // Stale: removed unless another request has just replaced it.
            self.entries
                .entry_by_ref(key)
                .and_compute_with(|entry| async move {
                    match entry {
                        Some(entry) if !fresh(entry.value()) => Op::Remove,
                        _ => Op::Nop,
                    }
                })
                .await;
        }
        let mut source = Source::Cached;
        let kept = self
            .entries
            .try_get_with_by_ref(key, async {
                source = Source::Reviewed;
                let answer = review.await?;
                let ttl = ttl(&answer);
                Ok(Kept {
                    answer,
                    ttl,
                    expires: Instant::now() + ttl,
                    generation,
                })
            })
            .await
            .map_err(|error: Arc<E>| E::clone(&error))?;
        Ok((kept.answer, source))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    async fn ask(cache: &DecisionCache<u32, u32>, key: u32, reviews: &AtomicUsize) -> Source {
        let (answer, source) = cache
            .get_or_review(&key, |_| TTL, async {
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
        let cache = DecisionCache::new(10);
        let reviews = AtomicUsize::new(0);
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
        tokio::time::advance(TTL - Duration::from_millis(1)).await;
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Cached);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
        assert_eq!(reviews.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_requests_share_one_review() {
        let cache = DecisionCache::new(10);
        let reviews = AtomicUsize::new(0);
        let slow = |key: u32| {
            let (cache, reviews) = (&cache, &reviews);
            async move {
                cache
                    .get_or_review(&key, |_| TTL, async {
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
        let cache = DecisionCache::<u32, u32>::new(10);
        let failed = cache.get_or_review(&1, |_| TTL, async { Err(()) }).await;
        assert_eq!(failed, Err(()));
        let reviews = AtomicUsize::new(0);
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_failing_review_fails_every_waiter_at_once() {
        let cache = DecisionCache::<u32, u32>::new(10);
        let reviews = AtomicUsize::new(0);
        let started = Instant::now();
        let waiters = (0..200).map(|_| {
            cache.get_or_review(&1, |_| TTL, async {
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
        let cache = DecisionCache::new(64);
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
        let cache = DecisionCache::new(1_000);
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
    async fn an_answer_of_a_review_in_flight_when_cleared_is_not_kept() {
        let cache = DecisionCache::new(10);
        let reviews = AtomicUsize::new(0);
        let in_flight = cache.get_or_review(&1, |_| TTL, async {
            reviews.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok::<_, ()>(2)
        });
        let clear = async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cache.clear();
        };
        let (answer, ()) = tokio::join!(in_flight, clear);
        assert_eq!(answer, Ok((2, Source::Reviewed)), "its own request served");
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
        assert_eq!(reviews.load(Ordering::SeqCst), 2);
    }
}
