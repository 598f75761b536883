//! The simulated API server authenticates and authorizes every request as
//! kube-apiserver does with RBAC (the demo policy, `sim::auth::demo`), lets
//! authorized callers impersonate, and answers TokenReviews and
//! SubjectAccessReviews, failing them on demand and recovering.

use crate::common;

use std::time::Duration;

use common::{OTHER_NAMESPACE, access_review, call, demo_sim, review, token, token_review};
use kubecache_loadtest::sim::auth::demo::{
    ADMIN, DEVELOPER, KUBECACHE, NAMESPACE, NOBODY, POD_READER,
};
use kubecache_loadtest::sim::{Fault, FaultSpec, FaultTarget, Policy};
use serde_json::{Value, json};

const JSON: &str = "application/json";

/// What a user may do, path by path: `(method, path, body, [admin,
/// kubecache, developer, pod reader, nobody, anonymous])`.
#[tokio::test(start_paused = true)]
async fn the_demo_policy_decides_every_user_verb_namespace_and_resource() {
    let (url, _sim) = demo_sim().await;
    let users = [ADMIN, KUBECACHE, DEVELOPER, POD_READER, NOBODY];
    let ns = NAMESPACE;
    let other = OTHER_NAMESPACE;
    let configmap =
        |name: &str| json!({"metadata": {"name": name}, "data": {"k": "v"}}).to_string();
    let watch = "?watch=1&timeoutSeconds=1";
    #[rustfmt::skip]
    let matrix: Vec<(&str, String, Option<String>, [u16; 6])> = vec![
        ("GET", "/api/v1/pods".into(), None, [200, 200, 403, 200, 403, 403]),
        ("GET", format!("/api/v1/pods{watch}"), None, [200, 200, 403, 200, 403, 403]),
        ("GET", format!("/api/v1/namespaces/{ns}/pods"), None, [200, 200, 200, 200, 403, 403]),
        ("GET", format!("/api/v1/namespaces/{ns}/pods{watch}"), None, [200, 200, 200, 200, 403, 403]),
        ("GET", format!("/api/v1/namespaces/{other}/pods"), None, [200, 200, 403, 200, 403, 403]),
        ("GET", format!("/api/v1/namespaces/{ns}/pods/web-0"), None, [200, 200, 200, 200, 403, 403]),
        ("GET", "/api/v1/pods?fieldSelector=metadata.name%3Dweb-0".into(), None, [200, 200, 403, 200, 403, 403]),
        ("GET", format!("/api/v1/namespaces/{ns}/pods/web-0/log?container=app"), None, [200, 200, 200, 200, 403, 403]),
        ("GET", format!("/api/v1/namespaces/{other}/pods/web-0/log?container=app"), None, [200, 200, 403, 200, 403, 403]),
        ("GET", format!("/api/v1/namespaces/{ns}/configmaps"), None, [200, 200, 200, 403, 403, 403]),
        ("GET", "/api/v1/configmaps".into(), None, [200, 200, 403, 403, 403, 403]),
        ("GET", format!("/apis/example.com/v1/namespaces/{ns}/widgets"), None, [200, 200, 200, 403, 403, 403]),
        ("GET", "/apis/example.com/v1/widgets".into(), None, [200, 200, 403, 403, 403, 403]),
        ("GET", "/api/v1/namespaces".into(), None, [200, 200, 403, 403, 403, 403]),
        ("GET", format!("/api/v1/namespaces/{ns}"), None, [200, 200, 403, 403, 403, 403]),
        ("POST", format!("/api/v1/namespaces/{ns}/configmaps"), Some(configmap("c-{user}")), [201, 403, 201, 403, 403, 403]),
        ("POST", format!("/api/v1/namespaces/{other}/configmaps"), Some(configmap("c-{user}")), [201, 403, 403, 403, 403, 403]),
        ("DELETE", format!("/api/v1/namespaces/{ns}/configmaps/c-{{user}}"), None, [200, 403, 200, 403, 403, 403]),
        ("GET", "/api".into(), None, [200, 200, 200, 200, 200, 403]),
        ("GET", "/apis/example.com/v1".into(), None, [200, 200, 200, 200, 200, 403]),
        ("GET", "/version".into(), None, [200, 200, 200, 200, 200, 200]),
        ("GET", "/metrics".into(), None, [404, 403, 403, 403, 403, 403]),
    ];
    let mut failures = Vec::new();
    for (method, path, body, want) in &matrix {
        for (i, user) in users.iter().map(Some).chain([None]).enumerate() {
            let name = user.copied().unwrap_or("anonymous");
            let short = name.rsplit(':').next().unwrap_or(name);
            let path = path.replace("{user}", short);
            let body = body.as_ref().map(|b| (JSON, b.replace("{user}", short)));
            let token = user.map(|u| token(u));
            let (code, answer) = call(&url, method, &path, token.as_deref(), body).await;
            if code != want[i] {
                failures.push(format!(
                    "{name} {method} {path}: {code}, want {}: {answer}",
                    want[i]
                ));
            }
            if code == 403 {
                assert_eq!(answer["reason"], "Forbidden", "{answer}");
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(start_paused = true)]
async fn denials_and_unknown_tokens_are_worded_as_kube_apiserver_words_them() {
    let (url, _sim) = demo_sim().await;
    let alice = token(DEVELOPER);
    let forbidden = |path: &str, method: &'static str, token: Option<String>| {
        let url = url.clone();
        let path = path.to_string();
        async move { call(&url, method, &path, token.as_deref(), None).await }
    };
    let (_, status) = forbidden("/api/v1/pods", "GET", Some(alice.clone())).await;
    assert_eq!(
        status["message"],
        r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope"#
    );
    assert_eq!(status["details"], json!({"kind": "pods"}));
    let (_, status) = forbidden(
        &format!("/api/v1/namespaces/{OTHER_NAMESPACE}/pods/web-0/log"),
        "GET",
        Some(alice.clone()),
    )
    .await;
    assert_eq!(
        status["message"],
        r#"pods "web-0" is forbidden: User "alice" cannot get resource "pods/log" in API group "" in the namespace "checkout-prod""#
    );
    assert_eq!(status["details"], json!({"name": "web-0", "kind": "pods"}));
    let (_, status) = forbidden(
        &format!("/apis/example.com/v1/namespaces/{OTHER_NAMESPACE}/widgets"),
        "DELETE",
        Some(alice.clone()),
    )
    .await;
    assert_eq!(
        status["message"],
        r#"widgets.example.com is forbidden: User "alice" cannot deletecollection resource "widgets" in API group "example.com" in the namespace "checkout-prod""#
    );
    assert_eq!(
        status["details"],
        json!({"group": "example.com", "kind": "widgets"})
    );
    let (_, status) = forbidden("/api", "GET", None).await;
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "forbidden: User \"system:anonymous\" cannot get path \"/api\"",
               "reason": "Forbidden", "details": {}, "code": 403})
    );
    let (code, status) = forbidden("/api/v1/pods", "GET", Some("not-a-token".into())).await;
    assert_eq!(code, 401);
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
}

