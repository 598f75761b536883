//! Faults injected on demand: each armed fault hits the next matching
//! requests, a set number of times (or until cleared), on collections
//! (lists, continues, watches) and on the review APIs (`TokenReview`,
//! `SubjectAccessReview`) that a cache authenticating its clients asks.

use kubecache_wire::{Status, StatusDetails};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::auth::{Attributes, ResourceAttributes, UserInfo};
use super::resources::Resource;

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "type"
)]
pub enum Fault {
    /// A watch is cut after this many events, without a clean end of stream.
    DropWatch {
        /// Events delivered before the cut.
        after_events: u64,
    },
    /// A watch gets 200 and then one ERROR event with a 410 Status.
    WatchGone,
    /// A continue request gets 410 as if its snapshot were compacted.
    ExpireContinue,
    /// 429 with `Retry-After`.
    TooManyRequests {
        /// Seconds in `Retry-After`.
        retry_after_secs: u32,
    },
    /// 500 `InternalError`.
    InternalError,
    /// 503 `ServiceUnavailable`, as an overloaded or restarting server
    /// answers.
    ServiceUnavailable,
    /// The response body stops halfway and the connection is dropped.
    TruncateBody,
    /// The request waits this long before it is answered.
    Stall {
        /// How long.
        secs: u64,
    },
    /// The request waits until the faults are cleared, then is answered.
    Hang,
    /// 403 `Forbidden`, as kube-apiserver answers a request RBAC does not
    /// allow (see [`forbidden`]).
    Forbidden,
    /// 404 `NotFound`, as kube-apiserver answers for a resource it does not
    /// serve, e.g. that of a deleted CustomResourceDefinition.
    NotFound,
}

/// Which requests a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Target {
    /// A list without `continue` (the first page).
    List,
    /// A list with `continue`.
    Continue,
    /// A watch, including streaming lists.
    Watch,
    /// Any collection request (not the reviews).
    Any,
    /// A `TokenReview`.
    TokenReview,
    /// A `SubjectAccessReview`.
    SubjectAccessReview,
}

/// What a request is, to match against targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A first page.
    List,
    /// A continue page.
    Continue,
    /// A watch.
    Watch,
    /// A `TokenReview`.
    TokenReview,
    /// A `SubjectAccessReview`.
    SubjectAccessReview,
}

impl Target {
    fn hits(self, request: RequestKind) -> bool {
        matches!(
            (self, request),
            (
                Target::Any,
                RequestKind::List | RequestKind::Continue | RequestKind::Watch
            ) | (Target::List, RequestKind::List)
                | (Target::Continue, RequestKind::Continue)
                | (Target::Watch, RequestKind::Watch)
                | (Target::TokenReview, RequestKind::TokenReview)
                | (
                    Target::SubjectAccessReview,
                    RequestKind::SubjectAccessReview
                )
        )
    }
}

/// One armed fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultSpec {
    /// Which requests.
    pub target: Target,
    /// What happens to them.
    pub fault: Fault,
    /// How many requests it hits before it is disarmed (`u32::MAX`: until
    /// [`Faults::clear`]).
    pub times: u32,
}

impl Fault {
    /// Whether this fault makes sense for the request (a watch cannot have
    /// its continue token expired; a review has no body to truncate).
    fn applies_to(self, request: RequestKind) -> bool {
        match self {
            Fault::DropWatch { .. } | Fault::WatchGone => request == RequestKind::Watch,
            Fault::ExpireContinue => request == RequestKind::Continue,
            Fault::TruncateBody => !matches!(
                request,
                RequestKind::TokenReview | RequestKind::SubjectAccessReview
            ),
            _ => true,
        }
    }
}

/// The user the simulated API server denies in [`Fault::Forbidden`]:
/// kubecache's service account as `deploy/` creates it.
pub const DENIED_USER: &str = "system:serviceaccount:kubecache:kubecache";

/// The 403 of a request RBAC does not allow, worded as kube-apiserver words
/// it (see [`Attributes::forbidden`]), e.g. `pods is forbidden: User
/// "system:serviceaccount:kubecache:kubecache" cannot watch resource "pods"
/// in API group "" at the cluster scope`. `resource` and `namespace` are
/// those of collection requests; reviews name their own.
pub fn forbidden(
    request: RequestKind,
    resource: Option<&Resource>,
    namespace: Option<&str>,
) -> Status {
    let (group, plural) = resource.map_or(("", ""), |r| (r.group, r.plural));
    let (verb, group, plural, namespace) = match request {
        RequestKind::List | RequestKind::Continue => ("list", group, plural, namespace),
        RequestKind::Watch => ("watch", group, plural, namespace),
        RequestKind::TokenReview => ("create", "authentication.k8s.io", "tokenreviews", None),
        RequestKind::SubjectAccessReview => (
            "create",
            "authorization.k8s.io",
            "subjectaccessreviews",
            None,
        ),
    };
    let attributes = Attributes {
        user: UserInfo {
            username: DENIED_USER.into(),
            ..UserInfo::default()
        },
        verb: verb.into(),
        resource: Some(ResourceAttributes {
            namespace: namespace.unwrap_or_default().into(),
            group: group.into(),
            version: "v1".into(),
            resource: plural.into(),
            ..ResourceAttributes::default()
        }),
        path: String::new(),
    };
    attributes.forbidden("")
}

