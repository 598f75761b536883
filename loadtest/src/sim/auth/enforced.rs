//! The policy in force: the users [`crate::sim::Sim::set_policy`] gave, with
//! the roles, bindings and service accounts the store holds, whoever wrote
//! them. kube-apiserver's RBAC authorizer reads roles and bindings from its
//! informers, and its service-account authenticator looks up each token's
//! ServiceAccount (by namespace and name, then its uid); here the store
//! tells [`Enforced`] of every change as it commits it, and the policy
//! decisions read is rebuilt then, so a change decides the very next
//! request and no decision pays for it.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

use super::policy::{Binding, Policy, Role};
use crate::sim::resources::{RESOURCES, ResourceId, ids};
use crate::sim::store::{Event, Store, key_of};

/// The resources a policy is stored as.
const STORED_AS: [ResourceId; 5] = [
    ids::SERVICEACCOUNTS,
    ids::CLUSTERROLES,
    ids::ROLES,
    ids::CLUSTERROLEBINDINGS,
    ids::ROLEBINDINGS,
];

/// What the store holds of a policy, and the policy in force.
#[derive(Debug, Default)]
pub struct Enforced {
    state: RwLock<State>,
}

/// A stored object's resource and key.
type Key = (ResourceId, String);

#[derive(Debug, Default)]
struct State {
    /// The policy set; `None` allows everything.
    set: Option<Policy>,
    /// Stored Roles and ClusterRoles.
    roles: BTreeMap<Key, Role>,
    /// Stored RoleBindings and ClusterRoleBindings the authorizer can use.
    bindings: BTreeMap<Key, Binding>,
    /// Stored ServiceAccounts' uids, by `namespace/name`.
    accounts: BTreeMap<String, String>,
    /// What decisions read: `set`'s users (a service account while its
    /// ServiceAccount lives with the user's uid) and the stored roles and
    /// bindings; rebuilt on every change of either.
    current: Option<Arc<Policy>>,
}

impl Enforced {
    /// The policy in force now; `None` allows everything.
    pub fn policy(&self) -> Option<Arc<Policy>> {
        self.state.read().current.clone()
    }

    /// The policy set, as it was given (every user, whether its service
    /// account lives or not).
    pub fn set_policy(&self) -> Option<Policy> {
        self.state.read().set.clone()
    }

    /// Sets `policy` in force, and makes the store hold exactly its objects
    /// ([`Policy::objects`]) of the resources it is stored as: the others are
    /// deleted, those that differ replaced (a service account of another
    /// uid deleted and created again). `namespace` makes the Namespace
    /// object of a namespace the policy names and the store lacks. The
    /// switch is made on the permissive side: objects are written before a
    /// policy is set, and after `None` is.
    ///
    /// # Panics
    ///
    /// If the store refuses an object of the policy (one without a name).
    pub fn set(&self, store: &Store, policy: Option<Policy>, namespace: impl Fn(&str) -> Value) {
        let objects = policy.as_ref().map(Policy::objects).unwrap_or_default();
        if policy.is_none() {
            self.replace(None);
        }
        for (resource, object) in &objects {
            store_object(store, *resource, object.clone(), &namespace);
        }
        for resource in STORED_AS {
            let stored = store.list(resource, all(store.revision()), |_| true);
            for old in stored.map(|page| page.items).unwrap_or_default() {
                let kept = objects
                    .iter()
                    .any(|(r, object)| *r == resource && key(object) == old.key);
                if !kept {
                    // Gone already if another write came first.
                    let _ = store.delete(resource, &old.namespace, &old.name);
                }
            }
        }
        if policy.is_some() {
            self.replace(policy);
        }
    }

    /// Takes in a change of the store: the store's observer
    /// ([`Store::observe`]), run under its write lock.
    pub fn observe(&self, resource: ResourceId, event: &Event) {
        if !STORED_AS.contains(&resource) {
            return;
        }
        let object = &event.object;
        let live = event.kind != kubecache_wire::ChangeType::Deleted;
        let key = (resource, object.key.clone());
        let mut state = self.state.write();
        match resource {
            ids::SERVICEACCOUNTS => put(
                &mut state.accounts,
                object.key.clone(),
                live.then(|| object.uid.clone()),
            ),
            ids::ROLES | ids::CLUSTERROLES => {
                put(&mut state.roles, key, live.then(|| Role::of(object)));
            }
            _ => put(
                &mut state.bindings,
                key,
                live.then(|| Binding::of(object)).flatten(),
            ),
        }
        state.rebuild();
    }

