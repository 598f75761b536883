//! The simulator's HTTP API: the Kubernetes paths for the served resources
//! and their subresources, discovery, the OpenAPI documents, the review APIs, and `/sim/faults` to
//! arm faults, `/sim/cut-watches` to cut every open watch from outside
//! the process, `/sim/counters` to read the [`Counters`] and `/sim/reviews`
//! the reviews asked. Every request but those under `/sim/` passes
//! [`auth::guard`] first; answers and errors are then pretty or YAML as
//! asked ([`restyle`]).

mod auth;
mod body;
mod discovery;
mod document;
mod freshness;
mod list;
mod log;
mod openapi;
mod params;
mod request_info;
mod restyle;
mod reviews;
mod subresource;
mod watch;
mod write;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use kubecache_wire::media::{Form, JSON, PROTOBUF, PROTOBUF_WATCH, YAML};
use kubecache_wire::{Status, StatusDetails};

pub use auth::Caller;
pub use request_info::RequestInfo;

use write::Part;

use super::auth::{Enforced, Policy};
use super::counters::Counters;
use super::encoding;
use super::faults::{self, Fault, FaultSpec, Faults, RequestKind};
use super::resources::{RESOURCES, ResourceId};
use super::store::Store;
use kubecache_wire::Encoding;
use kubecache_wire::protobuf::KubeVersion;

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
    /// The policy enforced on every request.
    pub policy: Arc<Enforced>,
    /// What was asked of each resource.
    pub counters: Counters,
    /// The consistent reads' capacity, with a serving cost.
    pub quorum_reads: super::cost::QuorumReads,
}

impl Context {
    /// The policy in force now; `None` allows everything.
    pub fn policy(&self) -> Option<Arc<Policy>> {
        self.policy.policy()
    }

    /// Cuts every open watch now (without a clean end of stream).
    pub fn cut_watches(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }
}

