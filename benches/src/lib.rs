//! Benchmarks of kubecache live in `benches/benches/`; this library is intentionally empty.
