//! kubecache's configuration: an optional YAML file, overridden by flags
//! and their environment variables, validated as a whole before anything
//! starts.
//!
//! Every error names the field it is about, in the file's spelling and,
//! where one exists, the flag's (`pageSize (--page-size): must be at least
//! 1`), so a bad ConfigMap or a bad flag fails the start-up with a message
//! that says what to fix.
//!
//! The file (keys in camelCase, unknown keys refused):
//!
//! ```yaml
//! listen: "0.0.0.0:8080"
//! tlsCertFile: /etc/kubecache-tls/tls.crt       # HTTPS (both or neither)
//! tlsPrivateKeyFile: /etc/kubecache-tls/tls.key
//! clientCAFile: /etc/kubecache-client-ca/ca.crt # verify client certificates
//! strategy: auto            # auto | parallel | sharded | streaming | list-watch
//! pageSize: 500
//! listShards: 4             # namespaces read at once by a sharded list
//! wire: auto                # auto | json | protobuf
//! readWaitSeconds: 3
//! bookmarkIntervalSeconds: 60
//! watcherQueue: 1024
//! maxWatchesPerClient: 1000
//! freshnessRequests: 2
//! probeIntervalSeconds: 0.1
//! coldGetPassthrough: true
//! writeStallSeconds: 30
//! eventLog: { maxEvents: 102400, maxAgeSeconds: 300 }
//! auth: { mode: kubernetes, allowedTtlSeconds: 60, deniedTtlSeconds: 10, cacheEntries: 10000 }
//! connections: { max: 4096, maxPerAddress: 512, headerReadTimeoutSeconds: 32, idleTimeoutSeconds: 90 }
//! stateDir: /var/lib/kubecache    # warm restart: state files here (default: none)
//! stateSaveIntervalSeconds: 60
//! resources:
//!   - resource: pods        # plural or plural.group
//!     namespace: ""         # one namespace only (default: all)
//!     labelSelector: ""
//!     fieldSelector: ""
//!     stripFields: [metadata.managedFields]
//!     indexes: [{ name: node, path: spec.nodeName }]
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kubecache_reflector::upstream::{ReflectorConfig, RequestEncoding, Strategy};
use kubecache_reflector::{EventLogConfig, IndexSpec, StoreConfig};
use kubecache_wire::{FieldSelector, LabelSelector, Transform};
use serde::Deserialize;

use crate::ServeSettings;
use crate::auth::AuthSettings;
use crate::serving::{Limits, Server, Tls, TlsFile, TlsFiles};

