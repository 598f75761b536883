//! The real `kubecache` binary as a child process, for the tests that need
//! a whole process (signals, exits, restarts, several replicas).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

use super::{drain, free_address};

/// A running `kubecache` listening on a free port of 127.0.0.1, with its
/// output collected; killed (SIGKILL) and reaped when dropped.
pub struct Process {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    output: Arc<Mutex<String>>,
}

impl Process {
    /// Starts the binary with `args` plus `--listen`, and `env` on top of
    /// an environment without `KUBECACHE_*` settings (so the caller's
    /// shell cannot change the test), logging at `info` without colour.
    pub fn start(args: &[&str], env: &[(&str, &Path)]) -> Process {
        let addr = free_address();
        let mut command = Command::new(env!("CARGO_BIN_EXE_kubecache"));
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("KUBECACHE_") {
                command.env_remove(key);
            }
        }
        let mut child = command
            .args(args)
            .arg("--listen")
            .arg(addr.to_string())
            .envs(env.iter().copied())
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the kubecache binary starts");
        let output = Arc::new(Mutex::new(String::new()));
        drain(child.stdout.take().expect("piped stdout"), output.clone());
        drain(child.stderr.take().expect("piped stderr"), output.clone());
        Process {
            child,
            addr,
            output,
        }
    }

    /// `http://` and its address.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What it printed so far.
    pub fn output(&self) -> String {
        self.output.lock().expect("output lock").clone()
    }

    /// Its exit status, once it has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Sends `signal` (`-TERM`, `-KILL`, ...) with kill(1).
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill(1) runs");
        assert!(sent.success(), "kill {signal} failed");
    }

    /// SIGKILL, and reaped.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}
