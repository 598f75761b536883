//! Who is asking: the credential of every request, and the user it proves,
//! as kube-apiserver would see them.
//!
//! Requests kubecache answers from its caches are authenticated and
//! authorized here (a `TokenReview` and a `SubjectAccessReview` against the
//! API server). Requests it passes through are not: the API server judges
//! them itself, from the [`Credential`] forwarded on the caller's behalf.
//!
//! Answers are kept (see [`AuthSettings`]) and revoked when what they
//! depend on changes: kubecache watches RBAC's objects and ServiceAccounts
//! (see [`revocation`]); what nothing watched can revoke (static tokens,
//! webhooks, the Node authorizer) is kept no longer than the delegating
//! components of `k8s.io/apiserver` keep it, 10 s. Each connection recalls
//! the last answers it was given ([`Recall`]), served after the same
//! checks: a client repeating its request costs no shared-cache lookup and
//! no future to await.
//! When the API server cannot be asked, requests fail closed with a 503.
//! Answers not kept are asked within bounds (see [`budget`]): per client
//! address for unknown tokens and anonymous requests, per signed-in user
//! for the rest; beyond them a request gets 429.

mod attributes;
mod budget;
mod cache;
mod impersonation;
mod review;
pub mod revocation;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use futures::future::Either;
use kubecache_wire::Status;
use kubecache_wire::protobuf::KubeVersion;
use tokio::task::JoinHandle;

use crate::cacher::ClientKey;
use crate::error::ApiError;

pub use attributes::{Attributes, ResourceAttributes};
use budget::{Payer, Per};
pub use impersonation::Impersonation;
use review::{AccessRequest, Decision, ReviewError, Reviewer};
pub use review::{REVIEWS_AT_ONCE, Recall};

/// A user as the API server knows it (`authentication.k8s.io/v1`
/// `UserInfo`): what a `TokenReview` returns and a `SubjectAccessReview`
/// asks about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UserInfo {
    /// The user's name (`system:serviceaccount:ns:name` for service accounts).
    pub username: String,
    /// The user's UID, if the authenticator gives one.
    pub uid: String,
    /// The groups the user belongs to.
    pub groups: Vec<String>,
    /// Extra attributes (scopes, the service account's pod ...).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// An authenticated user, shared by every request that proves it, with the
/// digest of its `UserInfo` that keys its access decisions: a request
/// authorized from kept answers hashes 32 bytes, not the user's groups.
#[derive(Debug, PartialEq, Eq)]
pub struct User {
    info: UserInfo,
    digest: [u8; 32],
}

impl User {
    /// `info`, digested once.
    pub fn new(info: UserInfo) -> Arc<User> {
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        // Each string length-prefixed: no two users digest alike.
        let mut add = |text: &str| {
            context.update(&(text.len() as u64).to_le_bytes());
            context.update(text.as_bytes());
        };
        add(&info.username);
        add(&info.uid);
        add(&info.groups.len().to_string());
        info.groups.iter().for_each(|group| add(group));
        for (key, values) in &info.extra {
            add(key);
            add(&values.len().to_string());
            values.iter().for_each(|value| add(value));
        }
        let digest = sha256(context.finish());
        Arc::new(User { info, digest })
    }

    /// Whether this is [`User::anonymous`].
    pub fn is_anonymous(&self) -> bool {
        self.digest == *User::anonymous().digest()
    }

    /// `system:anonymous`, the user of a request without a credential.
    pub fn anonymous() -> Arc<User> {
        static ANONYMOUS: LazyLock<Arc<User>> = LazyLock::new(|| {
            User::new(UserInfo {
                username: "system:anonymous".into(),
                groups: vec!["system:unauthenticated".into()],
                ..UserInfo::default()
            })
        });
        ANONYMOUS.clone()
    }

    /// Who the user is.
    pub fn info(&self) -> &UserInfo {
        &self.info
    }

    /// The SHA-256 digest of [`User::info`].
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }

    /// The client that is this user, whatever its credential.
    pub(crate) fn client(&self) -> ClientKey {
        ClientKey::digested(self.digest())
    }
}

