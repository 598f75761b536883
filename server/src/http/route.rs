//! Where a Kubernetes API request is answered, decided once per request:
//! by a cache, as one [`CacheRead`] that says everything about it, or by
//! the API server (see [`crate::passthrough`]).
//!
//! A cache answers a `GET` of its resource's collection (list, watch,
//! table) or of one object (a `HEAD` of them: 405 once authorized, as
//! kube-apiserver, which routes no `HEAD`), within what it holds (see
//! [`crate::cacher::Scope`]) and with field selectors it can evaluate
//! (`metadata.name`, `metadata.namespace`, indexed fields). Everything else
//! passes through: writes of every kind, subresources, uncached resources,
//! discovery (`/api`, `/apis`, `/version`, `/openapi` ...), and reads a cache
//! cannot answer as the API server would.
//!
//! The decision parses what a read needs once: its path, its query
//! parameters and its `Accept` header. Errors are kept in the value and
//! answered where kube-apiserver answers them: after authorization (its
//! filters authorize before its handler negotiates and parses; its request
//! info reads parameters leniently).

use std::borrow::Cow;
use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::{Method, Uri, header};
use kubecache_wire::list_options::{self, CollectionParams};
use kubecache_wire::media::Form;
use kubecache_wire::{Encoding, FieldSelector, Status};

use super::negotiate::{self, Read, Rendering};
use super::path::{self, ResourcePath};
use crate::cacher::{Cache, Caches, Filter, Predicates};

/// Where a request goes; a cache read borrows what it names from the
/// request.
pub enum Route<'r> {
    /// To a cache.
    Cache(Box<CacheRead<'r>>),
    /// To the API server.
    PassThrough {
        /// The path and query to send (without a `/predicates/` prefix).
        path: String,
        /// The cached resource a write changes, for read-your-writes.
        written: Option<Arc<Cache>>,
    },
}

/// A read a cache answers: of which cache, what, with which parameters,
/// answered in what.
pub struct CacheRead<'r> {
    /// The cache read.
    pub cache: Arc<Cache>,
    /// The namespace of a namespaced path.
    pub namespace: Option<Cow<'r, str>>,
    /// One object, or the collection.
    pub what: What<'r>,
    /// How the answer is encoded; 406 when `Accept` names nothing served.
    pub rendering: Result<Rendering, Box<Status>>,
    /// The form of a JSON answer: YAML as negotiated, pretty as asked (see
    /// [`kubecache_wire::pretty::asked`]); never for a watch.
    pub form: Form,
    /// How an error `Status` is encoded (see [`negotiate::error_encoding`]).
    pub errors: Option<(Encoding, Form)>,
    /// Whether a large answer is gzipped (never a watch).
    pub gzip: bool,
}

/// What a [`CacheRead`] asks for.
pub enum What<'r> {
    /// One object, at `resource_version` (400 when it does not parse).
    Get {
        /// The object's name.
        name: Cow<'r, str>,
        /// The query's `resourceVersion`.
        resource_version: Result<Option<u64>, Box<Status>>,
    },
    /// The collection: a list, or a watch with `watch`.
    Collection {
        /// A watch (the query's `watch`, or a deprecated watch path).
        watch: bool,
        /// Whether a field selector's `metadata.name` names the object the
        /// read is authorized on: kube-apiserver's request info takes it
        /// when the verb came from the query, not from a deprecated watch
        /// path (whose own name, if any, is in the fields, see
        /// [`collection`]).
        named_by_fields: bool,
        /// Its parameters (400 or 422 when they do not parse, are not
        /// allowed together or select by too many requirements).
        params: Result<Collection, Box<Status>>,
    },
}

/// The parsed parameters of a list or watch.
pub struct Collection {
    /// The query's list options.
    pub params: CollectionParams,
    /// Change predicates: the `/predicates/` prefix's and the query's.
    pub predicates: Predicates,
}

impl What<'_> {
    /// Get, list or watch, as negotiation and metrics tell them apart.
    pub fn read(&self) -> Read {
        match self {
            What::Get { .. } => Read::Get,
            What::Collection { watch: true, .. } => Read::Watch,
            What::Collection { watch: false, .. } => Read::List,
        }
    }
}

