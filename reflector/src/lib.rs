//! Upstream list/watch, the indexed store and the event log of kubecache.
//!
//! Also home of the Kubernetes wire types that the server and the simulated
//! API server share: [`Status`], selectors and the protobuf envelope.

mod decode;
pub mod list_options;
mod object;
pub mod protobuf;
mod selector;
mod status;
mod store;
pub mod upstream;

pub use decode::{
    Bookmark, DecodeError, FieldPath, FieldPathError, ListBody, Transform, WatchEventType,
    WatchLine, decode_object, parse_list, parse_watch_line, peek_object_key,
};
pub use object::{CachedObject, ObjectKey};
pub use selector::{
    FieldOperator, FieldRequirement, FieldSelector, LabelOperator, LabelRequirement, LabelSelector,
    SelectorError,
};
pub use status::{Status, StatusCause, StatusDetails, StatusMetadata};
pub use store::{
    Change, Event, EventKind, EventLogConfig, EventLogStatus, IndexLookup, IndexSpec, Readiness,
    RecvError, Snapshot, StoreClosed, StoreConfig, StoreConfigError, StoreReader, StoreWriter,
    Subscription, TooOld, TryRecvError, WaitTimeout, store,
};
