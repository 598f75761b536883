use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use proptest::prelude::*;

use super::format::{Checksummed, Header, ObjectRecord};
use super::*;
use crate::store::{
    EventLogConfig, IndexLookup, IndexSpec, StoreConfig, TooOld, TryRecvError, store,
};

const CLUSTER: &str = "kube-system-uid@https://10.0.0.1:443";

fn transform() -> Transform {
    Transform::default()
        .index_field("spec.nodeName")
        .expect("a valid path")
}

fn config() -> StoreConfig {
    StoreConfig {
        field_indexes: vec![IndexSpec {
            name: "node".into(),
            path: "spec.nodeName".into(),
        }],
        event_log: EventLogConfig {
            max_events: 1000,
            max_age: Duration::from_secs(3600),
        },
    }
}

/// A fresh directory for one test, removed with it.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn directory(test: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("kubecache-state-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("a temporary directory");
    Scratch(dir)
}

fn state_file(path: PathBuf) -> StateFile {
    StateFile::new(path, CLUSTER, ApiResource::pods(), transform()).expect("a lossless transform")
}

/// A pod as the API server sends it (managedFields included), decoded as
/// the reflector decodes it.
fn pod(namespace: &str, name: &str, rv: u64, node: &str, phase: &str) -> Arc<CachedObject> {
    let raw = format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"{namespace}","uid":"uid-{name}","resourceVersion":"{rv}","generation":2,"labels":{{"app":"{name}","tier":"web"}},"annotations":{{"a":"{phase}"}},"ownerReferences":[{{"uid":"rs-{namespace}"}}],"managedFields":[{{"manager":"kubelet"}}]}},"spec":{{"nodeName":"{node}"}},"status":{{"phase":"{phase}"}}}}"#
    );
    Arc::new(decode_object(raw.as_bytes(), "Pod", "v1", &transform()).expect("a valid pod"))
}

fn modified(object: &CachedObject, rv: u64, node: &str, phase: &str) -> Arc<CachedObject> {
    pod(object.key.namespace(), object.key.name(), rv, node, phase)
}

/// A store listed at 20 (20 pods), then a history of every kind of event:
/// changes of listed pods, an add, a delete and a re-add of one key, a
/// bookmark.
fn store_with_history() -> (StoreWriter, StoreReader) {
    let (mut writer, reader) = store(config());
    for i in 0..20u64 {
        let namespace = format!("ns-{}", i % 3);
        writer.apply(Change::Upsert(pod(
            &namespace,
            &format!("p{i:02}"),
            i + 1,
            "node-a",
            "Pending",
        )));
    }
    writer.mark_listed(20);
    let listed = |i: usize| {
        writer
            .snapshot()
            .range(None, None)
            .nth(i)
            .cloned()
            .expect("listed")
    };
    let (first, second, third) = (listed(0), listed(1), listed(2));
    writer.apply(Change::Upsert(modified(&first, 21, "node-b", "Running")));
    writer.apply(Change::Upsert(modified(&first, 22, "node-b", "Succeeded")));
    writer.apply(Change::Delete {
        object: Arc::new(second.at_resource_version(23)),
    });
    writer.apply(Change::Upsert(pod("ns-9", "new", 24, "node-c", "Pending")));
    writer.apply(Change::Upsert(modified(&third, 25, "node-c", "Running")));
    let third = writer.get(&third.key).expect("held");
    writer.apply(Change::Delete {
        object: Arc::new(third.at_resource_version(26)),
    });
    writer.apply(Change::Upsert(modified(&third, 27, "node-a", "Pending")));
    writer.advance(30);
    (writer, reader)
}

fn restored(file: &StateFile) -> (StoreWriter, StoreReader) {
    let saved = file.load().expect("a valid file").expect("a file");
    let (mut writer, reader) = store(config());
    writer.restore(saved).expect("a new store");
    (writer, reader)
}

/// What a watcher sees of an event.
fn seen(event: &Event) -> (ChangeType, u64, Bytes, Option<Bytes>) {
    let previous = event.previous.as_ref().map(|p| p.json.clone());
    (
        event.kind,
        event.resource_version,
        event.object.json.clone(),
        previous,
    )
}