/// The route of `request`.
///
/// # Errors
///
/// 400 for an unknown predicate in the `/predicates/` prefix.
pub fn decide<'r>(caches: &Caches, request: &'r Parts) -> Result<Route<'r>, Status> {
    let (method, uri) = (&request.method, &request.uri);
    let (predicates, path) = path::strip_predicates(uri.path())?;
    let read = method == Method::GET || method == Method::HEAD;
    let written = match path::parse(caches, path) {
        Some(target) if read && target.subresource.is_none() => {
            match cache_read(caches, target, predicates, request) {
                Some(read) => return Ok(Route::Cache(Box::new(read))),
                None => None,
            }
        }
        Some(target)
            if crate::passthrough::writes(method)
                && (target.namespace.is_none()
                    || target
                        .cache
                        .scope
                        .holds_namespace(target.namespace.as_deref())) =>
        {
            Some(target.cache)
        }
        _ => None,
    };
    Ok(Route::PassThrough {
        path: upstream_path(uri),
        written,
    })
}

/// The path and query of `uri` on the API server: without a `/predicates/`
/// prefix.
pub fn upstream_path(uri: &Uri) -> String {
    let path = path::strip_predicates(uri.path()).map_or(uri.path(), |(_, path)| path);
    match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_string(),
    }
}

/// The read of `target` a cache answers as the API server would; `None`
/// when it does not hold what is asked (the API server answers).
fn cache_read<'r>(
    caches: &Caches,
    target: ResourcePath<'r>,
    predicates: Predicates,
    request: &'r Parts,
) -> Option<CacheRead<'r>> {
    let query = request.uri.query().unwrap_or("");
    // Read for every cached read: in one pass.
    let [resource_version, pretty] = list_options::firsts(query, ["resourceVersion", "pretty"]);
    let cache = target.cache;
    let namespace = target.namespace;
    let what = match target.name {
        Some(name) if !target.watch => {
            if !cache.scope.holds_namespace(namespace.as_deref()) {
                return None;
            }
            What::Get {
                name,
                resource_version: list_options::resource_version_of(resource_version.as_deref())
                    .map_err(Box::new),
            }
        }
        name => {
            // Parameters that do not parse get the cache's 400, worded as
            // the API server's. A selector the cache cannot answer goes to
            // the API server before the `resourceVersion` is read, as
            // kube-apiserver converts field labels before its storage
            // reads it.
            let decoded = list_options::Decoded::new(query, target.watch);
            if let Ok(decoded) = &decoded
                && !answerable(&cache, namespace.as_deref(), decoded.params())
            {
                return None;
            }
            let params = decoded.and_then(list_options::Decoded::read_resource_version);
            let watch = match &params {
                Ok(params) => params.watch,
                Err(_) => target.watch || list_options::is_watch(query),
            };
            let named_by_fields = !target.watch || name.is_some();
            let max = caches.settings.max_selector_requirements;
            let params = params
                .and_then(|params| collection(params, name.as_deref(), predicates, query, max))
                .map_err(Box::new);
            What::Collection {
                watch,
                named_by_fields,
                params,
            }
        }
    };
    let header = |name| request.headers.get(name).and_then(|v| v.to_str().ok());
    let accept = negotiate::Accept::of(header(header::ACCEPT));
    let pretty = kubecache_wire::pretty::asked_by(pretty.as_deref(), header(header::USER_AGENT));
    let read = what.read();
    let served = negotiate::Served {
        protobuf: cache.kind.protobuf,
        kind: &cache.resource.kind,
        version: &cache.resource.version,
    };
    let negotiated = negotiate::negotiate(accept.as_ref(), query, read, served);
    let form = match &negotiated {
        Ok((rendering, yaml)) if rendering.encoding() == Encoding::Json && read != Read::Watch => {
            Form::of(*yaml, pretty)
        }
        _ => Form::Compact,
    };
    Some(CacheRead {
        rendering: negotiated.map(|(rendering, _)| rendering).map_err(Box::new),
        form,
        errors: negotiate::error_encoding(accept.as_ref())
            .map(|(encoding, yaml)| (encoding, Form::of(yaml, pretty))),
        gzip: read != Read::Watch && super::gzip::accepted(&request.headers),
        cache,
        namespace,
        what,
    })
}

