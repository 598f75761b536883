//! Lists: `GET` of a cached collection without `watch`.
//!
//! # resourceVersion semantics
//!
//! kubecache holds the current state, not a history of states, so it serves
//! every list from a snapshot of the store:
//! - unset: a consistent read (see [`crate::cacher::freshness`]): the store
//!   catches up with the API server's current resourceVersion first; the
//!   writer's next read after its write through kubecache waits for that
//!   write only, as with `N` = the write's resourceVersion and
//!   `NotOlderThan` (see [`crate::cacher::writes`]);
//! - `0` ("any"): the store as it is, no waiting;
//! - `N` with `NotOlderThan` (or `N` without a limit, the legacy rule): the
//!   store once it has reached `N` (504 after the read-wait timeout);
//! - `N` with `Exact` (or `N` with a limit and no match, the legacy rule):
//!   the store's state at `N`, which kubecache has when nothing changed
//!   between `N` and now, and 410 `Expired` otherwise (clients relist).
//!
//! `limit` is honoured for every resourceVersion, `0` included (the API
//! server ignores it there and sends everything at once; paging is cheap
//! here, and a client must accept either). All pages of a list come from
//! one held snapshot; a continue token whose snapshot is no longer held gets
//! the API server's 410 with an inconsistent continue token.
//!
//! Every response says the resourceVersion it was served at, in its
//! metadata (a Table's too), its continue token and the
//! `X-Kubecache-Resource-Version` header: the newest one whose state the
//! snapshot is known to be. That is the snapshot's own resourceVersion, or
//! the one the read waited for when it is newer: the API server's current
//! one that a consistent read proved (kube-apiserver answers a consistent
//! list with the etcd revision it read at, which writes to other resources
//! move), the `N` of `NotOlderThan` (never an answer older than asked), the
//! `N` of `Exact`. The store was complete through it before the snapshot
//! was taken, so nothing changed between the snapshot's resourceVersion and
//! it. A held snapshot is found by that resourceVersion, the one its
//! continue token carries.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use kubecache_reflector::{IndexLookup, Snapshot, TryRecvError};
use kubecache_wire::list_options::{
    CollectionParams, ContinueToken, VersionMatch, expired_continue,
};
use kubecache_wire::media::Form;
use kubecache_wire::{CachedObject, Encoding, ObjectKey, Status};

use super::bodies::{self, ListMeta, json_response, response};
use super::negotiate::Rendering;
use super::offload;
use super::table::{self, TableMeta};
use crate::cacher::encoding::{Kind, Shape};
use crate::cacher::{Cache, Caches, Filter, Flow, Owner};
use crate::error::{self, ApiError};

/// A list of `cache`'s objects that `filter` selects, with `params`, for
/// `flow`; `own_write`: the client's first read after its write, which
/// needs no consistent read.
pub async fn serve(
    caches: &Caches,
    cache: &Arc<Cache>,
    filter: &Filter,
    params: &CollectionParams,
    rendering: Rendering,
    flow: Flow,
    own_write: bool,
) -> Result<Response, ApiError> {
    let wait = caches.settings.read_wait;
    // The snapshot, the resourceVersion it is served at beyond its own (0:
    // its own), and the objects served before it.
    let (snapshot, waited, before) = match (&params.continue_token, params.resource_version) {
        (Some(token), _) if token.rv >= 0 => {
            let rv = token.rv as u64;
            let snapshot = continued(cache, rv).ok_or_else(|| expired_continue(&token.start))?;
            (snapshot, rv, token.n)
        }
        // The inconsistent continuation of an expired list: the rest of
        // the current state.
        (Some(_), _) => (cache.reader.snapshot(), 0, None),
        (None, None) => {
            let proven = if own_write {
                0
            } else {
                caches.consistent(cache).await?
            };
            (cache.reader.snapshot(), proven, Some(0))
        }
        (None, Some(0)) if params.version_match != VersionMatch::Exact => {
            (cache.reader.snapshot(), 0, Some(0))
        }
        (None, Some(rv))
            if params.version_match == VersionMatch::Exact
                || (params.version_match == VersionMatch::Unset && params.limit > 0) =>
        {
            (snapshot_at(cache, rv, wait).await?, rv, Some(0))
        }
        (None, Some(rv)) => {
            cache.freshness.not_older_than(rv, wait).await?;
            (cache.reader.snapshot(), rv, Some(0))
        }
    };
    let page = Page {
        owner: flow.owner,
        resource_version: snapshot.resource_version().max(waited),
        limit: params.limit,
        after: params
            .continue_token
            .as_ref()
            .map(|token| object_key(token.last_key())),
        before,
    };
    // A large list waits for its seat (its consistent read done).
    let seat = caches.seats.take(page.sent(filter, &snapshot), flow).await;
    let response = if offload::is_heavy(page.work(filter, &snapshot, rendering)) {
        let (cache, filter) = (cache.clone(), filter.clone());
        offload::run(move || page.serve(&cache, &snapshot, &filter, rendering)).await
    } else {
        page.serve(cache, &snapshot, filter, rendering)
    };
    Ok(match seat {
        Some(seat) => bodies::seated(response, seat),
        None => response,
    })
}

/// The snapshot a list continues from at `rv`: held, or the store as it is
/// if it holds the state at `rv` (it was complete through `rv` and has not
/// changed since).
fn continued(cache: &Cache, rv: u64) -> Option<Snapshot> {
    cache.pages.find(rv).or_else(|| {
        let complete = cache.freshness.complete_through();
        let current = cache.reader.snapshot();
        let own = current.resource_version();
        (own..=complete.max(own)).contains(&rv).then_some(current)
    })
}

