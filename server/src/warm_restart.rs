//! Warm restart (`--state-dir`): each served resource's store is saved to a
//! state file (`kubecache_reflector::StateFile`: objects, the event log's
//! exact history, resourceVersions; versioned, checksummed, replaced
//! atomically) periodically and at shutdown, and loaded at start: a good
//! file is served at once and the upstream watch resumes from it with no
//! list (`Reflector::restore`).
//!
//! # Files
//!
//! One file per resource in the directory, named for its group, version
//! and plural ([`file_name`]), e.g. `pods.v1.state`,
//! `widgets.example.com.v1.state`: stable across restarts, distinct for
//! distinct resources, and a valid file name for any CRD (characters
//! outside `[a-z0-9.-]` escaped, a name too long for a file system cut and
//! suffixed with a hash of the whole; the file's header names the resource
//! anyway, and another resource's file is refused).
//!
//! # Cluster identity
//!
//! `UID of the kube-system namespace` + `@` + `the API server's URL`,
//! fetched once at start. The UID is fixed for a cluster's life and new for
//! a new cluster, even at the same address; the URL tells apart the
//! clusters of copied etcd snapshots. A file of another identity is
//! refused (a full list). A kubecache that cannot read `kube-system` runs
//! without warm restart, and says so.
//!
//! # Saving
//!
//! Every `--state-save-interval-seconds` and once at shutdown (from the
//! stop signal, while requests drain, bounded by the shutdown grace), one
//! resource at a time, each on a blocking thread: at most one file's
//! buffers and one snapshot's extra tree nodes at a time. A store that has
//! not changed since its last save (or load) is not written again; one in
//! the middle of a list is skipped until the next turn. A failed save (a
//! full or read-only disk) is logged and counted, and serving goes on: the
//! previous file stays whole.
//!
//! # Loading
//!
//! Before the reflector's first step, on a blocking thread. A missing file
//! is a cold start; a refused one (damaged, truncated, another format
//! version, another cluster, resource or configuration) is one warning
//! naming the file and why, counted in `kubecache_state_loads_total` by
//! kind, and a cold start: it is never served.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use kubecache_reflector::upstream::ApiResource;
use kubecache_reflector::{ApplyingList, StateFile, StoreReader};
use kubecache_reflector::{Reflector, ReflectorStatus};
use kubecache_wire::Transform;
use tokio::sync::watch;

/// A resource's store and the state file it is saved to.
pub struct Persisted {
    /// The resource's name, in logs and metrics.
    pub name: String,
    /// Where it is saved.
    pub file: StateFile,
    /// The store.
    pub reader: StoreReader,
    /// Its reflector's status: whether it was restored, and at what.
    pub status: watch::Receiver<ReflectorStatus>,
}

/// Where the state files are, and the cluster they are of.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
    cluster: String,
}

impl StateDir {
    /// Creates `dir` if missing and learns the cluster's identity (see the
    /// module's *Cluster identity*) through `client`, whose API server is
    /// at `api_server`.
    ///
    /// # Errors
    ///
    /// The directory cannot be created, or `kube-system` cannot be read.
    pub async fn open(dir: &Path, client: &kube::Client, api_server: &str) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the state directory {}", dir.display()))?;
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(client.clone());
        let uid = namespaces
            .get("kube-system")
            .await
            .context("reading the kube-system namespace, whose UID identifies the cluster")?
            .metadata
            .uid
            .context("the kube-system namespace has no UID")?;
        Ok(StateDir {
            dir: dir.to_owned(),
            cluster: format!("{uid}@{api_server}"),
        })
    }

    /// The cluster identity written into and checked in every file.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The state file of `resource` stored under `transform`; `None`, with
    /// a warning, when the transform allows none.
    pub(crate) fn file(&self, resource: &ApiResource, transform: Transform) -> Option<StateFile> {
        let path = self.dir.join(file_name(resource));
        match StateFile::new(path, &self.cluster, resource.clone(), transform) {
            Ok(file) => Some(file),
            Err(error) => {
                tracing::warn!(resource = %resource.plural, %error, "no warm restart for this resource");
                None
            }
        }
    }
}

/// Longest file name written: file systems allow 255 bytes.
const LONGEST_NAME: usize = 200;

/// The file name of `resource`'s state (see the module's *Files*).
pub fn file_name(resource: &ApiResource) -> String {
    let mut name = String::new();
    for part in [&resource.plural, &resource.group, &resource.version] {
        if part.is_empty() {
            continue;
        }
        if !name.is_empty() {
            name.push('.');
        }
        for c in part.chars() {
            match c {
                'a'..='z' | '0'..='9' | '-' | '.' => name.push(c),
                other => name.push_str(&format!("%{:x}", u32::from(other))),
            }
        }
    }
    if name.len() > LONGEST_NAME {
        // FNV-1a: stable across builds, unlike std's hasher.
        let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let mut cut = LONGEST_NAME - 17;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name = format!("{}-{hash:016x}", &name[..cut]);
    }
    name + ".state"
}

