//! Authentication and authorization by the API server: a `TokenReview` for
//! each bearer token and a `SubjectAccessReview` for each (user, request),
//! their answers kept in [`DecisionCache`]s (and revoked by what
//! [`Followed`] watches), those not kept asked within their
//! [`ReviewBudget`]s.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kubecache_wire::protobuf::KubeVersion;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::budget::{self, Payer, Per, ReviewBudget};
use super::cache::{DecisionCache, Keep, Slot, Source};
use super::revocation::{Followed, Revoke};
use super::{
    Attributes, AuthSettings, BearerToken, Caller, Credential, User, UserInfo, impersonation,
};

/// What the API server said about a token: its user, or not a valid one.
pub type Authenticated = Option<Arc<User>>;

/// A user's request, as its access decision is kept: the user by its digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AccessRequest {
    user: [u8; 32],
    attributes: Attributes<'static>,
}

impl AccessRequest {
    /// `user` asking for `attributes`.
    pub fn new(user: &User, attributes: Attributes<'_>) -> Self {
        AccessRequest {
            user: *user.digest(),
            attributes: attributes.into_owned(),
        }
    }

    /// Whether it is `user` asking for `attributes` (compared in place:
    /// building a request to compare clones the attributes' strings).
    fn is(&self, user: &User, attributes: &Attributes<'_>) -> bool {
        self.user == *user.digest() && self.attributes == *attributes
    }

    /// What is asked.
    pub fn attributes(&self) -> &Attributes<'static> {
        &self.attributes
    }
}

/// What the API server said about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; `by_rbac` when RBAC allowed it (its reason says so), so
    /// that only a change of RBAC objects can revoke it.
    Allowed {
        /// The reason begins with RBAC's `RBAC: allowed by`.
        by_rbac: bool,
    },
    /// Not allowed, with the authorizer's reason (may be empty).
    Denied(String),
}

/// Why a review has no answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReviewError {
    /// The API server could not be asked, or did not answer.
    #[error("{0}")]
    Failed(String),
    /// Not asked: the client's address (for unknown tokens and anonymous
    /// requests) or its user has used up its reviews (see
    /// [`ReviewBudget`]).
    #[error("more than {per_second} reviews per second from one {}", per.label())]
    Refused {
        /// Whose bound.
        per: Per,
        /// The bound.
        per_second: f64,
    },
}

/// The answers one connection was last given (see `cache::Slot`): the user of
/// its token and the decision on its request; and its last bearer token
/// with its digest, while the connection is open, so that the same token
/// again is told by a comparison (in constant time) rather than hashed: a
/// ServiceAccount token is a JWT of about a kilobyte, 16 SHA-256 blocks.
#[derive(Default)]
pub struct Recall {
    token: Slot<[u8; 32], Authenticated, (String, String)>,
    access: Slot<AccessRequest, Decision, String>,
    bearer: parking_lot::Mutex<Option<BearerToken>>,
}

impl Recall {
    /// `secret` as a [`BearerToken`]: the connection's last token again
    /// (neither digested nor copied) when it is that token, else a new one,
    /// which becomes the last. A stream that finds the last token held by
    /// another stream digests its own.
    pub(super) fn bearer(&self, secret: &str) -> BearerToken {
        let Some(mut last) = self.bearer.try_lock() else {
            return BearerToken::new(secret);
        };
        match &*last {
            Some(token) if token.is(secret) => token.clone(),
            _ => {
                let token = BearerToken::new(secret);
                *last = Some(token.clone());
                token
            }
        }
    }
}

impl std::fmt::Debug for Recall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recall(..)")
    }
}

/// The kept answers: users by token digest (under their ServiceAccount,
/// if they are one) and decisions by request (under its namespace).
pub struct KeptAnswers {
    tokens: DecisionCache<[u8; 32], Authenticated, (String, String)>,
    access: DecisionCache<AccessRequest, Decision, String>,
}

impl Revoke for KeptAnswers {
    fn access_in(&self, namespace: &str) {
        self.access.revoke(namespace.to_string());
    }

    fn all_access(&self) {
        self.access.revoke_all();
    }

