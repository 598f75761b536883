//! What the server's integration tests share: the simulated API server,
//! reflectors of the chosen resources into stores, and kubecache's router on
//! 127.0.0.1 served by kubecache's own [`Server`] (HTTP, or HTTPS with
//! [`Setup::tls`]), all in this process and stopped when dropped.

pub mod deploy;
mod metrics_turn;
pub mod pki;
pub mod process;

use std::sync::Arc;

use kubecache_loadtest::sim::{Sim, SimConfig};
use kubecache_reflector::StoreConfig;
use kubecache_reflector::upstream::{ApiResource, RequestEncoding, ResourceSpec};
use kubecache_reflector::{ReflectorConfig, Strategy};
use kubecache_server::auth::AuthSettings;
use kubecache_server::config::{AuthConfig, Cli, Config, FileConfig, ResourceConfig};
use kubecache_server::transport::{Server, Tls};
use kubecache_server::{App, Caches, ServeSettings};
use kubecache_wire::Transform;
use tokio::task::JoinHandle;

use metrics_turn::Turn;

/// A store with a field index `node` on `spec.nodeName`, as per-node agents
/// need.
pub fn node_index() -> StoreConfig {
    StoreConfig {
        field_indexes: vec![kubecache_reflector::IndexSpec {
            name: "node".into(),
            path: "spec.nodeName".into(),
        }],
        ..StoreConfig::default()
    }
}

/// kubecache serving a simulated API server.
pub struct Served {
    /// kubecache's base URL (`http://` or, with [`Setup::tls`], `https://`).
    pub url: String,
    /// The simulated API server behind it.
    pub sim: Sim,
    /// What the router serves.
    pub caches: Arc<Caches>,
    front: Front,
}

/// What to start.
pub struct Setup {
    pub sim: SimConfig,
    /// Resources to cache; each with the same store config.
    pub resources: Vec<ApiResource>,
    pub store: StoreConfig,
    pub settings: ServeSettings,
    pub strategy: Strategy,
    /// The encoding the reflectors read the sim in.
    pub wire: RequestEncoding,
    /// What the reflectors strip from each object.
    pub transform: Transform,
    /// What each cache holds of its resource.
    pub spec: fn(ApiResource) -> ResourceSpec,
    /// Serve HTTPS with this.
    pub tls: Option<Tls>,
    /// Authenticate and authorize with the sim's reviews, keeping answers
    /// so; kubecache then lists and watches as the demo policy's
    /// `kubecache` user (the sim needs a policy). `None`: `--auth=none`.
    pub auth: Option<AuthSettings>,
    /// The server's write-stall budget.
    pub write_stall: std::time::Duration,
    /// The longest the server lingers when it closes a connection.
    pub linger: std::time::Duration,
    /// The test asserts exact values of process-wide metrics: its kubecache
    /// runs while no other test's does (see `metrics_turn`).
    pub metrics_alone: bool,
    /// Pass-through's connections to the sim at once.
    pub max_passthrough_connections: usize,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            sim: SimConfig {
                pods: 1000,
                ..SimConfig::default()
            },
            resources: vec![ApiResource::pods()],
            store: StoreConfig::default(),
            settings: ServeSettings::default(),
            strategy: Strategy::Parallel,
            wire: RequestEncoding::Auto,
            transform: Transform::default(),
            spec: ResourceSpec::all,
            tls: None,
            auth: None,
            write_stall: Server::WRITE_STALL,
            linger: Server::LINGER,
            metrics_alone: false,
            max_passthrough_connections: kubecache_server::transport::Limits::default()
                .max_passthrough_connections,
        }
    }
}

/// Starts the sim, the reflectors and kubecache; returns once every store
/// is ready.
pub async fn serve(setup: Setup) -> Served {
    let (sim_url, sim) = Sim::start(setup.sim.clone()).await.expect("sim starts");
    let upstream = match setup.auth {
        Some(_) => {
            let kubeconfig = sim
                .kubeconfig_for(kubecache_loadtest::sim::auth::demo::KUBECACHE)
                .expect("a policy with kubecache's user");
            let kubeconfig = kube::config::Kubeconfig::from_yaml(&kubeconfig).unwrap();
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .unwrap()
        }
        None => kube::Config::new(sim_url.parse().unwrap()),
    };
    let front = front(upstream, setup).await;
    Served {
        url: front.url.clone(),
        sim,
        caches: front.caches.clone(),
        front,
    }
}

/// kubecache in front of any API server, stopped when dropped.
pub struct Front {
    /// kubecache's base URL.
    pub url: String,
    /// What the router serves.
    pub caches: Arc<Caches>,
    app: App,
    server: JoinHandle<()>,
    /// Held while this kubecache runs.
    _turn: Turn,
}

