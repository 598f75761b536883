//! How many connections kubecache holds, in all and per client address,
//! and what a connection beyond them gets; how many requests of one
//! address may wait for their bodies.
//!
//! The accept loop takes a permit before it accepts, so that no more than
//! `max_connections` plus [`REFUSALS`] sockets are ever open: beyond them,
//! new connections wait in the kernel's backlog. An accepted connection is
//! *admitted* while fewer than `max_connections` are, its address holds
//! fewer than `max_connections_per_address`, and fewer than
//! `max_pending_per_address` of its address's connections are *pending*
//! (not past their first request's head: a TLS handshake in progress, a
//! silent connection, a half-sent head). Authentication is per request, so
//! the address is what a connection is known by. Otherwise it is
//! *refused*: one of at most [`REFUSALS`] at a time, its request answered
//! with a 429 `Status` (`Retry-After: 1`) and the connection closed;
//! but the kubelet's probes ([`PROBES`]) are answered as usual, so that a
//! full kubecache is not restarted for it. Beyond [`REFUSALS`], a refused
//! connection is closed unanswered.
//!
//! A request with a body holds an *upload* place of its address until
//! its body has all arrived (or is dropped); beyond
//! `max_uploads_per_address`, a request with a body is answered 429
//! without reading it, and its connection closed.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kubecache_wire::Status;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections refused at once, each answering one request: what a
/// connection beyond the limits may still hold.
pub const REFUSALS: usize = 32;

/// The paths a refused connection is still served: the kubelet's probes.
pub const PROBES: &[&str] = &["/healthz", "/livez", "/readyz"];

/// Descriptors kept for what is not a client's connection: the listener,
/// the connections to the API server for the watches, files, the runtime.
const RESERVED_DESCRIPTORS: u64 = 64;

