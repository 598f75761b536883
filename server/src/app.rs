//! The composition root: one validated [`Config`] and the API server's
//! client configuration become a running kubecache. The one place that
//! knows every layer: it installs the metrics recorder, starts each
//! resource's reflector (restoring its state file first, with
//! `--state-dir`), serves them ([`crate::cacher`]), builds the HTTP API
//! over them ([`crate::http`]) with its authorization and pass-through, and
//! saves the state files. `main.rs` and the integration tests both start
//! kubecache here, so they run the same wiring.
//!
//! Below it, nothing calls up: `cacher/` knows neither HTTP, nor metrics'
//! recorder, nor state files (`.ci/run` checks its imports).
//!
//! Stopping ([`App::run`]): on the stop signal, stop accepting, end every
//! watch cleanly (its client resumes elsewhere from its last
//! resourceVersion), let answers in flight finish for up to
//! [`SHUTDOWN_GRACE`], save the state files within the same grace, return.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use kubecache_reflector::Reflector;
use kubecache_reflector::store;
use kubecache_reflector::upstream::{ApiResource, ResourceSpec, Upstream, server_version};
use kubecache_wire::protobuf::KubeVersion;
use tokio::net::TcpListener;
use tokio::task::{AbortHandle, JoinHandle};

use crate::auth::Auth;
use crate::cacher::{Cache, Caches};
use crate::config::{Config, ResourceConfig};
use crate::passthrough::PassThrough;
use crate::transport::{Answers, Limits, Server, Tls};
use crate::warm_restart::{self, Persisted, StateDir};

/// How long requests in flight may take to finish after a stop signal.
/// Kubernetes waits `terminationGracePeriodSeconds` (30 s by default)
/// before it kills the container; this leaves it a margin.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// A running kubecache: its reflectors, its caches and the HTTP API over
/// them. Dropping it stops the reflectors and the state saver.
pub struct App {
    caches: Arc<Caches>,
    auth: Arc<Auth>,
    answers: Answers,
    tls: Option<Tls>,
    limits: Limits,
    write_stall: Duration,
    reflectors: Vec<AbortHandle>,
    saver: Option<JoinHandle<()>>,
}

impl App {
    /// Finds every configured resource by discovery, then starts them (see
    /// [`App::start_discovered`]).
    ///
    /// # Errors
    ///
    /// A resource the API server does not serve, and those of
    /// [`App::start_discovered`].
    pub async fn start(config: Config, upstream: &kube::Config) -> anyhow::Result<App> {
        let client = kube::Client::try_from(upstream.clone())?;
        let mut resources = Vec::new();
        for resource in &config.resources {
            let found = ApiResource::discover(&client, &resource.name)
                .await
                .with_context(|| format!("resource {:?}", resource.name))?;
            resources.push(found);
        }
        Self::start_discovered(config, upstream, resources).await
    }

