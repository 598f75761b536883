use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kubecache_wire::ChangeType;

use super::*;

// ---- helpers ---------------------------------------------------------------

fn object(
    namespace: &str,
    name: &str,
    rv: u64,
    labels: &[(&str, &str)],
    owners: &[&str],
    node: Option<&str>,
) -> Arc<CachedObject> {
    let mut labels: Vec<(Box<str>, Box<str>)> = labels
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    labels.sort();
    let json = format!(
        r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"{namespace}","resourceVersion":"{rv}"}}}}"#
    );
    Arc::new(CachedObject {
        key: ObjectKey::new(namespace, name),
        resource_version: rv,
        uid: format!("uid-{namespace}-{name}").into(),
        generation: Some(1),
        labels: labels.into(),
        annotations_hash: 0,
        owner_uids: owners.iter().map(|o| (*o).into()).collect(),
        fields: vec![node.map(Into::into)].into(),
        json: Bytes::from(json),
        type_meta_len: 31,
        encodings: Default::default(),
    })
}

fn pod(namespace: &str, name: &str, rv: u64) -> Arc<CachedObject> {
    object(namespace, name, rv, &[], &[], None)
}

fn config(max_events: usize, max_age: Duration) -> StoreConfig {
    StoreConfig {
        field_indexes: vec![IndexSpec {
            name: "node".into(),
            path: "spec.nodeName".into(),
        }],
        event_log: EventLogConfig {
            max_events,
            max_age,
        },
    }
}

fn small_store() -> (StoreWriter, StoreReader) {
    store(config(1000, Duration::from_secs(3600)))
}

fn keys<'a>(objects: impl Iterator<Item = &'a Arc<CachedObject>>) -> Vec<String> {
    objects.map(|o| o.key.to_string()).collect()
}

fn rvs(events: &[Arc<Event>]) -> Vec<u64> {
    events.iter().map(|e| e.resource_version).collect()
}

fn upsert(object: Arc<CachedObject>) -> Change {
    Change::Upsert(object)
}

fn delete(object: Arc<CachedObject>) -> Change {
    Change::Delete { object }
}

/// splitmix64: a deterministic generator for the randomized tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// ---- apply rules -----------------------------------------------------------

#[test]
fn a_change_not_newer_than_the_held_version_is_skipped_deletes_included() {
    let (mut writer, reader) = small_store();
    assert!(writer.apply(upsert(pod("a", "x", 10))).is_some());

    assert!(writer.apply(upsert(pod("a", "x", 10))).is_none(), "equal");
    assert!(writer.apply(upsert(pod("a", "x", 9))).is_none(), "older");
    assert!(
        writer.apply(delete(pod("a", "x", 10))).is_none(),
        "equal delete"
    );
    assert!(
        writer.apply(delete(pod("a", "x", 3))).is_none(),
        "older delete"
    );

    let key = ObjectKey::new("a", "x");
    assert_eq!(writer.get(&key).map(|o| o.resource_version), Some(10));
    assert_eq!(reader.current_resource_version(), 10);
    assert_eq!(
        rvs(&reader.events_since(0).unwrap()),
        [10],
        "skips log nothing"
    );
}

#[test]
fn deleting_an_absent_key_is_skipped() {
    let (mut writer, reader) = small_store();
    assert!(writer.apply(delete(pod("a", "x", 5))).is_none());
    assert_eq!(reader.current_resource_version(), 0);
    assert!(reader.events_since(0).unwrap().is_empty());
}

#[test]
fn new_keys_are_added_held_keys_modified_and_deletes_carry_the_previous_version() {
    let (mut writer, reader) = small_store();
    let added = writer.apply(upsert(pod("a", "x", 1))).unwrap();
    assert_eq!(
        (added.kind, added.previous.is_none()),
        (ChangeType::Added, true)
    );

    let modified = writer.apply(upsert(pod("a", "x", 2))).unwrap();
    assert_eq!(modified.kind, ChangeType::Modified);
    assert_eq!(modified.previous.as_ref().unwrap().resource_version, 1);

    let deleted = writer.apply(delete(pod("a", "x", 3))).unwrap();
    assert_eq!(deleted.kind, ChangeType::Deleted);
    assert_eq!(deleted.object.resource_version, 3);
    assert_eq!(deleted.previous.as_ref().unwrap().resource_version, 2);

    assert!(writer.is_empty());
    assert_eq!(reader.snapshot().resource_version(), 3);
    assert_eq!(rvs(&reader.events_since(0).unwrap()), [1, 2, 3]);
}

