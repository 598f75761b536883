//! One watcher's stream: initial events, replay, then the live events its
//! dispatcher queues, with bookmarks, until the timeout, the client leaves
//! (its body is dropped), the server shuts down or the watcher falls
//! behind. Its lines go to the response body ([`super::body`]), which
//! runs it on the connection's task.
//!
//! The timeout is checked before every event, initial and replayed ones
//! too: a watch ends after the last whole event it wrote, with no bookmark
//! when its initial events or replay were not done, as kube-apiserver ends
//! it (the golden corpus's `edges/` `watch-timing` cases: complete lines,
//! no BOOKMARK, not even the initial-events-end one). A negative
//! `timeoutSeconds` thus sends nothing.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use kubecache_reflector::upstream::ApiResource;
use kubecache_reflector::{Subscription, TryRecvError};
use kubecache_wire::{CachedObject, ChangeType, Status};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};

use super::body::Outbox;

use crate::cacher::encoding::{Kind, Shape};
use crate::cacher::fanout::frame::{self, Frame, decide};
use crate::cacher::fanout::{Join, Signals};
use crate::cacher::{Cache, Seat};
use crate::cacher::{Filter, Predicates};
use crate::http::negotiate::Rendering;
use crate::http::table::{self, LineOptions};
use kubecache_wire::Encoding;

/// Bytes gathered before they are handed to the connection.
const CHUNK: usize = 64 * 1024;

/// The lines ready for the connection since the last flush, kept as the
/// shared encoded frames they are (each encoded once for all watchers):
/// handed over as they are, never copied; hyper writes the lines it has
/// together (one `writev`).
#[derive(Default)]
struct Gathered {
    lines: Vec<Bytes>,
    len: usize,
}

impl Gathered {
    /// Adds a line; whether a chunk's worth is gathered.
    fn push(&mut self, line: Bytes) -> bool {
        self.len += line.len();
        self.lines.push(line);
        self.len >= CHUNK
    }

    /// The gathered lines and their bytes, if any; the lines' vector is
    /// kept for the next ones (no allocation per flush).
    fn drain(&mut self) -> Option<(std::vec::Drain<'_, Bytes>, usize)> {
        if self.lines.is_empty() {
            return None;
        }
        let len = std::mem::take(&mut self.len);
        Some((self.lines.drain(..), len))
    }
}

/// Where the stream starts.
pub(crate) enum Start {
    /// The `ADDED` events of these objects, each made as it is written,
    /// then the initial-events-end bookmark at this resourceVersion if
    /// asked, then the events of the subscription; the seat of a large
    /// send is freed once they are written (and held only while they are
    /// being written, see `cacher/seats.rs`).
    Initial {
        objects: Vec<Arc<CachedObject>>,
        end_bookmark: Option<u64>,
        subscription: Subscription,
        seat: Option<Seat>,
    },
    /// The events of the subscription.
    After(Subscription),
    /// One `ERROR` event, then the end (a too-old resourceVersion).
    Error(Status),
}

/// Why a watch ended (the `reason` label of
/// `kubecache_watchers_closed_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// `timeoutSeconds` (or the default 30–60 minutes) passed.
    Timeout,
    /// The client went away.
    Client,
    /// The server is shutting down.
    Shutdown,
    /// The watcher fell behind and was cut with 410.
    Slow,
    /// The watcher's initial events waited too long for a seat again
    /// after its client stopped reading (see `cacher/seats.rs`).
    Stalled,
    /// The start was refused with an ERROR event (too old).
    Expired,
    /// The start was refused with an ERROR event: a streaming list's
    /// resourceVersion, not reached within the read wait (504).
    Unreached,
    /// The store closed (its reflector stopped).
    Closed,
    /// An object did not encode as protobuf: an ERROR, then the end.
    Unencodable,
}

