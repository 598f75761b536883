//! Before the after phase: kubecache's reflector may still be backing off
//! from the last upstream fault (client-go's backoff, up to 30 s after a
//! streak of failures), and a phase started then would measure that wait,
//! not how kubecache serves once alone. So the run waits until kubecache
//! follows the API server again: its reflector of the resource watching
//! (`/v1/{resource}/status`) and a consistent read answered.

use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::run::Scenario;
use crate::tls::ClientTls;

/// The longest wait: past client-go's 30 s backoff ceiling.
const BOUND: Duration = Duration::from_secs(60);

#[derive(Deserialize)]
struct Status {
    phase: String,
}

/// Waits until kubecache at `load.url` follows the API server; how long it
/// took (`None`: the server is not kubecache, or it did not within
/// [`BOUND`], which the after phase then shows).
pub async fn wait(load: &Scenario, tls: &ClientTls) -> Option<Duration> {
    let client = tls.http().timeout(Duration::from_secs(10)).build().ok()?;
    let get = |url: String| {
        let request = client.get(url);
        match &load.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    };
    let status = format!("{}/v1/{}/status", load.url, resource(&load.path)?);
    let consistent = format!("{}{}?limit=1", load.url, load.path);
    let started = Instant::now();
    while started.elapsed() < BOUND {
        let response = get(status.clone()).send().await.ok()?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return None;
        }
        let watching = response
            .json::<Status>()
            .await
            .is_ok_and(|s| s.phase == "watching");
        if watching
            && get(consistent.clone())
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The resource of a collection path as kubecache's query API names it:
/// `/api/v1/pods` is `pods`, `/apis/apps/v1/deployments` is
/// `deployments.apps`.
fn resource(path: &str) -> Option<String> {
    match path.trim_matches('/').split('/').collect::<Vec<_>>()[..] {
        ["api", _, plural] => Some(plural.to_string()),
        ["apis", group, _, plural] => Some(format!("{plural}.{group}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::resource;

    #[test]
    fn a_collection_path_names_its_resource_as_the_query_api_does() {
        assert_eq!(resource("/api/v1/pods").as_deref(), Some("pods"));
        assert_eq!(
            resource("/apis/apps/v1/deployments").as_deref(),
            Some("deployments.apps")
        );
        assert_eq!(resource("/api/v1/namespaces/a/pods"), None);
    }
}
