//! GET of a collection (list, or watch when `watch=1`) and of one object.
//!
//! resourceVersion semantics of a list, as kube-apiserver 1.28+:
//! - unset: a consistent read at the newest revision ("from etcd", paginated,
//!   page latency applies), after etcd's quorum read
//!   (`consistent_read_latency`), as a get without resourceVersion;
//! - `0`: "any", from the watch cache: the newest state, `limit` ignored;
//! - `N` with `Exact`, or `N` with a limit and no match (the legacy rule):
//!   the snapshot at `N`, 410 when compacted;
//! - `N` with `NotOlderThan`, or `N` without a limit: the newest state once
//!   it has reached `N` (504 after 3 s otherwise).
//!
//! Continue tokens carry their snapshot; a compacted one gets the 410 with
//! an inconsistent token that continues at the newest revision.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use kubecache_wire::continue_token::{self, ContinueToken};
use kubecache_wire::{METADATA_API_VERSION, Status, protobuf};

use super::freshness::wait_for;
use super::params::{self, CollectionParams, VersionMatch};
use super::{Context, Target, body_response, fault_for, status_response, watch};
use crate::sim::cost::Source;
use crate::sim::counters::Asked;
use crate::sim::encoding::{self, Form};
use crate::sim::faults::{self, Fault, RequestKind};
use crate::sim::object::StoredObject;
use crate::sim::resources::{RESOURCES, Resource, ResourceId};
use crate::sim::store::{ListRead, ReadError, Store, key_of};
use crate::sim::{ServingCost, tick};
use kubecache_wire::Encoding;
use tokio::time::Instant;

/// Size of the chunks a large body is streamed in.
const CHUNK: usize = 256 * 1024;

/// `GET` of a collection, its objects in `form`; a list in YAML when
/// `yaml` (a watch then gets the API server's 406).
pub async fn collection(
    ctx: &Arc<Context>,
    target: &Target,
    query: &str,
    wire: Encoding,
    form: Form,
    yaml: bool,
) -> Response {
    let resource = &RESOURCES[target.resource];
    let parsed = if target.watch {
        let name = target.name.as_deref();
        CollectionParams::parse_watch_path(query, resource, ctx.serve.watch_list, name)
    } else {
        CollectionParams::parse(query, resource, ctx.serve.watch_list)
    };
    let params = match parsed {
        Ok(params) => params,
        Err(status) => return status_response(&status, wire),
    };
    let counters = &ctx.counters;
    if params.watch && yaml {
        return status_response(&encoding::watch_not_acceptable(), wire);
    }
    if params.watch {
        // Events are single objects: either metadata form will do.
        return watch::serve(ctx, target, params, wire, form).await;
    }
    if form == (Form::Metadata { as_list: false }) {
        return status_response(&encoding::wrong_metadata_shape(resource, true), wire);
    }
    counters.count(target.resource, Asked::List);
    // A list of one object named in its namespace is read as one key
    // (`MatchesSingle` in `registry/generic/registry/store.go`).
    let one_key = params.fields.names_one() && (target.namespace.is_some() || !resource.namespaced);
    if params.limit == 1 && !one_key {
        counters.count(target.resource, Asked::LimitOneList);
    }
    if params.continue_token.is_none() && params.resource_version.is_none() {
        counters.count(target.resource, Asked::ConsistentList);
    }
    let kind = if params.continue_token.is_some() {
        RequestKind::Continue
    } else {
        RequestKind::List
    };
    let forbidden = || faults::forbidden(kind, Some(resource), target.namespace.as_deref());
    let fault = match fault_for(ctx, kind, wire, forbidden).await {
        Ok(fault) => fault,
        Err(response) => return response,
    };
    let in_flight = counters.list_in_flight(target.resource);
    let listed = list(ctx, target, &params, fault).await;
    drop(in_flight);
    match listed {
        Ok((page, truncate, source)) => {
            let body = encode_list(resource, wire, form, page);
            // One key is served as a GET is, its body not paced as a range's.
            let pace = ctx
                .serve
                .serving_cost
                .filter(|_| !one_key)
                .map(|cost| Pace { cost, wire, source });
            let response =
                body_response(StatusCode::OK, wire, false, chunked(body, truncate, pace));
            super::restyle::read(response, yaml)
        }
        Err(status) => status_response(&status, wire),
    }
}

