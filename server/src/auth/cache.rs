//! The decisions of reviews, kept for a while: bounded, expiring, and
//! asked once however many requests want the same answer at the same time.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::OnceCell;
use tokio::time::Instant;

/// Answers to reviews by key, each kept for the time-to-live its answer
/// gives it. A review that fails answers every request waiting for it
/// with its error, at once, and is not kept: the next request asks again.
/// (Were the error not shared, each waiter would retry in turn, and the
/// k-th of many would wait k review timeouts.)
#[derive(Debug)]
pub struct DecisionCache<K, V, E> {
    entries: Mutex<HashMap<K, Arc<Slot<V, E>>>>,
    capacity: usize,
}

/// One key's answer, or the review in flight for it.
#[derive(Debug)]
struct Slot<V, E> {
    answer: OnceCell<Result<(V, Instant), E>>,
}

impl<V, E> Slot<V, E> {
    /// Whether a new request must ask again: the answer expired, or the
    /// review failed.
    fn expired(&self, now: Instant) -> bool {
        match self.answer.get() {
            Some(Ok((_, expires))) => *expires <= now,
            Some(Err(_)) => true,
            None => false,
        }
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

impl<K: Hash + Eq + Clone, V: Clone, E: Clone> DecisionCache<K, V, E> {
    /// A cache of at most `capacity` keys.
    pub fn new(capacity: usize) -> Self {
        DecisionCache {
            entries: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Forgets every kept answer; reviews in flight finish for their own
    /// requests, and keep nothing.
    pub fn clear(&self) {
        self.entries.lock().clear();
    }

    /// The answer for `key`: kept, or asked of `review` and kept for
    /// `ttl(answer)`.
    ///
    /// # Errors
    ///
    /// The error of the review this request waited for, which is not kept.
    pub async fn get_or_review<F>(
        &self,
        key: &K,
        ttl: impl Fn(&V) -> Duration,
        review: F,
    ) -> Result<(V, Source), E>
    where
        F: Future<Output = Result<V, E>>,
    {
        let slot = self.slot(key);
        let mut source = Source::Cached;
        let answer = slot
            .answer
            .get_or_init(|| async {
                source = Source::Reviewed;
                let answer = review.await?;
                let expires = Instant::now() + ttl(&answer);
                Ok((answer, expires))
            })
            .await;
        match answer {
            Ok((answer, _)) => Ok((answer.clone(), source)),
            Err(error) => Err(error.clone()),
        }
    }

    /// The slot of `key`, a fresh one if it has none or its answer expired.
    fn slot(&self, key: &K) -> Arc<Slot<V, E>> {
        let now = Instant::now();
        let mut entries = self.entries.lock();
        if let Some(slot) = entries.get(key)
            && !slot.expired(now)
        {
            return slot.clone();
        }
        if entries.len() >= self.capacity && !entries.contains_key(key) {
            make_room(&mut entries, self.capacity, now);
        }
        let slot = Arc::new(Slot {
            answer: OnceCell::new(),
        });
        entries.insert(key.clone(), slot.clone());
        slot
    }
}

/// Drops the expired answers and, if that is not enough, an eighth of the
/// rest (arbitrary ones), so that a full cache pays for a sweep only once
/// per many insertions.
fn make_room<K: Hash + Eq + Clone, V, E>(
    entries: &mut HashMap<K, Arc<Slot<V, E>>>,
    capacity: usize,
    now: Instant,
) {
    entries.retain(|_, slot| !slot.expired(now));
    if entries.len() >= capacity {
        let drop: Vec<K> = entries.keys().take(capacity / 8 + 1).cloned().collect();
        for key in drop {
            entries.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    async fn ask(cache: &DecisionCache<u32, u32, ()>, key: u32, reviews: &AtomicUsize) -> Source {
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
        let cache = DecisionCache::<u32, u32, ()>::new(10);
        let failed = cache.get_or_review(&1, |_| TTL, async { Err(()) }).await;
        assert_eq!(failed, Err(()));
        let reviews = AtomicUsize::new(0);
        assert_eq!(ask(&cache, 1, &reviews).await, Source::Reviewed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_failing_review_fails_every_waiter_at_once() {
        let cache = DecisionCache::<u32, u32, &str>::new(10);
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
            assert!(cache.len() <= 64);
        }
        // The newest answer is kept.
        assert_eq!(ask(&cache, 999, &reviews).await, Source::Cached);
    }
}