/// How the simulator serves (the parts of the config the handlers read).
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Delay before each list page that is read "from etcd".
    pub page_latency: Duration,
    /// Delay of a read without `resourceVersion` (etcd's quorum read).
    pub consistent_read_latency: Duration,
    /// The throughput responses are paced to, if any.
    pub serving_cost: Option<super::ServingCost>,
    /// Interval of watch bookmarks.
    pub bookmark_interval: Duration,
    /// The bookmark dispatch timer, if bookmarks go out on one: when it
    /// started, and its period.
    pub bookmark_dispatch: Option<(tokio::time::Instant, Duration)>,
    /// Whether streaming lists (the WatchList feature gate) are enabled.
    pub watch_list: bool,
    /// With ConsistentListFromCache, etcd's progress notification timer
    /// (its start and period; see [`crate::sim::PROGRESS_NOTIFY`]).
    pub consistent_list_from_cache: Option<(tokio::time::Instant, Duration)>,
    /// The Kubernetes version `/version` names.
    pub kube_version: KubeVersion,
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
        .route("/openapi/v2", get(openapi::v2))
        .route("/openapi/v3", get(openapi::v3_index))
        .route("/openapi/v3/{*path}", get(openapi::v3))
        .route(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            any(reviews::token_review),
        )
        .route(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            any(reviews::self_subject_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            any(reviews::subject_access_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            any(reviews::self_subject_access_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            any(reviews::self_subject_rules_review),
        )
        .route("/sim/faults", post(arm_fault).delete(clear_faults))
        .route("/sim/cut-watches", post(cut_watches))
        .route("/sim/counters", get(counters))
        .route("/sim/reviews", get(reviews))
        .fallback(dispatch)
        .layer(axum::middleware::from_fn_with_state(
            ctx.clone(),
            auth::guard,
        ))
        .layer(axum::middleware::from_fn(restyle::layer))
        .with_state(ctx)
}

async fn arm_fault(State(ctx): State<Arc<Context>>, body: Bytes) -> Response {
    match serde_json::from_slice::<FaultSpec>(&body) {
        Ok(spec) => {
            ctx.faults.inject(spec);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => status_response(
            &Status::bad_request(format!("invalid fault: {e}")),
            Encoding::Json,
        ),
    }
}

/// Disarms every fault not yet spent.
async fn clear_faults(State(ctx): State<Arc<Context>>) -> StatusCode {
    ctx.faults.clear();
    StatusCode::NO_CONTENT
}

async fn counters(State(ctx): State<Arc<Context>>) -> axum::Json<impl serde::Serialize> {
    axum::Json(ctx.counters.snapshot())
}

async fn reviews(State(ctx): State<Arc<Context>>) -> axum::Json<impl serde::Serialize> {
    axum::Json(ctx.counters.reviews())
}

async fn cut_watches(State(ctx): State<Arc<Context>>) -> StatusCode {
    ctx.cut_watches();
    StatusCode::NO_CONTENT
}

/// A request resolved to a served resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The resource.
    pub resource: ResourceId,
    /// The namespace in the path, if any.
    pub namespace: Option<String>,
    /// The object name, for single-object paths.
    pub name: Option<String>,
    /// The subresource (`status`, `log`, ...), if any.
    pub subresource: Option<String>,
    /// A deprecated watch path (`/api/v1/watch/...`): a watch of the
    /// collection, or of the object `name`.
    pub watch: bool,
}

impl Target {
    /// The served resource a request is about: `None` for non-resource
    /// paths, resources not served, paths in the wrong scope
    /// (`/api/v1/pods/p`, `/api/v1/namespaces/a/namespaces`), the `/proxy/`
    /// path prefix, paths deeper than a subresource (except a pod's proxy
    /// path) and watch paths of a subresource.
    pub fn of(info: &RequestInfo) -> Option<Target> {
        let watch = info.verb_in_path && info.verb == "watch";
        if !info.is_resource || (info.verb_in_path && !watch) {
            return None;
        }
        let resource = super::resources::find(&info.api_group, &info.api_version, &info.resource)?;
        let namespaced = RESOURCES[resource].namespaced;
        // The path's name: a list's field selector names an object for
        // authorization only.
        let name = info.parts.get(1).filter(|n| !n.is_empty()).cloned();
        let subresource = (!info.subresource.is_empty()).then(|| info.subresource.clone());
        if info.parts.len() > 3 && subresource.as_deref() != Some("proxy")
            || watch && subresource.is_some()
        {
            return None;
        }
        let namespace = match (namespaced, info.namespace.as_str()) {
            (true, "") if name.is_some() => return None,
            (true, "") => None,
            (true, ns) => Some(ns.to_string()),
            (false, "") => None,
            // The namespace of a cluster-scoped object is its own name
            // (`/api/v1/namespaces/a`), never a path prefix.
            (false, ns) if name.as_deref() == Some(ns) => None,
            (false, _) => return None,
        };
        Some(Target {
            resource,
            namespace,
            name,
            subresource,
            watch,
        })
    }
}

async fn dispatch(
    State(ctx): State<Arc<Context>>,
    Extension(info): Extension<RequestInfo>,
    Extension(caller): Extension<Caller>,
    request: Request,
) -> Response {
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or_default().to_string();
    let method = request.method().clone();
    if method == Method::GET
        && let Some(response) = discovery::group_documents(&path)
    {
        return response;
    }
    if !routed(&path) {
        return plain_text(StatusCode::NOT_FOUND, "404 page not found");
    }
    let Some(target) = Target::of(&info) else {
        return status_response(&faults::not_found(), Encoding::Json);
    };
    let resource = &RESOURCES[target.resource];
    // kube-apiserver routes no HEAD: its router answers before any handler
    // negotiates.
    if method == Method::HEAD {
        return method_not_allowed(Encoding::Json);
    }
    let accept = header_str(request.headers(), header::ACCEPT);
    if method == Method::GET
        && resource.builtin
        && let Some(status) = restful_not_acceptable(accept, &produces(&target))
    {
        return error_response(&status, accept);
    }
    let (wire, form, yaml) = match encoding::negotiate(accept, resource.builtin) {
        Ok(negotiated) => negotiated,
        // A log is text whatever the client accepts; only its errors are JSON.
        Err(_) if target.subresource.as_deref() == Some("log") => {
            (Encoding::Json, encoding::Form::Whole, false)
        }
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
    let call = Call {
        ctx: &ctx,
        target: &target,
        headers: &headers,
        query: &query,
        caller: &caller,
        wire,
    };
    let has_name = target.name.is_some();
    match (target.subresource.as_deref(), &method, has_name) {
        (None, &Method::GET, _) if target.watch => {
            list::collection(&ctx, &target, &query, wire, form, yaml).await
        }
        (None, &Method::GET, false) => {
            list::collection(&ctx, &target, &query, wire, form, yaml).await
        }
        (None, &Method::GET, true) => {
            restyle::read(list::get(&ctx, &target, &query, wire, form).await, yaml)
        }
        (None, &Method::POST, false) => call.create(&body),
        (None, &Method::PUT, true) => call.replace(&body, Part::Whole),
        (None, &Method::PATCH, true) => call.patch(&body, Part::Whole),
        (None, &Method::DELETE, true) => call.delete(),
        (None, &Method::DELETE, false) if resource.verbs.contains(&"deletecollection") => {
            call.delete_collection()
        }
        (Some(sub), method, true) if resource.has_subresource(sub) => {
            call.subresource(sub, method, &body).await
        }
        (Some(_), _, _) => status_response(&faults::not_found(), Encoding::Json),
        (None, _, _) => method_not_allowed(wire),
    }
}

/// Whether kube-apiserver hands `path` to a handler that answers a path
/// it does not serve with a 404 Status: the path is `/api` or `/apis`, or
/// goes on after either with a `/` and a segment (`/apis/{group}` of any
/// group: one no server in the chain serves reaches the generic server's
/// not-found handler, a Status too). Any other path (`//api/v1/pods`, the
/// recorded case) is left to the mux of plain paths, which answers Go's
/// `404 page not found`.
fn routed(path: &str) -> bool {
    ["/api", "/apis"].iter().any(|root| {
        path.strip_prefix(root).is_some_and(|rest| {
            rest.is_empty() || rest == "/" || (rest.starts_with('/') && !rest.starts_with("//"))
        })
    })
}

/// The media types the go-restful route of a built-in resource produces:
/// JSON, YAML and protobuf; a collection's (and a watch's) route also the
/// watch streams, a log's plain text.
fn produces(target: &Target) -> Vec<&'static str> {
    let mut produces = Vec::new();
    if target.subresource.as_deref() == Some("log") {
        produces.push("text/plain");
    }
    produces.extend([JSON, YAML, PROTOBUF]);
    if target.name.is_none() || target.watch {
        produces.extend(["application/json;stream=watch", PROTOBUF_WATCH]);
    }
    produces
}

/// The 406 of go-restful's route selection, before any handler: a GET
/// whose `Accept` names neither `*/*` nor any media type its route
/// `produces`, compared exactly (in case too) before a `;`.
fn restful_not_acceptable(accept: Option<&str>, produces: &[&str]) -> Option<Status> {
    let accept = accept.filter(|a| !a.is_empty())?;
    let acceptable = accept.split(',').any(|part| {
        let media = part.split(';').next().unwrap_or_default().trim_matches(' ');
        media == "*/*" || produces.contains(&media)
    });
    if acceptable {
        return None;
    }
    let message = format!(
        "406: Not Acceptable\n\nAvailable representations: {}",
        produces.join(", ")
    );
    let mut status = Status::failure(406, "NotAcceptable", message);
    status.details = Some(StatusDetails::default());
    Some(status)
}

/// A plain-text answer as Go's `http.Error` writes it.
pub fn plain_text(code: StatusCode, text: &str) -> Response {
    let mut response = Response::new(Body::from(format!("{text}\n")));
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// 405 for a method the path does not take.
pub fn method_not_allowed(wire: Encoding) -> Response {
    status_response(&Status::method_not_allowed(), wire)
}

/// Applies the fault armed for this request, if it answers instead of the
/// server (429, 500, 503, 403, 404; `forbidden` words the 403). Stalls and
/// hangs are waited out here; faults that shape the body are returned.
pub async fn fault_for(
    ctx: &Context,
    request: RequestKind,
    wire: Encoding,
    forbidden: impl FnOnce() -> Status,
) -> Result<Option<Fault>, Response> {
    let Some(fault) = ctx.faults.take(request) else {
        return Ok(None);
    };
    let status = match fault {
        Fault::Stall { secs } => {
            tokio::time::sleep(Duration::from_secs(secs)).await;
            return Ok(None);
        }
        Fault::Hang => {
            ctx.faults.hang().await;
            return Ok(None);
        }
        Fault::TooManyRequests { retry_after_secs } => {
            let mut response = status_response(&Status::too_many_requests(retry_after_secs), wire);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
            return Err(response);
        }
        Fault::InternalError => Status::internal("Internal error occurred: injected fault"),
        Fault::ServiceUnavailable => Status::failure(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        Fault::Forbidden => forbidden(),
        Fault::NotFound => faults::not_found(),
        other => return Ok(Some(other)),
    };
    Err(status_response(&status, wire))
}

/// One request on a served resource: what every handler of
/// objects and subresources needs.
pub struct Call<'a> {
    /// The shared state.
    pub ctx: &'a Arc<Context>,
    /// What the request is about.
    pub target: &'a Target,
    /// Its headers.
    pub headers: &'a HeaderMap,
    /// Its query string.
    pub query: &'a str,
    /// Who asks.
    pub caller: &'a Caller,
    /// The encoding of the answer.
    pub wire: Encoding,
}

impl Call<'_> {
    /// The served resource.
    pub fn resource(&self) -> &'static super::resources::Resource {
        &RESOURCES[self.target.resource]
    }

    /// The namespace, empty for cluster-scoped objects.
    pub fn namespace(&self) -> &str {
        self.target.namespace.as_deref().unwrap_or_default()
    }

    /// The object name, empty for collections.
    pub fn name(&self) -> &str {
        self.target.name.as_deref().unwrap_or_default()
    }

    /// The first value of a query parameter.
    pub fn param(&self, key: &str) -> Option<String> {
        form_urlencoded::parse(self.query.as_bytes())
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// An error as kube-apiserver's `ErrorNegotiated` writes it for `accept`:
/// in the encoding asked for (YAML is JSON that [`restyle`] rewrites), or
/// pretty JSON when none can carry it.
pub fn error_response(status: &Status, accept: Option<&str>) -> Response {
    match encoding::for_status(accept) {
        encoding::ErrorForm::Encoded(wire) => status_response(status, wire),
        encoding::ErrorForm::Yaml => status_response(status, Encoding::Json),
        encoding::ErrorForm::Indented => {
            let code =
                StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = Form::Pretty.write(&status.to_json());
            body_response(code, Encoding::Json, false, body.into())
        }
    }
}

/// A Status error response.
pub fn status_response(status: &Status, wire: Encoding) -> Response {
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    body_response(code, wire, false, wire.status(status, Form::Compact).into())
}

/// A response with a body in an encoding.
pub fn body_response(code: StatusCode, wire: Encoding, watch: bool, body: Body) -> Response {
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
    fn only_paths_under_the_api_roots_are_routed() {
        for path in [
            "/api",
            "/api/v2/x",
            "/api/v1/pods",
            "/apis/example.com/v1/widgets",
            "/apis/unknown.io/v1/x",
        ] {
            assert!(routed(path), "{path}");
        }
        for path in ["//api/v1/pods", "/api//v1", "/metrics", "/apiary"] {
            assert!(!routed(path), "{path}");
        }
    }

    #[test]
    fn go_restful_refuses_an_accept_naming_none_of_the_routes_media_types() {
        let target = |path: &str| Target::of(&RequestInfo::parse(&Method::GET, path, "").unwrap());
        let pod = target("/api/v1/namespaces/ns/pods/p").unwrap();
        let refused = |accept: &str, target: &Target| {
            restful_not_acceptable(Some(accept), &produces(target)).map(|s| s.message)
        };
        for accept in [
            "*/*",
            "text/html, application/json;as=Table",
            " application/yaml ",
        ] {
            assert_eq!(refused(accept, &pod), None, "{accept}");
        }
        for accept in ["Application/JSON", "application/*", "text/plain"] {
            assert_eq!(
                refused(accept, &pod).as_deref(),
                Some(
                    "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf"
                ),
                "{accept}"
            );
        }
        let log = target("/api/v1/namespaces/ns/pods/p/log").unwrap();
        assert_eq!(refused("text/plain", &log), None);
        let pods = target("/api/v1/namespaces/ns/pods").unwrap();
        assert!(refused("text/html", &pods).unwrap().ends_with(
            "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
        ));
    }

    #[test]
    fn paths_resolve_to_resources_scopes_names_and_subresources() {
        let target = |path: &str| Target::of(&RequestInfo::parse(&Method::GET, path, "").unwrap());
        let t = target("/api/v1/namespaces/ns1/pods/p1").unwrap();
        assert_eq!(
            (t.resource, t.namespace.as_deref(), t.name.as_deref()),
            (ids::PODS, Some("ns1"), Some("p1"))
        );
        let t = target("/api/v1/namespaces/ns1").unwrap();
        assert_eq!(
            (t.resource, t.namespace.as_deref(), t.name.as_deref()),
            (ids::NAMESPACES, None, Some("ns1"))
        );
        let t = target("/api/v1/namespaces/ns1/status").unwrap();
        assert_eq!(
            (t.name.as_deref(), t.subresource.as_deref()),
            (Some("ns1"), Some("status"))
        );
        let t = target("/api/v1/namespaces/ns1/pods/p1/log").unwrap();
        assert_eq!(t.subresource.as_deref(), Some("log"));
        let t = target("/apis/example.com/v1/widgets").unwrap();
        assert_eq!((t.resource, t.namespace), (ids::WIDGETS, None));
        assert_eq!(target("/api/v1/pods/p1"), None);
        assert_eq!(target("/api/v1/namespaces/a/namespaces"), None);
        assert_eq!(target("/api/v1/services"), None);
        let by_name = RequestInfo::parse(
            &Method::GET,
            "/api/v1/pods",
            "fieldSelector=metadata.name%3Dp",
        )
        .unwrap();
        assert_eq!(Target::of(&by_name).map(|t| t.name), Some(None));
        let t = target("/api/v1/watch/namespaces/ns1/pods/p1").unwrap();
        assert_eq!(
            (t.watch, t.namespace.as_deref(), t.name.as_deref()),
            (true, Some("ns1"), Some("p1"))
        );
        assert!(target("/apis/example.com/v1/watch/widgets").unwrap().watch);
        assert_eq!(target("/api/v1/watch/namespaces/ns1/pods/p1/status"), None);
        assert_eq!(target("/api/v1/proxy/namespaces/ns1/pods/p1"), None);
        assert_eq!(target("/api/v1/namespaces/a/pods/p/log/more"), None);
    }
}