/// One page ready to encode.
pub struct Page {
    /// The snapshot revision.
    pub revision: u64,
    /// The objects.
    pub items: Vec<Arc<StoredObject>>,
    /// The continue token, when more follows.
    pub continue_token: Option<String>,
    /// `remainingItemCount`, when known.
    pub remaining: Option<usize>,
    /// `shardInfo.selector`: the shard selector applied, echoed.
    pub shard_info: Option<String>,
}

async fn list(
    ctx: &Context,
    target: &Target,
    params: &CollectionParams,
    fault: Option<Fault>,
) -> Result<(Page, bool, Source), Status> {
    let store = &ctx.store;
    let (revision, start, before, limit, from_etcd) =
        match (&params.continue_token, params.resource_version) {
            // A continue goes to etcd; the remaining count is read anew.
            (Some(token), _) => {
                let consistent = token.rv >= 0;
                let revision = if consistent {
                    token.rv.unsigned_abs()
                } else {
                    store.revision()
                };
                if fault == Some(Fault::ExpireContinue)
                    || (consistent && revision < store.compacted())
                {
                    return Err(continue_token::expired(token));
                }
                (
                    revision,
                    Some(token.start.as_str()),
                    None,
                    params.limit,
                    true,
                )
            }
            (None, None) => {
                consistent_read(ctx).await;
                let revision = store.revision();
                match ctx.serve.consistent_list_from_cache {
                    Some(notify) if params.limit == 0 => {
                        if watch_cache_reaches(store, target.resource, revision, notify).await {
                            ctx.counters
                                .count(target.resource, Asked::WaitForWatchCache);
                        }
                        (revision, None, Some(0), 0, false)
                    }
                    _ => (revision, None, Some(0), params.limit, true),
                }
            }
            (None, Some(0)) if params.version_match != Some(VersionMatch::Exact) => {
                (store.revision(), None, Some(0), 0, false)
            }
            (None, Some(rv)) => {
                let exact = params.version_match == Some(VersionMatch::Exact)
                    || (params.version_match.is_none() && params.limit > 0);
                if exact {
                    if rv < store.compacted() {
                        return Err(Status::expired(
                            "The resourceVersion for the provided list is too old.",
                        ));
                    }
                    (rv, None, Some(0), params.limit, true)
                } else {
                    (
                        wait_for(ctx, rv).await?,
                        None,
                        Some(0),
                        params.limit,
                        params.limit > 0,
                    )
                }
            }
        };
    if from_etcd && !ctx.serve.page_latency.is_zero() {
        tokio::time::sleep(ctx.serve.page_latency).await;
    }
    let resource = &RESOURCES[target.resource];
    let read = ListRead {
        revision,
        namespace: target.namespace.as_deref(),
        start,
        limit,
        before,
    };
    let page = store
        .list(target.resource, read, |o| params.matches(resource, o))
        .map_err(|e| match e {
            ReadError::Compacted(_) => {
                Status::expired("The resourceVersion for the provided list is too old.")
            }
            ReadError::Future(current) => Status::too_large_resource_version(revision, current),
        })?;
    // An inconsistent continuation's next token is a consistent one at the
    // revision it read (as the recorded `continue-after-410-inconsistent`).
    let continue_token = page
        .more_after
        .as_ref()
        .map(|after| ContinueToken::after(revision as i64, after).encode());
    let remaining = (continue_token.is_some() && !params.filtered()).then_some(page.remaining);
    let page = Page {
        revision,
        items: page.items,
        continue_token,
        remaining,
        shard_info: params.shards.as_ref().map(|shards| shards.echo()),
    };
    let source = if from_etcd {
        Source::Etcd
    } else {
        Source::WatchCache
    };
    Ok((page, fault == Some(Fault::TruncateBody), source))
}