/// The command line; every flag also has an environment variable and, but
/// for the upstream's, a key in the file.
#[derive(clap::Parser, Debug, Default)]
#[command(
    name = "kubecache",
    version,
    about = "A shared, indexed, in-memory cache in front of the Kubernetes API server"
)]
pub struct Cli {
    /// YAML configuration file; flags override its keys.
    #[arg(long, env = "KUBECACHE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to serve the HTTP API on [default: 0.0.0.0:8080].
    #[arg(long, env = "KUBECACHE_LISTEN")]
    pub listen: Option<String>,
    /// Serve HTTPS with this certificate chain (PEM, leaf first), reloaded
    /// when it changes; needs --tls-private-key-file.
    #[arg(long, env = "KUBECACHE_TLS_CERT_FILE")]
    pub tls_cert_file: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert-file.
    #[arg(long, env = "KUBECACHE_TLS_PRIVATE_KEY_FILE")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Verify client certificates against these CA certificates (PEM) when
    /// clients present one; needs TLS.
    #[arg(long, env = "KUBECACHE_CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// Resources to cache, by plural or plural.group (e.g.
    /// pods,configmaps,widgets.example.com) [default: pods]. Replaces the
    /// file's list (and its per-resource settings).
    #[arg(long, env = "KUBECACHE_RESOURCES", value_delimiter = ',')]
    pub resources: Option<Vec<String>>,
    /// Initial-list strategy: auto, parallel, sharded, streaming or
    /// list-watch [default: auto].
    #[arg(long, env = "KUBECACHE_STRATEGY")]
    pub strategy: Option<String>,
    /// Objects per list page [default: 500].
    #[arg(long, env = "KUBECACHE_PAGE_SIZE")]
    pub page_size: Option<usize>,
    /// Namespaces a sharded list reads at once [default: 4].
    #[arg(long, env = "KUBECACHE_LIST_SHARDS")]
    pub list_shards: Option<usize>,
    /// Encoding asked of the API server: auto (protobuf for built-in kinds,
    /// JSON otherwise), json or protobuf [default: auto].
    #[arg(long, env = "KUBECACHE_WIRE")]
    pub wire: Option<String>,
    /// Longest a read waits for the cache to reach a resourceVersion
    /// before answering 504, in seconds [default: 3].
    #[arg(long, env = "KUBECACHE_READ_WAIT_SECONDS")]
    pub read_wait_seconds: Option<f64>,
    /// Interval of bookmarks to watchers, in seconds [default: 60].
    #[arg(long, env = "KUBECACHE_BOOKMARK_INTERVAL_SECONDS")]
    pub bookmark_interval_seconds: Option<f64>,
    /// Events queued for one watcher before it is cut with 410 [default:
    /// 1024].
    #[arg(long, env = "KUBECACHE_WATCHER_QUEUE")]
    pub watcher_queue: Option<usize>,
    /// Most requirements of a list's or watch's label and field selectors
    /// together; more get 400 [default: 100].
    #[arg(long, env = "KUBECACHE_MAX_SELECTOR_REQUIREMENTS")]
    pub max_selector_requirements: Option<usize>,
    /// Open watches one client (a user; an address for anonymous callers)
    /// may hold; one more gets 429 [default: 1000].
    #[arg(long, env = "KUBECACHE_MAX_WATCHES_PER_CLIENT")]
    pub max_watches_per_client: Option<usize>,
    /// Most requests for the API server's current resourceVersion in
    /// flight at once, for consistent reads [default: 2].
    #[arg(long, env = "KUBECACHE_FRESHNESS_REQUESTS")]
    pub freshness_requests: Option<usize>,
    /// How often a probe watch starts while consistent reads of a resource
    /// wait for proof that it is complete, in seconds [default: 0.1].
    #[arg(long, env = "KUBECACHE_PROBE_INTERVAL_SECONDS")]
    pub probe_interval_seconds: Option<f64>,
    /// Pass a consistent GET of one object through to the API server when
    /// it would wait for a cold probe (about 1 s), instead of waiting
    /// [default: true].
    #[arg(
        long,
        env = "KUBECACHE_COLD_GET_PASSTHROUGH",
        num_args = 1,
        value_name = "BOOL"
    )]
    pub cold_get_passthrough: Option<bool>,
    /// Longest a write to a client may wait for it to read before its
    /// connection is closed, in seconds [default: 30].
    #[arg(long, env = "KUBECACHE_WRITE_STALL_SECONDS")]
    pub write_stall_seconds: Option<f64>,
    /// Most events the replay log of each resource keeps [default: 102400].
    #[arg(long, env = "KUBECACHE_EVENT_LOG_SIZE")]
    pub event_log_size: Option<usize>,
    /// How requests answered from the caches are authorized: kubernetes (a
    /// TokenReview and a SubjectAccessReview against the API server) or
    /// none (anyone who reaches the port reads every cached object; for
    /// local runs and benchmarks) [default: kubernetes].
    #[arg(long, env = "KUBECACHE_AUTH")]
    pub auth: Option<String>,
    /// Seconds an allowed request or an authenticated token is kept: a
    /// revoked permission is honoured within it [default: 60].
    #[arg(long, env = "KUBECACHE_AUTH_ALLOWED_TTL_SECONDS")]
    pub auth_allowed_ttl_seconds: Option<f64>,
    /// Seconds a denied request or a rejected token is kept: a new grant
    /// is honoured within it [default: 10].
    #[arg(long, env = "KUBECACHE_AUTH_DENIED_TTL_SECONDS")]
    pub auth_denied_ttl_seconds: Option<f64>,
    /// Connections served at once; beyond, requests get a 429 Status.
    /// Lowered to fit the open-file limit [default: 4096].
    #[arg(long, env = "KUBECACHE_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Connections served at once from one client address [default: 512].
    #[arg(long, env = "KUBECACHE_MAX_CONNECTIONS_PER_ADDRESS")]
    pub max_connections_per_address: Option<usize>,
    /// Seconds a request's head may take from its first byte; a slower
    /// client is disconnected [default: 32].
    #[arg(long, env = "KUBECACHE_HEADER_READ_TIMEOUT_SECONDS")]
    pub header_read_timeout_seconds: Option<f64>,
    /// Seconds a keep-alive connection may wait for its next request
    /// before it is closed [default: 90].
    #[arg(long, env = "KUBECACHE_IDLE_TIMEOUT_SECONDS")]
    pub idle_timeout_seconds: Option<f64>,
    /// Warm restart: keep each resource's state in a file in this
    /// directory, saved periodically and on SIGTERM, and start from it
    /// instead of listing [default: none: every start lists].
    #[arg(long, env = "KUBECACHE_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Seconds between saves of the state files (with --state-dir); a
    /// SIGKILL loses the changes since the last one, which the restarted
    /// watch then replays [default: 60].
    #[arg(long, env = "KUBECACHE_STATE_SAVE_INTERVAL_SECONDS")]
    pub state_save_interval_seconds: Option<f64>,
    /// Kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or the
    /// in-cluster service account).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Run against an in-process simulated API server with this many
    /// realistic pods (plus config maps and widgets), with churn. Only in
    /// builds with the `simulate` feature (not the image).
    #[arg(long)]
    pub simulate: Option<usize>,
    /// Pod writes per second of the simulated API server.
    #[arg(long, default_value_t = 50.0)]
    pub simulate_churn: f64,
}

