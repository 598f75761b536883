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
    /// configuration or permissions that may be fixed while we wait.
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
}

/// What to do after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// List again (diffing against the store): our position in the history is lost.
    Relist,
    /// Watch again from the last resourceVersion seen: nothing was lost.
    Resume,
    /// Wait (at least this long, if the server said so), then retry the same step.
    Backoff(Option<Duration>),
}

impl UpstreamError {
    /// The one decision table of the reflector.
    pub fn recovery(&self) -> Recovery {
        match self {
            UpstreamError::Gone { .. } => Recovery::Relist,
            // A decode failure may have lost an event: the only safe way on
            // is a fresh list. An overflowing buffer lost events by definition.
            UpstreamError::Decode { .. } | UpstreamError::BufferOverflow { .. } => Recovery::Relist,
            UpstreamError::Stream(_) => Recovery::Resume,
            UpstreamError::TooManyRequests { retry_after } => Recovery::Backoff(*retry_after),
            UpstreamError::Server { .. }
            | UpstreamError::Client { .. }
            | UpstreamError::Connect(_)
            | UpstreamError::StreamingUnsupported(_) => Recovery::Backoff(None),
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

    #[test]
    fn each_failure_maps_to_one_recovery() {
        let gone = UpstreamError::from_response(
            410,
            None,
            br#"{"kind":"Status","message":"too old","code":410}"#,
        );
        assert_eq!(gone.recovery(), Recovery::Relist);
        let throttled = UpstreamError::from_response(429, Some(Duration::from_secs(3)), b"");
        assert_eq!(
            throttled.recovery(),
            Recovery::Backoff(Some(Duration::from_secs(3)))
        );
        assert_eq!(
            UpstreamError::from_response(503, None, b"oops").recovery(),
            Recovery::Backoff(None)
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
        assert_eq!(
            UpstreamError::Stream("eof".into()).recovery(),
            Recovery::Resume
        );
    }
}
