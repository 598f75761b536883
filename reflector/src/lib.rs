//! Upstream list/watch, the indexed store and the event log of kubecache.
