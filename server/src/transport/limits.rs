//! How many connections kubecache holds, in all and per client address,
//! and what a connection beyond them gets; how many requests of one
//! address may wait for their bodies.
//!
//! The accept loop takes a permit before it accepts, so that no more than
//! `max_connections`, those held and [`REFUSALS`] sockets are ever open:
//! beyond them, new connections wait in the kernel's backlog. An accepted connection is
//! *admitted* while fewer than `max_connections` are, its address holds
//! fewer than `max_connections_per_address`, and fewer than
//! `max_pending_per_address` of its address's connections are *pending*
//! (not past their first request's head: a TLS handshake in progress, a
//! silent connection, a half-sent head). Authentication is per request, so
//! the address is what a connection is known by. Otherwise it is *held*,
//! unread, one of at most [`Limits::max_held`] (a quarter of those of one
//! address),
//! and admitted when a place frees, for as long as a head may take (the
//! header-read timeout, which the wait counts toward): refusing at once
//! made a client that holds its connections (300 slow uploads, a burst of
//! 100 watches from one informer process) reconnect in a loop, thousands
//! of handshakes instead of one wait. Held too long, or beyond the holding, it is
//! *refused*: one of at most [`REFUSALS`] at a time, its request answered
//! with a 429 `Status` (`Retry-After: 1`) and the connection closed;
//! but the kubelet's probes ([`PROBES`]) are answered as usual, so that a
//! full kubecache is not restarted for it. Beyond [`REFUSALS`], a refused
//! connection is closed unanswered. `kubecache_connections` counts them by
//! state: admitted, held and refused.
//!
//! A request with a body holds an *upload* place of its address until
//! its body has all arrived (or is dropped); beyond
//! `max_uploads_per_address`, a request with a body waits for one, its
//! body unread, as long as a head may take; then it is answered 429 and
//! its connection closed (a lingering close, see `linger`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kubecache_wire::Status;
use parking_lot::Mutex;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Connections refused at once, each answering one request: what a
/// connection beyond the limits may still hold.
pub const REFUSALS: usize = 32;

/// The paths a refused connection is still served: the kubelet's probes.
pub const PROBES: &[&str] = &["/healthz", "/livez", "/readyz"];

/// Descriptors kept for what is neither a client's connection nor passed
/// through: the listener, kubecache's own connections to the API server
/// (the watches, consistent reads, and at most
/// [`REVIEWS_AT_ONCE`](crate::auth::REVIEWS_AT_ONCE) reviews), files, the
/// runtime.
const RESERVED_DESCRIPTORS: u64 = 64 + crate::auth::REVIEWS_AT_ONCE as u64;

/// The bounds of serving (docs/operations.md, "Connections and limits", says
/// how to choose them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest a request's head may take from its first byte (from
    /// the accept, or the TLS handshake, for a connection's first).
    pub header_read_timeout: Duration,
    /// The longest a keep-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Connections admitted at once.
    pub max_connections: usize,
    /// Connections admitted at once from one client address.
    pub max_connections_per_address: usize,
    /// Streams open at once on one HTTP/2 connection (kube-apiserver's
    /// `--http2-max-streams-per-connection`): its requests in flight.
    pub http2_max_streams_per_connection: usize,
    /// Connections of one client address admitted at once before their
    /// first request's head (TLS handshake included).
    pub max_pending_per_address: usize,
    /// Requests of one client address whose body is arriving, at once.
    pub max_uploads_per_address: usize,
    /// Pass-through's connections to the API server open at once, for
    /// every client: each request passed through holds one for as long as
    /// its answer streams (a watch, a log), then leaves it pooled.
    pub max_passthrough_connections: usize,
}

