//! A 500-pod list page read the way the reflector reads it, in each wire
//! encoding: JSON items decoded by the scanner, against protobuf items
//! transcoded to JSON once and then decoded by the same scanner (what
//! `--wire protobuf` costs the client for what it saves the server). Both
//! produce the same stored objects. Throughput in each encoding's own bytes,
//! and in objects.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kubecache_benches::fixtures::{
    ClusterShape, list_page, list_page_protobuf, stored_pods, transform,
};
use kubecache_reflector::upstream::ListResponse;
use kubecache_wire::Encoding;
use kubecache_wire::decode_object;
use kubecache_wire::protobuf::KubeVersion;

const PODS: usize = 500;

fn page_decode(c: &mut Criterion) {
    let pods = stored_pods(ClusterShape::pods(PODS));
    let transform = transform();
    let pages = [
        ("json", Bytes::from(list_page(&pods, 77)), Encoding::Json),
        (
            "protobuf",
            Bytes::from(list_page_protobuf(&pods, 77)),
            Encoding::Protobuf,
        ),
    ];
    for (unit, throughput) in [("bytes", None), ("objects", Some(PODS as u64))] {
        let mut group = c.benchmark_group(format!("page_decode_{unit}"));
        for (name, body, encoding) in &pages {
            group.throughput(match throughput {
                Some(objects) => Throughput::Elements(objects),
                None => Throughput::Bytes(body.len() as u64),
            });
            group.bench_function(*name, |b| {
                b.iter(|| {
                    let response = ListResponse::new(body.clone(), *encoding, KubeVersion::NEWEST);
                    let page = response.page().expect("a page");
                    let mut decoded = 0;
                    page.for_each_json(|item| {
                        let object =
                            decode_object(item, "Pod", "v1", &transform).expect("pods decode");
                        black_box(object);
                        decoded += 1;
                        Ok(())
                    })
                    .expect("every item");
                    assert_eq!(decoded, PODS);
                })
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = page_decode
}
criterion_main!(benches);