/// The configuration file.
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileConfig {
    listen: Option<String>,
    tls_cert_file: Option<PathBuf>,
    tls_private_key_file: Option<PathBuf>,
    #[serde(rename = "clientCAFile")]
    client_ca_file: Option<PathBuf>,
    strategy: Option<String>,
    page_size: Option<usize>,
    list_shards: Option<usize>,
    wire: Option<String>,
    read_wait_seconds: Option<f64>,
    bookmark_interval_seconds: Option<f64>,
    watcher_queue: Option<usize>,
    max_selector_requirements: Option<usize>,
    max_watches_per_client: Option<usize>,
    freshness_requests: Option<usize>,
    probe_interval_seconds: Option<f64>,
    cold_get_passthrough: Option<bool>,
    write_stall_seconds: Option<f64>,
    event_log: Option<EventLogFile>,
    auth: Option<AuthFile>,
    connections: Option<ConnectionsFile>,
    state_dir: Option<PathBuf>,
    state_save_interval_seconds: Option<f64>,
    resources: Option<Vec<ResourceFile>>,
}

/// `connections` of the file.
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConnectionsFile {
    max: Option<usize>,
    max_per_address: Option<usize>,
    header_read_timeout_seconds: Option<f64>,
    idle_timeout_seconds: Option<f64>,
}

/// `auth` of the file.
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AuthFile {
    mode: Option<String>,
    allowed_ttl_seconds: Option<f64>,
    denied_ttl_seconds: Option<f64>,
    cache_entries: Option<usize>,
}

/// `eventLog` of the file.
#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EventLogFile {
    max_events: Option<usize>,
    max_age_seconds: Option<f64>,
}

/// One entry of `resources`.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResourceFile {
    resource: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    label_selector: String,
    #[serde(default)]
    field_selector: String,
    strip_fields: Option<Vec<String>>,
    #[serde(default)]
    indexes: Vec<IndexFile>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct IndexFile {
    name: String,
    path: String,
}

/// The validated configuration.
#[derive(Debug)]
pub struct Config {
    /// Where the HTTP API listens.
    pub listen: SocketAddr,
    /// HTTPS, its files loaded; plain HTTP if `None`.
    pub tls: Option<Tls>,
    /// Longest a write to a client may make no progress before its
    /// connection is closed.
    pub write_stall: Duration,
    /// How every resource is served.
    pub serve: ServeSettings,
    /// How requests answered from the caches are authorized.
    pub auth: AuthConfig,
    /// The bounds of serving, before they are fitted to the open-file
    /// limit ([`Limits::within_descriptors`]).
    pub connections: Limits,
    /// Warm restart: where the state files are and how often they are
    /// saved; `None`: nothing is saved, every start lists.
    pub state: Option<StateConfig>,
    /// The resources, in order.
    pub resources: Vec<ResourceConfig>,
}

/// `stateDir` and `stateSaveIntervalSeconds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateConfig {
    /// The directory of the state files (created if missing).
    pub dir: PathBuf,
    /// How often they are saved.
    pub save_interval: Duration,
}

impl StateConfig {
    /// One minute: a save costs about 0.5 s of one core and a file as large
    /// as the objects' JSON per 100k pods (`state_file`'s measurements), so
    /// once a minute is under 1 % of a core; and a SIGKILL (an OOM kill, a
    /// node lost) then loses at most a minute of changes, which the resumed
    /// watch replays, well inside kube-apiserver's watch window (its watch
    /// cache keeps 100k events, etcd 5 minutes of history).
    pub const DEFAULT_SAVE_INTERVAL: Duration = Duration::from_secs(60);
}

/// `--auth` and its settings.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// `false` for `--auth=none`.
    pub enabled: bool,
    /// How review answers are kept.
    pub settings: AuthSettings,
}

impl AuthConfig {
    fn resolve(cli: &Cli, file: AuthFile) -> Result<AuthConfig, ConfigError> {
        let enabled = match cli.auth.as_deref().or(file.mode.as_deref()) {
            None | Some("kubernetes") => true,
            Some("none") => false,
            Some(other) => {
                return Err(invalid(
                    "auth.mode (--auth)",
                    format!("{other:?} is neither kubernetes nor none"),
                ));
            }
        };
        let settings = AuthSettings {
            allowed_ttl: seconds(
                "auth.allowedTtlSeconds (--auth-allowed-ttl-seconds)",
                cli.auth_allowed_ttl_seconds.or(file.allowed_ttl_seconds),
                AuthSettings::DEFAULT_ALLOWED_TTL,
            )?,
            denied_ttl: seconds(
                "auth.deniedTtlSeconds (--auth-denied-ttl-seconds)",
                cli.auth_denied_ttl_seconds.or(file.denied_ttl_seconds),
                AuthSettings::DEFAULT_DENIED_TTL,
            )?,
            cache_entries: file
                .cache_entries
                .unwrap_or(AuthSettings::DEFAULT_CACHE_ENTRIES),
        };
        if settings.cache_entries == 0 {
            return Err(invalid("auth.cacheEntries", "must be at least 1"));
        }
        Ok(AuthConfig { enabled, settings })
    }
}

