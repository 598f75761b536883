//! Users, roles and bindings, and the decisions RBAC takes from them
//! (`plugin/pkg/auth/authorizer/rbac` in kube-apiserver): a request is
//! allowed when a binding whose subject is the user (by name, group or
//! service account) refers to a role with a rule that matches it. Cluster
//! bindings apply everywhere; namespaced bindings only to requests in their
//! namespace. Nothing is ever denied outright: RBAC only allows.

use super::attributes::{AUTHENTICATED, Attributes, UNAUTHENTICATED, UserInfo};

/// One user the server knows, by bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The user's name.
    pub name: String,
    /// The UID authentication reports.
    pub uid: String,
    /// Groups, besides `system:authenticated` which every user gets.
    pub groups: Vec<String>,
    /// Extra attributes authentication reports.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
    /// The bearer token that proves this user.
    pub token: String,
}

impl User {
    /// A user without groups; the UID is derived from the name.
    pub fn new(name: &str, token: &str) -> User {
        User {
            name: name.into(),
            uid: format!("uid-{}", name.replace(':', "-")),
            groups: Vec::new(),
            extra: Default::default(),
            token: token.into(),
        }
    }

    /// A service account as its token authenticates it:
    /// `system:serviceaccount:{namespace}:{name}` with its uid, in
    /// `system:serviceaccounts` and `system:serviceaccounts:{namespace}`.
    pub fn service_account(namespace: &str, name: &str, uid: &str, token: &str) -> User {
        let groups = [
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{namespace}"),
        ];
        User {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            uid: uid.into(),
            groups: groups.into(),
            extra: Default::default(),
            token: token.into(),
        }
    }

    /// The same user in these groups.
    pub fn in_groups(mut self, groups: &[&str]) -> User {
        self.groups = strings(groups);
        self
    }
}

/// An RBAC `PolicyRule`: verbs on resources (in API groups, optionally of
/// some names only), or verbs on non-resource URLs. `*` matches anything;
/// `*/sub` matches that subresource of any resource; a URL ending in `*`
/// matches by prefix.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rule {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, `impersonate`, ... or `*`.
    pub verbs: Vec<String>,
    /// API groups (`""` is core).
    pub api_groups: Vec<String>,
    /// Resources, `resource/subresource` for subresources.
    pub resources: Vec<String>,
    /// Object names the rule is limited to; empty is all.
    pub resource_names: Vec<String>,
    /// Non-resource paths, e.g. `/healthz` or `/apis/*`.
    pub non_resource_urls: Vec<String>,
}

impl Rule {
    /// Verbs on resources in API groups.
    pub fn resources(verbs: &[&str], api_groups: &[&str], resources: &[&str]) -> Rule {
        Rule {
            verbs: strings(verbs),
            api_groups: strings(api_groups),
            resources: strings(resources),
            ..Rule::default()
        }
    }

    /// Verbs on non-resource URLs.
    pub fn urls(verbs: &[&str], urls: &[&str]) -> Rule {
        Rule {
            verbs: strings(verbs),
            non_resource_urls: strings(urls),
            ..Rule::default()
        }
    }

    /// The same rule for these object names only.
    pub fn named(mut self, names: &[&str]) -> Rule {
        self.resource_names = strings(names);
        self
    }

    /// `RuleAllows` of kube-apiserver's RBAC authorizer.
    fn allows(&self, request: &Attributes) -> bool {
        let verb = self.verbs.iter().any(|v| v == "*" || *v == request.verb);
        let Some(r) = &request.resource else {
            return verb
                && self.non_resource_urls.iter().any(|url| {
                    url == "*"
                        || *url == request.path
                        || url
                            .strip_suffix('*')
                            .is_some_and(|prefix| request.path.starts_with(prefix))
                });
        };
        let combined = if r.subresource.is_empty() {
            r.resource.clone()
        } else {
            format!("{}/{}", r.resource, r.subresource)
        };
        let any_subresource = format!("*/{}", r.subresource);
        verb && self.api_groups.iter().any(|g| g == "*" || *g == r.group)
            && self.resources.iter().any(|res| {
                res == "*"
                    || *res == combined
                    || (!r.subresource.is_empty() && *res == any_subresource)
            })
            && (self.resource_names.is_empty() || self.resource_names.contains(&r.name))
    }
}