    fn replace(&self, policy: Option<Policy>) {
        let mut state = self.state.write();
        state.set = policy;
        state.rebuild();
    }
}

impl State {
    /// The policy in force from `set` and the stored objects: the bindings
    /// in `set`'s order, then those it does not name in the store's (the
    /// order the authorizer visits them in, which decides the reason it
    /// gives).
    fn rebuild(&mut self) {
        self.current = self.set.as_ref().map(|set| {
            let users = set.users.iter().filter(|user| {
                user.service_account_name().is_none_or(|(namespace, name)| {
                    self.accounts.get(&key_of(&namespace, &name)) == Some(&user.uid)
                })
            });
            let mut bindings: Vec<Binding> = self.bindings.values().cloned().collect();
            bindings.sort_by_key(|binding| {
                set.bindings
                    .iter()
                    .position(|b| (&b.name, &b.namespace) == (&binding.name, &binding.namespace))
                    .unwrap_or(usize::MAX)
            });
            Arc::new(Policy {
                users: users.cloned().collect(),
                roles: self.roles.values().cloned().collect(),
                bindings,
            })
        });
    }
}

/// Keeps `value` at `key`, or nothing when it is `None`.
fn put<K: Ord, V>(map: &mut BTreeMap<K, V>, key: K, value: Option<V>) {
    match value {
        Some(value) => {
            map.insert(key, value);
        }
        None => {
            map.remove(&key);
        }
    }
}

/// Creates `object` (and its namespace, when missing), or replaces the
/// stored one; a service account whose uid differs is created again.
fn store_object(
    store: &Store,
    resource: ResourceId,
    object: Value,
    namespace: impl Fn(&str) -> Value,
) {
    let refused = |status: kubecache_wire::Status| {
        panic!(
            "the store refused {} {}: {}",
            RESOURCES[resource].plural,
            key(&object),
            status.message
        )
    };
    let uid = object["metadata"]["uid"].as_str().map(String::from);
    let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
    if !ns.is_empty() && store.get(ids::NAMESPACES, ns).is_none() {
        let _ = store.create(ids::NAMESPACES, namespace(ns));
    }
    if let Some(current) = store.get(resource, &key(&object)) {
        if uid.as_ref().is_none_or(|uid| *uid == current.uid) {
            store
                .update(resource, object.clone())
                .unwrap_or_else(refused);
            return;
        }
        let _ = store.delete(resource, &current.namespace, &current.name);
    }
    match &uid {
        Some(uid) => store.create_with_uid(resource, object.clone(), uid),
        None => store.create(resource, object.clone()),
    }
    .unwrap_or_else(refused);
}

/// The store key of an object to write.
fn key(object: &Value) -> String {
    let text = |field: &str| object["metadata"][field].as_str().unwrap_or_default();
    key_of(text("namespace"), text("name"))
}

