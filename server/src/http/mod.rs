//! The HTTP API: the Kubernetes API (reads of cached resources answered
//! from the caches, discovery and OpenAPI documents from kubecache's own
//! copies, see [`discovery`], everything else passed through to the API
//! server, see [`route`]), the query API under `/v1`, `/metrics` and the
//! health endpoints.
//!
//! Every error is a Kubernetes `Status` ([`ApiError`]), whatever the route.
//! Large answers from the caches are gzipped for clients that accept it,
//! as kube-apiserver gzips them (see [`gzip`]).
//!
//! What kubecache answers from its caches is authorized first (see
//! [`crate::auth`]): resource reads as `get`/`list`/`watch` of the
//! resource, query API lookups as a `list` of what they return, `/metrics`,
//! `/v1/status` and the discovery documents as non-resource paths (as
//! kube-rbac-proxy and kube-apiserver do). The
//! health endpoints are open.

mod bodies;
mod discovery;
mod error;
mod get;
mod gzip;
mod health;
mod list;
mod negotiate;
mod offload;
mod path;
mod query;
mod restyle;
mod route;
pub(crate) mod table;
mod watch;

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Extension, Router};
use kubecache_wire::Status;

use crate::error::ApiError;
use get::Answer;
use negotiate::Read;
use route::{CacheRead, Collection, Route, What};

use crate::auth::{Attributes, Auth, Caller, Connected, Credential, User};
use crate::cacher::{Cache, Caches, Filter, Flow, Owner};
use crate::metrics::Endpoint;
use crate::passthrough::PassThrough;
use crate::transport::Answers;

/// What the handlers share, behind one `Arc` (axum clones the state for
/// every request).
struct Shared {
    caches: Arc<Caches>,
    auth: Arc<Auth>,
    upstream: PassThrough,
    documents: discovery::Documents,
}

impl Shared {
    /// Authorizes `caller` to do what `attributes` say: the user allowed
    /// (the impersonated one, if any), if anyone was asked.
    fn authorize<'a>(
        &'a self,
        caller: &'a Caller,
        attributes: Attributes<'a>,
    ) -> crate::auth::Authorizing<'a> {
        self.auth.authorize(caller, attributes)
    }
}

/// kubecache's HTTP API over `caches`, authorizing by `auth`, passing
/// through to `upstream`. The Kubernetes API's requests (`/api`, `/apis`
/// and under them: nearly all of them) go to their handler directly; an
/// axum router serves the rest, `/metrics`, `/v1/…`, the health endpoints
/// and the Kubernetes API's other paths (`/version`, `/openapi/…`): on
/// every request it would look the path up, box a service's clone and a
/// future per layer and handler, and move the handler's future.
pub fn router(caches: Arc<Caches>, auth: Arc<Auth>, upstream: PassThrough) -> Answers {
    let shared = Arc::new(Shared {
        caches,
        auth,
        upstream,
        documents: discovery::Documents::default(),
    });
    let health = health::routes(shared.caches.clone());
    let rest: Answers = Router::new()
        .route("/metrics", get(metrics))
        .route("/v1/{*rest}", any(query_api))
        .method_not_allowed_fallback(error::method_not_allowed_fallback)
        // Everything else is the Kubernetes API.
        .fallback(
            |State(shared): State<Arc<Shared>>,
             Extension(caller): Extension<Arc<Caller>>,
             request: Request| async move {
                let (parts, body) = request.into_parts();
                let (endpoint, response) = kubernetes(&shared, &caller, parts, body).await;
                (Extension(endpoint), response)
            },
        )
        .with_state(shared.clone())
        .merge(health)
        .into();
    Answers::new(move |request, connected| {
        Box::pin(answer(shared.clone(), rest.clone(), request, connected))
    })
}

