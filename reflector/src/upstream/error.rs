//! Every way talking to the API server can fail, and the one place that
//! decides what the reflector does about it.

use std::time::Duration;

use kubecache_wire::Status;

/// A failure while listing or watching.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// 410 Gone: the resourceVersion or continue token is older than the
    /// server's history (list, continue, or an ERROR event on a watch).
    #[error("410 Gone: {message}")]
    Gone {
        /// The Status message.
        message: String,
        /// For an expired continue token: the token that continues the list
        /// inconsistently at the current revision.
        continue_token: Option<String>,
    },
    /// 429: the server asks us to slow down.
    #[error("429 Too Many Requests (retry after {retry_after:?})")]
    TooManyRequests {
        /// The server's `Retry-After`, if it sent one.
        retry_after: Option<Duration>,
    },
    /// A 5xx answer.
    #[error("{code} from the API server: {message}")]
    Server {
        /// The HTTP code.
        code: u16,
        /// The Status message, or the body.
        message: String,
    },
    /// The server does not support streaming lists (422 on
    /// `sendInitialEvents`): `auto` falls back to `parallel`.
    #[error("streaming lists are not supported by this server: {0}")]
    StreamingUnsupported(String),
    /// Any other 4xx answer (401, 403, 404, 422 ...): a problem of
    /// configuration or permissions that a human may fix while we retry.
    #[error("{code} from the API server: {message}")]
    Client {
        /// The HTTP code.
        code: u16,
        /// The Status message, or the body.
        message: String,
    },
    /// The request could not be sent or the connection failed.
    #[error("connection failed: {0}")]
    Connect(String),
    /// A response or watch stream broke off (a dropped connection, a
    /// truncated body).
    #[error("stream broken: {0}")]
    Stream(String),
    /// A body or event that does not decode.
    #[error("undecodable {what}: {error}")]
    Decode {
        /// What was being decoded (e.g. `list page`, `event for ns/name`).
        what: String,
        /// The decoder's message.
        error: String,
    },
    /// More watch events arrived during the initial list than the buffer holds.
    #[error("the watch buffer overflowed ({limit} events) while the list was read")]
    BufferOverflow {
        /// The configured bound.
        limit: usize,
    },
    /// The reflector panicked while it listed or watched (e.g. in an
    /// [`ObjectFilter`](super::ObjectFilter), a user callback); the panic's
    /// message.
    #[error("the reflector panicked: {0}")]
    Panicked(String),
}

/// The request that failed: the same answer means different things in
/// different places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A page of a list that no watch covers: every page of `list-watch`,
    /// the first page of `parallel`.
    List,
    /// A later page of a parallel list: the watch opened at page 1's
    /// resourceVersion covers every change since.
    Continue,
    /// A streaming list, before its initial-events-end bookmark.
    StreamingList {
        /// Parallel lists may replace it (the strategy is `auto`).
        fallback: bool,
    },
    /// Opening or reading a watch, the one held during a parallel list
    /// included.
    Watch,
}

impl Phase {
    /// A short, bounded label for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::List => "list",
            Phase::Continue => "continue",
            Phase::StreamingList { .. } => "streaming_list",
            Phase::Watch => "watch",
        }
    }
}

/// What to do after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Our position in the history is lost: list again, diffing against the
    /// store.
    Relist,
    /// Nothing was lost: go on from where we were (reopen the watch at the
    /// last resourceVersion seen, or continue the list with the token the
    /// server gave).
    Resume,
    /// A transient failure: wait (at least this long, if the server said
    /// so), then retry.
    Backoff(Option<Duration>),
    /// The server has no streaming lists: list in parallel from now on.
    FallBack,
    /// A persistent failure that needs a human or a change elsewhere: the
    /// resource is not ready, with the error as the reason, and is listed
    /// again after a capped backoff until that succeeds.
    Fail,
}

