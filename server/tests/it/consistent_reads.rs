//! Consistent reads see every write the API server accepted before them,
//! and `NotOlderThan` reads wait for their resourceVersion, whatever moved
//! the global resourceVersion: a randomized, seeded test
//! (replay one seed with `KUBECACHE_SEED=n`), against the sim with
//! kubecache caching pods and config maps.

use crate::common;

use common::{Setup, get, get_as, resource, serve};
use kubecache_loadtest::sim::{Policy, SimConfig, ids};
use kubecache_reflector::upstream::ApiResource;
use kubecache_server::ServeSettings;
use kubecache_server::auth::AuthSettings;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// The seeds CI runs; `KUBECACHE_SEED` replaces them with one.
const SEEDS: [u64; 3] = [1, 17, 2026];

/// Writes (each followed by its read) per seed.
const STEPS: usize = 40;

/// The resourceVersion of an object or list answered by kubecache.
fn resource_version(body: &[u8]) -> (u64, Value) {
    let value: Value = serde_json::from_slice(body).unwrap();
    let rv = value["metadata"]["resourceVersion"]
        .as_str()
        .expect("a resourceVersion")
        .parse()
        .unwrap();
    (rv, value)
}

/// A read of `ns/name` in `plural`, by GET or by a list selecting it,
/// consistent or (`at`) not older than a resourceVersion: the object's
/// resourceVersion.
async fn read(
    url: &str,
    plural: &str,
    ns: &str,
    name: &str,
    by_list: bool,
    at: Option<u64>,
) -> u64 {
    let at = at.map_or_else(String::new, |rv| {
        format!("resourceVersion={rv}&resourceVersionMatch=NotOlderThan&")
    });
    let path = if by_list {
        format!("/api/v1/namespaces/{ns}/{plural}?{at}fieldSelector=metadata.name%3D{name}")
    } else {
        format!("/api/v1/namespaces/{ns}/{plural}/{name}?{at}")
    };
    let (code, body) = get(url, &path).await;
    assert_eq!(code, 200, "{path}: {}", String::from_utf8_lossy(&body));
    let (_, value) = resource_version(&body);
    let object = if by_list {
        let items = value["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{path} lists {name}");
        items[0].clone()
    } else {
        value
    };
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_read_sees_each_write_made_before_it_under_churn_of_other_resources() {
    consistent_reads_see_each_write_before_them(None, &SEEDS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_read_sees_each_write_made_before_it_with_bookmarks_on_the_dispatch_timer() {
    // Bookmarks up to a second early or a tick late, as kube-apiserver
    // sends them: the probes' proofs hold all the same.
    // (One seed: each cold read waits about a second for its proof.)
    let dispatch = Some(kubecache_loadtest::sim::BOOKMARK_DISPATCH);
    consistent_reads_see_each_write_before_them(dispatch, &SEEDS[..1]).await;
}

/// Random writes to pods and config maps, each read back at once by a
/// consistent GET or list, under pod churn, for each of `seeds`; the sim
/// dispatching bookmarks on `bookmark_dispatch`.
async fn consistent_reads_see_each_write_before_them(
    bookmark_dispatch: Option<std::time::Duration>,
    seeds: &[u64],
) {
    let seeds = match std::env::var("KUBECACHE_SEED") {
        Ok(seed) => vec![seed.parse().expect("KUBECACHE_SEED is a number")],
        Err(_) => seeds.to_vec(),
    };
    let served = serve(Setup {
        sim: SimConfig {
            pods: 200,
            configmaps: 20,
            bookmark_dispatch,
            ..SimConfig::default()
        },
        resources: vec![
            ApiResource::pods(),
            resource("", "configmaps", "ConfigMap", true),
        ],
        ..Setup::default()
    })
    .await;
    let pods = served.sim.state(ids::PODS);
    // Pods churn throughout (about 100 writes/s), moving the global
    // resourceVersion. (The sim's own churn deletes pods the test writes.)
    let churn = tokio::spawn({
        let (store, pods) = (served.sim.store().clone(), pods.clone());
        async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(10));
            for i in 0u64.. {
                tick.tick().await;
                let pod = &pods[(i as usize * 7919) % pods.len()];
                let patch = json!({"metadata": {"annotations": {"churn": i.to_string()}}});
                store
                    .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
                    .unwrap();
            }
        }
    });
    let configmaps = served.sim.state(ids::CONFIGMAPS);
    for seed in seeds {
        println!("seed {seed} (replay with KUBECACHE_SEED={seed})");
        let mut rng = SmallRng::seed_from_u64(seed);
        for step in 0..STEPS {
            // A few writes to either resource, the last one read back.
            for _ in 0..rng.random_range(1..4) {
                let (id, plural, objects) = if rng.random_bool(0.6) {
                    (ids::PODS, "pods", &pods)
                } else {
                    (ids::CONFIGMAPS, "configmaps", &configmaps)
                };
                let target = &objects[rng.random_range(0..objects.len())];
                let patch = json!({"metadata": {"labels": {"step": format!("{seed}-{step}")}}});
                let written = served
                    .sim
                    .store()
                    .merge_patch(id, &target.namespace, &target.name, &patch)
                    .unwrap();
                let by_list = rng.random_bool(0.5);
                let seen = read(
                    &served.url,
                    plural,
                    &target.namespace,
                    &target.name,
                    by_list,
                    None,
                )
                .await;
                assert!(
                    seen >= written.revision,
                    "seed {seed} step {step}: a consistent {} of {plural} {}/{} answered \
                     resourceVersion {seen}, older than the write at {} made before it",
                    if by_list { "list" } else { "get" },
                    target.namespace,
                    target.name,
                    written.revision
                );
            }
            // The quiet resource while pods churn harder: its reads answer,
            // consistent or not older than the last pod write (waiting for
            // it as the API server does, not failing), and see its newest
            // state.
            if rng.random_bool(0.3) {
                let mut last = 0;
                for _ in 0..rng.random_range(1..20) {
                    let pod = &pods[rng.random_range(0..pods.len())];
                    let patch = json!({"metadata": {"annotations": {"churn": step.to_string()}}});
                    last = served
                        .sim
                        .store()
                        .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
                        .unwrap()
                        .revision;
                }
                let target = &configmaps[rng.random_range(0..configmaps.len())];
                let newest: u64 = served.sim.versions(ids::CONFIGMAPS)[&target.key]
                    .parse()
                    .unwrap();
                let seen = read(
                    &served.url,
                    "configmaps",
                    &target.namespace,
                    &target.name,
                    rng.random_bool(0.5),
                    rng.random_bool(0.5).then_some(last),
                )
                .await;
                assert_eq!(
                    seen, newest,
                    "seed {seed} step {step}: the quiet config map's newest state"
                );
            }
        }
    }
    churn.abort();
}

/// The consistent reads of one config map the sim has answered so far:
/// kubecache's lists selecting one by name (the consistent lists that are
/// not its clock's `limit=1` ones) and GETs.
fn configmap_reads(sim: &kubecache_loadtest::sim::Sim) -> u64 {
    one_object_reads(sim, "configmaps")
}

/// The same, of `plural`.
fn one_object_reads(sim: &kubecache_loadtest::sim::Sim, plural: &str) -> u64 {
    let counts = &sim.counters()[plural];
    counts.consistent_lists - counts.limit_one_lists + counts.consistent_gets
}

/// kubecache caching pods and a few quiet config maps, with `settings`
/// and `auth`.
async fn quiet(settings: ServeSettings, auth: Option<AuthSettings>) -> common::Served {
    serve(Setup {
        sim: SimConfig {
            pods: 50,
            configmaps: 5,
            churn_per_sec: 0.0,
            policy: auth.is_some().then(Policy::demo),
            ..SimConfig::default()
        },
        resources: vec![
            ApiResource::pods(),
            resource("", "configmaps", "ConfigMap", true),
        ],
        settings,
        auth,
        ..Setup::default()
    })
    .await
}

/// Settings whose cold GETs wait for their proof, not pass through.
fn cold_gets_wait() -> ServeSettings {
    ServeSettings {
        cold_get_passthrough: false,
        ..ServeSettings::default()
    }
}

/// Writes one pod: the global resourceVersion moves, config maps do not.
fn move_the_revision(served: &common::Served, step: &str) -> u64 {
    let pod = &served.sim.state(ids::PODS)[0];
    let patch = json!({"metadata": {"annotations": {"moved": step}}});
    served
        .sim
        .store()
        .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
        .unwrap()
        .revision
}

/// Writes the first config map; its path and the revision written.
fn write_configmap(served: &common::Served, step: &str) -> (String, u64) {
    let target = &served.sim.state(ids::CONFIGMAPS)[0];
    let patch = json!({"metadata": {"labels": {"step": step}}});
    let written = served
        .sim
        .store()
        .merge_patch(ids::CONFIGMAPS, &target.namespace, &target.name, &patch)
        .unwrap();
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/{}",
        target.namespace, target.name
    );
    (path, written.revision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_gets_of_a_quiet_resource_are_answered_by_the_api_server_and_open_no_probe() {
    let served = quiet(ServeSettings::default(), None).await;
    let watches = |sim: &kubecache_loadtest::sim::Sim| sim.counters()["configmaps"].watches;
    let reflectors_watches = watches(&served.sim);
    for step in 0..5 {
        let (path, written) = write_configmap(&served, &format!("get-{step}"));
        move_the_revision(&served, &format!("get-{step}"));
        let before = configmap_reads(&served.sim);
        let (code, body) = get(&served.url, &path).await;
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        assert_eq!(configmap_reads(&served.sim), before + 1, "{step}: fetched");
        assert_eq!(resource_version(&body).0, written, "the latest write");
    }
    assert_eq!(
        watches(&served.sim),
        reflectors_watches,
        "GETs opened no probe watch"
    );

    // A consistent list cannot be fetched: it waits for a probe's proof.
    move_the_revision(&served, "list");
    let (code, _) = get(&served.url, "/api/v1/configmaps").await;
    assert_eq!(code, 200);
    assert!(
        watches(&served.sim) > reflectors_watches,
        "a probe proved it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_get_against_the_dispatch_timer_is_answered_by_one_request_sent_after_it() {
    // Bookmarks come once a second: a consistent GET of a quiet object
    // neither waits for the next one nor asks the API server's
    // resourceVersion first (two round trips): its one request, a list
    // selecting the object by name, answers it. With a limit, so that a
    // server with ConsistentListFromCache reads it from etcd, not from a
    // watch cache that waits for etcd's next progress notification.
    let served = serve(Setup {
        sim: SimConfig {
            pods: 50,
            configmaps: 5,
            bookmark_dispatch: Some(kubecache_loadtest::sim::BOOKMARK_DISPATCH),
            consistent_list_from_cache: true,
            ..SimConfig::default()
        },
        resources: vec![
            ApiResource::pods(),
            resource("", "configmaps", "ConfigMap", true),
        ],
        ..Setup::default()
    })
    .await;
    let requests = |sim: &kubecache_loadtest::sim::Sim| {
        let counters = sim.counters();
        let sum = |count: fn(&kubecache_loadtest::sim::Counts) -> u64| {
            counters.values().map(count).sum::<u64>()
        };
        (sum(|c| c.consistent_lists), sum(|c| c.consistent_gets))
    };
    for step in 0..5 {
        let (path, written) = write_configmap(&served, &format!("quiet-{step}"));
        move_the_revision(&served, &format!("quiet-{step}"));
        let (lists, gets) = requests(&served.sim);
        let (code, body) = get(&served.url, &path).await;
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        assert_eq!(resource_version(&body).0, written, "the latest write");
        assert_eq!(
            requests(&served.sim),
            (lists + 1, gets),
            "{step}: one list selecting it, no limit=1 list"
        );
    }
    assert_eq!(
        served.sim.counters()["configmaps"].lists_waiting_for_watch_cache,
        0,
        "no list waited for the watch cache"
    );
}

/// The resourceVersion in `X-Kubecache-Resource-Version` and in the list
/// metadata of kubecache's answer to `path`, and the answer.
async fn served_at(url: &str, path: &str) -> (u64, u64, Value) {
    let request = http::Request::get(path)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = common::exchange(url, request).await;
    assert_eq!(response.status(), 200, "{path}");
    let header = response.headers()["x-kubecache-resource-version"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let (rv, value) = resource_version(response.body());
    (header, rv, value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_list_of_a_quiet_resource_carries_the_resource_version_it_proved() {
    let served = quiet(cold_gets_wait(), None).await;
    let store = served.caches.by_name("configmaps").unwrap().reader.clone();
    for step in 0..3 {
        move_the_revision(&served, &format!("other-{step}"));
    }
    let current = served.sim.store().revision();
    assert!(store.current_resource_version() < current, "quiet");
    let (header, rv, _) = served_at(&served.url, "/api/v1/configmaps").await;
    assert_eq!(
        (header, rv),
        (current, current),
        "the proven resourceVersion"
    );
    assert!(store.current_resource_version() < current, "still quiet");

    // Its pages: each at it, the next found by the token carrying it.
    let (_, rv, first) = served_at(&served.url, "/api/v1/configmaps?limit=2").await;
    assert_eq!(rv, current);
    let token = first["metadata"]["continue"].as_str().unwrap();
    let path = format!("/api/v1/configmaps?limit=2&continue={token}");
    let (_, rv, second) = served_at(&served.url, &path).await;
    assert_eq!(rv, current, "the next page");
    assert_eq!(common::names(&second).len(), 2);

    // Its Table, and a GET's header.
    let request = http::Request::get("/api/v1/configmaps")
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let table = common::exchange(&served.url, request).await;
    assert_eq!(resource_version(table.body()).0, current, "a Table");
    let object = &served.sim.state(ids::CONFIGMAPS)[0];
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/{}",
        object.namespace, object.name
    );
    let request = http::Request::get(path.as_str())
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let got = common::exchange(&served.url, request).await;
    assert_eq!(
        got.headers()["x-kubecache-resource-version"],
        current.to_string().as_str(),
        "a GET"
    );

    // A consistent streaming list's initial-events-end bookmark.
    move_the_revision(&served, "streaming");
    let current = served.sim.store().revision();
    let path = "/api/v1/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10";
    let mut watch = common::WatchLines::open(&served.url, path).await;
    let end = loop {
        let line = watch.next().await.expect("the initial-events-end bookmark");
        if line["type"] == "BOOKMARK" {
            break line;
        }
    };
    assert_eq!(
        end["object"]["metadata"]["resourceVersion"],
        current.to_string(),
        "the bookmark"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_the_api_server_answers_has_the_shape_of_the_caches_own() {
    let served = quiet(ServeSettings::default(), None).await;
    let pod = served.sim.state(ids::PODS)[0].clone();
    let patch = json!({"metadata": {"labels": {"step": "shape"}}});
    let written = served
        .sim
        .store()
        .merge_patch(ids::PODS, &pod.namespace, &pod.name, &patch)
        .unwrap()
        .revision;
    // Another resource moves the revision: the quiet pods cache is cold.
    write_configmap(&served, "shape");
    let path = format!("/api/v1/namespaces/{}/pods/{}", pod.namespace, pod.name);
    let before = one_object_reads(&served.sim, "pods");
    let (code, upstream) = get(&served.url, &path).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&upstream));
    let asked = one_object_reads(&served.sim, "pods");
    assert_eq!(asked, before + 1, "asked of the API server");
    let (_, direct) = get(served.sim.url(), &path).await;
    assert!(resource_version(&direct).1["metadata"]["managedFields"].is_array());
    // The cache's own answer of the same version, once it has it.
    let cached = &served.url;
    let at_zero = format!("{path}?resourceVersion=0");
    kubecache_testkit::wait::until_async("the cache has the write", async || {
        resource_version(&get(cached, &at_zero).await.1).0 == written
    })
    .await;
    let (_, own) = get(cached, &at_zero).await;
    assert_eq!(
        String::from_utf8_lossy(&upstream),
        String::from_utf8_lossy(&own),
        "one shape, whoever answered: no managedFields"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_cold_get_passthrough_off_a_cold_get_waits_for_the_probe() {
    let served = quiet(cold_gets_wait(), None).await;
    let (path, written) = write_configmap(&served, "off");
    move_the_revision(&served, "off");
    let before = configmap_reads(&served.sim);
    let (code, body) = get(&served.url, &path).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(resource_version(&body).0, written, "the latest write");
    assert_eq!(
        configmap_reads(&served.sim),
        before,
        "served from the cache"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_get_of_a_missing_object_gets_the_api_servers_404() {
    let served = quiet(ServeSettings::default(), None).await;
    move_the_revision(&served, "missing");
    let path = "/api/v1/namespaces/default/configmaps/not-there";
    let before = configmap_reads(&served.sim);
    let (code, body) = get(&served.url, path).await;
    assert_eq!(code, 404, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        configmap_reads(&served.sim),
        before + 1,
        "asked of the API server"
    );
    let (direct_code, direct) = get(served.sim.url(), path).await;
    assert_eq!((code, body), (direct_code, direct), "the API server's 404");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_get_the_caller_may_not_make_is_refused_before_anything_is_sent() {
    let served = quiet(ServeSettings::default(), Some(AuthSettings::default())).await;
    let (path, _) = write_configmap(&served, "forbidden");
    move_the_revision(&served, "forbidden");
    let sent = |sim: &kubecache_loadtest::sim::Sim| {
        sim.counters()
            .values()
            .map(|c| c.consistent_gets + c.consistent_lists)
            .sum::<u64>()
    };
    let before = sent(&served.sim);
    let reads = configmap_reads(&served.sim);
    // bob reads pods only.
    let (code, body) = common::get_as(&served.url, &path, "bob-token").await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(sent(&served.sim), before, "nothing sent for the read");
    // The same read by a caller who may: passed through.
    let (code, body) = common::get_as(&served.url, &path, "admin-token").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(configmap_reads(&served.sim), reads + 1);
}

/// A merge patch of `path` through kubecache by the client of `token`: the
/// resourceVersion written.
async fn patch_as(url: &str, path: &str, token: &str, patch: &Value) -> u64 {
    let request = http::Request::patch(path)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/merge-patch+json")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            patch.to_string(),
        )))
        .unwrap();
    let (code, body) = common::send(url, request).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    resource_version(&body).0
}

/// The config map requests kubecache has sent the sim that could prove a
/// read fresh: watches (probes) and reads of one object.
fn configmap_proofs(sim: &kubecache_loadtest::sim::Sim) -> (u64, u64) {
    (sim.counters()["configmaps"].watches, configmap_reads(sim))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writers_first_read_after_its_write_waits_for_that_write_only() {
    let served = quiet(ServeSettings::default(), None).await;
    let target = served.sim.state(ids::CONFIGMAPS)[0].clone();
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/{}",
        target.namespace, target.name
    );
    let patch = json!({"metadata": {"labels": {"step": "own"}}});
    let written = patch_as(&served.url, &path, "writer", &patch).await;
    move_the_revision(&served, "after the write");

    let before = configmap_proofs(&served.sim);
    let (code, read) = get_as(&served.url, &path, "writer").await;
    assert_eq!(code, 200, "{read}");
    assert_eq!(read["metadata"]["resourceVersion"], written.to_string());
    assert_eq!(read["metadata"]["labels"]["step"], "own");
    assert_eq!(
        configmap_proofs(&served.sim),
        before,
        "no probe, no pass-through"
    );

    // Its next read is consistent as usual: it sees another client's write
    // made since, proven by the API server.
    let (_, theirs) = write_configmap(&served, "theirs");
    move_the_revision(&served, "after theirs");
    let (code, read) = get_as(&served.url, &path, "writer").await;
    assert_eq!(code, 200, "{read}");
    assert_eq!(read["metadata"]["resourceVersion"], theirs.to_string());
    assert_ne!(configmap_proofs(&served.sim), before, "proven upstream");
}

/// kubecache in front of the real kube-apiserver when `REAL_APISERVER_ENV`
/// names one (`kubecache_testkit::real_apiserver`: caching the tests'
/// namespace, listing as kubecache's own user), else in front of the sim
/// claiming 1.28 with ConsistentListFromCache and bookmarks on the
/// dispatch timer; `auto` lists either way. Under pod writes (about 100 a
/// second, made through the API as admin on both): a consistent GET of a
/// quiet config map and of a busy pod each see the write made just before
/// them, and a watch through kubecache gets exactly the events of the API
/// server's own watch from the same resourceVersion, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_real_or_simulated_server_reads_see_the_write_before_them_and_watches_every_event() {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::api::{Api, Patch, WatchEvent, WatchParams};
    use kubecache_testkit::real_apiserver::{self, NAMESPACE};

    let real = real_apiserver::from_env();
    real_apiserver::say_against("reads and watches under churn", real.as_ref());
    let resources = vec![
        ApiResource::pods(),
        resource("", "configmaps", "ConfigMap", true),
    ];
    let setup = Setup {
        resources,
        strategy: kubecache_reflector::Strategy::Auto,
        ..Setup::default()
    };
    // The cluster's admin, kubecache in front of it, and the namespace and
    // names to write.
    let (_sim, admin, front, ns, pod, configmap) = match &real {
        Some(real) => {
            real.ensure_pods().await;
            let admin = real.admin().await;
            let configmap = serde_json::from_value(json!({"metadata": {"name": "quiet"}}));
            let _ = Api::<ConfigMap>::namespaced(admin.clone(), NAMESPACE)
                .create(&Default::default(), &configmap.unwrap())
                .await;
            let upstream = real.kubecache_config().await;
            fn in_namespace(resource: ApiResource) -> kubecache_reflector::upstream::ResourceSpec {
                kubecache_reflector::upstream::ResourceSpec {
                    namespace: Some(NAMESPACE.into()),
                    ..kubecache_reflector::upstream::ResourceSpec::all(resource)
                }
            }
            let setup = Setup {
                spec: in_namespace,
                ..setup
            };
            let front = common::front(upstream, setup).await;
            (
                None,
                admin,
                front,
                NAMESPACE.to_string(),
                "pod-0".to_string(),
                "quiet".to_string(),
            )
        }
        None => {
            let sim = SimConfig {
                pods: 200,
                configmaps: 20,
                kube_version: kubecache_wire::protobuf::KubeVersion::new(28),
                consistent_list_from_cache: true,
                bookmark_dispatch: Some(kubecache_loadtest::sim::BOOKMARK_DISPATCH),
                ..SimConfig::default()
            };
            let (url, sim) = kubecache_loadtest::sim::Sim::start(sim).await.unwrap();
            let admin = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
            let front = common::front(kube::Config::new(url.parse().unwrap()), setup).await;
            let pod = sim.state(ids::PODS)[0].clone();
            let configmap = sim
                .state(ids::CONFIGMAPS)
                .into_iter()
                .find(|c| c.namespace == pod.namespace)
                .expect("a config map in the first pod's namespace");
            let names = (
                pod.namespace.clone(),
                pod.name.clone(),
                configmap.name.clone(),
            );
            (Some(sim), admin, front, names.0, names.1, names.2)
        }
    };
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(admin, &ns);
    let rv_of = |meta: &kube::api::ObjectMeta| -> u64 {
        meta.resource_version.as_ref().unwrap().parse().unwrap()
    };
    let current = async || -> u64 {
        let list = pods.list(&Default::default()).await.unwrap();
        list.metadata.resource_version.unwrap().parse().unwrap()
    };
    // The watches start after a write made now: both servers have listed
    // before it (a list's resourceVersion may be older than a watch cache
    // that has just started again).
    // (A value of this run's: a patch that changes nothing writes nothing
    // and answers the object's old resourceVersion.)
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let run = now.unwrap().as_nanos().to_string();
    let marked = Patch::Merge(json!({"metadata": {"labels": {"watched-from": run}}}));
    let from = rv_of(
        &pods
            .patch(&pod, &Default::default(), &marked)
            .await
            .unwrap()
            .metadata,
    );
    // Pod writes throughout: the global resourceVersion moves, config maps
    // stay quiet but for the test's own writes.
    let names: Vec<String> = match &real {
        Some(_) => (0..20).map(|i| format!("pod-{i}")).collect(),
        None => {
            let list = pods.list(&Default::default()).await.unwrap();
            list.items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .take(20)
                .collect()
        }
    };
    let writes = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = tokio::spawn({
        let (pods, writes) = (pods.clone(), writes.clone());
        async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(10));
            for i in 0u64.. {
                tick.tick().await;
                let patch = json!({"metadata": {"annotations": {"churn": i.to_string()}}});
                let name = &names[i as usize % names.len()];
                pods.patch(name, &Default::default(), &Patch::Merge(patch))
                    .await
                    .unwrap();
                writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    for step in 0..10 {
        for (plural, name) in [("configmaps", &configmap), ("pods", &pod)] {
            let patch = Patch::Merge(json!({"metadata": {"labels": {"step": step.to_string()}}}));
            let written = match plural {
                "configmaps" => rv_of(
                    &configmaps
                        .patch(name, &Default::default(), &patch)
                        .await
                        .unwrap()
                        .metadata,
                ),
                _ => rv_of(
                    &pods
                        .patch(name, &Default::default(), &patch)
                        .await
                        .unwrap()
                        .metadata,
                ),
            };
            let path = format!("/api/v1/namespaces/{ns}/{plural}/{name}");
            let (code, body) = get(&front.url, &path).await;
            assert_eq!(code, 200, "{path}: {}", String::from_utf8_lossy(&body));
            let (read, _) = resource_version(&body);
            assert!(
                read >= written,
                "{step}: {path} read at {read}, written at {written}"
            );
        }
    }
    kubecache_testkit::wait::until("200 pod writes", || {
        writes.load(std::sync::atomic::Ordering::Relaxed) >= 200
    })
    .await;
    writer.abort();
    let _ = writer.await;
    // The API server's own watch and kubecache's, from the same
    // resourceVersion, each read to the server's current one.
    let until = current().await;
    let through = kube::Client::try_from(kube::Config::new(front.url.parse().unwrap())).unwrap();
    let mut seen = Vec::new();
    for (who, api) in [
        ("the API server", pods.clone()),
        ("kubecache", Api::<Pod>::namespaced(through, &ns)),
    ] {
        let params = WatchParams::default().timeout(60);
        let mut stream = Box::pin(api.watch(&params, &from.to_string()).await.unwrap());
        let mut events = Vec::new();
        while events.last().is_none_or(|(_, _, rv)| *rv < until) {
            let event = futures::StreamExt::next(&mut stream)
                .await
                .expect("the watch goes on");
            let (kind, pod) = match event.unwrap() {
                WatchEvent::Added(p) => ("ADDED", p),
                WatchEvent::Modified(p) => ("MODIFIED", p),
                WatchEvent::Deleted(p) => ("DELETED", p),
                WatchEvent::Bookmark(_) => continue,
                WatchEvent::Error(e) => panic!("{who}'s watch from {from}: {e:?}"),
            };
            events.push((
                kind,
                pod.metadata.name.clone().unwrap(),
                rv_of(&pod.metadata),
            ));
        }
        seen.push(events);
    }
    assert!(
        seen[0].len() >= 200,
        "the writes were watched: {}",
        seen[0].len()
    );
    assert_eq!(seen[1], seen[0], "kubecache's watch is the API server's");
}
