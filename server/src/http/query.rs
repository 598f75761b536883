//! The query API under `/v1`: what the Kubernetes API cannot express.
//!
//! - `GET /v1/status`: the status of every cached resource;
//!   `GET /v1/{resource}/status`: of one (`resource` is `plural` or
//!   `plural.group`, as in `--resources`).
//! - `GET /v1/{resource}/count`: how many objects the store holds.
//! - `GET /v1/{resource}/index/{index}/{key}`: the objects an index finds,
//!   as a Kubernetes list (`{Kind}List`, items in key order);
//!   `…/{key}/count`: how many. Indexes: `namespace` (key: the namespace),
//!   `label` (key: `name=value`, percent-encoded: `app.kubernetes.io%2Fname=web`),
//!   `owner` (key: an owner's UID), and each configured field index by its
//!   name (key: the field's value).
//!
//! Authorization (see [`attributes`]): a lookup or count is a `list` of the
//! resource, in the namespace for `index/namespace/{ns}`, cluster-wide
//! otherwise; the status documents are the non-resource paths they are.
//! `/v1/status` says how requests are authorized (`"auth"`).
//!
//! Counts and lookups take `?shardSelector=` as a list does (KEP-5866, see
//! [`kubecache_wire::ShardSelector`]): only the objects in its hash ranges
//! are counted or listed, and a lookup's list echoes it in
//! `metadata.shardInfo.selector`.
//!
//! Lookups read the store as it is (like `resourceVersion=0`); with
//! `?resourceVersion=N` they first wait until the store has reached `N`
//! (504 after the read-wait timeout, 400 when `N` is not a number). A
//! client's own writes passed through kubecache are waited for first, as
//! for every read (see [`crate::cacher`]'s read-your-writes). Every answer
//! carries the resourceVersion it was served at.

use axum::body::Body;
use axum::response::{IntoResponse, Json, Response};
use kubecache_reflector::{IndexLookup, Readiness};
use kubecache_wire::{CachedObject, ShardSelector, Status};
use serde_json::{Value, json};

use super::bodies::{ListMeta, json_response};
use super::error::not_ready;
use super::list::list_response;
use crate::auth::{Attributes, Auth};
use crate::cacher::{BUILTIN_INDEXES, Cache, Caches, ClientKey};
use crate::error::ApiError;

/// The path's segments, each percent-decoded after the split: a label
/// key's `/` arrives as `%2F`.
fn segments(path: &str) -> Vec<std::borrow::Cow<'_, str>> {
    path.trim_matches('/')
        .split('/')
        .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy())
        .collect()
}

/// What a request under `/v1` is authorized as.
pub fn attributes<'a>(caches: &'a Caches, path: &'a str) -> Attributes<'a> {
    let segments = segments(path);
    let segments: Vec<&str> = segments.iter().map(|s| &**s).collect();
    let (resource, namespace) = match segments.as_slice() {
        ["v1", resource, "count"] => (resource, None),
        ["v1", resource, "index", "namespace", namespace, ..] => (resource, Some(*namespace)),
        ["v1", resource, "index", ..] => (resource, None),
        _ => return Attributes::path(path),
    };
    match caches.by_name(resource) {
        // Owned: the namespace is decoded here.
        Some(cache) => Attributes::read(&cache.resource, namespace, None, false, None).into_owned(),
        None => Attributes::path(path),
    }
}