/// A read of every object at `revision`.
fn all(revision: u64) -> crate::sim::store::ListRead<'static> {
    crate::sim::store::ListRead {
        revision,
        namespace: None,
        start: None,
        limit: 0,
        before: Some(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::auth::demo::{DEPLOYER, DEPLOYER_UID, NAMESPACE};
    use crate::sim::auth::{Attributes, ResourceAttributes};
    use crate::sim::store::HistoryWindow;
    use serde_json::json;

    /// A store holding `policy`, and what is enforced from it.
    fn stored(policy: Policy) -> (Store, Arc<Enforced>) {
        let store = Store::new(HistoryWindow::ETCD, HistoryWindow::WATCH_CACHE, 1);
        let enforced = Arc::new(Enforced::default());
        store.observe({
            let enforced = enforced.clone();
            move |resource, event| enforced.observe(resource, event)
        });
        enforced.set(&store, Some(policy), |ns| json!({"metadata": {"name": ns}}));
        (store, enforced)
    }

    /// Whether the policy in force lets the bearer of `token` list pods in
    /// the demo's namespace.
    fn lists_pods(enforced: &Enforced, token: &str) -> Option<bool> {
        let policy = enforced.policy()?;
        let user = policy.authenticate(token)?;
        let attributes = Attributes {
            user,
            verb: "list".into(),
            resource: Some(ResourceAttributes {
                namespace: NAMESPACE.into(),
                version: "v1".into(),
                resource: "pods".into(),
                ..ResourceAttributes::default()
            }),
            path: String::new(),
        };
        Some(policy.authorize(&attributes).allowed)
    }

    fn names(store: &Store, resource: ResourceId) -> Vec<String> {
        let page = store.list(resource, all(store.revision()), |_| true);
        page.unwrap().items.iter().map(|o| o.key.clone()).collect()
    }

    #[test]
    fn decisions_follow_the_stored_bindings_from_the_write_on() {
        let (store, enforced) = stored(Policy::demo());
        assert_eq!(lists_pods(&enforced, "alice-token"), Some(true));
        let developers = store
            .delete(ids::ROLEBINDINGS, NAMESPACE, "developers")
            .unwrap();
        assert_eq!(lists_pods(&enforced, "alice-token"), Some(false));
        store
            .create(ids::ROLEBINDINGS, developers.to_value())
            .unwrap();
        assert_eq!(lists_pods(&enforced, "alice-token"), Some(true));
        store
            .merge_patch(
                ids::ROLES,
                NAMESPACE,
                "developer",
                &json!({"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}),
            )
            .unwrap();
        assert_eq!(lists_pods(&enforced, "alice-token"), Some(false));
    }

    #[test]
    fn a_service_account_authenticates_while_its_account_lives_with_its_uid() {
        let (store, enforced) = stored(Policy::demo());
        let deployer = |enforced: &Enforced| {
            enforced
                .policy()
                .and_then(|p| p.authenticate("deployer-token"))
                .map(|user| (user.username, user.uid))
        };
        assert_eq!(
            deployer(&enforced),
            Some((DEPLOYER.to_string(), DEPLOYER_UID.to_string()))
        );
        assert_eq!(lists_pods(&enforced, "deployer-token"), Some(true));
        store
            .delete(ids::SERVICEACCOUNTS, NAMESPACE, "deployer")
            .unwrap();
        assert_eq!(deployer(&enforced), None);
        let account = json!({"metadata": {"name": "deployer", "namespace": NAMESPACE}});
        store.create(ids::SERVICEACCOUNTS, account.clone()).unwrap();
        assert_eq!(deployer(&enforced), None, "another uid");
        store
            .delete(ids::SERVICEACCOUNTS, NAMESPACE, "deployer")
            .unwrap();
        store
            .create_with_uid(ids::SERVICEACCOUNTS, account, DEPLOYER_UID)
            .unwrap();
        assert!(deployer(&enforced).is_some(), "its own uid again");
        assert_eq!(
            enforced.set_policy().map(|p| p.users.len()),
            Some(Policy::demo().users.len()),
            "the policy set keeps every user"
        );
    }

    #[test]
    fn a_policy_set_again_is_stored_alone_and_visited_in_its_order() {
        let (store, enforced) = stored(Policy::demo());
        let extra = json!({
            "metadata": {"name": "extra"},
            "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "User", "name": "mallory"}],
        });
        store.create(ids::CLUSTERROLEBINDINGS, extra).unwrap();
        let fewer = Policy::demo().without_binding(None, "pod-readers");
        enforced.set(&store, Some(fewer.clone()), |_| unreachable!());
        let mut cluster_bindings: Vec<String> = fewer
            .bindings
            .iter()
            .filter(|b| b.namespace.is_none())
            .map(|b| b.name.clone())
            .collect();
        cluster_bindings.sort();
        assert_eq!(names(&store, ids::CLUSTERROLEBINDINGS), cluster_bindings);
        assert_eq!(enforced.policy().unwrap().bindings, fewer.bindings);
        assert_eq!(enforced.policy().unwrap().roles.len(), fewer.roles.len());

        enforced.set(&store, None, |_| unreachable!());
        assert!(enforced.policy().is_none());
        for resource in STORED_AS {
            assert!(names(&store, resource).is_empty(), "{resource}");
        }
    }
}