    /// Starts kubecache of `config` in front of the API server of
    /// `upstream`, `resources[i]` being what discovery found of
    /// `config.resources[i]`. It answers at once: a resource's reads are
    /// 503 until it has synced.
    ///
    /// # Errors
    ///
    /// A client of `upstream` that cannot be built, or a field index whose
    /// path does not parse.
    pub async fn start_discovered(
        config: Config,
        upstream: &kube::Config,
        resources: Vec<ApiResource>,
    ) -> anyhow::Result<App> {
        // The recorder first: the reflectors record from their first step on.
        crate::metrics::handle();
        let client = kube::Client::try_from(upstream.clone())?;
        let pass_through =
            PassThrough::new(upstream, config.connections.max_passthrough_connections)
                .context("the API server's client for pass-through")?;
        let state_dir = match &config.state {
            Some(state) => state_dir(&state.dir, &client, upstream).await,
            None => None,
        };
        let version = kube_version(&client).await;
        let mut caches = Vec::new();
        let mut reflectors = Vec::new();
        let mut persisted = Vec::new();
        for (resource, found) in config.resources.into_iter().zip(resources) {
            let name = resource.name.clone();
            let started = start_resource(
                client.clone(),
                version,
                found,
                resource,
                &config.serve,
                state_dir.as_ref(),
            )
            .with_context(|| format!("resource {name:?}"))?;
            crate::metrics::register(&started.cache.name());
            reflectors.push(started.task.abort_handle());
            tokio::spawn(reflector_ended(started.cache.name(), started.task));
            persisted.extend(started.persisted);
            caches.push(started.cache);
        }
        let caches = Arc::new(Caches::new(caches, config.serve));
        let auth = Arc::new(if config.auth.enabled {
            Auth::kubernetes(upstream, config.auth.settings).context("the review client")?
        } else {
            tracing::warn!(
                "--auth=none: NO AUTHORIZATION. Anyone who reaches {} reads every cached object. \
                 For local runs and benchmarks only.",
                config.listen
            );
            Auth::None
        });
        reflectors.extend(
            auth.follow(&client, version)
                .iter()
                .map(JoinHandle::abort_handle),
        );
        let saver = config.state.filter(|_| !persisted.is_empty()).map(|state| {
            tokio::spawn(warm_restart::save_periodically(
                persisted,
                state.save_interval,
                SHUTDOWN_GRACE,
                caches.shutting_down(),
            ))
        });
        Ok(App {
            answers: crate::http::router(caches.clone(), auth.clone(), pass_through),
            caches,
            auth,
            tls: config.tls,
            limits: config.connections,
            write_stall: config.write_stall,
            reflectors,
            saver,
        })
    }

    /// What is served.
    pub fn caches(&self) -> &Arc<Caches> {
        &self.caches
    }

    /// How requests are authenticated and authorized (see
    /// [`Auth::forget`]).
    pub fn auth(&self) -> &Arc<Auth> {
        &self.auth
    }

    /// The server of the HTTP API on `listener`, with the configured TLS,
    /// connection limits and write-stall budget.
    pub fn server(&self, listener: TcpListener) -> Server {
        Server::new(listener, self.answers.clone())
            .tls(self.tls.clone())
            .limits(self.limits)
            .write_stall(self.write_stall)
    }

    /// The server of the health endpoints alone on `listener`: plain
    /// HTTP, within [`Limits::PROBES`], apart from the API's connections.
    pub fn health_server(&self, listener: TcpListener) -> Server {
        Server::new(listener, crate::http::health_router(self.caches.clone()))
            .limits(Limits::PROBES)
    }

    /// Ends every reflector, as a panic outside their steps would (their
    /// stores close; `/livez` fails). Serving goes on.
    pub fn stop_reflectors(&self) {
        for reflector in &self.reflectors {
            reflector.abort();
        }
    }