/// Whether `cache` holds what a list or watch of `namespace` with `params`
/// selects, and can evaluate its field selector.
fn answerable(cache: &Cache, namespace: Option<&str>, params: &CollectionParams) -> bool {
    cache
        .scope
        .admits(namespace, &params.labels, &params.fields)
        && cache
            .scope
            .residual(params.fields.clone())
            .check_supported(&Filter::supported_fields(&cache.indexes))
            .is_ok()
}

/// The parameters of a collection read: `params` narrowed to the object
/// `name` of a deprecated watch path (as kube-apiserver narrows it: by
/// `metadata.name`), at most `max_requirements` selector requirements, and
/// the query's predicates with those of the prefix.
///
/// # Errors
///
/// 400 for a field selector of another name than the path's, too many
/// requirements, or an unknown predicate.
fn collection(
    mut params: CollectionParams,
    name: Option<&str>,
    predicates: Predicates,
    query: &str,
    max_requirements: usize,
) -> Result<Collection, Status> {
    if let Some(name) = name {
        if params.fields.is_empty() {
            params.fields = FieldSelector::named(name);
        } else if !params
            .fields
            .equalities()
            .any(|(field, value)| field == "metadata.name" && value == name)
        {
            return Err(Status::bad_request(
                "fieldSelector metadata.name doesn't match requested name",
            ));
        }
    }
    let requirements = params.labels.requirements().len() + params.fields.requirements().len();
    if requirements > max_requirements {
        return Err(Status::bad_request(format!(
            "the label and field selectors have {requirements} requirements together; \
             kubecache allows at most {max_requirements} (--max-selector-requirements)"
        )));
    }
    // Every `predicates` parameter counts, not only the first.
    let predicates = form_urlencoded::parse(query.as_bytes())
        .filter(|(key, _)| key == "predicates")
        .try_fold(predicates, |all, (_, value)| {
            Ok::<_, Status>(all.union(Predicates::parse(&value)?))
        })?;
    Ok(Collection { params, predicates })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cacher::{Cache, ServeSettings};
    use kubecache_reflector::upstream::{ApiResource, ResourceSpec, Upstream};

    /// Pods, whole; config maps of `team` labelled `app=web`.
    pub(in crate::http) fn caches() -> Caches {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let configmaps = ApiResource {
            plural: "configmaps".into(),
            kind: "ConfigMap".into(),
            ..ApiResource::pods()
        };
        let specs = [
            ResourceSpec::all(ApiResource::pods()),
            ResourceSpec {
                namespace: Some("team".into()),
                label_selector: Some("app=web".into()),
                ..ResourceSpec::all(configmaps)
            },
        ];
        let settings = ServeSettings::default();
        let caches = specs
            .into_iter()
            .map(|spec| {
                let (_writer, reader) = kubecache_reflector::store(Default::default());
                let (_, status) = tokio::sync::watch::channel(Default::default());
                Cache::new(
                    Upstream::new(client.clone(), spec),
                    reader,
                    status,
                    Default::default(),
                    &settings,
                )
            })
            .collect();
        Caches::new(caches, settings)
    }

    fn parts(method: Method, uri: &str) -> Parts {
        let request = axum::http::Request::builder().method(method).uri(uri);
        request.body(()).unwrap().into_parts().0
    }

    /// `None` for the cache, else the path passed through and whether a
    /// write is recorded.
    fn route(caches: &Caches, method: Method, uri: &str) -> Option<(String, bool)> {
        match decide(caches, &parts(method, uri)).unwrap() {
            Route::Cache(_) => None,
            Route::PassThrough { path, written } => Some((path, written.is_some())),
        }
    }

    #[tokio::test]
    async fn reads_of_what_a_cache_holds_are_its_own_and_the_rest_passes_through() {
        let caches = caches();
        let cached = |uri: &str| route(&caches, Method::GET, uri).is_none();
        for uri in [
            "/api/v1/pods",
            "/api/v1/namespaces/a/pods/p?resourceVersion=0",
            "/predicates/generation/api/v1/pods?watch=1",
            "/api/v1/pods?fieldSelector=metadata.namespace%3Da",
            "/api/v1/namespaces/team/configmaps?labelSelector=app%3Dweb,x",
            "/api/v1/namespaces/team/configmaps/c",
            // kubecache's 400, worded as the API server's.
            "/api/v1/pods?labelSelector=a%20in%20(",
        ] {
            assert!(cached(uri), "{uri}");
        }
        for uri in [
            "/api",
            "/apis/apps/v1",
            "/version",
            "/openapi/v3",
            "/api/v1/services",
            "/api/v1/namespaces/a/pods/p/log?follow=true",
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dn",
            "/api/v1/configmaps?labelSelector=app%3Dweb",
            "/api/v1/namespaces/other/configmaps?labelSelector=app%3Dweb",
            "/api/v1/namespaces/team/configmaps",
            "/api/v1/namespaces/other/configmaps/c",
        ] {
            assert!(!cached(uri), "{uri}");
        }
        assert_eq!(
            route(&caches, Method::GET, "/predicates/labels/api?x=1"),
            Some(("/api?x=1".into(), false))
        );
    }

    /// The cache read of `uri` with `accept` (its request leaked: it
    /// borrows from it).
    fn cache_read(caches: &Caches, uri: &str, accept: Option<&str>) -> CacheRead<'static> {
        let parts = Box::leak(Box::new(parts(Method::GET, uri)));
        if let Some(accept) = accept {
            parts
                .headers
                .insert(header::ACCEPT, accept.parse().unwrap());
        }
        match decide(caches, parts).unwrap() {
            Route::Cache(read) => *read,
            Route::PassThrough { path, .. } => panic!("{uri} passed through as {path}"),
        }
    }

    #[tokio::test]
    async fn a_read_is_decided_once_with_its_parameters_and_their_errors() {
        let caches = caches();
        let read = cache_read(
            &caches,
            "/api/v1/watch/namespaces/a/pods/p?labelSelector=x%3Dy&predicates=labels",
            Some("application/vnd.kubernetes.protobuf;stream=watch"),
        );
        assert_eq!(read.namespace.as_deref(), Some("a"));
        assert_eq!(read.what.read(), Read::Watch);
        assert!(!read.gzip, "a watch is never gzipped");
        assert_eq!(read.rendering.unwrap().encoding(), Encoding::Protobuf);
        let What::Collection {
            params: Ok(collection),
            ..
        } = read.what
        else {
            panic!("a collection");
        };
        assert_eq!(collection.params.labels.to_string(), "x=y");
        assert_eq!(collection.params.fields.to_string(), "metadata.name=p");
        assert!(collection.predicates.labels);

        let read = cache_read(
            &caches,
            "/api/v1/namespaces/a/pods/p?resourceVersion=7",
            None,
        );
        assert!(matches!(
            read.what,
            What::Get { ref name, resource_version: Ok(Some(7)) } if name == "p"
        ));

        // Kept for later: answered after authorization.
        let read = cache_read(&caches, "/api/v1/pods?limit=ten", Some("text/html"));
        assert_eq!(read.what.read(), Read::List);
        assert_eq!(read.rendering.unwrap_err().code, 406);
        assert_eq!(read.errors, None, "no encoding of a Status accepted");
        let What::Collection { params, .. } = read.what else {
            panic!("a collection");
        };
        assert_eq!(params.err().map(|status| status.code), Some(400));
        let read = cache_read(&caches, "/api/v1/pods?watch=1&limit=ten", None);
        assert_eq!(read.what.read(), Read::Watch, "a watch whatever fails");
    }

    #[tokio::test]
    async fn writes_pass_through_and_those_of_a_cached_resource_are_recorded() {
        let caches = caches();
        let recorded = |method: Method, uri: &str| route(&caches, method, uri).unwrap().1;
        assert!(recorded(Method::POST, "/api/v1/namespaces/a/pods"));
        assert!(recorded(Method::PATCH, "/api/v1/namespaces/a/pods/p"));
        assert!(recorded(Method::PUT, "/api/v1/namespaces/a/pods/p/status"));
        assert!(recorded(Method::DELETE, "/api/v1/pods"));
        assert!(recorded(
            Method::DELETE,
            "/api/v1/namespaces/team/configmaps/c"
        ));
        assert!(!recorded(
            Method::DELETE,
            "/api/v1/namespaces/other/configmaps/c"
        ));
        assert!(!recorded(Method::POST, "/api/v1/namespaces/a/services"));
        assert!(!recorded(Method::OPTIONS, "/api/v1/namespaces/a/pods"));
        assert!(decide(&caches, &parts(Method::GET, "/predicates/spec/api")).is_err());
    }
}
