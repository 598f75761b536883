//! Answers in the encoding the client asks for: protobuf and metadata-only
//! clients get the same lists, gets and watches through kubecache as from
//! the API server (the sim, which answers them as kube-apiserver does),
//! decoded the way those clients decode them: typed protobuf messages
//! (`k8s-pb`, as a Go client's generated types) and kube-rs's metadata API.

use crate::common;

use std::time::Duration;

use common::{Served, Setup, serve};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kubecache_loadtest::sim::ids;
use kubecache_wire::protobuf;
use prost::Message;
use serde_json::json;

const PODS: &str = "/api/v1/pods";
const WIDGETS: &str = "/apis/example.com/v1/widgets";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What client-go's metadata client sends for a list.
const METADATA_LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// What client-go's metadata client sends for a watch.
const METADATA_WATCH: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

async fn served() -> Served {
    serve(Setup {
        sim: kubecache_loadtest::sim::SimConfig {
            pods: 300,
            widgets: 20,
            ..kubecache_loadtest::sim::SimConfig::default()
        },
        resources: vec![
            kubecache_reflector::upstream::ApiResource::pods(),
            common::resource("example.com", "widgets", "Widget", true),
        ],
        ..Setup::default()
    })
    .await
}

/// GETs `path` from `base` accepting `accept`: code, `Content-Type`, body.
async fn get(base: &str, path: &str, accept: &str) -> (u16, String, bytes::Bytes) {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = common::exchange(base, request).await;
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (
        response.status().as_u16(),
        content_type,
        response.into_body(),
    )
}

/// The message in a protobuf body (`k8s\0` + `runtime.Unknown`), checking
/// the envelope's kind.
fn message<M: Message + Default>(body: &[u8], kind: &str) -> M {
    let unknown = protobuf::decode_unknown(body).expect("k8s\\0 + runtime.Unknown");
    assert_eq!(unknown.kind, kind);
    M::decode(unknown.raw).expect("decodes as the typed message")
}

/// kubecache strips managed fields from what it caches (its default).
fn without_managed_fields(mut pod: core::Pod) -> core::Pod {
    if let Some(metadata) = pod.metadata.as_mut() {
        metadata.managed_fields.clear();
    }
    pod
}

/// Waits until kubecache's pods have reached the sim's current revision
/// (the writes are to pods).
async fn caught_up(served: &Served) {
    let target = served.sim.store().revision();
    let pods = served.caches.iter().next().unwrap();
    pods.reader
        .wait_for(target, Duration::from_secs(30))
        .await
        .expect("kubecache catches up with the API server");
}

/// A few writes: labels on some pods, one deleted.
fn write(served: &Served) {
    let store = served.sim.store();
    let pods = served.sim.state(ids::PODS);
    for (i, pod) in pods.iter().take(5).enumerate() {
        let patch = json!({"metadata": {"labels": {"encodings": i.to_string()}}});
        store
            .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
            .unwrap();
    }
    let last = pods.last().unwrap();
    store
        .delete(ids::PODS, &last.namespace, &last.name)
        .unwrap();
}

