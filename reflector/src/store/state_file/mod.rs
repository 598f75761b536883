//! The state of one store on disk, for a warm restart: its objects, the
//! exact history of its event log and the resourceVersions to go on from, so
//! that a restarted kubecache serves at once and resumes the upstream watch
//! instead of listing.
//!
//! # What is kept
//!
//! | part | content |
//! |---|---|
//! | magic, version | `KCSTATE\n`, format version 1 (another version is refused) |
//! | header | cluster identity, group/version/plural/kind, the config fingerprint, the store's and the upstream watch's resourceVersions, where exact history starts, when it was written, the record counts; its own CRC-32 |
//! | objects | each object's JSON as stored, in key order, and the bytes of its strings that are not UTF-8 when it has some (a protobuf upstream's; see `kubecache_wire::Encodings`) |
//! | events | the events after the start of exact history: type, position, the object's JSON (or only its key when it is the store's current version), the superseded version's JSON when no earlier event in the file carries it, each with its strings' bytes likewise |
//! | trailer | the file's length and a CRC-32 of everything before the trailer |
//!
//! Everything else of a [`CachedObject`] (key, labels, owners, index
//! values, annotations hash, type-meta length) is derived again on load by
//! [`decode_object`] under the same [`Transform`]: the JSON is the truth and
//! the file stays small. That needs the transform to keep what the decoder
//! reads, so a transform that strips labels, annotations, owner references,
//! `metadata.generation` or an index field cannot have a state file
//! ([`StateFile::new`] refuses it with [`LossyTransform`]).
//!
//! Events at or before the start of exact history (a list's items) are not
//! kept: no replay can reach them. Restored events count their age from the
//! restore (the log's age bound starts again), and a smaller
//! `max_events` than when saved keeps the newest of them.
//!
//! # Identity
//!
//! A file is served only by the cluster, resource and configuration it was
//! written for. The cluster identity is the caller's string; the
//! recommendation is the `kube-system` namespace's UID (fixed for a
//! cluster's life, readable by any client that may list it) and the API
//! server's URL, e.g. `4f3c…-9a1e@https://10.0.0.1:443`: a new cluster at the
//! same address, or another cluster, refuses the file. The configuration
//! fingerprint is the transform's strip paths and index fields: objects
//! stored under another transform have other bytes and index values.
//!
//! # Writing and reading
//!
//! [`StateFile::save`] takes a snapshot and the event log's history together
//! (O(1) and O(events); the store stays writable) and streams them through a
//! buffered writer into a temporary file beside the target, fsyncs it,
//! renames it over the target and fsyncs the directory: a crash at any
//! point leaves the previous file or the new one, whole. One saver per file
//! at a time (the temporary file's name is fixed).
//!
//! [`StateFile::load`] refuses every kind of damage with its own
//! [`LoadError`] and never panics: a missing file is a cold start
//! (`Ok(None)`); magic and version are checked first (a file of another
//! format version is reported as such, not as damage), then the trailer's
//! length (truncation), then the header's checksum and identity (before any
//! object is read), then every record and the whole file's checksum.
//! [`StoreWriter::restore`] puts a loaded state into a new store.
//!
//! # Measurements
//!
//! 100k synthetic pods (the store's `measure.rs` shape, decoded: 2,533 B
//! of JSON each, 3 labels, 1 owner, a node index) and 10k changes of
//! distinct pods after the list (so 10k superseded versions are written
//! too), release build, the file on `/tmp` (an overlay on disk), on this
//! project's 2-core machine shared with other builds; three runs
//! (`cargo test --release -p kubecache-reflector --lib state_file::measure
//! -- --ignored --nocapture`):
//!
//! | what | result |
//! |---|---|
//! | file size | 279.7 MB: 2,796 B/object, 1.10 x the objects' JSON (the 10k superseded versions are the 0.10) |
//! | save: snapshot, write, fsync, rename | 495-522 ms |
//! | load: read, verify, decode every object again | 633-720 ms |
//! | restore into a new store (objects, indexes, log) | 392-400 ms |
//!
//! The JSON is written as stored, uncompressed: the file is as large as the
//! objects it holds, and decoding them again is most of the load.

