//! Kept answers that follow the cluster: kubecache watches what its kept
//! answers depend on, with its own reflectors, and revokes them when it
//! changes.
//!
//! | watched | a change revokes |
//! |---|---|
//! | `roles`, `rolebindings` | the access decisions of requests in their namespace |
//! | `clusterroles`, `clusterrolebindings` | every access decision |
//! | `serviceaccounts` | the kept tokens of that ServiceAccount |
//!
//! A change revokes what is kept as soon as kubecache's watch delivers it,
//! and the reviews asked before it (which the API server may have answered
//! from the state before). While every watch is synced and watching
//! ([`Followed::following`]), RBAC's allowances are kept
//! [`AuthSettings::revocable_ttl`](super::AuthSettings::revocable_ttl);
//! otherwise (a cluster that forbids kubecache to list them, an API server
//! that cannot be reached) every answer is kept no longer than the TTLs of
//! answers nothing watched revokes, and the log and `/v1/status` say so.
//!
//! kube-apiserver's own authorizers read the same objects from their
//! informers; the delegating components of `k8s.io/apiserver` keep answers
//! 10 s instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kubecache_reflector::upstream::{ApiResource, ResourceSpec, Upstream};
use kubecache_reflector::{
    EventLogConfig, RecvError, Reflector, ReflectorConfig, ReflectorStatus, StoreConfig,
    StoreReader, store,
};
use kubecache_wire::ObjectKey;
use kubecache_wire::protobuf::KubeVersion;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What watched changes revoke of the kept answers.
pub trait Revoke: Send + Sync + 'static {
    /// The decisions of requests in `namespace`.
    fn access_in(&self, namespace: &str);
    /// Every decision.
    fn all_access(&self);
    /// The tokens of ServiceAccount `namespace`/`name`.
    fn tokens_of(&self, namespace: &str, name: &str);
    /// Every token.
    fn all_tokens(&self);
}

/// What a change of one watched resource revokes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Revokes {
    /// The access decisions of requests in the object's namespace.
    AccessInNamespace,
    /// Every access decision.
    AllAccess,
    /// The kept tokens of the ServiceAccount it is.
    TokensOf,
}

/// The watched resources: `(group, plural, kind, namespaced, revokes)`.
const WATCHED: [(&str, &str, &str, bool, Revokes); 5] = [
    (RBAC, "roles", "Role", true, Revokes::AccessInNamespace),
    (
        RBAC,
        "rolebindings",
        "RoleBinding",
        true,
        Revokes::AccessInNamespace,
    ),
    (
        RBAC,
        "clusterroles",
        "ClusterRole",
        false,
        Revokes::AllAccess,
    ),
    (
        RBAC,
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
        Revokes::AllAccess,
    ),
    (
        "",
        "serviceaccounts",
        "ServiceAccount",
        true,
        Revokes::TokensOf,
    ),
];

const RBAC: &str = "rbac.authorization.k8s.io";

/// One watched resource: its reflector's status and store, and whether
/// its changes reach the kept answers yet.
struct Feed {
    plural: &'static str,
    revokes: Revokes,
    status: watch::Receiver<ReflectorStatus>,
    reader: StoreReader,
    subscribed: AtomicBool,
    /// Changes seen, each revoking what it affects.
    revocations: AtomicU64,
}

/// The state of one watch, for `/v1/status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchState {
    /// The resource, e.g. `rolebindings`.
    pub resource: &'static str,
    /// `following`, or the reflector's phase and last error.
    pub state: String,
    /// Changes seen since the start, each revoking what it affects.
    pub revocations: u64,
}

/// The watches of what revokes kept answers.
pub struct Followed {
    feeds: Vec<Feed>,
}