/// `connections` of the file and its flags.
fn connections(cli: &Cli, file: ConnectionsFile) -> Result<Limits, ConfigError> {
    let default = Limits::default();
    let limits = Limits {
        header_read_timeout: seconds(
            "connections.headerReadTimeoutSeconds (--header-read-timeout-seconds)",
            cli.header_read_timeout_seconds
                .or(file.header_read_timeout_seconds),
            default.header_read_timeout,
        )?,
        idle_timeout: seconds(
            "connections.idleTimeoutSeconds (--idle-timeout-seconds)",
            cli.idle_timeout_seconds.or(file.idle_timeout_seconds),
            default.idle_timeout,
        )?,
        max_connections: cli
            .max_connections
            .or(file.max)
            .unwrap_or(default.max_connections),
        max_connections_per_address: cli
            .max_connections_per_address
            .or(file.max_per_address)
            .unwrap_or(default.max_connections_per_address),
    };
    if limits.max_connections == 0 {
        return Err(invalid(
            "connections.max (--max-connections)",
            "must be at least 1",
        ));
    }
    if limits.max_connections_per_address == 0 {
        return Err(invalid(
            "connections.maxPerAddress (--max-connections-per-address)",
            "must be at least 1",
        ));
    }
    Ok(limits)
}

/// One resource to cache, ready to start.
#[derive(Debug)]
pub struct ResourceConfig {
    /// `plural` or `plural.group`, found by discovery.
    pub name: String,
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Upstream label selector.
    pub label_selector: Option<String>,
    /// Upstream field selector.
    pub field_selector: Option<String>,
    /// The store (field indexes, event log).
    pub store: StoreConfig,
    /// The reflector (strategy, page size, transform).
    pub reflector: ReflectorConfig,
}

/// A field with a bad value.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {field}: {message}")]
pub struct ConfigError {
    /// The field, as the file spells it, with the flag where one exists.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn invalid(field: impl Into<String>, message: impl std::fmt::Display) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.to_string(),
    }
}

impl FileConfig {
    /// Reads and parses a configuration file.
    ///
    /// # Errors
    ///
    /// The file cannot be read, is not YAML, or has an unknown key or a
    /// value of the wrong type (the message names it and its line).
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let field = format!("--config {}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| invalid(&field, e))?;
        Self::parse(&text).map_err(|e| invalid(field, e.message))
    }

    /// Parses a configuration file's text.
    ///
    /// # Errors
    ///
    /// As [`FileConfig::read`].
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        if text.trim().is_empty() {
            return Ok(FileConfig::default());
        }
        serde_yaml::from_str(text).map_err(|e| invalid("file", e))
    }
}