/// Waits until `resource`'s watch cache has reached `revision`: its own
/// change at or after it, or the next progress notification of the
/// `notify` timer (its start and period; see
/// [`crate::sim::PROGRESS_NOTIFY`]). Whether it had to wait.
async fn watch_cache_reaches(
    store: &Store,
    resource: ResourceId,
    revision: u64,
    notify: (Instant, Duration),
) -> bool {
    if store.last_change(resource) >= revision {
        return false;
    }
    let notification = tick(notify, Instant::now(), true);
    let mut revisions = store.subscribe();
    let changed = async {
        while store.last_change(resource) < revision {
            if revisions.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = changed => {}
        () = tokio::time::sleep_until(notification) => {}
    }
    true
}

/// Waits out etcd's quorum read of a read without resourceVersion, and
/// with a serving cost its turn among the others (see [`ServingCost`]).
///
/// [`ServingCost`]: crate::sim::ServingCost
async fn consistent_read(ctx: &Context) {
    if let Some(cost) = ctx.serve.serving_cost {
        ctx.quorum_reads.wait(cost.quorum_reads_per_sec).await;
    }
    if !ctx.serve.consistent_read_latency.is_zero() {
        tokio::time::sleep(ctx.serve.consistent_read_latency).await;
    }
}

/// `GET` of one object, in `form`; without `resourceVersion` after etcd's
/// quorum read (other resourceVersions read the newest state at once).
pub async fn get(
    ctx: &Context,
    target: &Target,
    query: &str,
    wire: Encoding,
    form: Form,
) -> Response {
    let resource = &RESOURCES[target.resource];
    if form == (Form::Metadata { as_list: true }) {
        return status_response(&encoding::wrong_metadata_shape(resource, false), wire);
    }
    let resource_version = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "resourceVersion")
        .map(|(_, v)| v);
    if let Err(status) = params::resource_version(resource_version.as_deref().unwrap_or(""), false)
    {
        return status_response(&status, wire);
    }
    if resource_version.is_none_or(|rv| rv.is_empty()) {
        ctx.counters.count(target.resource, Asked::ConsistentGet);
        consistent_read(ctx).await;
    }
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let name = target.name.as_deref().unwrap_or_default();
    match ctx.store.get(target.resource, &key_of(namespace, name)) {
        Some(object) => match object_body(resource, &object, wire, form) {
            Ok(body) => body_response(StatusCode::OK, wire, false, Body::from(body)),
            Err(status) => status_response(&status, wire),
        },
        None => status_response(
            &Status::not_found(resource.group, resource.plural, name),
            wire,
        ),
    }
}

/// One whole object in an encoding and form (for gets and write
/// responses), as the API server writes it (JSON ends with a newline).
pub fn object_body(
    resource: &Resource,
    object: &StoredObject,
    wire: Encoding,
    form: Form,
) -> Result<Bytes, Status> {
    match (wire, form) {
        (Encoding::Json, Form::Whole) => Ok([&object.json()[..], b"\n"].concat().into()),
        (Encoding::Json, Form::Metadata { .. }) => {
            let json = object.metadata_json().map_err(Status::internal)?;
            Ok([&json[..], b"\n"].concat().into())
        }
        (Encoding::Protobuf, Form::Whole) => {
            let raw = object.proto(resource).map_err(Status::internal)?;
            Ok(protobuf::encode_unknown(resource.api_version(), resource.kind, &raw).into())
        }
        (Encoding::Protobuf, Form::Metadata { .. }) => {
            let raw = object.metadata_proto().map_err(Status::internal)?;
            Ok(
                protobuf::encode_unknown(METADATA_API_VERSION, "PartialObjectMetadata", &raw)
                    .into(),
            )
        }
    }
}