    fn tokens_of(&self, namespace: &str, name: &str) {
        self.tokens
            .revoke((namespace.to_string(), name.to_string()));
    }

    fn all_tokens(&self) {
        self.tokens.revoke_all();
    }
}

/// Asks the API server, through kubecache's own client, and keeps answers.
pub struct Reviewer {
    client: kube::Client,
    settings: AuthSettings,
    kept: Arc<KeptAnswers>,
    /// The watches that revoke kept answers, once started.
    followed: OnceLock<Arc<Followed>>,
    addresses: ReviewBudget<IpAddr>,
    users: ReviewBudget<[u8; 32]>,
    decisions: OnceLock<Decisions>,
    /// Places of the reviews in flight.
    at_once: Semaphore,
}

/// Reviews sent at once: each holds one of kubecache's own connections to
/// the API server while in flight (a review takes milliseconds, so 128 at
/// once is thousands a second); one more waits for a place, within its
/// [`Reviewer::TIMEOUT`].
pub const REVIEWS_AT_ONCE: usize = 128;

impl std::fmt::Debug for Reviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Reviewer {
    /// Longest a review may take before the request fails closed.
    pub const TIMEOUT: Duration = Duration::from_secs(10);

    /// A reviewer asking through `client`.
    pub fn new(client: kube::Client, settings: AuthSettings) -> Self {
        let longest = settings
            .allowed_ttl
            .max(settings.denied_ttl)
            .max(settings.revocable_ttl);
        Reviewer {
            client,
            kept: Arc::new(KeptAnswers {
                tokens: DecisionCache::new(settings.cache_entries, longest),
                access: DecisionCache::new(settings.cache_entries, longest),
            }),
            followed: OnceLock::new(),
            addresses: ReviewBudget::new(
                settings.token_reviews_per_second,
                settings.token_reviews_per_second,
            ),
            users: ReviewBudget::new(
                settings.user_reviews_per_second,
                settings.user_review_burst as f64,
            ),
            decisions: OnceLock::new(),
            at_once: Semaphore::new(REVIEWS_AT_ONCE),
            settings,
        }
    }

    /// The user of `token`, or `None` if the API server does not know it,
    /// recalled by the asking connection's `recall` if it has one. A token
    /// not kept is reviewed only within the bound of `peer`, the client's
    /// address (if it came over a socket).
    ///
    /// # Errors
    ///
    /// The `TokenReview` failed, or was refused for `peer` (and so for
    /// every request waiting for the same token).
    pub async fn authenticate(
        &self,
        token: &BearerToken,
        peer: Option<IpAddr>,
        recall: Option<&Recall>,
    ) -> Result<Authenticated, ReviewError> {
        let keep = |user: &Authenticated| Keep {
            ttl: self.ttl(user.is_some()),
            stale_ttl: self.stale_ttl(user.is_some()),
            scope: user
                .as_ref()
                .and_then(|user| impersonation::service_account(&user.info().username)),
        };
        let review = move || async move {
            self.within_budget(peer.map_or(Payer::Nobody, Payer::Address))
                .await?;
            self.timed(Review::Token, self.token_review(token.secret()))
                .await
        };
        let (user, source) = self
            .kept
            .tokens
            .get_or_review(token.digest(), recall.map(|r| &r.token), keep, review)
            .await
            .inspect_err(|error| self.count(Review::Token, outcome(error), Source::Reviewed))?;
        let result = if user.is_some() {
            Outcome::Allowed
        } else {
            Outcome::Denied
        };
        self.count(Review::Token, result, source);
        Ok(user)
    }