impl Default for Limits {
    /// kube-apiserver's timeouts (its `http.Server`'s `ReadHeaderTimeout`
    /// and `IdleTimeout`) and streams per HTTP/2 connection (100, what its
    /// `--http2-max-streams-per-connection=0` means since the rapid-reset
    /// fixes, and what Go's client assumes before the server's SETTINGS);
    /// room for a few thousand clients, hundreds of them behind one
    /// address (a node's host-network pods, a NAT), of which 64 may be
    /// opening at once and 64 may be sending a body (an honest client's
    /// head follows its handshake within milliseconds, and kube-apiserver's
    /// own bound on writes in flight is 200 in all); 1,024 requests passed
    /// through at once (kube-apiserver answers 600 that are not watches at
    /// once by default, its `--max-requests-inflight` and
    /// `--max-mutating-requests-inflight`; the rest is for watches and
    /// logs).
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            max_connections: 4096,
            max_connections_per_address: 512,
            http2_max_streams_per_connection: 100,
            max_pending_per_address: 64,
            max_uploads_per_address: 64,
            max_passthrough_connections: 1024,
        }
    }
}

impl Limits {
    /// The health listener's: the kubelet probes a container a few times
    /// at once at most, each on a new connection, and answers are small;
    /// a connection that sends nothing is cut in 10 s.
    pub const PROBES: Limits = Limits {
        header_read_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(10),
        max_connections: 64,
        max_connections_per_address: 8,
        max_pending_per_address: 8,
        max_uploads_per_address: 1,
        // Plain HTTP: HTTP/1.1 only.
        http2_max_streams_per_connection: 1,
        // Probes pass nothing through.
        max_passthrough_connections: 1,
    };

    /// Connections held at once, unread, waiting for a place: a quarter of
    /// `max_connections` (each holds its socket only).
    pub fn max_held(&self) -> usize {
        self.max_connections / 4
    }

    /// Of [`Limits::max_held`], what one address's connections may hold.
    pub fn max_held_per_address(&self) -> usize {
        self.max_held() / 4
    }

    /// These limits lowered, if need be, so that their connections, those
    /// held and those passed through cannot use up `descriptors` open
    /// files: pass-through gets at most a quarter of what is not reserved,
    /// the clients' connections the rest (at least one of each is kept).
    #[must_use]
    pub fn within_descriptors(self, descriptors: u64) -> Limits {
        let room = descriptors.saturating_sub(RESERVED_DESCRIPTORS + REFUSALS as u64);
        let max_passthrough_connections = (self.max_passthrough_connections as u64)
            .min(room / 4)
            .max(1);
        // Each admitted connection's socket, and a quarter's held.
        let room = room.saturating_sub(max_passthrough_connections) * 4 / 5;
        let max_connections = (self.max_connections as u64).min(room).max(1) as usize;
        Limits {
            max_connections,
            max_connections_per_address: self.max_connections_per_address.min(max_connections),
            max_passthrough_connections: max_passthrough_connections as usize,
            ..self
        }
    }
}

/// Raises the soft limit on open descriptors to the hard one, as Go's
/// runtime does at start-up (since Go 1.19); returns the limit in force.
///
/// # Errors
///
/// The limit cannot be read or set.
pub fn raise_descriptor_limit() -> std::io::Result<u64> {
    rlimit::increase_nofile_limit(u64::MAX)
}

/// Why a connection was refused: the `reason` of
/// `kubecache_connections_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    Total,
    PerAddress,
    PendingPerAddress,
    /// Of a request with a body, not of its connection.
    UploadsPerAddress,
}

impl Refusal {
    const ALL: [Refusal; 4] = [
        Refusal::Total,
        Refusal::PerAddress,
        Refusal::PendingPerAddress,
        Refusal::UploadsPerAddress,
    ];

    fn label(self) -> &'static str {
        match self {
            Refusal::Total => "max_connections",
            Refusal::PerAddress => "max_connections_per_address",
            Refusal::PendingPerAddress => "max_pending_connections_per_address",
            Refusal::UploadsPerAddress => "max_uploads_per_address",
        }
    }

    fn count(self) {
        metrics::counter!("kubecache_connections_refused_total", "reason" => self.label())
            .increment(1);
    }

    /// The answer to a refused connection's request.
    pub(super) fn status(self, limits: &Limits, address: IpAddr) -> Status {
        let message = match self {
            Refusal::Total => format!(
                "too many connections: kubecache holds its most ({}); retry later",
                limits.max_connections
            ),
            Refusal::PerAddress => format!(
                "too many connections from {address}: at most {} at once; retry later",
                limits.max_connections_per_address
            ),
            Refusal::PendingPerAddress => format!(
                "too many new connections from {address}: at most {} at once before their \
                 first request; retry later",
                limits.max_pending_per_address
            ),
            Refusal::UploadsPerAddress => format!(
                "too many requests from {address} sending a body: at most {} at once; \
                 retry later",
                limits.max_uploads_per_address
            ),
        };
        Status::failure(429, "TooManyRequests", message).retry_after(1)
    }
}