/// A list page as byte chunks, produced as the body is sent: an
/// unpaginated list of 100k pods is never all in memory at once.
pub(super) fn encode_list(
    resource: &Resource,
    wire: Encoding,
    form: Form,
    page: Page,
) -> Box<dyn Iterator<Item = Bytes> + Send> {
    match wire {
        Encoding::Json => Box::new(JsonListChunks::new(resource, form, page)),
        Encoding::Protobuf => Box::new(std::iter::once(encode_proto_list(resource, form, page))),
    }
}

/// The chunks of a JSON list: the list head, the items (about [`CHUNK`]
/// bytes at a time), the closing brackets.
struct JsonListChunks {
    head: Option<String>,
    tail: String,
    items: std::iter::Enumerate<std::vec::IntoIter<Arc<StoredObject>>>,
    form: Form,
    done: bool,
}

impl JsonListChunks {
    fn new(resource: &Resource, form: Form, page: Page) -> Self {
        let (list_kind, api_version) = match form {
            Form::Whole => (resource.list_kind, resource.api_version()),
            Form::Metadata { .. } => ("PartialObjectMetadataList", METADATA_API_VERSION),
        };
        // A custom resource's list is an unstructured map in the API
        // server, written with sorted keys and an always present `continue`.
        let (head, tail) = if !resource.builtin && matches!(form, Form::Whole) {
            let token = page.continue_token.as_deref().unwrap_or_default();
            let mut tail = format!(r#"],"kind":"{list_kind}","metadata":{{"continue":"{token}""#);
            if let Some(remaining) = page.remaining {
                tail.push_str(&format!(r#","remainingItemCount":{remaining}"#));
            }
            tail.push_str(&format!(r#","resourceVersion":"{}""#, page.revision));
            if let Some(selector) = &page.shard_info {
                tail.push_str(&format!(r#","shardInfo":{{"selector":"{selector}"}}"#));
            }
            tail.push_str("}}\n");
            (format!(r#"{{"apiVersion":"{api_version}","items":["#), tail)
        } else {
            let mut head = format!(
                r#"{{"kind":"{list_kind}","apiVersion":"{api_version}","metadata":{{"resourceVersion":"{}""#,
                page.revision
            );
            if let Some(token) = &page.continue_token {
                head.push_str(&format!(r#","continue":"{token}""#));
            }
            if let Some(remaining) = page.remaining {
                head.push_str(&format!(r#","remainingItemCount":{remaining}"#));
            }
            if let Some(selector) = &page.shard_info {
                head.push_str(&format!(r#","shardInfo":{{"selector":"{selector}"}}"#));
            }
            head.push_str(r#"},"items":["#);
            (head, "]}\n".to_string())
        };
        JsonListChunks {
            head: Some(head),
            tail,
            items: page.items.into_iter().enumerate(),
            form,
            done: false,
        }
    }
}

impl Iterator for JsonListChunks {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut buf = BytesMut::with_capacity(CHUNK + 16 * 1024);
        if let Some(head) = self.head.take() {
            buf.put_slice(head.as_bytes());
        }
        while buf.len() < CHUNK {
            let Some((i, object)) = self.items.next() else {
                buf.put_slice(self.tail.as_bytes());
                self.done = true;
                break;
            };
            if i > 0 {
                buf.put_u8(b',');
            }
            match self.form {
                Form::Whole => {
                    let (open, rest) = object.list_item();
                    buf.put_slice(open);
                    buf.put_slice(&rest);
                }
                Form::Metadata { .. } => buf.put_slice(&object.metadata_json().unwrap_or_default()),
            }
        }
        Some(buf.freeze())
    }
}

fn encode_proto_list(resource: &Resource, form: Form, page: Page) -> Bytes {
    let mut items = Vec::with_capacity(page.items.len());
    for object in &page.items {
        let encoded = match form {
            Form::Whole => object.proto(resource),
            Form::Metadata { .. } => object.metadata_proto(),
        };
        match encoded {
            Ok(raw) => items.push(raw),
            Err(e) => tracing::error!(key = %object.key, "{e}"),
        }
    }
    let (list_kind, api_version) = match form {
        Form::Whole => (resource.list_kind, resource.api_version()),
        Form::Metadata { .. } => ("PartialObjectMetadataList", METADATA_API_VERSION),
    };
    let revision = page.revision.to_string();
    let meta = protobuf::ListMeta {
        resource_version: &revision,
        continue_token: page.continue_token.as_deref(),
        remaining_item_count: page.remaining.map(|n| n as i64),
        shard_selector: page.shard_info.as_deref(),
    };
    let mut raw =
        Vec::with_capacity(items.iter().map(Bytes::len).sum::<usize>() + items.len() * 4 + 64);
    protobuf::encode_list(&meta, &items, &mut raw);
    protobuf::encode_unknown(api_version, list_kind, &raw).into()
}

/// How a body is paced: the serving cost of its encoding and path.
#[derive(Debug, Clone, Copy)]
struct Pace {
    cost: ServingCost,
    wire: Encoding,
    source: Source,
}

/// A body from chunks, each sent after the time the serving cost gives it;
/// a truncated one stops halfway and then fails, so the connection is
/// dropped before the end of the chunked encoding.
fn chunked(
    chunks: Box<dyn Iterator<Item = Bytes> + Send>,
    truncate: bool,
    pace: Option<Pace>,
) -> Body {
    if !truncate {
        let chunks = futures::stream::iter(chunks).then(move |chunk| async move {
            if let Some(p) = pace {
                tokio::time::sleep(p.cost.time_to_send(chunk.len(), p.wire, p.source)).await;
            }
            Ok::<_, std::io::Error>(chunk)
        });
        return Body::from_stream(chunks);
    }
    let whole = Bytes::from(chunks.collect::<Vec<_>>().concat());
    let parts = vec![
        Ok(whole.slice(..whole.len() / 2)),
        Err(std::io::Error::other("injected fault: truncated body")),
    ];
    Body::from_stream(futures::stream::iter(parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::HistoryWindow;
    use crate::sim::resources::ids;
    use serde_json::json;

    #[tokio::test(start_paused = true)]
    async fn a_quiet_resources_watch_cache_reaches_the_revision_at_the_next_notification() {
        let store = Store::new(HistoryWindow::ETCD, HistoryWindow::WATCH_CACHE, 1);
        let named = |name: &str| json!({"metadata": {"name": name, "namespace": "ns"}});
        store
            .create(ids::NAMESPACES, json!({"metadata": {"name": "ns"}}))
            .unwrap();
        store.create(ids::CONFIGMAPS, named("quiet")).unwrap();
        let pod = json!({"metadata": {"name": "busy", "namespace": "ns"}, "spec": {}});
        store.create(ids::PODS, pod).unwrap();
        let timer = (Instant::now(), Duration::from_secs(1));
        tokio::time::advance(Duration::from_millis(300)).await;
        let revision = store.revision();
        // The pods' watch cache is there: its own last change.
        assert!(!watch_cache_reaches(&store, ids::PODS, revision, timer).await);
        // The config maps' waits for the notification at 1 s.
        let started = Instant::now();
        assert!(watch_cache_reaches(&store, ids::CONFIGMAPS, revision, timer).await);
        assert_eq!(started.elapsed(), Duration::from_millis(700));
        // Or for a change of its own, if one comes first.
        let revision = store.revision();
        let waiting = watch_cache_reaches(&store, ids::CONFIGMAPS, revision, timer);
        let write = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            store.create(ids::CONFIGMAPS, named("written")).unwrap();
        };
        let started = Instant::now();
        let (waited, ()) = tokio::join!(waiting, write);
        assert!(waited);
        assert_eq!(started.elapsed(), Duration::from_millis(100));
    }
}