#[test]
fn changes_applied_out_of_resource_version_order_never_move_the_store_back() {
    let (mut writer, reader) = small_store();
    writer.apply(upsert(pod("a", "x", 20)));
    let older_key = writer.apply(upsert(pod("a", "y", 15))).unwrap();
    assert_eq!(older_key.resource_version, 20, "position is the store's rv");
    assert_eq!(older_key.object.resource_version, 15);
    assert_eq!(reader.current_resource_version(), 20);
}

// ---- indexes ---------------------------------------------------------------

#[test]
fn indexes_follow_label_owner_and_field_changes_and_deletes() {
    let (mut writer, reader) = small_store();
    let label = |k, v| IndexLookup::Label { key: k, value: v };
    let node = |v| IndexLookup::Field {
        name: "node",
        value: v,
    };
    writer.apply(upsert(object(
        "a",
        "x",
        1,
        &[("app", "web")],
        &["rs-1"],
        Some("n1"),
    )));
    writer.apply(upsert(object(
        "a",
        "y",
        2,
        &[("app", "web")],
        &["rs-1"],
        Some("n2"),
    )));

    let s = reader.snapshot();
    assert_eq!(keys(s.index(label("app", "web"))), ["a/x", "a/y"]);
    assert_eq!(keys(s.index(IndexLookup::Owner("rs-1"))), ["a/x", "a/y"]);
    assert_eq!(keys(s.index(node("n1"))), ["a/x"]);

    // Label, owner and field of a/x change.
    writer.apply(upsert(object(
        "a",
        "x",
        3,
        &[("app", "db")],
        &["rs-2"],
        Some("n2"),
    )));
    let s = reader.snapshot();
    assert_eq!(keys(s.index(label("app", "web"))), ["a/y"]);
    assert_eq!(keys(s.index(label("app", "db"))), ["a/x"]);
    assert_eq!(keys(s.index(IndexLookup::Owner("rs-1"))), ["a/y"]);
    assert_eq!(keys(s.index(IndexLookup::Owner("rs-2"))), ["a/x"]);
    assert_eq!(s.index_len(node("n1")), 0);
    assert_eq!(keys(s.index(node("n2"))), ["a/x", "a/y"]);
    // The index resolves to the current version of the object.
    assert_eq!(s.index(node("n2")).next().unwrap().resource_version, 3);

    // A label removed and a field cleared.
    writer.apply(upsert(object("a", "y", 4, &[], &["rs-1"], None)));
    let s = reader.snapshot();
    assert_eq!(s.index_len(label("app", "web")), 0);
    assert_eq!(keys(s.index(node("n2"))), ["a/x"]);

    // A delete removes every entry.
    writer.apply(delete(object(
        "a",
        "x",
        5,
        &[("app", "db")],
        &["rs-2"],
        Some("n2"),
    )));
    let s = reader.snapshot();
    assert_eq!(s.index_len(label("app", "db")), 0);
    assert_eq!(s.index_len(IndexLookup::Owner("rs-2")), 0);
    assert_eq!(s.index_len(node("n2")), 0);
    assert_eq!(keys(s.index(IndexLookup::Namespace("a"))), ["a/y"]);
    assert!(
        s.state.indexes.labels.is_empty(),
        "no empty value sets remain"
    );
}

/// What the indexes must be for a set of objects, computed from scratch.
#[derive(Debug, Default, PartialEq, Eq)]
struct Expected {
    namespaces: BTreeMap<String, BTreeSet<String>>,
    labels: BTreeMap<(String, String), BTreeSet<String>>,
    owners: BTreeMap<String, BTreeSet<String>>,
    nodes: BTreeMap<String, BTreeSet<String>>,
}

fn brute_force(snapshot: &Snapshot) -> Expected {
    let mut e = Expected::default();
    for o in snapshot.range(None, None) {
        let key = o.key.to_string();
        let ns = o.key.namespace().to_string();
        e.namespaces.entry(ns).or_default().insert(key.clone());
        for (k, v) in o.labels.iter() {
            let entry = e.labels.entry((k.to_string(), v.to_string()));
            entry.or_default().insert(key.clone());
        }
        for owner in o.owner_uids.iter() {
            e.owners
                .entry(owner.to_string())
                .or_default()
                .insert(key.clone());
        }
        if let Some(Some(node)) = o.fields.first() {
            e.nodes
                .entry(node.to_string())
                .or_default()
                .insert(key.clone());
        }
    }
    e
}

