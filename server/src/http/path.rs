//! Paths of the Kubernetes API that name a cached resource: its collection,
//! one object or one object's subresource, after an optional
//! `/predicates/{list}` prefix.
//!
//! A path is read as kube-apiserver reads it (Go's `URL.Path`): percent-
//! decoded first (`namespaces/billing%2Dprod/pods` is namespace
//! `billing-prod`), then split at `/`. The deprecated watch paths
//! (`/api/v1/watch/namespaces/a/pods`, `/apis/G/V/watch/...`) are watches
//! of the collection, or of the one object they name.

use std::borrow::Cow;
use std::sync::Arc;

use kubecache_wire::Status;

use crate::cacher::Predicates;
use crate::cacher::{Cache, Caches};

/// A path of a cached resource: its collection (all namespaces or one), one
/// object, or a subresource of one object; its segments borrowed from the
/// path unless it was percent-decoded.
pub struct ResourcePath<'p> {
    /// The resource.
    pub cache: Arc<Cache>,
    /// The namespace of a namespaced path.
    pub namespace: Option<Cow<'p, str>>,
    /// The object's name, for a path of one object.
    pub name: Option<Cow<'p, str>>,
    /// The subresource (`status`, `scale`, `log` ...) of the object.
    pub subresource: Option<Cow<'p, str>>,
    /// A deprecated watch path (`/api/v1/watch/...`): a watch of the
    /// collection, narrowed to `name` when the path names one.
    pub watch: bool,
}

/// Splits off a `/predicates/{list}` prefix: `(predicates, rest of the path)`.
///
/// # Errors
///
/// 400 for an unknown predicate.
pub fn strip_predicates(path: &str) -> Result<(Predicates, &str), Status> {
    let Some(rest) = path.strip_prefix("/predicates/") else {
        return Ok((Predicates::default(), path));
    };
    let (list, rest) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    Ok((Predicates::parse(list)?, rest))
}

impl ResourcePath<'_> {
    fn into_owned(self) -> ResourcePath<'static> {
        let owned = |segment: Option<Cow<'_, str>>| segment.map(|s| Cow::Owned(s.into_owned()));
        ResourcePath {
            cache: self.cache,
            namespace: owned(self.namespace),
            name: owned(self.name),
            subresource: owned(self.subresource),
            watch: self.watch,
        }
    }
}

/// Parses a path (without the predicates prefix); `None` for a path that
/// names no cached resource (or does not decode to UTF-8).
pub fn parse<'p>(caches: &Caches, path: &'p str) -> Option<ResourcePath<'p>> {
    // Decoded only when there is something to decode, as is rare.
    if path.contains('%') {
        let decoded = percent_encoding::percent_decode_str(path)
            .decode_utf8()
            .ok()?;
        return parse_decoded(caches, &decoded).map(ResourcePath::into_owned);
    }
    parse_decoded(caches, path)
}

/// [`parse`] of a path that is percent-decoded.
fn parse_decoded<'p>(caches: &Caches, path: &'p str) -> Option<ResourcePath<'p>> {
    // An empty segment (`//api/...`, `namespaces//pods`, a trailing `/`)
    // names no cached resource: kube-apiserver routes such paths its own
    // way (a cluster-wide list for an empty namespace, a plain-text 404
    // for `//api`, each after authorization), so it answers them.
    // Eight segments at most name a cached resource
    // (`apis/{group}/{version}/namespaces/{ns}/{plural}/{name}/{sub}`,
    // or `watch` in place of the subresource); read without allocating.
    let mut segments = [""; 8];
    let mut count = 0;
    for segment in kubecache_wire::ascii::split(path.strip_prefix('/')?, b'/') {
        if segment.is_empty() || count == segments.len() {
            return None;
        }
        segments[count] = segment;
        count += 1;
    }
    let (group, version, rest) = match &segments[..count] {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let (watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    // `namespace`, then `plural`, then up to a name and a subresource.
    let found = |namespace: Option<&'p str>, plural: &str, tail: &[&'p str]| {
        let cache = caches.find(group, version, plural)?.clone();
        let namespaced = namespace.is_some();
        let scoped = namespaced == cache.resource.namespaced || tail.is_empty() && !namespaced;
        let most = if watch { 1 } else { 2 };
        (scoped && tail.len() <= most).then(|| ResourcePath {
            cache,
            namespace: namespace.map(Cow::Borrowed),
            name: tail.first().map(|name| Cow::Borrowed(*name)),
            subresource: tail.get(1).map(|sub| Cow::Borrowed(*sub)),
            watch,
        })
    };
    let in_namespace = match rest {
        ["namespaces", ns, plural, tail @ ..] => found(Some(ns), plural, tail),
        _ => None,
    };
    // `/namespaces/{name}/status` is a subresource of a namespace.
    in_namespace.or_else(|| match rest {
        [plural, tail @ ..] => found(None, plural, tail),
        [] => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_path_with_an_empty_segment_names_no_cached_resource() {
        let caches = crate::http::route::tests::caches();
        assert!(parse(&caches, "/api/v1/namespaces/a/pods").is_some());
        for path in [
            "//api/v1/namespaces/a/pods",
            "/api/v1/namespaces//pods",
            "/api/v1/pods/",
            "api/v1/pods",
        ] {
            assert!(parse(&caches, path).is_none(), "{path}");
        }
    }

    #[tokio::test]
    async fn a_path_of_up_to_eight_segments_names_a_cached_resource() {
        let caches = crate::http::route::tests::caches();
        let found = |path| parse(&caches, path).map(|p| (p.name, p.subresource, p.watch));
        let name = |n| Some(Cow::Borrowed(n));
        assert_eq!(
            found("/api/v1/watch/namespaces/a/pods/b"),
            Some((name("b"), None, true))
        );
        assert_eq!(
            found("/api/v1/namespaces/a/pods/b/status"),
            Some((name("b"), name("status"), false))
        );
        assert_eq!(
            found("/api/v1/namespaces/a/pods/b%2Dc/st%61tus"),
            Some((name("b-c"), name("status"), false)),
            "decoded"
        );
        for longer in [
            "/api/v1/namespaces/a/pods/b/status/c",
            "/api/v1/watch/namespaces/a/pods/b/c",
            "/api/v1/namespaces/a/pods/b/c/d/e/f/g",
        ] {
            assert_eq!(found(longer), None, "{longer}");
        }
    }

    #[test]
    fn the_predicates_prefix_is_split_off_the_kubernetes_path() {
        let (predicates, rest) =
            strip_predicates("/predicates/generation,labels/api/v1/pods").unwrap();
        assert!(predicates.generation && predicates.labels && !predicates.annotations);
        assert_eq!(rest, "/api/v1/pods");
        let (predicates, rest) = strip_predicates("/api/v1/pods").unwrap();
        assert!(predicates.is_empty());
        assert_eq!(rest, "/api/v1/pods");
        assert_eq!(
            strip_predicates("/predicates/spec/api").unwrap_err().code,
            400
        );
    }
}