/// Loads `file` into `reflector`'s new store, if it is there and good (see
/// the module's *Loading*); the reflector then resumes instead of listing.
pub(crate) async fn restore(file: StateFile, reflector: &mut Reflector, resource: &str) {
    let path = file.path().display().to_string();
    let started = Instant::now();
    let result = match tokio::task::spawn_blocking(move || file.load()).await {
        Err(error) => {
            tracing::error!(%resource, file = %path, %error, "loading the state file failed: listing instead");
            "failed"
        }
        Ok(Ok(None)) => {
            tracing::info!(%resource, file = %path, "no state file: listing");
            "none"
        }
        Ok(Err(error)) => {
            tracing::warn!(%resource, file = %path, %error, "state file refused: listing instead");
            error.kind()
        }
        Ok(Ok(Some(saved))) => {
            let (objects, events, rv) = (saved.len(), saved.events(), saved.resource_version);
            match reflector.restore(saved) {
                Ok(()) => {
                    tracing::info!(%resource, file = %path, objects, events, resource_version = rv, elapsed = ?started.elapsed(), "restored from the state file: serving it, resuming the watch");
                    "restored"
                }
                Err(error) => {
                    tracing::error!(%resource, file = %path, %error, "state file not restored: listing instead");
                    "failed"
                }
            }
        }
    };
    metrics::counter!("kubecache_state_loads_total", "resource" => resource.to_owned(), "result" => result)
        .increment(1);
}

/// Saves every resource's state every `interval`, and once more when
/// `stopping` turns `true` (bounded by `grace`), then returns.
pub async fn save_periodically(
    stores: Vec<Persisted>,
    interval: Duration,
    grace: Duration,
    mut stopping: watch::Receiver<bool>,
) {
    // The resourceVersion of each store's file: an unchanged store is not
    // written again.
    let mut saved: Vec<Option<u64>> = stores
        .iter()
        .map(|store| {
            store
                .status
                .borrow()
                .restored
                .map(|restored| restored.resource_version)
        })
        .collect();
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => save_all(&stores, &mut saved, "periodic").await,
            () = async { drop(stopping.wait_for(|down| *down).await) } => {
                let last = save_all(&stores, &mut saved, "shutdown");
                if tokio::time::timeout(grace, last).await.is_err() {
                    tracing::warn!(?grace, "state files not all saved within the shutdown grace");
                }
                return;
            }
        }
    }
}

/// One save of each store that changed, one after the other.
async fn save_all(stores: &[Persisted], saved: &mut [Option<u64>], why: &'static str) {
    for (store, last) in stores.iter().zip(saved.iter_mut()) {
        if let Some(rv) = save(store, *last, why).await {
            *last = Some(rv);
        }
    }
}

/// Saves `store`'s state unless it is still at `last`; the resourceVersion
/// saved.
async fn save(store: &Persisted, last: Option<u64>, why: &'static str) -> Option<u64> {
    let (file, reader) = (store.file.clone(), store.reader.clone());
    // The snapshot, taken after, is at least this far: the restarted watch
    // resumes from the larger of the two.
    let upstream = reader.current_resource_version();
    if upstream == 0 || last == Some(upstream) {
        return None;
    }
    let resource = store.name.clone();
    let started = Instant::now();
    let path = file.path().display().to_string();
    let result = tokio::task::spawn_blocking(move || file.save(&reader, upstream)).await;
    let elapsed = started.elapsed();
    let outcome = match result {
        Ok(Ok(stats)) => {
            tracing::info!(%resource, file = %path, reason = %why, resource_version = upstream, objects = stats.objects, events = stats.events, bytes = stats.bytes, ?elapsed, "state saved");
            metrics::histogram!("kubecache_state_save_duration_seconds", "resource" => resource.clone())
                .record(elapsed.as_secs_f64());
            metrics::gauge!("kubecache_state_file_bytes", "resource" => resource.clone())
                .set(stats.bytes as f64);
            metrics::gauge!("kubecache_state_last_save_timestamp_seconds", "resource" => resource.clone())
                .set(unix_seconds());
            Some(upstream)
        }
        Ok(Err(error))
            if error
                .get_ref()
                .is_some_and(|e| e.downcast_ref::<ApplyingList>().is_some()) =>
        {
            tracing::debug!(%resource, "a list is being applied: saved at the next turn");
            return None;
        }
        Ok(Err(error)) => {
            tracing::warn!(%resource, file = %path, reason = %why, %error, "saving the state file failed: serving on, the previous file is kept");
            None
        }
        Err(error) => {
            tracing::error!(%resource, file = %path, reason = %why, %error, "saving the state file failed: serving on, the previous file is kept");
            None
        }
    };
    let result = if outcome.is_some() { "saved" } else { "failed" };
    metrics::counter!("kubecache_state_saves_total", "resource" => resource, "result" => result)
        .increment(1);
    outcome
}

fn unix_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, version: &str, plural: &str) -> ApiResource {
        ApiResource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: "Kind".into(),
            namespaced: true,
        }
    }

    #[test]
    fn state_file_names_are_the_group_version_and_plural_and_safe_for_any_name() {
        assert_eq!(file_name(&resource("", "v1", "pods")), "pods.v1.state");
        assert_eq!(
            file_name(&resource("example.com", "v1alpha1", "widgets")),
            "widgets.example.com.v1alpha1.state"
        );
        assert_eq!(
            file_name(&resource("", "v1", "a/../B")),
            "a%2f..%2f%42.v1.state"
        );
        let group = "g".repeat(253);
        let long = file_name(&resource(&group, "v1", "widgets"));
        let other = file_name(&resource(&format!("{}h", "g".repeat(252)), "v1", "widgets"));
        assert!(long.len() <= LONGEST_NAME + ".state".len(), "{long}");
        assert_ne!(long, other, "names cut alike stay apart");
    }
}