/// A bearer token, with its SHA-256 digest: what is kept about a token is
/// kept by its digest, so no raw token outlives its request, but for the
/// last one of a connection while it is open (see [`Recall`]).
/// Cheap to clone: a connection's requests share their token.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken {
    secret: Arc<str>,
    digest: [u8; 32],
}

impl BearerToken {
    /// `secret`, digested once.
    pub fn new(secret: &str) -> BearerToken {
        let digest = sha256(ring::digest::digest(
            &ring::digest::SHA256,
            secret.as_bytes(),
        ));
        BearerToken {
            secret: secret.into(),
            digest,
        }
    }

    /// Whether this token is `secret`, compared in constant time (but for
    /// its length): a connection may carry several clients' requests.
    fn is(&self, secret: &str) -> bool {
        subtle::ConstantTimeEq::ct_eq(self.secret.as_bytes(), secret.as_bytes()).into()
    }

    /// The token itself, for the `TokenReview`.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Its SHA-256 digest.
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }
}

/// Never the secret, in logs or panics.
impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

fn sha256(digest: ring::digest::Digest) -> [u8; 32] {
    digest.as_ref().try_into().expect("SHA-256 is 32 bytes")
}

/// The credential a request carries: what proves its user to kubecache, and
/// what pass-through presents to the API server on its behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A client certificate verified against the client CA: its user, read
    /// as kube-apiserver's x509 authenticator reads it (the subject's
    /// common name, its organizations as groups). Forwarded as
    /// impersonation of that user with kubecache's own credentials.
    Certificate(Arc<User>),
    /// A bearer token, checked with a `TokenReview`; forwarded as it came.
    Token(BearerToken),
    /// A client certificate that does not verify (why), and no bearer
    /// token: kube-apiserver answers 401, and so does kubecache, whether it
    /// would answer from a cache or pass through.
    FailedCertificate(Arc<str>),
    /// None: `system:anonymous` on the API server; forwarded without one.
    Anonymous,
}

/// What a request's connection tells of it, handed with every request by
/// the transport (see [`crate::transport::Answers`]; not as an extension:
/// a request's extensions are a map allocated for it). A request made
/// in-process has none.
#[derive(Debug, Clone)]
pub struct Connected {
    /// The client's address.
    pub peer: SocketAddr,
    /// What its client certificate proves: nothing when the client sent
    /// none, or sent a verified one without a common name (kube-apiserver
    /// ignores it).
    pub certificate: Option<PeerCertificate>,
    /// The answers the connection was last given.
    pub recall: Arc<Recall>,
}

/// What the client certificate of a request's connection proves, judged
/// for each request (see [`Connected`]).
#[derive(Debug, Clone)]
pub enum PeerCertificate {
    /// Verified against the client CA: the user it names.
    Verified(Arc<User>),
    /// Does not verify (expired, unknown CA, wrong key usage ...): why.
    Failed(Arc<str>),
}

impl Credential {
    /// The credential of a request, as kube-apiserver's authenticator chain
    /// reads it: a verified client certificate first, then a bearer token;
    /// a certificate that does not verify fails the request only when no
    /// token is there to authenticate it.
    fn read(connected: Option<&Connected>, bearer: Bearer<'_>) -> Credential {
        let certificate = connected.and_then(|c| c.certificate.as_ref());
        let recall = connected.map(|c| &*c.recall);
        match (certificate, bearer) {
            (Some(PeerCertificate::Verified(user)), _) => Credential::Certificate(user.clone()),
            (_, Bearer::Token(token)) => Credential::Token(match recall {
                Some(recall) => recall.bearer(&token),
                None => BearerToken::new(&token),
            }),
            (Some(PeerCertificate::Failed(why)), _) => Credential::FailedCertificate(why.clone()),
            (None, Bearer::None | Bearer::ExtraSpace) => Credential::Anonymous,
        }
    }

