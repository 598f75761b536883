//! Read-your-writes: after a client's write to a cached resource passed
//! through, that client's reads of the resource wait until the cache has
//! applied the written resourceVersion `W`; the first of them needs
//! nothing more.
//!
//! A client is its credential ([`ClientKey`], made by the `auth` layer): a
//! bearer token (kept as a keyed hash, never as the token) or a
//! certificate's user name. Anonymous callers cannot be
//! told apart and get no read-your-writes. One resourceVersion is kept per
//! client and resource, the newest written; it is forgotten once the cache
//! has it and the client's next read came, or after the read wait (no read
//! waits longer), and at most [`MAX_CLIENTS`] are kept per resource (the
//! oldest goes first).
//!
//! `W` is the resource's own change: its event brings the store to `W`, so
//! the wait needs no probe
//! ([`Freshness::reached`](super::freshness::Freshness::reached)). The
//! writer's first read after the write, even one with no resourceVersion,
//! is then served as
//! `resourceVersion=W&resourceVersionMatch=NotOlderThan` would be: it sees
//! the write and everything before it, not the API server's current
//! resourceVersion `R`, which would need a probe's proof when other
//! resources moved it (about one probe interval). Decided (issue 17: the
//! writer's read waits for its write only): a write followed by a read is
//! what controllers and `kubectl apply` do, and they need their write, not
//! a proof about other clients' writes made in the moment between (a read
//! sent just before them could not tell either); the client's following
//! reads are consistent as usual.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

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
    /// The client whose credential (a token, or a certificate's user)
    /// digests to `digest` (see `auth::Credential::client`).
    pub(crate) fn digested(digest: &[u8; 32]) -> ClientKey {
        let (first, _) = digest.split_first_chunk().expect("32 bytes");
        ClientKey(u64::from_le_bytes(*first))
    }

    /// A client told apart by its `name`, for tests.
    #[cfg(test)]
    pub(crate) fn named(name: &str) -> ClientKey {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        ClientKey(BuildHasherDefault::<DefaultHasher>::default().hash_one(name))
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
    /// Whether the client's next read after the write came.
    read: bool,
}

/// What a read finds of its client's last write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claim {
    /// The resourceVersion written: the read waits for it.
    pub(crate) resource_version: u64,
    /// Whether this is the client's first read since the write: it needs
    /// nothing more.
    pub(crate) first: bool,
}

impl Writes {
    /// Remembers each write for `ttl`.
    pub(crate) fn new(ttl: Duration) -> Self {
        Writes {
            written: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    /// Records that `client` wrote at `resource_version`.
    pub(crate) fn record(&self, client: ClientKey, resource_version: u64) {
        let now = Instant::now();
        let mut written = self.written.lock();
        if written.len() >= MAX_CLIENTS && !written.contains_key(&client) {
            written.retain(|_, w| w.until > now);
            if written.len() >= MAX_CLIENTS
                && let Some(oldest) = written.iter().min_by_key(|(_, w)| w.until).map(|(k, _)| *k)
            {
                written.remove(&oldest);
            }
        }
        let entry = written.entry(client).or_insert(Written {
            resource_version,
            until: now,
            read: false,
        });
        entry.resource_version = entry.resource_version.max(resource_version);
        entry.until = now + self.ttl;
        entry.read = false;
    }

    /// `client`'s last write within the read wait, for a read of it while
    /// the cache holds everything through `held`.
    pub(crate) fn claim(&self, client: ClientKey, held: u64) -> Option<Claim> {
        let mut written = self.written.lock();
        let w = written.get_mut(&client)?;
        if w.until <= Instant::now() {
            written.remove(&client);
            return None;
        }
        let claim = Claim {
            resource_version: w.resource_version,
            first: !w.read,
        };
        w.read = true;
        if claim.resource_version <= held {
            written.remove(&client);
        }
        Some(claim)
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

    fn token(t: &str) -> ClientKey {
        ClientKey::named(t)
    }

    fn claim(resource_version: u64, first: bool) -> Option<Claim> {
        Some(Claim {
            resource_version,
            first,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn reads_wait_for_a_write_until_the_cache_has_it_and_the_first_one_came() {
        let writes = Writes::new(Duration::from_secs(3));
        writes.record(token("a"), 10);
        writes.record(token("a"), 8);
        assert_eq!(writes.claim(token("b"), 5), None, "another client");
        assert_eq!(writes.claim(token("a"), 5), claim(10, true), "the newest");
        assert_eq!(writes.claim(token("a"), 5), claim(10, false), "not first");
        assert_eq!(writes.claim(token("a"), 10), claim(10, false));
        assert_eq!(writes.claim(token("a"), 10), None, "the cache has it");
        assert_eq!(writes.len(), 0, "and forgets it");

        writes.record(token("a"), 12);
        assert_eq!(writes.claim(token("a"), 12), claim(12, true), "in already");
        assert_eq!(writes.len(), 0);

        writes.record(token("a"), 14);
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(writes.claim(token("a"), 11), None, "past the read wait");
        assert_eq!(writes.len(), 0, "and forgotten");
    }

    #[tokio::test(start_paused = true)]
    async fn the_map_is_bounded_and_sheds_the_oldest() {
        let writes = Writes::new(Duration::from_secs(3));
        for i in 0..MAX_CLIENTS {
            writes.record(token(&i.to_string()), 10);
            tokio::time::advance(Duration::from_micros(100)).await;
        }
        writes.record(token("new"), 10);
        assert_eq!(writes.len(), MAX_CLIENTS);
        assert_eq!(writes.claim(token("0"), 0), None, "the oldest went");
        assert_eq!(writes.claim(token("1"), 0), claim(10, true));
        assert_eq!(writes.claim(token("new"), 0), claim(10, true));
    }
}
