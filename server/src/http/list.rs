//! GET of a collection (list, or watch with `watch=1`) and of one object.
//!
//! # resourceVersion semantics
//!
//! kubecache holds the current state, not a history of states, so it serves
//! every read from a snapshot of the store:
//! - unset: a consistent read (see [`crate::served::freshness`]): the store catches
//!   up with the API server's current resourceVersion first; a GET of one
//!   object that would wait for a cold probe is passed through to the API
//!   server instead ([`Answer::Upstream`], unless
//!   `--cold-get-passthrough=false`), a list waits; the writer's next read
//!   after its write through kubecache waits for that write only, as with
//!   `N` = the write's resourceVersion and `NotOlderThan` (see
//!   [`crate::served::writes`]);
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
//! Every response says the resourceVersion it was served at: a list in its
//! metadata, both in the `X-Kubecache-Resource-Version` header.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use kubecache_reflector::{IndexLookup, Snapshot, TryRecvError};
use kubecache_wire::list_options::{
    CollectionParams, ContinueToken, VersionMatch, expired_continue,
};
use kubecache_wire::{CachedObject, FieldSelector, ObjectKey, Status};

use super::Caller;
use super::bodies::{self, ListMeta};
use super::error::{self, ApiError, not_ready};
use super::negotiate::Rendering;
use super::offload;
use super::path::ResourcePath;
use crate::http::table::{self, TableMeta};
use crate::served::encoding::{Kind, Shape, Wire};
use crate::served::freshness::Consistent;
use crate::served::{Filter, Owner, Predicates};
use crate::served::{ServedResource, ServedResources};

/// The header that says which resourceVersion a response was served at.
pub const RESOURCE_VERSION_HEADER: &str = "x-kubecache-resource-version";

/// The list/watch parameters of `query` on the collection of `target`,
/// with at most `max_requirements` selector requirements. A deprecated
/// watch path that names an object watches it alone, as kube-apiserver
/// narrows it: by `metadata.name`.
///
/// # Errors
///
/// 400 or 422 for what does not parse, is not supported or selects by too
/// many requirements.
pub fn collection_params(
    target: &ResourcePath,
    query: &str,
    max_requirements: usize,
) -> Result<CollectionParams, Status> {
    let cache = &target.cache;
    // The fields of the cache's own selector may be named too: every cached
    // object meets those requirements (`serve` drops them before filtering).
    let mut supported = Filter::supported_fields(&cache.indexes);
    supported.extend(cache.scope.field_paths());
    let mut params = if target.watch {
        CollectionParams::parse_watch_path(query, &supported)?
    } else {
        CollectionParams::parse(query, &supported)?
    };
    if let (true, Some(name)) = (target.watch, &target.name) {
        if params.fields.is_empty() {
            params.fields = FieldSelector::named(name);
        } else if !params
            .fields
            .equalities()
            .any(|(field, value)| field == "metadata.name" && value == name)
        {
            return Err(Status::bad_request(
                "fieldSelector metadata.name doesn't match requested name",
            ));
        }
    }
    let requirements = params.labels.requirements().len() + params.fields.requirements().len();
    if requirements > max_requirements {
        return Err(Status::bad_request(format!(
            "the label and field selectors have {requirements} requirements together; \
             kubecache allows at most {max_requirements} (--max-selector-requirements)"
        )));
    }
    Ok(params)
}

/// What a read of a cache came to.
pub enum Answer {
    /// Served from the cache.
    Served(Response),
    /// A consistent GET of one object the cache could not prove fresh
    /// without waiting for a cold probe (see [`crate::served::freshness`]):
    /// the API server answers it, through pass-through.
    Upstream,
}