    /// The user `caller` acts as, when its connection's recall holds the
    /// answers that allow it to do what `attributes` say, and they stand as
    /// kept ones would (see [`DecisionCache::recall`]): a client repeating
    /// its request is answered without a future to await. `None`: ask
    /// [`Reviewer::authenticate`] and [`Reviewer::authorize`] (also for
    /// impersonation, and for what is denied, to word the answer).
    pub fn recalled(&self, caller: &Caller, attributes: &Attributes<'_>) -> Option<Arc<User>> {
        let recall = caller.recall.as_deref()?;
        if !matches!(caller.impersonation, Ok(None)) {
            return None;
        }
        let (user, token) = match &caller.credential {
            Credential::Certificate(user) => (user.clone(), false),
            Credential::Token(token) => (
                self.kept
                    .tokens
                    .recall(&recall.token, |digest| digest == token.digest())??,
                true,
            ),
            Credential::Anonymous => (User::anonymous(), false),
            Credential::FailedCertificate(_) => return None,
        };
        let decision =
            (self.kept.access).recall(&recall.access, |request| request.is(&user, attributes))?;
        if !matches!(decision, Decision::Allowed { .. }) {
            return None;
        }
        if token {
            self.count(Review::Token, Outcome::Allowed, Source::Cached);
        }
        self.count(Review::Access, Outcome::Allowed, Source::Cached);
        Some(user)
    }

    /// Whether `user` may do what `request` asks (recalled by the asking
    /// connection's `recall`, if it has one). A request not kept is
    /// reviewed only within the bound of `payer` (the client's address for
    /// an anonymous caller, else the signed-in user who asks): each
    /// namespace, name or impersonated user a client makes up would
    /// otherwise cost the API server a review.
    ///
    /// # Errors
    ///
    /// The `SubjectAccessReview` failed, or was refused for `payer` (and so
    /// for every request waiting for the same answer).
    pub async fn authorize(
        &self,
        user: &User,
        request: &AccessRequest,
        payer: Payer,
        recall: Option<&Recall>,
    ) -> Result<Decision, ReviewError> {
        let keep = |decision: &Decision| Keep {
            ttl: self.decision_ttl(user, decision),
            stale_ttl: self.stale_ttl(matches!(decision, Decision::Allowed { .. })),
            scope: request.attributes().namespace().map(str::to_string),
        };
        let review = move || async move {
            self.within_budget(payer).await?;
            self.timed(
                Review::Access,
                self.access_review(user, request.attributes()),
            )
            .await
        };
        let (decision, source) = self
            .kept
            .access
            .get_or_review(request, recall.map(|r| &r.access), keep, review)
            .await
            .inspect_err(|error| self.count(Review::Access, outcome(error), Source::Reviewed))?;
        let result = match decision {
            Decision::Allowed { .. } => Outcome::Allowed,
            Decision::Denied(_) => Outcome::Denied,
        };
        self.count(Review::Access, result, source);
        Ok(decision)
    }

    /// Takes a review from `payer`'s budget; a refusal is counted into
    /// `kubecache_auth_reviews_refused_total`.
    async fn within_budget(&self, payer: Payer) -> Result<(), ReviewError> {
        let (taken, per, per_second) = match payer {
            Payer::Nobody => return Ok(()),
            Payer::Address(peer) => (
                self.addresses.take(budget::address(peer)).await,
                Per::Address,
                self.addresses.per_second(),
            ),
            Payer::User(user) => (
                self.users.take(user).await,
                Per::User,
                self.users.per_second(),
            ),
        };
        if taken {
            return Ok(());
        }
        metrics::counter!("kubecache_auth_reviews_refused_total", "budget" => per.label())
            .increment(1);
        Err(ReviewError::Refused { per, per_second })
    }

    /// Forgets every kept answer: the next request of each token and user
    /// is reviewed again.
    pub fn forget(&self) {
        self.kept.all_tokens();
        self.kept.all_access();
    }

    /// Keys held by each cache: `(tokens, access decisions)`.
    pub fn cached(&self) -> (usize, usize) {
        (self.kept.tokens.len(), self.kept.access.len())
    }

    /// Starts watching what revokes kept answers (see [`Followed`])
    /// through `client`, of an API server of Kubernetes `version`; the
    /// tasks that do it end with the returned handles' abort.
    pub fn follow(&self, client: &kube::Client, version: KubeVersion) -> Vec<JoinHandle<()>> {
        let (followed, tasks) = Followed::start(client, version, self.kept.clone());
        if self.followed.set(followed).is_err() {
            tasks.iter().for_each(JoinHandle::abort);
            return Vec::new();
        }
        tasks
    }

