//! Snapshots held for paginated lists, so that every page of one list comes
//! from the same consistent state, as the API server's pages do.
//!
//! A snapshot costs nothing while the store is unchanged; under churn it
//! keeps alive the object versions (and tree nodes) replaced since it was
//! taken. So a snapshot lives for the TTL from the list's first page, not
//! from its last use (a client reusing a continue token cannot pin old
//! versions for longer), and all held snapshots together pin at most what
//! was written within the TTL. Expired snapshots are dropped on time by a
//! sweeper, not on the next paginated request.
//!
//! A snapshot is held, and found, by the resourceVersion its list is served
//! at, which its continue token carries: its own, or a newer one whose
//! state it is known to be (see `http/list.rs`).
//!
//! Each client (an [`Owner`]: its user, credential or address, as watch
//! quotas count it) holds at most [`PER_CLIENT`] snapshots: its next list drops
//! its own oldest, never another client's. Past [`TOTAL`] held at once (as
//! many clients as that paginating together), the client holding the most
//! gives up its oldest. A continue token whose snapshot is gone gets 410
//! `Expired`, and its client relists.
//!
//! A held list also remembers how many objects its last few pages served
//! through their last keys ([`HeldSnapshots::passed`]), so that the next
//! page's `remainingItemCount` is a subtraction: the continue token is the
//! API server's, which carries no count.

use std::sync::{Arc, Weak};
use std::time::Duration;

use kubecache_reflector::Snapshot;
use kubecache_wire::ObjectKey;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::Owner;

/// Lists one client may paginate at once (per resource).
pub(crate) const PER_CLIENT: usize = 8;

/// Lists paginated at once (per resource), all clients together.
pub(crate) const TOTAL: usize = 1024;

/// Pages of a held list whose served counts are remembered (a client may
/// ask for a page again, or a little out of order).
const PAGES_REMEMBERED: usize = 4;

/// Snapshots held for the next pages of lists, each until its TTL ends.
#[derive(Debug)]
pub(crate) struct HeldSnapshots {
    /// Never held across an `.await`.
    held: Mutex<Vec<Held>>,
    ttl: Duration,
}

/// One list's snapshot: whose, at which resourceVersion, and until when.
#[derive(Debug)]
struct Held {
    owner: Option<Owner>,
    resource_version: u64,
    snapshot: Snapshot,
    expires: Instant,
    /// The scope (a namespace, or all) and last key of the latest pages of
    /// lists at its resourceVersion, and how many objects each list had
    /// served through it.
    passed: Vec<(Option<String>, ObjectKey, usize)>,
}

impl HeldSnapshots {
    /// Holds each snapshot for `ttl`, and drops expired ones within a
    /// quarter of it; the sweeper runs as long as the result is alive.
    pub(crate) fn start(ttl: Duration) -> Arc<Self> {
        let pages = Arc::new(HeldSnapshots {
            held: Mutex::new(Vec::new()),
            ttl,
        });
        tokio::spawn(sweep(Arc::downgrade(&pages), ttl / 4));
        pages
    }

    /// Keeps `snapshot` for the next pages of `owner`'s list served at
    /// `rv`, for the TTL from when it was first held (by anyone).
    pub(crate) fn hold(&self, owner: Option<Owner>, rv: u64, snapshot: &Snapshot) {
        let now = Instant::now();
        let mut held = self.held.lock();
        expire(&mut held, now);
        if held
            .iter()
            .any(|h| h.owner == owner && h.resource_version == rv)
        {
            return;
        }
        if held.iter().filter(|h| h.owner == owner).count() >= PER_CLIENT {
            drop_oldest_of(&mut held, owner);
        }
        if held.len() >= TOTAL {
            let greediest = greediest(&held);
            drop_oldest_of(&mut held, greediest);
        }
        // A snapshot someone else holds already expires when theirs does:
        // nobody extends another's.
        let expires = held
            .iter()
            .filter(|h| h.resource_version == rv)
            .map(|h| h.expires)
            .min()
            .unwrap_or(now + self.ttl);
        held.push(Held {
            owner,
            resource_version: rv,
            snapshot: snapshot.clone(),
            expires,
            passed: Vec::new(),
        });
    }

    /// Remembers that `owner`'s list of `namespace` (or all) at `rv`
    /// (held) served `served` objects through `last`.
    pub(crate) fn passed(
        &self,
        owner: Option<Owner>,
        rv: u64,
        namespace: Option<&str>,
        last: &ObjectKey,
        served: usize,
    ) {
        let mut held = self.held.lock();
        if let Some(h) = held
            .iter_mut()
            .find(|h| h.owner == owner && h.resource_version == rv)
        {
            if h.passed.len() == PAGES_REMEMBERED {
                h.passed.remove(0);
            }
            h.passed
                .push((namespace.map(str::to_string), last.clone(), served));
        }
    }

    /// How many objects a list of `namespace` (or all) at `rv` had served
    /// through `key`, if one of its remembered pages ended there (whoever's
    /// list it was).
    pub(crate) fn served_through(
        &self,
        rv: u64,
        namespace: Option<&str>,
        key: &ObjectKey,
    ) -> Option<usize> {
        let held = self.held.lock();
        held.iter()
            .filter(|h| h.resource_version == rv)
            .flat_map(|h| &h.passed)
            .find(|(scope, last, _)| scope.as_deref() == namespace && last == key)
            .map(|(_, _, served)| *served)
    }

    /// The snapshot held for a list at `resource_version`, whoever's list
    /// it was (a continue token is anyone's to use, as on the API server).
    pub(crate) fn find(&self, resource_version: u64) -> Option<Snapshot> {
        let now = Instant::now();
        let held = self.held.lock();
        held.iter()
            .find(|h| h.expires > now && h.resource_version == resource_version)
            .map(|h| h.snapshot.clone())
    }