impl Config {
    /// The configuration of `cli` over `file`: each flag given replaces the
    /// file's key, then the defaults fill in.
    ///
    /// # Errors
    ///
    /// The first invalid field.
    pub fn resolve(cli: &Cli, file: FileConfig) -> Result<Config, ConfigError> {
        let listen = cli
            .listen
            .clone()
            .or(file.listen)
            .unwrap_or_else(|| "0.0.0.0:8080".into());
        let listen: SocketAddr = listen
            .parse()
            .map_err(|e| invalid("listen (--listen)", format!("{listen:?}: {e}")))?;
        let tls = tls(
            cli.tls_cert_file.clone().or(file.tls_cert_file),
            cli.tls_private_key_file
                .clone()
                .or(file.tls_private_key_file),
            cli.client_ca_file.clone().or(file.client_ca_file),
        )?;
        let strategy = cli.strategy.clone().or(file.strategy);
        let strategy: Strategy = match strategy {
            Some(s) => s.parse().map_err(|e| invalid("strategy (--strategy)", e))?,
            None => Strategy::Auto,
        };
        let wire: RequestEncoding = match cli.wire.clone().or(file.wire) {
            Some(w) => w.parse().map_err(|e| invalid("wire (--wire)", e))?,
            None => RequestEncoding::Auto,
        };
        let page_size = cli.page_size.or(file.page_size).unwrap_or(500);
        if page_size == 0 {
            return Err(invalid("pageSize (--page-size)", "must be at least 1"));
        }
        let list_shards = cli.list_shards.or(file.list_shards).unwrap_or(4);
        if list_shards == 0 {
            return Err(invalid("listShards (--list-shards)", "must be at least 1"));
        }
        let serve = ServeSettings {
            read_wait: seconds(
                "readWaitSeconds (--read-wait-seconds)",
                cli.read_wait_seconds.or(file.read_wait_seconds),
                ServeSettings::DEFAULT_READ_WAIT,
            )?,
            bookmark_interval: seconds(
                "bookmarkIntervalSeconds (--bookmark-interval-seconds)",
                cli.bookmark_interval_seconds
                    .or(file.bookmark_interval_seconds),
                ServeSettings::DEFAULT_BOOKMARK_INTERVAL,
            )?,
            watcher_queue: cli
                .watcher_queue
                .or(file.watcher_queue)
                .unwrap_or(ServeSettings::DEFAULT_WATCHER_QUEUE),
            max_selector_requirements: cli
                .max_selector_requirements
                .or(file.max_selector_requirements)
                .unwrap_or(ServeSettings::DEFAULT_MAX_SELECTOR_REQUIREMENTS),
            watches_per_client: cli
                .max_watches_per_client
                .or(file.max_watches_per_client)
                .unwrap_or(ServeSettings::DEFAULT_WATCHES_PER_CLIENT),
            freshness_requests: cli
                .freshness_requests
                .or(file.freshness_requests)
                .unwrap_or(ServeSettings::DEFAULT_FRESHNESS_REQUESTS),
            probe_interval: seconds(
                "probeIntervalSeconds (--probe-interval-seconds)",
                cli.probe_interval_seconds.or(file.probe_interval_seconds),
                ServeSettings::DEFAULT_PROBE_INTERVAL,
            )?,
            cold_get_passthrough: cli
                .cold_get_passthrough
                .or(file.cold_get_passthrough)
                .unwrap_or(ServeSettings::default().cold_get_passthrough),
            ..ServeSettings::default()
        };
        if serve.freshness_requests == 0 {
            return Err(invalid(
                "freshnessRequests (--freshness-requests)",
                "must be at least 1",
            ));
        }
        if serve.watcher_queue == 0 {
            return Err(invalid(
                "watcherQueue (--watcher-queue)",
                "must be at least 1",
            ));
        }
        if serve.watches_per_client == 0 {
            return Err(invalid(
                "maxWatchesPerClient (--max-watches-per-client)",
                "must be at least 1",
            ));
        }
        let write_stall = seconds(
            "writeStallSeconds (--write-stall-seconds)",
            cli.write_stall_seconds.or(file.write_stall_seconds),
            Server::WRITE_STALL,
        )?;
        let auth = AuthConfig::resolve(cli, file.auth.unwrap_or_default())?;
        let connections = connections(cli, file.connections.unwrap_or_default())?;
        let save_interval = seconds(
            "stateSaveIntervalSeconds (--state-save-interval-seconds)",
            cli.state_save_interval_seconds
                .or(file.state_save_interval_seconds),
            StateConfig::DEFAULT_SAVE_INTERVAL,
        )?;
        let state = cli
            .state_dir
            .clone()
            .or(file.state_dir)
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| StateConfig { dir, save_interval });
        let file_log = file.event_log.unwrap_or_default();
        let event_log = EventLogConfig {
            max_events: cli
                .event_log_size
                .or(file_log.max_events)
                .unwrap_or(EventLogConfig::DEFAULT_MAX_EVENTS),
            max_age: seconds(
                "eventLog.maxAgeSeconds",
                file_log.max_age_seconds,
                EventLogConfig::DEFAULT_MAX_AGE,
            )?,
        };
        if event_log.max_events == 0 {
            return Err(invalid(
                "eventLog.maxEvents (--event-log-size)",
                "must be at least 1",
            ));
        }
        let resources = match (&cli.resources, file.resources) {
            (Some(names), _) => names
                .iter()
                .map(|name| ResourceFile {
                    resource: name.trim().to_string(),
                    ..ResourceFile::default()
                })
                .collect(),
            (None, Some(resources)) => resources,
            (None, None) => vec![ResourceFile {
                resource: "pods".into(),
                ..ResourceFile::default()
            }],
        };
        if resources.is_empty() {
            return Err(invalid("resources (--resources)", "name at least one"));
        }
        let resources = resources
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let reflector = ReflectorConfig {
                    strategy,
                    page_size,
                    list_shards,
                    wire,
                    ..ReflectorConfig::default()
                };
                r.resolve(i, reflector, &event_log)
            })
            .collect::<Result<Vec<_>, _>>()?;
        for (i, r) in resources.iter().enumerate() {
            if resources[..i].iter().any(|o| o.name == r.name) {
                return Err(invalid(
                    format!("resources[{i}].resource"),
                    format!("{:?} is listed twice", r.name),
                ));
            }
        }
        Ok(Config {
            listen,
            tls,
            write_stall,
            serve,
            auth,
            connections,
            state,
            resources,
        })
    }
}

impl ResourceFile {
    fn resolve(
        self,
        i: usize,
        mut reflector: ReflectorConfig,
        event_log: &EventLogConfig,
    ) -> Result<ResourceConfig, ConfigError> {
        let field = |name: &str| format!("resources[{i}].{name}");
        if self.resource.is_empty() {
            return Err(invalid(field("resource"), "must name a resource"));
        }
        if !self.label_selector.is_empty() {
            LabelSelector::parse(&self.label_selector)
                .map_err(|e| invalid(field("labelSelector"), e))?;
        }
        if !self.field_selector.is_empty() {
            FieldSelector::parse(&self.field_selector)
                .map_err(|e| invalid(field("fieldSelector"), e))?;
        }
        if let Some(paths) = &self.strip_fields {
            let mut transform = Transform::keep_everything();
            for (j, path) in paths.iter().enumerate() {
                transform = transform
                    .strip(path)
                    .map_err(|e| invalid(field(&format!("stripFields[{j}]")), e))?;
            }
            reflector.transform = transform;
        }
        let store = StoreConfig {
            field_indexes: self
                .indexes
                .into_iter()
                .map(|index| IndexSpec {
                    name: index.name,
                    path: index.path,
                })
                .collect(),
            event_log: event_log.clone(),
        };
        for (j, index) in store.field_indexes.iter().enumerate() {
            if crate::served::BUILTIN_INDEXES.contains(&index.name.as_str()) {
                return Err(invalid(
                    field(&format!("indexes[{j}].name")),
                    format!("{:?} is a built-in index; choose another name", index.name),
                ));
            }
            kubecache_wire::FieldPath::parse(&index.path)
                .map_err(|e| invalid(field(&format!("indexes[{j}].path")), e))?;
        }
        store
            .validate()
            .map_err(|e| invalid(field("indexes"), e.0))?;
        let optional = |s: String| (!s.is_empty()).then_some(s);
        Ok(ResourceConfig {
            name: self.resource,
            namespace: optional(self.namespace),
            label_selector: optional(self.label_selector),
            field_selector: optional(self.field_selector),
            store,
            reflector,
        })
    }
}

