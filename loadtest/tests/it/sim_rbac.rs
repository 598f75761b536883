//! The sim's RBAC objects and ServiceAccounts are its policy: served,
//! listed, watched and written like any resource (the demo policy's roles,
//! bindings and service accounts among them), and each change decides the
//! very next request, TokenReview and SubjectAccessReview.

use crate::common;

use common::{access_review, call, demo_sim, review, token, token_review, watch_events};
use kubecache_loadtest::sim::auth::demo::{
    ADMIN, DEPLOYER, DEPLOYER_UID, DEVELOPER, KUBECACHE, NAMESPACE, NOBODY,
};
use kubecache_loadtest::sim::{Policy, Sim, SimConfig, ids};
use kubecache_testkit::kubectl::{self, Kubectl};
use serde_json::{Value, json};

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

async fn admin(url: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let body = body.map(|b| ("application/json", b.to_string()));
    call(url, method, path, Some(&token(ADMIN)), body).await
}

/// The names of a list's items.
fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn pods_of(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods")
}

#[tokio::test(start_paused = true)]
async fn a_role_binding_deleted_over_http_is_watched_going_and_refuses_the_next_request() {
    let (url, sim) = demo_sim().await;
    let alice = token(DEVELOPER);
    let pods = pods_of(NAMESPACE);
    assert_eq!(call(&url, "GET", &pods, Some(&alice), None).await.0, 200);
    let bindings = format!("{RBAC}/namespaces/{NAMESPACE}/rolebindings");
    let from = sim.store().revision();
    let watch = tokio::spawn({
        let (url, path) = (
            url.clone(),
            format!("{bindings}?watch=1&resourceVersion={from}"),
        );
        async move { watch_events(&url, &path, &token(ADMIN), 1).await }
    });

    let (code, status) = admin(&url, "DELETE", &format!("{bindings}/developers"), None).await;
    assert_eq!(
        (code, &status["status"]),
        (200, &json!("Success")),
        "{status}"
    );
    let (code, refused) = call(&url, "GET", &pods, Some(&alice), None).await;
    assert_eq!(code, 403, "{refused}");
    let alice_lists = access_review(
        DEVELOPER,
        &["payments-devs", "system:authenticated"],
        json!({"namespace": NAMESPACE, "verb": "list", "resource": "pods"}),
    );
    let (_, answer) = review(&url, "SubjectAccessReview", &token(KUBECACHE), alice_lists).await;
    assert_eq!(answer["status"], json!({"allowed": false}));

    let events = watch.await.unwrap();
    assert_eq!(events[0]["type"], "DELETED");
    let deleted = &events[0]["object"];
    assert_eq!(
        (&deleted["kind"], &deleted["metadata"]["name"]),
        (&json!("RoleBinding"), &json!("developers"))
    );
    assert_eq!(
        deleted["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "developer"})
    );
    assert_eq!(
        deleted["subjects"],
        json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "payments-devs"}])
    );
}

