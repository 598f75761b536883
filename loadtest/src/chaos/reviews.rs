//! The reviews the simulated API server is asked in each phase (its
//! `GET /sim/reviews`): what kubecache's authentication costs the API
//! server while clients churn tokens and reviews stall.

use serde::Serialize;

use crate::sim::Reviews;

/// Reviews per second of a phase.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewRates {
    /// `TokenReview`s per second.
    pub token_reviews: f64,
    /// `SubjectAccessReview`s per second.
    pub subject_access_reviews: f64,
}

/// Reads the simulated API server's review counts.
pub struct Counter {
    url: String,
    client: reqwest::Client,
}

impl Counter {
    /// The counts of the simulated API server at `upstream`.
    pub fn new(upstream: &str) -> Self {
        Counter {
            url: format!("{upstream}/sim/reviews"),
            client: reqwest::Client::new(),
        }
    }

    /// The counts now; `None` when the upstream does not say (not the sim).
    pub async fn count(&self) -> Option<Reviews> {
        let response = self.client.get(&self.url).send().await.ok()?;
        response.error_for_status().ok()?.json().await.ok()
    }

    /// The rates since `before` was counted, `secs` ago.
    pub async fn rate_since(&self, before: Option<Reviews>, secs: f64) -> Option<ReviewRates> {
        let (before, now) = (before?, self.count().await?);
        let rate = |before: u64, now: u64| now.saturating_sub(before) as f64 / secs.max(1e-3);
        Some(ReviewRates {
            token_reviews: rate(before.token_reviews, now.token_reviews),
            subject_access_reviews: rate(before.subject_access_reviews, now.subject_access_reviews),
        })
    }
}