impl UpstreamError {
    /// The one decision table of the reflector: what to do after `self`
    /// failed a request of `phase`.
    ///
    /// | failure | recovery | the store |
    /// |---|---|---|
    /// | 410 Gone on a continue page of a parallel list, with the server's inconsistent continue token | resume: continue at the current revision, the watch covers the difference | ready |
    /// | 410 Gone anywhere else (a watch, a streaming list, a list page) | relist | ready |
    /// | an undecodable body or event; the parallel list's buffer overflowed | relist: an event may be lost | ready |
    /// | a broken watch stream | resume from the last resourceVersion | ready |
    /// | a broken list page or streaming list | back off, list again | ready |
    /// | 429 | back off, at least `Retry-After` | ready |
    /// | 5xx, 408, connection failed | back off | ready |
    /// | 422 on `sendInitialEvents`, strategy `auto` | fall back to parallel lists, list at once | unchanged |
    /// | 422 on `sendInitialEvents`, strategy `streaming` | fail: the server has no streaming lists | not ready |
    /// | 401, 403, 404 (e.g. the CRD was deleted), any other 4xx | fail | not ready |
    /// | a panic inside the reflector (e.g. in an `ObjectFilter`) | fail | not ready |
    ///
    /// "Ready" keeps the store serving its last state, as it was (a store
    /// not ready yet stays so until its first list); every failure is
    /// retried. A failed list made no progress, so whatever the table
    /// says, the list that follows it waits for the backoff first: a list
    /// that keeps failing never spins. "Fail" marks the resource not ready
    /// until the first list that succeeds afterwards, backing off up to
    /// the backoff's cap (30 s) meanwhile, so that it recovers by itself
    /// once the permission is granted or the resource exists again.
    pub fn recovery(&self, phase: Phase) -> Recovery {
        match self {
            UpstreamError::Gone {
                continue_token: Some(_),
                ..
            } if phase == Phase::Continue => Recovery::Resume,
            UpstreamError::Gone { .. } => Recovery::Relist,
            // A decode failure may have lost an event: the only safe way on
            // is a fresh list. An overflowing buffer lost events by definition.
            UpstreamError::Decode { .. } | UpstreamError::BufferOverflow { .. } => Recovery::Relist,
            UpstreamError::Stream(_) if phase == Phase::Watch => Recovery::Resume,
            UpstreamError::Stream(_) => Recovery::Backoff(None),
            UpstreamError::TooManyRequests { retry_after } => Recovery::Backoff(*retry_after),
            // 408: the server gave up waiting for our request, not on us.
            UpstreamError::Server { .. }
            | UpstreamError::Client { code: 408, .. }
            | UpstreamError::Connect(_) => Recovery::Backoff(None),
            UpstreamError::StreamingUnsupported(_)
                if phase == (Phase::StreamingList { fallback: true }) =>
            {
                Recovery::FallBack
            }
            UpstreamError::StreamingUnsupported(_)
            | UpstreamError::Client { .. }
            | UpstreamError::Panicked(_) => Recovery::Fail,
        }
    }

    /// For [`Recovery::Resume`] of a continue page: the token that continues
    /// the list at the current revision.
    pub fn into_continue_token(self) -> Option<String> {
        match self {
            UpstreamError::Gone { continue_token, .. } => continue_token,
            _ => None,
        }
    }