#[tokio::test(start_paused = true)]
async fn a_service_account_token_is_refused_once_its_service_account_is_deleted() {
    let (url, sim) = demo_sim().await;
    let deployer = token(DEPLOYER);
    let pods = pods_of(NAMESPACE);
    assert_eq!(call(&url, "GET", &pods, Some(&deployer), None).await.0, 200);
    let (_, answer) = review(
        &url,
        "TokenReview",
        &token(KUBECACHE),
        token_review(&deployer),
    )
    .await;
    assert_eq!(
        answer["status"]["user"],
        json!({
            "username": DEPLOYER, "uid": DEPLOYER_UID,
            "groups": ["system:serviceaccounts", "system:serviceaccounts:payments-prod", "system:authenticated"],
        })
    );
    let account = format!("/api/v1/namespaces/{NAMESPACE}/serviceaccounts/deployer");
    let (code, stored) = admin(&url, "GET", &account, None).await;
    assert_eq!(
        (code, &stored["metadata"]["uid"]),
        (200, &json!(DEPLOYER_UID))
    );

    let (code, deleted) = admin(&url, "DELETE", &account, None).await;
    assert_eq!(
        (code, &deleted["kind"]),
        (200, &json!("ServiceAccount")),
        "{deleted}"
    );
    let (code, refused) = call(&url, "GET", &pods, Some(&deployer), None).await;
    assert_eq!((code, &refused["reason"]), (401, &json!("Unauthorized")));
    let (code, answer) = review(
        &url,
        "TokenReview",
        &token(KUBECACHE),
        token_review(&deployer),
    )
    .await;
    assert_eq!((code, &answer["status"]), (201, &json!({"user": {}})));

    // Created again, it has another uid: the token's is gone for good.
    let again = json!({"metadata": {"name": "deployer"}});
    let (code, created) = admin(
        &url,
        "POST",
        &format!("/api/v1/namespaces/{NAMESPACE}/serviceaccounts"),
        Some(again),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_ne!(created["metadata"]["uid"], DEPLOYER_UID);
    assert_eq!(call(&url, "GET", &pods, Some(&deployer), None).await.0, 401);

    // The policy set again stores its own: the token is back.
    sim.set_policy(Some(Policy::demo()));
    assert_eq!(call(&url, "GET", &pods, Some(&deployer), None).await.0, 200);
    // And in-process, as a test of kubecache deletes it.
    sim.delete_object(ids::SERVICEACCOUNTS, NAMESPACE, "deployer")
        .unwrap();
    assert_eq!(call(&url, "GET", &pods, Some(&deployer), None).await.0, 401);
}

#[tokio::test(start_paused = true)]
async fn cluster_roles_and_bindings_listed_are_the_policy_s() {
    let (url, sim) = demo_sim().await;
    let policy = Policy::demo();
    let sorted = |names: Vec<&String>| {
        let mut names: Vec<String> = names.into_iter().cloned().collect();
        names.sort();
        names
    };
    let cluster_roles = sorted(
        policy
            .roles
            .iter()
            .filter(|r| r.namespace.is_none())
            .map(|r| &r.name)
            .collect(),
    );
    let cluster_bindings = |policy: &Policy| {
        sorted(
            policy
                .bindings
                .iter()
                .filter(|b| b.namespace.is_none())
                .map(|b| &b.name)
                .collect(),
        )
    };
    let (code, list) = admin(&url, "GET", &format!("{RBAC}/clusterroles"), None).await;
    assert_eq!((code, &list["kind"]), (200, &json!("ClusterRoleList")));
    assert_eq!(names(&list), cluster_roles);
    assert!(cluster_roles.contains(&"cluster-admin".to_string()));
    let (code, list) = admin(&url, "GET", &format!("{RBAC}/clusterrolebindings"), None).await;
    assert_eq!(
        (code, &list["kind"]),
        (200, &json!("ClusterRoleBindingList"))
    );
    assert_eq!(names(&list), cluster_bindings(&policy));
    let readers = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["metadata"]["name"] == "pod-readers")
        .unwrap();
    assert_eq!(
        (&readers["roleRef"], &readers["subjects"]),
        (
            &json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"}),
            &json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}])
        )
    );
    let (_, accounts) = admin(&url, "GET", "/api/v1/serviceaccounts", None).await;
    assert_eq!(names(&accounts), ["kubecache", "deployer"], "by namespace");

    // A policy set again replaces them.
    let fewer = Policy::demo().without_binding(None, "pod-readers");
    sim.set_policy(Some(fewer.clone()));
    let (_, list) = admin(&url, "GET", &format!("{RBAC}/clusterrolebindings"), None).await;
    assert_eq!(names(&list), cluster_bindings(&fewer));
    assert!(!names(&list).contains(&"pod-readers".to_string()));
    sim.set_policy(None);
    let (code, list) = call(&url, "GET", &format!("{RBAC}/clusterroles"), None, None).await;
    assert_eq!(
        (code, names(&list)),
        (200, Vec::<String>::new()),
        "none: open, and empty"
    );
}

