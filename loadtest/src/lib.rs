//! The simulated Kubernetes API server and the kubecache load generator.

pub mod raw;
pub mod run;
pub mod sim;
