//! Faults injected on demand: each armed fault hits the next matching
//! requests, a set number of times.

use std::time::Duration;

use kubecache_wire::{Status, StatusDetails};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

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
    /// The response body stops halfway and the connection is dropped.
    TruncateBody,
    /// The request waits this long before it is answered.
    Stall {
        /// How long.
        secs: u64,
    },
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
    /// Any collection request.
    Any,
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
}

impl Target {
    fn hits(self, request: RequestKind) -> bool {
        matches!(
            (self, request),
            (Target::Any, _)
                | (Target::List, RequestKind::List)
                | (Target::Continue, RequestKind::Continue)
                | (Target::Watch, RequestKind::Watch)
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
    /// its continue token expired).
    fn applies_to(self, request: RequestKind) -> bool {
        match self {
            Fault::DropWatch { .. } | Fault::WatchGone => request == RequestKind::Watch,
            Fault::ExpireContinue => request == RequestKind::Continue,
            _ => true,
        }
    }

    /// The stall, if this is one.
    pub fn stall(self) -> Option<Duration> {
        match self {
            Fault::Stall { secs } => Some(Duration::from_secs(secs)),
            _ => None,
        }
    }
}

/// The user the simulated API server denies in [`Fault::Forbidden`]:
/// kubecache's service account as `deploy/` creates it.
pub const DENIED_USER: &str = "system:serviceaccount:kubecache:kubecache";

/// The 403 of a request RBAC does not allow, worded as kube-apiserver words
/// it (see [`Attributes::forbidden`]), e.g. `pods is forbidden: User
/// "system:serviceaccount:kubecache:kubecache" cannot watch resource "pods"
/// in API group "" at the cluster scope`.
pub fn forbidden(request: RequestKind, resource: &Resource, namespace: Option<&str>) -> Status {
    let verb = match request {
        RequestKind::List | RequestKind::Continue => "list",
        RequestKind::Watch => "watch",
    };
    let attributes = Attributes {
        user: UserInfo {
            username: DENIED_USER.into(),
            ..UserInfo::default()
        },
        verb: verb.into(),
        resource: Some(ResourceAttributes {
            namespace: namespace.unwrap_or_default().into(),
            group: resource.group.into(),
            version: resource.version.into(),
            resource: resource.plural.into(),
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
#[derive(Debug, Default)]
pub struct Faults {
    armed: Mutex<Vec<FaultSpec>>,
}

impl Faults {
    /// Arms a fault.
    pub fn inject(&self, spec: FaultSpec) {
        if spec.times > 0 {
            self.armed.lock().push(spec);
        }
    }

    /// Disarms everything.
    pub fn clear(&self) {
        self.armed.lock().clear();
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
            forbidden(RequestKind::Watch, pods, None).message,
            r#"pods is forbidden: User "system:serviceaccount:kubecache:kubecache" cannot watch resource "pods" in API group "" at the cluster scope"#
        );
        assert_eq!(
            forbidden(RequestKind::Continue, pods, Some("default")).message,
            r#"pods is forbidden: User "system:serviceaccount:kubecache:kubecache" cannot list resource "pods" in API group "" in the namespace "default""#
        );
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
