//! The measurement behind the module doc's table. Not run by default; run it
//! alone and in release:
//!
//! ```text
//! cargo test --release -p kubecache-reflector --lib state_file::measure -- --ignored --nocapture
//! ```

use std::time::{Duration, Instant};

use super::*;
use crate::store::measure::realistic_pod;
use crate::store::{EventLogConfig, IndexSpec, StoreConfig, store};

const OBJECTS: usize = 100_000;
const CHANGES: usize = 10_000;

#[test]
#[ignore = "measurement: run alone, in release, with --nocapture"]
fn measure_state_file_of_100k_realistic_pods() {
    let transform = Transform::default()
        .index_field("spec.nodeName")
        .expect("a valid path");
    let config = || StoreConfig {
        field_indexes: vec![IndexSpec {
            name: "node".into(),
            path: "spec.nodeName".into(),
        }],
        event_log: EventLogConfig {
            max_age: Duration::from_secs(3600),
            ..EventLogConfig::default()
        },
    };
    // Decoded as the reflector decodes them, so that loading derives the same.
    let decoded = |i: usize, rv: u64, status: &str| {
        let json = realistic_pod(i, rv, status).json.clone();
        Arc::new(decode_object(&json, "Pod", "v1", &transform).expect("a valid pod"))
    };
    let (mut writer, reader) = store(config());
    for i in 0..OBJECTS {
        writer.apply(Change::Upsert(decoded(i, i as u64 + 1, "Pending")));
    }
    let listed = OBJECTS as u64;
    writer.mark_listed(listed);
    for c in 0..CHANGES {
        let i = c * 7919 % OBJECTS;
        writer.apply(Change::Upsert(decoded(i, listed + 1 + c as u64, "Running")));
    }
    let json: usize = reader
        .snapshot()
        .range(None, None)
        .map(|o| o.json.len())
        .sum();

    let dir = std::env::temp_dir().join(format!("kubecache-state-measure-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("a directory");
    let file = StateFile::new(
        dir.join("pods.state"),
        "cluster",
        ApiResource::pods(),
        transform.clone(),
    )
    .expect("lossless");
    let started = Instant::now();
    let stats = file
        .save(&reader, reader.current_resource_version())
        .expect("saved");
    let saved_in = started.elapsed();
    let started = Instant::now();
    let loaded = file.load().expect("valid").expect("a file");
    let loaded_in = started.elapsed();
    let started = Instant::now();
    let (mut restored_writer, restored) = store(config());
    restored_writer.restore(loaded).expect("a new store");
    let restored_in = started.elapsed();
    assert_eq!(restored.snapshot().len(), OBJECTS);
    let _ = fs::remove_dir_all(&dir);

    println!(
        "{OBJECTS} pods ({} B of JSON each on average), {CHANGES} events after the list",
        json / OBJECTS
    );
    println!(
        "file: {} bytes, {} B/object ({:.3} x the JSON)",
        stats.bytes,
        stats.bytes as usize / OBJECTS,
        stats.bytes as f64 / json as f64
    );
    println!("save (write, fsync, rename): {saved_in:?}");
    println!("load (read, verify, decode): {loaded_in:?}");
    println!("restore into a new store: {restored_in:?}");
}
