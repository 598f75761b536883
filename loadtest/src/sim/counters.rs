//! What the simulator was asked, per resource: the requests a cache in
//! front of it sends to keep its reads fresh, so a benchmark can tell their
//! rate (`GET /sim/counters`, [`super::Sim::counters`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::resources::{RESOURCES, Resource, ResourceId};

/// Requests of one resource since the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Lists without `resourceVersion` (and without a continue token): the
    /// quorum reads from etcd.
    pub consistent_lists: u64,
    /// Gets of one object without `resourceVersion`: quorum reads too.
    pub consistent_gets: u64,
    /// Lists of a collection with `limit=1`, whatever their
    /// resourceVersion: how a client asks for the current resourceVersion
    /// (a list selecting one object by name is not counted here).
    pub limit_one_lists: u64,
    /// Watches started.
    pub watches: u64,
    /// Lists of any kind: every list request (each page: a continue
    /// included, at any resourceVersion) and every streaming list (a watch
    /// with `sendInitialEvents=true`). A warm restart's goal is none.
    pub lists: u64,
    /// Streaming lists that sent changes between their initial objects and
    /// their initial-events-end bookmark (servers before 1.32, under
    /// writes; see `http/watch.rs`).
    #[serde(default)]
    pub streaming_lists_changed_before_end: u64,
    /// Consistent lists that waited for the watch cache to catch up with
    /// etcd (ConsistentListFromCache, a quiet resource; see
    /// [`crate::sim::PROGRESS_NOTIFY`]).
    #[serde(default)]
    pub lists_waiting_for_watch_cache: u64,
}

/// Reviews asked since the start (`GET /sim/reviews`): what a cache
/// authenticating its clients costs the API server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reviews {
    /// `TokenReview`s.
    pub token_reviews: u64,
    /// `SubjectAccessReview`s.
    pub subject_access_reviews: u64,
}

/// What was asked of each resource.
#[derive(Debug)]
pub struct Counters {
    by_resource: Vec<[AtomicU64; 7]>,
    /// Discovery requests (`/version`, `/api...` and `/apis...` documents).
    discovery: AtomicU64,
    /// List requests being answered, and the most at once, by resource.
    lists_in_flight: Vec<[AtomicU64; 2]>,
    /// `TokenReview`s, `SubjectAccessReview`s.
    reviews: [AtomicU64; 2],
}

/// A list request being answered: counted in flight until dropped.
pub struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One kind of request counted.
#[derive(Debug, Clone, Copy)]
pub enum Asked {
    /// See [`Counts::consistent_lists`].
    ConsistentList,
    /// See [`Counts::consistent_gets`].
    ConsistentGet,
    /// See [`Counts::limit_one_lists`].
    LimitOneList,
    /// See [`Counts::watches`].
    Watch,
    /// See [`Counts::lists`].
    List,
    /// See [`Counts::streaming_lists_changed_before_end`].
    StreamingListChangedBeforeEnd,
    /// See [`Counts::lists_waiting_for_watch_cache`].
    WaitForWatchCache,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            by_resource: RESOURCES.iter().map(|_| Default::default()).collect(),
            discovery: AtomicU64::new(0),
            lists_in_flight: RESOURCES.iter().map(|_| Default::default()).collect(),
            reviews: Default::default(),
        }
    }
}

impl Counters {
    /// Counts one discovery request.
    pub fn discovery(&self) {
        self.discovery.fetch_add(1, Ordering::Relaxed);
    }

    /// Discovery and OpenAPI requests so far.
    pub fn discovery_requests(&self) -> u64 {
        self.discovery.load(Ordering::Relaxed)
    }

    /// Counts one review, a `TokenReview` if `token`, else a
    /// `SubjectAccessReview`.
    pub fn review(&self, token: bool) {
        self.reviews[usize::from(!token)].fetch_add(1, Ordering::Relaxed);
    }

    /// The reviews so far.
    pub fn reviews(&self) -> Reviews {
        let [token, access] = &self.reviews;
        Reviews {
            token_reviews: token.load(Ordering::Relaxed),
            subject_access_reviews: access.load(Ordering::Relaxed),
        }
    }

    /// Counts one request of `resource`.
    pub fn count(&self, resource: ResourceId, asked: Asked) {
        self.by_resource[resource][asked as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a list request of `resource` in flight until the guard is
    /// dropped (its page read and its latency waited, before the body is
    /// sent), and the most at once.
    pub fn list_in_flight(&self, resource: ResourceId) -> InFlight<'_> {
        let [now, peak] = &self.lists_in_flight[resource];
        let n = now.fetch_add(1, Ordering::Relaxed) + 1;
        peak.fetch_max(n, Ordering::Relaxed);
        InFlight(now)
    }

    /// The most list requests of `resource` answered at once so far: how a
    /// test sees that a client's requests really overlap, and how many.
    pub fn peak_lists_in_flight(&self, resource: ResourceId) -> u64 {
        self.lists_in_flight[resource][1].load(Ordering::Relaxed)
    }

    /// The counts so far, by resource (`pods`, `widgets.example.com`, ...).
    pub fn snapshot(&self) -> BTreeMap<String, Counts> {
        RESOURCES
            .iter()
            .zip(&self.by_resource)
            .map(|(resource, counts)| {
                let get = |asked: Asked| counts[asked as usize].load(Ordering::Relaxed);
                let counts = Counts {
                    consistent_lists: get(Asked::ConsistentList),
                    consistent_gets: get(Asked::ConsistentGet),
                    limit_one_lists: get(Asked::LimitOneList),
                    watches: get(Asked::Watch),
                    lists: get(Asked::List),
                    streaming_lists_changed_before_end: get(Asked::StreamingListChangedBeforeEnd),
                    lists_waiting_for_watch_cache: get(Asked::WaitForWatchCache),
                };
                (name(resource), counts)
            })
            .collect()
    }
}

/// `plural` for the core group, `plural.group` otherwise (as kubectl names
/// a resource).
fn name(resource: &Resource) -> String {
    if resource.group.is_empty() {
        resource.plural.to_string()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}
