//! kubecache's server: the Kubernetes API in front of the reflectors'
//! stores (reads of the cached resources from memory, everything else
//! passed through to the API server) and the query API.
//!
//! [`App`] is the composition root: it starts the reflectors and serves
//! them with the HTTP API ([`router`]) on a [`serving::Server`]; `main.rs`
//! and the integration tests both start kubecache through it.

mod app;
pub mod auth;
pub mod config;
#[cfg(feature = "simulate")]
pub mod demo;
pub mod error;
#[cfg(test)]
mod golden;
mod http;
mod metrics;
pub mod passthrough;
pub mod progress;
mod served;
pub mod serving;
pub mod warm_restart;

pub use app::{App, SHUTDOWN_GRACE};
pub use http::{health_router, router};
pub use passthrough::PassThrough;
pub use served::{Cache, Caches, Filter, Predicates, ServeSettings};