/// What the snapshot's indexes hold, read through their internals (so that
/// stale or empty entries the public lookups would not show are caught).
fn held(snapshot: &Snapshot) -> Expected {
    let set = |keys: &index::KeySet| -> BTreeSet<String> {
        let listed: Vec<String> = keys.iter_after(None).map(|k| k.to_string()).collect();
        assert!(listed.windows(2).all(|w| w[0] < w[1]), "sorted, unique");
        assert!(!listed.is_empty(), "no empty set is kept");
        assert_eq!(listed.len(), keys.len());
        listed.into_iter().collect()
    };
    let indexes = &snapshot.state.indexes;
    let mut e = Expected::default();
    for (ns, count) in indexes.namespaces.iter() {
        let listed: BTreeSet<String> = keys(snapshot.index(IndexLookup::Namespace(ns)))
            .into_iter()
            .collect();
        assert_eq!(listed.len(), *count, "namespace count of {ns}");
        e.namespaces.insert(ns.to_string(), listed);
    }
    for (k, values) in indexes.labels.iter() {
        assert!(!values.is_empty(), "no empty label key is kept");
        for (v, keys) in values.iter() {
            e.labels.insert((k.to_string(), v.to_string()), set(keys));
        }
    }
    for (owner, keys) in indexes.owners.iter() {
        e.owners.insert(owner.to_string(), set(keys));
    }
    for (node, keys) in indexes.fields[0].iter() {
        e.nodes.insert(node.to_string(), set(keys));
    }
    e
}

fn assert_public_lookups_agree(snapshot: &Snapshot, expected: &Expected) {
    for ((k, v), want) in &expected.labels {
        let lookup = IndexLookup::Label { key: k, value: v };
        let got: BTreeSet<String> = keys(snapshot.index(lookup)).into_iter().collect();
        assert_eq!(&got, want);
        assert_eq!(snapshot.index_len(lookup), want.len());
    }
    for (owner, want) in &expected.owners {
        let got: BTreeSet<String> = keys(snapshot.index(IndexLookup::Owner(owner)))
            .into_iter()
            .collect();
        assert_eq!(&got, want);
    }
}

#[test]
fn indexes_equal_a_brute_force_recomputation_after_thousands_of_random_changes() {
    let (mut writer, reader) = store(config(100, Duration::from_secs(3600)));
    let mut rng = Rng(0x5EED);
    let mut rv = 0;
    let mut kept: Vec<(Snapshot, Expected)> = Vec::new();
    // Few names and values, so that keys collide, sets grow past the
    // small-set limit and shrink again, and values come and go.
    let namespaces = ["a", "a-b", "b", ""];
    let label_keys = ["app", "tier", "team"];
    for step in 0..20_000 {
        rv += 1;
        let ns = namespaces[rng.below(4) as usize];
        let name = format!("p{}", rng.below(120));
        let key = ObjectKey::new(ns, &name);
        if rng.below(5) == 0
            && let Some(held) = writer.get(&key)
        {
            let gone = object(ns, &name, rv, &[], &[], None);
            let deleted = writer.apply(delete(gone)).unwrap();
            assert!(Arc::ptr_eq(deleted.previous.as_ref().unwrap(), &held));
            continue;
        }
        let mut labels = Vec::new();
        for k in label_keys {
            if rng.below(3) > 0 {
                labels.push((k, ["1", "2", "3", "4"][rng.below(4) as usize]));
            }
        }
        let owners: Vec<String> = (0..rng.below(3))
            .map(|_| format!("rs-{}", rng.below(3)))
            .collect();
        let owners: Vec<&str> = owners.iter().map(String::as_str).collect();
        let node = format!("n{}", rng.below(3));
        let node = (rng.below(4) > 0).then_some(node.as_str());
        writer.apply(upsert(object(ns, &name, rv, &labels, &owners, node)));

        if step % 500 == 0 {
            let s = reader.snapshot();
            let expected = brute_force(&s);
            assert_eq!(held(&s), expected, "after step {step}");
            assert_public_lookups_agree(&s, &expected);
            if step % 2000 == 0 {
                kept.push((s, expected));
            }
        }
    }
    let s = reader.snapshot();
    assert!(s.len() > 200, "the test exercised a populated store");
    assert!(
        s.state.indexes.labels.iter().any(|(_, values)| values
            .iter()
            .any(|(_, keys)| matches!(keys, index::KeySet::Large(_)))),
        "some sets outgrew the small-set limit"
    );
    assert_eq!(held(&s), brute_force(&s));
    // Old snapshots still show exactly what they showed when taken.
    for (old, expected) in &kept {
        assert_eq!(&held(old), expected);
        assert_eq!(&brute_force(old), expected);
    }
}

