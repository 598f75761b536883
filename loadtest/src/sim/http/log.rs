//! `GET pods/{name}/log`: what a container wrote, made up but
//! deterministic: ten lines per container (`line N of C in NS/POD`, the
//! N-th dated N seconds after the pod started), then, with `follow=true`,
//! one more every second until the client goes away or the pod is
//! deleted. `container` picks the container (required when the pod has
//! several, as kube-apiserver requires it), `tailLines` keeps the last
//! lines, `timestamps=true` prefixes each with its RFC 3339 time. Every
//! pod has logs, whatever its phase; `previous`, `sinceSeconds`,
//! `sinceTime` and `limitBytes` are ignored.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use chrono::{DateTime, TimeDelta, Utc};
use kubecache_wire::{Status, StatusCause, StatusDetails};
use serde_json::Value;

use super::params::integer;
use super::{Call, status_response};
use crate::sim::store::key_of;

/// Lines a container has written when its log is read.
const LINES: u64 = 10;

/// How often a followed container writes a line.
const EVERY: Duration = Duration::from_secs(1);

/// One container's log.
#[derive(Debug, Clone)]
struct Log {
    namespace: String,
    pod: String,
    container: String,
    started: DateTime<Utc>,
    timestamps: bool,
}

impl Log {
    fn line(&self, n: u64) -> String {
        let text = format!(
            "line {} of {} in {}/{}\n",
            n + 1,
            self.container,
            self.namespace,
            self.pod
        );
        if !self.timestamps {
            return text;
        }
        let at = self.started + TimeDelta::seconds(n as i64);
        format!("{} {text}", at.format("%Y-%m-%dT%H:%M:%S%.9fZ"))
    }
}

impl Call<'_> {
    /// The log of one of the pod's containers.
    pub fn log(&self) -> Response {
        match self.open_log() {
            Ok(response) => response,
            Err(status) => status_response(&status, self.wire),
        }
    }

    fn open_log(&self) -> Result<Response, Status> {
        let pod = self.pod()?;
        let container = container(&pod, self.param("container"))?;
        let tail = match self.param("tailLines") {
            None => LINES,
            Some(value) => {
                let tail = integer(Some(&value))?;
                if tail < 0 {
                    return Err(invalid_tail(self.name(), tail));
                }
                (tail as u64).min(LINES)
            }
        };
        let flag = |key: &str| {
            self.param(key)
                .is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
        };
        let text = |path: &str| {
            pod.pointer(path)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let started = [
            text("/status/startTime"),
            text("/metadata/creationTimestamp"),
        ]
        .iter()
        .find_map(|t| DateTime::parse_from_rfc3339(t).ok())
        .map_or_else(Utc::now, |t| t.with_timezone(&Utc));
        let log = Log {
            namespace: self.namespace().to_string(),
            pod: self.name().to_string(),
            container,
            started,
            timestamps: flag("timestamps"),
        };
        let written: String = (LINES - tail..LINES).map(|n| log.line(n)).collect();
        let body = if flag("follow") {
            let store = self.ctx.store.clone();
            let (resource, key) = (self.target.resource, key_of(&log.namespace, &log.pod));
            let uid = text("/metadata/uid").to_string();
            let more = futures::stream::unfold(LINES, move |n| {
                let (store, key, uid, log) = (store.clone(), key.clone(), uid.clone(), log.clone());
                async move {
                    tokio::time::sleep(EVERY).await;
                    let alive = store.get(resource, &key).is_some_and(|pod| {
                        pod.to_value().pointer("/metadata/uid") == Some(&Value::from(uid))
                    });
                    alive.then(|| (Ok::<_, std::io::Error>(log.line(n)), n + 1))
                }
            });
            let first = futures::stream::once(async move { Ok(written) });
            Body::from_stream(futures::StreamExt::chain(first, more))
        } else {
            Body::from(written)
        };
        let mut response = Response::new(body);
        *response.status_mut() = StatusCode::OK;
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        Ok(response)
    }
}

/// The container asked for, or the only one; 400 as kube-apiserver words
/// it when there is no choice to make or the choice is not the pod's.
fn container(pod: &Value, asked: Option<String>) -> Result<String, Status> {
    let names = |list: &str| -> Vec<String> {
        pod.pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|c| c.get("name").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (containers, init) = (names("containers"), names("initContainers"));
    match asked.filter(|c| !c.is_empty()) {
        Some(c) if containers.contains(&c) || init.contains(&c) => Ok(c),
        Some(c) => Err(Status::bad_request(format!(
            "container {c} is not valid for pod {pod_name}"
        ))),
        None => match containers.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(Status::bad_request(format!(
                "a container name must be specified for pod {pod_name}"
            ))),
            several => {
                let mut message = format!(
                    "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                    several.join(" ")
                );
                if !init.is_empty() {
                    message.push_str(&format!(
                        " or one of the init containers: [{}]",
                        init.join(" ")
                    ));
                }
                Err(Status::bad_request(message))
            }
        },
    }
}

/// 422 for a negative `tailLines` (`PodLogOptions` validation).
fn invalid_tail(pod: &str, tail: i64) -> Status {
    let detail = format!("Invalid value: {tail}: must be greater than or equal to 0");
    let mut status = Status::failure(
        422,
        "Invalid",
        format!("PodLogOptions {pod:?} is invalid: tailLines: {detail}"),
    );
    status.details = Some(StatusDetails {
        name: pod.into(),
        kind: "PodLogOptions".into(),
        causes: vec![StatusCause {
            reason: "FieldValueInvalid".into(),
            message: detail,
            field: "tailLines".into(),
        }],
        ..StatusDetails::default()
    });
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_container_must_be_named_when_the_pod_has_several() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "a"}, {"name": "b"}],
            "initContainers": [{"name": "init"}]
        }});
        assert_eq!(container(&pod, Some("b".into())), Ok("b".into()));
        assert_eq!(container(&pod, Some("init".into())), Ok("init".into()));
        assert_eq!(
            container(&pod, None).unwrap_err().message,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [init]"
        );
        assert_eq!(
            container(&pod, Some("x".into())).unwrap_err().message,
            "container x is not valid for pod p"
        );
        let single = json!({"metadata": {"name": "q"}, "spec": {"containers": [{"name": "only"}]}});
        assert_eq!(container(&single, None), Ok("only".into()));
    }
}
