//! Consistent reads: waiting until the store holds every change up to a
//! resourceVersion, and learning the API server's current one.
//!
//! # How a read becomes consistent
//!
//! A read with no resourceVersion must see every write the API server had
//! accepted when the read arrived. kubecache asks the API server for its
//! current resourceVersion `R` with one `limit=1` list, shared by every
//! read that arrived before the request was sent (reads arriving while it
//! is in flight wait for the next one: an answer begun before they arrived
//! could miss writes they must see), then waits until the store has caught
//! up with `R`.
//!
//! `R` is the API server's *global* revision: writes to other resources move
//! it too, and the store only moves with events of its own resource (and
//! with bookmarks, about once a minute). So when the store has not reached
//! `R` shortly after, a shared *probe* asks the API server what lies between
//! the store's resourceVersion `S` and `R`: a short watch from `S`. A
//! bookmark at `B` as its first line proves that the resource has no change
//! in `(S, B]`, so the store is complete through `B` (remembered, so later
//! reads up to `B` do not probe again); an event as its first line means a
//! change is on its way through the reflector's own watch, and the read
//! keeps waiting for it. kube-apiserver sends that bookmark about one second
//! into a watch of `timeoutSeconds=3` (`nextBookmarkTime` in
//! `cacher/cacher.go`), which bounds the cost of a read whose `R` came from
//! another resource's write.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kubecache_reflector::StoreReader;
use kubecache_reflector::upstream::{Query, Upstream};
use kubecache_wire::{Status, WatchEventType};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// How long a waiting read lets the reflector's own watch deliver before it
/// asks for a probe (and between probes): a write normally reaches the store
/// within milliseconds.
const PROBE_AFTER: Duration = Duration::from_millis(250);

/// `timeoutSeconds` of a probe watch: the shortest for which kube-apiserver
/// sends a bookmark before closing (it sends it 2 s before the timeout and
/// not at all when that moment has already passed).
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Requests shared by the reads waiting at the same moment.
type Waiters<T> = mpsc::UnboundedSender<oneshot::Sender<T>>;

/// Consistent reads of one store.
#[derive(Debug)]
pub(crate) struct Freshness {
    reader: StoreReader,
    /// The store holds every change of the resource up to this
    /// resourceVersion (as far as probes have shown beyond its own).
    complete_through: Arc<AtomicU64>,
    /// The API server's newest resourceVersion learnt so far.
    upstream: AtomicU64,
    current: Waiters<Result<u64, Status>>,
    probes: Waiters<()>,
}

impl Freshness {
    /// Serves consistent reads of `reader`, asking `upstream`. Spawns the
    /// two request loops; they end when this is dropped.
    pub(crate) fn new(upstream: Upstream, reader: StoreReader) -> Self {
        let complete_through = Arc::new(AtomicU64::new(0));
        let current = spawn_shared({
            let upstream = upstream.clone();
            move || {
                let upstream = upstream.clone();
                async move { current_resource_version(&upstream).await }
            }
        });
        let probes = spawn_shared({
            let reader = reader.clone();
            let complete_through = complete_through.clone();
            move || {
                let (upstream, reader) = (upstream.clone(), reader.clone());
                let complete_through = complete_through.clone();
                async move { probe(&upstream, &reader, &complete_through).await }
            }
        });
        Freshness {
            reader,
            complete_through,
            upstream: AtomicU64::new(0),
            current,
            probes,
        }
    }

    /// The newest resourceVersion up to which the store is known to hold
    /// every change.
    pub(crate) fn complete_through(&self) -> u64 {
        self.reader
            .current_resource_version()
            .max(self.complete_through.load(Ordering::Acquire))
    }

    /// How far the store is behind the API server's resourceVersion last
    /// learnt by a consistent read (0 when caught up, or never asked).
    pub(crate) fn lag(&self) -> u64 {
        self.upstream
            .load(Ordering::Acquire)
            .saturating_sub(self.complete_through())
    }

