//! kubecache's server: the Kubernetes API in front of the reflectors'
//! stores (reads of the cached resources from memory, everything else
//! passed through to the API server) and the query API.
//!
//! [`App`] is the composition root: it starts the reflectors and serves
//! them with the HTTP API ([`router`]) on a [`transport::Server`]; `main.rs`
//! and the integration tests both start kubecache through it.

mod app;
pub mod auth;
mod cacher;
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
pub mod transport;
pub mod warm_restart;

pub use app::{App, SHUTDOWN_GRACE};
pub use cacher::{Cache, Caches, Filter, Predicates, ServeSettings};
pub use http::{health_router, router};
pub use passthrough::PassThrough;
