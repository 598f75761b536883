//! Snapshots held for paginated lists, so that every page of one list comes
//! from the same consistent state, as the API server's pages do.
//!
//! A snapshot costs nothing while the store is unchanged; under churn it
//! keeps alive the tree nodes the writer copied since it was taken, so the
//! number held and their lifetime are bounded.

use std::time::Duration;

use kubecache_reflector::Snapshot;
use parking_lot::Mutex;
use tokio::time::Instant;

/// At most this many lists are paginated from held snapshots at once; the
/// oldest is dropped first (its continue tokens then get 410 `Expired`,
/// which clients answer by relisting).
const MAX_HELD: usize = 32;

/// Snapshots by resourceVersion, each dropped once unused for the TTL.
#[derive(Debug)]
pub(crate) struct HeldSnapshots {
    /// Guarded by the mutex: the held snapshots and when each last served
    /// a page. Never held across an `.await`.
    held: Mutex<Vec<(Snapshot, Instant)>>,
    ttl: Duration,
}

impl HeldSnapshots {
    pub(crate) fn new(ttl: Duration) -> Self {
        HeldSnapshots {
            held: Mutex::new(Vec::new()),
            ttl,
        }
    }

    /// Keeps `snapshot` for the next pages of a list.
    pub(crate) fn hold(&self, snapshot: &Snapshot) {
        let now = Instant::now();
        let mut held = self.held.lock();
        self.expire(&mut held, now);
        match held
            .iter_mut()
            .find(|(s, _)| s.resource_version() == snapshot.resource_version())
        {
            Some(entry) => entry.1 = now,
            None => {
                if held.len() == MAX_HELD {
                    let oldest = (0..held.len()).min_by_key(|&i| held[i].1).unwrap_or(0);
                    held.swap_remove(oldest);
                }
                held.push((snapshot.clone(), now));
            }
        }
    }

    /// The held snapshot at `resource_version`, if it is still held.
    pub(crate) fn find(&self, resource_version: u64) -> Option<Snapshot> {
        let now = Instant::now();
        let mut held = self.held.lock();
        self.expire(&mut held, now);
        let (snapshot, used) = held
            .iter_mut()
            .find(|(s, _)| s.resource_version() == resource_version)?;
        *used = now;
        Some(snapshot.clone())
    }

    fn expire(&self, held: &mut Vec<(Snapshot, Instant)>, now: Instant) {
        held.retain(|(_, used)| now.saturating_duration_since(*used) < self.ttl);
    }
}