    /// The client of this credential, as the caches tell clients apart
    /// (read-your-writes, held pages); `None` for anonymous callers.
    pub(crate) fn client(&self) -> Option<ClientKey> {
        match self {
            Credential::Token(token) => Some(ClientKey::digested(token.digest())),
            Credential::Certificate(user) => Some(user.client()),
            Credential::FailedCertificate(_) | Credential::Anonymous => None,
        }
    }
}

/// Who a request comes from: the credential that proves its user, and
/// whom it asks to act as (see [`Impersonation`]).
#[derive(Debug, Clone)]
pub struct Caller {
    /// What proves the caller's own user.
    pub credential: Credential,
    /// The client's address, when it came over a socket: what bounds its
    /// reviews of unknown tokens.
    pub peer: Option<IpAddr>,
    /// kube-apiserver's `Warning` for its `Authorization` header, when it
    /// has two spaces or more after `Bearer` (which makes it anonymous) and
    /// no client certificate proves the user.
    pub warning: Option<HeaderValue>,
    /// Whom the caller asks to act as; `Err`: the plain-text 500
    /// kube-apiserver answers a request that impersonates parts without a
    /// user (its whole message, with the request's URI).
    pub impersonation: Result<Option<Impersonation>, String>,
    /// The answers its connection was last given, put on every request by
    /// the transport: none for a request made in-process.
    pub recall: Option<Arc<Recall>>,
}

impl Caller {
    /// The caller of the request of `parts` over `connected`.
    pub fn of(parts: &Parts, connected: Option<&Connected>) -> Caller {
        let impersonation = Impersonation::of(&parts.headers).map_err(|error| {
            let uri = parts.uri.path_and_query().map_or("", |p| p.as_str());
            format!(
                "Internal Server Error: {}: {error}",
                kubecache_wire::go_quote(uri)
            )
        });
        let bearer = bearer(&parts.headers);
        let warning = bearer.warning();
        let credential = Credential::read(connected, bearer);
        Caller {
            // kube-apiserver reads no bearer token once a client
            // certificate proves the user, and so warns of none.
            warning: warning.filter(|_| !matches!(credential, Credential::Certificate(_))),
            credential,
            peer: connected.map(|c| c.peer.ip()),
            impersonation,
            recall: connected.map(|c| c.recall.clone()),
        }
    }

    /// The client of this caller's credential (see [`Credential::client`]).
    pub(crate) fn client(&self) -> Option<ClientKey> {
        self.credential.client()
    }
}

/// What the `Authorization` header says of a bearer token.
#[derive(PartialEq, Eq)]
enum Bearer<'a> {
    /// No bearer token: no header, another scheme, no token after it.
    None,
    /// `Bearer` and two spaces or more: no token, with a warning.
    ExtraSpace,
    /// A token (of any bytes: one that is not UTF-8 never authenticates,
    /// and is read with its bytes replaced).
    Token(Cow<'a, str>),
}

impl Bearer<'_> {
    /// The `Warning` kube-apiserver adds to the answer of a request whose
    /// `Authorization` has two spaces or more after `Bearer` (which it then
    /// treats as anonymous).
    fn warning(&self) -> Option<HeaderValue> {
        (*self == Bearer::ExtraSpace).then(|| {
            HeaderValue::from_static(
                "299 - \"the provided Authorization header contains extra space before the bearer token, and is ignored\"",
            )
        })
    }
}

/// The bearer token of a request as kube-apiserver's bearer-token
/// authenticator reads it: the first `Authorization` header, trimmed, split
/// on single spaces into at most three parts; scheme `bearer` in any case,
/// then the token (the third part, `Bearer t extra`'s `extra`, is ignored).
/// `Bearer  t` is an empty token, and so no token (anonymous).
fn bearer(headers: &HeaderMap) -> Bearer<'_> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Bearer::None;
    };
    match std::str::from_utf8(value.as_bytes()) {
        Ok(value) => bearer_of(value),
        Err(_) => match bearer_of(&String::from_utf8_lossy(value.as_bytes())) {
            Bearer::Token(token) => Bearer::Token(Cow::Owned(token.into_owned())),
            Bearer::ExtraSpace => Bearer::ExtraSpace,
            Bearer::None => Bearer::None,
        },
    }
}

