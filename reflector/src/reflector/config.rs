//! How a reflector lists and watches: its strategy, page size, wire,
//! buffer, watch timeout, transform and filter.

use std::sync::Arc;
use std::time::Duration;

use super::RequestEncoding;
use kubecache_wire::{CachedObject, Transform};

/// How the initial state is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// List all pages, then watch.
    ListWatch,
    /// List page 1, watch at once, buffer events while the rest is listed.
    Parallel,
    /// As parallel, but the rest is read as namespaces at page 1's exact
    /// snapshot, several at once.
    Sharded,
    /// Streaming list (`sendInitialEvents`).
    Streaming,
    /// Streaming, or parallel where the server lacks streaming lists.
    #[default]
    Auto,
}

impl std::str::FromStr for Strategy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "list-watch" => Ok(Strategy::ListWatch),
            "parallel" => Ok(Strategy::Parallel),
            "sharded" => Ok(Strategy::Sharded),
            "streaming" => Ok(Strategy::Streaming),
            "auto" => Ok(Strategy::Auto),
            other => Err(format!(
                "unknown strategy {other:?}: expected list-watch, parallel, sharded, streaming or auto"
            )),
        }
    }
}

impl Strategy {
    /// The name used in config, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::ListWatch => "list-watch",
            Strategy::Parallel => "parallel",
            Strategy::Sharded => "sharded",
            Strategy::Streaming => "streaming",
            Strategy::Auto => "auto",
        }
    }
}

/// A predicate on whole objects: those it rejects are not cached. It is
/// called outside every lock; a panic in it fails the resource (not ready,
/// then retried: see [`UpstreamError::recovery`](super::UpstreamError::recovery)).
pub type ObjectFilter = Arc<dyn Fn(&CachedObject) -> bool + Send + Sync>;

/// How a reflector lists and watches.
#[derive(Clone)]
pub struct ReflectorConfig {
    /// The initial-list strategy.
    pub strategy: Strategy,
    /// Objects per list page (client-go and kube-runtime use 500).
    pub page_size: usize,
    /// Shards (namespaces) read at once by a sharded list.
    pub list_shards: usize,
    /// The encoding asked of the API server (protobuf for built-in kinds
    /// by default; the store keeps JSON either way).
    pub wire: RequestEncoding,
    /// Watch events buffered during a parallel list before it is abandoned
    /// for a relist (an overflow loses events, so it is never silent).
    pub buffer_limit: usize,
    /// `timeoutSeconds` of each watch. 290 s as kube-runtime (client-go
    /// picks 5–10 min): short enough to notice a dead connection, long
    /// enough that renewals are rare.
    pub watch_timeout: Duration,
    /// What is removed and indexed before objects are stored.
    pub transform: Transform,
    /// Keeps only the objects it accepts, for what selectors cannot say
    /// (e.g. "pods owned by a DaemonSet"). An object that stops being
    /// accepted is deleted from the cache, as a watch with a selector sees
    /// an object that leaves it.
    pub filter: Option<ObjectFilter>,
}

impl std::fmt::Debug for ReflectorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReflectorConfig")
            .field("strategy", &self.strategy)
            .field("page_size", &self.page_size)
            .field("list_shards", &self.list_shards)
            .field("wire", &self.wire)
            .field("buffer_limit", &self.buffer_limit)
            .field("watch_timeout", &self.watch_timeout)
            .field("transform", &self.transform)
            .field("filter", &self.filter.is_some())
            .finish()
    }
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        ReflectorConfig {
            strategy: Strategy::Auto,
            page_size: 500,
            list_shards: 4,
            wire: RequestEncoding::Auto,
            buffer_limit: 200_000,
            watch_timeout: Duration::from_secs(290),
            transform: Transform::default(),
            filter: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_parses_from_its_name_and_nothing_else_does() {
        for strategy in [
            Strategy::ListWatch,
            Strategy::Parallel,
            Strategy::Sharded,
            Strategy::Streaming,
            Strategy::Auto,
        ] {
            assert_eq!(strategy.as_str().parse::<Strategy>(), Ok(strategy));
        }
        assert!("shards".parse::<Strategy>().is_err());
    }
}