/// One page of `owner`'s list: at most `limit` objects (0: all) after `after`,
/// `before` objects of the list having been served before it (`None` when
/// not known: an inconsistent continuation).
struct Page {
    owner: Option<Owner>,
    /// The resourceVersion the list is served at.
    resource_version: u64,
    limit: usize,
    after: Option<ObjectKey>,
    before: Option<usize>,
}

impl Page {
    /// At most how many objects the page sends.
    fn sent(&self, filter: &Filter, snapshot: &Snapshot) -> usize {
        let limit = if self.limit == 0 {
            usize::MAX
        } else {
            self.limit
        };
        filter.candidate_count(snapshot).min(limit)
    }

    /// What serving the page costs: objects examined, and rows rendered.
    fn work(&self, filter: &Filter, snapshot: &Snapshot, rendering: Rendering) -> offload::Work {
        let candidates = filter.candidate_count(snapshot);
        let served = self.sent(filter, snapshot);
        offload::Work {
            examined: if filter.requires() {
                candidates
            } else {
                served
            },
            rendered: match rendering {
                Rendering::Encoded(..) => 0,
                Rendering::Table { .. } => served,
            },
        }
    }

    /// The page of `snapshot` that `filter` selects, rendered; its snapshot
    /// held for the next page if there is one.
    fn serve(
        &self,
        cache: &Cache,
        snapshot: &Snapshot,
        filter: &Filter,
        rendering: Rendering,
    ) -> Response {
        let mut selected = filter.select(snapshot, self.after.as_ref());
        let mut items: Vec<Arc<CachedObject>> = Vec::new();
        for object in selected.by_ref() {
            items.push(object.clone());
            if items.len() == self.limit {
                break;
            }
        }
        let more = items.len() == self.limit && selected.next().is_some();
        drop(selected);
        let mut meta = ListMeta {
            resource_version: self.resource_version,
            shard_selector: filter.shards.as_ref().map(ToString::to_string),
            ..ListMeta::default()
        };
        if more && let Some(last) = items.last() {
            let served = self.before.map(|n| n + items.len());
            let rv = self.resource_version as i64;
            meta.continue_token =
                Some(ContinueToken::after(rv, last.key.as_str(), served).encode());
            if let Some(served) = served.filter(|_| !filter.requires()) {
                let total = match filter.namespace.as_deref() {
                    Some(ns) => snapshot.index_len(IndexLookup::Namespace(ns)),
                    None => snapshot.len(),
                };
                meta.remaining = Some(total.saturating_sub(served));
            }
            cache
                .pages
                .hold(self.owner, self.resource_version, snapshot);
        }
        render(cache, meta, items, rendering)
    }
}

/// The list response of `items` with `meta`, as negotiated.
fn render(
    cache: &Cache,
    meta: ListMeta,
    items: Vec<Arc<CachedObject>>,
    rendering: Rendering,
) -> Response {
    let resource_version = meta.resource_version;
    match rendering {
        Rendering::Encoded(shape, encoding) => {
            match bodies::list(&Kind::of(cache), &meta, items, shape, encoding) {
                Ok(chunks) => response(bodies::stream(chunks), resource_version, encoding, false),
                Err(status) => error::render(&status, Some((encoding, Form::Compact))),
            }
        }
        Rendering::Table { version, include } => {
            let meta = TableMeta {
                resource_version: Some(resource_version),
                continue_token: meta.continue_token,
                remaining: meta.remaining,
                shard_selector: meta.shard_selector,
            };
            let table = table::render(
                &cache.resource,
                version,
                include,
                &meta,
                &items,
                chrono::Utc::now(),
            );
            json_response(Body::from(table), resource_version)
        }
    }
}

/// A JSON list response of `items` with `meta` (the query API's lookups).
pub(super) fn list_response(
    cache: &Cache,
    meta: ListMeta,
    items: Vec<Arc<CachedObject>>,
) -> Response {
    render(
        cache,
        meta,
        items,
        Rendering::Encoded(Shape::Object, Encoding::Json),
    )
}

/// The store's state at exactly `rv`: the current snapshot, if nothing
/// changed after `rv` (waiting for `rv` first if the store is behind it).
async fn snapshot_at(
    cache: &Cache,
    rv: u64,
    wait: std::time::Duration,
) -> Result<Snapshot, Status> {
    if let Some(held) = cache.pages.find(rv) {
        return Ok(held);
    }
    cache.freshness.not_older_than(rv, wait).await?;
    let snapshot = cache.reader.snapshot();
    let too_old = || Status::expired("The resourceVersion for the provided list is too old.");
    let mut changes = cache.reader.subscribe_from(rv).map_err(|_| too_old())?;
    match changes.try_recv() {
        Err(TryRecvError::Empty | TryRecvError::Closed) => Ok(snapshot),
        Ok(change) if change.resource_version > snapshot.resource_version() => Ok(snapshot),
        _ => Err(too_old()),
    }
}

/// The key of `namespace/name` (or `name`, cluster-scoped) as in a
/// continue token.
fn object_key(key: &str) -> ObjectKey {
    match key.split_once('/') {
        Some((namespace, name)) => ObjectKey::new(namespace, name),
        None => ObjectKey::new("", key),
    }
}