// ---- snapshots and ranges --------------------------------------------------

#[test]
fn a_snapshot_taken_before_writes_still_sees_the_old_objects_and_index_contents() {
    let (mut writer, reader) = small_store();
    writer.apply(upsert(object(
        "a",
        "x",
        1,
        &[("app", "web")],
        &[],
        Some("n1"),
    )));
    writer.apply(upsert(object("a", "y", 2, &[("app", "web")], &[], None)));
    let before = reader.snapshot();

    writer.apply(upsert(object(
        "a",
        "x",
        3,
        &[("app", "db")],
        &[],
        Some("n2"),
    )));
    writer.apply(delete(pod("a", "y", 4)));
    writer.apply(upsert(pod("b", "z", 5)));
    writer.advance(9);

    let web = IndexLookup::Label {
        key: "app",
        value: "web",
    };
    assert_eq!(before.resource_version(), 2);
    assert_eq!(keys(before.range(None, None)), ["a/x", "a/y"]);
    assert_eq!(
        before
            .get(&ObjectKey::new("a", "x"))
            .unwrap()
            .resource_version,
        1
    );
    assert_eq!(keys(before.index(web)), ["a/x", "a/y"]);
    assert_eq!(before.index_len(IndexLookup::Namespace("b")), 0);

    let after = reader.snapshot();
    assert_eq!(after.resource_version(), 9);
    assert_eq!(keys(after.range(None, None)), ["a/x", "b/z"]);
    assert_eq!(after.index_len(web), 0);
}

#[test]
fn range_pages_in_key_order_and_restricts_to_one_namespace() {
    let (mut writer, reader) = small_store();
    // "a-b/..." sorts before "a/..." ('-' < '/'), as in etcd.
    let names = [
        ("a", "2"),
        ("a-b", "1"),
        ("a", "1"),
        ("b", "1"),
        ("a", "3"),
        ("", "node"),
    ];
    for (i, (ns, name)) in names.iter().enumerate() {
        writer.apply(upsert(pod(ns, name, i as u64 + 1)));
    }
    let s = reader.snapshot();
    assert_eq!(
        keys(s.range(None, None)),
        ["a-b/1", "a/1", "a/2", "a/3", "b/1", "node"]
    );
    assert_eq!(keys(s.range(Some("a"), None)), ["a/1", "a/2", "a/3"]);

    // Pages of two within namespace "a", each continuing after the last key.
    let mut pages = Vec::new();
    let mut after: Option<ObjectKey> = None;
    loop {
        let page: Vec<_> = s
            .range(Some("a"), after.as_ref())
            .take(2)
            .cloned()
            .collect();
        if page.is_empty() {
            break;
        }
        after = Some(page.last().unwrap().key.clone());
        pages.push(keys(page.iter()));
    }
    assert_eq!(pages, [vec!["a/1", "a/2"], vec!["a/3"]]);

    // A continue key outside the namespace: before it starts at its first
    // key, after it is empty.
    assert_eq!(
        keys(s.range(Some("a"), Some(&ObjectKey::new("a-b", "1")))),
        ["a/1", "a/2", "a/3"]
    );
    assert!(
        s.range(Some("a"), Some(&ObjectKey::new("b", "0")))
            .next()
            .is_none()
    );
    assert_eq!(keys(s.range(Some(""), None)), ["node"]);
    assert_eq!(keys(s.index(IndexLookup::Namespace(""))), ["node"]);
    assert_eq!(
        keys(s.index_range(IndexLookup::Namespace("a"), Some(&ObjectKey::new("a", "1")))),
        ["a/2", "a/3"]
    );
    assert_eq!(s.index_len(IndexLookup::Namespace("a")), 3);
}

#[test]
fn index_results_page_in_key_order() {
    let (mut writer, reader) = small_store();
    for i in 0..100u64 {
        writer.apply(upsert(object(
            "ns",
            &format!("p{i:03}"),
            i + 1,
            &[("app", "web")],
            &[],
            None,
        )));
    }
    let s = reader.snapshot();
    let web = IndexLookup::Label {
        key: "app",
        value: "web",
    };
    let after = ObjectKey::new("ns", "p049");
    let page = keys(s.index_range(web, Some(&after)).take(3));
    assert_eq!(page, ["ns/p050", "ns/p051", "ns/p052"]);
    assert_eq!(s.index(web).count(), 100);
}

// ---- event log -------------------------------------------------------------

