//! Latency percentiles: of the requests, of the writes, of delivery.

use serde::Serialize;

/// Latency percentiles, in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Slowest.
    pub max_ms: f64,
}

impl Latency {
    /// Percentiles of `samples` (microseconds; sorted in place).
    pub(super) fn of(samples: &mut [u64]) -> Self {
        samples.sort_unstable();
        let at = |q: f64| percentile_ms(samples, q);
        if samples.is_empty() {
            return Latency::default();
        }
        Latency {
            count: samples.len(),
            p50_ms: at(0.50),
            p90_ms: at(0.90),
            p99_ms: at(0.99),
            max_ms: samples[samples.len() - 1] as f64 / 1e3,
        }
    }
}

/// The `q` quantile (nearest rank) of sorted microsecond `samples`, in
/// milliseconds; 0 without samples.
pub(crate) fn percentile_ms(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1e3
}