/// A `Role` (in a namespace) or a `ClusterRole` (namespace `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    /// Its name.
    pub name: String,
    /// Its namespace; `None` for a ClusterRole.
    pub namespace: Option<String>,
    /// What it allows.
    pub rules: Vec<Rule>,
}

/// The role a binding grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleRef {
    /// A ClusterRole, by name.
    ClusterRole(String),
    /// A Role in the binding's namespace, by name.
    Role(String),
}

/// Who a binding grants its role to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A user, by name.
    User(String),
    /// Every member of a group.
    Group(String),
    /// A service account (`system:serviceaccount:{namespace}:{name}`).
    ServiceAccount {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl Subject {
    fn applies_to(&self, user: &UserInfo) -> bool {
        match self {
            Subject::User(name) => user.username == *name,
            Subject::Group(group) => user.groups.contains(group),
            Subject::ServiceAccount { namespace, name } => {
                user.username == format!("system:serviceaccount:{namespace}:{name}")
            }
        }
    }

    /// `describeSubject` of the RBAC authorizer.
    fn describe(&self) -> String {
        match self {
            Subject::User(name) => format!("User {name:?}"),
            Subject::Group(group) => format!("Group {group:?}"),
            Subject::ServiceAccount { namespace, name } => {
                format!("ServiceAccount {:?}", format!("{name}/{namespace}"))
            }
        }
    }
}

/// A `RoleBinding` (in a namespace) or a `ClusterRoleBinding` (namespace
/// `None`, which may only refer to a ClusterRole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// Its name.
    pub name: String,
    /// Its namespace; `None` for a ClusterRoleBinding.
    pub namespace: Option<String>,
    /// The role it grants.
    pub role: RoleRef,
    /// Who it grants it to.
    pub subjects: Vec<Subject>,
}

/// The outcome of an authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// RBAC's reason: `RBAC: allowed by ...` when allowed; empty when
    /// not, unless a binding refers to a missing role.
    pub reason: String,
}

/// Who the simulated API server knows and what they may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Users, by token.
    pub users: Vec<User>,
    /// Roles and cluster roles.
    pub roles: Vec<Role>,
    /// Role bindings and cluster role bindings, visited in this order.
    pub bindings: Vec<Binding>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::new()
    }
}