/// Descriptors one admitted connection may hold: its socket, and pooled
/// connections to the API server for one request passed through and one
/// authorization review.
const DESCRIPTORS_PER_CONNECTION: u64 = 3;

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
    /// own bound on writes in flight is 200 in all).
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            max_connections: 4096,
            max_connections_per_address: 512,
            http2_max_streams_per_connection: 100,
            max_pending_per_address: 64,
            max_uploads_per_address: 64,
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
    };

    /// These limits lowered, if need be, so that their connections cannot
    /// use up `descriptors` open files (at least one connection is kept).
    #[must_use]
    pub fn within_descriptors(self, descriptors: u64) -> Limits {
        let room = descriptors.saturating_sub(RESERVED_DESCRIPTORS + REFUSALS as u64)
            / DESCRIPTORS_PER_CONNECTION;
        let max_connections = (self.max_connections as u64).min(room).max(1) as usize;
        Limits {
            max_connections,
            max_connections_per_address: self.max_connections_per_address.min(max_connections),
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
}

#[derive(Default)]
struct Counts {
    admitted: usize,
    refusing: usize,
    by_address: HashMap<IpAddr, Held>,
}

/// What one address holds; no entry when all are zero.
#[derive(Default, Clone, Copy)]
struct Held {
    connections: usize,
    pending: usize,
    uploads: usize,
}

impl Counts {
    /// Changes what `address` holds, dropping its entry once it holds
    /// nothing.
    fn held(&mut self, address: IpAddr, change: impl FnOnce(&mut Held)) {
        let held = self.by_address.entry(address).or_default();
        change(held);
        if held.connections + held.pending + held.uploads == 0 {
            self.by_address.remove(&address);
        }
    }
}

/// What a connection got: its ticket (held by its task) and, if refused,
/// why. `None`: closed unanswered.
pub(super) type Entry = Option<(Ticket, Option<Refusal>)>;

impl Gate {
    pub(super) fn new(limits: Limits) -> Arc<Gate> {
        register();
        Arc::new(Gate {
            limits,
            sockets: Arc::new(Semaphore::new(limits.max_connections + REFUSALS)),
            counts: Mutex::default(),
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

    /// Admits or refuses a connection accepted from `address` with `permit`.
    pub(super) fn enter(self: &Arc<Self>, permit: OwnedSemaphorePermit, address: IpAddr) -> Entry {
        let mut counts = self.counts.lock();
        let from_address = counts.by_address.get(&address).copied().unwrap_or_default();
        let refusal = if counts.admitted >= self.limits.max_connections {
            Some(Refusal::Total)
        } else if from_address.connections >= self.limits.max_connections_per_address {
            Some(Refusal::PerAddress)
        } else if from_address.pending >= self.limits.max_pending_per_address {
            Some(Refusal::PendingPerAddress)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            refusal.count();
            if counts.refusing >= REFUSALS {
                return None;
            }
            counts.refusing += 1;
        } else {
            counts.admitted += 1;
            counts.held(address, |held| {
                held.connections += 1;
                held.pending += 1;
            });
        }
        let ticket = Ticket {
            gate: self.clone(),
            address,
            admitted: refusal.is_none(),
            pending: AtomicBool::new(refusal.is_none()),
            _permit: permit,
        };
        ticket.count(1.0);
        Some((ticket, refusal))
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
        }
    }

    /// An upload place of its address, for a request whose body is to
    /// arrive; `None` (and counted) when its address holds them all.
    pub(super) fn upload(&self) -> Option<UploadPlace> {
        let gate = &self.gate;
        let mut counts = gate.counts.lock();
        let uploads = counts
            .by_address
            .get(&self.address)
            .map_or(0, |held| held.uploads);
        if uploads >= gate.limits.max_uploads_per_address {
            Refusal::UploadsPerAddress.count();
            return None;
        }
        counts.held(self.address, |held| held.uploads += 1);
        Some(UploadPlace {
            gate: gate.clone(),
            address: self.address,
        })
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
    }
}

/// Creates the series at zero.
fn register() {
    for state in ["admitted", "refused"] {
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
        assert_eq!(tight.max_connections, (1024 - 64 - 32) / 3);
        assert_eq!(tight.max_connections_per_address, tight.max_connections);
        assert!(
            tight.max_connections * 3 + REFUSALS + 64 <= 1024,
            "{tight:?}"
        );
        assert_eq!(limits.within_descriptors(10).max_connections, 1);
    }

    #[tokio::test]
    async fn connections_beyond_either_limit_are_refused_and_places_are_given_back() {
        let gate = Gate::new(Limits {
            max_connections: 3,
            max_connections_per_address: 2,
            ..Limits::default()
        });
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let enter = |address| {
            let gate = gate.clone();
            async move { gate.enter(gate.socket().await, address).unwrap() }
        };
        let (first, refusal) = enter(a).await;
        assert_eq!(refusal, None);
        let (_second, refusal) = enter(a).await;
        assert_eq!(refusal, None);
        assert_eq!(enter(a).await.1, Some(Refusal::PerAddress));
        let (_third, refusal) = enter(b).await;
        assert_eq!(refusal, None);
        assert_eq!(enter(b).await.1, Some(Refusal::Total));
        drop(first);
        let (_again, refusal) = enter(a).await;
        assert_eq!(refusal, None);
    }

    #[tokio::test]
    async fn refusals_held_at_once_are_bounded_and_others_still_get_in() {
        let gate = Gate::new(Limits {
            max_connections: 3,
            max_connections_per_address: 1,
            ..Limits::default()
        });
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let _admitted = gate.enter(gate.socket().await, a).unwrap();
        let refused: Vec<_> = futures::future::join_all(
            (0..REFUSALS).map(|_| async { gate.enter(gate.socket().await, a).unwrap() }),
        )
        .await;
        assert!(refused.iter().all(|(_, refusal)| refusal.is_some()));
        // Beyond, closed unanswered, its socket's permit given back ...
        assert!(gate.enter(gate.socket().await, a).is_none());
        // ... and another address is admitted.
        assert_eq!(gate.enter(gate.socket().await, b).unwrap().1, None);
    }

    #[tokio::test]
    async fn an_address_s_connections_before_their_first_request_and_its_uploads_are_bounded() {
        let gate = Gate::new(Limits {
            max_pending_per_address: 2,
            max_uploads_per_address: 1,
            ..Limits::default()
        });
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let enter = |address| {
            let gate = gate.clone();
            async move { gate.enter(gate.socket().await, address).unwrap() }
        };
        let (first, _) = enter(a).await;
        let (_second, _) = enter(a).await;
        assert_eq!(enter(a).await.1, Some(Refusal::PendingPerAddress));
        assert_eq!(enter(b).await.1, None);
        // Past its first request's head, a connection is not pending.
        first.first_request();
        let (third, refusal) = enter(a).await;
        assert_eq!(refusal, None);
        // One upload at a time from `a`, given back when done; `b` has its own.
        let upload = third.upload().expect("a first upload");
        assert!(first.upload().is_none());
        assert!(enter(b).await.0.upload().is_some());
        drop(upload);
        assert!(first.upload().is_some());
    }
}
