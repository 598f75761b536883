//! What the reflector integration tests share: a reflector of pods running
//! against a URL, stopped when dropped.

use kubecache_reflector::upstream::{ApiResource, RequestEncoding, ResourceSpec, Upstream};
use kubecache_reflector::{Reflector, ReflectorConfig, ReflectorStatus, Strategy};
use kubecache_reflector::{StoreConfig, StoreReader, store};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running reflector of pods and its store.
pub struct Running {
    pub reader: StoreReader,
    pub status: watch::Receiver<ReflectorStatus>,
    /// The reflector's task, aborted when dropped.
    pub task: JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a reflector of all pods at `url`, asking for `wire` (logs go to
/// the test output with `RUST_LOG`).
pub fn start(url: &str, strategy: Strategy, wire: RequestEncoding, page_size: usize) -> Running {
    start_with(
        url,
        ReflectorConfig {
            strategy,
            wire,
            page_size,
            ..ReflectorConfig::default()
        },
    )
}

/// Starts a reflector of all pods at `url` with `config`.
pub fn start_with(url: &str, config: ReflectorConfig) -> Running {
    start_of(url, ResourceSpec::all(ApiResource::pods()), config)
}

/// Starts a reflector of `spec` at `url` with `config`.
pub fn start_of(url: &str, spec: ResourceSpec, config: ReflectorConfig) -> Running {
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    start_client(client, spec, config)
}

/// Starts a reflector of `spec` through `client` with `config`.
pub fn start_client(client: kube::Client, spec: ResourceSpec, config: ReflectorConfig) -> Running {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let (writer, reader) = store(StoreConfig::default());
    let reflector = Reflector::new(Upstream::new(client, spec), config, writer);
    let status = reflector.status();
    let task = tokio::spawn(reflector.run());
    Running {
        reader,
        status,
        task,
    }
}