    /// Waits until the store holds every change up to the API server's
    /// current resourceVersion.
    ///
    /// # Errors
    ///
    /// 504 when the API server cannot be asked, or the store does not catch
    /// up within `timeout`.
    pub(crate) async fn consistent(&self, timeout: Duration) -> Result<(), Status> {
        let deadline = Instant::now() + timeout;
        let (tx, rx) = oneshot::channel();
        let asked = self.current.send(tx).is_ok();
        let current = match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(result)) if asked => result?,
            Ok(_) => return Err(unavailable("the request loop has stopped")),
            Err(_) => return Err(unavailable("the API server did not answer in time")),
        };
        self.upstream.fetch_max(current, Ordering::AcqRel);
        self.not_older_than_by(current, deadline).await
    }

    /// Waits until the store holds every change up to `rv`.
    ///
    /// # Errors
    ///
    /// 504 `Too large resource version` when it does not within `timeout`,
    /// as kube-apiserver answers (clients retry after a second).
    pub(crate) async fn not_older_than(&self, rv: u64, timeout: Duration) -> Result<(), Status> {
        self.not_older_than_by(rv, Instant::now() + timeout).await
    }

    async fn not_older_than_by(&self, rv: u64, deadline: Instant) -> Result<(), Status> {
        loop {
            if self.complete_through() >= rv {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Status::too_large_resource_version(
                    rv,
                    self.complete_through(),
                ));
            }
            let wait = (deadline - now).min(PROBE_AFTER);
            if self.reader.wait_for(rv, wait).await.is_ok() {
                return Ok(());
            }
            if Instant::now() < deadline {
                let (tx, rx) = oneshot::channel();
                if self.probes.send(tx).is_ok() {
                    let _ = tokio::time::timeout_at(deadline, rx).await;
                }
            }
        }
    }
}

/// Spawns a loop that runs `request` once for all the waiters queued when
/// it starts, and answers each of them with the result.
fn spawn_shared<T, F, Fut>(request: F) -> Waiters<T>
where
    T: Clone + Send + 'static,
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<oneshot::Sender<T>>();
    tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut waiters = vec![first];
            while let Ok(more) = rx.try_recv() {
                waiters.push(more);
            }
            let result = request().await;
            for waiter in waiters {
                let _ = waiter.send(result.clone());
            }
        }
    });
    tx
}

/// The API server's current resourceVersion: one `limit=1` list.
async fn current_resource_version(upstream: &Upstream) -> Result<u64, Status> {
    let query = Query {
        limit: Some(1),
        ..Query::default()
    };
    let body = upstream
        .list(&query)
        .await
        .map_err(|e| unavailable(&e.to_string()))?;
    body.page()
        .map(|page| page.resource_version)
        .map_err(|e| unavailable(&format!("its list could not be read: {e}")))
}

/// One probe: a short watch from the store's resourceVersion; a bookmark as
/// its first line moves `complete_through` (see the module doc).
async fn probe(upstream: &Upstream, reader: &StoreReader, complete_through: &AtomicU64) {
    let from = reader.current_resource_version();
    let query = Query {
        watch: true,
        resource_version: Some(from),
        timeout: Some(PROBE_TIMEOUT),
        ..Query::default()
    };
    let Ok(mut events) = upstream.watch(&query).await else {
        return;
    };
    let Ok(Some(event)) = events.next_event().await else {
        return;
    };
    let Ok(line) = event.line() else {
        return;
    };
    let Ok(rv) = line.resource_version() else {
        return;
    };
    let through = match line.event_type {
        WatchEventType::Bookmark => rv,
        WatchEventType::Error => return,
        // The first change after `from` is at `rv`: none lies in between.
        _ => rv.saturating_sub(1),
    };
    complete_through.fetch_max(through, Ordering::AcqRel);
}

/// 504 for a consistent read that could not learn the API server's state.
fn unavailable(why: &str) -> Status {
    Status::failure(
        504,
        "Timeout",
        format!(
            "a consistent read needs the API server's current resourceVersion, and {why}; retry, or read with resourceVersion=0 to accept the cache's current state"
        ),
    )
}