/// Where the accept loop takes its permits and sorts connections.
pub(super) struct Gate {
    limits: Limits,
    sockets: Arc<Semaphore>,
    counts: Mutex<Counts>,
    /// Told whenever a place (a connection's, a pending one's, an upload's)
    /// is given back.
    freed: Notify,
}

#[derive(Default)]
struct Counts {
    admitted: usize,
    refusing: usize,
    holding: usize,
    by_address: HashMap<IpAddr, Held>,
}

/// What one address holds; no entry when all are zero.
#[derive(Default, Clone, Copy)]
struct Held {
    connections: usize,
    pending: usize,
    uploads: usize,
    /// Connections waiting for a place.
    waiting: usize,
}

impl Counts {
    /// Changes what `address` holds, dropping its entry once it holds
    /// nothing.
    fn held(&mut self, address: IpAddr, change: impl FnOnce(&mut Held)) {
        let held = self.by_address.entry(address).or_default();
        change(held);
        if held.connections + held.pending + held.uploads + held.waiting == 0 {
            self.by_address.remove(&address);
        }
    }
}

/// What a connection got: its ticket (held by its task) and, if refused,
/// why. `None`: closed unanswered.
pub(super) type Entry = Option<(Ticket, Option<Refusal>)>;

/// A connection beyond the limits, held unread until a place frees (or
/// dropped).
pub(super) struct Waiting {
    gate: Arc<Gate>,
    address: IpAddr,
    /// Until it is admitted or refused.
    permit: Option<OwnedSemaphorePermit>,
}

impl Waiting {
    /// Admitted once a place frees; refused (or closed unanswered, beyond
    /// [`REFUSALS`]) if none has by `until`.
    pub(super) async fn entry(mut self, until: Instant) -> Entry {
        let (gate, address) = (self.gate.clone(), self.address);
        let refusal = gate
            .when_freed(until, |counts| {
                gate.refusal(counts, address).map_or(Ok(()), Err)
            })
            .await;
        let mut counts = gate.counts.lock();
        let permit = self.leave(&mut counts);
        match refusal {
            Ok(()) => Some(gate.admit(&mut counts, permit, address)),
            Err(refusal) => gate.refuse(&mut counts, permit, address, refusal),
        }
    }

    /// No longer held: its socket's permit.
    fn leave(&mut self, counts: &mut Counts) -> OwnedSemaphorePermit {
        counts.holding -= 1;
        counts.held(self.address, |held| held.waiting -= 1);
        count_held(-1.0);
        self.permit.take().expect("left once")
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.permit.is_some() {
            let gate = self.gate.clone();
            drop(self.leave(&mut gate.counts.lock()));
        }
    }
}

/// Changes the gauge of the connections held.
fn count_held(by: f64) {
    metrics::gauge!("kubecache_connections", "state" => "held").increment(by);
}

/// How the accept loop is to go on with a connection.
pub(super) enum Entering {
    /// Admitted or refused at once.
    Now(Entry),
    /// Held until a place frees.
    Held(Waiting),
}

impl Gate {
    pub(super) fn new(limits: Limits) -> Arc<Gate> {
        register();
        Arc::new(Gate {
            limits,
            sockets: Arc::new(Semaphore::new(
                limits.max_connections + limits.max_held() + REFUSALS,
            )),
            counts: Mutex::default(),
            freed: Notify::new(),
        })
    }