/// `GET /v1/…` by `client`.
pub async fn serve(
    caches: &Caches,
    auth: &Auth,
    path: &str,
    query: &str,
    client: Option<ClientKey>,
) -> Result<Response, ApiError> {
    let segments = segments(path);
    let segments: Vec<&str> = segments.iter().map(|s| &**s).collect();
    match segments.as_slice() {
        ["v1", "status"] => {
            let all: Vec<Value> = caches.iter().map(|c| status(c)).collect();
            let revocation = auth.followed().map(|followed| {
                let watches: serde_json::Map<String, Value> = followed
                    .watches()
                    .into_iter()
                    .map(|w| {
                        let watch = json!({"state": w.state, "revocations": w.revocations});
                        (w.resource.to_string(), watch)
                    })
                    .collect();
                json!({ "following": followed.following(), "watches": watches })
            });
            Ok(Json(json!({
                "auth": auth.mode(),
                "authRevocation": revocation,
                "resources": all,
            }))
            .into_response())
        }
        ["v1", resource, "status"] => Ok(Json(status(find(caches, resource)?)).into_response()),
        ["v1", resource, "count"] => {
            let cache = ready(caches, resource)?;
            let shards = shards(query)?;
            wait(caches, cache, query, client).await?;
            let snapshot = cache.reader.snapshot();
            let rv = snapshot.resource_version();
            Ok(match &shards {
                None => count(snapshot.len(), rv),
                Some(shards) => {
                    let selected = snapshot.range(None, None).filter(|o| within(shards, o));
                    count(selected.count(), rv)
                }
            })
        }
        ["v1", resource, "index", index, key, rest @ ..] => {
            let cache = ready(caches, resource)?;
            let lookup = lookup(cache, index, key)?;
            let count_only = match rest {
                [] => false,
                ["count"] => true,
                _ => return Err(super::error::no_such_path()),
            };
            let shards = shards(query)?;
            wait(caches, cache, query, client).await?;
            let snapshot = cache.reader.snapshot();
            let rv = snapshot.resource_version();
            let Some(shards) = shards else {
                if count_only {
                    return Ok(count(snapshot.index_len(lookup), rv));
                }
                let items = snapshot.index(lookup).cloned().collect();
                let meta = ListMeta {
                    resource_version: rv,
                    ..ListMeta::default()
                };
                return Ok(list_response(cache, meta, items));
            };
            let selected = snapshot.index(lookup).filter(|o| within(&shards, o));
            if count_only {
                return Ok(count(selected.count(), rv));
            }
            let items = selected.cloned().collect();
            let meta = ListMeta {
                resource_version: rv,
                shard_selector: Some(shards.to_string()),
                ..ListMeta::default()
            };
            Ok(list_response(cache, meta, items))
        }
        _ => Err(super::error::no_such_path()),
    }
}

/// The cache named `name`, or a 404 that lists the cached ones.
fn find<'c>(caches: &'c Caches, name: &str) -> Result<&'c Cache, ApiError> {
    caches.by_name(name).map(|c| &**c).ok_or_else(|| {
        let names: Vec<String> = caches.iter().map(|c| c.name()).collect();
        ApiError::from(Status::failure(
            404,
            "NotFound",
            format!(
                "kubecache does not cache {name:?}; cached resources: {}",
                names.join(", ")
            ),
        ))
    })
}

/// The cache named `name`, once it has synced.
fn ready<'c>(caches: &'c Caches, name: &str) -> Result<&'c Cache, ApiError> {
    let cache = find(caches, name)?;
    match cache.reader.readiness() {
        Readiness::Ready => Ok(cache),
        Readiness::NotReady { reason } => Err(not_ready(name, &reason)),
    }
}

/// Waits for the client's own writes, then for `?resourceVersion=N`, if
/// given.
async fn wait(
    caches: &Caches,
    cache: &Cache,
    query: &str,
    client: Option<ClientKey>,
) -> Result<(), ApiError> {
    cache
        .read_your_writes(client, caches.settings.read_wait)
        .await?;
    // kube-apiserver's watch cache answers a malformed resourceVersion with
    // a 500 (mirrored for the Kubernetes paths); kubecache's own API says
    // it is the client's fault.
    let wanted = kubecache_wire::list_options::resource_version(query)
        .map_err(|status| Status::bad_request(status.message))?;
    if let Some(rv) = wanted {
        cache
            .freshness
            .not_older_than(rv, caches.settings.read_wait)
            .await?;
    }
    Ok(())
}