mod format;
#[cfg(test)]
mod measure;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kubecache_wire::protobuf::RawStrings;
use kubecache_wire::{CachedObject, ChangeType, ObjectKey, Transform, decode_object};

use super::snapshot::StoreState;
use super::{Change, Event, Snapshot, StoreReader, StoreWriter};
use crate::upstream::ApiResource;
use format::{
    Checksummed, EventRecord, Header, MAGIC, ObjectRecord, ReadError, TRAILER_LEN, VERSION,
    Verified,
};

/// A state file's objects (in key order) and events.
type Records = (Vec<Arc<CachedObject>>, Vec<Arc<Event>>);

/// The state file of one store: where it is, and what it must be of.
#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
    cluster: String,
    resource: ApiResource,
    transform: Transform,
    config: String,
}

/// A transform under which objects cannot be rebuilt from their stored
/// JSON: it strips a field the store reads from each object.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "no state file under this transform: it strips {path}, which the store reads from each object, so objects could not be rebuilt from their stored JSON"
)]
pub struct LossyTransform {
    /// The strip path.
    pub path: String,
}

/// Why a state file was refused. Each message says what is wrong, fit for
/// one log line; in every case the caller starts cold (a full list).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Reading the file failed.
    #[error("cannot read the state file: {0}")]
    Io(#[from] io::Error),
    /// The file is shorter (or longer) than its trailer says, or too short
    /// to have one.
    #[error("truncated state file: {length} bytes, which is not the length it was written with")]
    Truncated {
        /// The file's length.
        length: u64,
    },
    /// A checksum does not match: the bytes were damaged.
    #[error("damaged state file: the checksum of its {part} does not match")]
    ChecksumMismatch {
        /// `header` or `body`.
        part: &'static str,
    },
    /// Not a kubecache state file.
    #[error("not a kubecache state file (its first bytes are not the magic)")]
    BadMagic,
    /// Written in another format version.
    #[error("state file of format version {found}; this kubecache reads version {supported}")]
    ForeignVersion {
        /// The file's version.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// Written for another cluster.
    #[error("state file of another cluster: {found:?}, this is {expected:?}")]
    ForeignCluster {
        /// The file's cluster identity.
        found: String,
        /// This one's.
        expected: String,
    },
    /// Written for another resource.
    #[error("state file of another resource: {found}, this is {expected}")]
    OtherResource {
        /// The file's resource, e.g. `deployments (apps/v1 Deployment)`.
        found: String,
        /// This one.
        expected: String,
    },
    /// Written under another transform.
    #[error("state file written under another configuration: {found:?}, now {expected:?}")]
    ConfigChanged {
        /// The file's configuration fingerprint.
        found: String,
        /// This one's.
        expected: String,
    },
    /// A record or an object in it cannot be read (with an intact checksum:
    /// written by a faulty build).
    #[error("undecodable {what} in the state file: {reason}")]
    Undecodable {
        /// Which record, e.g. `object 17`.
        what: String,
        /// Why.
        reason: String,
    },
}

impl LoadError {
    /// A short, bounded name of the kind, for a metric's label.
    pub fn kind(&self) -> &'static str {
        match self {
            LoadError::Io(_) => "io",
            LoadError::Truncated { .. } => "truncated",
            LoadError::ChecksumMismatch { .. } => "checksum",
            LoadError::BadMagic => "bad_magic",
            LoadError::ForeignVersion { .. } => "foreign_version",
            LoadError::ForeignCluster { .. } => "foreign_cluster",
            LoadError::OtherResource { .. } => "other_resource",
            LoadError::ConfigChanged { .. } => "config_changed",
            LoadError::Undecodable { .. } => "undecodable",
        }
    }
}

/// A store's state as loaded from its file, ready for
/// [`StoreWriter::restore`].
pub struct SavedState {
    /// The store's resourceVersion when it was saved.
    pub resource_version: u64,
    /// Where the upstream watch resumes.
    pub upstream_resource_version: u64,
    /// When it was written.
    pub written_at: SystemTime,
    history_start: u64,
    /// In key order.
    objects: Vec<Arc<CachedObject>>,
    events: Vec<Arc<Event>>,
}

impl SavedState {
    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// `true` when it holds no object.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Number of events of exact history.
    pub fn events(&self) -> usize {
        self.events.len()
    }
}