    /// The watches that revoke kept answers, once started.
    pub fn followed(&self) -> Option<&Followed> {
        self.followed.get().map(|f| &**f)
    }

    /// Counts a decision into `kubecache_auth_decisions_total`, through
    /// counters registered on first use (once the recorder is installed),
    /// so that a kept answer costs no registry lookup.
    fn count(&self, review: Review, result: Outcome, source: Source) {
        let decisions = self.decisions.get_or_init(|| {
            std::array::from_fn(|review| {
                std::array::from_fn(|result| {
                    std::array::from_fn(|cache| {
                        metrics::counter!(
                            "kubecache_auth_decisions_total",
                            "review" => ["token", "access"][review],
                            "result" => ["allowed", "denied", "error", "refused"][result],
                            "cache" => ["hit", "miss", "stale"][cache],
                        )
                    })
                })
            })
        });
        let cache = match source {
            Source::Cached => 0,
            Source::Reviewed => 1,
            Source::Stale => 2,
        };
        decisions[review as usize][result as usize][cache].increment(1);
    }

    /// How long an answer nothing watched revokes is kept.
    fn ttl(&self, allowed: bool) -> Duration {
        if allowed {
            self.settings.allowed_ttl
        } else {
            self.settings.denied_ttl
        }
    }

    /// How long an allowed answer may be served after its review while
    /// the API server cannot answer it again (a brownout longer than the
    /// TTL does not refuse every client whose answer expires in it): the
    /// revocable TTL. A denied one: its TTL.
    fn stale_ttl(&self, allowed: bool) -> Duration {
        if allowed {
            self.settings.revocable_ttl
        } else {
            self.settings.denied_ttl
        }
    }

    /// How long `decision` about a request of `user` is kept: RBAC's
    /// allowances, while kubecache follows RBAC, and the allowances of
    /// `system:masters` (which kube-apiserver grants by group, whatever
    /// RBAC says) until a watched change revokes them, at most the
    /// revocable TTL; the rest as long as answers nothing watched revokes.
    fn decision_ttl(&self, user: &User, decision: &Decision) -> Duration {
        let following = || self.followed().is_some_and(Followed::following);
        let revocable = match decision {
            Decision::Allowed { by_rbac } => {
                user.info().groups.iter().any(|g| g == MASTERS) || (*by_rbac && following())
            }
            Decision::Denied(_) => false,
        };
        if revocable {
            self.settings.revocable_ttl
        } else {
            self.ttl(matches!(decision, Decision::Allowed { .. }))
        }
    }

    async fn token_review(&self, token: &str) -> Result<Authenticated, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| ReviewError::Failed(format!("TokenReview: {e}")))?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        let user = status.user.unwrap_or_default();
        Ok(Some(User::new(UserInfo {
            username: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        })))
    }

    async fn access_review(
        &self,
        user: &User,
        attributes: &Attributes<'_>,
    ) -> Result<Decision, ReviewError> {
        let user = user.info();
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let (resource_attributes, non_resource_attributes) = match attributes {
            Attributes::Resource(r) => (
                Some(ResourceAttributes {
                    verb: Some(r.verb.to_string()),
                    group: Some(r.group.to_string()),
                    version: some(&r.version),
                    resource: some(&r.resource),
                    subresource: some(&r.subresource),
                    namespace: some(&r.namespace),
                    name: some(&r.name),
                    ..ResourceAttributes::default()
                }),
                None,
            ),
            Attributes::NonResource { verb, path } => (
                None,
                Some(NonResourceAttributes {
                    verb: Some(verb.to_string()),
                    path: Some(path.to_string()),
                }),
            ),
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                resource_attributes,
                non_resource_attributes,
                user: some(&user.username),
                uid: some(&user.uid),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            },
            ..SubjectAccessReview::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| ReviewError::Failed(format!("SubjectAccessReview: {e}")))?;
        let status = answer.status.unwrap_or_default();
        Ok(if status.allowed {
            Decision::Allowed {
                by_rbac: status
                    .reason
                    .is_some_and(|reason| reason.starts_with("RBAC: allowed by ")),
            }
        } else {
            Decision::Denied(status.reason.unwrap_or_default())
        })
    }
}

