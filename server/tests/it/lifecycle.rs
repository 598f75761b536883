//! What kubecache says about a resource whose reflector fails or stops:
//! `/readyz`, `/v1/status`, `/metrics` and `/livez`, against the simulated
//! API server.

use crate::common;
use common::{Setup, get, serve};
use std::time::Duration;

use kubecache_loadtest::sim::{Fault, FaultSpec, FaultTarget};
use serde_json::Value;

/// kube-apiserver's answer to a service account without `watch` on pods.
const FORBIDDEN_WATCH: &str = r#"403 from the API server: pods is forbidden: User "system:serviceaccount:kubecache:kubecache" cannot watch resource "pods" in API group "" at the cluster scope"#;

async fn pods_status(url: &str) -> Value {
    let (code, body) = get(url, "/v1/pods/status").await;
    assert_eq!(code, 200);
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_403_makes_the_resource_not_ready_everywhere_until_access_is_granted_and_a_stopped_reflector_fails_livez()
 {
    let mut served = serve(Setup::default()).await;
    let pods = served.caches.by_name("pods").unwrap().clone();
    let mut status = pods.status.clone();
    served.sim.inject(FaultSpec {
        target: FaultTarget::Any,
        fault: Fault::Forbidden,
        times: u32::MAX,
    });
    served.sim.cut_watches();
    status.wait_for(|s| s.phase == "failing").await.unwrap();

    let (code, body) = get(&served.url, "/readyz").await;
    assert_eq!(code, 503);
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.contains(&format!("[-]cache pods failed: {FORBIDDEN_WATCH}\n")),
        "{body}"
    );
    let failing = pods_status(&served.url).await;
    assert_eq!(failing["ready"], false);
    assert_eq!(failing["notReadyReason"], FORBIDDEN_WATCH);
    assert_eq!(failing["phase"], "failing");
    let (_, metrics) = get(&served.url, "/metrics").await;
    let metrics = String::from_utf8_lossy(&metrics);
    for series in [
        r#"kubecache_ready{resource="pods"} 0"#,
        r#"kubecache_reflector_phase{resource="pods",phase="failing"} 1"#,
        r#"kubecache_reflector_phase{resource="pods",phase="watching"} 0"#,
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }
    let (code, _) = get(&served.url, "/livez").await;
    assert_eq!(code, 200, "a failing reflector is alive: it retries");

    served.sim.clear_faults();
    tokio::time::timeout(Duration::from_secs(60), pods.reader.ready())
        .await
        .expect("ready within a minute of access being granted")
        .expect("store open");
    let (code, _) = get(&served.url, "/readyz").await;
    assert_eq!(code, 200);
    let recovered = pods_status(&served.url).await;
    assert_eq!(recovered["ready"], true);
    assert_eq!(recovered["notReadyReason"], Value::Null);

    served.stop_reflectors().await;
    let (code, body) = get(&served.url, "/livez").await;
    assert_eq!(code, 503);
    assert!(String::from_utf8_lossy(&body).contains("[-]reflector pods failed: it stopped"));
    let stopped = pods_status(&served.url).await;
    assert_eq!(stopped["notReadyReason"], "the reflector stopped");
}