    /// A socket's permit: waits while every socket is taken.
    pub(super) async fn socket(&self) -> OwnedSemaphorePermit {
        self.sockets
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// Admits a connection accepted from `address` with `permit`, holds it
    /// while its address (or kubecache) has no place for it, or refuses it
    /// when the holding is full.
    pub(super) fn enter(
        self: &Arc<Self>,
        permit: OwnedSemaphorePermit,
        address: IpAddr,
    ) -> Entering {
        let mut counts = self.counts.lock();
        let Some(refusal) = self.refusal(&counts, address) else {
            return Entering::Now(Some(self.admit(&mut counts, permit, address)));
        };
        let waiting = counts
            .by_address
            .get(&address)
            .map_or(0, |held| held.waiting);
        let limits = &self.limits;
        if counts.holding < limits.max_held() && waiting < limits.max_held_per_address() {
            counts.holding += 1;
            counts.held(address, |held| held.waiting += 1);
            count_held(1.0);
            return Entering::Held(Waiting {
                gate: self.clone(),
                address,
                permit: Some(permit),
            });
        }
        Entering::Now(self.refuse(&mut counts, permit, address, refusal))
    }

    /// `attempt`'s first success, tried now and whenever a place is given
    /// back until `until`; then its last failure.
    async fn when_freed<T, E>(
        &self,
        until: Instant,
        mut attempt: impl FnMut(&mut Counts) -> Result<T, E>,
    ) -> Result<T, E> {
        loop {
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            let failed = match attempt(&mut self.counts.lock()) {
                Ok(done) => return Ok(done),
                Err(failed) => failed,
            };
            tokio::select! {
                () = freed => {}
                () = tokio::time::sleep_until(until) => return Err(failed),
            }
        }
    }

    /// Why a connection from `address` cannot be admitted now, if it cannot.
    fn refusal(&self, counts: &Counts, address: IpAddr) -> Option<Refusal> {
        let from_address = counts.by_address.get(&address).copied().unwrap_or_default();
        if counts.admitted >= self.limits.max_connections {
            Some(Refusal::Total)
        } else if from_address.connections >= self.limits.max_connections_per_address {
            Some(Refusal::PerAddress)
        } else if from_address.pending >= self.limits.max_pending_per_address {
            Some(Refusal::PendingPerAddress)
        } else {
            None
        }
    }

    fn admit(
        self: &Arc<Self>,
        counts: &mut Counts,
        permit: OwnedSemaphorePermit,
        address: IpAddr,
    ) -> (Ticket, Option<Refusal>) {
        counts.admitted += 1;
        counts.held(address, |held| {
            held.connections += 1;
            held.pending += 1;
        });
        (self.ticket(permit, address, true), None)
    }

    fn refuse(
        self: &Arc<Self>,
        counts: &mut Counts,
        permit: OwnedSemaphorePermit,
        address: IpAddr,
        refusal: Refusal,
    ) -> Entry {
        refusal.count();
        if counts.refusing >= REFUSALS {
            return None;
        }
        counts.refusing += 1;
        Some((self.ticket(permit, address, false), Some(refusal)))
    }

    fn ticket(
        self: &Arc<Self>,
        permit: OwnedSemaphorePermit,
        address: IpAddr,
        admitted: bool,
    ) -> Ticket {
        let ticket = Ticket {
            gate: self.clone(),
            address,
            admitted,
            pending: AtomicBool::new(admitted),
            _permit: permit,
        };
        ticket.count(1.0);
        ticket
    }
}

/// A request's upload place, given back when its body has arrived or is
/// dropped.
pub(super) struct UploadPlace {
    gate: Arc<Gate>,
    address: IpAddr,
}

impl Drop for UploadPlace {
    fn drop(&mut self) {
        (self.gate.counts.lock()).held(self.address, |held| held.uploads -= 1);
        self.gate.freed.notify_waiters();
    }
}

/// A connection's place, given back when its task ends.
pub(super) struct Ticket {
    gate: Arc<Gate>,
    address: IpAddr,
    admitted: bool,
    /// Admitted, and its first request's head not yet read.
    pending: AtomicBool,
    _permit: OwnedSemaphorePermit,
}

impl Ticket {
    /// Its first request's head has been read: no longer pending.
    pub(super) fn first_request(&self) {
        if self.pending.swap(false, Ordering::Relaxed) {
            (self.gate.counts.lock()).held(self.address, |held| held.pending -= 1);
            self.gate.freed.notify_waiters();
        }
    }