async fn as_impersonator(
    url: &str,
    path: &str,
    token: &str,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .get(format!("{url}{path}"))
        .bearer_auth(token);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the sim answers");
    let code = response.status().as_u16();
    (code, response.json().await.expect("a JSON body"))
}

#[tokio::test(start_paused = true)]
async fn impersonation_needs_permission_and_runs_as_exactly_the_impersonated_user() {
    let (url, _sim) = demo_sim().await;
    let pods = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    let kubecache = token(KUBECACHE);
    let as_alice = [
        ("Impersonate-User", DEVELOPER),
        ("Impersonate-Group", "payments-devs"),
    ];
    let (code, _) = as_impersonator(&url, &pods, &kubecache, &as_alice).await;
    assert_eq!(
        code, 200,
        "alice, in her group, may list her namespace's pods"
    );
    let (code, status) = as_impersonator(&url, "/api/v1/pods", &kubecache, &as_alice).await;
    assert_eq!(code, 403, "but not every namespace's, though kubecache may");
    assert_eq!(
        status["message"],
        r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope"#
    );
    let (code, _) =
        as_impersonator(&url, &pods, &kubecache, &[("Impersonate-User", DEVELOPER)]).await;
    assert_eq!(code, 403, "an impersonated user has only the groups given");
    let with_extra = [
        ("Impersonate-User", DEVELOPER),
        ("Impersonate-Group", "payments-devs"),
        ("Impersonate-Uid", "uid-alice"),
        ("Impersonate-Extra-Scopes", "view"),
    ];
    let (code, _) = as_impersonator(&url, &pods, &kubecache, &with_extra).await;
    assert_eq!(code, 200, "kubecache may impersonate UIDs and extras");

    let (code, status) = as_impersonator(
        &url,
        &pods,
        &token(DEVELOPER),
        &[("Impersonate-User", POD_READER)],
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        r#"users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
    assert_eq!(status["details"], json!({"name": "bob", "kind": "users"}));
    // A group without a user: kube-apiserver's plain-text 500, no Status.
    let response = reqwest::Client::new()
        .get(format!("{url}{pods}"))
        .bearer_auth(&kubecache)
        .header("Impersonate-Group", "payments-devs")
        .send()
        .await
        .expect("the sim answers");
    assert_eq!(response.status().as_u16(), 500);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; charset=utf-8"
    );
    assert_eq!(
        response.text().await.unwrap(),
        "Internal Server Error: \"/api/v1/namespaces/payments-prod/pods\": requested [{Group  payments-devs    }] without impersonating a user\n"
    );
}

