//! The demo policy: the users of the README demo and of the tests, each
//! with a token of its own (`{short name}-token`).
//!
//! | user | may |
//! |---|---|
//! | [`ADMIN`] | everything (`cluster-admin` through `system:masters`) |
//! | [`KUBECACHE`] | get, list and watch everything; create TokenReviews and SubjectAccessReviews; impersonate users, groups, service accounts, UIDs and extras |
//! | [`DEVELOPER`] | read and write pods, configmaps and widgets in [`NAMESPACE`] (their `status`, pods' `log` and `eviction` too), through group `payments-devs` |
//! | [`POD_READER`] | get, list and watch pods (and their logs) everywhere |
//! | [`NOBODY`] | nothing beyond discovery |
//! | [`DEPLOYER`] (a service account of [`NAMESPACE`], token `deployer-token`) | get, list and watch pods (and their logs) in [`NAMESPACE`], through RoleBinding `deployers` of ClusterRole `pod-reader`; while its ServiceAccount lives with uid [`DEPLOYER_UID`] |

use super::policy::{Policy, RoleRef, Rule, Subject, User};

/// The namespace [`DEVELOPER`] works in (the first team namespace the
/// generator plans, present whenever there are two namespaces or more).
pub const NAMESPACE: &str = "payments-prod";
/// The cluster administrator.
pub const ADMIN: &str = "admin";
/// kubecache's own service account, as `deploy/` creates it.
pub const KUBECACHE: &str = "system:serviceaccount:kubecache:kubecache";
/// A developer of [`NAMESPACE`].
pub const DEVELOPER: &str = "alice";
/// Reads pods cluster-wide.
pub const POD_READER: &str = "bob";
/// Authenticated, and granted nothing.
pub const NOBODY: &str = "eve";
/// A service account of [`NAMESPACE`] that reads its pods.
pub const DEPLOYER: &str = "system:serviceaccount:payments-prod:deployer";
/// The uid of [`DEPLOYER`]'s ServiceAccount (its token's claim).
pub const DEPLOYER_UID: &str = "5d1c6f0e-3a8b-4c2d-9e7f-1b2a3c4d5e6f";

const ALL_VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];
const READ: &[&str] = &["get", "list", "watch"];

impl Policy {
    /// The demo users and their grants (see the module documentation).
    pub fn demo() -> Policy {
        Policy::new()
            .user(User::new(ADMIN, "admin-token").in_groups(&["system:masters"]))
            .user(User::new(DEVELOPER, "alice-token").in_groups(&["payments-devs"]))
            .user(User::new(POD_READER, "bob-token"))
            .user(User::new(NOBODY, "eve-token"))
            .user(User::service_account(
                NAMESPACE,
                "deployer",
                DEPLOYER_UID,
                "deployer-token",
            ))
            .cluster_admin()
            .with_kubecache()
            .role(
                NAMESPACE,
                "developer",
                vec![
                    Rule::resources(ALL_VERBS, &[""], &["pods", "configmaps"]),
                    Rule::resources(ALL_VERBS, &["example.com"], &["widgets"]),
                    Rule::resources(&["get"], &[""], &["pods/log"]),
                    Rule::resources(&["create"], &[""], &["pods/eviction"]),
                    Rule::resources(&["get", "update", "patch"], &[""], &["pods/status"]),
                    Rule::resources(
                        &["get", "update", "patch"],
                        &["example.com"],
                        &["widgets/status"],
                    ),
                ],
            )
            .binding(
                NAMESPACE,
                "developers",
                RoleRef::Role("developer".into()),
                vec![Subject::Group("payments-devs".into())],
            )
            .cluster_role(
                "pod-reader",
                vec![
                    Rule::resources(READ, &[""], &["pods"]),
                    Rule::resources(&["get"], &[""], &["pods/log"]),
                ],
            )
            .cluster_binding(
                "pod-readers",
                "pod-reader",
                vec![Subject::User(POD_READER.into())],
            )
            .binding(
                NAMESPACE,
                "deployers",
                RoleRef::ClusterRole("pod-reader".into()),
                vec![Subject::ServiceAccount {
                    namespace: NAMESPACE.into(),
                    name: "deployer".into(),
                }],
            )
    }

    /// This policy and [`KUBECACHE`], kubecache's own service account (token
    /// `kubecache-token`), with what `deploy/` grants it: get, list and
    /// watch everything, TokenReviews and SubjectAccessReviews, and
    /// impersonation.
    pub fn with_kubecache(self) -> Policy {
        let mut kubecache = User::new(KUBECACHE, "kubecache-token")
            .in_groups(&["system:serviceaccounts", "system:serviceaccounts:kubecache"]);
        kubecache.extra = [
            ("authentication.kubernetes.io/pod-name", "kubecache-0"),
            ("authentication.kubernetes.io/pod-uid", "uid-kubecache-0"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
        .collect();
        self.user(kubecache)
            .cluster_role(
                "kubecache",
                vec![
                    Rule::resources(READ, &["*"], &["*"]),
                    Rule::resources(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                    Rule::resources(
                        &["create"],
                        &["authorization.k8s.io"],
                        &["subjectaccessreviews"],
                    ),
                    Rule::resources(
                        &["impersonate"],
                        &[""],
                        &["users", "groups", "serviceaccounts"],
                    ),
                    Rule::resources(&["impersonate"], &["authentication.k8s.io"], &["*"]),
                ],
            )
            .cluster_binding(
                "kubecache",
                "kubecache",
                vec![Subject::ServiceAccount {
                    namespace: "kubecache".into(),
                    name: "kubecache".into(),
                }],
            )
    }
}
