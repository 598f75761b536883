//! The simulator's HTTP API: the Kubernetes paths for the served resources,
//! discovery, and `/sim/faults` to arm faults from outside the process.

mod continue_token;
mod discovery;
mod list;
mod params;
mod watch;
mod write;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kubecache_wire::{Status, StatusDetails};

use super::encoding::{self, Wire};
use super::faults::{self, Fault, FaultSpec, Faults, RequestKind};
use super::resources::{self, RESOURCES, ResourceId};
use super::store::Store;

/// What the handlers share.
#[derive(Debug)]
pub struct Context {
    /// The objects.
    pub store: Arc<Store>,
    /// Armed faults.
    pub faults: Arc<Faults>,
    /// Serving knobs.
    pub serve: ServeConfig,
    /// Bumped to cut every open watch (a fault on demand).
    pub cuts: tokio::sync::watch::Sender<u64>,
}

/// How the simulator serves (the parts of the config the handlers read).
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Delay before each list page that is read "from etcd".
    pub page_latency: Duration,
    /// The throughput responses are paced to, if any.
    pub serving_cost: Option<super::ServingCost>,
    /// Interval of watch bookmarks.
    pub bookmark_interval: Duration,
    /// Whether streaming lists (the WatchList feature gate) are enabled.
    pub watch_list: bool,
    /// A bearer token every request must carry; `None` accepts any.
    pub token: Option<String>,
}

/// Largest request body accepted (etcd's default request limit is 1.5 MiB
/// per object; the API server refuses bodies over 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// The router of the simulated API server.
pub fn router(ctx: Arc<Context>) -> Router {
    Router::new()
        .route("/version", get(discovery::version))
        .route("/api", get(discovery::api_versions))
        .route("/apis", get(discovery::api_groups))
        .route("/sim/faults", post(arm_fault))
        .fallback(dispatch)
        // Authentication wraps everything, as in kube-apiserver.
        .layer(axum::middleware::from_fn_with_state(
            ctx.clone(),
            authenticate,
        ))
        .with_state(ctx)
}

async fn authenticate(
    State(ctx): State<Arc<Context>>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(expected) = &ctx.serve.token else {
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented {
        Some(token) if token == expected => next.run(request).await,
        Some(_) => status_response(
            &Status::failure(401, "Unauthorized", "Unauthorized"),
            Wire::Json,
        ),
        None => {
            let path = request.uri().path().to_string();
            let mut status = Status::failure(
                403,
                "Forbidden",
                format!("forbidden: User \"system:anonymous\" cannot get path \"{path}\""),
            );
            if let Some(target) = Target::parse(&path) {
                let res = &RESOURCES[target.resource];
                let scope = match &target.namespace {
                    Some(ns) => format!("in the namespace \"{ns}\""),
                    None => "at the cluster scope".to_string(),
                };
                status.message = format!(
                    "{} is forbidden: User \"system:anonymous\" cannot list resource \"{}\" in API group \"{}\" {scope}",
                    res.plural, res.plural, res.group
                );
            }
            status_response(&status, Wire::Json)
        }
    }
}

async fn arm_fault(State(ctx): State<Arc<Context>>, body: Bytes) -> Response {
    match serde_json::from_slice::<FaultSpec>(&body) {
        Ok(spec) => {
            ctx.faults.inject(spec);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => status_response(
            &Status::bad_request(format!("invalid fault: {e}")),
            Wire::Json,
        ),
    }
}

/// A request path resolved to a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The resource.
    pub resource: ResourceId,
    /// The namespace in the path, if any.
    pub namespace: Option<String>,
    /// The object name, for single-object paths.
    pub name: Option<String>,
}

impl Target {
    /// Parses `/api/v1/...` and `/apis/{group}/{version}/...` paths.
    pub fn parse(path: &str) -> Option<Target> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return None,
        };
        let find = |plural: &str| resources::find(group, version, plural);
        let (resource, namespace, name) = match rest {
            [plural] => (find(plural)?, None, None),
            [plural, name] => (find(plural)?, None, Some(*name)),
            ["namespaces", ns, plural] => (find(plural)?, Some(*ns), None),
            ["namespaces", ns, plural, name] => (find(plural)?, Some(*ns), Some(*name)),
            _ => return None,
        };
        if namespace.is_some() && !RESOURCES[resource].namespaced {
            return None;
        }
        if name.is_some() && namespace.is_none() && RESOURCES[resource].namespaced {
            return None;
        }
        Some(Target {
            resource,
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
        })
    }
}