#[test]
fn events_since_covers_the_ring_and_is_too_old_past_its_oldest_event_by_count() {
    let (mut writer, reader) = store(config(3, Duration::from_secs(3600)));
    for rv in 1..=5 {
        writer.apply(upsert(pod("a", &format!("p{rv}"), rv * 10)));
    }
    // The ring holds 30, 40, 50; 10 and 20 were evicted.
    assert_eq!(rvs(&reader.events_since(20).unwrap()), [30, 40, 50]);
    assert_eq!(rvs(&reader.events_since(25).unwrap()), [30, 40, 50]);
    assert_eq!(rvs(&reader.events_since(40).unwrap()), [50]);
    assert!(reader.events_since(50).unwrap().is_empty());
    assert!(reader.events_since(70).unwrap().is_empty(), "a future rv");
    assert_eq!(reader.events_since(19), Err(TooOld { oldest: 20 }));
    let held: usize = reader
        .events_since(20)
        .unwrap()
        .iter()
        .map(|e| e.pinned())
        .sum();
    assert_eq!(
        reader.event_log_status(),
        EventLogStatus {
            oldest: 20,
            newest: 50,
            events: 3,
            bytes: held,
        }
    );
}

#[test]
fn the_store_counts_the_bytes_of_the_objects_it_holds() {
    let (mut writer, reader) = small_store();
    let counted = |reader: &StoreReader| {
        let snapshot = reader.snapshot();
        let sum: usize = snapshot.range(None, None).map(|o| o.size()).sum();
        (snapshot.bytes(), sum)
    };
    writer.apply(upsert(pod("a", "x", 10)));
    writer.apply(upsert(pod("a", "y", 11)));
    let (bytes, sum) = counted(&reader);
    assert!(bytes > 0);
    assert_eq!(bytes, sum);
    let mut bigger = (*pod("a", "x", 12)).clone();
    bigger.json = Bytes::from(vec![b' '; 10_000]);
    writer.apply(upsert(Arc::new(bigger)));
    let (bytes, sum) = counted(&reader);
    assert_eq!(bytes, sum);
    writer.apply(delete(pod("a", "y", 13)));
    writer.apply(delete(pod("a", "x", 14)));
    assert_eq!(counted(&reader), (0, 0));
}

#[test]
fn events_since_the_current_resource_version_is_empty_even_when_no_event_was_ever_logged() {
    let (mut writer, reader) = small_store();
    assert!(reader.events_since(0).unwrap().is_empty());
    writer.advance(7);
    assert!(reader.events_since(7).unwrap().is_empty());
    assert!(reader.events_since(0).unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn events_older_than_max_age_leave_the_ring_and_replays_from_before_them_are_too_old() {
    let (mut writer, reader) = store(config(1000, Duration::from_secs(60)));
    writer.apply(upsert(pod("a", "x", 10)));
    tokio::time::advance(Duration::from_secs(30)).await;
    writer.apply(upsert(pod("a", "y", 20)));
    tokio::time::advance(Duration::from_secs(29)).await;
    writer.advance(25);
    assert_eq!(
        rvs(&reader.events_since(0).unwrap()),
        [10, 20],
        "59 s old: kept"
    );

    tokio::time::advance(Duration::from_secs(1)).await;
    writer.advance(26); // the age bound is enforced when the writer moves
    assert_eq!(reader.events_since(9), Err(TooOld { oldest: 10 }));
    assert_eq!(rvs(&reader.events_since(10).unwrap()), [20]);

    tokio::time::advance(Duration::from_secs(30)).await;
    writer.apply(upsert(pod("a", "z", 30)));
    assert_eq!(reader.events_since(10), Err(TooOld { oldest: 20 }));
    assert_eq!(rvs(&reader.events_since(20).unwrap()), [30]);
}

#[test]
fn replays_from_before_a_list_are_too_old_but_live_subscribers_keep_the_listed_events() {
    let (mut writer, reader) = small_store();
    let mut live = reader.subscribe_from(0).unwrap();
    writer.apply(upsert(pod("a", "x", 7)));
    writer.apply(upsert(pod("a", "y", 3)));
    writer.mark_listed(100);
    writer.apply(upsert(pod("a", "z", 101)));

    assert_eq!(reader.events_since(99), Err(TooOld { oldest: 100 }));
    assert_eq!(rvs(&reader.events_since(100).unwrap()), [101]);
    let got: Vec<u64> = (0..3)
        .map(|_| live.try_recv().unwrap().object.resource_version)
        .collect();
    assert_eq!(got, [7, 3, 101]);
}

#[tokio::test]
async fn a_subscription_replays_then_follows_live_events_without_gap_or_duplicate() {
    let (mut writer, reader) = small_store();
    for rv in 1..=3 {
        writer.apply(upsert(pod("a", &format!("p{rv}"), rv)));
    }
    let mut sub = reader.subscribe_from(1).unwrap();
    writer.apply(upsert(pod("a", "p4", 4)));
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(sub.recv().await.unwrap().resource_version);
    }
    assert_eq!(got, [2, 3, 4]);
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Empty);
}

