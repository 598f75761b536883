//! A policy as the API server stores it, and back: its roles and bindings
//! as `rbac.authorization.k8s.io/v1` objects (the JSON of `k8s.io/api/rbac/v1`),
//! its service-account users as ServiceAccounts; and what the RBAC
//! authorizer reads of such objects, whoever wrote them. Reading is
//! lenient, as the sim validates no RBAC object: a rule's missing lists
//! are empty, a subject of an unknown kind names nobody, and a binding
//! without a `Role` or `ClusterRole` to refer to grants nothing.

use serde_json::{Map, Value, json};

use super::policy::{Binding, Policy, Role, RoleRef, Rule, Subject, User};
use crate::sim::object::StoredObject;
use crate::sim::resources::{ResourceId, ids};

/// The group of RBAC's kinds and of the subjects `User` and `Group`.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

impl Policy {
    /// The objects the policy is stored as, `(resource, object)`: a
    /// ServiceAccount for each service-account user (with the user's uid as
    /// its `metadata.uid`), then the roles, then the bindings, in the
    /// policy's order.
    pub fn objects(&self) -> Vec<(ResourceId, Value)> {
        let accounts = self.users.iter().filter_map(|user| {
            let (namespace, name) = user.service_account_name()?;
            let object = json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": namespace, "uid": user.uid},
            });
            Some((ids::SERVICEACCOUNTS, object))
        });
        accounts
            .chain(self.roles.iter().map(Role::object))
            .chain(self.bindings.iter().map(Binding::object))
            .collect()
    }
}

impl User {
    /// The namespace and name of the service account this user is
    /// (`system:serviceaccount:{namespace}:{name}`), if it is one.
    pub fn service_account_name(&self) -> Option<(String, String)> {
        super::impersonation::split_username(&self.name)
    }
}

impl Role {
    /// The Role (ClusterRole without a namespace) as stored.
    fn object(&self) -> (ResourceId, Value) {
        let (resource, kind) = match self.namespace {
            Some(_) => (ids::ROLES, "Role"),
            None => (ids::CLUSTERROLES, "ClusterRole"),
        };
        let rules: Vec<Value> = self.rules.iter().map(Rule::to_json).collect();
        let object = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": metadata(&self.name, self.namespace.as_deref()),
            "rules": rules,
        });
        (resource, object)
    }

    /// A stored Role or ClusterRole, as the authorizer reads it.
    pub(crate) fn of(stored: &StoredObject) -> Role {
        let object = stored.to_value();
        Role {
            name: stored.name.clone(),
            namespace: namespace_of(stored),
            rules: array(&object, "rules").map(Rule::of).collect(),
        }
    }
}

impl Binding {
    /// The RoleBinding (ClusterRoleBinding without a namespace) as stored.
    fn object(&self) -> (ResourceId, Value) {
        let (resource, kind) = match self.namespace {
            Some(_) => (ids::ROLEBINDINGS, "RoleBinding"),
            None => (ids::CLUSTERROLEBINDINGS, "ClusterRoleBinding"),
        };
        let (role_kind, role) = match &self.role {
            RoleRef::ClusterRole(name) => ("ClusterRole", name),
            RoleRef::Role(name) => ("Role", name),
        };
        let subjects: Vec<Value> = self.subjects.iter().map(Subject::to_json).collect();
        let object = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": metadata(&self.name, self.namespace.as_deref()),
            "subjects": subjects,
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role},
        });
        (resource, object)
    }

    /// A stored RoleBinding or ClusterRoleBinding, as the authorizer reads
    /// it; `None` when its `roleRef` is neither a Role nor a ClusterRole.
    pub(crate) fn of(stored: &StoredObject) -> Option<Binding> {
        let object = stored.to_value();
        let name = text(&object["roleRef"], "name").to_string();
        let role = match text(&object["roleRef"], "kind") {
            "ClusterRole" => RoleRef::ClusterRole(name),
            "Role" => RoleRef::Role(name),
            _ => return None,
        };
        Some(Binding {
            name: stored.name.clone(),
            namespace: namespace_of(stored),
            role,
            subjects: array(&object, "subjects").filter_map(Subject::of).collect(),
        })
    }
}

impl Rule {
    /// A `PolicyRule`'s JSON: its lists in Go's field order, the empty ones
    /// left out (`omitempty`), verbs always.
    fn to_json(&self) -> Value {
        let mut rule = Map::new();
        rule.insert("verbs".into(), json!(self.verbs));
        for (key, values) in [
            ("apiGroups", &self.api_groups),
            ("resources", &self.resources),
            ("resourceNames", &self.resource_names),
            ("nonResourceURLs", &self.non_resource_urls),
        ] {
            if !values.is_empty() {
                rule.insert(key.into(), json!(values));
            }
        }
        Value::Object(rule)
    }

    fn of(rule: &Value) -> Rule {
        let strings = |key: &str| {
            array(rule, key)
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        };
        Rule {
            verbs: strings("verbs"),
            api_groups: strings("apiGroups"),
            resources: strings("resources"),
            resource_names: strings("resourceNames"),
            non_resource_urls: strings("nonResourceURLs"),
        }
    }
}

impl Subject {
    /// A subject's JSON as the API server defaults it: users and groups in
    /// RBAC's group, service accounts in none.
    fn to_json(&self) -> Value {
        match self {
            Subject::User(name) => json!({"kind": "User", "apiGroup": RBAC_GROUP, "name": name}),
            Subject::Group(name) => json!({"kind": "Group", "apiGroup": RBAC_GROUP, "name": name}),
            Subject::ServiceAccount { namespace, name } => {
                json!({"kind": "ServiceAccount", "name": name, "namespace": namespace})
            }
        }
    }

