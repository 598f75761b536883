//! Watches: `GET …?watch=1`, served from the store's event log.
//!
//! Where a watch starts, as kube-apiserver's watch cache starts it:
//! - `resourceVersion` unset: a consistent read (see [`crate::cacher::freshness`]),
//!   then synthetic `ADDED` events for the selected objects, then their
//!   changes; `0`: the same without waiting;
//! - `resourceVersion=N`: the changes after `N`, replayed from the event
//!   log; when the log no longer covers `N`, one `ERROR` event with a 410
//!   `Expired` Status (the client relists). `N` newer than the cache is
//!   answered at once (200) as kube-apiserver answers it: the changes after
//!   `N` come once the cache has them, and bookmarks never go below `N`
//!   (the cacher waits only for a streaming list: "we allow for
//!   establishing the connection because the clients can wait for events",
//!   `waitUntilWatchCacheFreshAndForceAllEvents` in `cacher/cacher.go`).
//!   This is how a client fails over to a replica that is behind;
//! - `sendInitialEvents=true` (streaming list): the `ADDED` events of the
//!   state at `N` or later (unset: consistent), then a `BOOKMARK` annotated
//!   `k8s.io/initial-events-end` when bookmarks are allowed, then changes.
//!   The bookmark carries the snapshot's resourceVersion or, when newer,
//!   the one the watch waited for: the API server's current one a
//!   consistent start proved, or `N`. kube-apiserver's cacher sends it
//!   once the watcher has seen a revision at least the etcd revision read
//!   when the watch started (unset) or `N`
//!   (`getBookmarkAfterResourceVersionLockedFunc` in `cacher/cacher.go`), so
//!   never below those; the snapshot is that state (see [`super::list`]);
//!   when the cache does not reach `N` within the read wait, 200 and one
//!   `ERROR` event with the 504 "Too large resource version" Status;
//!   `sendInitialEvents=false`: only changes, from `N` or from now.
//!
//! A watcher sees an object `ADDED` when it starts matching its selectors
//! and `DELETED` when it stops. Bookmarks (with `allowWatchBookmarks`) come
//! every bookmark interval and once when the timeout ends the live stream
//! (a timeout during the initial events or the replay ends it after the
//! last whole event, with no bookmark: see [`stream`]);
//! `timeoutSeconds` (unset or 0) defaults to a random 30–60 minutes, as
//! kube-apiserver's `--min-request-timeout` spreads reconnections. Change predicates (see
//! [`crate::Predicates`]) drop `MODIFIED` events that change nothing the
//! watcher asked about.
//!
//! Fan-out: see [`crate::cacher::fanout`]. Each watch is its response body
//! ([`body`]), run by its connection's task.

mod body;
mod stream;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use kubecache_reflector::{Snapshot, TooOld};
use kubecache_wire::list_options::CollectionParams;
use kubecache_wire::{CachedObject, Status};
use rand::Rng;
use tokio::time::Instant;

use crate::cacher::{Cache, Caches};
use crate::cacher::{Filter, Flow, Predicates};
use crate::error::ApiError;
use crate::http::bodies::response;
use crate::http::negotiate::Rendering;
use crate::http::offload;
use crate::transport::AnswerDeadline;
use body::{Outbox, WatchBody};
use stream::{Start, Watch};

/// The objects of `snapshot` that `filter` selects, whose `ADDED` events
/// a watch starts with; off the async workers when that examines many.
/// Their lines are made as they are written (see [`stream`]): a client
/// that does not read has no more of them made than it was given.
async fn initial_objects(filter: &Filter, snapshot: &Snapshot) -> Vec<Arc<CachedObject>> {
    let examined = filter.candidate_count(snapshot);
    if !offload::is_heavy(offload::Work {
        examined,
        rendered: 0,
    }) {
        return selected(filter, snapshot);
    }
    let (filter, snapshot) = (filter.clone(), snapshot.clone());
    offload::run(move || selected(&filter, &snapshot)).await
}