/// [`bearer`] of the header's `value`.
fn bearer_of(value: &str) -> Bearer<'_> {
    let mut parts = kubecache_wire::ascii::split(value.trim(), b' ');
    let (Some(scheme), Some(token)) = (parts.next(), parts.next()) else {
        return Bearer::None;
    };
    // A third part or more: as Go's `SplitN(.., 3)`, whose third is the rest.
    match (scheme.eq_ignore_ascii_case("bearer"), token, parts.next()) {
        (false, _, _) => Bearer::None,
        (true, "", Some(_)) => Bearer::ExtraSpace,
        (true, "", None) => Bearer::None,
        (true, token, _) => Bearer::Token(Cow::Borrowed(token)),
    }
}

/// How long review answers are kept, and how many.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    /// How long an allowed request or an authenticated token is kept when
    /// nothing kubecache watches can revoke it.
    pub allowed_ttl: Duration,
    /// How long a denied request or a rejected token is kept (a watched
    /// change of RBAC revokes denied requests sooner).
    pub denied_ttl: Duration,
    /// How long an answer a watched change revokes is kept at most: RBAC's
    /// allowances while kubecache follows RBAC, and `system:masters`'; at
    /// least `allowed_ttl` (the configuration sees to it).
    pub revocable_ttl: Duration,
    /// Most answers kept of each kind (tokens, access decisions).
    pub cache_entries: usize,
    /// Reviews of tokens not kept, and of anonymous requests not kept,
    /// each client address may ask for, per second (and in bursts of as
    /// many).
    pub token_reviews_per_second: f64,
    /// Reviews of requests not kept each signed-in user may ask for, per
    /// second, impersonation checks and requests as whom it impersonates
    /// included.
    pub user_reviews_per_second: f64,
    /// How many of those a user may ask for at once, after a pause.
    pub user_review_burst: usize,
}

impl AuthSettings {
    /// Ten seconds, as the delegating authenticators and authorizers of
    /// `k8s.io/apiserver` (aggregated API servers, metrics-server,
    /// kube-rbac-proxy) keep answers, and as kube-apiserver keeps a
    /// token's: a revoked static token or a webhook's changed mind is
    /// honoured within ten seconds.
    pub const DEFAULT_ALLOWED_TTL: Duration = Duration::from_secs(10);
    /// Ten seconds: a new grant nothing watched shows is honoured within
    /// ten seconds, while a client retrying a denied request costs one
    /// review per ten seconds.
    pub const DEFAULT_DENIED_TTL: Duration = Duration::from_secs(10);
    /// One minute: what a watched change revokes within a second is asked
    /// again after a minute all the same, in case a change was missed
    /// (a watch that could not be reopened at once).
    pub const DEFAULT_REVOCABLE_TTL: Duration = Duration::from_secs(60);
    /// Ten thousand answers of each kind: users × distinct requests of a
    /// large cluster's operators, a few MB at most.
    pub const DEFAULT_CACHE_ENTRIES: usize = 10_000;
    /// Ten new tokens per second and address: far more than a client with
    /// its own token, or a pod's containers starting, ever asks; a client
    /// sending a new random token each time costs the API server ten
    /// reviews a second, not one per request.
    pub const DEFAULT_TOKEN_REVIEWS_PER_SECOND: f64 = 10.0;
    /// Fifty new requests per second and user: what kubectl allows itself
    /// (50 per second) and more than a client-go client's default (5) or
    /// kube-controller-manager's (20), all of them new, so no client within
    /// its own rate limit meets this one; a tenant making up a namespace or
    /// a user to impersonate with each request costs the API server fifty
    /// reviews a second.
    pub const DEFAULT_USER_REVIEWS_PER_SECOND: f64 = 50.0;
    /// Five hundred: a user's first `kubectl get` over every namespace of a
    /// large cluster, or a controller's first reads of a few hundred
    /// objects, are reviewed at once.
    pub const DEFAULT_USER_REVIEW_BURST: usize = 500;
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            allowed_ttl: Self::DEFAULT_ALLOWED_TTL,
            denied_ttl: Self::DEFAULT_DENIED_TTL,
            revocable_ttl: Self::DEFAULT_REVOCABLE_TTL,
            cache_entries: Self::DEFAULT_CACHE_ENTRIES,
            token_reviews_per_second: Self::DEFAULT_TOKEN_REVIEWS_PER_SECOND,
            user_reviews_per_second: Self::DEFAULT_USER_REVIEWS_PER_SECOND,
            user_review_burst: Self::DEFAULT_USER_REVIEW_BURST,
        }
    }
}

