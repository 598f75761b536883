//! What a watcher selects: every object, a namespace, a node, a label, or
//! one replica of a shard of the hash space (KEP-5866's `shardSelector`).

use std::fmt;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::targets::{ObjectFacts, Targets};
use crate::sim::ShardSelector;

/// What a watcher selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchFilter {
    /// Every object.
    All,
    /// One namespace (the namespaced path).
    Namespace(String),
    /// `fieldSelector=spec.nodeName=…`: a per-node agent.
    Node(String),
    /// `labelSelector=key=value`.
    Label(String, String),
    /// `shardSelector=…`: one replica of a sharded controller.
    Shard(Shard),
}

impl WatchFilter {
    /// Checks a filter kind's name.
    pub fn kind_from_name(name: &str) -> anyhow::Result<()> {
        match name {
            "all" | "namespace" | "node" | "label" => Ok(()),
            other => bail!(
                "watchFilters: unknown kind {other:?}; the kinds are all, namespace, node, label"
            ),
        }
    }

    /// A filter of `kind` with the values of one of the targets (the `i`th
    /// watcher's pick, spread over the objects).
    pub fn pick(kind: &str, targets: &Targets, i: usize) -> anyhow::Result<Self> {
        let object = targets.object(i.wrapping_mul(7919));
        Ok(match kind {
            "all" => WatchFilter::All,
            "namespace" => WatchFilter::Namespace(object.namespace.clone()),
            "node" => WatchFilter::Node(object.node.clone()),
            "label" => {
                let (key, value) = object.labels.iter().next().with_context(|| {
                    format!("{}/{} has no label", object.namespace, object.name)
                })?;
                WatchFilter::Label(key.clone(), value.clone())
            }
            other => bail!("watchFilters: unknown kind {other:?}"),
        })
    }

    /// Whether an object in this state is selected.
    pub fn matches(&self, object: &ObjectFacts) -> bool {
        match self {
            WatchFilter::All => true,
            WatchFilter::Namespace(ns) => &object.namespace == ns,
            WatchFilter::Node(node) => &object.node == node,
            WatchFilter::Label(key, value) => object.labels.get(key) == Some(value),
            WatchFilter::Shard(shard) => shard.matches(object),
        }
    }

    /// The watch request's path and query, from `rv`, for collection `path`;
    /// with bookmarks, as a reflector asks: a watcher whose filter matches
    /// little resumes from its last bookmark, not from an event older than
    /// the server's window (which would be 410 Gone).
    pub(super) fn watch_path(&self, path: &str, rv: u64) -> String {
        let encode = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let base = format!("watch=1&resourceVersion={rv}&allowWatchBookmarks=true");
        match self {
            WatchFilter::All => format!("{path}?{base}"),
            WatchFilter::Namespace(ns) => match path.rsplit_once('/') {
                Some((prefix, plural)) => format!("{prefix}/namespaces/{ns}/{plural}?{base}"),
                None => format!("{path}?{base}"),
            },
            WatchFilter::Node(node) => format!(
                "{path}?{base}&fieldSelector={}",
                encode(&format!("spec.nodeName={node}"))
            ),
            WatchFilter::Label(key, value) => {
                format!(
                    "{path}?{base}&labelSelector={}",
                    encode(&format!("{key}={value}"))
                )
            }
            WatchFilter::Shard(shard) => {
                format!("{path}?{base}&shardSelector={}", encode(&shard.selector))
            }
        }
    }
}

/// The field whose hash picks an object's shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShardBy {
    /// `metadata.uid`: objects spread evenly.
    Uid,
    /// `metadata.namespace`: a namespace's objects together.
    Namespace,
}

impl ShardBy {
    /// The field's path in a `shardSelector`.
    pub(super) fn path(self) -> &'static str {
        match self {
            ShardBy::Uid => "object.metadata.uid",
            ShardBy::Namespace => "object.metadata.namespace",
        }
    }
}

/// One replica of one shard: what it selects and where it stands.
#[derive(Clone, PartialEq, Eq)]
pub struct Shard {
    /// Which shard (from 0).
    pub index: usize,
    /// Which replica of the shard (from 0).
    pub replica: usize,
    /// The `shardSelector` sent.
    pub selector: String,
    /// The selector as the sim reads it.
    parsed: ShardSelector,
}

impl fmt::Debug for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard {} replica {}", self.index, self.replica)
    }
}

impl Shard {
    /// Replica `replica` of shard `index` of `count` equal ranges.
    pub(super) fn new(by: ShardBy, index: usize, count: usize, replica: usize) -> Self {
        let bound = |i: usize| (1u128 << 64) * i as u128 / count as u128;
        let selector = format!(
            "shardRange({}, '0x{:016x}', '0x{:016x}')",
            by.path(),
            bound(index),
            bound(index + 1)
        );
        let parsed = ShardSelector::parse(&selector).expect("equal ranges are a valid selector");
        Shard {
            index,
            replica,
            selector,
            parsed,
        }
    }

    /// Whether an object in this state is in the shard.
    pub fn matches(&self, object: &ObjectFacts) -> bool {
        self.parsed.matches(&object.uid, &object.namespace)
    }
}
