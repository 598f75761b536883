//! Samples of a Prometheus text (`/metrics`), read by tests.

/// The value of `series` (a name with its labels as the exporter writes
/// them, `kubecache_watchers{resource="pods"}`) in `text`, if present.
pub fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|n| {
            n.trim()
                .parse()
                .unwrap_or_else(|e| panic!("{series}: {n}: {e}"))
        })
}