/// A summary: the objects are far too many to print.
impl std::fmt::Debug for SavedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavedState")
            .field("resource_version", &self.resource_version)
            .field("upstream_resource_version", &self.upstream_resource_version)
            .field("history_start", &self.history_start)
            .field("objects", &self.objects.len())
            .field("events", &self.events.len())
            .finish_non_exhaustive()
    }
}

/// What a save wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaveStats {
    /// Objects written.
    pub objects: usize,
    /// Events written.
    pub events: usize,
    /// Bytes of the file.
    pub bytes: u64,
}

/// [`StateFile::save`] was called while a list was being applied (see
/// [`StoreWriter::begin_list`]): nothing was written; save again later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a list is being applied: the store is no resourceVersion's whole state, not saved")]
pub struct ApplyingList;

/// [`StoreWriter::restore`] needs a new store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a saved state restores only into a new, empty store")]
pub struct StoreNotNew;

impl StateFile {
    /// The state file at `path` of `resource` in the cluster `cluster` (see
    /// the module's *Identity*), whose objects are decoded under
    /// `transform`.
    ///
    /// # Errors
    ///
    /// [`LossyTransform`] when `transform` strips something the store reads.
    pub fn new(
        path: impl Into<PathBuf>,
        cluster: impl Into<String>,
        resource: ApiResource,
        transform: Transform,
    ) -> Result<Self, LossyTransform> {
        let read: Vec<Vec<&str>> = [
            ["metadata", "labels"],
            ["metadata", "annotations"],
            ["metadata", "ownerReferences"],
            ["metadata", "generation"],
        ]
        .iter()
        .map(|p| p.to_vec())
        .chain(
            transform
                .index_fields()
                .iter()
                .map(|p| p.segments().collect()),
        )
        .collect();
        for strip in transform.strip_paths() {
            let strip: Vec<&str> = strip.segments().collect();
            if read
                .iter()
                .any(|r| r.starts_with(&strip) || strip.starts_with(r))
            {
                return Err(LossyTransform {
                    path: strip.join("."),
                });
            }
        }
        let strip: Vec<String> = transform
            .strip_paths()
            .iter()
            .map(|p| p.to_string())
            .collect();
        let fields: Vec<String> = transform
            .index_fields()
            .iter()
            .map(|p| p.to_string())
            .collect();
        let config = format!(
            "strip [{}] index fields [{}]",
            strip.join(", "),
            fields.join(", ")
        );
        Ok(StateFile {
            path: path.into(),
            cluster: cluster.into(),
            resource,
            transform,
            config,
        })
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the store's state, replacing the file atomically (see the
    /// module's *Writing and reading*). `upstream_resource_version` is
    /// where the upstream watch should resume after a restart.
    ///
    /// Blocking file I/O (about half a second per 100k pods): call it from a
    /// blocking thread, not from an async task.
    ///
    /// # Errors
    ///
    /// Any I/O error; the previous file is then left as it was. An
    /// [`ApplyingList`] (as an [`io::Error`] of kind `Other`) while a list
    /// is being applied: the store is then no resourceVersion's state.
    pub fn save(
        &self,
        reader: &StoreReader,
        upstream_resource_version: u64,
    ) -> io::Result<SaveStats> {
        // Taken under the state's lock, as `snapshot_and_subscribe` does:
        // the writer appends an event before releasing it, so the snapshot
        // and the history agree.
        let (snapshot, (history_start, events)) = {
            let state = reader.shared.state.read();
            if state.applying_list {
                return Err(io::Error::other(ApplyingList));
            }
            let history = reader.shared.log.history();
            (
                Snapshot {
                    state: state.clone(),
                },
                history,
            )
        };
        let temp = self.temp_path();
        let saved = self
            .write(
                &temp,
                &snapshot,
                history_start,
                &events,
                upstream_resource_version,
            )
            .and_then(|stats| {
                fs::rename(&temp, &self.path)?;
                File::open(self.directory())?.sync_all()?;
                Ok(stats)
            });
        if saved.is_err() {
            let _ = fs::remove_file(&temp);
        }
        saved
    }

    fn directory(&self) -> &Path {
        match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        }
    }