impl Ending {
    fn as_str(self) -> &'static str {
        match self {
            Ending::Timeout => "timeout",
            Ending::Client => "client",
            Ending::Shutdown => "shutdown",
            Ending::Slow => "slow",
            Ending::Stalled => "stalled",
            Ending::Expired => "expired",
            Ending::Unreached => "unreached",
            Ending::Closed => "closed",
            Ending::Unencodable => "unencodable",
        }
    }
}

/// One watcher.
pub(crate) struct Watch {
    pub cache: Arc<Cache>,
    pub filter: Filter,
    pub predicates: Predicates,
    /// Bookmarks every so often, and before the timeout.
    pub bookmarks: Option<Duration>,
    pub deadline: Instant,
    pub shutdown: watch::Receiver<bool>,
    pub queue_size: usize,
    /// Objects or their metadata in JSON or protobuf, or one-row tables
    /// (`kubectl get -w`).
    pub rendering: Rendering,
    /// The resourceVersion the watch resumes from (0: none): no event at
    /// or before it is sent (the cache may not have reached it when the
    /// watch starts), no bookmark goes below it.
    pub from: u64,
}

impl Watch {
    /// Streams from `start` into `out` until the watch ends; counted
    /// among the resource's watchers until then or until dropped (the
    /// client left).
    pub async fn run(self, start: Start, out: Outbox) {
        let resource = self.cache.name();
        let mut open = Open::new(self.cache.clone());
        let mut writer = Writer {
            out,
            gathered: Gathered::default(),
            events: 0,
            events_sent: metrics::counter!("kubecache_watch_events_sent_total", "resource" => resource.clone()),
            bytes_sent: metrics::counter!("kubecache_watch_bytes_sent_total", "resource" => resource.clone()),
            last: self.from,
            after: self.from,
            rendering: self.rendering,
            resource: self.cache.resource.clone(),
            kind: self.cache.kind.clone(),
            table_sent: false,
        };
        let (Ok(ending) | Err(ending)) = self.stream(start, &mut writer).await;
        open.ending = ending;
    }

