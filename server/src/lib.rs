//! kubecache's server: the Kubernetes-compatible read API and the query API
//! in front of the reflectors' stores.
//!
//! [`router`] builds the HTTP API over a set of [`Caches`]; `main.rs` wires
//! configuration, upstream, reflectors and the listener around it.

mod api;
mod cache;
pub mod config;
mod filter;
mod freshness;
mod metrics;
mod pages;
mod predicates;
pub mod progress;
mod table;
mod watch;

pub use api::router;
pub use cache::{Cache, Caches, ServeSettings};
pub use filter::Filter;
pub use predicates::Predicates;
