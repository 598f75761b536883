//! What to cache: a resource (found by discovery), in all namespaces or one,
//! optionally narrowed by selectors.

use std::sync::Arc;

use kube::discovery::{Discovery, Scope};
use kubecache_wire::protobuf::RawStrings;
use kubecache_wire::{CachedObject, Transform};

use super::error::UpstreamError;

/// A resource of the API: group, version, plural and kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResource {
    /// API group, empty for core.
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural name, as in URLs.
    pub plural: String,
    /// Kind of one object.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl ApiResource {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `raw`, one object of this resource, in the form the store keeps
    /// (see [`kubecache_wire::decode_object`]), with `strings`, the bytes
    /// of its strings that are not UTF-8 (from protobuf).
    ///
    /// # Errors
    ///
    /// [`UpstreamError::Decode`], naming the kind, when it does not decode.
    pub fn decode(
        &self,
        raw: &[u8],
        strings: Option<RawStrings>,
        transform: &Transform,
    ) -> Result<Arc<CachedObject>, UpstreamError> {
        kubecache_wire::decode_object(raw, &self.kind, &self.api_version(), transform)
            .map(|object| Arc::new(object.with_raw_strings(strings)))
            .map_err(|e| UpstreamError::Decode {
                what: format!("{} object", self.kind),
                error: e.to_string(),
            })
    }

    /// core/v1 pods, known without discovery.
    pub fn pods() -> Self {
        ApiResource {
            group: String::new(),
            version: "v1".into(),
            plural: "pods".into(),
            kind: "Pod".into(),
            namespaced: true,
        }
    }

    /// core/v1 namespaces, known without discovery.
    pub fn namespaces() -> Self {
        ApiResource {
            group: String::new(),
            version: "v1".into(),
            plural: "namespaces".into(),
            kind: "Namespace".into(),
            namespaced: false,
        }
    }

    /// Finds a resource by `plural` or `plural.group` (e.g. `pods`,
    /// `widgets.example.com`, `deployments.apps`) through discovery,
    /// taking the group's preferred version.
    pub async fn discover(client: &kube::Client, name: &str) -> Result<Self, UpstreamError> {
        let (plural, group) = name.split_once('.').unwrap_or((name, ""));
        let discovery = Discovery::new(client.clone())
            .filter(&[group])
            .run()
            .await
            .map_err(|e| UpstreamError::Connect(format!("discovery of {name}: {e}")))?;
        for api_group in discovery.groups() {
            for (resource, capabilities) in api_group.recommended_resources() {
                if resource.plural == plural {
                    return Ok(ApiResource {
                        group: resource.group,
                        version: resource.version,
                        plural: resource.plural,
                        kind: resource.kind,
                        namespaced: capabilities.scope == Scope::Namespaced,
                    });
                }
            }
        }
        Err(UpstreamError::Client {
            code: 404,
            message: format!("the API server serves no resource {name:?}"),
        })
    }
}

/// One cached collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSpec {
    /// The resource.
    pub resource: ApiResource,
    /// Only this namespace (`None`: all).
    pub namespace: Option<String>,
    /// Upstream label selector.
    pub label_selector: Option<String>,
    /// Upstream field selector.
    pub field_selector: Option<String>,
}

impl ResourceSpec {
    /// Every object of `resource`.
    pub fn all(resource: ApiResource) -> Self {
        ResourceSpec {
            resource,
            namespace: None,
            label_selector: None,
            field_selector: None,
        }
    }

    /// The collection's path, e.g. `/api/v1/pods` or
    /// `/apis/example.com/v1/namespaces/ns/widgets`.
    pub fn collection_path(&self) -> String {
        let r = &self.resource;
        let prefix = if r.group.is_empty() {
            format!("/api/{}", r.version)
        } else {
            format!("/apis/{}/{}", r.group, r.version)
        };
        match &self.namespace {
            Some(ns) if r.namespaced => format!("{prefix}/namespaces/{ns}/{}", r.plural),
            _ => format!("{prefix}/{}", r.plural),
        }
    }
}