const TLS_CERT_FILE: &str = "tlsCertFile (--tls-cert-file)";
const TLS_PRIVATE_KEY_FILE: &str = "tlsPrivateKeyFile (--tls-private-key-file)";
const CLIENT_CA_FILE: &str = "clientCAFile (--client-ca-file)";

/// TLS from its three optional files (an empty path is no path): the
/// certificate and key both or neither, the client CA only with them, each
/// file loaded now.
fn tls(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
) -> Result<Option<Tls>, ConfigError> {
    let given = |path: Option<PathBuf>| path.filter(|p| !p.as_os_str().is_empty());
    let files = match (given(cert), given(key), given(client_ca)) {
        (None, None, None) => return Ok(None),
        (Some(cert), Some(key), client_ca) => TlsFiles {
            cert,
            key,
            client_ca,
        },
        (Some(_), None, _) => {
            return Err(invalid(
                TLS_PRIVATE_KEY_FILE,
                format!("needed with {TLS_CERT_FILE}"),
            ));
        }
        (None, Some(_), _) => {
            return Err(invalid(
                TLS_CERT_FILE,
                format!("needed with {TLS_PRIVATE_KEY_FILE}"),
            ));
        }
        (None, None, Some(_)) => {
            return Err(invalid(
                CLIENT_CA_FILE,
                format!(
                    "client certificates need TLS: set {TLS_CERT_FILE} and {TLS_PRIVATE_KEY_FILE}"
                ),
            ));
        }
    };
    Tls::load(files).map(Some).map_err(|error| {
        let field = match error.file {
            TlsFile::Cert => TLS_CERT_FILE,
            TlsFile::Key => TLS_PRIVATE_KEY_FILE,
            TlsFile::ClientCa => CLIENT_CA_FILE,
        };
        invalid(field, error)
    })
}

