//! Benchmarks of kubecache, side by side with its peers.
//!
//! - `benches/`: criterion micro-benchmarks (decode, store, index, list page),
//!   built on the realistic pods of [`fixtures`].
//! - [`procstat`]: what this process costs (RSS, CPU time), from `/proc`.
//! - `src/bin/kubecache-compare/`: the comparison harness, one process per
//!   contender against one simulated API server (see `README.md`).

pub mod fixtures;
pub mod procstat;