/// How requests kubecache answers itself are authenticated and authorized.
#[derive(Debug)]
pub enum Auth {
    /// Not at all (`--auth=none`): anyone who reaches the port reads every
    /// cached object. For local runs and benchmarks.
    None,
    /// By the API server (`--auth=kubernetes`, the default).
    Kubernetes(Box<Reviewer>),
}

impl Auth {
    /// Reviews asked of the API server of `upstream` with its credentials:
    /// each at most [`Reviewer::TIMEOUT`], never retried (a request that
    /// cannot be judged fails at once, and its client retries).
    ///
    /// # Errors
    ///
    /// The client cannot be built from `upstream` (its TLS settings).
    pub fn kubernetes(
        upstream: &kube::Config,
        settings: AuthSettings,
    ) -> Result<Auth, kube::Error> {
        let mut config = upstream.clone();
        config.default_retry = false;
        let client = kube::Client::try_from(config)?;
        Ok(Auth::Kubernetes(Box::new(Reviewer::new(client, settings))))
    }

    /// `kubernetes` or `none`, as `--auth` spells it.
    pub fn mode(&self) -> &'static str {
        match self {
            Auth::None => "none",
            Auth::Kubernetes(_) => "kubernetes",
        }
    }

    /// Forgets every kept answer (on `SIGHUP`): a revoked token or
    /// permission stops being served at once, not within the allowed TTL.
    pub fn forget(&self) {
        if let Auth::Kubernetes(reviewer) = self {
            reviewer.forget();
            tracing::info!("forgot every kept authentication and authorization answer");
        }
    }

    /// Starts watching what revokes kept answers (see [`revocation`])
    /// through `client`, of an API server of Kubernetes `version`; the
    /// tasks end with the handles' abort. None with `--auth none`.
    pub fn follow(&self, client: &kube::Client, version: KubeVersion) -> Vec<JoinHandle<()>> {
        match self {
            Auth::None => Vec::new(),
            Auth::Kubernetes(reviewer) => reviewer.follow(client, version),
        }
    }

    /// What revokes kept answers, for `/v1/status`: whether every watch
    /// follows its resource, and the state of each. `None` with
    /// `--auth none`, or before [`Auth::follow`].
    pub fn followed(&self) -> Option<&revocation::Followed> {
        match self {
            Auth::None => None,
            Auth::Kubernetes(reviewer) => reviewer.followed(),
        }
    }

    /// Answers kept: `(tokens, access decisions)`.
    pub fn cached(&self) -> (usize, usize) {
        match self {
            Auth::None => (0, 0),
            Auth::Kubernetes(reviewer) => reviewer.cached(),
        }
    }

    /// Whether `caller` may do what `attributes` say, as kube-apiserver's
    /// filters decide: authentication, impersonation, authorization. The
    /// user allowed (the impersonated one, if any), `None` when nobody is
    /// asked (`--auth none`).
    ///
    /// # Errors
    ///
    /// What to answer: 401 for a token the API server rejects or a client
    /// certificate that does not verify, 403 (worded as kube-apiserver
    /// words it) for a denied impersonation or request, the plain-text 500
    /// of a malformed impersonation, 503 when the API server cannot be
    /// asked.
    pub fn authorize<'a>(
        &'a self,
        caller: &'a Caller,
        attributes: Attributes<'a>,
    ) -> Authorizing<'a> {
        let Auth::Kubernetes(reviewer) = self else {
            return Either::Left(std::future::ready(Ok(None)));
        };
        if let Some(user) = reviewer.recalled(caller, &attributes) {
            return Either::Left(std::future::ready(Ok(Some(user))));
        }
        // Boxed: a request its connection's recall allows awaits nothing,
        // and the future of every request through here stays small.
        Either::Right(Box::pin(authorize(reviewer, caller, attributes)))
    }

    /// The credential a request of `caller` is passed through with: a
    /// certificate caller who impersonates is checked here, then
    /// impersonated upstream as the user they become; any other goes as
    /// it came (the API server judges a bearer caller's impersonation).
    ///
    /// # Errors
    ///
    /// As [`Auth::authorize`]'s for the impersonation; a 403 with
    /// `--auth none`, where nobody can judge it.
    pub async fn forwarded(&self, caller: &Caller) -> Result<Credential, ApiError> {
        let (Credential::Certificate(_), Ok(Some(_)) | Err(_)) =
            (&caller.credential, &caller.impersonation)
        else {
            return Ok(caller.credential.clone());
        };
        let Auth::Kubernetes(reviewer) = self else {
            return Err(Status::failure(
                403,
                "Forbidden",
                "kubecache does not pass through impersonation by a client certificate with --auth none: nobody can check it",
            )
            .into());
        };
        Ok(Credential::Certificate(
            acting_user(reviewer, caller).await?.0,
        ))
    }
}