#[tokio::test(start_paused = true)]
async fn token_reviews_say_who_a_token_is() {
    let (url, _sim) = demo_sim().await;
    let kubecache = token(KUBECACHE);
    let (code, answer) = review(
        &url,
        "TokenReview",
        &kubecache,
        token_review(&token(DEVELOPER)),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        answer,
        json!({
            "kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "spec": {"token": "alice-token"},
            "status": {
                "authenticated": true,
                "user": {"username": "alice", "uid": "uid-alice", "groups": ["payments-devs", "system:authenticated"]},
                "audiences": ["https://kubernetes.default.svc.cluster.local"]
            }
        })
    );
    let (_, answer) = review(&url, "TokenReview", &kubecache, token_review(&kubecache)).await;
    assert_eq!(
        answer["status"]["user"]["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["kubecache-0"])
    );
    let (code, answer) = review(&url, "TokenReview", &kubecache, token_review("forged")).await;
    assert_eq!((code, &answer["status"]), (201, &json!({"user": {}})));
    let mut elsewhere = token_review(&token(DEVELOPER));
    elsewhere["spec"]["audiences"] = json!(["https://vault.example.com"]);
    let (_, answer) = review(&url, "TokenReview", &kubecache, elsewhere).await;
    assert_eq!(
        answer["status"],
        json!({"user": {}}),
        "a token for another audience"
    );
    let (code, answer) = review(&url, "TokenReview", &kubecache, token_review("")).await;
    assert_eq!(
        (code, answer["message"].as_str()),
        (
            400,
            Some("token is required for TokenReview in authentication")
        )
    );
    let (code, answer) = review(
        &url,
        "TokenReview",
        &token(NOBODY),
        token_review(&kubecache),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        answer["message"],
        r#"tokenreviews.authentication.k8s.io is forbidden: User "eve" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope"#
    );
}

#[tokio::test(start_paused = true)]
async fn subject_access_reviews_say_what_a_user_may_do() {
    let (url, sim) = demo_sim().await;
    let kubecache = token(KUBECACHE);
    let list_pods =
        |ns: &str| json!({"namespace": ns, "verb": "list", "version": "v1", "resource": "pods"});
    let alice = access_review(
        DEVELOPER,
        &["payments-devs", "system:authenticated"],
        list_pods(NAMESPACE),
    );
    let (code, answer) = review(&url, "SubjectAccessReview", &kubecache, alice.clone()).await;
    assert_eq!(code, 201);
    assert_eq!(answer["spec"], alice["spec"]);
    assert_eq!(
        answer["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"developers/payments-prod\" of Role \"developer\" to Group \"payments-devs\""})
    );
    let elsewhere = access_review(DEVELOPER, &["payments-devs"], list_pods(OTHER_NAMESPACE));
    let (_, answer) = review(&url, "SubjectAccessReview", &kubecache, elsewhere).await;
    assert_eq!(answer["status"], json!({"allowed": false}));
    let discovery = access_review(
        NOBODY,
        &["system:authenticated"],
        json!({"path": "/apis", "verb": "get"}),
    );
    let (_, answer) = review(&url, "SubjectAccessReview", &kubecache, discovery).await;
    assert_eq!(answer["status"]["allowed"], true);
    let (code, answer) = review(
        &url,
        "SubjectAccessReview",
        &kubecache,
        access_review("", &[], list_pods(NAMESPACE)),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        answer["message"],
        r#"SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least one of user or group must be specified"#
    );

    sim.set_policy(Some(
        Policy::demo().without_binding(Some(NAMESPACE), "developers"),
    ));
    let (_, answer) = review(&url, "SubjectAccessReview", &kubecache, alice).await;
    assert_eq!(
        answer["status"],
        json!({"allowed": false}),
        "a revoked binding takes effect at once"
    );
}

#[tokio::test(start_paused = true)]
async fn a_revoked_permission_is_refused_from_the_next_request() {
    let (url, sim) = demo_sim().await;
    let bob = token(POD_READER);
    assert_eq!(
        call(&url, "GET", "/api/v1/pods", Some(&bob), None).await.0,
        200
    );
    sim.set_policy(Some(Policy::demo().without_binding(None, "pod-readers")));
    assert_eq!(
        call(&url, "GET", "/api/v1/pods", Some(&bob), None).await.0,
        403
    );
    sim.set_policy(None);
    assert_eq!(
        call(&url, "GET", "/api/v1/pods", None, None).await.0,
        200,
        "no policy: open"
    );
}

