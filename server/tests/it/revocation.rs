//! Kept review answers follow the cluster (issue 39): a change of RBAC or
//! of a ServiceAccount on the sim revokes, as soon as kubecache's watch
//! delivers it, what it affects, and nothing else.
//!
//! The TTLs are an hour here, so that only a revocation can change an
//! answer: each refusal below is waited for (a condition, not a clock),
//! and would never come from a TTL within the wait's bound.

use crate::common;

use std::time::Duration;

use common::{Served, Setup, get_as};
use kubecache_loadtest::sim::auth::demo::NAMESPACE;
use kubecache_loadtest::sim::{Policy, SimConfig, Subject};
use kubecache_reflector::upstream::ApiResource;
use kubecache_server::auth::AuthSettings;
use kubecache_testkit::wait::until_async;
use serde_json::json;

const HOUR: Duration = Duration::from_secs(3600);

async fn served(policy: Policy) -> Served {
    common::serve(Setup {
        sim: SimConfig {
            pods: 60,
            namespaces: 3,
            policy: Some(policy),
            ..SimConfig::default()
        },
        resources: vec![ApiResource::pods()],
        auth: Some(AuthSettings {
            allowed_ttl: HOUR,
            denied_ttl: HOUR,
            revocable_ttl: HOUR,
            ..AuthSettings::default()
        }),
        ..Setup::default()
    })
    .await
}

/// Sends `method` `path` (with a JSON `body`) to the sim as its admin.
async fn on_sim(served: &Served, method: &str, path: &str, body: Option<serde_json::Value>) -> u16 {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", "Bearer admin-token")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.map_or_else(Vec::new, |b| b.to_string().into_bytes()),
        )))
        .unwrap();
    common::send(served.sim.url(), request).await.0
}

/// The code kubecache answers `path` with, as `token`.
async fn code(served: &Served, path: &str, token: &str) -> u16 {
    get_as(&served.url, path, token).await.0
}

/// Waits until kubecache answers `path` as `token` with `code`, and says
/// how long that took.
async fn until_code(served: &Served, path: &str, token: &str, want: u16) -> Duration {
    let started = tokio::time::Instant::now();
    let what = format!("{path} as {token} answers {want}");
    until_async(&what, async || code(served, path, token).await == want).await;
    started.elapsed()
}

/// A service account of `policy` with a token other than kubecache's: its
/// path on the API server, and its token.
fn service_account(policy: &Policy) -> (String, String) {
    let user = policy
        .users
        .iter()
        .find(|u| u.name.starts_with("system:serviceaccount:") && u.token != "kubecache-token")
        .expect("the demo has a service account with a token");
    let (namespace, name) = user
        .name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .unwrap();
    let path = format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}");
    (path, user.token.clone())
}

