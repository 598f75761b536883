//! The real `kubecache` binary of this crate as a child process
//! ([`kubecache_testkit::process`]).

use std::net::SocketAddr;
use std::path::Path;

pub use kubecache_testkit::process::Process;

/// Starts this crate's `kubecache` with `args` and `env` (see
/// [`Process::kubecache`]); the process and where it listens.
pub fn kubecache(args: &[&str], env: &[(&str, &Path)]) -> (Process, SocketAddr) {
    Process::kubecache(Path::new(env!("CARGO_BIN_EXE_kubecache")), args, env)
}
