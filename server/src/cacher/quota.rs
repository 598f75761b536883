//! Open watches per client: one client may hold at most
//! [`ServeSettings::watches_per_client`](super::ServeSettings) watches,
//! across every resource, so that no client (a leak, a loop that never
//! closes what it opens) can take the server's watchers from the others.
//!
//! A client is its user when one is known (by the digest of its whole
//! `UserInfo`: a bound ServiceAccount token names its pod in the extras, so
//! each replica of an operator counts apart), else its credential (`--auth
//! none`), else, for anonymous callers, its address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use kubecache_wire::Status;
use parking_lot::Mutex;

use super::ClientKey;

/// Seconds a refused watch is asked to wait before retrying.
const RETRY_AFTER: u32 = 1;

/// Whose watches count together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    /// A user, or a credential.
    Client(ClientKey),
    /// An anonymous caller, by address.
    Peer(IpAddr),
}

/// The open watches of every client.
#[derive(Debug)]
pub(crate) struct WatchQuota {
    limit: usize,
    open: Arc<Mutex<HashMap<Owner, usize>>>,
}

/// One open watch, counted against its owner until dropped.
#[derive(Debug)]
pub(crate) struct WatchSlot {
    owner: Owner,
    open: Arc<Mutex<HashMap<Owner, usize>>>,
}

impl WatchQuota {
    /// At most `limit` open watches per owner.
    pub(crate) fn new(limit: usize) -> Self {
        WatchQuota {
            limit,
            open: Arc::default(),
        }
    }

    /// A slot for one more watch of `owner`.
    ///
    /// # Errors
    ///
    /// 429 `TooManyRequests`, naming the limit, when `owner` holds `limit`.
    pub(crate) fn take(&self, owner: Owner) -> Result<WatchSlot, Status> {
        let mut open = self.open.lock();
        let count = open.entry(owner).or_default();
        if *count >= self.limit {
            let mut status = Status::too_many_requests(RETRY_AFTER);
            status.message = format!(
                "too many watches: this client already has {} open, the most kubecache allows one client (maxWatchesPerClient); close one first",
                self.limit
            );
            return Err(status);
        }
        *count += 1;
        Ok(WatchSlot {
            owner,
            open: self.open.clone(),
        })
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock();
        if let Some(count) = open.get_mut(&self.owner) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_gets_its_limit_then_429_and_a_closed_watch_frees_a_slot() {
        let quota = WatchQuota::new(2);
        let a = Owner::Peer([10, 0, 0, 1].into());
        let b = Owner::Peer([10, 0, 0, 2].into());
        let first = quota.take(a).unwrap();
        let _second = quota.take(a).unwrap();
        let refused = quota.take(a).unwrap_err();
        assert_eq!(refused.code, 429);
        assert_eq!(refused.reason, "TooManyRequests");
        assert!(
            refused.message.contains("already has 2 open"),
            "{}",
            refused.message
        );
        assert!(refused.message.contains("maxWatchesPerClient"));
        assert_eq!(refused.details.unwrap().retry_after_seconds, Some(1));
        let _other = quota.take(b).expect("another owner is unaffected");
        drop(first);
        let _again = quota.take(a).expect("a closed watch frees its slot");
        drop(_other);
        assert_eq!(
            quota.open.lock().len(),
            1,
            "owners without watches are forgotten"
        );
    }
}