    /// Serves on `listener`, and the health endpoints on `health`, until
    /// `stop` resolves, then stops as the module doc says (the health
    /// endpoints answer while answers in flight finish).
    pub async fn run(
        mut self,
        listener: TcpListener,
        health: Option<TcpListener>,
        stop: impl Future<Output = ()> + Send,
    ) {
        let health = health.map(|listener| self.health_server(listener));
        let health = async move {
            match health {
                Some(health) => health.serve(std::future::pending()).await,
                None => std::future::pending().await,
            }
        };
        let stopping = self.caches.clone();
        let server = self.server(listener).serve(async move {
            stop.await;
            tracing::info!("stopping: no new connections; ending watches");
            stopping.shut_down();
        });
        let mut shutting_down = self.caches.shutting_down();
        tokio::select! {
            () = server => {},
            () = health => {},
            _ = async {
                let _ = shutting_down.wait_for(|down| *down).await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => tracing::warn!(grace = ?SHUTDOWN_GRACE, "requests still in flight: exiting anyway"),
        }
        if let Some(saver) = self.saver.take() {
            // Bounded by the grace from the stop signal on, as the drain is.
            let _ = saver.await;
        }
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.stop_reflectors();
        if let Some(saver) = &self.saver {
            saver.abort();
        }
    }
}

/// One resource started: its cache, its reflector's task and its state
/// file, if it has one.
struct Started {
    cache: Cache,
    task: JoinHandle<()>,
    persisted: Option<Persisted>,
}

/// Starts a reflector of `resource` (found by discovery as `found`)
/// through `client`, to an API server of Kubernetes `version`, into a new
/// store, and serves it. The reflector extracts the values of the store's
/// field indexes. With `state`, the store's state file is loaded first (the
/// reflector then resumes from it instead of listing).
fn start_resource(
    client: kube::Client,
    version: KubeVersion,
    found: ApiResource,
    resource: ResourceConfig,
    settings: &crate::ServeSettings,
    state: Option<&StateDir>,
) -> anyhow::Result<Started> {
    let mut reflector = resource.reflector;
    for index in &resource.store.field_indexes {
        reflector.transform = reflector.transform.index_field(&index.path)?;
    }
    let file = state.and_then(|dir| dir.file(&found, reflector.transform.clone()));
    let spec = ResourceSpec {
        resource: found,
        namespace: resource.namespace,
        label_selector: resource.label_selector,
        field_selector: resource.field_selector,
    };
    // The cache's own requests (a cold GET's fetch, the clock's) ask in
    // the reflector's encoding too: an object fetched in JSON would lose
    // the bytes of its strings that are not UTF-8.
    let upstream = Upstream::new(client, spec)
        .with_version(version)
        .with_wire(reflector.wire);
    let (writer, reader) = store(resource.store);
    let transform = reflector.transform.clone();
    let mut reflector = Reflector::new(upstream.clone(), reflector, writer);
    let status = reflector.status();
    let cache = Cache::new(
        upstream,
        reader.clone(),
        status.clone(),
        transform,
        settings,
    );
    let name = cache.name();
    let persisted = file.clone().map(|file| Persisted {
        name: name.clone(),
        file,
        reader,
        status,
    });
    let task = tokio::spawn(async move {
        if let Some(file) = file {
            warm_restart::restore(file, &mut reflector, &name).await;
        }
        reflector.run().await;
    });
    Ok(Started {
        cache,
        task,
        persisted,
    })
}

/// The Kubernetes version of the API server `client` reaches, which its
/// protobuf is read and written as; the schema's own (1.36), said in the
/// log, when `/version` does not name one.
async fn kube_version(client: &kube::Client) -> KubeVersion {
    match server_version(client).await {
        Ok(version) => {
            tracing::info!(%version, "the API server's Kubernetes version: protobuf read and written as its types");
            version
        }
        Err(error) => {
            let version = KubeVersion::NEWEST;
            tracing::warn!(%version, "the API server's /version: {error}; protobuf read and written as Kubernetes {version}");
            version
        }
    }
}

/// The state directory at `dir`, of the cluster `client` reaches; `None`
/// (every start lists), said in the log, when it cannot be opened.
async fn state_dir(
    dir: &std::path::Path,
    client: &kube::Client,
    upstream: &kube::Config,
) -> Option<StateDir> {
    match StateDir::open(dir, client, &upstream.cluster_url.to_string()).await {
        Ok(state) => {
            tracing::info!(dir = %dir.display(), cluster = state.cluster(), "warm restart: state files saved and loaded here");
            Some(state)
        }
        Err(error) => {
            tracing::error!(dir = %dir.display(), "no warm restart (every start lists): {error:#}");
            None
        }
    }
}

/// Waits for a reflector's task to end and says why. It never ends by
/// itself (it retries every failure, and catches the panics of its steps),
/// so this is a bug, or the app stopping it: its store is then closed and
/// not ready ("the reflector stopped"), and `/livez` fails so that the
/// kubelet restarts the process.
async fn reflector_ended(resource: String, task: JoinHandle<()>) {
    // A JoinError says whether the task panicked, and with what message.
    let why = match task.await {
        Ok(()) => "it returned".to_string(),
        Err(error) if error.is_cancelled() => return,
        Err(error) => error.to_string(),
    };
    tracing::error!(%resource, %why, "the reflector stopped: /livez fails from now on");
}
