//! What kubecache's tests share, dev-only: the golden corpus of a real
//! kube-apiserver ([`golden`]) and the replay of its recorded cases
//! ([`replay`], with how [`edges`] and [`versions`] compare answers), condition
//! waits ([`wait`]), test certificates ([`pki`]), a child process such as the real binary
//! ([`process`]), kubectl and its policy ([`kubectl`]), a raw HTTP/1.0
//! client ([`raw_http`]), `/metrics` samples ([`scrape`]) and the real
//! kube-apiserver of `../shared/real-apiserver/` when one is named
//! ([`real_apiserver`]).
//!
//! It depends on no crate of the workspace, so that every crate's tests can
//! use it.

pub mod edges;
pub mod golden;
pub mod kubectl;
pub mod pki;
pub mod process;
pub mod raw_http;
pub mod real_apiserver;
pub mod replay;
pub mod scrape;
pub mod versions;
pub mod wait;
