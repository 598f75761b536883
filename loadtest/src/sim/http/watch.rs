//! Watches: events after a revision, in revision order, one JSON object per
//! line (or length-framed protobuf WatchEvents), with bookmarks.
//!
//! Where a watch starts:
//! - `resourceVersion=N`: the events after `N`; `N` older than the
//!   compaction point gets 200 and then one ERROR event with a 410 Status;
//!   `N` newer than the store is no error: its events come when written
//!   (the cacher waits only for a streaming list, see below);
//! - unset or `0`: synthetic ADDED events for the current state, then the
//!   events after it (the legacy "get state and watch");
//! - `sendInitialEvents=true` (streaming list): the same ADDED events, then a
//!   BOOKMARK annotated `k8s.io/initial-events-end` (only with
//!   `allowWatchBookmarks`), then the events after the snapshot. Where the
//!   bookmark comes depends on the version the sim claims (`kube_version`):
//!   from 1.32 right after the initial events (the watcher sends it itself,
//!   kubernetes/kubernetes#127012); before, on the cacher's next bookmark
//!   tick ([`crate::sim::BOOKMARK_DISPATCH`], the configured dispatch timer
//!   or one started with the watch), and the events written meanwhile come
//!   before it: a real v1.28.4 sent its bookmark 550–1,044 ms after the last
//!   initial object, with 6–12 changes before it at 10 writes/s
//!   (`testdata/apiserver-golden/versions/`, `watchlist-*`). From a
//!   revision `N` the store has not reached, it waits up to 3 s for it
//!   (`waitUntilWatchCacheFreshAndForceAllEvents`), then sends 200 and one
//!   ERROR event with the 504 "Too large resource version" Status.
//!
//! A watch whose selector an object leaves sees it DELETED; one it enters,
//! ADDED (as the watch cache filters).
//!
//! At its deadline a watch ends after the last whole event it sent, even
//! in the middle of its initial events, with no bookmark (the corpus's
//! `edges/` `watch-timing` cases); a negative `timeoutSeconds` sends
//! nothing (`req-timeout-neg-alice`).
//!
//! Bookmarks (with `allowWatchBookmarks`) come when kube-apiserver's cacher
//! sends them (`cacheWatcher.nextBookmarkTime` in
//! `staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go`): the
//! next one is due `bookmark_interval` after the watch started or after the
//! previous one (bookmarkFrequency, a minute), but no later than 2 s before
//! the deadline; when that moment is not after now, none is due any more. So
//! a watch of `timeoutSeconds=3` gets one bookmark, 1 s in, and one of
//! `timeoutSeconds=2` or less gets none. (The cacher keeps due times in
//! one-second buckets checked on a ticker of about a second, so a real one
//! may come up to a second early, and then once more when due: the golden
//! `watch/pods-meta.watch.json` ends with two at the same revision. The sim
//! sends each exactly when due.) A bookmark carries the watch's
//! position: the store's revision once the watch has sent every event up to
//! it, as the cacher's bookmark carries the last revision it processed.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use kubecache_wire::{METADATA_API_VERSION, Status, protobuf};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};
use tokio_stream::wrappers::ReceiverStream;

use super::freshness::wait_for;
use super::params::CollectionParams;
use super::{Context, Target, body_response, fault_for};
use crate::sim::cost::Source;
use crate::sim::counters::Asked;
use crate::sim::encoding::Form;
use crate::sim::faults::{self, Fault, RequestKind};
use crate::sim::object::StoredObject;
use crate::sim::resources::{RESOURCES, Resource};
use crate::sim::store::{Event, ListRead, ReadError};
use crate::sim::{BOOKMARK_DISPATCH, ServingCost, tick};
use kubecache_wire::ChangeType;
use kubecache_wire::Encoding;

/// Without `timeoutSeconds`, kube-apiserver ends a watch after a random
/// 30–60 minutes (`--min-request-timeout` 1800 s); the simulator uses 30.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// The last bookmark comes this long before the deadline (kube-apiserver
/// sends it 2 s early so clients can resume without a gap).
const FINAL_BOOKMARK_LEAD: Duration = Duration::from_secs(2);

