//! What a store is told at start-up: its field indexes and how much history
//! its event log keeps.

use std::time::Duration;

/// The configuration of one resource's store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreConfig {
    /// The custom field indexes, in the order in which
    /// [`CachedObject::fields`](kubecache_wire::CachedObject::fields) holds their values.
    pub field_indexes: Vec<IndexSpec>,
    /// How much history the event log keeps.
    pub event_log: EventLogConfig,
}

impl StoreConfig {
    /// Checks what the store cannot work with: a field index without a
    /// name, two with the same name (lookups by name would be ambiguous),
    /// an event log that keeps nothing.
    ///
    /// # Errors
    ///
    /// [`StoreConfigError`], naming the offending field.
    pub fn validate(&self) -> Result<(), StoreConfigError> {
        for (i, spec) in self.field_indexes.iter().enumerate() {
            if spec.name.is_empty() {
                return Err(StoreConfigError(format!(
                    "field_indexes[{i}].name: must not be empty (path {:?})",
                    spec.path
                )));
            }
            if self.field_indexes[..i].iter().any(|s| s.name == spec.name) {
                return Err(StoreConfigError(format!(
                    "field_indexes[{i}].name: {:?} is used by an earlier index",
                    spec.name
                )));
            }
        }
        if self.event_log.max_events == 0 {
            return Err(StoreConfigError(
                "event_log.max_events: must be at least 1, or no watch could follow the store"
                    .into(),
            ));
        }
        if self.event_log.max_age.is_zero() {
            return Err(StoreConfigError(
                "event_log.max_age: must be longer than zero, or no watch could follow the store"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// A store configuration that cannot work; the message names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid store configuration: {0}")]
pub struct StoreConfigError(pub String);

/// One custom field index: a name and the field path its values come from.
///
/// The store never reads `path`: the values arrive precomputed in
/// [`CachedObject::fields`](kubecache_wire::CachedObject::fields), at this spec's
/// position in [`StoreConfig::field_indexes`]. The path is carried so that
/// status pages and field-selector planning can say which field an index
/// serves (e.g. `spec.nodeName`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexSpec {
    /// The name index queries use (`/v1/{resource}/index/{name}/{value}`).
    pub name: String,
    /// The field path, e.g. `spec.nodeName` or `status.phase`.
    pub path: String,
}

/// Bounds of the event log: an event leaves the ring when either bound is
/// exceeded.
///
/// Every event pins the object versions it refers to. A `MODIFIED` event
/// keeps the superseded version alive until the event leaves the ring, so
/// under churn the log costs up to `max_events` x the average object size on
/// top of the store; size `max_events` with that in mind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventLogConfig {
    /// Most events kept. Default [`EventLogConfig::DEFAULT_MAX_EVENTS`].
    pub max_events: usize,
    /// Oldest event kept. Default [`EventLogConfig::DEFAULT_MAX_AGE`].
    pub max_age: Duration,
}

impl EventLogConfig {
    /// 102,400 events: the upper bound of kube-apiserver's watch cache
    /// (`defaultUpperBoundCapacity = 100 * 1024` in
    /// `staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go`), so
    /// a busy resource keeps at least as much history here as behind a real
    /// API server. Events of an unchanged object share its bytes with the
    /// store; only superseded versions cost extra (see the type's doc).
    pub const DEFAULT_MAX_EVENTS: usize = 100 * 1024;

    /// Five minutes: kube-apiserver's default etcd compaction interval
    /// (`--etcd-compaction-interval=5m`). A client whose resourceVersion the
    /// API server can still serve from etcd is, by default, also served
    /// here instead of being sent to relist.
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(5 * 60);
}

impl Default for EventLogConfig {
    fn default() -> Self {
        EventLogConfig {
            max_events: Self::DEFAULT_MAX_EVENTS,
            max_age: Self::DEFAULT_MAX_AGE,
        }
    }
}