/// The lookup of `key` in index `index` of `cache`.
fn lookup<'k>(cache: &'k Cache, index: &'k str, key: &'k str) -> Result<IndexLookup<'k>, ApiError> {
    Ok(match index {
        "namespace" => IndexLookup::Namespace(key),
        "owner" => IndexLookup::Owner(key),
        "label" => {
            let (key, value) = key.split_once('=').ok_or_else(|| {
                Status::bad_request(format!(
                    "label index key {key:?} is not of the form name=value"
                ))
            })?;
            IndexLookup::Label { key, value }
        }
        name => {
            let spec = cache
                .indexes
                .iter()
                .find(|i| i.name == name)
                .ok_or_else(|| {
                    let mut names: Vec<&str> = BUILTIN_INDEXES.to_vec();
                    names.extend(cache.indexes.iter().map(|i| i.name.as_str()));
                    ApiError::from(Status::failure(
                        404,
                        "NotFound",
                        format!(
                            "{} has no index named {name:?}; indexes: {}",
                            cache.name(),
                            names.join(", ")
                        ),
                    ))
                })?;
            IndexLookup::Field {
                name: &spec.name,
                value: key,
            }
        }
    })
}

/// `{"count":N,"resourceVersion":"RV"}`.
fn count(count: usize, resource_version: u64) -> Response {
    let body = json!({"count": count, "resourceVersion": resource_version.to_string()});
    json_response(Body::from(body.to_string()), resource_version)
}

/// The query's `shardSelector` (none when absent or empty).
fn shards(query: &str) -> Result<Option<ShardSelector>, Status> {
    kubecache_wire::list_options::first(query, "shardSelector")
        .filter(|value| !value.is_empty())
        .map(|value| ShardSelector::parse(&value).map_err(Status::from))
        .transpose()
}

/// Whether `object` is in `shards`' hash ranges.
fn within(shards: &ShardSelector, object: &CachedObject) -> bool {
    shards.matches(&object.uid, object.key.namespace())
}

/// The status document of one resource.
fn status(cache: &Cache) -> Value {
    let snapshot = cache.reader.snapshot();
    let reflector = cache.status.borrow().clone();
    let log = cache.reader.event_log_status();
    let (ready, reason) = match cache.reader.readiness() {
        Readiness::Ready => (true, None),
        Readiness::NotReady { reason } => (false, Some(reason.to_string())),
    };
    let last_list = reflector
        .last_list
        .as_ref()
        .map(|(at, why)| json!({"secondsAgo": at.elapsed().as_secs_f64(), "reason": why}));
    let progress = reflector
        .progress
        .map(|(listed, remaining)| json!({"listed": listed, "remaining": remaining}));
    let indexes: Vec<Value> = cache
        .indexes
        .iter()
        .map(|i| json!({"name": i.name, "path": i.path}))
        .collect();
    json!({
        "resource": cache.name(),
        "group": cache.resource.group,
        "version": cache.resource.version,
        "kind": cache.resource.kind,
        "ready": ready,
        "notReadyReason": reason,
        "resourceVersion": snapshot.resource_version().to_string(),
        "objects": snapshot.len(),
        "phase": reflector.phase,
        "strategy": reflector.strategy,
        "lists": reflector.lists,
        "listAttempts": reflector.list_attempts,
        "lastList": last_list,
        "listProgress": progress,
        "failures": reflector.failures,
        "gone": reflector.gone,
        "earlyChanges": reflector.early_changes,
        "lastError": reflector.last_error,
        "eventLog": {
            "oldestResourceVersion": log.oldest.to_string(),
            "newestResourceVersion": log.newest.to_string(),
            "events": log.events,
        },
        "watchers": cache.watchers(),
        "indexes": indexes,
        "restored": reflector.restored.map(|r| json!({
            "resourceVersion": r.resource_version.to_string(),
            "objects": r.objects,
            "caughtUp": r.caught_up,
        })),
    })
}