/// When the bookmark after `now` is due, if any (see the module doc).
fn next_bookmark(now: Instant, deadline: Instant, interval: Duration) -> Option<Instant> {
    let last = deadline.checked_sub(FINAL_BOOKMARK_LEAD)?;
    let at = (now + interval).min(last);
    (at > now).then_some(at)
}

/// When a bookmark due at `due`, scheduled at `now`, is sent: when due, or
/// with a dispatch `timer` (its start and period) at its first tick after
/// `now` and at or after the start of the second `due` is in (see
/// [`crate::sim::BOOKMARK_DISPATCH`]).
fn dispatched(due: Instant, now: Instant, timer: Option<(Instant, Duration)>) -> Instant {
    let Some(timer) = timer else {
        return due;
    };
    let due_second = Duration::from_secs(due.saturating_duration_since(timer.0).as_secs());
    tick(timer, now, true).max(tick(timer, timer.0 + due_second, false))
}

/// The first minor version whose streaming list sends its initial-events-end
/// bookmark right after the initial events (kubernetes/kubernetes#127012,
/// merged for 1.32; see the module doc).
const END_BOOKMARK_AT_ONCE: u8 = 32;

/// A streaming list's initial-events-end bookmark before 1.32: when the
/// cacher's timer sends it, and the changes sent before it meanwhile.
struct EndBookmark {
    at: Instant,
    changes: u64,
}

/// Events read from the store per lock.
const BATCH: usize = 512;

/// Bytes buffered before they are sent.
const FLUSH_AT: usize = 64 * 1024;

enum Start {
    /// Replay the events after this revision.
    After(u64),
    /// ADDED for the state at this revision, then its events; with the
    /// initial-events-end bookmark when asked.
    InitialEvents { at: u64, end_bookmark: bool },
    /// One ERROR event: a streaming list whose resourceVersion the store
    /// did not reach in time, as the watch cache answers it (its wait
    /// fails after the response began: `newErrWatcher` in
    /// `cacher/cacher.go`).
    Error(Box<Status>),
}

/// Starts a watch; the response streams until the timeout, a fault or the
/// client going away.
pub async fn serve(
    ctx: &Arc<Context>,
    target: &Target,
    params: CollectionParams,
    wire: Encoding,
    form: Form,
) -> Response {
    // A cut from here on reaches this watch, even while a fault holds it
    // back: a test that saw it counted can cut it.
    let cuts = ctx.cuts.subscribe();
    ctx.counters.count(target.resource, Asked::Watch);
    if params.send_initial_events == Some(true) {
        ctx.counters.count(target.resource, Asked::List);
    }
    let resource = &RESOURCES[target.resource];
    let forbidden = || {
        faults::forbidden(
            RequestKind::Watch,
            Some(resource),
            target.namespace.as_deref(),
        )
    };
    let fault = match fault_for(ctx, RequestKind::Watch, wire, forbidden).await {
        Ok(fault) => fault,
        Err(response) => return response,
    };
    let current = ctx.store.revision();
    let start = match (params.send_initial_events, params.resource_version) {
        (Some(true), None | Some(0)) => Start::InitialEvents {
            at: current,
            end_bookmark: true,
        },
        (Some(true), Some(rv)) => match wait_for(ctx, rv).await {
            Ok(at) => Start::InitialEvents {
                at,
                end_bookmark: true,
            },
            Err(status) => Start::Error(Box::new(status)),
        },
        (Some(false), None | Some(0)) => Start::After(current),
        (None, None | Some(0)) => Start::InitialEvents {
            at: current,
            end_bookmark: false,
        },
        (_, Some(rv)) => Start::After(rv),
    };
    let (tx, rx) = mpsc::channel(16);
    let watch = Watch {
        ctx: ctx.clone(),
        cuts,
        target: target.clone(),
        params,
        out: Output {
            tx,
            wire,
            form,
            resource: &RESOURCES[target.resource],
            buf: BytesMut::new(),
            sent: 0,
            fault,
            cost: ctx.serve.serving_cost,
        },
    };
    tokio::spawn(watch.run(start));
    body_response(
        StatusCode::OK,
        wire,
        true,
        Body::from_stream(ReceiverStream::new(rx)),
    )
}

/// The client went away, or a fault cut the stream.
struct Closed;