#[tokio::test(start_paused = true)]
async fn review_outages_fail_and_recover_without_restart() {
    let (url, sim) = demo_sim().await;
    let kubecache = token(KUBECACHE);
    let alice = token_review(&token(DEVELOPER));
    let sar = access_review(
        DEVELOPER,
        &["payments-devs"],
        json!({"namespace": NAMESPACE, "verb": "get", "resource": "pods"}),
    );
    sim.inject(FaultSpec {
        target: FaultTarget::TokenReview,
        fault: Fault::ServiceUnavailable,
        times: u32::MAX,
    });
    sim.inject(FaultSpec {
        target: FaultTarget::SubjectAccessReview,
        fault: Fault::InternalError,
        times: u32::MAX,
    });
    for _ in 0..3 {
        let (code, answer) = review(&url, "TokenReview", &kubecache, alice.clone()).await;
        assert_eq!(
            (code, answer["reason"].as_str()),
            (503, Some("ServiceUnavailable"))
        );
        let (code, answer) = review(&url, "SubjectAccessReview", &kubecache, sar.clone()).await;
        assert_eq!(
            (code, answer["reason"].as_str()),
            (500, Some("InternalError"))
        );
    }
    assert_eq!(
        call(&url, "GET", "/api/v1/pods", Some(&kubecache), None)
            .await
            .0,
        200,
        "the server's own authentication is not the review API"
    );
    sim.clear_faults();
    assert_eq!(
        review(&url, "TokenReview", &kubecache, alice.clone())
            .await
            .0,
        201
    );
    assert_eq!(
        review(&url, "SubjectAccessReview", &kubecache, sar.clone())
            .await
            .0,
        201
    );

    sim.inject(FaultSpec {
        target: FaultTarget::TokenReview,
        fault: Fault::Hang,
        times: 1,
    });
    let hung = tokio::spawn({
        let (url, kubecache) = (url.clone(), kubecache.clone());
        async move { review(&url, "TokenReview", &kubecache, alice).await }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!hung.is_finished(), "a hung review waits");
    assert_eq!(
        review(&url, "SubjectAccessReview", &kubecache, sar).await.0,
        201,
        "alone"
    );
    sim.clear_faults();
    assert_eq!(
        hung.await.expect("the review returns").0,
        201,
        "and ends when cleared"
    );
}

#[tokio::test(start_paused = true)]
async fn a_kubeconfig_per_demo_user_works_with_kube_rs() {
    use k8s_openapi::api::core::v1::Pod;
    let (_url, sim) = demo_sim().await;
    let client = |user: &str| {
        let yaml = sim.kubeconfig_for(user).expect("a demo user");
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).expect("a kubeconfig");
        async move {
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .expect("a config");
            kube::Client::try_from(config).expect("a client")
        }
    };
    let alice = client(DEVELOPER).await;
    let mine = kube::Api::<Pod>::namespaced(alice.clone(), NAMESPACE);
    assert!(mine.list(&Default::default()).await.is_ok());
    let everyone = kube::Api::<Pod>::all(alice);
    match everyone.list(&Default::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403),
        other => panic!("alice listed every pod: {other:?}"),
    }
    assert_eq!(sim.kubeconfig_for("mallory"), None);
    let all = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig()).expect("a kubeconfig");
    assert_eq!(all.contexts.len(), 6, "a context per demo user");
    assert_eq!(all.current_context.as_deref(), Some(ADMIN));
}

#[tokio::test(start_paused = true)]
async fn kube_rs_asks_the_reviews_as_a_cache_would() {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    use kube::api::{Api, PostParams};
    let (_url, sim) = demo_sim().await;
    let yaml = sim
        .kubeconfig_for(KUBECACHE)
        .expect("kubecache is a demo user");
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a config");
    let client = kube::Client::try_from(config).expect("a client");
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token(DEVELOPER)),
            audiences: None,
        },
        ..TokenReview::default()
    };
    let answer = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("a TokenReview");
    let user = answer.status.and_then(|s| s.user).expect("a user");
    assert_eq!(user.username.as_deref(), Some(DEVELOPER));
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some("watch".into()),
                group: Some(String::new()),
                version: Some("v1".into()),
                resource: Some("pods".into()),
                namespace: Some(NAMESPACE.into()),
                ..ResourceAttributes::default()
            }),
            user: user.username,
            uid: user.uid,
            groups: user.groups,
            extra: user.extra,
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client)
        .create(&PostParams::default(), &review)
        .await
        .expect("a SubjectAccessReview");
    assert!(answer.status.expect("a status").allowed);
}
