//! Upstream list/watch, the indexed store and the event log of kubecache.
//!
//! The Kubernetes wire types it reads (objects, watch events, `Status`,
//! protobuf) live in the `kubecache-wire` crate.

mod store;
pub mod upstream;

pub use store::{
    Change, Event, EventLogConfig, EventLogStatus, IndexLookup, IndexSpec, Readiness, RecvError,
    Snapshot, StoreClosed, StoreConfig, StoreConfigError, StoreReader, StoreWriter, Subscription,
    TooOld, TryRecvError, WaitTimeout, store,
};