struct Watch {
    ctx: Arc<Context>,
    /// Changes when every open watch is to be cut.
    cuts: tokio::sync::watch::Receiver<u64>,
    target: Target,
    params: CollectionParams,
    out: Output,
}

impl Watch {
    async fn run(mut self, start: Start) {
        let _ = self.stream(start).await;
    }

    async fn stream(&mut self, start: Start) -> Result<(), Closed> {
        let store = self.ctx.store.clone();
        let mut revisions = store.subscribe();
        let timeout = self.params.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let started = Instant::now();
        let deadline = started + timeout;
        let interval = self.ctx.serve.bookmark_interval;
        let timer = self.ctx.serve.bookmark_dispatch;
        let mut scheduled = started;
        let mut next =
            next_bookmark(started, deadline, interval).filter(|_| self.params.allow_bookmarks);
        // A streaming list's initial-events-end bookmark, while it is due.
        let mut end: Option<EndBookmark> = None;
        let mut position = match start {
            Start::Error(status) => return self.out.error(*status).await,
            Start::After(rv) => rv,
            Start::InitialEvents { at, end_bookmark } => {
                let read = ListRead {
                    revision: at,
                    namespace: self.target.namespace.as_deref(),
                    start: None,
                    limit: 0,
                    before: Some(0),
                };
                match store.list(self.target.resource, read, |o| self.visible(o)) {
                    Ok(page) => {
                        for object in &page.items {
                            if Instant::now() >= deadline {
                                return self.out.flush().await;
                            }
                            self.out.event("ADDED", object).await?;
                        }
                    }
                    Err(e) => return self.out.error(too_old(at, e)).await,
                }
                if end_bookmark && self.params.allow_bookmarks {
                    if self.ctx.serve.kube_version.minor() >= END_BOOKMARK_AT_ONCE {
                        self.out.bookmark(at, true).await?;
                    } else {
                        let timer = timer.unwrap_or((started, BOOKMARK_DISPATCH));
                        end = Some(EndBookmark {
                            at: tick(timer, Instant::now(), true),
                            changes: 0,
                        });
                    }
                }
                at
            }
        };
        if self.out.fault == Some(Fault::WatchGone) {
            return self
                .out
                .error(too_old(position, ReadError::Compacted(store.revision())))
                .await;
        }
        loop {
            loop {
                let (events, upto) = match store.events_after(self.target.resource, position, BATCH)
                {
                    Ok(batch) => batch,
                    Err(e) => return self.out.error(too_old(position, e)).await,
                };
                for event in &events {
                    if Instant::now() >= deadline {
                        return self.out.flush().await;
                    }
                    if let Some((kind, object)) = self.filter(event) {
                        self.out.event(kind, &object).await?;
                        if let Some(end) = &mut end {
                            end.changes += 1;
                        }
                    }
                }
                position = upto;
                if events.len() < BATCH {
                    break;
                }
            }
            self.out.flush().await?;
            tokio::select! {
                changed = revisions.changed() => if changed.is_err() { return Ok(()) },
                () = sleep_until(end.as_ref().map_or(deadline, |end| end.at)), if end.is_some() => {
                    if end.take().is_some_and(|end| end.changes > 0) {
                        let resource = self.target.resource;
                        self.ctx.counters.count(resource, Asked::StreamingListChangedBeforeEnd);
                    }
                    self.out.bookmark(position, true).await?;
                    scheduled = Instant::now();
                    next = next_bookmark(scheduled, deadline, interval);
                }
                () = sleep_until(next.map_or(deadline, |due| dispatched(due, scheduled, timer))), if next.is_some() && end.is_none() => {
                    self.out.bookmark(position, false).await?;
                    scheduled = Instant::now();
                    next = next_bookmark(scheduled, deadline, interval);
                }
                _ = sleep_until(deadline) => return self.out.flush().await,
                _ = self.cuts.changed() => return self.out.cut().await,
                _ = self.out.tx.closed() => return Err(Closed),
            }
        }
    }

    fn visible(&self, object: &StoredObject) -> bool {
        self.target
            .namespace
            .as_ref()
            .is_none_or(|ns| *ns == object.namespace)
            && self.params.matches(self.out.resource, object)
    }

