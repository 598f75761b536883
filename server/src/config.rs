//! kubecache's configuration: an optional YAML file, overridden by flags
//! and their environment variables, validated as a whole before anything
//! starts.
//!
//! Each setting is declared once, in the `settings!` table below: its
//! flag, environment variable, file key, type, default and meaning. The
//! table makes [`Cli`] (and so `--help`), [`FileConfig`] and the name of
//! each setting in errors; a test checks the table of settings in
//! `docs/configuration.md` against it.
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
//! healthListen: "0.0.0.0:8081"  # /healthz, /livez, /readyz alone, plain HTTP; off: none
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
//! maxSelectorRequirements: 100
//! maxWatchesPerClient: 1000
//! initialSendSeats: 4
//! freshnessRequests: 2
//! probeIntervalSeconds: 0.1
//! coldGetPassthrough: true
//! writeStallSeconds: 30
//! eventLog: { maxEvents: 102400, maxAgeSeconds: 300 }
//! auth: { mode: kubernetes, allowedTtlSeconds: 10, deniedTtlSeconds: 10, revocableTtlSeconds: 60, cacheEntries: 10000, tokenReviewsPerSecond: 10,
//!         userReviewsPerSecond: 50, userReviewBurst: 500 }
//! connections: { max: 4096, maxPerAddress: 512, maxPendingPerAddress: 64, maxUploadsPerAddress: 64,
//!                headerReadTimeoutSeconds: 32, idleTimeoutSeconds: 90, http2MaxStreamsPerConnection: 100,
//!                maxPassThrough: 1024 }
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
use std::str::FromStr;
use std::time::Duration;

use kubecache_reflector::upstream::RequestEncoding;
use kubecache_reflector::{EventLogConfig, IndexSpec, StoreConfig};
use kubecache_reflector::{ReflectorConfig, Strategy};
use kubecache_wire::{FieldSelector, LabelSelector, Transform};
use serde::Deserialize;

use crate::ServeSettings;
use crate::auth::AuthSettings;
use crate::transport::{Limits, Server, Tls, TlsFile, TlsFiles};

