//! One list page of 500 realistic pods (the page size of client-go,
//! kube-runtime and kubecache): `parse_list` alone (envelope read, every
//! item validated and cut out), then `parse_list` plus `decode_object` of
//! every item (what a reflector does per page). Throughput is in page bytes.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kubecache_benches::fixtures::{ClusterShape, list_page, stored_pods, transform};
use kubecache_wire::{decode_object, parse_list};

fn page(c: &mut Criterion) {
    let page = list_page(&stored_pods(ClusterShape::pods(500)), 12_345);
    let transform = transform();
    let mut group = c.benchmark_group("list_page_500_pods");
    group.throughput(Throughput::Bytes(page.len() as u64));
    group.bench_function("parse_list", |b| {
        b.iter(|| black_box(parse_list(black_box(&page)).unwrap()))
    });
    group.bench_function("parse_list_and_decode_items", |b| {
        b.iter(|| {
            let list = parse_list(black_box(&page)).unwrap();
            for item in &list.items {
                black_box(decode_object(item, "Pod", "v1", &transform).unwrap());
            }
        })
    });
    group.bench_function("serde_json_value", |b| {
        b.iter(|| black_box(serde_json::from_slice::<serde_json::Value>(black_box(&page)).unwrap()))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = page
}
criterion_main!(benches);