    /// Streams until the watch ends; `Err` when an event did not encode.
    async fn stream(mut self, start: Start, out: &mut Writer) -> Result<Ending, Ending> {
        let mut subscription = match start {
            Start::Initial {
                objects,
                end_bookmark,
                subscription,
                mut seat,
            } => {
                for object in objects {
                    if self.timed_out() {
                        return Ok(out.end(Ending::Timeout).await);
                    }
                    if let Some(seat) = &mut seat
                        && seat.ready().await.is_err()
                    {
                        // Its client read nothing while it waited for
                        // its seat again: what it was given stays unread.
                        return Ok(Ending::Stalled);
                    }
                    let position = object.resource_version;
                    out.event(&Frame::new(ChangeType::Added, object, position))
                        .await?;
                    if let Some(seat) = &seat {
                        seat.progressed();
                    }
                }
                if let Some(rv) = end_bookmark.filter(|_| !self.timed_out()) {
                    out.bookmark(rv, true).await;
                }
                drop(seat);
                subscription
            }
            Start::After(subscription) => subscription,
            Start::Error(status) => {
                out.error(&status).await;
                return Ok(match status.code {
                    410 => Ending::Expired,
                    _ => Ending::Unreached,
                });
            }
        };
        // Replay the log on our own subscription, then hand it over.
        loop {
            if self.timed_out() {
                return Ok(out.end(Ending::Timeout).await);
            }
            match subscription.try_recv() {
                Ok(event) => {
                    if let Some((kind, object)) = decide(&self.filter, &self.predicates, &event) {
                        out.event(&Frame::new(kind, object.clone(), event.resource_version))
                            .await?;
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Lagged { .. }) => return Ok(out.cut().await),
                Err(TryRecvError::Closed) => return Ok(out.end(Ending::Closed).await),
            }
        }
        let (queue, mut frames) = mpsc::channel(self.queue_size);
        let signals = Arc::new(Signals::default());
        let _membership = self.cache.hub.join(Join {
            filter: self.filter.clone(),
            predicates: self.predicates,
            subscription,
            queue,
            signals: signals.clone(),
        });
        self.live(&mut frames, &signals, out).await
    }

    fn timed_out(&self) -> bool {
        Instant::now() >= self.deadline
    }

    async fn live(
        &mut self,
        frames: &mut mpsc::Receiver<Arc<Frame>>,
        signals: &Signals,
        out: &mut Writer,
    ) -> Result<Ending, Ending> {
        let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        let mut next_bookmark = self.bookmarks.map_or(far, |every| Instant::now() + every);
        let mut bookmark_due = false;
        // Armed once, not once per wake-up (a live watcher wakes per event;
        // the shutdown's waiters are shared by every watcher, under a lock).
        let bookmark_timer = sleep_until(next_bookmark);
        let deadline_timer = sleep_until(self.deadline);
        let shutdown = shut_down(&mut self.shutdown);
        tokio::pin!(bookmark_timer, deadline_timer, shutdown);
        loop {
            if signals.is_cut() {
                return Ok(out.cut().await);
            }
            // Checked here too: a watcher never idle never reaches the
            // select below.
            if Instant::now() >= self.deadline {
                return Ok(out.end(Ending::Timeout).await);
            }
            match frames.try_recv() {
                Ok(frame) => {
                    out.event(&frame).await?;
                    continue;
                }
                Err(mpsc::error::TryRecvError::Disconnected) if !signals.is_cut() => {
                    return Ok(out.end(Ending::Closed).await);
                }
                Err(_) => {}
            }
            // Nothing queued: every event routed so far has been written.
            if bookmark_due && signals.is_joined() {
                bookmark_due = false;
                let rv = self.cache.hub.routed();
                out.bookmark(rv, false).await;
            }
            out.flush().await;
            tokio::select! {
                frame = frames.recv() => {
                    if let Some(frame) = frame {
                        out.event(&frame).await?;
                    }
                }
                () = &mut bookmark_timer => {
                    bookmark_due = true;
                    next_bookmark += self.bookmarks.unwrap_or_default();
                    bookmark_timer.as_mut().reset(next_bookmark);
                }
                () = &mut deadline_timer => {
                    // Cut while its last write was blocked: it must learn
                    // that it missed events, timeout or not.
                    if signals.is_cut() {
                        return Ok(out.cut().await);
                    }
                    if self.bookmarks.is_some() && signals.is_joined() && frames.is_empty() {
                        let rv = self.cache.hub.routed();
                        out.bookmark(rv, false).await;
                    }
                    return Ok(out.end(Ending::Timeout).await);
                }
                () = &mut shutdown => return Ok(out.end(Ending::Shutdown).await),
            }
        }
    }
}

/// Resolves when the server shuts down.
async fn shut_down(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|down| *down).await;
}

/// The ERROR a watcher gets when it fell behind: its client resumes from
/// its last resourceVersion (or relists when that is gone too).
fn fell_behind() -> Status {
    Status::expired(
        "watcher fell behind: too many events queued for it; resume from the last resourceVersion received",
    )
}

/// A watch among its resource's watchers: counts it in while it runs, and
/// out with its ending (the `reason` of `kubecache_watchers_closed_total`)
/// when it ends or is dropped.
struct Open {
    cache: Arc<Cache>,
    /// [`Ending::Client`] until the watch ends by itself.
    ending: Ending,
}