impl Policy {
    /// No users, and the bootstrap policy every cluster starts with:
    /// discovery (`system:discovery`) and the reviews of oneself
    /// (`system:basic-user`: SelfSubjectReviews, SelfSubjectAccessReviews,
    /// SelfSubjectRulesReviews) for authenticated users, health and version
    /// (`system:public-info-viewer`) for everyone. URLs sorted, as the
    /// bootstrap policy's rule builder sorts them; the bindings in the order
    /// the recorded SelfSubjectRulesReview lists their rules
    /// (`versions/bodies/can-i-list-payments-prod-json.json`).
    pub fn new() -> Policy {
        const PUBLIC: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];
        let mut discovery: Vec<&str> = [
            "/api",
            "/api/*",
            "/apis",
            "/apis/*",
            "/openapi",
            "/openapi/*",
        ]
        .into_iter()
        .chain(PUBLIC.iter().copied())
        .collect();
        discovery.sort_unstable();
        Policy {
            users: Vec::new(),
            roles: Vec::new(),
            bindings: Vec::new(),
        }
        .cluster_role("system:discovery", vec![Rule::urls(&["get"], &discovery)])
        .cluster_role(
            "system:basic-user",
            vec![
                Rule::resources(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                Rule::resources(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        )
        .cluster_role(
            "system:public-info-viewer",
            vec![Rule::urls(&["get"], PUBLIC)],
        )
        .cluster_binding(
            "system:basic-user",
            "system:basic-user",
            vec![Subject::Group(AUTHENTICATED.into())],
        )
        .cluster_binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            vec![
                Subject::Group(AUTHENTICATED.into()),
                Subject::Group(UNAUTHENTICATED.into()),
            ],
        )
        .cluster_binding(
            "system:discovery",
            "system:discovery",
            vec![Subject::Group(AUTHENTICATED.into())],
        )
    }

    /// One user, `admin`, who may do everything, with this token.
    pub fn admin_only(token: &str) -> Policy {
        Policy::new()
            .user(User::new("admin", token).in_groups(&["system:masters"]))
            .cluster_admin()
    }

    /// Adds a user.
    pub fn user(mut self, user: User) -> Policy {
        self.users.push(user);
        self
    }

    /// Adds a ClusterRole.
    pub fn cluster_role(mut self, name: &str, rules: Vec<Rule>) -> Policy {
        self.roles.push(Role {
            name: name.into(),
            namespace: None,
            rules,
        });
        self
    }

    /// Adds a Role in a namespace.
    pub fn role(mut self, namespace: &str, name: &str, rules: Vec<Rule>) -> Policy {
        self.roles.push(Role {
            name: name.into(),
            namespace: Some(namespace.into()),
            rules,
        });
        self
    }

    /// Adds a ClusterRoleBinding of a ClusterRole.
    pub fn cluster_binding(mut self, name: &str, role: &str, subjects: Vec<Subject>) -> Policy {
        self.bindings.push(Binding {
            name: name.into(),
            namespace: None,
            role: RoleRef::ClusterRole(role.into()),
            subjects,
        });
        self
    }

    /// Adds a RoleBinding in a namespace.
    pub fn binding(
        mut self,
        namespace: &str,
        name: &str,
        role: RoleRef,
        subjects: Vec<Subject>,
    ) -> Policy {
        self.bindings.push(Binding {
            name: name.into(),
            namespace: Some(namespace.into()),
            role,
            subjects,
        });
        self
    }

    /// The same policy without a binding (namespace `None`: a
    /// ClusterRoleBinding): how a test revokes a permission.
    pub fn without_binding(mut self, namespace: Option<&str>, name: &str) -> Policy {
        self.bindings
            .retain(|b| !(b.name == name && b.namespace.as_deref() == namespace));
        self
    }

    /// `cluster-admin` (everything) granted to `system:masters`, as in
    /// every cluster.
    pub(super) fn cluster_admin(self) -> Policy {
        self.cluster_role(
            "cluster-admin",
            vec![
                Rule::resources(&["*"], &["*"], &["*"]),
                Rule::urls(&["*"], &["*"]),
            ],
        )
        .cluster_binding(
            "cluster-admin",
            "cluster-admin",
            vec![Subject::Group("system:masters".into())],
        )
    }

    /// The user a bearer token proves, in `system:authenticated`; `None`
    /// for an unknown token.
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        let user = self.users.iter().find(|u| u.token == token)?;
        let mut groups = user.groups.clone();
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        Some(UserInfo {
            username: user.name.clone(),
            uid: user.uid.clone(),
            groups,
            extra: user.extra.clone(),
        })
    }

    /// The token of a user, by name.
    pub fn token_of(&self, user: &str) -> Option<&str> {
        self.users
            .iter()
            .find(|u| u.name == user)
            .map(|u| u.token.as_str())
    }

    /// Whether RBAC allows the request, and why.
    pub fn authorize(&self, request: &Attributes) -> Decision {
        let namespace = request
            .resource
            .as_ref()
            .map_or("", |r| r.namespace.as_str());
        let mut errors: Vec<String> = Vec::new();
        for (binding, subject) in self.bound(&request.user, namespace) {
            match self.rules_of(binding) {
                Ok(rules) if rules.iter().any(|rule| rule.allows(request)) => {
                    return Decision {
                        allowed: true,
                        reason: format!("RBAC: allowed by {}", describe(binding, subject)),
                    };
                }
                Ok(_) => {}
                Err(error) => errors.push(error),
            }
        }
        Decision {
            allowed: false,
            reason: aggregate(&errors).map_or_else(String::new, |e| format!("RBAC: {e}")),
        }
    }