/// See [`initial_objects`].
fn selected(filter: &Filter, snapshot: &Snapshot) -> Vec<Arc<CachedObject>> {
    filter.select(snapshot, None).cloned().collect()
}

/// A watch of `cache` for `flow`, counted against its owner's watches
/// while it runs.
///
/// # Errors
///
/// 429 when the owner has as many watches open as one client may, and the
/// errors of the wait for `params.resource_version`.
pub(crate) async fn serve(
    caches: &Caches,
    cache: &Arc<Cache>,
    filter: Filter,
    params: CollectionParams,
    predicates: Predicates,
    rendering: Rendering,
    flow: Flow,
) -> Result<Response, ApiError> {
    let slot = flow.owner.map(|o| caches.watch_quota.take(o)).transpose()?;
    let wait = caches.settings.read_wait;
    let from = params.resource_version.filter(|&rv| rv > 0);
    // Without sendInitialEvents, the legacy rule: the current state first
    // unless a resourceVersion to resume from is given.
    let initial = params.send_initial_events.unwrap_or(from.is_none());
    // The resourceVersion the initial state is proven complete through
    // (0: none), and whether it was not reached.
    let (waited, unreached) = match params.resource_version {
        None => (caches.consistent(cache).await?, None),
        // The state at `rv` or later is sent first: it must be there. Not
        // in time is told in the stream, as the cacher does
        // (`newErrWatcher` after `waitUntilWatchCacheFreshAndForceAllEvents`).
        Some(rv) if rv > 0 && initial => (rv, cache.freshness.not_older_than(rv, wait).await.err()),
        // Resuming from `rv` waits for nothing: events after `rv` come
        // when the cache has them (a resourceVersion newer than the cache,
        // from another replica, is no error).
        Some(_) => (0, None),
    };
    let start = match (unreached, from) {
        (Some(status), _) => Start::Error(status),
        (None, Some(rv)) if !initial => match cache.reader.subscribe_from(rv) {
            Ok(subscription) => Start::After(subscription),
            Err(TooOld { oldest }) => Start::Error(Status::expired(format!(
                "too old resource version: {rv} ({oldest})"
            ))),
        },
        (None, _) if initial => {
            // A large send waits for its seat (its consistent read done),
            // then sends the state it finds then.
            let candidates = filter.candidate_count(&cache.reader.snapshot());
            let seat = caches.seats.take(candidates, flow).await?;
            let (snapshot, subscription) = cache.reader.snapshot_and_subscribe();
            let end = params.send_initial_events == Some(true) && params.allow_bookmarks;
            Start::Initial {
                objects: initial_objects(&filter, &snapshot).await,
                end_bookmark: end.then_some(snapshot.resource_version().max(waited)),
                subscription,
                seat,
            }
        }
        (None, _) => Start::After(cache.reader.snapshot_and_subscribe().1),
    };
    let settings = &caches.settings;
    let timeout = params.timeout.unwrap_or_else(default_timeout).min(LONGEST);
    let watch = Watch {
        cache: cache.clone(),
        filter,
        predicates,
        bookmarks: params.allow_bookmarks.then_some(settings.bookmark_interval),
        deadline: Instant::now() + timeout,
        shutdown: caches.shutting_down(),
        queue_size: settings.watcher_queue,
        rendering,
        from: from.filter(|_| !initial).unwrap_or_default(),
    };
    let deadline = watch.deadline;
    let served_at = cache.reader.current_resource_version();
    let outbox = Outbox::default();
    let body = WatchBody::new(outbox.clone(), async move {
        watch.run(start, outbox).await;
        drop(slot);
    });
    let mut response = response(Body::new(body), served_at, rendering.encoding(), true);
    response.extensions_mut().insert(AnswerDeadline(deadline));
    Ok(response)
}

/// The longest a watch lasts, whatever `timeoutSeconds` asks (a larger
/// deadline would overflow the clock): a year.
const LONGEST: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// 30 to 60 minutes, at random.
fn default_timeout() -> Duration {
    Duration::from_secs(rand::rng().random_range(1800..3600))
}