impl Open {
    fn new(cache: Arc<Cache>) -> Open {
        cache.watchers.fetch_add(1, Ordering::Relaxed);
        Open {
            cache,
            ending: Ending::Client,
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.cache.watchers.fetch_sub(1, Ordering::Relaxed);
        metrics::counter!("kubecache_watchers_closed_total", "resource" => self.cache.name(), "reason" => self.ending.as_str())
            .increment(1);
    }
}

/// Gathers lines for the connection and counts what is sent.
struct Writer {
    out: Outbox,
    gathered: Gathered,
    /// Events in `gathered`.
    events: u64,
    /// `kubecache_watch_events_sent_total` and `…_bytes_sent_total` of the
    /// resource, looked up once per watch rather than once per flush.
    events_sent: metrics::Counter,
    bytes_sent: metrics::Counter,
    /// The resourceVersion of the last event or bookmark written: bookmarks
    /// never go back before it.
    last: u64,
    /// Events at or before this resourceVersion are not sent.
    after: u64,
    rendering: Rendering,
    /// The resource, for tables.
    resource: ApiResource,
    /// What encoding needs of the resource.
    kind: Kind,
    /// Whether a table has been sent: only the first carries the column
    /// definitions.
    table_sent: bool,
}

impl Writer {
    /// The shape and wire of events and errors: a Table watcher's errors
    /// are JSON.
    fn encoding(&self) -> (Shape, Encoding) {
        match self.rendering {
            Rendering::Encoded(shape, encoding) => (shape, encoding),
            Rendering::Table { .. } => (Shape::Object, Encoding::Json),
        }
    }

    async fn event(&mut self, frame: &Frame) -> Result<(), Ending> {
        if frame.position <= self.after {
            return Ok(());
        }
        self.last = self.last.max(frame.position);
        self.events += 1;
        let line = match self.rendering {
            Rendering::Encoded(shape, encoding) => match frame.encoded(&self.kind, shape, encoding)
            {
                Ok(line) => line,
                Err(status) => {
                    tracing::error!(object = %frame.object.key, "{}", status.message);
                    self.error(&status).await;
                    return Err(Ending::Unencodable);
                }
            },
            Rendering::Table { version, include } => {
                let first = !std::mem::replace(&mut self.table_sent, true);
                let options = LineOptions {
                    version,
                    include,
                    first,
                };
                table::watch_line(frame, &self.resource, options)
            }
        };
        self.line(line).await;
        Ok(())
    }

    async fn bookmark(&mut self, rv: u64, end: bool) {
        let rv = rv.max(self.last);
        self.last = rv;
        let line = match self.rendering {
            Rendering::Encoded(shape, encoding) => {
                frame::bookmark(&self.kind, shape, encoding, rv, end)
            }
            Rendering::Table { version, include } => {
                let first = !std::mem::replace(&mut self.table_sent, true);
                table::bookmark_line(&self.resource, version, include, rv, end, first)
            }
        };
        self.line(line).await
    }

    async fn error(&mut self, status: &Status) {
        let (_, encoding) = self.encoding();
        self.line(frame::error(encoding, status)).await;
        self.flush().await;
    }

    /// The ERROR of a watcher that fell behind, then the end.
    async fn cut(&mut self) -> Ending {
        self.error(&fell_behind()).await;
        Ending::Slow
    }

    async fn end(&mut self, ending: Ending) -> Ending {
        self.flush().await;
        ending
    }

    async fn line(&mut self, line: Bytes) {
        if self.gathered.push(line) {
            self.flush().await;
        }
    }