    /// A short, bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            UpstreamError::Gone { .. } => "gone",
            UpstreamError::TooManyRequests { .. } => "throttled",
            UpstreamError::Server { .. } => "server_error",
            UpstreamError::StreamingUnsupported(_) => "streaming_unsupported",
            UpstreamError::Client { .. } => "client_error",
            UpstreamError::Connect(_) => "connect",
            UpstreamError::Stream(_) => "stream_broken",
            UpstreamError::Decode { .. } => "decode",
            UpstreamError::BufferOverflow { .. } => "buffer_overflow",
            UpstreamError::Panicked(_) => "panic",
        }
    }

    /// Classifies an error answer (status code, `Retry-After`, body).
    pub fn from_response(code: u16, retry_after: Option<Duration>, body: &[u8]) -> Self {
        match serde_json::from_slice::<Status>(body) {
            Ok(status) => {
                let mut error = Self::from_status(&status);
                if let UpstreamError::TooManyRequests { retry_after: r } = &mut error {
                    *r = retry_after.or(*r);
                }
                error
            }
            Err(_) => {
                let message = String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
                Self::from_status_parts(code, retry_after, message, None)
            }
        }
    }

    /// Classifies a Status carried by a watch ERROR event.
    pub fn from_status(status: &Status) -> Self {
        let retry_after = status
            .details
            .as_ref()
            .and_then(|d| d.retry_after_seconds)
            .map(|s| Duration::from_secs(u64::from(s)));
        let continue_token = status.metadata.continue_token.clone();
        Self::from_status_parts(
            status.code,
            retry_after,
            status.message.clone(),
            continue_token,
        )
    }

    fn from_status_parts(
        code: u16,
        retry_after: Option<Duration>,
        message: String,
        continue_token: Option<String>,
    ) -> Self {
        match code {
            410 => UpstreamError::Gone {
                message,
                continue_token,
            },
            429 => UpstreamError::TooManyRequests { retry_after },
            422 if message.contains("sendInitialEvents") => {
                UpstreamError::StreamingUnsupported(message)
            }
            500..=599 => UpstreamError::Server { code, message },
            _ => UpstreamError::Client { code, message },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: Phase = Phase::List;
    const CONTINUE: Phase = Phase::Continue;
    const STREAMING: Phase = Phase::StreamingList { fallback: false };
    const AUTO: Phase = Phase::StreamingList { fallback: true };
    const WATCH: Phase = Phase::Watch;

    fn gone(continue_token: Option<&str>) -> UpstreamError {
        UpstreamError::Gone {
            message: "too old".into(),
            continue_token: continue_token.map(String::from),
        }
    }

    fn client(code: u16) -> UpstreamError {
        UpstreamError::Client {
            code,
            message: "denied".into(),
        }
    }

    /// The table of [`UpstreamError::recovery`], row by row, in every phase.
    #[test]
    fn every_failure_maps_to_the_documented_recovery_in_every_phase() {
        use Recovery::{Backoff, Fail, FallBack, Relist, Resume};
        let three = Some(Duration::from_secs(3));
        let rows: Vec<(UpstreamError, [Recovery; 5])> = vec![
            (gone(Some("next")), [Relist, Resume, Relist, Relist, Relist]),
            (gone(None), [Relist; 5]),
            (
                UpstreamError::Decode {
                    what: "watch event".into(),
                    error: "eof".into(),
                },
                [Relist; 5],
            ),
            (UpstreamError::BufferOverflow { limit: 1 }, [Relist; 5]),
            (
                UpstreamError::Stream("eof".into()),
                [
                    Backoff(None),
                    Backoff(None),
                    Backoff(None),
                    Backoff(None),
                    Resume,
                ],
            ),
            (
                UpstreamError::TooManyRequests { retry_after: three },
                [Backoff(three); 5],
            ),
            (
                UpstreamError::Server {
                    code: 503,
                    message: "unavailable".into(),
                },
                [Backoff(None); 5],
            ),
            (client(408), [Backoff(None); 5]),
            (UpstreamError::Connect("refused".into()), [Backoff(None); 5]),
            (
                UpstreamError::StreamingUnsupported("WatchList".into()),
                [Fail, Fail, Fail, FallBack, Fail],
            ),
            (client(401), [Fail; 5]),
            (client(403), [Fail; 5]),
            (client(404), [Fail; 5]),
            (client(400), [Fail; 5]),
            (UpstreamError::Panicked("boom".into()), [Fail; 5]),
        ];
        for (error, want) in rows {
            let got = [LIST, CONTINUE, STREAMING, AUTO, WATCH].map(|phase| error.recovery(phase));
            assert_eq!(got, want, "{error:?}");
        }
    }

    #[test]
    fn answers_are_classified_by_code_and_status() {
        let mut expired = Status::expired("too old");
        expired.metadata.continue_token = Some("next".into());
        let expired_continue = UpstreamError::from_response(410, None, &expired.to_json());
        assert_eq!(expired_continue.recovery(CONTINUE), Recovery::Resume);
        assert_eq!(
            expired_continue.into_continue_token().as_deref(),
            Some("next")
        );
        let throttled = UpstreamError::from_response(429, Some(Duration::from_secs(3)), b"");
        assert_eq!(
            throttled.recovery(WATCH),
            Recovery::Backoff(Some(Duration::from_secs(3)))
        );
        assert_eq!(
            UpstreamError::from_response(503, None, b"oops").recovery(LIST),
            Recovery::Backoff(None)
        );
        let denied = Status::failure(
            403,
            "Forbidden",
            r#"pods is forbidden: User "x" cannot list resource "pods""#,
        );
        let forbidden = UpstreamError::from_response(403, None, &denied.to_json());
        assert_eq!(forbidden.recovery(LIST), Recovery::Fail);
        assert_eq!(
            forbidden.to_string(),
            r#"403 from the API server: pods is forbidden: User "x" cannot list resource "pods""#
        );
        let unsupported = UpstreamError::from_response(
            422,
            None,
            br#"{"message":"ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"}"#,
        );
        assert!(matches!(
            unsupported,
            UpstreamError::StreamingUnsupported(_)
        ));
    }
}