fn rvs(events: &[Arc<Event>]) -> Vec<u64> {
    events.iter().map(|e| e.resource_version).collect()
}

fn all_seen(events: &[Arc<Event>]) -> Vec<(ChangeType, u64, Bytes, Option<Bytes>)> {
    events.iter().map(|e| seen(e)).collect()
}

fn index_answers(reader: &StoreReader) -> Vec<Vec<String>> {
    let snapshot = reader.snapshot();
    let lookups = [
        IndexLookup::Namespace("ns-1"),
        IndexLookup::Namespace("ns-9"),
        IndexLookup::Label {
            key: "tier",
            value: "web",
        },
        IndexLookup::Label {
            key: "app",
            value: "p02",
        },
        IndexLookup::Owner("rs-ns-0"),
        IndexLookup::Field {
            name: "node",
            value: "node-a",
        },
        IndexLookup::Field {
            name: "node",
            value: "node-b",
        },
        IndexLookup::Field {
            name: "node",
            value: "node-c",
        },
    ];
    lookups
        .iter()
        .map(|lookup| snapshot.index(*lookup).map(|o| o.key.to_string()).collect())
        .collect()
}

#[test]
fn round_trip_restores_objects_indexes_resource_version_and_history() {
    let dir = directory("round-trip");
    let file = state_file(dir.join("pods.state"));
    let (_writer, original) = store_with_history();
    let before = SystemTime::now() - Duration::from_millis(1);
    let stats = file.save(&original, 29).expect("saved");
    assert_eq!((stats.objects, stats.events), (20, 7), "{stats:?}");

    let saved = file.load().expect("a valid file").expect("a file");
    assert_eq!(
        (
            saved.resource_version,
            saved.upstream_resource_version,
            saved.len(),
            saved.events()
        ),
        (30, 29, 20, 7)
    );
    assert!(saved.written_at >= before && saved.written_at <= SystemTime::now());
    let (_restored_writer, restored) = {
        let (mut writer, reader) = store(config());
        writer.restore(saved).expect("a new store");
        (writer, reader)
    };

    let objects = |r: &StoreReader| r.snapshot().range(None, None).cloned().collect::<Vec<_>>();
    assert_eq!(
        objects(&restored),
        objects(&original),
        "objects, bytes and derived fields"
    );
    assert_eq!(index_answers(&restored), index_answers(&original));
    assert_eq!(restored.current_resource_version(), 30);
    assert_eq!(restored.snapshot().resource_version(), 30);
    assert_eq!(
        restored.event_log_status().oldest,
        original.event_log_status().oldest
    );
    assert_eq!(
        restored.event_log_status().newest,
        original.event_log_status().newest
    );
    assert!(
        !restored.is_ready(),
        "the caller decides when a restored store is ready"
    );
    for rv in 20..=30 {
        let want = all_seen(&original.events_since(rv).expect("covered"));
        assert_eq!(
            all_seen(&restored.events_since(rv).expect("covered")),
            want,
            "from {rv}"
        );
        let mut subscription = restored.subscribe_from(rv).expect("covered");
        let mut got = Vec::new();
        while let Ok(event) = subscription.try_recv() {
            got.push(seen(&event));
        }
        assert_eq!(got, want, "subscribed from {rv}");
    }
    assert_eq!(
        restored.events_since(19),
        Err(TooOld { oldest: 20 }),
        "history starts where it did"
    );
}

#[test]
fn restored_events_share_the_stores_objects() {
    let dir = directory("sharing");
    let file = state_file(dir.join("pods.state"));
    let (_writer, original) = store_with_history();
    file.save(&original, 30).expect("saved");
    let (_writer, restored) = restored(&file);
    let events = restored.events_since(20).expect("covered");
    let snapshot = restored.snapshot();
    let current = events.last().expect("events");
    assert!(Arc::ptr_eq(
        &current.object,
        snapshot.get(&current.object.key).expect("held")
    ));
    // p00's two changes: the second's previous is the first's object.
    assert!(Arc::ptr_eq(
        events[1].previous.as_ref().expect("modified"),
        &events[0].object
    ));
}

