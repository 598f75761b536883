//! Sharded lists and watches (KEP-5866) through kubecache, against the sim
//! as the oracle: for seeded random splits of the hash space (2, 3, 7 and
//! 16 ranges, of the uid and of the namespace) the shards' lists are
//! disjoint and together the unsharded list at the same resourceVersion,
//! each the sim's own answer for the same selector; under churn, the
//! shards' watches together are the unsharded watch, every object's events
//! in order and in exactly one shard.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use common::{Setup, WatchLines, describe, get, resource_version, serve};
use kubecache_testkit::wait;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

const PODS: &str = "/api/v1/pods";
const UID: &str = "object.metadata.uid";
const NAMESPACE: &str = "object.metadata.namespace";
/// The seed of the splits; a failure names it.
const SEED: u64 = 5866;

/// `n` contiguous ranges of the hash space of `path` cut at random points,
/// as the selectors of its shards; now and then a shard is two ranges,
/// joined by `||` (each shard's union still disjoint from the others').
fn split(rng: &mut SmallRng, path: &str, n: usize) -> Vec<String> {
    let mut cuts: Vec<u64> = (0..n - 1).map(|_| rng.random()).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut bounds: Vec<String> = vec!["0x0000000000000000".into()];
    bounds.extend(cuts.iter().map(|cut| format!("0x{cut:016x}")));
    bounds.push("0x10000000000000000".into());
    let ranges: Vec<String> = bounds
        .windows(2)
        .filter(|w| w[0] != w[1])
        .map(|w| format!("shardRange({path}, '{}', '{}')", w[0], w[1]))
        .collect();
    if ranges.len() > 3 && rng.random_bool(0.5) {
        // The first and the last range as one shard.
        let mut shards = ranges[1..ranges.len() - 1].to_vec();
        shards.push(format!("{} || {}", ranges[0], ranges[ranges.len() - 1]));
        return shards;
    }
    ranges
}

fn encoded(selector: &str) -> String {
    form_urlencoded::byte_serialize(selector.as_bytes()).collect()
}