/// What [`Auth::authorize`] answers: at once, or once reviewed.
pub type Authorizing<'a> = Either<
    std::future::Ready<Result<Option<Arc<User>>, ApiError>>,
    futures::future::BoxFuture<'a, Result<Option<Arc<User>>, ApiError>>,
>;

/// [`Auth::authorize`] by `reviewer`, from its kept answers or its reviews.
async fn authorize(
    reviewer: &Reviewer,
    caller: &Caller,
    attributes: Attributes<'_>,
) -> Result<Option<Arc<User>>, ApiError> {
    let (user, payer) = acting_user(reviewer, caller).await.inspect_err(|error| {
        if let ApiError::Status(status) = error
            && status.code == 401
        {
            let request = attributes.describe();
            match &caller.credential {
                Credential::FailedCertificate(why) => tracing::debug!(%request, reason = %why, "unauthorized: the client certificate does not verify"),
                _ => tracing::debug!(%request, "unauthorized: the API server rejects the token"),
            }
        }
    })?;
    allow(reviewer, &user, attributes, payer, caller.recall.as_deref()).await?;
    Ok(Some(user))
}

/// The user `caller` acts as: its own, authenticated, or the one it
/// impersonates once each part of that is allowed; and who pays for the
/// reviews of what it asks (see [`payer`]).
async fn acting_user(reviewer: &Reviewer, caller: &Caller) -> Result<(Arc<User>, Payer), ApiError> {
    let user = match &caller.credential {
        Credential::Certificate(user) => user.clone(),
        Credential::Token(token) => match reviewer
            .authenticate(token, caller.peer, caller.recall.as_deref())
            .await
        {
            Ok(Some(user)) => user,
            Ok(None) => return Err(Status::unauthorized().into()),
            Err(error) => return Err(unanswered(&error).into()),
        },
        Credential::FailedCertificate(_) => return Err(Status::unauthorized().into()),
        Credential::Anonymous => User::anonymous(),
    };
    let payer = payer(&user, caller.peer);
    match &caller.impersonation {
        Ok(None) => Ok((user, payer)),
        Err(message) => Err(ApiError::InternalText(message.clone())),
        Ok(Some(impersonation)) => {
            for check in impersonation.checks() {
                // Not recalled: the connection's slot is for its own
                // requests, each of which makes all these checks.
                allow(reviewer, &user, Attributes::Resource(check), payer, None).await?;
            }
            Ok((User::new(impersonation.user()), payer))
        }
    }
}