#[test]
fn a_subscription_from_a_future_resource_version_skips_events_up_to_it() {
    let (mut writer, reader) = small_store();
    let mut sub = reader.subscribe_from(5).unwrap();
    for rv in 4..=6 {
        writer.apply(upsert(pod("a", &format!("p{rv}"), rv)));
    }
    assert_eq!(sub.try_recv().unwrap().resource_version, 6);
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Empty);
}

#[test]
fn subscriptions_from_any_point_see_every_later_event_once_in_order_while_the_writer_runs() {
    const EVENTS: u64 = 20_000;
    let (mut writer, reader) = store(config(EVENTS as usize, Duration::from_secs(3600)));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let mut rng = Rng(7);
    let starts: Vec<u64> = (0..16).map(|_| rng.below(EVENTS / 2)).collect();
    let subscribers: Vec<_> = starts
        .iter()
        .enumerate()
        .map(|(i, &from)| {
            let reader = reader.clone();
            runtime.spawn(async move {
                // Subscribe while the writer is running, from a position
                // the store has reached.
                reader
                    .wait_for(from, Duration::from_secs(60))
                    .await
                    .unwrap();
                let mut sub = reader.subscribe_from(from).unwrap();
                let mut seen = Vec::new();
                loop {
                    match sub.recv().await {
                        Ok(event) => seen.push(event.resource_version),
                        Err(RecvError::Closed) => break,
                        Err(lag) => panic!("subscriber {i}: {lag}"),
                    }
                    if i % 2 == 0 && seen.len() % 97 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                (from, seen)
            })
        })
        .collect();
    let writing = std::thread::spawn(move || {
        for rv in 1..=EVENTS {
            // Keys repeat, so most events are modifications.
            let name = format!("p{}", rv % 500);
            writer.apply(upsert(pod("ns", &name, rv)));
            if rv % 500 == 0 {
                // Let subscribers join and catch up mid-stream.
                std::thread::sleep(Duration::from_micros(300));
            }
        }
    });
    writing.join().unwrap();
    for subscriber in subscribers {
        let (from, seen) = runtime.block_on(subscriber).unwrap();
        let want: Vec<u64> = (from + 1..=EVENTS).collect();
        assert!(
            seen == want,
            "from {from}: got {} events, first {:?}",
            seen.len(),
            seen.first()
        );
    }
}

#[test]
fn a_snapshot_and_its_subscription_together_hold_every_change_once_even_out_of_order() {
    // Changes applied out of resourceVersion order (a relist diff) do not
    // move the resourceVersion, so only taking the snapshot and the
    // subscription together keeps them apart exactly.
    const KEYS: u64 = 3_000;
    let (mut writer, reader) = store(config(KEYS as usize * 2, Duration::from_secs(3600)));
    writer.apply(upsert(pod("ns", "newest", KEYS + 1)));
    let writing = std::thread::spawn(move || {
        for rv in 1..=KEYS {
            writer.apply(upsert(pod("ns", &format!("p{rv}"), rv)));
        }
        writer
    });
    let mut taken = Vec::new();
    while taken.len() < 50 {
        taken.push(reader.snapshot_and_subscribe());
    }
    let writer = writing.join().unwrap();
    drop(writer);
    for (snapshot, mut sub) in taken {
        assert_eq!(snapshot.resource_version(), KEYS + 1, "the rv never moves");
        let mut seen: Vec<String> = keys(snapshot.range(None, None));
        while let Ok(event) = sub.try_recv() {
            seen.push(event.object.key.to_string());
        }
        seen.sort();
        let before = seen.len();
        seen.dedup();
        assert_eq!(before, seen.len(), "a change seen twice");
        assert_eq!(seen.len() as u64, KEYS + 1, "a change lost");
    }
}

#[test]
fn subscriptions_at_the_same_point_of_the_log_have_the_same_sequence() {
    let (mut writer, reader) = small_store();
    for rv in 1..=3 {
        writer.apply(upsert(pod("a", &format!("p{rv}"), rv)));
    }
    let (_, live) = reader.snapshot_and_subscribe();
    let mut replay = reader.subscribe_from(1).unwrap();
    assert!(replay.sequence() < live.sequence());
    while replay.try_recv().is_ok() {}
    assert_eq!(replay.sequence(), live.sequence());
}

#[test]
fn a_subscriber_that_falls_out_of_the_ring_is_told_exactly_how_many_events_it_missed() {
    let (mut writer, reader) = store(config(4, Duration::from_secs(3600)));
    let mut sub = reader.subscribe_from(0).unwrap();
    writer.apply(upsert(pod("a", "p1", 1)));
    assert_eq!(sub.try_recv().unwrap().resource_version, 1);
    for rv in 2..=10 {
        writer.apply(upsert(pod("a", &format!("p{rv}"), rv)));
    }
    // The ring holds 7..=10; the subscriber had read 1 and lost 2..=6.
    assert_eq!(sub.pending(), 9);
    assert_eq!(
        sub.try_recv().unwrap_err(),
        TryRecvError::Lagged { skipped: 5 }
    );
    assert_eq!(
        sub.try_recv().unwrap().resource_version,
        7,
        "goes on at the oldest"
    );
    // Resubscribing from what it delivered last is refused: it must relist.
    assert_eq!(reader.subscribe_from(1).unwrap_err(), TooOld { oldest: 6 });
}

#[tokio::test]
async fn recv_reports_lag_the_same_way() {
    let (mut writer, reader) = store(config(2, Duration::from_secs(3600)));
    let mut sub = reader.subscribe_from(0).unwrap();
    for rv in 1..=5 {
        writer.apply(upsert(pod("a", &format!("p{rv}"), rv)));
    }
    assert_eq!(
        sub.recv().await.unwrap_err(),
        RecvError::Lagged { skipped: 3 }
    );
    assert_eq!(sub.recv().await.unwrap().resource_version, 4);
}

#[tokio::test(start_paused = true)]
async fn a_recv_cancelled_while_waiting_loses_nothing() {
    let (mut writer, reader) = small_store();
    let mut sub = reader.subscribe_from(0).unwrap();
    let waited = tokio::time::timeout(Duration::from_millis(10), sub.recv()).await;
    assert!(waited.is_err(), "nothing to receive yet");
    writer.apply(upsert(pod("a", "x", 1)));
    assert_eq!(sub.recv().await.unwrap().resource_version, 1);
}

#[tokio::test]
async fn a_waiting_subscriber_is_woken_by_the_next_event() {
    let (mut writer, reader) = small_store();
    let mut sub = reader.subscribe_from(0).unwrap();
    let waiting = tokio::spawn(async move { sub.recv().await.map(|e| e.resource_version) });
    tokio::task::yield_now().await;
    writer.apply(upsert(pod("a", "x", 1)));
    assert_eq!(waiting.await.unwrap(), Ok(1));
}

#[tokio::test]
async fn subscribers_drain_the_ring_then_see_closed_when_the_writer_is_dropped() {
    let (mut writer, reader) = small_store();
    let mut sub = reader.subscribe_from(0).unwrap();
    let mut idle = reader.subscribe_from(0).unwrap();
    let _ = idle.try_recv();
    writer.apply(upsert(pod("a", "x", 1)));
    writer.apply(upsert(pod("a", "y", 2)));
    let waiting = tokio::spawn(async move {
        let mut idle_seen = Vec::new();
        loop {
            match idle.recv().await {
                Ok(e) => idle_seen.push(e.resource_version),
                Err(e) => return (idle_seen, e),
            }
        }
    });
    drop(writer);
    assert_eq!(sub.recv().await.unwrap().resource_version, 1);
    assert_eq!(sub.recv().await.unwrap().resource_version, 2);
    assert_eq!(sub.recv().await.unwrap_err(), RecvError::Closed);
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Closed);
    assert_eq!(waiting.await.unwrap(), (vec![1, 2], RecvError::Closed));
    assert!(reader.is_closed());
}