/// A duration in seconds, positive and finite.
fn seconds(field: &str, value: Option<f64>, default: Duration) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(s) => match Duration::try_from_secs_f64(s) {
            Ok(duration) if s > 0.0 => Ok(duration),
            _ => Err(invalid(
                field,
                format!("{s} is not a positive number of seconds"),
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(yaml: &str, args: &[&str]) -> Result<Config, ConfigError> {
        use clap::Parser;
        let mut argv = vec!["kubecache"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).unwrap();
        Config::resolve(&cli, FileConfig::parse(yaml)?)
    }

    fn error_field(yaml: &str, args: &[&str]) -> String {
        resolve(yaml, args).unwrap_err().field
    }

    #[test]
    fn auth_is_on_unless_turned_off_by_name() {
        let config = resolve("", &[]).unwrap();
        assert!(config.auth.enabled);
        assert_eq!(
            config.auth.settings.allowed_ttl,
            AuthSettings::DEFAULT_ALLOWED_TTL
        );
        let config = resolve("auth: {mode: none, allowedTtlSeconds: 5}", &[]).unwrap();
        assert!(!config.auth.enabled);
        assert_eq!(config.auth.settings.allowed_ttl, Duration::from_secs(5));
        let config = resolve("auth: {mode: none}", &["--auth", "kubernetes"]).unwrap();
        assert!(config.auth.enabled);
    }

    #[test]
    fn connection_limits_come_from_flags_over_the_file() {
        assert_eq!(resolve("", &[]).unwrap().connections, Limits::default());
        let yaml = "connections: {max: 10, maxPerAddress: 2, idleTimeoutSeconds: 5}";
        let config = resolve(yaml, &["--max-connections", "20"]).unwrap();
        assert_eq!(
            config.connections,
            Limits {
                max_connections: 20,
                max_connections_per_address: 2,
                idle_timeout: Duration::from_secs(5),
                ..Limits::default()
            }
        );
    }

    #[test]
    fn freshness_settings_come_from_flags_over_the_file_and_zero_is_refused() {
        let yaml = "freshnessRequests: 2\nprobeIntervalSeconds: 0.5";
        let config = resolve(yaml, &["--probe-interval-seconds", "0.25"]).unwrap();
        assert_eq!(config.serve.freshness_requests, 2);
        assert_eq!(config.serve.probe_interval, Duration::from_millis(250));
        assert_eq!(
            error_field("", &["--freshness-requests", "0"]),
            "freshnessRequests (--freshness-requests)"
        );
        assert_eq!(
            error_field("probeIntervalSeconds: 0", &[]),
            "probeIntervalSeconds (--probe-interval-seconds)"
        );
    }

    #[test]
    fn cold_get_passthrough_is_on_unless_the_file_or_the_flag_turns_it_off() {
        assert!(resolve("", &[]).unwrap().serve.cold_get_passthrough);
        let off = resolve("coldGetPassthrough: false", &[]).unwrap();
        assert!(!off.serve.cold_get_passthrough);
        let on = resolve(
            "coldGetPassthrough: false",
            &["--cold-get-passthrough=true"],
        )
        .unwrap();
        assert!(on.serve.cold_get_passthrough);
        let off = resolve("", &["--cold-get-passthrough", "false"]).unwrap();
        assert!(!off.serve.cold_get_passthrough);
    }

    #[test]
    fn warm_restart_is_off_unless_a_state_dir_is_given_and_its_interval_comes_from_flags_over_the_file()
     {
        assert_eq!(resolve("", &[]).unwrap().state, None);
        let yaml = "stateDir: /var/lib/kubecache\nstateSaveIntervalSeconds: 30";
        assert_eq!(
            resolve(yaml, &[]).unwrap().state,
            Some(StateConfig {
                dir: "/var/lib/kubecache".into(),
                save_interval: Duration::from_secs(30),
            })
        );
        let flags = ["--state-dir", "/data", "--state-save-interval-seconds", "5"];
        assert_eq!(
            resolve(yaml, &flags).unwrap().state,
            Some(StateConfig {
                dir: "/data".into(),
                save_interval: Duration::from_secs(5),
            })
        );
        let default = resolve("", &["--state-dir", "/data"])
            .unwrap()
            .state
            .unwrap();
        assert_eq!(default.save_interval, StateConfig::DEFAULT_SAVE_INTERVAL);
        assert_eq!(
            error_field("stateSaveIntervalSeconds: 0", &[]),
            "stateSaveIntervalSeconds (--state-save-interval-seconds)"
        );
    }

    #[test]
    fn the_defaults_cache_pods_on_port_8080() {
        let config = resolve("", &[]).unwrap();
        assert_eq!(config.listen.to_string(), "0.0.0.0:8080");
        assert_eq!(config.resources.len(), 1);
        assert_eq!(config.resources[0].name, "pods");
        assert_eq!(config.serve, ServeSettings::default());
        assert_eq!(config.write_stall, Server::WRITE_STALL);
    }

    #[test]
    fn flags_override_the_file_and_the_file_fills_in_per_resource_settings() {
        let yaml = r#"
listen: "127.0.0.1:9000"
pageSize: 100
listShards: 8
wire: json
watcherQueue: 10
maxWatchesPerClient: 20
writeStallSeconds: 2.5
eventLog: { maxEvents: 50, maxAgeSeconds: 60 }
resources:
  - resource: pods
    namespace: team-a
    labelSelector: "app in (web,api)"
    stripFields: [metadata.managedFields, status.conditions]
    indexes: [{ name: node, path: spec.nodeName }]
  - resource: widgets.example.com
"#;
        let config = resolve(yaml, &["--page-size", "7", "--listen", "127.0.0.1:9001"]).unwrap();
        assert_eq!(config.listen.to_string(), "127.0.0.1:9001");
        assert_eq!(config.serve.watcher_queue, 10);
        assert_eq!(config.serve.watches_per_client, 20);
        assert_eq!(config.write_stall, Duration::from_millis(2500));
        let pods = &config.resources[0];
        assert_eq!(pods.reflector.page_size, 7);
        assert_eq!(pods.reflector.list_shards, 8);
        assert_eq!(pods.reflector.wire, RequestEncoding::Json);
        assert_eq!(pods.namespace.as_deref(), Some("team-a"));
        assert_eq!(pods.label_selector.as_deref(), Some("app in (web,api)"));
        assert_eq!(pods.reflector.transform.strip_paths().len(), 2);
        assert_eq!(pods.store.field_indexes[0].path, "spec.nodeName");
        assert_eq!(pods.store.event_log.max_events, 50);
        assert_eq!(config.resources[1].name, "widgets.example.com");
        let replaced = resolve(yaml, &["--resources", "configmaps,pods"]).unwrap();
        let names: Vec<&str> = replaced.resources.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["configmaps", "pods"]);
    }

    #[test]
    fn tls_files_are_both_or_neither_and_each_is_loaded_at_start() {
        let dir = std::env::temp_dir().join(format!("kubecache-config-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path.to_str().unwrap().to_string()
        };
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let cert = write("tls.crt", &cert.pem());
        let key = write("tls.key", &key.serialize_pem());
        let other_key = write(
            "other.key",
            &rcgen::KeyPair::generate().unwrap().serialize_pem(),
        );
        let garbage = write("garbage", "not PEM");
        let missing = dir.join("missing").to_str().unwrap().to_string();

        assert!(resolve("", &[]).unwrap().tls.is_none(), "plain HTTP");
        let flags = ["--tls-cert-file", &cert, "--tls-private-key-file", &key];
        let tls = resolve("", &flags).unwrap().tls.unwrap();
        assert_eq!(tls.files().cert, Path::new(&cert));
        assert_eq!(tls.files().client_ca, None);
        let yaml = format!("tlsCertFile: {cert}\ntlsPrivateKeyFile: {key}\nclientCAFile: {cert}\n");
        let tls = resolve(&yaml, &[]).unwrap().tls.unwrap();
        assert_eq!(tls.files().client_ca.as_deref(), Some(Path::new(&cert)));

        let field = |yaml: &str| error_field(yaml, &[]);
        let (cert_field, key_field, ca_field) = (
            "tlsCertFile (--tls-cert-file)",
            "tlsPrivateKeyFile (--tls-private-key-file)",
            "clientCAFile (--client-ca-file)",
        );
        assert_eq!(field(&format!("tlsCertFile: {cert}")), key_field);
        assert_eq!(
            error_field("", &["--tls-private-key-file", &key]),
            cert_field
        );
        assert_eq!(field(&format!("clientCAFile: {cert}")), ca_field);
        let pair =
            |cert: &str, key: &str| format!("tlsCertFile: {cert}\ntlsPrivateKeyFile: {key}\n");
        assert_eq!(field(&pair(&missing, &key)), cert_field);
        assert_eq!(field(&pair(&garbage, &key)), cert_field);
        assert_eq!(field(&pair(&cert, &garbage)), key_field);
        let mismatch = resolve(&pair(&cert, &other_key), &[]).unwrap_err();
        assert_eq!(mismatch.field, key_field);
        assert!(mismatch.message.contains("does not match"), "{mismatch}");
        assert_eq!(
            field(&format!("{}clientCAFile: {garbage}\n", pair(&cert, &key))),
            ca_field
        );
        assert_eq!(
            field(&format!("{}clientCAFile: {missing}\n", pair(&cert, &key))),
            ca_field
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_invalid_field_is_named() {
        assert_eq!(
            error_field("", &["--page-size", "0"]),
            "pageSize (--page-size)"
        );
        assert_eq!(
            error_field("", &["--list-shards", "0"]),
            "listShards (--list-shards)"
        );
        assert_eq!(
            error_field("", &["--strategy", "fast"]),
            "strategy (--strategy)"
        );
        assert_eq!(error_field("wire: yaml", &[]), "wire (--wire)");
        assert_eq!(error_field("listen: nowhere", &[]), "listen (--listen)");
        assert_eq!(
            error_field("readWaitSeconds: -1", &[]),
            "readWaitSeconds (--read-wait-seconds)"
        );
        assert_eq!(
            error_field("", &["--max-watches-per-client", "0"]),
            "maxWatchesPerClient (--max-watches-per-client)"
        );
        assert_eq!(
            error_field("writeStallSeconds: 0", &[]),
            "writeStallSeconds (--write-stall-seconds)"
        );
        assert_eq!(
            error_field("", &["--event-log-size", "0"]),
            "eventLog.maxEvents (--event-log-size)"
        );
        assert_eq!(
            error_field("readWaitSeconds: 1e300", &[]),
            "readWaitSeconds (--read-wait-seconds)"
        );
        assert_eq!(error_field("", &["--auth", "open"]), "auth.mode (--auth)");
        assert_eq!(
            error_field("connections: {max: 0}", &[]),
            "connections.max (--max-connections)"
        );
        assert_eq!(
            error_field("", &["--max-connections-per-address", "0"]),
            "connections.maxPerAddress (--max-connections-per-address)"
        );
        assert_eq!(
            error_field("", &["--header-read-timeout-seconds", "0"]),
            "connections.headerReadTimeoutSeconds (--header-read-timeout-seconds)"
        );
        assert_eq!(
            error_field("auth: {deniedTtlSeconds: 0}", &[]),
            "auth.deniedTtlSeconds (--auth-denied-ttl-seconds)"
        );
        assert_eq!(
            error_field("auth: {cacheEntries: 0}", &[]),
            "auth.cacheEntries"
        );
        assert_eq!(error_field("pageSise: 3", &[]), "file");
        assert!(
            resolve("pageSise: 3", &[])
                .unwrap_err()
                .message
                .contains("pageSise")
        );
        let resource = |body: &str| format!("resources:\n  - resource: pods\n{body}");
        assert_eq!(
            error_field(&resource("    labelSelector: \"a in\"\n"), &[]),
            "resources[0].labelSelector"
        );
        assert_eq!(
            error_field(&resource("    fieldSelector: \"a\"\n"), &[]),
            "resources[0].fieldSelector"
        );
        assert_eq!(
            error_field(
                &resource("    indexes: [{name: n, path: \"spec..x\"}]\n"),
                &[]
            ),
            "resources[0].indexes[0].path"
        );
        assert_eq!(
            error_field(
                &resource("    indexes: [{name: n, path: a}, {name: n, path: b}]\n"),
                &[]
            ),
            "resources[0].indexes"
        );
        assert_eq!(
            error_field(&resource("    stripFields: [\"\"]\n"), &[]),
            "resources[0].stripFields[0]"
        );
        assert_eq!(
            error_field(&resource("    indexes: [{name: owner, path: a}]\n"), &[]),
            "resources[0].indexes[0].name"
        );
        assert_eq!(
            error_field("", &["--resources", "pods,pods"]),
            "resources[1].resource"
        );
    }
}
