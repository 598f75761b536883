//! Read-your-writes: after a client's write to a cached resource passed
//! through, that client's next reads of the resource wait until the cache
//! has applied the written resourceVersion.
//!
//! A client is its credential: a bearer token (kept as a keyed hash, never
//! as the token) or a certificate's user name. Anonymous callers cannot be
//! told apart and get no read-your-writes. One resourceVersion is kept per
//! client and resource, the newest written; it is forgotten once the cache
//! has reached it, or after the read wait (no read waits longer), and at
//! most [`MAX_CLIENTS`] are kept per resource (the oldest goes first).
//!
//! The written resourceVersion `W` is the resource's own change: its event
//! brings the store to `W`, so the wait needs no probe
//! ([`Freshness::reached`](super::freshness::Freshness::reached)). `W` does
//! not make a consistent read of the writer: that read must also see other
//! clients' writes accepted before it arrived, so it still waits for the
//! API server's current resourceVersion `R` from the clock; `R >= W`, as the
//! write was accepted before the read, so `max(R, W)` is `R` and the wait
//! for `W` only comes first (it is over within the write's own event
//! latency). Reads at `resourceVersion=0` or `N` wait for `W` alone.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::auth::{Credential, User};

/// Most clients whose writes one resource remembers at once: those that
/// wrote within the last read wait.
pub(crate) const MAX_CLIENTS: usize = 4096;

/// Who wrote: the first 64 bits of the SHA-256 digest of the caller's
/// token, or of its certificate's user. Two credentials digesting alike
/// there (about one chance in 2^64) only make one wait for the other's
/// writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ClientKey(u64);

impl ClientKey {
    /// The client of `credential`; `None` for anonymous callers.
    pub(crate) fn of(credential: &Credential) -> Option<ClientKey> {
        match credential {
            Credential::Token(token) => Some(Self::digested(token.digest())),
            Credential::Certificate(user) => Some(Self::user(user)),
            Credential::Anonymous => None,
        }
    }

    /// The client that is `user`, whatever its credential.
    pub(crate) fn user(user: &User) -> ClientKey {
        Self::digested(user.digest())
    }

    fn digested(digest: &[u8; 32]) -> ClientKey {
        let (first, _) = digest.split_first_chunk().expect("32 bytes");
        ClientKey(u64::from_le_bytes(*first))
    }
}

/// The writes of one resource's clients not yet in its cache.
#[derive(Debug)]
pub(crate) struct Writes {
    written: Mutex<HashMap<ClientKey, Written>>,
    /// How long a write is remembered: the read wait.
    ttl: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Written {
    resource_version: u64,
    until: Instant,
}

impl Writes {
    /// Remembers each write for `ttl`.
    pub(crate) fn new(ttl: Duration) -> Self {
        Writes {
            written: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    /// Records that `client` wrote at `resource_version`, while the cache
    /// holds everything through `held`.
    pub(crate) fn record(&self, client: ClientKey, resource_version: u64, held: u64) {
        if resource_version <= held {
            return;
        }
        let now = Instant::now();
        let mut written = self.written.lock();
        if written.len() >= MAX_CLIENTS && !written.contains_key(&client) {
            written.retain(|_, w| w.until > now && w.resource_version > held);
            if written.len() >= MAX_CLIENTS
                && let Some(oldest) = written.iter().min_by_key(|(_, w)| w.until).map(|(k, _)| *k)
            {
                written.remove(&oldest);
            }
        }
        let entry = written.entry(client).or_insert(Written {
            resource_version,
            until: now,
        });
        entry.resource_version = entry.resource_version.max(resource_version);
        entry.until = now + self.ttl;
    }

    /// The resourceVersion `client` last wrote, if the cache, holding
    /// everything through `held`, has not reached it yet.
    pub(crate) fn pending(&self, client: ClientKey, held: u64) -> Option<u64> {
        let mut written = self.written.lock();
        let w = *written.get(&client)?;
        if w.resource_version <= held || w.until <= Instant::now() {
            written.remove(&client);
            return None;
        }
        Some(w.resource_version)
    }

    /// How many clients' writes are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.written.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{BearerToken, UserInfo};

    fn token(t: &str) -> ClientKey {
        ClientKey::of(&Credential::Token(BearerToken::new(t))).unwrap()
    }

    #[test]
    fn clients_are_their_credentials_and_anonymous_is_no_one() {
        assert_eq!(token("a"), token("a"));
        assert_ne!(token("a"), token("b"));
        let alice = |name: &str| {
            ClientKey::of(&Credential::Certificate(User::new(UserInfo {
                username: name.into(),
                ..UserInfo::default()
            })))
        };
        assert_eq!(alice("alice"), alice("alice"));
        assert_ne!(alice("a"), Some(token("a")));
        assert_eq!(ClientKey::of(&Credential::Anonymous), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_pending_until_the_cache_or_the_read_wait_passes_it() {
        let writes = Writes::new(Duration::from_secs(3));
        writes.record(token("a"), 10, 5);
        writes.record(token("a"), 8, 5);
        assert_eq!(writes.pending(token("a"), 5), Some(10), "the newest write");
        assert_eq!(writes.pending(token("b"), 5), None, "another client");
        assert_eq!(writes.pending(token("a"), 10), None, "the cache has it");
        assert_eq!(writes.len(), 0, "and forgets it");

        writes.record(token("a"), 12, 11);
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(writes.pending(token("a"), 11), None, "past the read wait");
        writes.record(token("a"), 12, 12);
        assert_eq!(writes.len(), 0, "a write the cache has is not recorded");
    }

    #[tokio::test(start_paused = true)]
    async fn the_map_is_bounded_and_sheds_the_oldest() {
        let writes = Writes::new(Duration::from_secs(3));
        for i in 0..MAX_CLIENTS {
            writes.record(token(&i.to_string()), 10, 0);
            tokio::time::advance(Duration::from_micros(100)).await;
        }
        writes.record(token("new"), 10, 0);
        assert_eq!(writes.len(), MAX_CLIENTS);
        assert_eq!(writes.pending(token("0"), 0), None, "the oldest went");
        assert_eq!(writes.pending(token("1"), 0), Some(10));
        assert_eq!(writes.pending(token("new"), 0), Some(10));
    }
}
