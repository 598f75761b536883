//! A child process with its output collected, for tests that need a whole
//! process (the real `kubecache` binary: signals, exits, restarts, several
//! replicas; `kubectl -w`): conditions on what it printed, its exit, and a
//! kill (SIGKILL) when dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::wait;

/// A running child, its stdout and stderr collected as they come; killed
/// and reaped when dropped.
pub struct Process {
    child: Mutex<Child>,
    output: Arc<Mutex<String>>,
    drains: Mutex<Vec<JoinHandle<()>>>,
}

impl Process {
    /// Spawns `command` with stdin closed and stdout and stderr collected.
    pub fn spawn(command: &mut Command) -> Process {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{command:?} starts: {e}"));
        let output = Arc::new(Mutex::new(String::new()));
        let drains = vec![
            drain(child.stdout.take().expect("piped stdout"), output.clone()),
            drain(child.stderr.take().expect("piped stderr"), output.clone()),
        ];
        Process {
            child: Mutex::new(child),
            output,
            drains: Mutex::new(drains),
        }
    }

    /// The `kubecache` binary at `binary` with `args` plus `--listen` on a
    /// free port of 127.0.0.1 (and its health listener on another), and `env` on top of an environment without
    /// `KUBECACHE_*` settings (so the caller's shell cannot change the
    /// test), logging at `info` without colour; and where it listens.
    pub fn kubecache(binary: &Path, args: &[&str], env: &[(&str, &Path)]) -> (Process, SocketAddr) {
        let addr = free_address();
        let mut command = Command::new(binary);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("KUBECACHE_") {
                command.env_remove(key);
            }
        }
        command
            .args(args)
            .arg("--listen")
            .arg(addr.to_string())
            .args(["--health-listen", "127.0.0.1:0"])
            .envs(env.iter().copied())
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info");
        (Process::spawn(&mut command), addr)
    }

    /// What it printed so far (stdout and stderr, line by line as they
    /// came).
    pub fn output(&self) -> String {
        self.output.lock().expect("output lock").clone()
    }

    /// Waits until `condition` holds of its output.
    pub async fn logged(&self, what: &str, condition: impl Fn(&str) -> bool) {
        self.until(what, async || condition(&self.output())).await;
    }

    /// Waits until `condition` holds; fails the test, with the output, when
    /// the process has exited and the condition still does not hold once
    /// all its output is in, or after [`wait::PATIENCE`].
    pub async fn until(&self, what: &str, mut condition: impl AsyncFnMut() -> bool) {
        wait::until_explained(
            what,
            async || {
                if condition().await {
                    return true;
                }
                let Some(status) = self.try_wait() else {
                    return false;
                };
                self.read_to_end();
                assert!(
                    condition().await,
                    "{what}: the process exited ({status}) first; its output:\n{}",
                    self.output()
                );
                true
            },
            || format!("its output:\n{}", self.output()),
        )
        .await;
    }

    /// Its exit status, once it has exited.
    pub fn try_wait(&self) -> Option<ExitStatus> {
        self.child
            .lock()
            .expect("child lock")
            .try_wait()
            .expect("try_wait")
    }

    /// Waits until it has exited and all its output is in; its status.
    pub async fn exited(&self) -> ExitStatus {
        let mut status = None;
        wait::until_explained(
            "the process exits",
            async || {
                status = self.try_wait();
                status.is_some()
            },
            || format!("its output:\n{}", self.output()),
        )
        .await;
        self.read_to_end();
        status.expect("exited")
    }

    /// Waits until the output readers have read to the pipes' end (the
    /// process has exited).
    fn read_to_end(&self) {
        for drain in self.drains.lock().expect("drains lock").drain(..) {
            drain.join().expect("the output reader");
        }
    }

    /// Sends `signal` (`-TERM`, `-KILL`, ...) with kill(1).
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([
                signal,
                &self.child.lock().expect("child lock").id().to_string(),
            ])
            .status()
            .expect("kill(1) runs");
        assert!(sent.success(), "kill {signal} failed");
    }

    /// SIGKILL, and reaped.
    pub fn kill(&self) {
        let mut child = self.child.lock().expect("child lock");
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Copies a child's pipe into `output` on a thread, so the child never
/// blocks on it; the thread ends at the pipe's end.
fn drain(pipe: impl std::io::Read + Send + 'static, output: Arc<Mutex<String>>) -> JoinHandle<()> {
    use std::io::BufRead;
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            let mut output = output.lock().expect("output lock");
            output.push_str(&line);
            output.push('\n');
        }
    })
}

/// An address on 127.0.0.1 that was free a moment ago, for a child process
/// to listen on.
fn free_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local address")
}
