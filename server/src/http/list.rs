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
//! `limit` is honoured but for resourceVersion `0`, where it is ignored and
//! everything sent at once, as kube-apiserver's watch cache does (1.28, and
//! every version since: `computeListLimit` in its `cacher.go`). All pages
//! of a list come from one held snapshot. Continue tokens are the API
//! server's ([`ContinueToken`]: its revision and the last key, relative to
//! the list's prefix), so a client may take a list on from one to the
//! other: a token whose snapshot is not held (gone, or one the API server
//! gave) gets the API server's 410 with an inconsistent continue token, and
//! one of `rv` -1 continues from its key at the current state.
//! `remainingItemCount` is the objects in the list's scope less those served
//! through the page's last key: a count the held list remembers for the
//! tokens it gave (see `cacher::pages`); only a token it did not give (the
//! API server's, or an `rv` -1 one) has the rest counted.
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
use kubecache_reflector::{Snapshot, TryRecvError};
use kubecache_wire::continue_token::{self, ContinueToken};
use kubecache_wire::list_options::{CollectionParams, VersionMatch};
use kubecache_wire::media::Form;
use kubecache_wire::{CachedObject, Encoding, ObjectKey, Status};

use super::bodies::{self, ListMeta, json_response, response};
use super::negotiate::Rendering;
use super::offload;
use super::table::{self, TableMeta};
use crate::cacher::encoding::Shape;
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
    // its own), and the limit.
    let (snapshot, waited, limit) = match (&params.continue_token, params.resource_version) {
        (Some(token), _) if token.rv > 0 => {
            let rv = token.rv as u64;
            let snapshot = continued(cache, rv).ok_or_else(|| continue_token::expired(token))?;
            (snapshot, rv, params.limit)
        }
        // The inconsistent continuation of an expired list: the rest of
        // the current state.
        (Some(_), _) => (cache.reader.snapshot(), 0, params.limit),
        (None, None) => {
            let proven = if own_write {
                0
            } else {
                caches.consistent(cache).await?
            };
            (cache.reader.snapshot(), proven, params.limit)
        }
        (None, Some(0)) if params.version_match != VersionMatch::Exact => {
            (cache.reader.snapshot(), 0, 0)
        }
        (None, Some(rv))
            if params.version_match == VersionMatch::Exact
                || (params.version_match == VersionMatch::Unset && params.limit > 0) =>
        {
            (snapshot_at(cache, rv, wait).await?, rv, params.limit)
        }
        (None, Some(rv)) => {
            cache.freshness.not_older_than(rv, wait).await?;
            (cache.reader.snapshot(), rv, params.limit)
        }
    };
    let resource_version = snapshot.resource_version().max(waited);
    let after = params
        .continue_token
        .as_ref()
        .map(|token| start_key(filter, token));
    let before = match (&params.continue_token, &after) {
        (Some(token), Some(key)) if token.rv > 0 => {
            cache
                .pages
                .served_through(resource_version, filter.namespace.as_deref(), key)
        }
        (Some(_), _) => None,
        (None, _) => Some(0),
    };
    let page = Page {
        owner: flow.owner,
        resource_version,
        limit,
        after,
        before,
    };
    // A large list waits for its seat (its consistent read done).
    let seat = caches
        .seats
        .take(page.sent(filter, &snapshot), flow)
        .await?;
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

/// One page of `owner`'s list: at most `limit` objects (0: all) after `after`.
struct Page {
    owner: Option<Owner>,
    /// The resourceVersion the list is served at.
    resource_version: u64,
    limit: usize,
    after: Option<ObjectKey>,
    /// How many objects the list served before this page, when known: 0
    /// for a first page, remembered for a token kubecache gave.
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

    /// What serving the page costs: objects examined (every candidate when
    /// a selector examines those it skips, or when the objects after the
    /// page are counted), and rows rendered.
    fn work(&self, filter: &Filter, snapshot: &Snapshot, rendering: Rendering) -> offload::Work {
        let served = self.sent(filter, snapshot);
        offload::Work {
            examined: if filter.requires() || self.before.is_none() {
                filter.candidate_count(snapshot)
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
            let rv = self.resource_version as i64;
            let relative = match filter.namespace {
                Some(_) => last.key.name(),
                None => last.key.as_str(),
            };
            meta.continue_token = Some(ContinueToken::after(rv, relative).encode());
            cache
                .pages
                .hold(self.owner, self.resource_version, snapshot);
            if !filter.requires() {
                // Without selectors the candidates are the list's scope.
                let total = filter.candidate_count(snapshot);
                let remaining = match self.before {
                    Some(before) => total.saturating_sub(before + items.len()),
                    None => filter.select(snapshot, Some(&last.key)).count(),
                };
                meta.remaining = Some(remaining);
                let served = total - remaining;
                cache.pages.passed(
                    self.owner,
                    self.resource_version,
                    filter.namespace.as_deref(),
                    &last.key,
                    served,
                );
            }
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
            match bodies::list(&cache.kind, &meta, items, shape, encoding) {
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

/// The key a continued list starts after: the token's, relative to the
/// list's prefix (its namespace's, or the resource's), so that, as etcd
/// reads it, any token is good on any list (a token of an all-namespaces
/// list on one namespace starts there by its whole key).
fn start_key(filter: &Filter, token: &ContinueToken) -> ObjectKey {
    ObjectKey::new(filter.namespace.as_deref().unwrap_or(""), token.last_key())
}