    fn temp_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_owned();
        name.push(".tmp");
        self.path.with_file_name(name)
    }

    fn write(
        &self,
        temp: &Path,
        snapshot: &Snapshot,
        history_start: u64,
        events: &[Arc<Event>],
        upstream_resource_version: u64,
    ) -> io::Result<SaveStats> {
        let written_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let header = Header {
            cluster: self.cluster.clone(),
            group: self.resource.group.clone(),
            version: self.resource.version.clone(),
            plural: self.resource.plural.clone(),
            kind: self.resource.kind.clone(),
            config: self.config.clone(),
            resource_version: snapshot.resource_version(),
            upstream_resource_version,
            history_start,
            written_at_ms: u64::try_from(written_at.as_millis()).unwrap_or(u64::MAX),
            objects: snapshot.len() as u64,
            events: events.len() as u64,
        };
        let file = File::create(temp)?;
        let mut out = Checksummed::new(BufWriter::with_capacity(1 << 20, file));
        let mut scratch = Vec::new();
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.record(&header, &mut scratch)?;
        out.write_checksum()?;
        for object in snapshot.range(None, None) {
            let json = object.json.clone();
            let raw_strings = raw_strings(object);
            out.record(&ObjectRecord { json, raw_strings }, &mut scratch)?;
        }
        // The last object each key's events carried: a `previous` that is
        // one of them is not written again.
        let mut last: HashMap<&str, &Arc<CachedObject>> = HashMap::new();
        for event in events {
            let object = &event.object;
            let current = snapshot
                .get(&object.key)
                .is_some_and(|held| Arc::ptr_eq(held, object));
            let (json, key, strings) = if current {
                (Bytes::new(), object.key.as_str().to_owned(), Bytes::new())
            } else {
                (object.json.clone(), String::new(), raw_strings(object))
            };
            let (previous, previous_strings) =
                match (&event.previous, last.get(object.key.as_str())) {
                    (Some(previous), Some(&earlier)) if Arc::ptr_eq(previous, earlier) => {
                        (Bytes::new(), Bytes::new())
                    }
                    (Some(previous), _) => (previous.json.clone(), raw_strings(previous)),
                    (None, _) => (Bytes::new(), Bytes::new()),
                };
            let record = EventRecord {
                kind: kind_code(event.kind),
                resource_version: event.resource_version,
                json,
                key,
                previous,
                raw_strings: strings,
                previous_raw_strings: previous_strings,
            };
            out.record(&record, &mut scratch)?;
            last.insert(object.key.as_str(), object);
        }
        let file = out.finish()?.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(SaveStats {
            objects: snapshot.len(),
            events: events.len(),
            bytes: file.metadata()?.len(),
        })
    }

    /// Reads the state file: `Ok(None)` when there is none (a cold start).
    ///
    /// # Errors
    ///
    /// A [`LoadError`] for each kind of damage or mismatch; the caller logs
    /// it and starts cold.
    pub fn load(&self) -> Result<Option<SavedState>, LoadError> {
        let file = match File::open(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            opened => opened?,
        };
        let length = file.metadata()?.len();
        let head = read_at(&file, 0, MAGIC.len() + 4)?;
        if !head.starts_with(MAGIC) {
            let short_prefix = head.len() < MAGIC.len() && MAGIC.starts_with(&head);
            return Err(if short_prefix {
                LoadError::Truncated { length }
            } else {
                LoadError::BadMagic
            });
        }
        let version = head
            .get(MAGIC.len()..)
            .and_then(|v| <[u8; 4]>::try_from(v).ok())
            .map(u32::from_le_bytes)
            .ok_or(LoadError::Truncated { length })?;
        if version != VERSION {
            return Err(LoadError::ForeignVersion {
                found: version,
                supported: VERSION,
            });
        }
        let body_end = length
            .checked_sub(TRAILER_LEN)
            .filter(|end| *end >= head.len() as u64)
            .ok_or(LoadError::Truncated { length })?;
        let trailer = read_at(&file, body_end, TRAILER_LEN as usize)?;
        let (written_length, stored_crc) = trailer.split_at(8);
        let written_length = u64::from_le_bytes(written_length.try_into().unwrap_or_default());
        let stored_crc = u32::from_le_bytes(stored_crc.try_into().unwrap_or_default());
        if written_length != length {
            return Err(LoadError::Truncated { length });
        }
        let mut input = Verified::new(BufReader::with_capacity(1 << 20, file), body_end);
        let header = self.header(&mut input, head.len())?;
        let records = self.records(&mut input, &header);
        // A record that cannot be read is damage when the checksum says so.
        let drained = match &records {
            Ok(_) if input.position() == body_end => Ok(()),
            _ => input.drain(),
        };
        match drained {
            Err(ReadError::Io(e)) => return Err(LoadError::Io(e)),
            Err(_) => return Err(LoadError::Truncated { length }),
            Ok(()) => {}
        }
        if input.checksum() != stored_crc {
            return Err(LoadError::ChecksumMismatch { part: "body" });
        }
        let (objects, events) = records?;
        if input.position() != body_end {
            return Err(undecodable("the end", "bytes after the last record"));
        }
        Ok(Some(SavedState {
            resource_version: header.resource_version,
            upstream_resource_version: header.upstream_resource_version,
            written_at: UNIX_EPOCH + Duration::from_millis(header.written_at_ms),
            history_start: header.history_start,
            objects,
            events,
        }))
    }

    /// Reads the header after the magic and version (`skip` bytes) and
    /// checks its checksum and what it is of.
    fn header(
        &self,
        input: &mut Verified<impl io::Read>,
        skip: usize,
    ) -> Result<Header, LoadError> {
        let damaged = |e: ReadError| match e {
            ReadError::Io(e) => LoadError::Io(e),
            _ => LoadError::ChecksumMismatch { part: "header" },
        };
        input.fill(&mut vec![0; skip]).map_err(damaged)?;
        let header: Header = input.record().map_err(damaged)?;
        let computed = input.checksum();
        if input.u32().map_err(damaged)? != computed {
            return Err(LoadError::ChecksumMismatch { part: "header" });
        }
        if header.cluster != self.cluster {
            return Err(LoadError::ForeignCluster {
                found: header.cluster,
                expected: self.cluster.clone(),
            });
        }
        let found = (&header.group, &header.version, &header.plural, &header.kind);
        let resource = &self.resource;
        if found
            != (
                &resource.group,
                &resource.version,
                &resource.plural,
                &resource.kind,
            )
        {
            let name = |group: &str, version: &str, plural: &str, kind: &str| match group {
                "" => format!("{plural} ({version} {kind})"),
                _ => format!("{plural} ({group}/{version} {kind})"),
            };
            return Err(LoadError::OtherResource {
                found: name(&header.group, &header.version, &header.plural, &header.kind),
                expected: name(
                    &resource.group,
                    &resource.version,
                    &resource.plural,
                    &resource.kind,
                ),
            });
        }
        if header.config != self.config {
            return Err(LoadError::ConfigChanged {
                found: header.config,
                expected: self.config.clone(),
            });
        }
        Ok(header)
    }

    /// Reads and decodes the object and event records the header counts.
    fn records(
        &self,
        input: &mut Verified<impl io::Read>,
        header: &Header,
    ) -> Result<Records, LoadError> {
        let api_version = self.resource.api_version();
        let decode = |what: &dyn Fn() -> String, json: &[u8], strings: &[u8]| {
            let strings = RawStrings::from_bytes(strings)
                .map_err(|e| undecodable(&what(), &e.to_string()))?;
            decode_object(json, &self.resource.kind, &api_version, &self.transform)
                .map(|object| Arc::new(object.with_raw_strings(strings)))
                .map_err(|e| undecodable(&what(), &e.to_string()))
        };
        // No capacity from the header's counts alone: they bound nothing.
        let mut objects: Vec<Arc<CachedObject>> = Vec::new();
        for i in 0..header.objects {
            let what = || format!("object {i}");
            let record: ObjectRecord = read_record(input, &what)?;
            let object = decode(&what, &record.json, &record.raw_strings)?;
            if objects.last().is_some_and(|last| last.key >= object.key) {
                return Err(undecodable(&what(), "out of key order"));
            }
            objects.push(object);
        }
        let mut events = Vec::new();
        let mut last: HashMap<ObjectKey, Arc<CachedObject>> = HashMap::new();
        let mut position = header.history_start;
        for i in 0..header.events {
            let what = || format!("event {i}");
            let record: EventRecord = read_record(input, &what)?;
            let kind = match record.kind {
                0 => ChangeType::Added,
                1 => ChangeType::Modified,
                2 => ChangeType::Deleted,
                other => return Err(undecodable(&what(), &format!("unknown event type {other}"))),
            };
            if record.resource_version <= header.history_start
                || record.resource_version < position
                || record.resource_version > header.resource_version
            {
                return Err(undecodable(&what(), "out of resourceVersion order"));
            }
            position = record.resource_version;
            let object = if record.json.is_empty() {
                objects
                    .binary_search_by(|o| o.key.as_str().cmp(&record.key))
                    .map(|at| objects[at].clone())
                    .map_err(|_| undecodable(&what(), "its key is not in the store"))?
            } else {
                decode(&what, &record.json, &record.raw_strings)?
            };
            let previous = match (kind, record.previous.is_empty()) {
                (_, false) => Some(decode(
                    &what,
                    &record.previous,
                    &record.previous_raw_strings,
                )?),
                (ChangeType::Added, true) => None,
                (_, true) => Some(
                    last.get(&object.key)
                        .cloned()
                        .ok_or_else(|| undecodable(&what(), "its previous version is missing"))?,
                ),
            };
            last.insert(object.key.clone(), object.clone());
            events.push(Arc::new(Event {
                kind,
                resource_version: position,
                object,
                previous,
            }));
        }
        Ok((objects, events))
    }
}

