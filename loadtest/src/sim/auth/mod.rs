//! Authentication and authorization of the simulated API server, as
//! kube-apiserver does them with bearer tokens and RBAC: a [`Policy`] of
//! users (by token), roles and bindings decides every request; requests
//! without a token run as `system:anonymous`. The policy's roles and
//! bindings are stored as RBAC objects and its service accounts as
//! ServiceAccounts; what decides is what the store holds of them
//! (`Enforced`). The HTTP side (401, 403, impersonation headers, the
//! review APIs) is `sim::http`'s.
//!
//! Two policies come ready: [`Policy::demo`] (the README demo's users) and
//! [`Policy::edges`] (the identities of the `edges` golden corpus, to
//! replay its requests).

mod attributes;
pub mod demo;
pub mod edges;
mod enforced;
mod impersonation;
mod objects;
mod policy;

pub use attributes::{
    ANONYMOUS, AUTHENTICATED, Attributes, ResourceAttributes, UNAUTHENTICATED, UserInfo,
};
pub(crate) use enforced::Enforced;
pub use impersonation::{Refusal, impersonate};
pub use policy::{Binding, Decision, Policy, Role, RoleRef, Rule, Subject, User};