impl Drop for Front {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Starts kubecache as `main` does (its composition root, [`App`]) with
/// the configuration `setup` says (its `sim` unused), in front of
/// `upstream`, its resources known without discovery; returns once every
/// store is ready.
pub async fn front(upstream: kube::Config, setup: Setup) -> Front {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let turn = Turn::take(setup.metrics_alone).await;
    let mut config = Config::resolve(&Cli::default(), FileConfig::default()).expect("defaults");
    let reflector = ReflectorConfig {
        strategy: setup.strategy,
        wire: setup.wire,
        transform: setup.transform.clone(),
        ..ReflectorConfig::default()
    };
    config.resources = setup
        .resources
        .iter()
        .map(|resource| {
            let spec = (setup.spec)(resource.clone());
            ResourceConfig {
                name: match resource.group.as_str() {
                    "" => resource.plural.clone(),
                    group => format!("{}.{group}", resource.plural),
                },
                namespace: spec.namespace,
                label_selector: spec.label_selector,
                field_selector: spec.field_selector,
                store: setup.store.clone(),
                reflector: reflector.clone(),
            }
        })
        .collect();
    let scheme = if setup.tls.is_some() { "https" } else { "http" };
    config.serve = setup.settings;
    config.tls = setup.tls;
    config.write_stall = setup.write_stall;
    config.connections.max_passthrough_connections = setup.max_passthrough_connections;
    config.auth = AuthConfig {
        enabled: setup.auth.is_some(),
        settings: setup.auth.unwrap_or_default(),
    };
    let app = App::start_discovered(config, &upstream, setup.resources)
        .await
        .expect("kubecache starts");
    let caches = app.caches().clone();
    for cache in caches.iter() {
        tokio::time::timeout(std::time::Duration::from_secs(60), cache.reader.ready())
            .await
            .expect("synced within a minute")
            .expect("store open");
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("{scheme}://{}", listener.local_addr().unwrap());
    let server = app.server(listener).linger(setup.linger);
    let server = tokio::spawn(server.serve(std::future::pending()));
    Front {
        url,
        caches,
        app,
        server,
        _turn: turn,
    }
}

impl Served {
    /// Forgets kubecache's kept review answers, as `SIGHUP` does.
    pub fn forget_reviews(&self) {
        self.front.app.auth().forget();
    }

    /// Whether kubecache's kept review answers follow RBAC and
    /// ServiceAccounts now (`auth::revocation`).
    pub fn is_following(&self) -> bool {
        let auth = self.front.app.auth();
        auth.followed().is_some_and(|f| f.following())
    }

    /// Waits until kubecache's kept review answers follow RBAC and
    /// ServiceAccounts.
    pub async fn following(&self) {
        kubecache_testkit::wait::until("kept answers follow RBAC", || self.is_following()).await;
    }

    /// Waits until kubecache's watch of `resource` (e.g. `roles`) has
    /// seen `changes` changes in all.
    pub async fn revoked_by(&self, resource: &str, changes: u64) {
        let auth = self.front.app.auth();
        let what = format!("{changes} changes of {resource} seen");
        kubecache_testkit::wait::until(&what, || {
            auth.followed().is_some_and(|f| {
                f.watches()
                    .iter()
                    .any(|w| w.resource == resource && w.revocations >= changes)
            })
        })
        .await;
    }

    /// Ends every reflector, as a panic outside their steps would, and
    /// waits until their stores have closed; kubecache goes on serving.
    pub async fn stop_reflectors(&mut self) {
        self.front.app.stop_reflectors();
        let caches = &self.caches;
        kubecache_testkit::wait::until("every store closed", || {
            caches.iter().all(|cache| cache.reader.is_closed())
        })
        .await;
    }
}

/// kubecache in front of a sim with the recorded corpora's identities and
/// RBAC (`Policy::edges`, and kubecache's own service account), claiming
/// `kube_version` and holding `pods` and `configmaps` (a corpus's objects),
/// caching both, once it holds them all; and where it listens.
pub async fn serve_corpus(
    kube_version: kubecache_wire::protobuf::KubeVersion,
    objects: (Vec<serde_json::Value>, Vec<serde_json::Value>),
) -> (Served, std::net::SocketAddr) {
    let served = serve_objects(corpus_setup(kube_version), objects).await;
    let addr = served
        .url
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .expect("an address");
    (served, addr)
}

/// What [`serve_corpus`] serves: a sim with the corpora's identities and
/// RBAC (`Policy::edges`, and kubecache's own service account) and no
/// objects, claiming `kube_version`; kubecache caching pods and config
/// maps.
pub fn corpus_setup(kube_version: kubecache_wire::protobuf::KubeVersion) -> Setup {
    use kubecache_loadtest::sim::Policy;
    Setup {
        sim: SimConfig {
            pods: 0,
            configmaps: 0,
            policy: Some(Policy::edges().with_kubecache()),
            kube_version,
            ..SimConfig::default()
        },
        resources: vec![
            ApiResource::pods(),
            resource("", "configmaps", "ConfigMap", true),
        ],
        auth: Some(matrix_auth()),
        ..Setup::default()
    }
}

/// kubecache of `setup` (caching pods and config maps), its sim holding
/// `pods` and `configmaps`, once kubecache holds them all.
pub async fn serve_objects(
    setup: Setup,
    (pods, configmaps): (Vec<serde_json::Value>, Vec<serde_json::Value>),
) -> Served {
    use kubecache_loadtest::sim::ids;
    let served = serve(setup).await;
    let counts = (pods.len(), configmaps.len());
    served.sim.seed(ids::PODS, pods).expect("pods seeded");
    served
        .sim
        .seed(ids::CONFIGMAPS, configmaps)
        .expect("configmaps seeded");
    let held = |name: &str| served.caches.by_name(name).unwrap().reader.snapshot().len();
    kubecache_testkit::wait::until("kubecache holds the corpus's objects", || {
        (held("pods"), held("configmaps")) == counts
    })
    .await;
    served
}

/// The default review settings, with per-address and per-user review
/// budgets that a test replaying a matrix of requests from one address,
/// as fast as it can, never reaches (the budgets are tested on their own
/// in `authz.rs`).
pub fn matrix_auth() -> AuthSettings {
    AuthSettings {
        token_reviews_per_second: 1e6,
        user_review_burst: 1_000_000,
        ..AuthSettings::default()
    }
}

/// A resource of version `v1` known without discovery.
pub fn resource(group: &str, plural: &str, kind: &str, namespaced: bool) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: "v1".into(),
        plural: plural.into(),
        kind: kind.into(),
        namespaced,
    }
}