impl StoreWriter {
    /// Fills a new store with a saved state: its objects, its event log's
    /// exact history (replays from any resourceVersion since the saved
    /// history start work as before the restart) and its resourceVersion.
    ///
    /// Not [`mark_listed`](StoreWriter::mark_listed): the restored objects
    /// are not a list but the same history, so history starts where it
    /// started when saved, not at the saved resourceVersion. Subscribers see
    /// no event for the restored objects (they were there already, as far
    /// as any resourceVersion says). The store stays not ready: the caller
    /// decides when it is (e.g. once the resumed watch is confirmed).
    ///
    /// # Errors
    ///
    /// [`StoreNotNew`] when the store was changed before.
    pub fn restore(&mut self, saved: SavedState) -> Result<(), StoreNotNew> {
        let mut state = self.shared.state.write();
        let log = self.shared.log.status();
        if !state.objects.is_empty()
            || state.resource_version != 0
            || log.newest != 0
            || log.events != 0
        {
            return Err(StoreNotNew);
        }
        for object in saved.objects {
            StoreState::apply(&mut state, Change::Upsert(object));
        }
        let state_mut = Arc::make_mut(&mut state);
        state_mut.resource_version = state_mut.resource_version.max(saved.resource_version);
        let rv = state_mut.resource_version;
        self.shared
            .log
            .restore(saved.history_start, rv, saved.events);
        drop(state);
        self.publish_resource_version(rv);
        self.set_not_ready("restored from the state file, not resumed yet");
        Ok(())
    }
}

