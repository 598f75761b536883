//! kubecache's server: the Kubernetes API in front of the reflectors'
//! stores (reads of the cached resources from memory, everything else
//! passed through to the API server) and the query API.
//!
//! [`router`] builds the HTTP API over a set of [`ServedResources`]; `main.rs` wires
//! configuration, upstream, reflectors and the [`serving::Server`] around it.

pub mod auth;
pub mod config;
#[cfg(test)]
mod golden;
mod http;
mod metrics;
pub mod passthrough;
pub mod progress;
mod served;
pub mod serving;
pub mod warm_restart;

pub use http::router;
pub use passthrough::PassThrough;
pub use served::{Filter, Predicates, ServeSettings, ServedResource, ServedResources};