/// Every page of `query` from `base`, followed by its continue tokens:
/// the items' `namespace/name`, and each page's `shardInfo.selector`.
async fn list_all(base: &str, query: &str) -> (Vec<String>, Vec<Option<String>>) {
    let (mut names, mut echoes) = (Vec::new(), Vec::new());
    let mut next = format!("{PODS}?{query}");
    loop {
        let (code, body) = get(base, &next).await;
        assert_eq!(code, 200, "{next}: {}", String::from_utf8_lossy(&body));
        let list: Value = serde_json::from_slice(&body).unwrap();
        for item in list["items"].as_array().unwrap() {
            let meta = &item["metadata"];
            names.push(format!(
                "{}/{}",
                meta["namespace"].as_str().unwrap(),
                meta["name"].as_str().unwrap()
            ));
        }
        echoes.push(
            list["metadata"]["shardInfo"]["selector"]
                .as_str()
                .map(String::from),
        );
        match list["metadata"]["continue"].as_str() {
            Some(token) if !token.is_empty() => {
                let selector = query.split('&').find(|p| p.starts_with("shardSelector="));
                next = format!(
                    "{PODS}?limit=97&continue={}{}",
                    encoded(token),
                    selector.map(|s| format!("&{s}")).unwrap_or_default()
                );
            }
            _ => return (names, echoes),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shards_of_a_split_are_disjoint_and_together_the_unsharded_list_at_one_resource_version()
 {
    let served = serve(Setup::default()).await;
    let rv = resource_version(&served.url, PODS).await;
    let at = format!("resourceVersion={rv}&resourceVersionMatch=Exact&limit=97");
    let (whole, echoes) = list_all(&served.url, &at).await;
    assert!(
        echoes.iter().all(Option::is_none),
        "a whole list has no shardInfo"
    );
    assert!(whole.len() >= 1000);
    let whole: BTreeSet<String> = whole.into_iter().collect();
    let mut rng = SmallRng::seed_from_u64(SEED);
    for path in [UID, NAMESPACE] {
        for n in [2, 3, 7, 16] {
            let shards = split(&mut rng, path, n);
            let mut union = BTreeSet::new();
            let mut nonempty = 0;
            for selector in &shards {
                let query = format!("{at}&shardSelector={}", encoded(selector));
                let (names, echoes) = list_all(&served.url, &query).await;
                let context = format!("seed {SEED}, {path} in {n}: {selector}");
                assert!(
                    echoes.iter().all(|e| e.as_deref() == Some(selector)),
                    "{context}: every page echoes the selector: {echoes:?}"
                );
                let (oracle, _) = list_all(served.sim.url(), &query).await;
                assert_eq!(names, oracle, "{context}: the sim's list");
                nonempty += usize::from(!names.is_empty());
                for name in names {
                    assert!(union.insert(name.clone()), "{context}: {name} twice");
                }
            }
            assert_eq!(union, whole, "seed {SEED}: {path} in {n}");
            if path == UID {
                assert!(nonempty > 1, "seed {SEED}: the uids spread over the shards");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_list_echoes_its_selector_in_protobuf_and_bad_selectors_get_the_api_server_s_400()
{
    let served = serve(Setup::default()).await;
    let selector = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
    let path = format!("{PODS}?limit=5&shardSelector={}", encoded(selector));
    for base in [served.url.as_str(), served.sim.url()] {
        let request = http::Request::get(&path)
            .header("accept", "application/vnd.kubernetes.protobuf")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let (code, body) = common::send(base, request).await;
        assert_eq!(code, 200);
        let unknown = kubecache_wire::protobuf::decode_unknown(&body).unwrap();
        let list = kubecache_wire::protobuf::decode_list(unknown.raw).unwrap();
        assert_eq!(list.meta.shard_selector, Some(selector), "{base}");
    }
    for bad in [
        " ",
        "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
        "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && x",
    ] {
        for query in ["", "watch=1&"] {
            let path = format!("{PODS}?{query}shardSelector={}", encoded(bad));
            let (code, body) = get(&served.url, &path).await;
            let (sim_code, sim_body) = get(served.sim.url(), &path).await;
            assert_eq!((code, sim_code), (400, 400), "{path}");
            let message = |body: &[u8]| {
                let status: Value = serde_json::from_slice(body).unwrap();
                status["message"].as_str().unwrap().to_string()
            };
            assert_eq!(message(&body), message(&sim_body), "{path}");
        }
    }
}

/// One watch's events as they arrive, read by a task of its own.
struct Collected {
    events: Arc<Mutex<Vec<Value>>>,
}

impl Collected {
    async fn open(base: &str, path: &str) -> Collected {
        let mut lines = WatchLines::open(base, path).await;
        assert_eq!(lines.code, 200, "{path}");
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        tokio::spawn(async move {
            while let Some(line) = lines.next().await {
                if line["type"] != "BOOKMARK" {
                    sink.lock().unwrap().push(line);
                }
            }
        });
        Collected { events }
    }

    fn len(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    fn described(&self) -> Vec<String> {
        self.events.lock().unwrap().iter().map(describe).collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shards_watches_together_are_the_unsharded_watch_under_churn() {
    let served = serve(Setup::default()).await;
    let rv = resource_version(&served.url, PODS).await;
    let tail = format!("watch=1&resourceVersion={rv}&timeoutSeconds=600");
    let whole = Collected::open(&served.url, &format!("{PODS}?{tail}")).await;
    let reference = Collected::open(served.sim.url(), &format!("{PODS}?{tail}")).await;
    let mut rng = SmallRng::seed_from_u64(SEED);
    // (split, kubecache's watch and the sim's, of each shard)
    let mut splits = Vec::new();
    for (path, n) in [
        (UID, 2),
        (UID, 7),
        (UID, 16),
        (NAMESPACE, 3),
        (NAMESPACE, 7),
    ] {
        let mut watches = Vec::new();
        for selector in split(&mut rng, path, n) {
            let query = format!("{PODS}?{tail}&shardSelector={}", encoded(&selector));
            let ours = Collected::open(&served.url, &query).await;
            let oracle = Collected::open(served.sim.url(), &query).await;
            watches.push((selector, ours, oracle));
        }
        splits.push((format!("{path} in {n}"), watches));
    }

    served.sim.set_churn(300.0);
    let store = served.sim.store().clone();
    wait::until("600 writes of churn", || store.revision() >= rv + 600).await;
    served.sim.set_churn(0.0);
    let last = served.sim.store().revision().to_string();
    let reached = |watch: &Collected| {
        let events = watch.events.lock().unwrap();
        events
            .last()
            .is_some_and(|e| e["object"]["metadata"]["resourceVersion"] == last.as_str())
    };
    wait::until("the unsharded watches reach the last write", || {
        reached(&whole) && reached(&reference)
    })
    .await;
    let expected = whole.described();
    assert_eq!(expected, reference.described(), "the API server's watch");
    assert!(expected.len() >= 600);

    for (name, watches) in &splits {
        wait::until(&format!("{name}: every event in some shard"), || {
            watches.iter().map(|(_, ours, _)| ours.len()).sum::<usize>() >= expected.len()
        })
        .await;
        let mut union: BTreeMap<u64, String> = BTreeMap::new();
        let mut shard_of: BTreeMap<String, usize> = BTreeMap::new();
        for (i, (selector, ours, oracle)) in watches.iter().enumerate() {
            let context = format!("seed {SEED}, {name}: {selector}");
            let events = ours.described();
            wait::until(&format!("{context}: the sim's shard"), || {
                oracle.len() >= events.len()
            })
            .await;
            assert_eq!(events, oracle.described(), "{context}: the sim's watch");
            let mut previous = 0;
            for (event, line) in events.iter().zip(ours.events.lock().unwrap().iter()) {
                let rv: u64 = line["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(rv > previous, "{context}: in order");
                previous = rv;
                assert!(
                    union.insert(rv, event.clone()).is_none(),
                    "{context}: {event} twice"
                );
                let key = event.split(' ').nth(1).unwrap().split('@').next().unwrap();
                let owner = *shard_of.entry(key.to_string()).or_insert(i);
                assert_eq!(owner, i, "{context}: {key} in two shards");
            }
        }
        let union: Vec<String> = union.into_values().collect();
        assert_eq!(union, expected, "seed {SEED}, {name}: the shards' union");
    }
}
