//! The simulated Kubernetes API server and the kubecache load generator.

pub mod sim;