    fn of(subject: &Value) -> Option<Subject> {
        let name = text(subject, "name").to_string();
        match text(subject, "kind") {
            "User" => Some(Subject::User(name)),
            "Group" => Some(Subject::Group(name)),
            "ServiceAccount" => Some(Subject::ServiceAccount {
                namespace: text(subject, "namespace").to_string(),
                name,
            }),
            _ => None,
        }
    }
}

fn metadata(name: &str, namespace: Option<&str>) -> Value {
    match namespace {
        Some(namespace) => json!({"name": name, "namespace": namespace}),
        None => json!({"name": name}),
    }
}

/// The namespace of a namespaced object; `None` for a cluster-scoped one.
fn namespace_of(stored: &StoredObject) -> Option<String> {
    (!stored.namespace.is_empty()).then(|| stored.namespace.clone())
}

/// The items of the array at `key`, none when it is missing.
fn array<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The string at `key`, empty when it is missing.
fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::resources::RESOURCES;

    /// `object` as the store keeps it.
    fn stored(resource: ResourceId, mut object: Value) -> std::sync::Arc<StoredObject> {
        object["metadata"]["resourceVersion"] = json!("2");
        StoredObject::new(&RESOURCES[resource], object, 2)
    }

    #[test]
    fn roles_and_bindings_read_back_as_they_were_stored() {
        let policy = Policy::demo();
        let objects = policy.objects();
        let roles: Vec<Role> = objects
            .iter()
            .filter(|(r, _)| [ids::ROLES, ids::CLUSTERROLES].contains(r))
            .map(|(r, object)| Role::of(&stored(*r, object.clone())))
            .collect();
        assert_eq!(roles, policy.roles);
        let bindings: Vec<Binding> = objects
            .iter()
            .filter(|(r, _)| [ids::ROLEBINDINGS, ids::CLUSTERROLEBINDINGS].contains(r))
            .map(|(r, object)| Binding::of(&stored(*r, object.clone())).unwrap())
            .collect();
        assert_eq!(bindings, policy.bindings);
    }

    #[test]
    fn objects_are_real_rbac_json() {
        let policy = Policy::new()
            .role(
                "team",
                "reader",
                vec![Rule::resources(&["get"], &[""], &["pods"]).named(&["p"])],
            )
            .binding(
                "team",
                "readers",
                RoleRef::Role("reader".into()),
                vec![
                    Subject::Group("devs".into()),
                    Subject::ServiceAccount {
                        namespace: "ops".into(),
                        name: "bot".into(),
                    },
                ],
            );
        let objects = policy.objects();
        let find = |resource, name: &str| {
            objects
                .iter()
                .find(|(r, o)| *r == resource && o["metadata"]["name"] == name)
                .map(|(_, o)| o.clone())
                .unwrap()
        };
        assert_eq!(
            find(ids::ROLES, "reader"),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "reader", "namespace": "team"},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]}],
            })
        );
        assert_eq!(
            find(ids::ROLEBINDINGS, "readers"),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "readers", "namespace": "team"},
                "subjects": [
                    {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"},
                    {"kind": "ServiceAccount", "name": "bot", "namespace": "ops"},
                ],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            })
        );
        assert_eq!(
            find(ids::CLUSTERROLES, "system:discovery")["rules"][0]["nonResourceURLs"][0],
            "/api"
        );
        // Stored, they are what the API server writes: Go's field order.
        let json = stored(ids::ROLES, find(ids::ROLES, "reader")).json();
        assert!(
            std::str::from_utf8(&json)
                .unwrap()
                .starts_with(r#"{"kind":"Role","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"reader","namespace":"team","#),
            "{json:?}"
        );
    }

    #[test]
    fn service_account_users_are_stored_as_service_accounts_with_their_uid() {
        let policy = Policy::new()
            .user(User::new("alice", "a"))
            .user(User::service_account("ops", "bot", "1234", "b"));
        assert_eq!(
            policy.objects()[0],
            (
                ids::SERVICEACCOUNTS,
                json!({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "bot", "namespace": "ops", "uid": "1234"}})
            )
        );
        assert_eq!(policy.objects()[1].0, ids::CLUSTERROLES, "alice has none");
        assert_eq!(
            User::new("system:serviceaccount:ops:bot", "t").service_account_name(),
            Some(("ops".into(), "bot".into()))
        );
    }

    #[test]
    fn what_the_authorizer_cannot_use_is_left_out() {
        let binding = json!({
            "metadata": {"name": "b"},
            "subjects": [{"kind": "Robot", "name": "r2"}, {"kind": "User", "name": "u"}],
            "roleRef": {"kind": "ClusterRole", "name": "r"},
        });
        assert_eq!(
            Binding::of(&stored(ids::CLUSTERROLEBINDINGS, binding)),
            Some(Binding {
                name: "b".into(),
                namespace: None,
                role: RoleRef::ClusterRole("r".into()),
                subjects: vec![Subject::User("u".into())],
            })
        );
        let odd = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "Thing", "name": "r"}});
        assert_eq!(Binding::of(&stored(ids::CLUSTERROLEBINDINGS, odd)), None);
        let role =
            json!({"metadata": {"name": "r", "namespace": "ns"}, "rules": [{"verbs": ["get"]}]});
        assert_eq!(
            Role::of(&stored(ids::ROLES, role)),
            Role {
                name: "r".into(),
                namespace: Some("ns".into()),
                rules: vec![Rule {
                    verbs: vec!["get".into()],
                    ..Rule::default()
                }],
            }
        );
    }
}
