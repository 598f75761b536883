//! Exponential backoff with full jitter, so that many kubecache replicas
//! hitting the same failing API server do not retry in lock step.

use std::time::Duration;

use rand::Rng;

/// Backoff state of one reflector.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    attempt: u32,
}

impl Default for Backoff {
    /// 800 ms doubling to 30 s: client-go's reflector backs off from 800 ms
    /// to 30 s, and kube-runtime's default watcher backoff is the same.
    fn default() -> Self {
        Backoff::new(Duration::from_millis(800), Duration::from_secs(30))
    }
}

impl Backoff {
    /// Starts at `initial`, doubles per failure, never exceeds `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            attempt: 0,
        }
    }

    /// The next delay: uniformly random in [ceiling/2, ceiling], where the
    /// ceiling doubles each time, and at least `floor` (a `Retry-After`).
    pub fn next(&mut self, floor: Option<Duration>) -> Duration {
        let ceiling = self
            .initial
            .saturating_mul(1 << self.attempt.min(16))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let jittered = rand::rng().random_range(ceiling / 2..=ceiling);
        jittered.max(floor.unwrap_or_default())
    }

    /// Back to the initial delay after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_cap_and_honour_retry_after() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let first = backoff.next(None);
        assert!((Duration::from_millis(50)..=Duration::from_millis(100)).contains(&first));
        for _ in 0..10 {
            assert!(backoff.next(None) <= Duration::from_secs(1));
        }
        assert!(
            backoff.next(None) >= Duration::from_millis(500),
            "stays near the cap"
        );
        assert_eq!(
            backoff.next(Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        backoff.reset();
        assert!(backoff.next(None) <= Duration::from_millis(100));
    }
}