    /// Hands the gathered lines to the body, once it has taken the last.
    async fn flush(&mut self) {
        let Some((lines, bytes)) = self.gathered.drain() else {
            return;
        };
        let (events, bytes) = (std::mem::take(&mut self.events), bytes as u64);
        self.out.send(lines).await;
        self.events_sent.increment(events);
        self.bytes_sent.increment(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cacher::{Filter, ServeSettings};
    use http_body_util::BodyExt;
    use kubecache_reflector::upstream::{ApiResource, ResourceSpec, Upstream};

    /// A cache of pods (its store empty: the watch is handed its objects)
    /// and `n` pods of about 1 KiB each.
    fn pods(n: usize) -> (Arc<Cache>, Vec<Arc<CachedObject>>) {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let (_writer, reader) = kubecache_reflector::store(Default::default());
        let (_, status) = watch::channel(Default::default());
        let upstream = Upstream::new(client, ResourceSpec::all(ApiResource::pods()));
        let cache = Cache::new(
            upstream,
            reader,
            status,
            Default::default(),
            &ServeSettings::default(),
        );
        let padding = "x".repeat(1024);
        let objects = (0..n)
            .map(|i| {
                let json = format!(
                    r#"{{"metadata":{{"name":"p{i}","namespace":"ns","resourceVersion":"{}","annotations":{{"a":"{padding}"}}}},"spec":{{}}}}"#,
                    i + 1
                );
                let object = kubecache_wire::decode_object(
                    json.as_bytes(),
                    "Pod",
                    "v1",
                    &kubecache_wire::Transform::default(),
                );
                Arc::new(object.unwrap())
            })
            .collect();
        (Arc::new(cache), objects)
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_during_the_initial_events_ends_after_a_whole_event_without_a_bookmark() {
        let (cache, objects) = pods(1000);
        let (_shutdown, shutting_down) = watch::channel(false);
        let timeout = Duration::from_secs(2);
        let watch = Watch {
            filter: Filter::new(
                None,
                Default::default(),
                Default::default(),
                cache.indexes.clone(),
            ),
            predicates: Predicates::default(),
            bookmarks: Some(Duration::from_secs(60)),
            deadline: Instant::now() + timeout,
            shutdown: shutting_down,
            queue_size: 16,
            rendering: Rendering::Encoded(Shape::Object, Encoding::Json),
            from: 0,
            cache: cache.clone(),
        };
        let start = Start::Initial {
            objects,
            end_bookmark: Some(1000),
            subscription: cache.reader.snapshot_and_subscribe().1,
            seat: None,
        };
        let outbox = Outbox::default();
        let mut body = super::super::body::WatchBody::new(outbox.clone(), watch.run(start, outbox));
        // The client reads the first chunk, then the timeout passes.
        let mut read = body
            .frame()
            .await
            .unwrap()
            .unwrap()
            .into_data()
            .unwrap()
            .to_vec();
        tokio::time::advance(timeout).await;
        read.extend(body.collect().await.unwrap().to_bytes());
        assert!(read.ends_with(b"\n"), "ends on a whole line");
        let lines: Vec<serde_json::Value> = read
            .split_inclusive(|b| *b == b'\n')
            .map(|line| serde_json::from_slice(line).expect("a whole event"))
            .collect();
        assert!(lines.len() < 1000, "cut at the timeout: {}", lines.len());
        assert!(
            lines.iter().all(|line| line["type"] == "ADDED"),
            "no bookmark"
        );
    }

    #[test]
    fn lines_ready_together_go_to_the_connection_in_order_without_a_copy() {
        let lines = ["a\n", "bb\n", "ccc\n"].map(Bytes::from);
        let mut gathered = Gathered::default();
        for line in &lines {
            assert!(!gathered.push(line.clone()));
        }
        let (taken, len) = gathered.drain().unwrap();
        let taken: Vec<Bytes> = taken.collect();
        assert_eq!(taken, lines);
        assert!(
            taken
                .iter()
                .zip(&lines)
                .all(|(t, l)| t.as_ptr() == l.as_ptr())
        );
        assert_eq!(len, 9);
        assert!(gathered.drain().is_none());
        gathered.push(Bytes::from("d\n"));
        let (taken, len) = gathered.drain().unwrap();
        assert_eq!(
            (taken.collect::<Vec<_>>(), len),
            (vec![Bytes::from("d\n")], 2)
        );
    }

    #[test]
    fn a_chunks_worth_of_lines_is_flushed() {
        let mut gathered = Gathered::default();
        let line = Bytes::from(vec![b'x'; CHUNK / 4]);
        let full: Vec<bool> = (0..4).map(|_| gathered.push(line.clone())).collect();
        assert_eq!(full, [false, false, false, true]);
        assert_eq!(gathered.drain().unwrap().1, CHUNK);
    }
}
