//! Where a Kubernetes API request is answered: from a cache, or by the API
//! server (see [`crate::passthrough`]).
//!
//! A cache answers a `GET` or `HEAD` of its resource's collection (list,
//! watch, table) or of one object, within what it holds (see
//! [`crate::served::Scope`]) and with field selectors it can evaluate
//! (`metadata.name`, `metadata.namespace`, indexed fields). Everything else
//! passes through: writes of every kind, subresources, uncached resources,
//! discovery (`/api`, `/apis`, `/version`, `/openapi` ...), and reads a cache
//! cannot answer as the API server would.

use std::sync::Arc;

use axum::http::{Method, Uri};
use kubecache_wire::{FieldSelector, LabelSelector, SelectorError, Status};

use super::path::{self, ResourcePath};
use crate::served::{Filter, Predicates, ServedResource, ServedResources};

/// Where a request goes.
pub enum Route {
    /// To a cache.
    Cache {
        /// What is read.
        target: ResourcePath,
        /// From the `/predicates/{list}` prefix.
        predicates: Predicates,
    },
    /// To the API server.
    PassThrough {
        /// The path and query to send (without a `/predicates/` prefix).
        path: String,
        /// The cached resource a write changes, for read-your-writes.
        written: Option<Arc<ServedResource>>,
    },
}

/// The route of a request with `method` to `uri`.
///
/// # Errors
///
/// 400 for an unknown predicate in the `/predicates/` prefix.
pub fn decide(caches: &ServedResources, method: &Method, uri: &Uri) -> Result<Route, Status> {
    let (predicates, path) = path::strip_predicates(uri.path())?;
    let query = uri.query().unwrap_or("");
    let read = method == Method::GET || method == Method::HEAD;
    let written = match path::parse(caches, path) {
        Some(target) if read && answerable(&target, query) => {
            return Ok(Route::Cache { target, predicates });
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

/// Whether the cache of `target` answers a read of it, with `query`, as
/// the API server would.
fn answerable(target: &ResourcePath, query: &str) -> bool {
    let cache = &target.cache;
    let namespace = target.namespace.as_deref();
    if target.subresource.is_some() {
        return false;
    }
    if target.name.is_some() && !target.watch {
        return cache.scope.holds_namespace(namespace);
    }
    // Selectors that do not parse get the cache's 400, worded as the API
    // server's.
    let Ok((labels, fields)) = selectors(query) else {
        return true;
    };
    cache.scope.admits(namespace, &labels, &fields)
        && cache
            .scope
            .residual(fields)
            .check_supported(&Filter::supported_fields(&cache.indexes))
            .is_ok()
}

/// `labelSelector` and `fieldSelector` of a query (the first of each, as the
/// API server reads them).
fn selectors(query: &str) -> Result<(LabelSelector, FieldSelector), SelectorError> {
    let mut labels = LabelSelector::default();
    let mut fields = FieldSelector::default();
    for (key, value) in kubecache_wire::list_options::first_values(query) {
        match &*key {
            "labelSelector" => labels = LabelSelector::parse(&value)?,
            "fieldSelector" => fields = FieldSelector::parse(&value)?,
            _ => {}
        }
    }
    Ok((labels, fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::served::{ServeSettings, ServedResource};
    use kubecache_reflector::upstream::{ApiResource, ResourceSpec, Upstream};

    /// Pods, whole; config maps of `team` labelled `app=web`.
    fn caches() -> ServedResources {
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
                ServedResource::new(
                    Upstream::new(client.clone(), spec),
                    reader,
                    status,
                    &settings,
                )
            })
            .collect();
        ServedResources::new(caches, settings)
    }

    /// `None` for the cache, else the path passed through and whether a
    /// write is recorded.
    fn route(caches: &ServedResources, method: Method, uri: &str) -> Option<(String, bool)> {
        match decide(caches, &method, &uri.parse().unwrap()).unwrap() {
            Route::Cache { .. } => None,
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
        assert!(
            decide(
                &caches,
                &Method::GET,
                &"/predicates/spec/api".parse().unwrap()
            )
            .is_err()
        );
    }
}