/// `object` with the bytes `A FF FE B` for its `status.phase`, as a
/// protobuf upstream gives a string that is not UTF-8.
fn with_raw_phase(object: &CachedObject) -> Arc<CachedObject> {
    let strings = RawStrings::new(vec![kubecache_wire::protobuf::RawString::value(
        "/status/phase",
        *b"A\xff\xfeB",
    )]);
    Arc::new(object.clone().with_raw_strings(strings))
}

#[test]
fn strings_that_are_not_utf8_are_kept_through_a_restart_in_objects_and_events() {
    let dir = directory("raw-strings");
    let file = state_file(dir.join("pods.state"));
    let (mut writer, original) = store(config());
    let held = pod("ns", "held", 1, "node-a", "A\u{fffd}\u{fffd}B");
    writer.apply(Change::Upsert(with_raw_phase(&held)));
    writer.apply(Change::Upsert(pod("ns", "plain", 2, "node-a", "Pending")));
    writer.mark_listed(2);
    // A superseded version no earlier event carries (the listed one) is
    // written as an event's previous version.
    let label = modified(&held, 3, "node-b", "A\u{fffd}\u{fffd}B");
    writer.apply(Change::Upsert(with_raw_phase(&label)));
    let changed = pod("ns", "gone", 4, "node-a", "A\u{fffd}\u{fffd}B");
    writer.apply(Change::Upsert(with_raw_phase(&changed)));
    writer.apply(Change::Delete {
        object: Arc::new(with_raw_phase(&changed).at_resource_version(5)),
    });
    file.save(&original, 5).expect("saved");
    let (_writer, restored) = restored(&file);
    let snapshot = restored.snapshot();
    let strings = |object: &CachedObject| object.raw_strings().map(|s| format!("{s:?}"));
    let kept = Some(r#"[value "/status/phase" = [41, ff, fe, 42]]"#.to_string());
    let key = |name: &str| ObjectKey::new("ns", name);
    assert_eq!(strings(snapshot.get(&key("held")).expect("held")), kept);
    assert_eq!(strings(snapshot.get(&key("plain")).expect("held")), None);
    let events = restored.events_since(2).expect("covered");
    assert_eq!(rvs(&events), [3, 4, 5]);
    for event in &events {
        assert_eq!(strings(&event.object), kept, "{}", event.resource_version);
    }
    for event in [&events[0], &events[2]] {
        let previous = event.previous.as_ref().expect("a previous version");
        assert_eq!(strings(previous), kept, "{}", event.resource_version);
    }
}

#[test]
fn restore_into_a_store_that_changed_is_refused() {
    let dir = directory("not-new");
    let file = state_file(dir.join("pods.state"));
    let (_writer, original) = store_with_history();
    file.save(&original, 30).expect("saved");
    let (mut writer, _reader) = store(config());
    writer.advance(5);
    let saved = file.load().expect("a valid file").expect("a file");
    assert_eq!(writer.restore(saved), Err(StoreNotNew));
}

#[test]
fn a_subscriber_of_a_restored_store_gets_new_events_after_the_restored_ones() {
    let dir = directory("live");
    let file = state_file(dir.join("pods.state"));
    let (_writer, original) = store_with_history();
    file.save(&original, 30).expect("saved");
    let (mut writer, restored) = restored(&file);
    let mut subscription = restored.subscribe_from(26).expect("covered");
    assert_eq!(subscription.try_recv().map(|e| e.resource_version), Ok(27));
    assert_eq!(
        subscription.try_recv().map(|e| e.resource_version),
        Err(TryRecvError::Empty)
    );
    writer.apply(Change::Upsert(pod(
        "ns-9", "later", 31, "node-a", "Pending",
    )));
    assert_eq!(subscription.try_recv().map(|e| e.resource_version), Ok(31));
}

/// Pod `k % 20` changed at `21 + k`: the `k`th change after a list of 20.
fn churn(k: u64) -> Change {
    let phase = ["Running", "Succeeded"][(k % 2) as usize];
    Change::Upsert(pod(
        "ns-0",
        &format!("p{:02}", k % 20),
        21 + k,
        "node-a",
        phase,
    ))
}

/// The store after the list of 20 and the changes up to `rv`.
fn listed_and_churned(rv: u64) -> (StoreWriter, StoreReader) {
    let (mut writer, reader) = store(config());
    for i in 0..20u64 {
        writer.apply(Change::Upsert(pod(
            "ns-0",
            &format!("p{i:02}"),
            i + 1,
            "node-a",
            "Pending",
        )));
    }
    writer.mark_listed(20);
    for k in 0..rv.saturating_sub(20) {
        writer.apply(churn(k));
    }
    (writer, reader)
}

#[test]
fn a_store_is_not_saved_while_a_list_is_applied_and_is_once_it_is_marked_listed() {
    let dir = directory("applying-list");
    let file = state_file(dir.join("pods.state"));
    let (mut writer, reader) = listed_and_churned(25);
    writer.begin_list();
    writer.apply(churn(5));
    let refused = file.save(&reader, 26).expect_err("a list is being applied");
    assert!(
        refused
            .get_ref()
            .is_some_and(|e| e.downcast_ref::<ApplyingList>().is_some()),
        "{refused}"
    );
    assert!(file.load().expect("nothing written").is_none());
    writer.mark_listed(30);
    file.save(&reader, 30).expect("saved once listed");
    let saved = file.load().expect("valid").expect("a file");
    assert_eq!(saved.resource_version, 30);
}

#[test]
fn saves_while_the_writer_applies_are_each_one_consistent_state() {
    let dir = directory("concurrent");
    let file = state_file(dir.join("pods.state"));
    let (mut writer, reader) = listed_and_churned(20);
    // 3,000 changes through a log of 1,000: history's start moves too.
    let saved: Vec<SavedState> = std::thread::scope(|scope| {
        scope.spawn(move || (0..3000).for_each(|k| drop(writer.apply(churn(k)))));
        (0..5)
            .map(|_| {
                file.save(&reader, 0).expect("saved");
                file.load().expect("valid").expect("a file")
            })
            .collect()
    });
    for state in saved {
        let rv = state.resource_version;
        let history = state.history_start;
        let (mut restored_writer, restored) = store(config());
        restored_writer.restore(state).expect("a new store");
        let (_writer, expected) = listed_and_churned(rv);
        let objects = |r: &StoreReader| r.snapshot().range(None, None).cloned().collect::<Vec<_>>();
        assert_eq!(
            objects(&restored),
            objects(&expected),
            "the store as of {rv}"
        );
        let from = history.max(expected.event_log_status().oldest);
        assert_eq!(
            all_seen(&restored.events_since(from).expect("covered")),
            all_seen(&expected.events_since(from).expect("covered")),
            "history from {from} as of {rv}"
        );
    }
}

#[test]
fn restore_into_a_smaller_event_log_keeps_the_newest_history() {
    let dir = directory("smaller-log");
    let file = state_file(dir.join("pods.state"));
    let (_writer, original) = store_with_history();
    file.save(&original, 30).expect("saved");
    let saved = file.load().expect("valid").expect("a file");
    let mut small = config();
    small.event_log.max_events = 3;
    let (mut writer, restored) = store(small);
    writer.restore(saved).expect("a new store");
    // The newest 3 of 21..=27 stay; history now starts after the 4th.
    assert_eq!(restored.event_log_status().oldest, 24);
    assert_eq!(
        rvs(&restored.events_since(24).expect("covered")),
        [25, 26, 27]
    );
    assert_eq!(restored.events_since(23), Err(TooOld { oldest: 24 }));
}

#[test]
fn missing_file_is_a_cold_start() {
    let dir = directory("missing");
    assert!(matches!(
        state_file(dir.join("pods.state")).load(),
        Ok(None)
    ));
}

/// A valid file's bytes (of `store_with_history`), written once.
fn valid_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = directory("valid");
        let file = state_file(dir.join("pods.state"));
        let (_writer, reader) = store_with_history();
        file.save(&reader, 30).expect("saved");
        fs::read(file.path()).expect("written")
    })
}