    /// What RBAC lets `user` do in `namespace` (`RulesFor` of the RBAC
    /// authorizer, as a SelfSubjectRulesReview reports it): the rules of
    /// every role bound to the user, in the order the bindings are visited,
    /// and the error of bindings to missing roles (Go's aggregate of them).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<&Rule>, Option<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        for (binding, _) in self.bound(user, namespace) {
            match self.rules_of(binding) {
                Ok(bound) => rules.extend(bound),
                Err(error) => errors.push(error),
            }
        }
        (rules, aggregate(&errors))
    }

    /// The bindings that apply to `user` in `namespace`, with the subject
    /// that names the user: every ClusterRoleBinding, then the namespace's
    /// RoleBindings (`VisitRulesFor`; kube-apiserver's listers give them in
    /// map order, the sim in the policy's).
    fn bound<'a>(
        &'a self,
        user: &'a UserInfo,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a Binding, &'a Subject)> {
        let cluster = self.bindings.iter().filter(|b| b.namespace.is_none());
        let local = self
            .bindings
            .iter()
            .filter(move |b| !namespace.is_empty() && b.namespace.as_deref() == Some(namespace));
        cluster.chain(local).filter_map(move |binding| {
            let subject = binding.subjects.iter().find(|s| s.applies_to(user))?;
            Some((binding, subject))
        })
    }

    /// The rules of the role a binding refers to, or the lister's NotFound.
    fn rules_of(&self, binding: &Binding) -> Result<&[Rule], String> {
        let (kind, name, namespace) = match &binding.role {
            RoleRef::ClusterRole(name) => ("clusterrole", name, None),
            RoleRef::Role(name) => ("role", name, binding.namespace.as_ref()),
        };
        self.roles
            .iter()
            .find(|r| r.name == *name && r.namespace.as_ref() == namespace)
            .map(|r| r.rules.as_slice())
            .ok_or_else(|| format!("{kind}.rbac.authorization.k8s.io {name:?} not found"))
    }
}

/// The binding that allowed a request, as the RBAC authorizer describes it:
/// `ClusterRoleBinding "b" of ClusterRole "r" to User "u"`, or
/// `RoleBinding "b/ns" of Role "r" to Group "g"`.
fn describe(binding: &Binding, subject: &Subject) -> String {
    let (kind, role) = match &binding.role {
        RoleRef::ClusterRole(role) => ("ClusterRole", role),
        RoleRef::Role(role) => ("Role", role),
    };
    match &binding.namespace {
        None => format!(
            "ClusterRoleBinding {:?} of {kind} {role:?} to {}",
            binding.name,
            subject.describe()
        ),
        Some(ns) => format!(
            "RoleBinding {:?} of {kind} {role:?} to {}",
            format!("{}/{ns}", binding.name),
            subject.describe()
        ),
    }
}

