//! What a cache holds of its resource: all of it, or one namespace and the
//! objects its upstream selectors select. A request the cache cannot answer
//! as the API server would, because it asks for something outside that, is
//! passed through.
//!
//! # The rule
//!
//! - A namespace-restricted cache answers the collection and objects of its
//!   namespace only: a cluster-wide list or watch, or one in another
//!   namespace, is passed through.
//! - A selector-restricted cache answers a list or watch only when the
//!   request's selectors provably select no more than the cache's: each of
//!   the cache's requirements appears among the request's, as written
//!   (compared in canonical form, so `a==b` is `a=b` and `x in (b,a)` is
//!   `x in (a,b)`; `a=b` does not count as implying `a in (b,c)`).
//! - A get of one object from a selector-restricted cache is answered when
//!   the cache holds the object and passed through when it does not: the
//!   object may exist outside the selector.

use kubecache_reflector::upstream::ResourceSpec;
use kubecache_wire::{FieldSelector, LabelSelector};

/// What a cache holds of its resource.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Only this namespace (`None`: every namespace).
    namespace: Option<String>,
    /// The upstream selectors; `None` when they do not parse, so that no
    /// request is known to lie within them.
    selectors: Option<(LabelSelector, FieldSelector)>,
}

impl Scope {
    /// The scope of a reflector of `spec`.
    pub fn of(spec: &ResourceSpec) -> Scope {
        let parse = |labels: Option<&str>, fields: Option<&str>| {
            Some((
                LabelSelector::parse(labels.unwrap_or_default()).ok()?,
                FieldSelector::parse(fields.unwrap_or_default()).ok()?,
            ))
        };
        Scope {
            namespace: spec.namespace.clone().filter(|ns| !ns.is_empty()),
            selectors: parse(
                spec.label_selector.as_deref(),
                spec.field_selector.as_deref(),
            ),
        }
    }

    /// Whether the cache holds every object of `namespace` (`None`: of
    /// every namespace).
    pub fn holds_namespace(&self, namespace: Option<&str>) -> bool {
        match &self.namespace {
            None => true,
            Some(held) => namespace == Some(held.as_str()),
        }
    }

    /// Whether the upstream selectors leave objects out.
    pub fn selects(&self) -> bool {
        self.selectors
            .as_ref()
            .is_none_or(|(labels, fields)| !labels.is_empty() || !fields.is_empty())
    }

    /// Whether a list or watch of `namespace` with these selectors asks for
    /// nothing the cache does not hold (see the module doc).
    pub fn admits(
        &self,
        namespace: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> bool {
        let Some((own_labels, own_fields)) = &self.selectors else {
            return false;
        };
        self.holds_namespace(namespace)
            && own_labels
                .requirements()
                .iter()
                .all(|r| labels.requirements().contains(r))
            && own_fields
                .requirements()
                .iter()
                .all(|r| fields.requirements().contains(r))
    }

    /// `fields` without the upstream selector's requirements, which every
    /// cached object meets: what is left for the cache to check.
    pub fn residual(&self, fields: FieldSelector) -> FieldSelector {
        let Some((_, own)) = &self.selectors else {
            return fields;
        };
        let left: Vec<String> = fields
            .requirements()
            .iter()
            .filter(|r| !own.requirements().contains(r))
            .map(ToString::to_string)
            .collect();
        // The canonical form parses back to the same requirements.
        FieldSelector::parse(&left.join(",")).unwrap_or(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubecache_reflector::upstream::ApiResource;

    fn scope(namespace: Option<&str>, labels: &str, fields: &str) -> Scope {
        Scope::of(&ResourceSpec {
            resource: ApiResource::pods(),
            namespace: namespace.map(Into::into),
            label_selector: Some(labels.into()),
            field_selector: Some(fields.into()),
        })
    }

    fn admits(scope: &Scope, namespace: Option<&str>, labels: &str, fields: &str) -> bool {
        scope.admits(
            namespace,
            &LabelSelector::parse(labels).unwrap(),
            &FieldSelector::parse(fields).unwrap(),
        )
    }

    #[test]
    fn a_whole_cache_admits_everything() {
        let whole = scope(None, "", "");
        assert!(!whole.selects());
        assert!(admits(&whole, None, "", ""));
        assert!(admits(&whole, Some("a"), "x=y", "metadata.name=n"));
    }

    #[test]
    fn a_namespace_cache_admits_its_namespace_only() {
        let team = scope(Some("team"), "", "");
        assert!(!team.selects());
        assert!(admits(&team, Some("team"), "x=y", ""));
        assert!(!admits(&team, None, "", ""));
        assert!(!admits(&team, Some("other"), "", ""));
        assert!(team.holds_namespace(Some("team")));
        assert!(!team.holds_namespace(None));
    }

    #[test]
    fn a_selector_cache_admits_requests_that_imply_its_selectors() {
        let web = scope(None, "app in (web,api),tier", "spec.nodeName=n1");
        assert!(web.selects());
        assert!(admits(
            &web,
            Some("a"),
            "tier,x=y,app in (api,web)",
            "spec.nodeName==n1,metadata.name=p"
        ));
        assert!(!admits(&web, None, "app in (web,api)", "spec.nodeName=n1"));
        assert!(!admits(&web, None, "app=web,tier", "spec.nodeName=n1"));
        assert!(!admits(&web, None, "app in (web,api),tier", ""));
        assert_eq!(
            web.residual(FieldSelector::parse("spec.nodeName=n1,metadata.name=p").unwrap())
                .to_string(),
            "metadata.name=p"
        );
    }

    #[test]
    fn selectors_that_do_not_parse_admit_nothing() {
        let broken = scope(None, "a in (", "");
        assert!(broken.selects());
        assert!(!admits(&broken, None, "", ""));
    }
}