/// Loads `bytes` as the state file of `file`'s identity.
fn load_bytes(file: &StateFile, bytes: &[u8]) -> Result<Option<SavedState>, LoadError> {
    fs::write(file.path(), bytes).expect("written");
    file.load()
}

#[test]
fn unreadable_file_is_an_io_error() {
    let dir = directory("unreadable");
    // A directory where the file should be.
    let loaded = state_file(dir.to_path_buf()).load();
    assert!(matches!(loaded, Err(LoadError::Io(_))), "{loaded:?}");
}

#[test]
fn truncated_file_is_refused() {
    let dir = directory("truncated");
    let file = state_file(dir.join("pods.state"));
    let bytes = valid_bytes();
    for length in [0, 5, 11, 30, bytes.len() / 2, bytes.len() - 1] {
        let loaded = load_bytes(&file, &bytes[..length]);
        assert!(
            matches!(loaded, Err(LoadError::Truncated { .. })),
            "{length}: {loaded:?}"
        );
    }
}

#[test]
fn flipped_byte_is_a_checksum_mismatch() {
    let dir = directory("flipped");
    let file = state_file(dir.join("pods.state"));
    let mut bytes = valid_bytes().to_vec();
    bytes[20] ^= 0x10;
    let loaded = load_bytes(&file, &bytes);
    assert!(
        matches!(loaded, Err(LoadError::ChecksumMismatch { part: "header" })),
        "{loaded:?}"
    );
    let mut bytes = valid_bytes().to_vec();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    let loaded = load_bytes(&file, &bytes);
    assert!(
        matches!(loaded, Err(LoadError::ChecksumMismatch { part: "body" })),
        "{loaded:?}"
    );
}