// ---- resourceVersion waits and readiness -----------------------------------

#[tokio::test(start_paused = true)]
async fn wait_for_resolves_when_an_apply_reaches_the_resource_version() {
    let (mut writer, reader) = small_store();
    let waiting = {
        let reader = reader.clone();
        tokio::spawn(async move { reader.wait_for(5, Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    writer.apply(upsert(pod("a", "x", 4)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiting.is_finished(), "4 is not 5");
    writer.apply(upsert(pod("a", "y", 6)));
    assert_eq!(waiting.await.unwrap(), Ok(6));
    assert!(reader.snapshot().resource_version() >= 6);
    assert_eq!(
        reader.wait_for(3, Duration::ZERO).await,
        Ok(6),
        "already there"
    );
}

#[tokio::test(start_paused = true)]
async fn wait_for_resolves_when_a_bookmark_advances_the_store() {
    let (mut writer, reader) = small_store();
    let waiting = {
        let reader = reader.clone();
        tokio::spawn(async move { reader.wait_for(50, Duration::from_secs(10)).await })
    };
    tokio::task::yield_now().await;
    writer.advance(50);
    assert_eq!(waiting.await.unwrap(), Ok(50));
    assert_eq!(reader.snapshot().resource_version(), 50);
    writer.advance(40);
    assert_eq!(reader.current_resource_version(), 50, "never moves back");
}

#[tokio::test(start_paused = true)]
async fn wait_for_times_out_when_the_store_does_not_get_there() {
    let (mut writer, reader) = small_store();
    writer.advance(10);
    let started = tokio::time::Instant::now();
    let result = reader.wait_for(11, Duration::from_millis(250)).await;
    assert_eq!(
        result,
        Err(WaitTimeout {
            wanted: 11,
            current: 10
        })
    );
    assert_eq!(started.elapsed(), Duration::from_millis(250));
}

#[tokio::test]
async fn readiness_follows_the_writer_and_ready_waits_for_it() {
    let (mut writer, reader) = small_store();
    assert!(!reader.is_ready());
    let waiting = {
        let reader = reader.clone();
        tokio::spawn(async move { reader.ready().await })
    };
    tokio::task::yield_now().await;
    writer.set_ready();
    assert_eq!(waiting.await.unwrap(), Ok(()));
    assert!(reader.is_ready());

    writer.set_not_ready("relisting after 410 Gone");
    assert_eq!(
        reader.readiness(),
        Readiness::NotReady {
            reason: Arc::from("relisting after 410 Gone")
        }
    );
    let waiting = {
        let reader = reader.clone();
        tokio::spawn(async move { reader.ready().await })
    };
    tokio::task::yield_now().await;
    drop(writer);
    assert_eq!(waiting.await.unwrap(), Err(StoreClosed), "never synced");
}

// ---- configuration ---------------------------------------------------------

#[test]
fn a_configuration_that_cannot_work_is_refused_naming_the_field() {
    assert_eq!(StoreConfig::default().validate(), Ok(()));
    let spec = |name: &str| IndexSpec {
        name: name.into(),
        path: "spec.nodeName".into(),
    };
    let twice = StoreConfig {
        field_indexes: vec![spec("node"), spec("node")],
        ..StoreConfig::default()
    };
    let err = twice.validate().unwrap_err().to_string();
    assert!(err.contains("field_indexes[1].name"), "{err}");

    let unnamed = StoreConfig {
        field_indexes: vec![spec("")],
        ..StoreConfig::default()
    };
    assert!(
        unnamed
            .validate()
            .unwrap_err()
            .0
            .starts_with("field_indexes[0].name")
    );

    let mut no_log = StoreConfig::default();
    no_log.event_log.max_events = 0;
    assert!(
        no_log
            .validate()
            .unwrap_err()
            .0
            .starts_with("event_log.max_events")
    );
}

#[tokio::test]
async fn a_dropped_writer_leaves_a_ready_store_not_ready_and_says_why() {
    let (mut writer, reader) = small_store();
    writer.set_ready();
    drop(writer);
    assert_eq!(
        reader.readiness(),
        Readiness::NotReady {
            reason: Arc::from("the reflector stopped")
        }
    );
    assert_eq!(reader.ready().await, Err(StoreClosed));
}

#[test]
fn the_event_log_counts_the_versions_it_keeps_alive_beyond_the_store() {
    let (mut writer, reader) = store(config(2, Duration::from_secs(3600)));
    let versions: Vec<_> = (1..=3).map(|rv| pod("a", "x", rv)).collect();
    for version in &versions {
        writer.apply(upsert(version.clone()));
    }
    // The ring holds the 2nd and 3rd versions' events: they keep the 1st
    // and 2nd alive; the 3rd is the store's.
    let size = |i: usize| versions[i].size();
    assert_eq!(reader.event_log_status().bytes, size(0) + size(1));
    writer.apply(delete(pod("a", "x", 4)));
    // Now the 3rd version's event and the deletion: the 2nd and 3rd
    // versions, and the deleted state.
    assert_eq!(
        reader.event_log_status().bytes,
        size(1) + size(2) + pod("a", "x", 4).size()
    );
}