/// The bytes of `object`'s strings that are not UTF-8, as a record keeps
/// them: empty when it has none.
fn raw_strings(object: &CachedObject) -> Bytes {
    object
        .raw_strings()
        .map_or_else(Bytes::new, |strings| Bytes::from(strings.to_bytes()))
}

fn kind_code(kind: ChangeType) -> u32 {
    match kind {
        ChangeType::Added => 0,
        ChangeType::Modified => 1,
        ChangeType::Deleted => 2,
    }
}

/// One record, its failure told as the record `what()`'s.
fn read_record<M: prost::Message + Default>(
    input: &mut Verified<impl io::Read>,
    what: &dyn Fn() -> String,
) -> Result<M, LoadError> {
    input.record().map_err(|e| match e {
        ReadError::Io(e) => LoadError::Io(e),
        ReadError::Truncated => undecodable(&what(), "it passes the end of the file"),
        ReadError::Malformed(reason) => undecodable(&what(), &reason),
    })
}

fn undecodable(what: &str, reason: &str) -> LoadError {
    LoadError::Undecodable {
        what: what.to_owned(),
        reason: reason.to_owned(),
    }
}

/// Up to `len` bytes at `offset` (fewer at the end of the file).
fn read_at(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; len];
    let mut filled = 0;
    while filled < len {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}