/// A kube client of kubecache.
pub fn client(url: &str) -> kube::Client {
    kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap()
}

/// A kube client of `url` that presents the bearer token `token`.
pub fn client_as(url: &str, token: &str) -> kube::Client {
    let mut config = kube::Config::new(url.parse().unwrap());
    config.headers.push((
        http::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    ));
    kube::Client::try_from(config).unwrap()
}

/// GET `path` (with its query) from kubecache at `url`: status code and
/// body. A plain HTTP/1.1 client: kube's client retries 5xx answers, which
/// tests must see as they are.
pub async fn get(url: &str, path: &str) -> (u16, bytes::Bytes) {
    let request = http::Request::get(path)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    send(url, request).await
}

/// GET `path` from `url` as the holder of `token`: code and JSON body.
pub async fn get_as(url: &str, path: &str, token: &str) -> (u16, serde_json::Value) {
    let request = http::Request::get(path)
        .header("authorization", format!("Bearer {token}"))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let (code, body) = send(url, request).await;
    (code, serde_json::from_slice(&body).unwrap())
}

/// The names of a list's items, in order.
pub fn names(list: &serde_json::Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Sends `request` to kubecache at `url`: status code and body.
pub async fn send<B>(url: &str, request: http::Request<B>) -> (u16, bytes::Bytes)
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let response = exchange(url, request).await;
    (response.status().as_u16(), response.into_body())
}

/// Sends `request` to `url`: the whole response.
pub async fn exchange<B>(url: &str, mut request: http::Request<B>) -> http::Response<bytes::Bytes>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use http_body_util::BodyExt;
    let mut sender = open(url, &mut request).await;
    let response = sender.send_request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    http::Response::from_parts(parts, body)
}

/// A connection to kubecache at `url`, ready to send `request` (whose Host
/// header it sets).
pub async fn open<B>(
    url: &str,
    request: &mut http::Request<B>,
) -> hyper::client::conn::http1::SendRequest<B>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let authority = url.trim_start_matches("http://").to_string();
    request
        .headers_mut()
        .insert(http::header::HOST, authority.parse().unwrap());
    let stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    sender
}