/// `GET` of a resource path by `caller`, once its own writes are in the
/// cache: one object, or the collection with `params` (from
/// [`collection_params`]; `None` for one object).
pub async fn serve(
    caches: &ServedResources,
    target: ResourcePath,
    query: &str,
    params: Option<CollectionParams>,
    rendering: Rendering,
    predicates: Predicates,
    caller: Caller,
) -> Result<Answer, ApiError> {
    let cache = &target.cache;
    if let kubecache_reflector::Readiness::NotReady { reason } = cache.reader.readiness() {
        return Err(not_ready(&cache.name(), &reason));
    }
    // The writer's first read after its write needs only that write.
    let own_write = cache
        .read_your_writes(caller.writer, caches.settings.read_wait)
        .await?;
    let Some(mut params) = params else {
        let name = target.name.as_deref().unwrap_or_default();
        return get(
            caches,
            cache,
            target.namespace.as_deref(),
            name,
            query,
            rendering,
            own_write,
        )
        .await;
    };
    params.fields = cache.scope.residual(params.fields);
    let predicates = predicates.union(query_predicates(query)?);
    let filter = Filter::new(
        target.namespace,
        std::mem::take(&mut params.labels),
        std::mem::take(&mut params.fields),
        cache.indexes.clone(),
    );
    if params.watch {
        return super::watch::serve(
            caches,
            cache,
            filter,
            params,
            predicates,
            rendering,
            caller.owner,
        )
        .await
        .map(Answer::Served);
    }
    list(
        caches,
        cache,
        &filter,
        &params,
        rendering,
        caller.owner,
        own_write,
    )
    .await
    .map(Answer::Served)
}

/// The `predicates` query parameter.
fn query_predicates(query: &str) -> Result<Predicates, Status> {
    form_urlencoded::parse(query.as_bytes())
        .filter(|(key, _)| key == "predicates")
        .try_fold(Predicates::default(), |all, (_, value)| {
            Ok(all.union(Predicates::parse(&value)?))
        })
}

async fn list(
    caches: &ServedResources,
    cache: &Arc<ServedResource>,
    filter: &Filter,
    params: &CollectionParams,
    rendering: Rendering,
    owner: Option<Owner>,
    own_write: bool,
) -> Result<Response, ApiError> {
    let wait = caches.settings.read_wait;
    let (snapshot, before) = match (&params.continue_token, params.resource_version) {
        (Some(token), _) if token.rv >= 0 => {
            let snapshot =
                continued(cache, token.rv as u64).ok_or_else(|| expired_continue(&token.start))?;
            (snapshot, token.n)
        }
        // The inconsistent continuation of an expired list: the rest of
        // the current state.
        (Some(_), _) => (cache.reader.snapshot(), None),
        (None, None) => {
            if !own_write {
                caches.consistent(cache).await?;
            }
            (cache.reader.snapshot(), Some(0))
        }
        (None, Some(0)) if params.version_match != VersionMatch::Exact => {
            (cache.reader.snapshot(), Some(0))
        }
        (None, Some(rv))
            if params.version_match == VersionMatch::Exact
                || (params.version_match == VersionMatch::Unset && params.limit > 0) =>
        {
            (snapshot_at(cache, rv, wait).await?, Some(0))
        }
        (None, Some(rv)) => {
            cache.freshness.not_older_than(rv, wait).await?;
            (cache.reader.snapshot(), Some(0))
        }
    };
    let page = Page {
        owner,
        limit: params.limit,
        after: params
            .continue_token
            .as_ref()
            .map(|token| object_key(token.last_key())),
        before,
    };
    if !offload::is_heavy(page.work(filter, &snapshot, rendering)) {
        return Ok(page.serve(cache, &snapshot, filter, rendering));
    }
    let (cache, filter) = (cache.clone(), filter.clone());
    Ok(offload::run(move || page.serve(&cache, &snapshot, &filter, rendering)).await)
}

/// The snapshot a list continues from at `rv`: held, or the store as it is
/// if it has not changed since.
fn continued(cache: &ServedResource, rv: u64) -> Option<Snapshot> {
    cache.pages.find(rv).or_else(|| {
        let current = cache.reader.snapshot();
        (current.resource_version() == rv).then_some(current)
    })
}

/// One page of `owner`'s list: at most `limit` objects (0: all) after `after`,
/// `before` objects of the list having been served before it (`None` when
/// not known: an inconsistent continuation).
struct Page {
    owner: Option<Owner>,
    limit: usize,
    after: Option<ObjectKey>,
    before: Option<usize>,
}