/// Declares the settings, each once, and makes of them the command line
/// (`Cli`), the file (its struct, then one struct per section of it),
/// `Settings` and, for the check of `docs/configuration.md`, `table`.
///
/// A row is its meaning (a doc comment, in `docs/configuration.md`'s
/// Markdown: a link to a section names its page, `api.md#watches`), then
/// `field: Type = default` (or `unset "what the docs say"` when there is no
/// default), then its file key, its flag with the flag's value name and
/// any more clap arguments, and its environment variable. The command
/// line's own rows have no key; the rows after `file only:` no flag.
macro_rules! settings {
    (
        $(#[$cli_meta:meta])*
        pub struct $Cli:ident { $($flags:tt)* }
        $(#[$file_meta:meta])*
        pub struct $File:ident { $($root:tt)* }
        $(
            $(#[$section_meta:meta])*
            struct $Section:ident at $section:ident $section_key:literal { $($rows:tt)* }
        )*
    ) => {
        settings!(@all $File
            [$(#[$cli_meta])* $Cli { $($flags)* }]
            $(#[$file_meta])* pub $File []
                [$( #[serde(rename = $section_key)] $section: Option<$Section>, )*] { $($root)* }
            $( $(#[$section_meta])* $Section [$section $section_key] [] { $($rows)* } )*
        );
    };
    (@all $File:ident
        [$(#[$cli_meta:meta])* $Cli:ident {$(
            $(#[doc = $flag_doc:literal])+
            $flag_field:ident: $flag_ty:ty $(= $flag_default:expr)? $(, unset $flag_unset:literal)?,
            flag $flag_only:literal $flag_value:ident $(, env $flag_env:literal)?;
        )*}]
        $(
            $(#[$meta:meta])* $vis:vis $Struct:ident $ctx:tt [$($extra:tt)*] {
                $(
                    $(#[doc = $doc:literal])+
                    $field:ident: $ty:ty $(= $default:expr)? $(, unset $unset:literal)?,
                    key $key:literal, flag $flag:literal $value:ident $(($($arg:tt)*))?, env $env:literal;
                )*
                $(
                    file only:
                    $(
                        $(#[doc = $file_doc:literal])+
                        $file_field:ident: $file_ty:ty $(= $file_default:expr)? $(, unset $file_unset:literal)?,
                        key $file_key:literal;
                    )*
                )?
            }
        )*
    ) => {
        #[derive(clap::Parser, Debug, Default)]
        $(#[$cli_meta])*
        pub struct $Cli {
            $(
                #[arg(
                    long = $flag_only,
                    value_name = stringify!($flag_value),
                    $(env = $flag_env,)?
                    $(default_value_t = $flag_default, hide_default_value = true,)?
                    help = help(
                        &[$($flag_doc),+],
                        settings!(@shown $flag_ty, [$($flag_default)?] [$($flag_unset)?]),
                    ),
                )]
                pub $flag_field: $flag_ty,
            )*
            $($(
                #[arg(
                    long = $flag,
                    value_name = stringify!($value),
                    env = $env,
                    $($($arg)*,)?
                    help = help(&[$($doc),+], settings!(@shown $ty, [$($default)?] [$($unset)?])),
                )]
                pub $field: Option<$ty>,
            )*)*
        }

        $(
            #[derive(Deserialize, Debug, Default)]
            #[serde(deny_unknown_fields)]
            $(#[$meta])*
            $vis struct $Struct {
                $( #[serde(rename = $key)] $field: Option<$ty>, )*
                $($( #[serde(rename = $file_key)] $file_field: Option<$file_ty>, )*)?
                $($extra)*
            }
        )*

        /// Every setting of the file: its flag's value, else its key's, else
        /// its default.
        struct Settings {
            $(
                $( $field: Setting<settings!(@type $ty, [$($default)?])>, )*
                $($( $file_field: Setting<settings!(@type $file_ty, [$($file_default)?])>, )*)?
            )*
        }

        impl Settings {
            fn new(cli: &$Cli, mut file: $File) -> Settings {
                Settings {
                    $(
                        $( $field: Setting {
                            name: concat!(settings!(@key $ctx $key), " (--", $flag, ")"),
                            value: settings!(@or_default
                                cli.$field.clone().or(settings!(@take file $ctx $field)),
                                [$($default)?]
                            ),
                        }, )*
                        $($( $file_field: Setting {
                            name: settings!(@key $ctx $file_key),
                            value: settings!(@or_default
                                settings!(@take file $ctx $file_field),
                                [$($file_default)?]
                            ),
                        }, )*)?
                    )*
                }
            }
        }

        /// The table of settings in `docs/configuration.md`: flag,
        /// environment variable, file key, default, meaning.
        #[cfg(test)]
        fn table() -> Vec<[String; 5]> {
            vec![
                $([
                    settings!(@cell format!("--{} {}", $flag_only, stringify!($flag_value))),
                    settings!(@cell $($flag_env)?),
                    settings!(@cell),
                    settings!(@shown $flag_ty, [$($flag_default)?] [$($flag_unset)?]),
                    meaning(&[$($flag_doc),+]),
                ],)*
                $(
                    $([
                        settings!(@cell format!("--{} {}", $flag, stringify!($value))),
                        settings!(@cell $env),
                        settings!(@cell settings!(@key $ctx $key)),
                        settings!(@shown $ty, [$($default)?] [$($unset)?]),
                        meaning(&[$($doc),+]),
                    ],)*
                    $($([
                        settings!(@cell),
                        settings!(@cell),
                        settings!(@cell settings!(@key $ctx $file_key)),
                        settings!(@shown $file_ty, [$($file_default)?] [$($file_unset)?]),
                        meaning(&[$($file_doc),+]),
                    ],)*)?
                )*
            ]
        }
    };
    // The file key, under its section's.
    (@key [] $key:literal) => { $key };
    (@key [$section:ident $section_key:literal] $key:literal) => { concat!($section_key, ".", $key) };
    // The file's value, taken out of it.
    (@take $file:ident [] $field:ident) => { $file.$field.take() };
    (@take $file:ident [$section:ident $section_key:literal] $field:ident) => {
        $file.$section.as_mut().and_then(|section| section.$field.take())
    };
    (@type $ty:ty, []) => { Option<$ty> };
    (@type $ty:ty, [$default:expr]) => { $ty };
    (@or_default $given:expr, []) => { $given };
    (@or_default $given:expr, [$default:expr]) => { $given.unwrap_or_else(|| $default) };
    // The default as the docs show it.
    (@shown $ty:ty, [$default:expr] []) => {{
        let default: $ty = $default;
        default.shown()
    }};
    (@shown $ty:ty, [] [$unset:literal]) => { $unset.to_string() };
    (@cell) => { "—".to_string() };
    (@cell $text:expr) => { format!("`{}`", $text) };
}

settings! {
    /// The command line: these flags, then one for each file key but those
    /// under `file only:`.
    #[command(
        name = "kubecache",
        version,
        about = "A shared, indexed, in-memory cache in front of the Kubernetes API server"
    )]
    pub struct Cli {
        /// the YAML file; flags override its keys
        config: Option<PathBuf>, unset "none", flag "config" PATH, env "KUBECACHE_CONFIG";
        /// kubeconfig; without it `$KUBECONFIG`, `~/.kube/config`, then the
        /// in-cluster service account
        kubeconfig: Option<PathBuf>, unset "inferred", flag "kubeconfig" PATH, env "KUBECONFIG";
        /// run against an in-process simulated API server with N pods, 500
        /// config maps and 100 widgets (builds with `--features simulate`
        /// only; the image has no simulator)
        simulate: Option<usize>, unset "off", flag "simulate" N;
        /// pod writes per second of that simulated server
        simulate_churn: f64 = 50.0, flag "simulate-churn" R;
        /// `--simulate`: where to write the kubeconfig with a context per
        /// demo user (its CA and kubecache's serving certificate go in a
        /// directory beside it, `<name>-pki`)
        kubeconfig_out: Option<PathBuf>, unset "`$TMPDIR/kubecache-demo.kubeconfig`",
            flag "kubeconfig-out" PATH;
        /// `--simulate` without TLS files: `https` with a certificate made
        /// at start, or `http` (kubectl then sends no credentials)
        simulate_scheme: String = "https".into(), flag "simulate-scheme" S;
        /// log lines: `text` (coloured when stderr is a terminal) or `json`
        /// (one object per line, for log collectors)
        log_format: String = "text".into(), flag "log-format" F, env "KUBECACHE_LOG_FORMAT";
    }

    /// The configuration file.
    pub struct FileConfig {
        /// address of the HTTP API
        listen: String = "0.0.0.0:8080".into(),
            key "listen", flag "listen" ADDR, env "KUBECACHE_LISTEN";
        /// address of the health endpoints alone (`/healthz`, `/livez`,
        /// `/readyz`), plain HTTP, for the kubelet's probes: no client of
        /// the API can take its connections (see [Connections and
        /// limits](operations.md#connections-and-limits)); `off`: none
        health_listen: String = "0.0.0.0:8081".into(),
            key "healthListen", flag "health-listen" ADDR, env "KUBECACHE_HEALTH_LISTEN";
        /// serve HTTPS with this certificate chain (PEM, leaf first); needs
        /// the key
        tls_cert_file: PathBuf, unset "none (plain HTTP)",
            key "tlsCertFile", flag "tls-cert-file" PATH, env "KUBECACHE_TLS_CERT_FILE";
        /// its private key (PEM: PKCS#8, PKCS#1 or SEC1; RSA, ECDSA or
        /// Ed25519)
        tls_private_key_file: PathBuf, unset "none",
            key "tlsPrivateKeyFile", flag "tls-private-key-file" PATH,
            env "KUBECACHE_TLS_PRIVATE_KEY_FILE";
        /// CA certificates (PEM) that client certificates are verified
        /// against; needs TLS
        client_ca_file: PathBuf, unset "none",
            key "clientCAFile", flag "client-ca-file" PATH, env "KUBECACHE_CLIENT_CA_FILE";
        /// resources to cache, comma-separated, by `plural` or
        /// `plural.group` (`pods,deployments.apps,widgets.example.com`),
        /// found by discovery. The flag replaces the file's whole list,
        /// per-resource settings included
        resources: Vec<ResourceFile> = vec!["pods".into()],
            key "resources", flag "resources" LIST (value_delimiter = ','),
            env "KUBECACHE_RESOURCES";
        /// initial list: `auto`, `parallel`, `sharded`, `streaming` or
        /// `list-watch` (see [The reflector](reflector.md))
        strategy: String = Strategy::default().as_str().into(),
            key "strategy", flag "strategy" S, env "KUBECACHE_STRATEGY";
        /// objects per upstream list page
        page_size: usize = ReflectorConfig::default().page_size,
            key "pageSize", flag "page-size" N, env "KUBECACHE_PAGE_SIZE";
        /// `strategy: sharded`: namespaces read at once after page 1, each
        /// at page 1's exact snapshot (see [The reflector](reflector.md))
        list_shards: usize = ReflectorConfig::default().list_shards,
            key "listShards", flag "list-shards" N, env "KUBECACHE_LIST_SHARDS";
        /// encoding asked of the API server: `auto` (protobuf for built-in
        /// kinds, JSON for custom resources), `json`, `protobuf`
        wire: String = RequestEncoding::default().to_string(),
            key "wire", flag "wire" W, env "KUBECACHE_WIRE";
        /// longest a read waits for the cache to reach a resourceVersion
        /// before answering 504
        read_wait_seconds: f64 = ServeSettings::DEFAULT_READ_WAIT.as_secs_f64(),
            key "readWaitSeconds", flag "read-wait-seconds" S,
            env "KUBECACHE_READ_WAIT_SECONDS";
        /// interval of bookmarks to watchers that allow them
        bookmark_interval_seconds: f64 = ServeSettings::DEFAULT_BOOKMARK_INTERVAL.as_secs_f64(),
            key "bookmarkIntervalSeconds", flag "bookmark-interval-seconds" S,
            env "KUBECACHE_BOOKMARK_INTERVAL_SECONDS";
        /// events queued for one watcher before it is cut with 410
        watcher_queue: usize = ServeSettings::DEFAULT_WATCHER_QUEUE,
            key "watcherQueue", flag "watcher-queue" N, env "KUBECACHE_WATCHER_QUEUE";
        /// requirements of a list's or watch's label and field selectors
        /// together; more get 400
        max_selector_requirements: usize = ServeSettings::DEFAULT_MAX_SELECTOR_REQUIREMENTS,
            key "maxSelectorRequirements", flag "max-selector-requirements" N,
            env "KUBECACHE_MAX_SELECTOR_REQUIREMENTS";
        /// open watches one client may hold across all resources; one more
        /// gets 429 (see [Watches](api.md#watches))
        max_watches_per_client: usize = ServeSettings::DEFAULT_WATCHES_PER_CLIENT,
            key "maxWatchesPerClient", flag "max-watches-per-client" N,
            env "KUBECACHE_MAX_WATCHES_PER_CLIENT";
        /// large initial sends written at once (a watch's initial events
        /// or a list, of more than 500 objects); the others queue, smaller
        /// sends first, then fairly between clients (see [Expensive
        /// requests](api.md#expensive-requests))
        initial_send_seats: usize, unset "half the cores, at least 1",
            key "initialSendSeats", flag "initial-send-seats" N,
            env "KUBECACHE_INITIAL_SEND_SEATS";
        /// most requests for the API server's current resourceVersion in
        /// flight at once, shared by the consistent reads of every resource;
        /// and most reads of one object in flight at once for its cold
        /// consistent GETs (see [resourceVersion and
        /// consistency](api.md#resourceversion-and-consistency))
        freshness_requests: usize = ServeSettings::DEFAULT_FRESHNESS_REQUESTS,
            key "freshnessRequests", flag "freshness-requests" N,
            env "KUBECACHE_FRESHNESS_REQUESTS";
        /// how often a probe watch starts while consistent reads of a
        /// resource wait for proof that it is complete; bounds their wait
        /// against a server that sends each watch's bookmark when due
        /// (kube-apiserver sends them on a timer of about 1 s)
        probe_interval_seconds: f64 = ServeSettings::DEFAULT_PROBE_INTERVAL.as_secs_f64(),
            key "probeIntervalSeconds", flag "probe-interval-seconds" S,
            env "KUBECACHE_PROBE_INTERVAL_SECONDS";
        /// answer a consistent GET of one object that the store cannot
        /// prove complete at once by the API server's copy of it (a list
        /// selecting it by name, shared by the reads of the object waiting
        /// when it is sent), instead of waiting for a probe's bookmark (up
        /// to about 1 s) (see [resourceVersion and
        /// consistency](api.md#resourceversion-and-consistency)); `false`: it
        /// waits
        cold_get_passthrough: bool = ServeSettings::default().cold_get_passthrough,
            key "coldGetPassthrough", flag "cold-get-passthrough" BOOL,
            env "KUBECACHE_COLD_GET_PASSTHROUGH";
        /// longest a write to a client may wait for it to read before its
        /// connection is closed
        write_stall_seconds: f64 = Server::WRITE_STALL.as_secs_f64(),
            key "writeStallSeconds", flag "write-stall-seconds" S,
            env "KUBECACHE_WRITE_STALL_SECONDS";
        /// warm restart: keep each resource's state in a file in DIR, saved
        /// periodically and on SIGTERM, and start from it with no list (see
        /// [Warm restart](operations.md#warm-restart)); without it nothing is written
        /// and every start lists
        state_dir: PathBuf, unset "none",
            key "stateDir", flag "state-dir" DIR, env "KUBECACHE_STATE_DIR";
        /// how often the state files are saved (a SIGKILL loses the changes
        /// since the last save; the resumed watch replays them)
        state_save_interval_seconds: f64 = StateConfig::DEFAULT_SAVE_INTERVAL.as_secs_f64(),
            key "stateSaveIntervalSeconds", flag "state-save-interval-seconds" S,
            env "KUBECACHE_STATE_SAVE_INTERVAL_SECONDS";
    }

    /// `eventLog` of the file.
    struct EventLogFile at event_log "eventLog" {
        /// most events the replay log of each resource keeps
        event_log_size: usize = EventLogConfig::DEFAULT_MAX_EVENTS,
            key "maxEvents", flag "event-log-size" N, env "KUBECACHE_EVENT_LOG_SIZE";
        file only:
        /// oldest event the replay log keeps
        event_log_max_age_seconds: f64 = EventLogConfig::DEFAULT_MAX_AGE.as_secs_f64(),
            key "maxAgeSeconds";
    }

    /// `auth` of the file.
    struct AuthFile at auth "auth" {
        /// how requests answered from the caches are authorized:
        /// `kubernetes` (by the API server, see [Authentication and
        /// authorization](api.md#authentication-and-authorization)) or `none`
        /// (nobody is asked: anyone who reaches the port reads every cached
        /// object; for local runs and benchmarks, said loudly at start-up
        /// and in `/v1/status`)
        auth: String = "kubernetes".into(),
            key "mode", flag "auth" MODE, env "KUBECACHE_AUTH";
        /// how long an allowed request or an authenticated token is kept
        /// when nothing kubecache watches can revoke it (static tokens,
        /// webhooks, the Node authorizer): such a revocation is honoured
        /// within it
        auth_allowed_ttl_seconds: f64 = AuthSettings::DEFAULT_ALLOWED_TTL.as_secs_f64(),
            key "allowedTtlSeconds", flag "auth-allowed-ttl-seconds" S,
            env "KUBECACHE_AUTH_ALLOWED_TTL_SECONDS";
        /// how long a denied request or a rejected token is kept: a new
        /// grant kubecache does not watch (a webhook's) is honoured within it
        auth_denied_ttl_seconds: f64 = AuthSettings::DEFAULT_DENIED_TTL.as_secs_f64(),
            key "deniedTtlSeconds", flag "auth-denied-ttl-seconds" S,
            env "KUBECACHE_AUTH_DENIED_TTL_SECONDS";
        /// how long an answer that a watched change revokes is kept at most
        /// (RBAC's allowances while kubecache watches RBAC, and those of
        /// `system:masters`): such a change revokes it within a second, and
        /// it is asked again after this all the same; never less than
        /// `auth.allowedTtlSeconds`
        auth_revocable_ttl_seconds: f64 = AuthSettings::DEFAULT_REVOCABLE_TTL.as_secs_f64(),
            key "revocableTtlSeconds", flag "auth-revocable-ttl-seconds" S,
            env "KUBECACHE_AUTH_REVOCABLE_TTL_SECONDS";
        /// reviews of tokens not kept, and of anonymous requests not kept,
        /// that one client address (an IPv6 one's /64) may cause, per
        /// second, in bursts of as many: beyond it, such requests get 429
        /// without a review
        auth_token_reviews_per_second: f64 = AuthSettings::DEFAULT_TOKEN_REVIEWS_PER_SECOND,
            key "tokenReviewsPerSecond", flag "auth-token-reviews-per-second" N,
            env "KUBECACHE_AUTH_TOKEN_REVIEWS_PER_SECOND";
        /// reviews of requests not kept that one signed-in user may cause,
        /// per second, after a burst of `auth.userReviewBurst` (whatever
        /// its tokens or addresses; a user impersonating pays for the
        /// checks and for what it asks as whom it impersonates): beyond
        /// it, such requests get 429 without a review (see [Authentication
        /// and authorization](api.md#authentication-and-authorization))
        auth_user_reviews_per_second: f64 = AuthSettings::DEFAULT_USER_REVIEWS_PER_SECOND,
            key "userReviewsPerSecond", flag "auth-user-reviews-per-second" N,
            env "KUBECACHE_AUTH_USER_REVIEWS_PER_SECOND";
        /// reviews of requests not kept that one signed-in user may cause
        /// at once, after a pause
        auth_user_review_burst: usize = AuthSettings::DEFAULT_USER_REVIEW_BURST,
            key "userReviewBurst", flag "auth-user-review-burst" N,
            env "KUBECACHE_AUTH_USER_REVIEW_BURST";
        file only:
        /// most answers kept of each kind (tokens, access decisions)
        auth_cache_entries: usize = AuthSettings::DEFAULT_CACHE_ENTRIES, key "cacheEntries";
    }

    /// `connections` of the file.
    struct ConnectionsFile at connections "connections" {
        /// connections served at once; beyond, requests get a 429 (lowered
        /// to fit the open-file limit, see [Connections and
        /// limits](operations.md#connections-and-limits))
        max_connections: usize = Limits::default().max_connections,
            key "max", flag "max-connections" N, env "KUBECACHE_MAX_CONNECTIONS";
        /// connections served at once from one client IP address
        max_connections_per_address: usize = Limits::default().max_connections_per_address,
            key "maxPerAddress", flag "max-connections-per-address" N,
            env "KUBECACHE_MAX_CONNECTIONS_PER_ADDRESS";
        /// connections from one client IP address at once before their
        /// first request's head (TLS handshake included); more wait, unread,
        /// as beyond `maxPerAddress`
        max_pending_per_address: usize = Limits::default().max_pending_per_address,
            key "maxPendingPerAddress", flag "max-pending-connections-per-address" N,
            env "KUBECACHE_MAX_PENDING_CONNECTIONS_PER_ADDRESS";
        /// requests from one client IP address sending a body at once; one
        /// more waits for a place, then gets a 429, its body unread
        max_uploads_per_address: usize = Limits::default().max_uploads_per_address,
            key "maxUploadsPerAddress", flag "max-uploads-per-address" N,
            env "KUBECACHE_MAX_UPLOADS_PER_ADDRESS";
        /// longest a request's head (request line and headers) may take
        /// from its first byte; a slower client is disconnected
        header_read_timeout_seconds: f64 = Limits::default().header_read_timeout.as_secs_f64(),
            key "headerReadTimeoutSeconds", flag "header-read-timeout-seconds" S,
            env "KUBECACHE_HEADER_READ_TIMEOUT_SECONDS";
        /// longest a keep-alive connection may wait for its next request
        /// before it is closed
        idle_timeout_seconds: f64 = Limits::default().idle_timeout.as_secs_f64(),
            key "idleTimeoutSeconds", flag "idle-timeout-seconds" S,
            env "KUBECACHE_IDLE_TIMEOUT_SECONDS";
        /// streams (requests in flight, watches) open at once on one HTTP/2
        /// connection; a client opens more connections for more
        http2_max_streams_per_connection: usize = Limits::default().http2_max_streams_per_connection,
            key "http2MaxStreamsPerConnection", flag "http2-max-streams-per-connection" N,
            env "KUBECACHE_HTTP2_MAX_STREAMS_PER_CONNECTION";
        /// connections to the API server open at once for requests passed
        /// through (writes, watches and reads of what is not cached), for
        /// all clients; one more waits for a free one, up to 70 s (lowered
        /// to fit the open-file limit)
        max_passthrough_connections: usize = Limits::default().max_passthrough_connections,
            key "maxPassThrough", flag "max-passthrough-connections" N,
            env "KUBECACHE_MAX_PASSTHROUGH_CONNECTIONS";
    }
}

/// A setting's value and its name in errors: the file key, with the flag
/// where there is one.
#[derive(Clone, Copy)]
struct Setting<T> {
    name: &'static str,
    value: T,
}

impl<T> Setting<T> {
    fn invalid(&self, message: impl std::fmt::Display) -> ConfigError {
        invalid(self.name, message)
    }
}

impl Setting<usize> {
    /// The value, unless 0.
    fn at_least_one(self) -> Result<usize, ConfigError> {
        match self.value {
            0 => Err(self.invalid("must be at least 1")),
            n => Ok(n),
        }
    }
}

impl Setting<f64> {
    /// The value, positive and finite.
    fn positive(self) -> Result<f64, ConfigError> {
        match self.value {
            value if value > 0.0 && value.is_finite() => Ok(value),
            value => Err(self.invalid(format!("{value} is not a positive number"))),
        }
    }

    /// The value as a duration in seconds, positive and finite.
    fn seconds(self) -> Result<Duration, ConfigError> {
        match Duration::try_from_secs_f64(self.value) {
            Ok(duration) if self.value > 0.0 => Ok(duration),
            _ => Err(self.invalid(format!(
                "{} is not a positive number of seconds",
                self.value
            ))),
        }
    }
}

impl Setting<String> {
    /// The value parsed, its error the message.
    fn parse<T: FromStr<Err: std::fmt::Display>>(&self) -> Result<T, ConfigError> {
        self.value.parse().map_err(|e| self.invalid(e))
    }
}

/// A default as the docs show it: code in backticks, numbers bare.
trait Shown {
    fn shown(&self) -> String;
}

impl Shown for usize {
    fn shown(&self) -> String {
        self.to_string()
    }
}

impl Shown for f64 {
    fn shown(&self) -> String {
        self.to_string()
    }
}

impl Shown for bool {
    fn shown(&self) -> String {
        format!("`{self}`")
    }
}

impl Shown for String {
    fn shown(&self) -> String {
        format!("`{self}`")
    }
}

impl Shown for Vec<ResourceFile> {
    fn shown(&self) -> String {
        let names: Vec<&str> = self.iter().map(|r| r.resource.as_str()).collect();
        format!("`{}`", names.join(","))
    }
}

/// A row's meaning: its doc comment's lines as one.
fn meaning(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|line| line.trim())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A flag's `--help`: its meaning and default, as plain text.
fn help(lines: &[&str], default: String) -> String {
    plain(&format!("{} [default: {default}]", meaning(lines)))
}

/// `docs/configuration.md`'s Markdown as plain text: no backticks, a link
/// to a section as `"Section" in docs/page.md` (the page the link names,
/// or `docs/configuration.md` itself for a link within it).
fn plain(markdown: &str) -> String {
    let mut text = markdown.replace('`', "");
    while let Some(middle) = text.find("](") {
        let open = text[..middle].rfind('[').expect("a link's text");
        let close = middle + text[middle..].find(')').expect("a link's end");
        let page = match text[middle + 2..close].split('#').next() {
            Some("") | None => "configuration.md",
            Some(page) => page,
        };
        let section = format!("\"{}\" in docs/{page}", &text[open + 1..middle]);
        text.replace_range(open..=close, &section);
    }
    text
}

/// One entry of `resources`.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceFile {
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

/// A resource by name alone, as `--resources` lists it.
impl From<&str> for ResourceFile {
    fn from(name: &str) -> Self {
        ResourceFile {
            resource: name.trim().to_string(),
            ..ResourceFile::default()
        }
    }
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
    /// Where the health endpoints alone listen, if anywhere.
    pub health_listen: Option<SocketAddr>,
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
    fn resolve(s: &Settings) -> Result<AuthConfig, ConfigError> {
        let enabled = match s.auth.value.as_str() {
            "kubernetes" => true,
            "none" => false,
            other => {
                return Err(s
                    .auth
                    .invalid(format!("{other:?} is neither kubernetes nor none")));
            }
        };
        let allowed_ttl = s.auth_allowed_ttl_seconds.seconds()?;
        let settings = AuthSettings {
            allowed_ttl,
            denied_ttl: s.auth_denied_ttl_seconds.seconds()?,
            // An answer a watched change revokes is kept at least as long
            // as one nothing revokes: a longer allowed TTL raises it.
            revocable_ttl: s.auth_revocable_ttl_seconds.seconds()?.max(allowed_ttl),
            cache_entries: s.auth_cache_entries.at_least_one()?,
            token_reviews_per_second: s.auth_token_reviews_per_second.positive()?,
            user_reviews_per_second: s.auth_user_reviews_per_second.positive()?,
            user_review_burst: s.auth_user_review_burst.at_least_one()?,
        };
        Ok(AuthConfig { enabled, settings })
    }
}

/// `connections` of the file and its flags.
fn connections(s: &Settings) -> Result<Limits, ConfigError> {
    Ok(Limits {
        header_read_timeout: s.header_read_timeout_seconds.seconds()?,
        idle_timeout: s.idle_timeout_seconds.seconds()?,
        max_connections: s.max_connections.at_least_one()?,
        max_connections_per_address: s.max_connections_per_address.at_least_one()?,
        http2_max_streams_per_connection: s.http2_max_streams_per_connection.at_least_one()?,
        max_pending_per_address: s.max_pending_per_address.at_least_one()?,
        max_uploads_per_address: s.max_uploads_per_address.at_least_one()?,
        max_passthrough_connections: s.max_passthrough_connections.at_least_one()?,
    })
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
        let s = Settings::new(cli, file);
        let listen: SocketAddr = s
            .listen
            .value
            .parse()
            .map_err(|e| s.listen.invalid(format!("{:?}: {e}", s.listen.value)))?;
        let health_listen = match s.health_listen.value.as_str() {
            "off" => None,
            address => Some(address.parse().map_err(|e| {
                s.health_listen
                    .invalid(format!("{address:?}: {e} (an address, or off)"))
            })?),
        };
        let tls = tls(&s)?;
        let strategy: Strategy = s.strategy.parse()?;
        let wire: RequestEncoding = s.wire.parse()?;
        let page_size = s.page_size.at_least_one()?;
        let list_shards = s.list_shards.at_least_one()?;
        let serve = ServeSettings {
            read_wait: s.read_wait_seconds.seconds()?,
            bookmark_interval: s.bookmark_interval_seconds.seconds()?,
            probe_interval: s.probe_interval_seconds.seconds()?,
            freshness_requests: s.freshness_requests.at_least_one()?,
            watcher_queue: s.watcher_queue.at_least_one()?,
            watches_per_client: s.max_watches_per_client.at_least_one()?,
            max_selector_requirements: s.max_selector_requirements.value,
            cold_get_passthrough: s.cold_get_passthrough.value,
            initial_send_seats: Setting {
                name: s.initial_send_seats.name,
                value: (s.initial_send_seats.value)
                    .unwrap_or_else(ServeSettings::default_initial_send_seats),
            }
            .at_least_one()?,
            ..ServeSettings::default()
        };
        let write_stall = s.write_stall_seconds.seconds()?;
        let auth = AuthConfig::resolve(&s)?;
        let connections = connections(&s)?;
        let save_interval = s.state_save_interval_seconds.seconds()?;
        let state = s
            .state_dir
            .value
            .clone()
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| StateConfig { dir, save_interval });
        let event_log = EventLogConfig {
            max_age: s.event_log_max_age_seconds.seconds()?,
            max_events: s.event_log_size.at_least_one()?,
        };
        if s.resources.value.is_empty() {
            return Err(s.resources.invalid("name at least one"));
        }
        let resources = s
            .resources
            .value
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
            health_listen,
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
            if crate::cacher::BUILTIN_INDEXES.contains(&index.name.as_str()) {
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

/// TLS from its three optional files (an empty path is no path): the
/// certificate and key both or neither, the client CA only with them, each
/// file loaded now.
fn tls(s: &Settings) -> Result<Option<Tls>, ConfigError> {
    let (cert, key, client_ca) = (&s.tls_cert_file, &s.tls_private_key_file, &s.client_ca_file);
    let given =
        |path: &Setting<Option<PathBuf>>| path.value.clone().filter(|p| !p.as_os_str().is_empty());
    let files = match (given(cert), given(key), given(client_ca)) {
        (None, None, None) => return Ok(None),
        (Some(cert), Some(key), client_ca) => TlsFiles {
            cert,
            key,
            client_ca,
        },
        (Some(_), None, _) => return Err(key.invalid(format!("needed with {}", cert.name))),
        (None, Some(_), _) => return Err(cert.invalid(format!("needed with {}", key.name))),
        (None, None, Some(_)) => {
            return Err(client_ca.invalid(format!(
                "client certificates need TLS: set {} and {}",
                cert.name, key.name
            )));
        }
    };
    Tls::load(files).map(Some).map_err(|error| {
        let field = match error.file {
            TlsFile::Cert => cert,
            TlsFile::Key => key,
            TlsFile::ClientCa => client_ca,
        };
        field.invalid(error)
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

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

    /// `docs/configuration.md`'s table of settings, from the declaration.
    fn markdown_table() -> String {
        let mut table: Vec<String> = table()
            .into_iter()
            .map(|row| format!("| {} |\n", row.join(" | ")))
            .collect();
        table.insert(0, "|---|---|---|---|---|\n".into());
        table.insert(
            0,
            "| flag | environment variable | file key | default | meaning |\n".into(),
        );
        table.concat()
    }

    #[test]
    fn the_docs_table_of_settings_is_the_declared_one() {
        let page = include_str!("../../docs/configuration.md");
        let start = page
            .find("| flag | environment variable |")
            .expect("docs/configuration.md's table of settings");
        let end = start + page[start..].find("\n\n").expect("its end") + 1;
        let expected = markdown_table();
        if page[start..end] == expected {
            return;
        }
        if std::env::var_os("UPDATE_DOCS").is_some() {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
            let updated = format!("{}{expected}{}", &page[..start], &page[end..]);
            std::fs::write(path, updated).unwrap();
        } else {
            panic!(
                "docs/configuration.md's table of settings is not the one declared in \
                 config.rs; write it with UPDATE_DOCS=1, or copy it:\n\n{expected}"
            );
        }
    }

    /// An example file's keys, a section's as `section.key`.
    fn example_keys(yaml: &str) -> BTreeSet<String> {
        let example: serde_yaml::Mapping = serde_yaml::from_str(yaml).unwrap();
        let mut keys = BTreeSet::new();
        for (key, value) in &example {
            let key = key.as_str().unwrap();
            match value.as_mapping() {
                Some(section) => keys.extend(
                    section
                        .keys()
                        .map(|inner| format!("{key}.{}", inner.as_str().unwrap())),
                ),
                None => {
                    keys.insert(key.to_string());
                }
            }
        }
        keys
    }

    #[test]
    fn the_example_files_have_every_declared_key_and_are_accepted() {
        let declared: BTreeSet<String> = table()
            .into_iter()
            .filter(|row| row[2] != "—")
            .map(|row| row[2].trim_matches('`').to_string())
            .collect();
        let module_doc: String = include_str!("config.rs")
            .lines()
            .filter_map(|line| line.strip_prefix("//!"))
            .skip_while(|line| *line != " ```yaml")
            .skip(1)
            .take_while(|line| *line != " ```")
            .map(|line| format!("{}\n", line.strip_prefix(' ').unwrap_or(line)))
            .collect();
        let docs = include_str!("../../docs/configuration.md")
            .split_once("The file (keys in camelCase")
            .and_then(|(_, rest)| rest.split_once("```yaml\n"))
            .and_then(|(_, rest)| rest.split_once("```"))
            .expect("docs/configuration.md's example file")
            .0;
        for (name, example) in [
            ("config.rs", module_doc.as_str()),
            ("docs/configuration.md", docs),
        ] {
            let keys = example_keys(example);
            let missing: Vec<_> = declared.difference(&keys).collect();
            let undeclared: Vec<_> = keys.difference(&declared).collect();
            assert!(
                missing.is_empty() && undeclared.is_empty(),
                "{name}'s example file: missing {missing:?}, undeclared {undeclared:?}"
            );
            FileConfig::parse(example).unwrap_or_else(|e| panic!("{name}'s example: {e}"));
        }
    }

    #[test]
    fn help_names_the_page_of_each_section_a_meaning_links_to() {
        assert_eq!(
            plain("`x` (see [Watches](api.md#watches)); [The reflector](reflector.md)"),
            "x (see \"Watches\" in docs/api.md); \"The reflector\" in docs/reflector.md"
        );
        assert_eq!(
            plain("see [Configuration](#configuration)"),
            "see \"Configuration\" in docs/configuration.md"
        );
    }

    #[test]
    fn help_shows_every_flag_with_its_value_environment_variable_and_default() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let help = Cli::command().render_long_help().to_string();
        for [flag, env, _, default, _] in table().into_iter().filter(|row| row[0] != "—") {
            let (name, value) = flag.trim_matches('`').split_once(' ').unwrap();
            assert!(
                help.contains(&format!("{name} <{value}>")),
                "{flag}:\n{help}"
            );
            assert!(
                help.contains(&format!("[default: {}]", plain(&default))),
                "{flag}:\n{help}"
            );
            if env != "—" {
                assert!(
                    help.contains(&format!("[env: {}=", env.trim_matches('`'))),
                    "{flag}:\n{help}"
                );
            }
        }
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
    fn revocable_answers_are_kept_at_least_as_long_as_allowed_ones() {
        let settings = resolve("", &[]).unwrap().auth.settings;
        assert_eq!(settings.revocable_ttl, AuthSettings::DEFAULT_REVOCABLE_TTL);
        let settings = resolve("", &["--auth-allowed-ttl-seconds", "3600"])
            .unwrap()
            .auth
            .settings;
        assert_eq!(settings.revocable_ttl, Duration::from_secs(3600));
        let yaml = "auth: {allowedTtlSeconds: 5, revocableTtlSeconds: 30}";
        let settings = resolve(yaml, &[]).unwrap().auth.settings;
        assert_eq!(settings.revocable_ttl, Duration::from_secs(30));
    }

    #[test]
    fn user_review_bounds_come_from_flags_over_the_file() {
        let settings = resolve("", &[]).unwrap().auth.settings;
        assert_eq!(
            (settings.user_reviews_per_second, settings.user_review_burst),
            (
                AuthSettings::DEFAULT_USER_REVIEWS_PER_SECOND,
                AuthSettings::DEFAULT_USER_REVIEW_BURST
            )
        );
        let yaml = "auth: {userReviewsPerSecond: 5, userReviewBurst: 50}";
        let settings = resolve(yaml, &["--auth-user-review-burst", "7"])
            .unwrap()
            .auth
            .settings;
        assert_eq!(
            (settings.user_reviews_per_second, settings.user_review_burst),
            (5.0, 7)
        );
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
        assert_eq!(config.health_listen, Some("0.0.0.0:8081".parse().unwrap()));
        let off = resolve("healthListen: \"off\"", &[]).unwrap();
        assert_eq!(off.health_listen, None);
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
            error_field("", &["--health-listen", "nowhere"]),
            "healthListen (--health-listen)"
        );
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
        assert_eq!(
            error_field("", &["--auth-user-reviews-per-second", "0"]),
            "auth.userReviewsPerSecond (--auth-user-reviews-per-second)"
        );
        assert_eq!(
            error_field("auth: {userReviewBurst: 0}", &[]),
            "auth.userReviewBurst (--auth-user-review-burst)"
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