/// The RoleBinding of the demo that lets `group` read in `NAMESPACE`.
fn binding_of(group: &str) -> String {
    Policy::demo()
        .bindings
        .into_iter()
        .find(|b| {
            b.namespace.as_deref() == Some(NAMESPACE)
                && b.subjects.contains(&Subject::Group(group.into()))
        })
        .map(|b| b.name)
        .expect("the demo binds the group in its namespace")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_binding_a_new_one_and_a_deleted_service_account_take_effect_once_watched() {
    let policy = Policy::demo();
    let (account, token) = service_account(&policy);
    let served = served(policy).await;
    served.following().await;
    // From the cache as it is: a consistent read would also wait for the
    // cache to catch up with the sim's writes to RBAC.
    let pods = format!("/api/v1/namespaces/{NAMESPACE}/pods?resourceVersion=0");
    assert_eq!(code(&served, &pods, "alice-token").await, 200);
    assert_eq!(code(&served, &pods, "eve-token").await, 403);
    assert_eq!(code(&served, &pods, &token).await, 200);

    // alice's team loses its binding: refused, though allowed answers are
    // kept an hour.
    let binding = binding_of("payments-devs");
    let rbac = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings");
    assert_eq!(
        on_sim(&served, "DELETE", &format!("{rbac}/{binding}"), None).await,
        200
    );
    let took = until_code(&served, &pods, "alice-token", 403).await;
    eprintln!("a removed RoleBinding refused {took:?} after its deletion on the sim");

    // eve gets one: allowed, though denied answers are kept an hour.
    let grant = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "eve-reads", "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "eve"}],
    });
    assert_eq!(on_sim(&served, "POST", &rbac, Some(grant)).await, 201);
    let took = until_code(&served, &pods, "eve-token", 200).await;
    eprintln!("a new RoleBinding honoured {took:?} after its creation on the sim");

    // The service account is deleted: its token is refused, though
    // authenticated tokens are kept an hour.
    assert_eq!(on_sim(&served, "DELETE", &account, None).await, 200);
    let took = until_code(&served, &pods, &token, 401).await;
    eprintln!("a deleted ServiceAccount's token refused {took:?} after its deletion on the sim");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_in_a_namespace_costs_one_review_per_kept_request_of_it_and_none_elsewhere() {
    let served = served(Policy::demo()).await;
    served.following().await;
    let pods = served
        .sim
        .state(kubecache_loadtest::sim::resources::ids::PODS);
    let in_namespace: Vec<String> = pods
        .iter()
        .filter(|p| p.namespace == NAMESPACE)
        .take(5)
        .map(|p| format!("/api/v1/namespaces/{NAMESPACE}/pods/{}", p.name))
        .collect();
    let elsewhere: Vec<String> = pods
        .iter()
        .filter(|p| p.namespace != NAMESPACE)
        .take(5)
        .map(|p| format!("/api/v1/namespaces/{}/pods/{}", p.namespace, p.name))
        .collect();
    assert_eq!((in_namespace.len(), elsewhere.len()), (5, 5));
    let read_all = async || {
        for path in in_namespace.iter().chain(&elsewhere) {
            assert_eq!(code(&served, path, "admin-token").await, 200, "{path}");
        }
    };
    read_all().await;
    let reviews = || served.sim.reviews().subject_access_reviews;
    let kept = reviews();
    read_all().await;
    assert_eq!(reviews(), kept, "every answer kept");

    // A Role of the namespace changes: its five requests are asked again,
    // once each; the others stay kept.
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "a-new-role", "namespace": NAMESPACE},
        "rules": [],
    });
    let roles = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles");
    assert_eq!(on_sim(&served, "POST", &roles, Some(role)).await, 201);
    served.revoked_by("roles", 1).await;
    read_all().await;
    read_all().await;
    assert_eq!(
        reviews(),
        kept + 5,
        "one review per request of the namespace"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_right_to_watch_rbac_answers_are_kept_for_the_ttls_and_status_says_so() {
    let mut policy = Policy::demo();
    // kubecache's role reads nothing of RBAC or ServiceAccounts.
    for role in &mut policy.roles {
        if role.name == "kubecache" {
            for rule in &mut role.rules {
                if rule.resources == ["*"] {
                    rule.resources = vec!["pods".into(), "namespaces".into()];
                    rule.api_groups = vec![String::new()];
                }
            }
        }
    }
    let served = served(policy).await;
    let status =
        async || get_as(&served.url, "/v1/status", "admin-token").await.1["authRevocation"].clone();
    until_async("every watch refused", async || {
        let status = status().await;
        let watches = status["watches"].as_object().cloned().unwrap_or_default();
        watches.len() == 5
            && watches
                .values()
                .all(|w| w["state"].as_str().is_some_and(|w| w.contains("403")))
    })
    .await;
    assert_eq!(status().await["following"], false);
    assert!(!served.is_following());
}

/// A connection recalls the answers it was last given (a client repeating
/// its read is not looked up again): a revocation reaches them all the
/// same. Over one keep-alive connection, alice's repeated read is refused
/// once her team's binding goes, and the service account's once it is
/// deleted, each without a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_reaches_what_a_connection_recalls() {
    let policy = Policy::demo();
    let (account, token) = service_account(&policy);
    let served = served(policy).await;
    served.following().await;
    let pods = format!("/api/v1/namespaces/{NAMESPACE}/pods?resourceVersion=0");
    let request = |token: &str| {
        http::Request::get(&pods)
            .header("authorization", format!("Bearer {token}"))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap()
    };
    // One connection for each client, kept alive throughout.
    let mut alice = common::open(&served.url, &mut request("alice-token")).await;
    let mut robot = common::open(&served.url, &mut request(&token)).await;
    let host = served.url.trim_start_matches("http://").to_string();
    let send = async |sender: &mut hyper::client::conn::http1::SendRequest<_>, token: &str| {
        let mut request = request(token);
        request
            .headers_mut()
            .insert(http::header::HOST, host.parse().unwrap());
        sender.ready().await.unwrap();
        let response = sender.send_request(request).await.unwrap();
        let code = response.status().as_u16();
        http_body_util::BodyExt::collect(response.into_body())
            .await
            .unwrap();
        code
    };
    for _ in 0..3 {
        assert_eq!(send(&mut alice, "alice-token").await, 200);
        assert_eq!(send(&mut robot, &token).await, 200);
    }

    let binding = binding_of("payments-devs");
    let rbac = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings");
    assert_eq!(
        on_sim(&served, "DELETE", &format!("{rbac}/{binding}"), None).await,
        200
    );
    until_async("alice's connection is refused", async || {
        send(&mut alice, "alice-token").await == 403
    })
    .await;

    assert_eq!(on_sim(&served, "DELETE", &account, None).await, 200);
    until_async("the service account's connection is refused", async || {
        send(&mut robot, &token).await == 401
    })
    .await;
}
