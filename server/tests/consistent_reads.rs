//! Consistent reads see every write the API server accepted before them,
//! and `NotOlderThan` reads wait for their resourceVersion, whatever moved
//! the global resourceVersion: a randomized, seeded test
//! (replay one seed with `KUBECACHE_SEED=n`), against the sim with
//! kubecache caching pods and config maps.

mod common;

use common::{Setup, get, resource, serve};
use kubecache_loadtest::sim::{SimConfig, ids};
use kubecache_reflector::upstream::ApiResource;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// The seeds CI runs; `KUBECACHE_SEED` replaces them with one.
const SEEDS: [u64; 3] = [1, 17, 2026];

/// Writes (each followed by its read) per seed.
const STEPS: usize = 40;

/// The resourceVersion of an object or list answered by kubecache.
fn resource_version(body: &[u8]) -> (u64, Value) {
    let value: Value = serde_json::from_slice(body).unwrap();
    let rv = value["metadata"]["resourceVersion"]
        .as_str()
        .expect("a resourceVersion")
        .parse()
        .unwrap();
    (rv, value)
}

/// A read of `ns/name` in `plural`, by GET or by a list selecting it,
/// consistent or (`at`) not older than a resourceVersion: the object's
/// resourceVersion.
async fn read(
    url: &str,
    plural: &str,
    ns: &str,
    name: &str,
    by_list: bool,
    at: Option<u64>,
) -> u64 {
    let at = at.map_or_else(String::new, |rv| {
        format!("resourceVersion={rv}&resourceVersionMatch=NotOlderThan&")
    });
    let path = if by_list {
        format!("/api/v1/namespaces/{ns}/{plural}?{at}fieldSelector=metadata.name%3D{name}")
    } else {
        format!("/api/v1/namespaces/{ns}/{plural}/{name}?{at}")
    };
    let (code, body) = get(url, &path).await;
    assert_eq!(code, 200, "{path}: {}", String::from_utf8_lossy(&body));
    let (_, value) = resource_version(&body);
    let object = if by_list {
        let items = value["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{path} lists {name}");
        items[0].clone()
    } else {
        value
    };
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_read_sees_each_write_made_before_it_under_churn_of_other_resources() {
    let seeds = match std::env::var("KUBECACHE_SEED") {
        Ok(seed) => vec![seed.parse().expect("KUBECACHE_SEED is a number")],
        Err(_) => SEEDS.to_vec(),
    };
    let served = serve(Setup {
        sim: SimConfig {
            pods: 200,
            configmaps: 20,
            ..SimConfig::default()
        },
        resources: vec![
            ApiResource::pods(),
            resource("", "configmaps", "ConfigMap", true),
        ],
        ..Setup::default()
    })
    .await;
    let pods = served.sim.state(ids::PODS);
    // Pods churn throughout (about 100 writes/s), moving the global
    // resourceVersion. (The sim's own churn deletes pods the test writes.)
    let churn = tokio::spawn({
        let (store, pods) = (served.sim.store().clone(), pods.clone());
        async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(10));
            for i in 0u64.. {
                tick.tick().await;
                let pod = &pods[(i as usize * 7919) % pods.len()];
                let patch = json!({"metadata": {"annotations": {"churn": i.to_string()}}});
                store
                    .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
                    .unwrap();
            }
        }
    });
    let configmaps = served.sim.state(ids::CONFIGMAPS);
    for seed in seeds {
        println!("seed {seed} (replay with KUBECACHE_SEED={seed})");
        let mut rng = SmallRng::seed_from_u64(seed);
        for step in 0..STEPS {
            // A few writes to either resource, the last one read back.
            for _ in 0..rng.random_range(1..4) {
                let (id, plural, objects) = if rng.random_bool(0.6) {
                    (ids::PODS, "pods", &pods)
                } else {
                    (ids::CONFIGMAPS, "configmaps", &configmaps)
                };
                let target = &objects[rng.random_range(0..objects.len())];
                let patch = json!({"metadata": {"labels": {"step": format!("{seed}-{step}")}}});
                let written = served
                    .sim
                    .store()
                    .merge_patch(id, &target.namespace, &target.name, &patch)
                    .unwrap();
                let by_list = rng.random_bool(0.5);
                let seen = read(
                    &served.url,
                    plural,
                    &target.namespace,
                    &target.name,
                    by_list,
                    None,
                )
                .await;
                assert!(
                    seen >= written.revision,
                    "seed {seed} step {step}: a consistent {} of {plural} {}/{} answered \
                     resourceVersion {seen}, older than the write at {} made before it",
                    if by_list { "list" } else { "get" },
                    target.namespace,
                    target.name,
                    written.revision
                );
            }
            // The quiet resource while pods churn harder: its reads answer,
            // consistent or not older than the last pod write (waiting for
            // it as the API server does, not failing), and see its newest
            // state.
            if rng.random_bool(0.3) {
                let mut last = 0;
                for _ in 0..rng.random_range(1..20) {
                    let pod = &pods[rng.random_range(0..pods.len())];
                    let patch = json!({"metadata": {"annotations": {"churn": step.to_string()}}});
                    last = served
                        .sim
                        .store()
                        .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
                        .unwrap()
                        .revision;
                }
                let target = &configmaps[rng.random_range(0..configmaps.len())];
                let newest: u64 = served.sim.versions(ids::CONFIGMAPS)[&target.key]
                    .parse()
                    .unwrap();
                let seen = read(
                    &served.url,
                    "configmaps",
                    &target.namespace,
                    &target.name,
                    rng.random_bool(0.5),
                    rng.random_bool(0.5).then_some(last),
                )
                .await;
                assert_eq!(
                    seen, newest,
                    "seed {seed} step {step}: the quiet config map's newest state"
                );
            }
        }
    }
    churn.abort();
}
