//! Bounds on reviews kubecache asks the API server for, so that no client
//! turns its requests into an unbounded stream of reviews sent as
//! kubecache (which the API server's fairness cannot tell apart from
//! everyone else's): a token bucket per client address for tokens it does
//! not know and anonymous requests it has not judged, and one per user
//! for the requests of a signed-in user not kept. A review takes one
//! review from its bucket, refilled at the set rate up to its burst;
//! beyond that the request gets 429 without a review. Buckets are
//! independent and nothing queues: a client over its bound waits for
//! nobody else, and nobody waits for it.

use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use moka::future::Cache;
use parking_lot::Mutex;
use tokio::time::Instant;

/// Reviews each key (a client address, a user) may still ask for.
pub struct ReviewBudget<K> {
    per_second: f64,
    burst: f64,
    buckets: Cache<K, Arc<Mutex<Bucket>>>,
}

/// One key's bucket.
#[derive(Debug)]
struct Bucket {
    reviews: f64,
    at: Instant,
}

impl<K> ReviewBudget<K>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    /// Keys tracked at once: beyond them, the least asked ones are
    /// forgotten (and start again with a full bucket).
    const KEYS: u64 = 100_000;

    /// `per_second` reviews per key and second, in bursts of `burst` (at
    /// least one).
    pub fn new(per_second: f64, burst: f64) -> Self {
        let burst = burst.max(1.0);
        // A bucket idle for its refill is full again: forgetting it then
        // changes nothing (a day at most: moka bounds the idle time).
        let refill = Duration::try_from_secs_f64(burst / per_second)
            .unwrap_or(Duration::MAX)
            .min(Duration::from_secs(86_400));
        ReviewBudget {
            per_second,
            burst,
            buckets: Cache::builder()
                .max_capacity(Self::KEYS)
                .time_to_idle(refill)
                .build(),
        }
    }

    /// The bound, in reviews per second and key.
    pub fn per_second(&self) -> f64 {
        self.per_second
    }

    /// Takes one review from `key`'s bucket: `false` when it is empty.
    pub async fn take(&self, key: K) -> bool {
        let now = Instant::now();
        let burst = self.burst;
        let bucket = self
            .buckets
            .get_with(key, async {
                Arc::new(Mutex::new(Bucket {
                    reviews: burst,
                    at: now,
                }))
            })
            .await;
        let mut bucket = bucket.lock();
        let refilled = now.saturating_duration_since(bucket.at).as_secs_f64() * self.per_second;
        bucket.reviews = (bucket.reviews + refilled).min(burst);
        bucket.at = now;
        if bucket.reviews < 1.0 {
            return false;
        }
        bucket.reviews -= 1.0;
        true
    }
}

/// Whose bucket a review not kept is taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payer {
    /// A client address: for a token not kept, and a request of
    /// `system:anonymous` not kept.
    Address(IpAddr),
    /// A signed-in user, by its digest: the one who asks, also for what it
    /// asks as a user it impersonates.
    User([u8; 32]),
    /// Nobody: a request that came over no socket, unbounded.
    Nobody,
}

/// The two kinds of bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    /// A client address.
    Address,
    /// A signed-in user.
    User,
}

impl Per {
    /// Its label in `kubecache_auth_reviews_refused_total`.
    pub fn label(self) -> &'static str {
        match self {
            Per::Address => "address",
            Per::User => "user",
        }
    }
}

/// The address a client is bounded by: itself, or its /64 for IPv6 (the
/// smallest prefix a host is usually given; an IPv4 client of a
/// dual-stack listener, `::ffff:a.b.c.d`, is itself).
pub fn address(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((v6.to_bits() & !u128::from(u64::MAX)).into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn taken(budget: &ReviewBudget<IpAddr>, peer: &str, tries: usize) -> usize {
        let mut taken = 0;
        for _ in 0..tries {
            taken += usize::from(budget.take(address(peer.parse().unwrap())).await);
        }
        taken
    }

    #[tokio::test(start_paused = true)]
    async fn each_key_gets_its_burst_then_the_rate() {
        let budget = ReviewBudget::new(5.0, 5.0);
        assert_eq!(taken(&budget, "10.0.0.1", 100).await, 5);
        assert_eq!(taken(&budget, "10.0.0.2", 100).await, 5, "its own bucket");
        tokio::time::advance(Duration::from_millis(400)).await;
        assert_eq!(taken(&budget, "10.0.0.1", 100).await, 2);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(
            taken(&budget, "10.0.0.1", 100).await,
            5,
            "no more than a burst"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_larger_than_the_rate_is_refilled_at_the_rate() {
        let budget = ReviewBudget::new(2.0, 10.0);
        assert_eq!(taken(&budget, "10.0.0.1", 100).await, 10);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(taken(&budget, "10.0.0.1", 100).await, 2);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(taken(&budget, "10.0.0.1", 100).await, 10);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_rate_still_allows_one() {
        let budget = ReviewBudget::new(0.5, 0.5);
        assert_eq!(taken(&budget, "10.0.0.1", 10).await, 1);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(taken(&budget, "10.0.0.1", 10).await, 1);
    }

    #[test]
    fn absurd_bounds_do_not_panic() {
        ReviewBudget::<u8>::new(1e-300, 1e300);
        ReviewBudget::<u8>::new(f64::MIN_POSITIVE, 1.0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_ipv6_host_is_bounded_by_its_prefix() {
        let budget = ReviewBudget::new(3.0, 3.0);
        assert_eq!(taken(&budget, "2001:db8::1", 2).await, 2);
        assert_eq!(taken(&budget, "2001:db8::ffff:2", 10).await, 1);
        assert_eq!(taken(&budget, "2001:db8:0:1::1", 10).await, 3);
        // IPv4 clients of a dual-stack listener are each their own.
        assert_eq!(taken(&budget, "::ffff:10.0.0.1", 10).await, 3);
        assert_eq!(taken(&budget, "::ffff:10.0.0.2", 10).await, 3);
        assert_eq!(taken(&budget, "10.0.0.2", 10).await, 0, "the same client");
    }
}