#[tokio::test(start_paused = true)]
async fn role_bindings_and_roles_written_over_http_decide_the_next_request() {
    let (url, _sim) = demo_sim().await;
    let eve = token(NOBODY);
    let pods = pods_of(NAMESPACE);
    assert_eq!(call(&url, "GET", &pods, Some(&eve), None).await.0, 403);
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "eve-reads"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NOBODY}],
    });
    let bindings = format!("{RBAC}/namespaces/{NAMESPACE}/rolebindings");
    let (code, created) = admin(&url, "POST", &bindings, Some(binding)).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(call(&url, "GET", &pods, Some(&eve), None).await.0, 200);
    let eve_lists = access_review(
        NOBODY,
        &["system:authenticated"],
        json!({"namespace": NAMESPACE, "verb": "list", "resource": "pods"}),
    );
    let (_, answer) = review(&url, "SubjectAccessReview", &token(KUBECACHE), eve_lists).await;
    assert_eq!(
        answer["status"]["reason"],
        r#"RBAC: allowed by RoleBinding "eve-reads/payments-prod" of ClusterRole "pod-reader" to User "eve""#
    );

    // The role it refers to, patched to read config maps only.
    let patch =
        json!({"rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"]}]});
    let (code, patched) = call(
        &url,
        "PATCH",
        &format!("{RBAC}/clusterroles/pod-reader"),
        Some(&token(ADMIN)),
        Some(("application/merge-patch+json", patch.to_string())),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(call(&url, "GET", &pods, Some(&eve), None).await.0, 403);
    let configmaps = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    assert_eq!(
        call(&url, "GET", &configmaps, Some(&eve), None).await.0,
        200
    );
    // Gone, it names its missing role as the reason of a denial.
    let (code, _) = admin(
        &url,
        "DELETE",
        &format!("{RBAC}/clusterroles/pod-reader"),
        None,
    )
    .await;
    assert_eq!(code, 200);
    let (code, refused) = call(&url, "GET", &configmaps, Some(&eve), None).await;
    assert_eq!(code, 403);
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .ends_with(r#": RBAC: clusterrole.rbac.authorization.k8s.io "pod-reader" not found"#),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_lists_and_deletes_rbac_objects_and_service_accounts() {
    // kubectl sends no token over plain HTTP: a sim without a policy.
    if !kubectl::available() {
        return;
    }
    let (_url, sim) = Sim::start(SimConfig {
        namespaces: 4,
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let dir = std::env::temp_dir().join(format!("kubecache-sim-rbac-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig()).unwrap();
    let kubectl = Kubectl::with(kubeconfig, dir.join("cache"));
    let ns = ["-n", NAMESPACE];
    for create in [
        &["create", "serviceaccount", "deployer", ns[0], ns[1]][..],
        &[
            "create",
            "clusterrole",
            "reader",
            "--verb=get,list",
            "--resource=pods",
        ],
        &[
            "create",
            "rolebinding",
            "readers",
            "--clusterrole=reader",
            "--serviceaccount=payments-prod:deployer",
            ns[0],
            ns[1],
        ],
    ] {
        kubectl.ok(create).await;
    }
    let listed = kubectl
        .ok(&[
            "get",
            "sa,rolebindings,clusterroles",
            "-o",
            "name",
            ns[0],
            ns[1],
        ])
        .await;
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        [
            "serviceaccount/deployer",
            "rolebinding.rbac.authorization.k8s.io/readers",
            "clusterrole.rbac.authorization.k8s.io/reader",
        ]
    );
    let binding = &sim.state(ids::ROLEBINDINGS)[0].to_value();
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "deployer", "namespace": "payments-prod"}])
    );
    kubectl
        .ok(&["delete", "rolebinding", "readers", ns[0], ns[1]])
        .await;
    kubectl
        .ok(&["delete", "sa", "deployer", ns[0], ns[1]])
        .await;
    assert!(sim.state(ids::ROLEBINDINGS).is_empty());
    assert!(sim.state(ids::SERVICEACCOUNTS).is_empty());
    std::fs::remove_dir_all(&dir).ok();
}
