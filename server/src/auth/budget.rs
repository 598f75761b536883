//! A bound per client address on reviews of tokens kubecache does not
//! know, and of anonymous requests it has not judged: each address has a
//! token bucket, refilled at the set rate, and such a review takes one
//! from it. A client sending a new random token with each request, or
//! asking anonymously for a new path each time, gets 429s beyond the
//! bound, not a review each: the API server sees at most the bound per
//! address.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use moka::future::Cache;
use parking_lot::Mutex;
use tokio::time::Instant;

/// Reviews of unknown tokens and anonymous requests each client address
/// may still ask for.
pub struct ReviewBudget {
    per_second: f64,
    buckets: Cache<IpAddr, Arc<Mutex<Bucket>>>,
}

/// One address's bucket.
#[derive(Debug)]
struct Bucket {
    reviews: f64,
    at: Instant,
}

impl ReviewBudget {
    /// Addresses tracked at once: beyond them, the least asked ones are
    /// forgotten (and start again with a full bucket).
    const ADDRESSES: u64 = 100_000;

    /// `per_second` reviews per address and second, in bursts of as many
    /// (at least one).
    pub fn new(per_second: f64) -> Self {
        // A bucket idle for a burst's refill is full again: forgetting it
        // then changes nothing.
        let refill = Duration::from_secs_f64(per_second.max(1.0) / per_second);
        ReviewBudget {
            per_second,
            buckets: Cache::builder()
                .max_capacity(Self::ADDRESSES)
                .time_to_idle(refill)
                .build(),
        }
    }

    /// The bound, in reviews per second and address.
    pub fn per_second(&self) -> f64 {
        self.per_second
    }

    /// Takes one review from `peer`'s bucket: `false` when it is empty.
    /// IPv6 clients are bounded by /64, the smallest prefix a host is
    /// usually given.
    pub async fn take(&self, peer: IpAddr) -> bool {
        let burst = self.per_second.max(1.0);
        let now = Instant::now();
        let bucket = self
            .buckets
            .get_with(prefix(peer), async {
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

/// The address a client is bounded by: itself, or its /64 for IPv6 (an
/// IPv4 client of a dual-stack listener, `::ffff:a.b.c.d`, is itself).
fn prefix(peer: IpAddr) -> IpAddr {
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

    async fn taken(budget: &ReviewBudget, peer: &str, tries: usize) -> usize {
        let mut taken = 0;
        for _ in 0..tries {
            taken += usize::from(budget.take(peer.parse().unwrap()).await);
        }
        taken
    }

    #[tokio::test(start_paused = true)]
    async fn each_address_gets_its_burst_then_the_rate() {
        let budget = ReviewBudget::new(5.0);
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
    async fn a_slow_rate_still_allows_one() {
        let budget = ReviewBudget::new(0.5);
        assert_eq!(taken(&budget, "10.0.0.1", 10).await, 1);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(taken(&budget, "10.0.0.1", 10).await, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_ipv6_host_is_bounded_by_its_prefix() {
        let budget = ReviewBudget::new(3.0);
        assert_eq!(taken(&budget, "2001:db8::1", 2).await, 2);
        assert_eq!(taken(&budget, "2001:db8::ffff:2", 10).await, 1);
        assert_eq!(taken(&budget, "2001:db8:0:1::1", 10).await, 3);
        // IPv4 clients of a dual-stack listener are each their own.
        assert_eq!(taken(&budget, "::ffff:10.0.0.1", 10).await, 3);
        assert_eq!(taken(&budget, "::ffff:10.0.0.2", 10).await, 3);
        assert_eq!(taken(&budget, "10.0.0.2", 10).await, 0, "the same client");
    }
}