    /// How many snapshots are held.
    pub(crate) fn len(&self) -> usize {
        self.held.lock().len()
    }
}

/// Drops the expired snapshots of `pages` every `every`, until `pages` is
/// gone.
async fn sweep(pages: Weak<HeldSnapshots>, every: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(pages) = pages.upgrade() else {
            return;
        };
        expire(&mut pages.held.lock(), Instant::now());
    }
}

fn expire(held: &mut Vec<Held>, now: Instant) {
    held.retain(|h| h.expires > now);
}

/// Drops the snapshot of `owner` that expires first.
fn drop_oldest_of(held: &mut Vec<Held>, owner: Option<Owner>) {
    let oldest = held
        .iter()
        .enumerate()
        .filter(|(_, h)| h.owner == owner)
        .min_by_key(|(_, h)| h.expires)
        .map(|(i, _)| i);
    if let Some(i) = oldest {
        held.swap_remove(i);
    }
}

/// The client holding the most snapshots.
fn greediest(held: &[Held]) -> Option<Owner> {
    let mut counts = std::collections::HashMap::new();
    for h in held {
        *counts.entry(h.owner).or_insert(0usize) += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .and_then(|(owner, _)| owner)
}

#[cfg(test)]
mod tests {
    use kubecache_reflector::{StoreConfig, StoreWriter, store};

    use super::*;
    use crate::cacher::ClientKey;

    const TTL: Duration = Duration::from_secs(300);

    fn owner(name: &str) -> Option<Owner> {
        Some(Owner::Client(ClientKey::named(name)))
    }

    /// The store's snapshot once it is at `rv`.
    fn at(
        writer: &mut StoreWriter,
        reader: &kubecache_reflector::StoreReader,
        rv: u64,
    ) -> Snapshot {
        writer.advance(rv);
        reader.snapshot()
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_s_lists_displace_only_its_own() {
        let (mut writer, reader) = store(StoreConfig::default());
        let pages = HeldSnapshots::start(TTL);
        pages.hold(owner("quiet"), 1, &at(&mut writer, &reader, 1));
        for rv in 2..=(PER_CLIENT as u64 + 2) {
            pages.hold(owner("busy"), rv, &at(&mut writer, &reader, rv));
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        assert!(pages.find(1).is_some(), "the quiet owner's list survives");
        assert!(pages.find(2).is_none(), "the busy owner's oldest went");
        assert!(pages.find(3).is_some());
        assert_eq!(pages.len(), PER_CLIENT + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_list_s_served_count_is_remembered_by_scope_for_its_latest_pages() {
        let (mut writer, reader) = store(StoreConfig::default());
        let pages = HeldSnapshots::start(TTL);
        pages.hold(owner("a"), 7, &at(&mut writer, &reader, 7));
        let key = |name: &str| ObjectKey::new("ns", name);
        pages.passed(owner("a"), 7, None, &key("p-0"), 10);
        pages.passed(owner("a"), 7, Some("ns"), &key("p-0"), 3);
        assert_eq!(pages.served_through(7, None, &key("p-0")), Some(10));
        assert_eq!(pages.served_through(7, Some("ns"), &key("p-0")), Some(3));
        assert_eq!(pages.served_through(8, None, &key("p-0")), None);
        for page in 1..=PAGES_REMEMBERED {
            pages.passed(owner("a"), 7, None, &key(&format!("p-{page}")), 10 * page);
        }
        assert_eq!(pages.served_through(7, None, &key("p-0")), None, "too old");
        assert_eq!(pages.served_through(7, None, &key("p-1")), Some(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_snapshot_lives_for_the_ttl_from_its_first_page_whoever_uses_it() {
        let (mut writer, reader) = store(StoreConfig::default());
        let pages = HeldSnapshots::start(TTL);
        let snapshot = at(&mut writer, &reader, 7);
        pages.hold(owner("a"), 7, &snapshot);
        tokio::time::advance(TTL - Duration::from_millis(1)).await;
        // Used again, and held by another client: neither extends it.
        assert!(pages.find(7).is_some());
        pages.hold(owner("a"), 7, &snapshot);
        pages.hold(owner("b"), 7, &snapshot);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(pages.find(7).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn expired_snapshots_are_dropped_without_another_request() {
        let (mut writer, reader) = store(StoreConfig::default());
        let pages = HeldSnapshots::start(TTL);
        pages.hold(owner("a"), 1, &at(&mut writer, &reader, 1));
        pages.hold(None, 2, &at(&mut writer, &reader, 2));
        tokio::time::sleep(TTL + TTL / 4).await;
        assert_eq!(pages.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_total_the_greediest_client_gives_one_up() {
        let (mut writer, reader) = store(StoreConfig::default());
        let pages = HeldSnapshots::start(TTL);
        let mut rv = 0;
        let mut hold = |pages: &HeldSnapshots, who: &str| {
            rv += 1;
            pages.hold(owner(who), rv, &at(&mut writer, &reader, rv));
            rv
        };
        let greedy_first = hold(&pages, "greedy");
        for _ in 1..PER_CLIENT {
            hold(&pages, "greedy");
        }
        let others: Vec<u64> = (PER_CLIENT..TOTAL)
            .map(|i| hold(&pages, &format!("owner-{i}")))
            .collect();
        assert_eq!(pages.len(), TOTAL);
        hold(&pages, "newcomer");
        assert_eq!(pages.len(), TOTAL);
        assert!(pages.find(greedy_first).is_none());
        assert!(others.iter().all(|rv| pages.find(*rv).is_some()));
    }
}
