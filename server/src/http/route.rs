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
    if target.name.is_some() {
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

/// `labelSelector` and `fieldSelector` of a query (the last of each, as the
/// API server reads them).
fn selectors(query: &str) -> Result<(LabelSelector, FieldSelector), SelectorError> {
    let mut labels = LabelSelector::default();
    let mut fields = FieldSelector::default();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match &*key {
            "labelSelector" => labels = LabelSelector::parse(&value)?,
            "fieldSelector" => fields = FieldSelector::parse(&value)?,
            _ => {}
        }
    }
    Ok((labels, fields))
}