/// The 404 of a resource the server does not serve (kube-apiserver's
/// `NotFound` handler, `apiserver/pkg/endpoints/handlers/responsewriters`).
pub fn not_found() -> Status {
    let mut status = Status::failure(
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    status.details = Some(StatusDetails::default());
    status
}

/// The armed faults, oldest first.
#[derive(Debug)]
pub struct Faults {
    armed: Mutex<Vec<FaultSpec>>,
    /// Bumped by every [`Faults::clear`], which ends the hangs.
    clears: watch::Sender<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            armed: Mutex::default(),
            clears: watch::Sender::new(0),
        }
    }
}

impl Faults {
    /// Arms a fault.
    pub fn inject(&self, spec: FaultSpec) {
        if spec.times > 0 {
            self.armed.lock().push(spec);
        }
    }

    /// Disarms everything and ends the hangs.
    pub fn clear(&self) {
        self.armed.lock().clear();
        self.clears.send_modify(|n| *n += 1);
    }

    /// Waits for the next [`Faults::clear`]: a [`Fault::Hang`].
    pub async fn hang(&self) {
        let mut clears = self.clears.subscribe();
        let _ = clears.changed().await;
    }

    /// The fault that hits this request, if any (and counts it).
    pub fn take(&self, request: RequestKind) -> Option<Fault> {
        let mut armed = self.armed.lock();
        let i = armed
            .iter()
            .position(|s| s.target.hits(request) && s.fault.applies_to(request))?;
        let fault = armed[i].fault;
        armed[i].times -= 1;
        if armed[i].times == 0 {
            armed.remove(i);
        }
        Some(fault)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_fault_hits_only_matching_requests_and_only_so_many_times() {
        let faults = Faults::default();
        faults.inject(FaultSpec {
            target: Target::Any,
            fault: Fault::ExpireContinue,
            times: 2,
        });
        assert_eq!(faults.take(RequestKind::Watch), None);
        assert_eq!(faults.take(RequestKind::List), None);
        assert_eq!(
            faults.take(RequestKind::Continue),
            Some(Fault::ExpireContinue)
        );
        assert_eq!(
            faults.take(RequestKind::Continue),
            Some(Fault::ExpireContinue)
        );
        assert_eq!(faults.take(RequestKind::Continue), None);
    }

    #[test]
    fn forbidden_is_worded_as_kube_apiserver_words_it() {
        let pods = &super::super::resources::RESOURCES[crate::sim::ids::PODS];
        assert_eq!(
            forbidden(RequestKind::Watch, Some(pods), None).message,
            r#"pods is forbidden: User "system:serviceaccount:kubecache:kubecache" cannot watch resource "pods" in API group "" at the cluster scope"#
        );
        assert_eq!(
            forbidden(RequestKind::Continue, Some(pods), Some("default")).message,
            r#"pods is forbidden: User "system:serviceaccount:kubecache:kubecache" cannot list resource "pods" in API group "" in the namespace "default""#
        );
    }

    #[test]
    fn review_faults_hit_their_reviews_only_until_cleared() {
        let faults = Faults::default();
        faults.inject(FaultSpec {
            target: Target::TokenReview,
            fault: Fault::ServiceUnavailable,
            times: u32::MAX,
        });
        faults.inject(FaultSpec {
            target: Target::Any,
            fault: Fault::InternalError,
            times: 5,
        });
        assert_eq!(faults.take(RequestKind::SubjectAccessReview), None);
        for _ in 0..3 {
            assert_eq!(
                faults.take(RequestKind::TokenReview),
                Some(Fault::ServiceUnavailable)
            );
        }
        faults.clear();
        assert_eq!(faults.take(RequestKind::TokenReview), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hang_lasts_until_the_faults_are_cleared() {
        let faults = std::sync::Arc::new(Faults::default());
        let hung = tokio::spawn({
            let faults = faults.clone();
            async move { faults.hang().await }
        });
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!hung.is_finished());
        faults.clear();
        hung.await.unwrap();
    }

    #[test]
    fn faults_parse_from_json() {
        let spec: FaultSpec = serde_json::from_str(
            r#"{"target":"watch","fault":{"type":"dropWatch","afterEvents":3},"times":1}"#,
        )
        .unwrap();
        assert_eq!(spec.fault, Fault::DropWatch { after_events: 3 });
    }
}
