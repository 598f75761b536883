//! Decoding one pod: kubecache's `decode_object` (strip managedFields, read
//! key, labels, owners and `spec.nodeName`) against `serde_json::Value` and
//! against the typed `k8s_openapi` Pod that kube-runtime decodes into, on
//! the same bytes. Throughput is in input bytes.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kubecache_benches::fixtures::{ClusterShape, pod_bytes, stored_pods, transform};
use kubecache_wire::decode_object;

fn decode(c: &mut Criterion) {
    let pods = pod_bytes(&stored_pods(ClusterShape::pods(200)));
    let bytes: u64 = pods.iter().map(|p| p.len() as u64).sum();
    let transform = transform();
    let mut group = c.benchmark_group("decode_200_pods");
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("kubecache_decode_object", |b| {
        b.iter(|| {
            for pod in &pods {
                black_box(decode_object(black_box(pod), "Pod", "v1", &transform).unwrap());
            }
        })
    });
    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            for pod in &pods {
                black_box(serde_json::from_slice::<serde_json::Value>(black_box(pod)).unwrap());
            }
        })
    });
    group.bench_function("k8s_openapi_pod", |b| {
        b.iter(|| {
            for pod in &pods {
                black_box(serde_json::from_slice::<Pod>(black_box(pod)).unwrap());
            }
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = decode
}
criterion_main!(benches);