    /// The event as this watch sees it through its selectors. An object
    /// that leaves them is sent DELETED in its previous state at the event's
    /// revision, as the watch cache sends it (`convertToWatchEvent` in
    /// `cacher/cache_watcher.go`).
    fn filter(&self, event: &Event) -> Option<(&'static str, Arc<StoredObject>)> {
        let now = self.visible(&event.object);
        let before = event.previous.as_ref().filter(|p| self.visible(p));
        let (kind, object) = match (event.kind, before, now) {
            (ChangeType::Added, _, true) => (ChangeType::Added, event.object.clone()),
            (ChangeType::Modified, Some(_), true) => (ChangeType::Modified, event.object.clone()),
            (ChangeType::Modified, None, true) => (ChangeType::Added, event.object.clone()),
            (ChangeType::Modified, Some(previous), false) => {
                let mut last = previous.to_value();
                last["metadata"]["resourceVersion"] = event.revision().to_string().into();
                let strings = previous.raw_strings().cloned();
                let last =
                    StoredObject::with_strings(self.out.resource, last, event.revision(), strings);
                (ChangeType::Deleted, last)
            }
            (ChangeType::Deleted, _, true) => (ChangeType::Deleted, event.object.clone()),
            _ => return None,
        };
        Some((kind.as_str(), object))
    }
}

fn too_old(rv: u64, error: ReadError) -> Status {
    match error {
        ReadError::Compacted(compacted) => {
            Status::expired(format!("too old resource version: {rv} ({compacted})"))
        }
        ReadError::Future(current) => Status::too_large_resource_version(rv, current),
    }
}

/// The encoder and sender of one watch stream.
struct Output {
    tx: mpsc::Sender<std::io::Result<Bytes>>,
    wire: Encoding,
    /// Whole objects, or their `PartialObjectMetadata`.
    form: Form,
    resource: &'static Resource,
    buf: BytesMut,
    /// Events sent so far, for `DropWatch`.
    sent: u64,
    fault: Option<Fault>,
    /// Watches are served from the watch cache at its throughput.
    cost: Option<ServingCost>,
}

impl Output {
    async fn event(&mut self, kind: &str, object: &StoredObject) -> Result<(), Closed> {
        match self.fault {
            Some(Fault::DropWatch { after_events }) if self.sent >= after_events => {
                return self.cut().await;
            }
            Some(Fault::TruncateBody) => {
                let line = self.encode(kind, object);
                self.buf.put_slice(&line[..line.len() / 2]);
                return self.cut().await;
            }
            _ => {}
        }
        let encoded = self.encode(kind, object);
        self.buf.put_slice(&encoded);
        self.sent += 1;
        if self.buf.len() >= FLUSH_AT {
            self.flush().await?;
        }
        Ok(())
    }