/// Whether `path` is under the Kubernetes API's groups, none of which
/// the router's own routes serve.
fn is_kubernetes_api(path: &str) -> bool {
    ["/api", "/apis"].iter().any(|root| {
        path.strip_prefix(root)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// Counts and times every request and its answer, errors included (see
/// [`crate::metrics::Tracked`]); reads each request's [`Caller`] once (its
/// credential, impersonation, address and `Authorization` warning) for the
/// handlers (those of `rest` take it from the request's extensions); adds
/// kube-apiserver's `Warning` for an `Authorization` header it ignores (see
/// [`Caller::warning`]) to every answer, passed through ones too: such a
/// header is never forwarded (the caller goes upstream as anonymous), so
/// the API server cannot warn of it.
async fn answer(
    shared: Arc<Shared>,
    rest: Answers,
    request: Request,
    connected: Option<Connected>,
) -> Response {
    let tracked = crate::metrics::Tracked::start(&request);
    let (mut parts, body) = request.into_parts();
    let caller = Caller::of(&parts, connected.as_ref());
    let warning = caller.warning.clone();
    let (endpoint, mut response) = if is_kubernetes_api(parts.uri.path()) {
        kubernetes(&shared, &caller, parts, body).await
    } else {
        parts.extensions.insert(Arc::new(caller));
        let response = rest
            .answer(Request::from_parts(parts, body), connected)
            .await;
        (Endpoint::of(&response), response)
    };
    if let Some(warning) = warning {
        response.headers_mut().append(header::WARNING, warning);
    }
    tracked.finish(endpoint, response)
}

/// Where the API server's answers to the callers' own requests are
/// counted.
const PASSED_THROUGH: Endpoint = Endpoint("passthrough");

/// The Prometheus text format.
async fn metrics(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Arc<Caller>>,
) -> Response {
    let answer = match shared
        .authorize(&caller, Attributes::path("/metrics"))
        .await
    {
        Ok(_) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            crate::metrics::render(&shared.caches, &shared.auth),
        )
            .into_response(),
        Err(error) => error.into_response(),
    };
    (Extension(Endpoint("metrics")), answer).into_response()
}

/// The health endpoints alone (for the health listener), over `caches`:
/// anything else is a 404.
pub fn health_router(caches: Arc<Caches>) -> Router {
    health::routes(caches)
        .fallback(|| async { error::no_such_path() })
        .layer(axum::middleware::from_fn(crate::metrics::track))
}

/// `/v1/…`.
async fn query_api(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Arc<Caller>>,
    request: Parts,
) -> impl IntoResponse {
    let answer = async {
        let method = &request.method;
        if method != Method::GET && method != Method::HEAD {
            return Err(error::read_only(method.as_str()));
        }
        let path = request.uri.path();
        shared
            .authorize(&caller, query::attributes(&shared.caches, path))
            .await?;
        let client = caller.client();
        query::serve(
            &shared.caches,
            &shared.auth,
            path,
            request.uri.query().unwrap_or(""),
            client,
        )
        .await
    };
    (Extension(Endpoint("query")), answer.await)
}

/// The Kubernetes API: a read a cache answers, or a pass-through; and the
/// endpoint it is counted under. What a GET from a cache does not await
/// is boxed: the answer's future is moved into a box on every request, as
/// large as its largest branch.
async fn kubernetes(
    shared: &Shared,
    caller: &Caller,
    parts: Parts,
    body: Body,
) -> (Endpoint, Response) {
    let read = match route::decide(&shared.caches, &parts) {
        Ok(Route::Cache(read)) => read,
        // No discovery document names a cached resource: asked only of
        // what the caches do not answer.
        Ok(Route::PassThrough { .. })
            if discovery::is_document(&parts.method, parts.uri.path()) =>
        {
            let answer = Box::pin(document(shared, &parts, caller)).await;
            return (Endpoint("discovery"), answer.into_response());
        }
        Ok(Route::PassThrough { path, written }) => {
            let answer = Box::pin(pass_through(shared, parts, body, caller, &path, written)).await;
            return (PASSED_THROUGH, answer.into_response());
        }
        Err(status) => return (Endpoint::OTHER, ApiError::from(status).into_response()),
    };
    let endpoint = Endpoint(match read.what.read() {
        Read::Get => "get",
        Read::List => "list",
        Read::Watch => "watch",
    });
    let (errors, form, gzip, cache) = (read.errors, read.form, read.gzip, read.cache.clone());
    let (upstream, answer) = match from_cache(shared, *read, &parts, caller).await {
        Ok(Answer::Served(response)) => (false, Ok(response)),
        Err(error) => (false, Err(error)),
        Ok(Answer::Upstream(rendering)) => {
            let path = route::upstream_path(&parts.uri);
            let answer = match Box::pin(shared.auth.forwarded(caller)).await {
                Ok(credential) => {
                    let upstream = &shared.upstream;
                    Box::pin(get::from_upstream(
                        upstream,
                        &cache,
                        parts,
                        &credential,
                        &path,
                        rendering,
                    ))
                    .await
                }
                Err(error) => Err(error),
            };
            (true, answer)
        }
    };
    let answer = match answer {
        Ok(answer) => Ok(restyle::restyle(answer, form).await),
        Err(error) => Err(error),
    };
    let response = match answer {
        Err(error) => error.respond(errors),
        Ok(answer) if gzip => Box::pin(gzip::large(answer)).await,
        Ok(answer) => answer,
    };
    (if upstream { PASSED_THROUGH } else { endpoint }, response)
}

/// A discovery or OpenAPI document (see [`discovery`]), to a caller who
/// may read it.
async fn document(shared: &Shared, parts: &Parts, caller: &Caller) -> Result<Response, ApiError> {
    shared
        .authorize(caller, Attributes::path(parts.uri.path()))
        .await?;
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let response = shared
        .documents
        .answer(&shared.upstream, path, &parts.headers)
        .await?;
    Ok(if gzip::accepted(&parts.headers) {
        gzip::large(response).await
    } else {
        response
    })
}

/// A read of a cache: authorized on the very parameters it is served
/// with, then served once the client's own writes are in. Authorization
/// comes first, as in kube-apiserver, whose filters authorize before its
/// handlers negotiate or parse: a caller who may not read gets 403 for
/// any `Accept`.
async fn from_cache(
    shared: &Shared,
    read: CacheRead<'_>,
    parts: &Parts,
    caller: &Caller,
) -> Result<Answer, ApiError> {
    let CacheRead {
        cache,
        namespace,
        what,
        rendering,
        ..
    } = read;
    let attributes = match &what {
        What::Get { name, .. } => Attributes::read(
            &cache.resource,
            namespace.as_deref(),
            Some(name),
            false,
            None,
        ),
        // As kube-apiserver's request info: a watch even when the other
        // parameters do not parse; the field selector's name only when they
        // do and the verb came from the query.
        What::Collection {
            watch,
            named_by_fields,
            params,
        } => Attributes::read(
            &cache.resource,
            namespace.as_deref(),
            None,
            *watch,
            params
                .as_ref()
                .ok()
                .filter(|_| *named_by_fields)
                .map(|collection| &collection.params.fields),
        ),
    };
    let user = shared.authorize(caller, attributes).await?;
    let credential = &caller.credential;
    // kube-apiserver routes no HEAD: its router answers 405 once the
    // request is authorized.
    if parts.method == Method::HEAD {
        return Err(Status::method_not_allowed().into());
    }
    let rendering = rendering?;
    let peer = caller.peer;
    let flow = Flow::new(owner(user.as_deref(), credential, peer), peer);
    let caches = &shared.caches;
    match what {
        What::Get {
            name,
            resource_version,
        } => {
            let resource_version = resource_version?;
            let own_write = ready_for(caches, &cache, credential).await?;
            let namespace = namespace.as_deref();
            get::serve(
                caches,
                &cache,
                namespace,
                &name,
                resource_version,
                rendering,
                own_write,
            )
            .await
        }
        What::Collection { params, .. } => {
            let Collection {
                mut params,
                predicates,
            } = params?;
            let own_write = ready_for(caches, &cache, credential).await?;
            let fields = cache.scope.residual(std::mem::take(&mut params.fields));
            let filter = Filter::new(
                namespace.map(Cow::into_owned),
                std::mem::take(&mut params.labels),
                fields,
                cache.indexes.clone(),
            )
            .with_shards(params.shards.take());
            let answer = if params.watch {
                Box::pin(watch::serve(
                    caches, &cache, filter, params, predicates, rendering, flow,
                ))
                .await
            } else {
                Box::pin(list::serve(
                    caches, &cache, &filter, &params, rendering, flow, own_write,
                ))
                .await
            };
            answer.map(Answer::Served)
        }
    }
}

/// Waits until `cache` may serve `credential`'s read: synced (else 503),
/// with the client's own last write in; `true` if this is its first read
/// since that write, which then needs no other wait.
async fn ready_for(
    caches: &Caches,
    cache: &Cache,
    credential: &Credential,
) -> Result<bool, ApiError> {
    if let kubecache_reflector::Readiness::NotReady { reason } = cache.reader.readiness() {
        return Err(error::not_ready(&cache.name(), &reason));
    }
    Ok(cache
        .read_your_writes(credential.client(), caches.settings.read_wait)
        .await?)
}

/// Whose watches a request's count with (see [`crate::cacher`]'s quota):
/// its user when one is known, else its credential, else its address;
/// `None` for an anonymous request from no address (not over a socket).
fn owner(user: Option<&User>, credential: &Credential, peer: Option<IpAddr>) -> Option<Owner> {
    match user {
        Some(user) if user.digest() != User::anonymous().digest() => {
            Some(Owner::Client(user.client()))
        }
        _ => credential
            .client()
            .map(Owner::Client)
            .or(peer.map(Owner::Peer)),
    }
}

/// Sends a request of `caller` to the API server (see
/// [`Auth::forwarded`]); after a successful write of a cached resource,
/// records the resourceVersion written for the client before answering
/// (see [`crate::cacher`]'s read-your-writes).
async fn pass_through(
    shared: &Shared,
    mut parts: Parts,
    body: Body,
    caller: &Caller,
    path: &str,
    written: Option<Arc<Cache>>,
) -> Result<Response, ApiError> {
    let credential = shared.auth.forwarded(caller).await?;
    let recorded = written.zip(caller.client());
    if recorded.is_some() {
        // The answer is read for its resourceVersion: asked for as is, not
        // gzipped (the same content; clients take either).
        parts.headers.remove(header::ACCEPT_ENCODING);
    }
    let response = shared
        .upstream
        .forward(parts, body, &credential, path)
        .await?;
    let Some((cache, client)) = recorded else {
        return Ok(response);
    };
    if !response.status().is_success() {
        return Ok(response);
    }
    let (response, resource_version) = crate::passthrough::written(response).await;
    if let Some(rv) = resource_version {
        cache.wrote(client, rv);
    }
    Ok(response)
}