#[test]
fn bad_magic_is_refused() {
    let dir = directory("magic");
    let file = state_file(dir.join("pods.state"));
    let loaded = load_bytes(&file, b"{\"kind\":\"PodList\"}");
    assert!(matches!(loaded, Err(LoadError::BadMagic)), "{loaded:?}");
}

#[test]
fn foreign_format_version_is_refused() {
    let dir = directory("version");
    let file = state_file(dir.join("pods.state"));
    let mut bytes = valid_bytes().to_vec();
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    let loaded = load_bytes(&file, &bytes);
    assert!(
        matches!(
            loaded,
            Err(LoadError::ForeignVersion {
                found: 2,
                supported: 1
            })
        ),
        "{loaded:?}"
    );
}

#[test]
fn foreign_cluster_is_refused() {
    let dir = directory("cluster");
    let path = dir.join("pods.state");
    fs::write(&path, valid_bytes()).expect("written");
    let other = StateFile::new(
        path,
        "another-uid@https://10.0.0.1:443",
        ApiResource::pods(),
        transform(),
    )
    .expect("lossless");
    let loaded = other.load();
    assert!(
        matches!(loaded, Err(LoadError::ForeignCluster { .. })),
        "{loaded:?}"
    );
}

#[test]
fn other_resource_is_refused() {
    let dir = directory("resource");
    let path = dir.join("pods.state");
    fs::write(&path, valid_bytes()).expect("written");
    let resource = ApiResource {
        group: "apps".into(),
        version: "v1".into(),
        plural: "deployments".into(),
        kind: "Deployment".into(),
        namespaced: true,
    };
    let loaded = StateFile::new(path, CLUSTER, resource, transform())
        .expect("lossless")
        .load();
    let Err(LoadError::OtherResource { found, expected }) = loaded else {
        panic!("refused as another resource: {loaded:?}");
    };
    assert_eq!(
        (found.as_str(), expected.as_str()),
        ("pods (v1 Pod)", "deployments (apps/v1 Deployment)")
    );
}

#[test]
fn changed_config_is_refused() {
    let dir = directory("config");
    let path = dir.join("pods.state");
    fs::write(&path, valid_bytes()).expect("written");
    let stripped = transform().strip("status").expect("a valid path");
    let loaded = StateFile::new(path, CLUSTER, ApiResource::pods(), stripped)
        .expect("lossless")
        .load();
    assert!(
        matches!(loaded, Err(LoadError::ConfigChanged { .. })),
        "{loaded:?}"
    );
}