    fn encode(&self, kind: &str, object: &StoredObject) -> Vec<u8> {
        match self.wire {
            Encoding::Json => {
                let json = match self.form {
                    Form::Whole => object.json(),
                    Form::Metadata { .. } => object.metadata_json().unwrap_or_default(),
                };
                let mut line = Vec::with_capacity(json.len() + 32);
                line.extend_from_slice(br#"{"type":""#);
                line.extend_from_slice(kind.as_bytes());
                line.extend_from_slice(br#"","object":"#);
                line.extend_from_slice(&json);
                line.extend_from_slice(b"}\n");
                line
            }
            Encoding::Protobuf => {
                let envelope = match self.form {
                    Form::Whole => {
                        let raw = object.proto(self.resource).unwrap_or_default();
                        protobuf::encode_unknown(
                            self.resource.api_version(),
                            self.resource.kind,
                            &raw,
                        )
                    }
                    Form::Metadata { .. } => {
                        let raw = object.metadata_proto().unwrap_or_default();
                        protobuf::encode_unknown(
                            METADATA_API_VERSION,
                            "PartialObjectMetadata",
                            &raw,
                        )
                    }
                };
                protobuf::encode_watch_event(kind, &envelope)
            }
        }
    }

    async fn bookmark(&mut self, revision: u64, initial_events_end: bool) -> Result<(), Closed> {
        // An empty object of the kind at `revision`, written as any object
        // of the kind is (`"creationTimestamp":null`, a Pod's
        // `"spec":{"containers":null}`, ...).
        let mut metadata = serde_json::json!({ "resourceVersion": revision.to_string() });
        if initial_events_end {
            metadata["annotations"] = serde_json::json!({ "k8s.io/initial-events-end": "true" });
        }
        let object = StoredObject::new(
            self.resource,
            serde_json::json!({ "metadata": metadata }),
            revision,
        );
        let encoded = self.encode("BOOKMARK", &object);
        self.buf.put_slice(&encoded);
        self.flush().await
    }

    async fn error(&mut self, status: Status) -> Result<(), Closed> {
        let encoded = match self.wire {
            Encoding::Json => {
                let mut line = br#"{"type":"ERROR","object":"#.to_vec();
                line.extend_from_slice(&status.to_json());
                line.extend_from_slice(b"}\n");
                line
            }
            Encoding::Protobuf => protobuf::encode_watch_event(
                "ERROR",
                &Encoding::Protobuf.status(&status, kubecache_wire::media::Form::Compact),
            ),
        };
        self.buf.put_slice(&encoded);
        self.flush().await
    }

    async fn flush(&mut self) -> Result<(), Closed> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = self.buf.split().freeze();
        if let Some(cost) = self.cost {
            let time = cost.time_to_send(chunk.len(), self.wire, Source::WatchCache);
            tokio::time::sleep(time).await;
        }
        self.tx.send(Ok(chunk)).await.map_err(|_| Closed)
    }

    /// Sends what is buffered, then breaks the stream. The break waits until
    /// the server has taken every chunk and had a moment to write it, or
    /// hyper would drop the unwritten events along with the connection.
    async fn cut(&mut self) -> Result<(), Closed> {
        self.flush().await?;
        while self.tx.capacity() < self.tx.max_capacity() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = self
            .tx
            .send(Err(std::io::Error::other("injected fault: watch dropped")))
            .await;
        Err(Closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_a_dispatch_timer_a_bookmark_goes_at_the_first_tick_in_or_after_its_second() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let timer = Some((start, Duration::from_secs(1)));
        // Due at 3.7 s, scheduled at 0.7 s: the tick at 3 s, early.
        assert_eq!(dispatched(at(3_700), at(700), timer), at(3_000));
        // Due within the second it was scheduled in: the next tick, late.
        assert_eq!(dispatched(at(2_400), at(2_100), timer), at(3_000));
        assert_eq!(dispatched(at(2_000), at(2_000), timer), at(3_000));
        // Without a timer: when due.
        assert_eq!(dispatched(at(3_700), at(700), None), at(3_700));
        // A timer of 250 ms: the first tick at or after 3 s.
        let quarter = Some((start, Duration::from_millis(250)));
        assert_eq!(dispatched(at(3_700), at(700), quarter), at(3_000));
        assert_eq!(dispatched(at(3_700), at(3_100), quarter), at(3_250));
    }

    /// The due times of every bookmark of a watch of `timeout`.
    fn schedule(timeout: Duration, interval: Duration) -> Vec<Duration> {
        let start = Instant::now();
        let deadline = start + timeout;
        std::iter::successors(next_bookmark(start, deadline, interval), |&at| {
            next_bookmark(at, deadline, interval)
        })
        .map(|at| at - start)
        .collect()
    }

    #[test]
    fn a_watch_of_three_seconds_gets_one_bookmark_one_second_in() {
        let secs = Duration::from_secs;
        assert_eq!(schedule(secs(3), secs(60)), [secs(1)]);
    }

    #[test]
    fn a_watch_of_two_seconds_or_less_gets_no_bookmark() {
        for timeout in [0, 1, 2] {
            let timeout = Duration::from_secs(timeout);
            assert_eq!(schedule(timeout, Duration::from_millis(300)), []);
        }
    }

    #[test]
    fn bookmarks_come_every_interval_until_two_seconds_before_the_deadline() {
        let ms = Duration::from_millis;
        assert_eq!(
            schedule(ms(4_000), ms(700)),
            [ms(700), ms(1_400), ms(2_000)]
        );
        let minute = Duration::from_secs(60);
        let hour = schedule(Duration::from_secs(1800), minute);
        assert_eq!(hour.len(), 30, "{hour:?}");
        assert_eq!(hour[28], minute * 29);
        assert_eq!(hour[29], Duration::from_secs(1798));
    }
}