/// Go's `utilerrors.NewAggregate(errors).Error()`: `None` for none, the
/// message of one, `[a, b]` of several (repeated messages once).
fn aggregate(errors: &[String]) -> Option<String> {
    let mut unique: Vec<&str> = Vec::new();
    for error in errors {
        if !unique.contains(&error.as_str()) {
            unique.push(error);
        }
    }
    match unique.as_slice() {
        [] => None,
        [one] => Some(one.to_string()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::auth::ResourceAttributes;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            username: name.into(),
            groups: strings(groups),
            ..UserInfo::default()
        }
    }

    fn resource(user: UserInfo, verb: &str, ns: &str, resource: &str, name: &str) -> Attributes {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        Attributes {
            user,
            verb: verb.into(),
            resource: Some(ResourceAttributes {
                namespace: ns.into(),
                version: "v1".into(),
                resource: resource.into(),
                subresource: subresource.into(),
                name: name.into(),
                ..ResourceAttributes::default()
            }),
            path: String::new(),
        }
    }

    fn policy() -> Policy {
        Policy::new()
            .role(
                "team",
                "edit",
                vec![
                    Rule::resources(&["get", "list"], &[""], &["pods", "*/status"]),
                    Rule::resources(&["update"], &[""], &["configmaps"]).named(&["settings"]),
                ],
            )
            .cluster_role("watcher", vec![Rule::resources(&["watch"], &["*"], &["*"])])
            .binding(
                "team",
                "devs",
                RoleRef::Role("edit".into()),
                vec![Subject::Group("devs".into())],
            )
            .cluster_binding(
                "watchers",
                "watcher",
                vec![Subject::ServiceAccount {
                    namespace: "ops".into(),
                    name: "bot".into(),
                }],
            )
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let p = policy();
        let dev = || user("alice", &["devs"]);
        let allowed = |a: &Attributes| p.authorize(a).allowed;
        assert!(allowed(&resource(dev(), "list", "team", "pods", "")));
        assert!(allowed(&resource(dev(), "get", "team", "pods/status", "p")));
        assert!(!allowed(&resource(dev(), "get", "team", "pods/log", "p")));
        assert!(!allowed(&resource(dev(), "list", "other", "pods", "")));
        assert!(!allowed(&resource(dev(), "list", "", "pods", "")));
        assert!(!allowed(&resource(dev(), "watch", "team", "pods", "")));
        assert!(allowed(&resource(
            dev(),
            "update",
            "team",
            "configmaps",
            "settings"
        )));
        assert!(!allowed(&resource(
            dev(),
            "update",
            "team",
            "configmaps",
            "other"
        )));
        let bot = || user("system:serviceaccount:ops:bot", &[]);
        assert!(allowed(&resource(bot(), "watch", "", "pods", "")));
        assert!(!allowed(&resource(bot(), "list", "", "pods", "")));
    }

    #[test]
    fn the_reason_names_the_binding_that_allowed() {
        let p = policy();
        assert_eq!(
            p.authorize(&resource(
                user("alice", &["devs"]),
                "list",
                "team",
                "pods",
                ""
            ))
            .reason,
            r#"RBAC: allowed by RoleBinding "devs/team" of Role "edit" to Group "devs""#
        );
        assert_eq!(
            p.authorize(&resource(
                user("system:serviceaccount:ops:bot", &[]),
                "watch",
                "x",
                "pods",
                ""
            ))
            .reason,
            r#"RBAC: allowed by ClusterRoleBinding "watchers" of ClusterRole "watcher" to ServiceAccount "bot/ops""#
        );
    }

    #[test]
    fn a_binding_to_a_missing_role_is_the_reason_of_a_denial() {
        let p = policy().cluster_binding("ghost", "nope", vec![Subject::User("carol".into())]);
        let decision = p.authorize(&resource(user("carol", &[]), "get", "", "pods", "x"));
        assert!(!decision.allowed);
        assert_eq!(
            decision.reason,
            r#"RBAC: clusterrole.rbac.authorization.k8s.io "nope" not found"#
        );
    }

    #[test]
    fn discovery_is_for_authenticated_users_and_health_for_everyone() {
        let p = Policy::new();
        let get = |user: UserInfo, path: &str| Attributes {
            user,
            verb: "get".into(),
            resource: None,
            path: path.into(),
        };
        let someone = || user("alice", &[AUTHENTICATED]);
        assert!(p.authorize(&get(someone(), "/apis/example.com/v1")).allowed);
        assert!(p.authorize(&get(someone(), "/version")).allowed);
        assert!(!p.authorize(&get(someone(), "/metrics")).allowed);
        assert!(!p.authorize(&get(UserInfo::anonymous(), "/api")).allowed);
        assert!(p.authorize(&get(UserInfo::anonymous(), "/healthz")).allowed);
    }

    #[test]
    fn tokens_authenticate_their_users_into_system_authenticated() {
        let p = Policy::admin_only("t0ken");
        let admin = p.authenticate("t0ken").unwrap();
        assert_eq!(admin.username, "admin");
        assert_eq!(admin.groups, ["system:masters", AUTHENTICATED]);
        assert_eq!(p.authenticate("other"), None);
        assert!(
            p.authorize(&resource(admin, "deletecollection", "", "pods", ""))
                .allowed
        );
    }
}
