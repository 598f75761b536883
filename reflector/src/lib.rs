//! Upstream list/watch, the indexed store and the event log of kubecache.
//!
//! The Kubernetes wire types it reads (objects, watch events, `Status`,
//! protobuf) live in the `kubecache-wire` crate.

mod reflector;
mod store;
pub mod upstream;

pub use reflector::{
    ListReason, ObjectFilter, Reflector, ReflectorConfig, ReflectorStatus, Restored, Strategy,
};

pub use store::{
    ApplyingList, Change, Event, EventLogConfig, EventLogStatus, IndexLookup, IndexSpec, LoadError,
    LossyTransform, Readiness, RecvError, SaveStats, SavedState, Snapshot, StateFile, StoreClosed,
    StoreConfig, StoreConfigError, StoreNotNew, StoreReader, StoreWriter, Subscription, TooOld,
    TryRecvError, WaitTimeout, store,
};
