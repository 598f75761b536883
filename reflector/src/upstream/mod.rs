//! The API server client: requests ([`Upstream`], [`Query`]), their
//! answers read as bytes (lists, pages, watch events: `wire.rs`), what a
//! resource is ([`ApiResource`]), every failure with the one decision table
//! from a failure to what the reflector does next ([`UpstreamError::recovery`]),
//! and the backoff between tries. The reflector (`crate::reflector`) drives
//! it.

mod backoff;
mod client;
mod error;
mod resource;
mod wire;

pub use backoff::Backoff;
pub use client::{Query, Upstream, WatchEvents, server_version};
pub use error::{Phase, Recovery, UpstreamError};
pub use resource::{ApiResource, ResourceSpec};
pub use wire::{ListResponse, Page, RequestEncoding, WatchEvent};
pub(crate) use wire::{error_event, undecodable_event};