impl Page {
    /// What serving the page costs: objects examined, and rows rendered.
    fn work(&self, filter: &Filter, snapshot: &Snapshot, rendering: Rendering) -> offload::Work {
        let candidates = filter.candidate_count(snapshot);
        let limit = if self.limit == 0 {
            usize::MAX
        } else {
            self.limit
        };
        let served = candidates.min(limit);
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
        cache: &ServedResource,
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
            resource_version: snapshot.resource_version(),
            continue_token: None,
            remaining: None,
        };
        if more && let Some(last) = items.last() {
            let served = self.before.map(|n| n + items.len());
            let rv = snapshot.resource_version() as i64;
            meta.continue_token =
                Some(ContinueToken::after(rv, last.key.as_str(), served).encode());
            if let Some(served) = served.filter(|_| !filter.requires()) {
                let total = match filter.namespace.as_deref() {
                    Some(ns) => snapshot.index_len(IndexLookup::Namespace(ns)),
                    None => snapshot.len(),
                };
                meta.remaining = Some(total.saturating_sub(served));
            }
            cache.pages.hold(self.owner, snapshot);
        }
        render(cache, meta, items, rendering)
    }
}

/// The list response of `items` with `meta`, as negotiated.
fn render(
    cache: &ServedResource,
    meta: ListMeta,
    items: Vec<Arc<CachedObject>>,
    rendering: Rendering,
) -> Response {
    let resource_version = meta.resource_version;
    match rendering {
        Rendering::Encoded(shape, wire) => {
            match bodies::list(&Kind::of(cache), &meta, items, shape, wire) {
                Ok(chunks) => response(bodies::stream(chunks), resource_version, wire, false),
                Err(status) => error::render(&status, Some(wire)),
            }
        }
        Rendering::Table { version, include } => {
            let meta = TableMeta {
                resource_version: Some(resource_version),
                continue_token: meta.continue_token,
                remaining: meta.remaining,
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
    cache: &ServedResource,
    meta: ListMeta,
    items: Vec<Arc<CachedObject>>,
) -> Response {
    render(
        cache,
        meta,
        items,
        Rendering::Encoded(Shape::Object, Wire::Json),
    )
}

/// The store's state at exactly `rv`: the current snapshot, if nothing
/// changed after `rv` (waiting for `rv` first if the store is behind it).
async fn snapshot_at(
    cache: &ServedResource,
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

/// `GET` of one object; a consistent one may go [`Answer::Upstream`].
async fn get(
    caches: &ServedResources,
    cache: &ServedResource,
    namespace: Option<&str>,
    name: &str,
    query: &str,
    rendering: Rendering,
    own_write: bool,
) -> Result<Answer, ApiError> {
    let wait = caches.settings.read_wait;
    match kubecache_wire::list_options::resource_version(query)? {
        None if own_write => {}
        None => {
            if caches.consistent_get(cache).await? == Consistent::Cold {
                return Ok(Answer::Upstream);
            }
        }
        Some(0) => {}
        Some(rv) => cache.freshness.not_older_than(rv, wait).await?,
    }
    let snapshot = cache.reader.snapshot();
    let key = ObjectKey::new(namespace.unwrap_or_default(), name);
    let object = snapshot
        .get(&key)
        .ok_or_else(|| Status::not_found(&cache.resource.group, &cache.resource.plural, name))?;
    let (body, wire) = match rendering {
        Rendering::Encoded(shape, wire) => {
            (bodies::object(&Kind::of(cache), object, shape, wire)?, wire)
        }
        Rendering::Table { version, include } => (
            table::render(
                &cache.resource,
                version,
                include,
                // A table of one object is at the object's resourceVersion.
                &TableMeta {
                    resource_version: Some(object.resource_version),
                    ..TableMeta::default()
                },
                std::slice::from_ref(object),
                chrono::Utc::now(),
            ),
            Wire::Json,
        ),
    };
    Ok(Answer::Served(response(
        Body::from(body),
        snapshot.resource_version(),
        wire,
        false,
    )))
}

/// The key of `namespace/name` (or `name`, cluster-scoped) as in a
/// continue token.
fn object_key(key: &str) -> ObjectKey {
    match key.split_once('/') {
        Some((namespace, name)) => ObjectKey::new(namespace, name),
        None => ObjectKey::new("", key),
    }
}

/// A 200 JSON response served at `resource_version`.
pub fn json_response(body: Body, resource_version: u64) -> Response {
    response(body, resource_version, Wire::Json, false)
}

/// A 200 response in `wire` served at `resource_version`; `watch` for a
/// watch stream.
pub(crate) fn response(body: Body, resource_version: u64, wire: Wire, watch: bool) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(wire.content_type(watch)),
    );
    headers.insert(RESOURCE_VERSION_HEADER, resource_version.into());
    response
}