/// A request answered before its body was read, as a client still sending
/// the body meets it: sends `head` and `first`, the start of the body, on a
/// new connection to `addr`, reads the answer until the server closes its
/// side, and only then sends `rest`, which must all be taken (as it is
/// when the server lingers: with a plain close, bytes that come after it
/// reset the connection, and the write fails, as a client that sends its
/// whole body before it reads finds). Its send buffer is small, so the
/// write completes only once the server has taken most of `rest`. The
/// answer's code, head and body.
pub async fn answered_early(
    addr: &str,
    head: &str,
    first: &[u8],
    rest: &[u8],
) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(16 * 1024).unwrap();
    let mut stream = socket.connect(addr.parse().unwrap()).await.unwrap();
    let sent = stream.write_all(head.as_bytes()).await;
    sent.and(stream.write_all(first).await)
        .unwrap_or_else(|e| panic!("the head and the start of the body: {e}"));
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    kubecache_testkit::wait::within("the answer and the server's close", read)
        .await
        .unwrap();
    let sent = stream.write_all(rest).await;
    sent.unwrap_or_else(|e| panic!("the rest of the body, sent after the answer: {e}"));
    let answer = String::from_utf8(answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok());
    let code = code.unwrap_or_else(|| panic!("no answer: {answer:?}"));
    (code, head.to_string(), body.to_string())
}

/// The lines of a watch response, read as they arrive.
pub struct WatchLines {
    /// The response's status code.
    pub code: u16,
    body: hyper::body::Incoming,
    buffer: Vec<u8>,
}

impl WatchLines {
    /// GETs `path` from `base` (kubecache or the sim) and starts reading.
    pub async fn open(base: &str, path: &str) -> WatchLines {
        Self::send(base, http::Request::get(path)).await
    }

    /// The same, with the bearer token `token`.
    pub async fn open_as(base: &str, path: &str, token: &str) -> WatchLines {
        let request =
            http::Request::get(path).header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        Self::send(base, request).await
    }

    /// The same, asking for `accept` (a Table: `kubectl get -w`).
    pub async fn open_accepting(base: &str, path: &str, accept: &str) -> WatchLines {
        let request = http::Request::get(path).header(http::header::ACCEPT, accept);
        Self::send(base, request).await
    }

    async fn send(base: &str, request: http::request::Builder) -> WatchLines {
        let mut request = request
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let mut sender = open(base, &mut request).await;
        let response = sender.send_request(request).await.unwrap();
        WatchLines {
            code: response.status().as_u16(),
            body: response.into_body(),
            buffer: Vec::new(),
        }
    }

    /// The next line as JSON; `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<serde_json::Value> {
        let line = self.next_line().await?;
        Some(serde_json::from_slice(&line).expect("a watch line is JSON"))
    }

    /// The next line's bytes, newline included; `None` at the end of the stream.
    pub async fn next_line(&mut self) -> Option<Vec<u8>> {
        use http_body_util::BodyExt;
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                return Some(self.buffer.drain(..=end).collect());
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
                Some(Err(_)) | None => {
                    assert!(self.buffer.is_empty(), "a partial line at the end");
                    return None;
                }
            }
        }
    }

    /// The next `n` lines other than bookmarks (fewer if the stream ends).
    pub async fn events(self, n: usize) -> Vec<serde_json::Value> {
        self.events_counted(n, &tokio::sync::watch::Sender::new(0))
            .await
    }

    /// The first `n` events, as [`WatchLines::events`], telling `counted`
    /// how many have arrived as they do.
    pub async fn events_counted(
        mut self,
        n: usize,
        counted: &tokio::sync::watch::Sender<usize>,
    ) -> Vec<serde_json::Value> {
        let mut events = Vec::new();
        while events.len() < n {
            match self.next().await {
                Some(line) if line["type"] == "BOOKMARK" => {}
                Some(line) => {
                    events.push(line);
                    counted.send_replace(events.len());
                }
                None => break,
            }
        }
        events
    }

    /// Every line until the stream ends.
    pub async fn collect(self) -> Vec<serde_json::Value> {
        self.collect_until(|_| false).await
    }

    /// Every line up to the first that `last` picks (included), or until
    /// the stream ends.
    pub async fn collect_until(
        mut self,
        last: impl Fn(&serde_json::Value) -> bool,
    ) -> Vec<serde_json::Value> {
        let mut lines = Vec::new();
        while let Some(line) = self.next().await {
            let done = last(&line);
            lines.push(line);
            if done {
                break;
            }
        }
        lines
    }
}

/// `TYPE namespace/name@resourceVersion` of a watch line.
pub fn describe(line: &serde_json::Value) -> String {
    let meta = &line["object"]["metadata"];
    format!(
        "{} {}/{}@{}",
        line["type"].as_str().unwrap_or_default(),
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default(),
        meta["resourceVersion"].as_str().unwrap_or_default()
    )
}

/// kubecache's current resourceVersion of `collection` (a `limit=1` list
/// at resourceVersion 0).
pub async fn resource_version(url: &str, collection: &str) -> u64 {
    let (code, body) = get(url, &format!("{collection}?limit=1&resourceVersion=0")).await;
    assert_eq!(code, 200);
    let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}