#[test]
fn undecodable_object_is_refused() {
    let dir = directory("undecodable");
    let file = state_file(dir.join("pods.state"));
    // Well framed and checksummed, as a faulty build would write it.
    let header = Header {
        cluster: CLUSTER.into(),
        version: "v1".into(),
        plural: "pods".into(),
        kind: "Pod".into(),
        config: file.config.clone(),
        objects: 1,
        ..Header::default()
    };
    let mut out = Checksummed::new(Vec::new());
    let mut scratch = Vec::new();
    out.write_all(MAGIC).expect("in memory");
    out.write_all(&VERSION.to_le_bytes()).expect("in memory");
    out.record(&header, &mut scratch).expect("in memory");
    out.write_checksum().expect("in memory");
    let json = Bytes::from_static(br#"{"metadata":{"name":"x"}}"#);
    out.record(
        &ObjectRecord {
            json,
            raw_strings: Bytes::new(),
        },
        &mut scratch,
    )
    .expect("in memory");
    let bytes = out.finish().expect("in memory");
    let loaded = load_bytes(&file, &bytes);
    let Err(LoadError::Undecodable { what, .. }) = loaded else {
        panic!("refused as undecodable: {loaded:?}");
    };
    assert_eq!(what, "object 0");
}

#[test]
fn lossy_transform_is_refused() {
    for (strip, indexed) in [
        ("metadata.labels", "spec.nodeName"),
        ("metadata.annotations[\"a\"]", "spec.nodeName"),
        ("metadata.ownerReferences", "spec.nodeName"),
        ("status", "status.phase"),
        ("spec.nodeName", "spec"),
    ] {
        let transform = Transform::default()
            .strip(strip)
            .and_then(|t| t.index_field(indexed))
            .expect("valid paths");
        let refused = StateFile::new("x", CLUSTER, ApiResource::pods(), transform);
        assert!(refused.is_err(), "strip {strip} with index {indexed}");
    }
}

#[test]
fn a_crash_before_the_rename_leaves_the_previous_file_intact() {
    let dir = directory("crash");
    let file = state_file(dir.join("pods.state"));
    let (mut writer, reader) = store_with_history();
    file.save(&reader, 30).expect("saved");
    writer.apply(Change::Upsert(pod(
        "ns-9", "after", 31, "node-a", "Pending",
    )));
    // The next save crashes before its rename: a whole temporary file, and
    // then one cut short.
    let snapshot = reader.snapshot();
    let (start, events) = reader.shared.log.history();
    file.write(&file.temp_path(), &snapshot, start, &events, 31)
        .expect("written");
    assert_eq!(
        file.load()
            .expect("valid")
            .expect("a file")
            .resource_version,
        30
    );
    let temp = fs::read(file.temp_path()).expect("written");
    fs::write(file.temp_path(), &temp[..temp.len() / 2]).expect("written");
    assert_eq!(
        file.load()
            .expect("valid")
            .expect("a file")
            .resource_version,
        30
    );
    // The save after the crash replaces both.
    file.save(&reader, 31).expect("saved");
    assert_eq!(
        file.load()
            .expect("valid")
            .expect("a file")
            .resource_version,
        31
    );
    assert!(!file.temp_path().exists());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_bytes_are_refused(tail in proptest::collection::vec(any::<u8>(), 0..400), framed: bool) {
        let dir = directory("random");
        let file = state_file(dir.join("pods.state"));
        // Behind a valid magic and version too, to reach the parser.
        let mut bytes = if framed {
            [&MAGIC[..], &VERSION.to_le_bytes()].concat()
        } else {
            Vec::new()
        };
        bytes.extend(tail);
        prop_assert!(load_bytes(&file, &bytes).is_err());
    }

    #[test]
    fn truncations_and_bit_flips_of_a_valid_file_are_refused(at in any::<prop::sample::Index>(), bit in 0..8u8, cut: bool) {
        let dir = directory("damaged");
        let file = state_file(dir.join("pods.state"));
        let mut bytes = valid_bytes().to_vec();
        let at = at.index(bytes.len());
        if cut {
            bytes.truncate(at);
        } else {
            bytes[at] ^= 1 << bit;
        }
        prop_assert!(load_bytes(&file, &bytes).is_err());
    }
}