    /// An upload place of its address, for a request whose body is to
    /// arrive, waited for while its address holds them all; `None` (and
    /// counted) if none has freed by `until`.
    pub(super) async fn upload(&self, until: Instant) -> Option<UploadPlace> {
        let gate = &self.gate;
        let limit = gate.limits.max_uploads_per_address;
        let place = gate.when_freed(until, |counts| {
            let uploads = counts
                .by_address
                .get(&self.address)
                .map_or(0, |held| held.uploads);
            if uploads >= limit {
                return Err(());
            }
            counts.held(self.address, |held| held.uploads += 1);
            Ok(UploadPlace {
                gate: gate.clone(),
                address: self.address,
            })
        });
        let place = place.await.ok();
        if place.is_none() {
            Refusal::UploadsPerAddress.count();
        }
        place
    }

    fn count(&self, by: f64) {
        let state = if self.admitted { "admitted" } else { "refused" };
        metrics::gauge!("kubecache_connections", "state" => state).increment(by);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.count(-1.0);
        let mut counts = self.gate.counts.lock();
        if !self.admitted {
            counts.refusing -= 1;
            return;
        }
        counts.admitted -= 1;
        let pending = usize::from(self.pending.load(Ordering::Relaxed));
        counts.held(self.address, |held| {
            held.connections -= 1;
            held.pending -= pending;
        });
        drop(counts);
        self.gate.freed.notify_waiters();
    }
}

/// Creates the series at zero.
fn register() {
    for state in ["admitted", "held", "refused"] {
        metrics::gauge!("kubecache_connections", "state" => state).increment(0.0);
    }
    for refusal in Refusal::ALL {
        metrics::counter!("kubecache_connections_refused_total", "reason" => refusal.label())
            .increment(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connections_fit_in_the_descriptors() {
        let limits = Limits::default();
        assert_eq!(limits.within_descriptors(1 << 20), limits);
        let tight = limits.within_descriptors(1024);
        assert_eq!(tight.max_passthrough_connections, (1024 - 192 - 32) / 4);
        assert_eq!(tight.max_connections_per_address, tight.max_connections);
        assert_eq!(
            tight.max_connections
                + tight.max_held()
                + tight.max_passthrough_connections
                + REFUSALS
                + RESERVED_DESCRIPTORS as usize,
            1024,
            "{tight:?}"
        );
        // The machine the fan-out benchmark runs on: 10,000 clients fit.
        let ours = Limits {
            max_connections: 10_000,
            ..limits
        };
        assert_eq!(ours.within_descriptors(20_000), ours);
        let least = limits.within_descriptors(10);
        assert_eq!(
            (least.max_connections, least.max_passthrough_connections),
            (1, 1)
        );
    }

    impl Entering {
        /// The entry decided at once.
        fn now(self) -> Entry {
            match self {
                Entering::Now(entry) => entry,
                Entering::Held(_) => panic!("held"),
            }
        }

        fn held(self) -> Waiting {
            match self {
                Entering::Now(_) => panic!("not held"),
                Entering::Held(waiting) => waiting,
            }
        }
    }

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [10, 0, 0, 2];

    async fn enter(gate: &Arc<Gate>, address: [u8; 4]) -> Entering {
        gate.enter(gate.socket().await, address.into())
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    #[tokio::test(start_paused = true)]
    async fn connections_beyond_a_limit_wait_for_a_place_and_are_refused_past_the_wait() {
        let gate = Gate::new(Limits {
            max_connections: 16,
            max_connections_per_address: 2,
            ..Limits::default()
        });
        assert_eq!(gate.limits.max_held_per_address(), 1);
        let (first, refusal) = enter(&gate, A).await.now().unwrap();
        assert_eq!(refusal, None);
        let _second = enter(&gate, A).await.now().unwrap();
        let third = tokio::spawn(enter(&gate, A).await.held().entry(later()));
        // Beyond what one address may hold: refused at once.
        let (_, refusal) = enter(&gate, A).await.now().unwrap();
        assert_eq!(refusal, Some(Refusal::PerAddress));
        let _others = [enter(&gate, B).await.now(), enter(&gate, B).await.now()];
        let beyond = enter(&gate, B).await.held();
        let beyond = beyond.entry(Instant::now() + Duration::from_secs(32));
        // Past the wait, refused: a 429 answered.
        assert_eq!(beyond.await.unwrap().1, Some(Refusal::PerAddress));
        assert!(!third.is_finished());
        // A place frees: the one held is admitted.
        drop(first);
        assert_eq!(third.await.unwrap().unwrap().1, None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_connections_gauge_counts_those_held_until_they_are_admitted_or_let_go() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let metrics = recorder.handle();
        let _local = metrics::set_default_local_recorder(&recorder);
        let gauges = || {
            let text = metrics.render();
            ["admitted", "held", "refused"].map(|state| {
                let series = format!("kubecache_connections{{state=\"{state}\"}}");
                kubecache_testkit::scrape::value(&text, &series).unwrap()
            })
        };
        let gate = Gate::new(Limits {
            max_connections: 64,
            max_connections_per_address: 1,
            ..Limits::default()
        });
        assert_eq!(gauges(), [0.0; 3]);
        let (first, _) = enter(&gate, A).await.now().unwrap();
        let admitted = enter(&gate, A).await.held();
        let let_go = enter(&gate, A).await.held();
        let refused = enter(&gate, A).await.held();
        assert_eq!(gauges(), [1.0, 3.0, 0.0]);
        // A place frees: one held is admitted.
        let admitted = tokio::spawn(admitted.entry(later()));
        tokio::task::yield_now().await;
        drop(first);
        let (second, _) = admitted.await.unwrap().unwrap();
        assert_eq!(gauges(), [1.0, 2.0, 0.0]);
        // Its wait over, one is refused; another's ends with the server.
        let (refused, _) = refused.entry(Instant::now()).await.unwrap();
        drop(let_go);
        assert_eq!(gauges(), [1.0, 0.0, 1.0]);
        drop((second, refused));
        assert_eq!(gauges(), [0.0; 3]);
    }

    #[tokio::test(start_paused = true)]
    async fn held_and_refused_connections_are_bounded_and_others_still_get_in() {
        let gate = Gate::new(Limits {
            max_connections: 64,
            max_connections_per_address: 1,
            ..Limits::default()
        });
        let _admitted = enter(&gate, A).await.now().unwrap();
        let mut held = Vec::new();
        for _ in 0..gate.limits.max_held_per_address() {
            held.push(enter(&gate, A).await.held());
        }
        let mut refused = Vec::new();
        for _ in 0..REFUSALS {
            let (ticket, refusal) = enter(&gate, A).await.now().unwrap();
            assert_eq!(refusal, Some(Refusal::PerAddress));
            refused.push(ticket);
        }
        // Beyond, closed unanswered, its socket's permit given back ...
        assert!(enter(&gate, A).await.now().is_none());
        // ... and another address is admitted.
        assert_eq!(enter(&gate, B).await.now().unwrap().1, None);
        // The wait ends for those held: refused, answered while there is
        // room among the refusals.
        drop(refused);
        let waited = held.len();
        let entries = futures::future::join_all(held.into_iter().map(|w| w.entry(Instant::now())));
        let answered = entries.await.into_iter().flatten().count();
        assert_eq!(answered, waited.min(REFUSALS));
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_s_connections_before_their_first_request_and_its_uploads_are_bounded() {
        let gate = Gate::new(Limits {
            max_pending_per_address: 2,
            max_uploads_per_address: 1,
            ..Limits::default()
        });
        let (first, _) = enter(&gate, A).await.now().unwrap();
        let _second = enter(&gate, A).await.now().unwrap();
        let third = tokio::spawn(enter(&gate, A).await.held().entry(later()));
        assert_eq!(enter(&gate, B).await.now().unwrap().1, None);
        // Past its first request's head, a connection is not pending.
        first.first_request();
        let (third, refusal) = third.await.unwrap().unwrap();
        assert_eq!(refusal, None);
        // One upload at a time from `a`, waited for, given back when done;
        // `b` has its own.
        let upload = third.upload(later()).await.expect("a first upload");
        assert!(first.upload(Instant::now()).await.is_none());
        let (other, _) = enter(&gate, B).await.now().unwrap();
        assert!(other.upload(Instant::now()).await.is_some());
        let first = Arc::new(first);
        let waiting = tokio::spawn({
            let first = first.clone();
            async move { first.upload(later()).await.is_some() }
        });
        tokio::task::yield_now().await;
        drop(upload);
        assert!(waiting.await.unwrap());
    }
}