/// kube-apiserver's privileged group: allowed everything by its
/// authorizer chain's first authorizer, before RBAC is asked.
const MASTERS: &str = "system:masters";

/// The two reviews.
#[derive(Debug, Clone, Copy)]
enum Review {
    Token,
    Access,
}

/// A decision's result, as `kubecache_auth_decisions_total` labels it.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Allowed,
    Denied,
    Error,
    /// A review not asked (see [`ReviewBudget`]).
    Refused,
}

/// How a failed review counts.
fn outcome(error: &ReviewError) -> Outcome {
    match error {
        ReviewError::Failed(_) => Outcome::Error,
        ReviewError::Refused { .. } => Outcome::Refused,
    }
}

/// `kubecache_auth_decisions_total`'s counters by review, result and cache
/// (hit, miss, stale).
type Decisions = [[[metrics::Counter; 3]; 4]; 2];

impl Reviewer {
    /// Sends a review when one of [`REVIEWS_AT_ONCE`] is free, bounded by
    /// [`Reviewer::TIMEOUT`] with the wait, and times it into
    /// `kubecache_auth_review_duration_seconds`.
    async fn timed<T>(
        &self,
        review: Review,
        call: impl Future<Output = Result<T, ReviewError>>,
    ) -> Result<T, ReviewError> {
        let review = match review {
            Review::Token => "token",
            Review::Access => "access",
        };
        let started = Instant::now();
        let sent = async {
            let _place = self.at_once.acquire().await;
            call.await
        };
        let answer = tokio::time::timeout(Reviewer::TIMEOUT, sent)
            .await
            .unwrap_or_else(|_| {
                Err(ReviewError::Failed(format!(
                    "no answer to a {review} review within {:?}",
                    Reviewer::TIMEOUT
                )))
            });
        metrics::histogram!("kubecache_auth_review_duration_seconds", "review" => review)
            .record(started.elapsed().as_secs_f64());
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_connection_tells_its_last_token_again_and_any_other_apart() {
        let recall = Recall::default();
        for secret in ["a", "a", "b", "a", "ab", "ab", "b"] {
            assert_eq!(
                recall.bearer(secret),
                BearerToken::new(secret),
                "{secret:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn reviews_beyond_those_at_once_wait_for_a_place() {
        let arrived = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(tokio::sync::Notify::new());
        let service = {
            let (arrived, release) = (arrived.clone(), release.clone());
            tower::service_fn(move |_: http::Request<kube::client::Body>| {
                let (arrived, release) = (arrived.clone(), release.clone());
                async move {
                    let released = release.notified();
                    arrived.fetch_add(1, Ordering::SeqCst);
                    released.await;
                    let review = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":true,"user":{"username":"alice"}}}"#;
                    Ok::<_, Infallible>(http::Response::new(kube::client::Body::from(
                        review.as_bytes().to_vec(),
                    )))
                }
            })
        };
        let reviewer = Arc::new(Reviewer::new(
            kube::Client::new(service, "default"),
            AuthSettings::default(),
        ));
        let asked = REVIEWS_AT_ONCE + 10;
        let reviews: Vec<_> = (0..asked)
            .map(|i| {
                let reviewer = reviewer.clone();
                tokio::spawn(async move {
                    let token = crate::auth::BearerToken::new(&format!("token-{i}"));
                    reviewer.authenticate(&token, None, None).await
                })
            })
            .collect();
        // Every task has run as far as it can before the clock moves.
        tokio::time::sleep(Reviewer::TIMEOUT / 10).await;
        assert_eq!(arrived.load(Ordering::SeqCst), REVIEWS_AT_ONCE);
        while arrived.load(Ordering::SeqCst) < asked {
            release.notify_waiters();
            tokio::task::yield_now().await;
        }
        release.notify_waiters();
        for review in reviews {
            let user = review.await.unwrap().unwrap().expect("authenticated");
            assert_eq!(user.info().username, "alice");
        }
    }
}