impl Followed {
    /// Starts a reflector for each watched resource through `client` (an
    /// API server of Kubernetes `version`), and a task that revokes from
    /// `kept` what each change affects. The tasks end with the returned
    /// handles' abort.
    pub(super) fn start(
        client: &kube::Client,
        version: KubeVersion,
        kept: Arc<dyn Revoke>,
    ) -> (Arc<Followed>, Vec<JoinHandle<()>>) {
        let mut feeds = Vec::new();
        let mut tasks = Vec::new();
        for (group, plural, kind, namespaced, revokes) in WATCHED {
            let resource = ApiResource {
                group: group.into(),
                version: "v1".into(),
                plural: plural.into(),
                kind: kind.into(),
                namespaced,
            };
            let upstream =
                Upstream::new(client.clone(), ResourceSpec::all(resource)).with_version(version);
            let (writer, reader) = store(StoreConfig {
                field_indexes: Vec::new(),
                // Read as it is written: a backlog only while revoking.
                event_log: EventLogConfig {
                    max_events: 4096,
                    ..EventLogConfig::default()
                },
            });
            let reflector = Reflector::new(upstream, ReflectorConfig::default(), writer);
            feeds.push(Feed {
                plural,
                revokes,
                status: reflector.status(),
                reader,
                subscribed: AtomicBool::new(false),
                revocations: AtomicU64::new(0),
            });
            tasks.push(tokio::spawn(reflector.run()));
        }
        let followed = Arc::new(Followed { feeds });
        for feed in 0..followed.feeds.len() {
            tasks.push(tokio::spawn(revoke_on_changes(
                followed.clone(),
                feed,
                kept.clone(),
            )));
        }
        (followed, tasks)
    }

    /// Whether every watch is synced and watching: what it would revoke
    /// reaches the kept answers now.
    pub fn following(&self) -> bool {
        self.feeds.iter().all(Feed::following)
    }

    /// The state of each watch.
    pub fn watches(&self) -> Vec<WatchState> {
        self.feeds
            .iter()
            .map(|feed| WatchState {
                resource: feed.plural,
                state: if feed.following() {
                    "following".to_string()
                } else {
                    let status = feed.status.borrow();
                    match &status.last_error {
                        Some(error) => format!("{}: {error}", status.phase),
                        None => status.phase.to_string(),
                    }
                },
                revocations: feed.revocations.load(Ordering::Relaxed),
            })
            .collect()
    }
}

impl Feed {
    fn following(&self) -> bool {
        self.subscribed.load(Ordering::Acquire)
            && self.reader.is_ready()
            && self.status.borrow().phase == "watching"
    }

    /// Revokes from `kept` what a change of the object at `key` affects.
    fn revoke(&self, kept: &dyn Revoke, key: &ObjectKey) {
        self.revocations.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("kubecache_auth_revocations_total", "resource" => self.plural)
            .increment(1);
        match self.revokes {
            Revokes::AccessInNamespace => kept.access_in(key.namespace()),
            Revokes::AllAccess => kept.all_access(),
            Revokes::TokensOf => kept.tokens_of(key.namespace(), key.name()),
        }
    }

    /// Revokes from `kept` what any change of this resource could affect.
    fn revoke_all(&self, kept: &dyn Revoke) {
        match self.revokes {
            Revokes::AccessInNamespace | Revokes::AllAccess => kept.all_access(),
            Revokes::TokensOf => kept.all_tokens(),
        }
    }
}

/// Waits for feed `index`'s first list (saying once if the API server
/// refuses it), then revokes what each change affects, as the store
/// applies it (a relist's differences included).
async fn revoke_on_changes(followed: Arc<Followed>, index: usize, kept: Arc<dyn Revoke>) {
    let feed = &followed.feeds[index];
    let mut status = feed.status.clone();
    let mut said = false;
    loop {
        tokio::select! {
            ready = feed.reader.ready() => match ready {
                Ok(()) => break,
                Err(_) => return,
            },
            changed = status.changed() => {
                if changed.is_err() {
                    return;
                }
                let status = status.borrow_and_update();
                if status.phase == "failing" && !said {
                    said = true;
                    tracing::warn!(
                        resource = feed.plural,
                        error = status.last_error.as_deref().unwrap_or(""),
                        "cannot watch {}: kept authorization answers are revoked by their TTLs alone until it can (see /v1/status)",
                        feed.plural,
                    );
                }
            }
        }
    }
    let (_, mut changes) = feed.reader.snapshot_and_subscribe();
    feed.subscribed.store(true, Ordering::Release);
    if followed.following() {
        tracing::info!(
            "kept authorization answers follow RBAC and ServiceAccounts: a change revokes what it affects as soon as it is watched"
        );
    }
    loop {
        match changes.recv().await {
            Ok(event) => feed.revoke(&*kept, &event.object.key),
            Err(RecvError::Lagged { .. }) => feed.revoke_all(&*kept),
            Err(RecvError::Closed) => return,
        }
    }
}