async fn dispatch(State(ctx): State<Arc<Context>>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or_default().to_string();
    let method = request.method().clone();
    if method == Method::GET
        && let Some(response) = discovery::group_documents(&path)
    {
        return response;
    }
    let Some(target) = Target::parse(&path) else {
        // kube-apiserver's answer carries empty details (`"details":{}`).
        let mut status = Status::failure(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
        status.details = Some(StatusDetails::default());
        return status_response(&status, Wire::Json);
    };
    let resource = &RESOURCES[target.resource];
    let wire = match encoding::negotiate(header_str(request.headers(), header::ACCEPT), resource) {
        Ok(wire) => wire,
        Err((status, wire)) => return status_response(&status, wire),
    };
    let headers = request.headers().clone();
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY).await {
        Ok(body) => body,
        Err(_) => {
            return status_response(
                &Status::failure(
                    413,
                    "RequestEntityTooLarge",
                    "Request entity too large: limit is 3145728",
                ),
                wire,
            );
        }
    };
    match (method, &target.name) {
        (Method::GET, None) => list::collection(&ctx, &target, &query, wire).await,
        (Method::GET, Some(name)) => list::get(&ctx, &target, name, wire),
        (Method::POST, None) => write::create(&ctx, &target, &headers, &body, wire),
        (Method::PUT, Some(_)) => write::replace(&ctx, &target, &headers, &body, wire),
        (Method::PATCH, Some(_)) => write::patch(&ctx, &target, &headers, &body, wire),
        (Method::DELETE, Some(_)) => write::delete(&ctx, &target, wire),
        (method, _) => status_response(
            &Status::failure(
                405,
                "MethodNotAllowed",
                format!(
                    "the server does not allow this method on the requested resource: {method}"
                ),
            ),
            wire,
        ),
    }
}

/// Applies the fault armed for this request, if it ends the request early.
/// Stalls are waited out here; faults that shape the body are returned.
pub async fn fault_for(
    ctx: &Context,
    target: &Target,
    request: RequestKind,
    wire: Wire,
) -> Result<Option<Fault>, Response> {
    let Some(fault) = ctx.faults.take(request) else {
        return Ok(None);
    };
    if let Some(stall) = fault.stall() {
        tokio::time::sleep(stall).await;
        return Ok(None);
    }
    match fault {
        Fault::TooManyRequests { retry_after_secs } => {
            let mut response = status_response(&Status::too_many_requests(retry_after_secs), wire);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
            Err(response)
        }
        Fault::InternalError => Err(status_response(
            &Status::internal("Internal error occurred: injected fault"),
            wire,
        )),
        Fault::Forbidden => Err(status_response(
            &faults::forbidden(
                request,
                &RESOURCES[target.resource],
                target.namespace.as_deref(),
            ),
            wire,
        )),
        Fault::NotFound => Err(status_response(&faults::not_found(), wire)),
        other => Ok(Some(other)),
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A Status error response.
pub fn status_response(status: &Status, wire: Wire) -> Response {
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    body_response(
        code,
        wire,
        false,
        encoding::status_body(status, wire).into(),
    )
}

/// A response with a body in an encoding.
pub fn body_response(code: StatusCode, wire: Wire, watch: bool, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(wire.content_type(watch)),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::resources::ids;

    #[test]
    fn paths_resolve_to_resources_scopes_and_names() {
        let t = Target::parse("/api/v1/namespaces/ns1/pods/p1").unwrap();
        assert_eq!(
            (t.resource, t.namespace.as_deref(), t.name.as_deref()),
            (ids::PODS, Some("ns1"), Some("p1"))
        );
        let t = Target::parse("/api/v1/namespaces/ns1").unwrap();
        assert_eq!(
            (t.resource, t.name.as_deref()),
            (ids::NAMESPACES, Some("ns1"))
        );
        let t = Target::parse("/apis/example.com/v1/widgets").unwrap();
        assert_eq!((t.resource, t.namespace), (ids::WIDGETS, None));
        assert_eq!(Target::parse("/api/v1/pods/p1"), None);
        assert_eq!(Target::parse("/api/v1/namespaces/a/namespaces"), None);
        assert_eq!(Target::parse("/api/v1/services"), None);
    }
}