/// Whose budget the reviews of `user`'s requests, from `peer`, come out
/// of: the user's own, but an anonymous caller's address (every anonymous
/// client is the same user).
fn payer(user: &User, peer: Option<IpAddr>) -> Payer {
    if user.is_anonymous() {
        peer.map_or(Payer::Nobody, Payer::Address)
    } else {
        Payer::User(*user.digest())
    }
}

/// Whether `user` may do what `attributes` say, reviewed within `payer`'s
/// budget, recalled by `recall`.
async fn allow(
    reviewer: &Reviewer,
    user: &Arc<User>,
    attributes: Attributes<'_>,
    payer: Payer,
    recall: Option<&Recall>,
) -> Result<(), Status> {
    let request = AccessRequest::new(user, attributes);
    match reviewer.authorize(user, &request, payer, recall).await {
        Ok(Decision::Allowed { .. }) => Ok(()),
        Ok(Decision::Denied(reason)) => {
            let (info, attributes) = (user.info(), request.attributes());
            tracing::debug!(user = %info.username, request = %attributes.describe(), "forbidden");
            Err(attributes.forbidden(info, &reason))
        }
        Err(error) => Err(unanswered(&error)),
    }
}

/// What a request without a review answer gets: 503 when the API server
/// cannot be asked (kubecache fails closed), 429 when its client's address
/// or its user has used up its reviews (with APF's words and
/// `Retry-After`, then kubecache's bound and the setting that sets it).
fn unanswered(error: &ReviewError) -> Status {
    match error {
        ReviewError::Failed(_) => {
            tracing::warn!(%error, "cannot review a request: refusing it");
            Status::service_unavailable(format!(
                "kubecache cannot check this request with the API server, so refuses it: {error}"
            ))
        }
        ReviewError::Refused { per, per_second } => {
            tracing::debug!(%error, "review refused");
            let bound = match per {
                Per::Address => format!(
                    "kubecache asks the API server to review at most {per_second} new tokens or anonymous requests per second from one client address (auth.tokenReviewsPerSecond)"
                ),
                Per::User => format!(
                    "kubecache asks the API server to review at most {per_second} requests per second of one user that it has no kept answer for, after a burst (auth.userReviewsPerSecond, auth.userReviewBurst)"
                ),
            };
            Status::failure(
                429,
                "TooManyRequests",
                format!("Too many requests, please try again later: {bound}"),
            )
            .retry_after(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_their_credentials_and_anonymous_is_no_one() {
        let token = |t: &str| Credential::Token(BearerToken::new(t)).client();
        assert_eq!(token("a"), token("a"));
        assert_ne!(token("a"), token("b"));
        let certificate = |name: &str| {
            Credential::Certificate(User::new(UserInfo {
                username: name.into(),
                ..UserInfo::default()
            }))
            .client()
        };
        assert_eq!(certificate("alice"), certificate("alice"));
        assert_ne!(certificate("a"), token("a"));
        assert_eq!(Credential::Anonymous.client(), None);
    }

    impl Credential {
        /// The credential of a request over a connection whose client
        /// certificate proves `certificate`, with `headers`.
        fn of(certificate: Option<PeerCertificate>, headers: &HeaderMap) -> Credential {
            let connected = connected(certificate);
            Credential::read(Some(&connected), bearer(headers))
        }
    }

    /// A connection whose client certificate proves `certificate`.
    fn connected(certificate: Option<PeerCertificate>) -> Connected {
        Connected {
            peer: SocketAddr::from(([127, 0, 0, 1], 40000)),
            certificate,
            recall: Arc::default(),
        }
    }

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, authorization.parse().unwrap());
        headers
    }

    #[test]
    fn a_bearer_token_as_kube_apiserver_reads_it() {
        let token = |t: &str| Credential::Token(BearerToken::new(t));
        let of = |value: &str| Credential::of(None, &headers(value));
        assert_eq!(of("Bearer abc"), token("abc"));
        assert_eq!(of("bearer abc "), token("abc"));
        assert_eq!(of("  BEARER abc"), token("abc"));
        assert_eq!(of("Bearer abc extra words"), token("abc"));
        for anonymous in ["Bearer  abc", "Bearer\tabc", "Bearer ", "Basic eDp5", "abc"] {
            assert_eq!(of(anonymous), Credential::Anonymous, "{anonymous:?}");
        }
        assert_eq!(
            Credential::of(None, &HeaderMap::new()),
            Credential::Anonymous
        );
        // Not ASCII: a token all the same, which the API server rejects.
        let mut latin1 = HeaderMap::new();
        latin1.insert(
            header::AUTHORIZATION,
            HeaderValue::from_bytes(b"Bearer t\xc3\xb6k").unwrap(),
        );
        assert_eq!(Credential::of(None, &latin1), token("tök"));
        // The first of two headers counts.
        let mut two = headers("Bearer first");
        two.append(header::AUTHORIZATION, "Bearer second".parse().unwrap());
        assert_eq!(Credential::of(None, &two), token("first"));
    }

    #[test]
    fn only_an_extra_space_before_the_token_is_warned_of() {
        assert!(bearer(&headers("Bearer  abc")).warning().is_some());
        for quiet in ["Bearer abc", "Bearer ", "Bearer\tabc", "Basic x"] {
            assert!(bearer(&headers(quiet)).warning().is_none(), "{quiet:?}");
        }
    }

    #[test]
    fn a_bearer_header_is_not_warned_of_once_a_certificate_proves_the_user() {
        let caller = |certificate: Option<PeerCertificate>| {
            let request = axum::http::Request::builder().header("authorization", "Bearer  abc");
            let connected = certificate.map(|certificate| connected(Some(certificate)));
            Caller::of(
                &request.body(()).unwrap().into_parts().0,
                connected.as_ref(),
            )
        };
        let alice = User::new(UserInfo {
            username: "alice".into(),
            ..UserInfo::default()
        });
        assert!(caller(None).warning.is_some());
        assert!(
            caller(Some(PeerCertificate::Failed("expired".into())))
                .warning
                .is_some()
        );
        assert!(
            caller(Some(PeerCertificate::Verified(alice)))
                .warning
                .is_none()
        );
    }

    #[test]
    fn a_verified_certificate_wins_over_a_token() {
        let user = User::new(UserInfo {
            username: "alice".into(),
            ..UserInfo::default()
        });
        assert_eq!(
            Credential::of(
                Some(PeerCertificate::Verified(user.clone())),
                &headers("Bearer abc")
            ),
            Credential::Certificate(user)
        );
    }

    #[test]
    fn a_failed_certificate_gives_way_to_a_token_and_fails_without_one() {
        let expired = || Some(PeerCertificate::Failed("expired".into()));
        assert_eq!(
            Credential::of(expired(), &headers("Bearer abc")),
            Credential::Token(BearerToken::new("abc"))
        );
        let failed = Credential::FailedCertificate("expired".into());
        for no_token in ["Bearer  abc", "Basic eDp5"] {
            assert_eq!(Credential::of(expired(), &headers(no_token)), failed);
        }
        assert_eq!(Credential::of(expired(), &HeaderMap::new()), failed);
        assert_eq!(failed.client(), None);
    }

    #[test]
    fn users_digest_alike_only_when_they_are_alike() {
        let user = |name: &str, groups: &[&str]| {
            User::new(UserInfo {
                username: name.into(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
                ..UserInfo::default()
            })
        };
        assert_eq!(user("a", &["b"]).digest(), user("a", &["b"]).digest());
        assert_ne!(user("a", &["b"]).digest(), user("ab", &[]).digest());
        assert_ne!(user("a", &["b", "c"]).digest(), user("a", &["bc"]).digest());
        assert_ne!(user("a", &[]).digest(), User::anonymous().digest());
    }

    #[test]
    fn a_token_never_shows_in_debug_output() {
        let shown = format!("{:?}", Credential::Token(BearerToken::new("s3cret")));
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}
