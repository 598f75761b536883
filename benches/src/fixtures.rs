//! Realistic pods exactly as the simulated API server serves them: made by
//! [`Generator`], stored by the simulator's own [`Store`] (which assigns uid,
//! resourceVersion, generation and creationTimestamp and orders `metadata`
//! like kube-apiserver), then taken out as bytes.

use std::sync::Arc;

use kubecache_loadtest::sim::data::{Generator, GeneratorConfig};
use kubecache_loadtest::sim::store::ListRead;
use kubecache_loadtest::sim::{HistoryWindow, RESOURCES, Store, StoredObject, ids};
use kubecache_wire::{CachedObject, Transform, decode_object, protobuf};

/// The shape of a generated cluster.
#[derive(Debug, Clone, Copy)]
pub struct ClusterShape {
    /// Pods.
    pub pods: usize,
    /// Namespaces they are spread over.
    pub namespaces: usize,
    /// Nodes they are spread over (`spec.nodeName`).
    pub nodes: usize,
}

impl ClusterShape {
    /// `pods` pods over the simulator's default 20 namespaces and 100 nodes.
    pub fn pods(pods: usize) -> Self {
        ClusterShape {
            pods,
            namespaces: 20,
            nodes: 100,
        }
    }
}

/// The pods of a generated cluster as the simulated API server stores them,
/// in key order (`namespace/name`, the order of list responses).
pub fn stored_pods(shape: ClusterShape) -> Vec<Arc<StoredObject>> {
    let seed = 1;
    let store = Store::new(HistoryWindow::ETCD, HistoryWindow::WATCH_CACHE, seed);
    let mut generator = Generator::new(
        GeneratorConfig {
            seed,
            namespaces: shape.namespaces,
            nodes: shape.nodes,
        },
        // A fixed base time: the same bytes on every run.
        chrono::DateTime::from_timestamp(1_750_000_000, 0).expect("a valid timestamp"),
    );
    for name in generator.namespace_names() {
        store
            .create(ids::NAMESPACES, generator.namespace(&name))
            .expect("namespace created");
    }
    for _ in 0..shape.pods {
        let pod = serde_json::from_str(&generator.pod_json()).expect("generated pods parse");
        store.create(ids::PODS, pod).expect("pod created");
    }
    let read = ListRead {
        revision: store.revision(),
        namespace: None,
        start: None,
        limit: 0,
        before: Some(0),
    };
    store
        .list(ids::PODS, read, |_| true)
        .expect("the pods list")
        .items
}

/// Each pod's whole JSON, as a watch event or a GET carries it.
pub fn pod_bytes(pods: &[Arc<StoredObject>]) -> Vec<Vec<u8>> {
    pods.iter().map(|p| p.json().to_vec()).collect()
}

/// One list page (`PodList`) holding `pods`, items without `kind` and
/// `apiVersion` as kube-apiserver writes them, with a continue token and
/// `remainingItemCount` as on every page but the last.
pub fn list_page(pods: &[Arc<StoredObject>], resource_version: u64) -> Vec<u8> {
    let mut body = format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{resource_version}","continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJ4XHUwMDAwIn0","remainingItemCount":1000}},"items":["#
    )
    .into_bytes();
    for (i, pod) in pods.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        let (head, rest) = pod.list_item();
        body.extend_from_slice(head);
        body.extend_from_slice(&rest);
    }
    body.extend_from_slice(b"]}");
    body
}

/// The same page as [`list_page`] in Kubernetes protobuf (`k8s\0` +
/// `runtime.Unknown` holding a `PodList`), as the sim serves it.
pub fn list_page_protobuf(pods: &[Arc<StoredObject>], resource_version: u64) -> Vec<u8> {
    let resource = &RESOURCES[ids::PODS];
    let items: Vec<_> = pods
        .iter()
        .map(|p| p.proto(resource).expect("pods encode"))
        .collect();
    let revision = resource_version.to_string();
    let meta = protobuf::ListMeta {
        resource_version: &revision,
        continue_token: Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJ4XHUwMDAwIn0"),
        remaining_item_count: Some(1000),
        shard_selector: None,
    };
    let mut out = Vec::new();
    protobuf::encode_list_unknown("v1", "PodList", &meta, &items, &mut out);
    out
}

/// The transform the benchmarks decode with: kubecache's default (strip
/// `metadata.managedFields`) plus a field index on `spec.nodeName`.
pub fn transform() -> Transform {
    Transform::default()
        .index_field("spec.nodeName")
        .expect("a valid field path")
}

/// The pods decoded as kubecache stores them (with [`transform`]).
pub fn cached_pods(pods: &[Arc<StoredObject>]) -> Vec<Arc<CachedObject>> {
    let transform = transform();
    pods.iter()
        .map(|p| Arc::new(decode_object(&p.json(), "Pod", "v1", &transform).expect("pods decode")))
        .collect()
}

/// `count` status-only updates of `pods` in turn, after `*next`, at the
/// resourceVersions after `*rv` (both advanced): new versions that keep
/// labels, owners and indexed fields, so the indexes do not move.
pub fn status_update_batch(
    pods: &[Arc<CachedObject>],
    next: &mut usize,
    rv: &mut u64,
    count: u64,
) -> Vec<Arc<CachedObject>> {
    (0..count)
        .map(|_| {
            *rv += 1;
            *next = (*next + 1) % pods.len();
            Arc::new(CachedObject {
                resource_version: *rv,
                ..(*pods[*next]).clone()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubecache_wire::parse_list;

    #[test]
    fn fixtures_are_realistic_pods_that_decode_and_list() {
        let pods = stored_pods(ClusterShape::pods(50));
        assert_eq!(pods.len(), 50);
        let sizes: Vec<usize> = pods.iter().map(|p| p.json().len()).collect();
        assert!(
            sizes.iter().all(|s| (3_000..12_000).contains(s)),
            "pods are a few KB: {sizes:?}"
        );
        let page = list_page(&pods, 77);
        let parsed = parse_list(&page).unwrap();
        assert_eq!((parsed.items.len(), parsed.resource_version), (50, 77));
        let cached = cached_pods(&pods);
        assert!(cached.iter().all(|c| c.fields[0].is_some()));
        assert!(
            cached
                .iter()
                .zip(&pods)
                .all(|(c, p)| c.json.len() < p.json().len())
        );
    }
}