/// The events of a protobuf watch body: type and the enveloped object.
fn protobuf_events(body: &[u8]) -> Vec<(String, String, Vec<u8>)> {
    let mut decoder = protobuf::WatchFrameDecoder::new();
    decoder.push(body);
    let mut events = Vec::new();
    while let Some(event) = decoder.next_event().expect("well-framed") {
        let unknown = protobuf::decode_unknown(&event.object).unwrap();
        events.push((
            event.event_type,
            unknown.kind.to_string(),
            unknown.raw.to_vec(),
        ));
    }
    decoder.finish().expect("no partial frame");
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_clients_get_the_api_servers_lists_and_gets_through_kubecache() {
    let served = served().await;
    let sim = served.sim.url().to_string();
    let (code, content_type, body) = get(&served.url, PODS, PROTOBUF).await;
    assert_eq!((code, content_type.as_str()), (200, PROTOBUF));
    let ours: core::PodList = message(&body, "PodList");
    let (_, _, body) = get(&sim, PODS, PROTOBUF).await;
    let theirs: core::PodList = message(&body, "PodList");
    assert_eq!(ours.items.len(), 300);
    let theirs: Vec<_> = theirs
        .items
        .into_iter()
        .map(without_managed_fields)
        .collect();
    assert_eq!(ours.items, theirs);
    assert_eq!(
        ours.metadata.unwrap().resource_version,
        served.sim.store().revision().to_string().into()
    );

    // Pages: the same objects, the continue token carried in protobuf.
    let (_, _, body) = get(&served.url, &format!("{PODS}?limit=120"), PROTOBUF).await;
    let page: core::PodList = message(&body, "PodList");
    let list_meta = page.metadata.unwrap();
    assert_eq!(page.items[..], ours.items[..120]);
    assert_eq!(list_meta.remaining_item_count, Some(180));
    let token = list_meta.r#continue.unwrap();
    let (_, _, body) = get(
        &served.url,
        &format!("{PODS}?limit=200&continue={token}"),
        PROTOBUF,
    )
    .await;
    let rest: core::PodList = message(&body, "PodList");
    assert_eq!(rest.items[..], ours.items[120..]);

    let pod = &ours.items[7];
    let name = pod.metadata.as_ref().unwrap();
    let path = format!(
        "/api/v1/namespaces/{}/pods/{}",
        name.namespace.as_deref().unwrap(),
        name.name.as_deref().unwrap()
    );
    let (code, content_type, body) = get(&served.url, &path, PROTOBUF).await;
    assert_eq!((code, content_type.as_str()), (200, PROTOBUF));
    assert_eq!(&message::<core::Pod>(&body, "Pod"), pod);

    // A miss is the API server's 404, in protobuf as it would be.
    let (code, content_type, body) =
        get(&served.url, "/api/v1/namespaces/x/pods/none", PROTOBUF).await;
    assert_eq!((code, content_type.as_str()), (404, PROTOBUF));
    let status: meta::Status = message(&body, "Status");
    assert_eq!(status.reason.as_deref(), Some("NotFound"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_watchers_get_the_api_servers_frames_through_kubecache() {
    let served = served().await;
    let rv = served.sim.store().revision();
    // From a resourceVersion: both replay what follows it, whenever they open.
    let path = format!("{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=4");
    let ours = tokio::spawn({
        let url = served.url.clone();
        let path = path.clone();
        async move { get(&url, &path, PROTOBUF).await }
    });
    let theirs = tokio::spawn({
        let url = served.sim.url().to_string();
        async move { get(&url, &path, PROTOBUF).await }
    });
    write(&served);
    caught_up(&served).await;
    let (code, content_type, ours) = ours.await.unwrap();
    assert_eq!(
        (code, content_type.as_str()),
        (200, "application/vnd.kubernetes.protobuf;stream=watch")
    );
    let (_, _, theirs) = theirs.await.unwrap();
    let decode = |body: &[u8]| {
        protobuf_events(body)
            .into_iter()
            .filter(|(event_type, _, _)| event_type != "BOOKMARK")
            .map(|(event_type, kind, raw)| {
                let pod = without_managed_fields(core::Pod::decode(&raw[..]).unwrap());
                (event_type, kind, pod)
            })
            .collect::<Vec<_>>()
    };
    let (ours, theirs) = (decode(&ours), decode(&theirs));
    assert_eq!(ours.len(), 6, "5 MODIFIED and a DELETED");
    assert_eq!(ours, theirs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_clients_see_through_kubecache_what_they_see_directly() {
    let served = served().await;
    let ours: Api<Pod> = Api::all(common::client(&served.url));
    let theirs: Api<Pod> = Api::all(common::client(served.sim.url()));
    let names = |list: kube::api::ObjectList<kube::core::PartialObjectMeta<Pod>>| {
        list.items
            .into_iter()
            .map(|mut item| {
                item.metadata.managed_fields = None;
                item.metadata
            })
            .collect::<Vec<_>>()
    };
    let listed = names(ours.list_metadata(&ListParams::default()).await.unwrap());
    assert_eq!(listed.len(), 300);
    assert_eq!(
        listed,
        names(theirs.list_metadata(&ListParams::default()).await.unwrap())
    );
    let name = listed[3].name.clone().unwrap();
    let namespace = listed[3].namespace.clone().unwrap();
    let one: Api<Pod> = Api::namespaced(common::client(&served.url), &namespace);
    let mut got = one.get_metadata(&name).await.unwrap();
    got.metadata.managed_fields = None;
    assert_eq!(got.metadata, listed[3]);

    let rv = served.sim.store().revision().to_string();
    let params = WatchParams::default().timeout(4);
    let watch = |api: Api<Pod>| {
        let (params, rv) = (params.clone(), rv.clone());
        tokio::spawn(async move {
            let stream = api.watch_metadata(&params, &rv).await.unwrap();
            stream
                .try_filter_map(|event| async move {
                    Ok(match event {
                        WatchEvent::Added(o) => Some(("ADDED", o.metadata)),
                        WatchEvent::Modified(o) => Some(("MODIFIED", o.metadata)),
                        WatchEvent::Deleted(o) => Some(("DELETED", o.metadata)),
                        _ => None,
                    })
                })
                .map(|event| {
                    let (kind, mut metadata) = event.unwrap();
                    metadata.managed_fields = None;
                    (kind, metadata)
                })
                .collect::<Vec<_>>()
                .await
        })
    };
    let (ours, theirs) = (watch(ours), watch(theirs));
    write(&served);
    caught_up(&served).await;
    let (ours, theirs) = (ours.await.unwrap(), theirs.await.unwrap());
    assert_eq!(ours.len(), 6);
    assert_eq!(ours, theirs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_go_metadata_clients_get_protobuf_even_for_custom_resources() {
    let served = served().await;
    let sim = served.sim.url().to_string();
    for path in [PODS, WIDGETS] {
        let (code, content_type, ours) = get(&served.url, path, METADATA_LIST).await;
        assert_eq!((code, content_type.as_str()), (200, PROTOBUF), "{path}");
        let ours: meta::PartialObjectMetadataList = message(&ours, "PartialObjectMetadataList");
        let (_, _, theirs) = get(&sim, path, METADATA_LIST).await;
        let theirs: meta::PartialObjectMetadataList = message(&theirs, "PartialObjectMetadataList");
        let metadata = |list: meta::PartialObjectMetadataList| {
            list.items
                .into_iter()
                .map(|item| {
                    let mut metadata = item.metadata.unwrap();
                    metadata.managed_fields.clear();
                    metadata
                })
                .collect::<Vec<_>>()
        };
        let ours = metadata(ours);
        assert!(!ours.is_empty(), "{path}");
        assert_eq!(ours, metadata(theirs), "{path}");
    }
    let rv = served.sim.store().revision();
    let path = format!("{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=1");
    let (code, content_type, _) = get(&served.url, &path, METADATA_WATCH).await;
    assert_eq!(
        (code, content_type.as_str()),
        (200, "application/vnd.kubernetes.protobuf;stream=watch")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_asked_for_protobuf_only_get_the_api_servers_406_in_protobuf() {
    let served = served().await;
    for base in [served.url.clone(), served.sim.url().to_string()] {
        let (code, content_type, body) = get(&base, WIDGETS, PROTOBUF).await;
        assert_eq!((code, content_type.as_str()), (406, PROTOBUF), "{base}");
        let status: meta::Status = message(&body, "Status");
        assert_eq!(status.reason.as_deref(), Some("NotAcceptable"), "{base}");
        assert!(
            status
                .message
                .unwrap()
                .starts_with("only the following media types are accepted: application/json"),
            "{base}"
        );
        let fallback = "application/vnd.kubernetes.protobuf,application/json";
        let (code, content_type, _) = get(&base, WIDGETS, fallback).await;
        assert_eq!(
            (code, content_type.as_str()),
            (200, "application/json"),
            "{base}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bytes_of_encodings_made_on_demand_are_measured() {
    let served = served().await;
    let gauge = |metrics: &[u8], encoding: &str| -> f64 {
        let line = format!("kubecache_encoded_bytes{{encoding=\"{encoding}\"}} ");
        let text = std::str::from_utf8(metrics).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(line.as_str()))
            .unwrap_or_else(|| panic!("no {line} in /metrics"))
            .parse()
            .unwrap()
    };
    let (_, _, list) = get(&served.url, PODS, PROTOBUF).await;
    let (_, _, metadata) = get(&served.url, PODS, METADATA_LIST).await;
    let (_, after) = common::get(&served.url, "/metrics").await;
    // The process's gauges hold at least this server's objects' encodings,
    // alive in its store (other tests of this binary add theirs).
    assert!(gauge(&after, "protobuf") >= list.len() as f64 * 0.9);
    assert!(gauge(&after, "metadata") >= metadata.len() as f64 * 0.9);
}

/// kubecache reads the API server's `/version` and serves protobuf as that
/// Kubernetes version's Go types write it: Pods of a 1.28 server have no
/// `status.observedGeneration` nor `conditions[].observedGeneration`
/// (Kubernetes 1.33, non-pointers Go writes even when zero); those of a
/// 1.36 server carry them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_pods_carry_the_fields_of_the_api_servers_kubernetes_version() {
    for (minor, carried) in [(28, None), (36, Some(0))] {
        let served = serve(Setup {
            sim: kubecache_loadtest::sim::SimConfig {
                pods: 20,
                kube_version: protobuf::KubeVersion::new(minor),
                ..kubecache_loadtest::sim::SimConfig::default()
            },
            ..Setup::default()
        })
        .await;
        let (code, _, body) = get(&served.url, PODS, PROTOBUF).await;
        assert_eq!(code, 200);
        let pods: core::PodList = message(&body, "PodList");
        assert_eq!(pods.items.len(), 20);
        let mut conditions = 0;
        for pod in pods.items {
            let status = pod.status.expect("a status");
            assert_eq!(status.observed_generation, carried, "1.{minor}");
            for condition in status.conditions {
                assert_eq!(condition.observed_generation, carried, "1.{minor}");
                conditions += 1;
            }
        }
        assert!(conditions > 0, "the sim's pods have conditions");
    }
}
