//! Subresources: `status` (GET, PUT, PATCH of `.status` alone), a pod's
//! `log`, its `eviction`, and the kubelet's (`exec`, `attach`,
//! `portforward`) and the pod network's (`proxy`), which a server without
//! kubelets or pods cannot serve: they answer as kube-apiserver answers
//! when the kubelet or the pod cannot be reached.

use axum::http::{Method, header};
use axum::response::Response;
use bytes::Bytes;
use kubecache_wire::Status;
use serde_json::Value;

use super::write::Part;
use super::{Call, body, list, method_not_allowed, status_response};
use crate::sim::store::key_of;

impl Call<'_> {
    /// A request to a subresource the target's resource has.
    pub async fn subresource(
        &self,
        subresource: &str,
        method: &Method,
        request: &Bytes,
    ) -> Response {
        match (subresource, method) {
            ("status", &Method::GET) => {
                let form = crate::sim::encoding::Form::Whole;
                list::get(self.ctx, self.target, self.query, self.wire, form).await
            }
            ("status", &Method::PUT) => self.replace(request, Part::Status),
            ("status", &Method::PATCH) => self.patch(request, Part::Status),
            ("log", &Method::GET) => self.log(),
            ("eviction", &Method::POST) => self.evict(request),
            ("exec" | "attach" | "portforward", &Method::GET | &Method::POST) => self.no_kubelet(),
            ("proxy", _) => self.no_pod_network(),
            _ => method_not_allowed(self.wire),
        }
    }

    /// The pod the request is about (a proxy's name may carry `:port`).
    pub fn pod(&self) -> Result<Value, Status> {
        let resource = self.resource();
        let name = self.name().split(':').next().unwrap_or_default();
        self.ctx
            .store
            .get(self.target.resource, &key_of(self.namespace(), name))
            .map(|pod| pod.to_value())
            .ok_or_else(|| Status::not_found(resource.group, resource.plural, name))
    }

    /// `POST pods/{name}/eviction`: without disruption budgets, every
    /// eviction deletes the pod; the answer is a Success Status, 201.
    fn evict(&self, request: &Bytes) -> Response {
        let builtin = self.resource().builtin;
        let result = body::object(self.headers, request, builtin).and_then(|eviction| {
            if let Some(kind) = eviction.get("kind").and_then(Value::as_str)
                && kind != "Eviction"
            {
                return Err(Status::bad_request(format!(
                    "not a Eviction object: {kind}"
                )));
            }
            let name = eviction
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if name != self.name() {
                return Err(Status::bad_request(
                    "name in URL does not match name in Eviction object",
                ));
            }
            self.ctx
                .store
                .delete(self.target.resource, self.namespace(), self.name())
        });
        let status = match result {
            Ok(_) => Status {
                status: "Success".into(),
                ..Status::failure(201, "", "")
            },
            Err(status) => status,
        };
        status_response(&status, self.wire)
    }

    /// `exec`, `attach`, `portforward`: a connection upgrade to the
    /// kubelet. Without `Upgrade` the API server refuses it (400); with
    /// one, it cannot dial the kubelet (500).
    fn no_kubelet(&self) -> Response {
        let status = match self.pod() {
            Err(status) => status,
            Ok(_) if !self.headers.contains_key(header::UPGRADE) => {
                Status::bad_request("Upgrade request required")
            }
            Ok(pod) => {
                let host = pod
                    .pointer("/status/hostIP")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                Status::internal(format!(
                    "Internal error occurred: error dialing backend: dial tcp {host}:10250: connect: connection refused"
                ))
            }
        };
        status_response(&status, self.wire)
    }

    /// `proxy`: the pod's address cannot be reached (503).
    fn no_pod_network(&self) -> Response {
        let status = match self.pod() {
            Err(status) => status,
            Ok(pod) => {
                let ip = pod
                    .pointer("/status/podIP")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let port = self.name().split_once(':').map_or("80", |(_, port)| port);
                Status::failure(
                    503,
                    "ServiceUnavailable",
                    format!(
                        "error trying to reach service: dial tcp {ip}:{port}: connect: connection refused"
                    ),
                )
            }
        };
        status_response(&status, self.wire)
    }
}
