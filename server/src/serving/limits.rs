//! How many connections kubecache holds, in all and per client address,
//! and what a connection beyond them gets.
//!
//! The accept loop takes a permit before it accepts, so that no more than
//! `max_connections` plus [`REFUSALS`] sockets are ever open: beyond them,
//! new connections wait in the kernel's backlog. An accepted connection is
//! *admitted* while fewer than `max_connections` are and its address holds
//! fewer than `max_connections_per_address` (authentication is per request,
//! so the address is what a connection is known by). Otherwise it is
//! *refused*: one of at most [`REFUSALS`] at a time, its request answered
//! with a 429 `Status` (`Retry-After: 1`) and the connection closed;
//! but the kubelet's probes ([`PROBES`]) are answered as usual, so that a
//! full kubecache is not restarted for it. Beyond [`REFUSALS`], a refused
//! connection is closed unanswered.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
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

/// The bounds of serving (README.md, "Limits", says how to choose them).
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
}

impl Default for Limits {
    /// kube-apiserver's timeouts (its `http.Server`'s `ReadHeaderTimeout`
    /// and `IdleTimeout`) and streams per HTTP/2 connection (100, what its
    /// `--http2-max-streams-per-connection=0` means since the rapid-reset
    /// fixes, and what Go's client assumes before the server's SETTINGS);
    /// room for a few thousand clients, hundreds of them behind one
    /// address (a node's host-network pods, a NAT).
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            max_connections: 4096,
            max_connections_per_address: 512,
            http2_max_streams_per_connection: 100,
        }
    }
}

impl Limits {
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
    MaxConnections,
    MaxPerAddress,
}

impl Refusal {
    fn label(self) -> &'static str {
        match self {
            Refusal::MaxConnections => "max_connections",
            Refusal::MaxPerAddress => "max_connections_per_address",
        }
    }

    /// The answer to a refused connection's request.
    pub(super) fn status(self, limits: &Limits, address: IpAddr) -> Status {
        let message = match self {
            Refusal::MaxConnections => format!(
                "too many connections: kubecache holds its most ({}); retry later",
                limits.max_connections
            ),
            Refusal::MaxPerAddress => format!(
                "too many connections from {address}: at most {} at once; retry later",
                limits.max_connections_per_address
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
    by_address: HashMap<IpAddr, usize>,
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
        let from_address = counts.by_address.get(&address).copied().unwrap_or(0);
        let refusal = if counts.admitted >= self.limits.max_connections {
            Some(Refusal::MaxConnections)
        } else if from_address >= self.limits.max_connections_per_address {
            Some(Refusal::MaxPerAddress)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            metrics::counter!("kubecache_connections_refused_total", "reason" => refusal.label())
                .increment(1);
            if counts.refusing >= REFUSALS {
                return None;
            }
            counts.refusing += 1;
        } else {
            counts.admitted += 1;
            *counts.by_address.entry(address).or_default() += 1;
        }
        let ticket = Ticket {
            gate: self.clone(),
            address,
            admitted: refusal.is_none(),
            _permit: permit,
        };
        ticket.count(1.0);
        Some((ticket, refusal))
    }
}

/// A connection's place, given back when its task ends.
pub(super) struct Ticket {
    gate: Arc<Gate>,
    address: IpAddr,
    admitted: bool,
    _permit: OwnedSemaphorePermit,
}

impl Ticket {
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
        if let Some(n) = counts.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                counts.by_address.remove(&self.address);
            }
        }
    }
}

/// Creates the series at zero.
fn register() {
    for state in ["admitted", "refused"] {
        metrics::gauge!("kubecache_connections", "state" => state).increment(0.0);
    }
    for refusal in [Refusal::MaxConnections, Refusal::MaxPerAddress] {
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
        assert_eq!(enter(a).await.1, Some(Refusal::MaxPerAddress));
        let (_third, refusal) = enter(b).await;
        assert_eq!(refusal, None);
        assert_eq!(enter(b).await.1, Some(Refusal::MaxConnections));
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
}
