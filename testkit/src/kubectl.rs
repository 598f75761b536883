//! kubectl, the real client, and one policy for tests that need it: a
//! missing kubectl fails the test, on CI (`CI` set to anything but `false`
//! or `0`) always, elsewhere unless `KUBECACHE_TEST_SKIP_KUBECTL=1` is set,
//! which skips the test with a line on stderr. It is never skipped
//! silently. kubectl is the one on `PATH` (`.ci/run` installs it there).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The variable that, outside CI, turns a missing kubectl from a failure
/// into a skip.
pub const OPT_OUT: &str = "KUBECACHE_TEST_SKIP_KUBECTL";

/// `kubectl`, as a command to add arguments to.
pub fn command() -> Command {
    Command::new("kubectl")
}

/// Whether the test can run kubectl: true when it runs here; false (said
/// on stderr) when it does not and [`OPT_OUT`] is set outside CI.
///
/// # Panics
///
/// When kubectl does not run here, on CI or without [`OPT_OUT`].
pub fn available() -> bool {
    let why = match command().args(["version", "--client"]).output() {
        Ok(output) if output.status.success() => return true,
        Ok(output) => format!(
            "`kubectl version --client` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => format!("kubectl is not on PATH ({error})"),
    };
    assert!(!on_ci(), "CI must run kubectl: {why}");
    assert!(
        std::env::var(OPT_OUT).is_ok_and(|v| v == "1"),
        "this test runs kubectl: {why}; install it, or set {OPT_OUT}=1 to skip the kubectl tests"
    );
    eprintln!("skipped ({OPT_OUT}=1): {why}");
    false
}

/// What `kubectl args…` prints (blocking); it must succeed.
pub fn ok(args: &[&str]) -> String {
    printed(args, command().args(args).output().expect("kubectl runs"))
}

/// The stdout of kubectl's `output`, which must be a success.
fn printed(args: &[&str], output: Output) -> String {
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("kubectl prints UTF-8")
}

/// Whether this is a CI run: `CI` set, and not to `false` or `0`.
fn on_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
}

/// How a kubeconfig's user proves who it is.
pub enum Credential<'a> {
    /// A bearer token.
    Token(&'a str),
    /// A client certificate and its key (PEM files).
    Certificate { cert: &'a Path, key: &'a Path },
}

/// kubectl as one user of the cluster at `server`, trusting the CA in
/// `ca`, in `namespace` by default, with a discovery cache of its own.
pub struct Kubectl {
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    /// kubectl with the kubeconfig at `kubeconfig` (as written by someone
    /// else), its discovery cache in `cache`.
    pub fn with(kubeconfig: PathBuf, cache: PathBuf) -> Kubectl {
        Kubectl { kubeconfig, cache }
    }

    /// Writes the kubeconfig into `dir`, named after `user`.
    pub fn new(
        dir: &Path,
        user: &str,
        server: &str,
        ca: &Path,
        namespace: &str,
        credential: Credential<'_>,
    ) -> Kubectl {
        let credential = match credential {
            Credential::Token(token) => format!("token: {token}"),
            Credential::Certificate { cert, key } => format!(
                "client-certificate: {}\n      client-key: {}",
                cert.display(),
                key.display()
            ),
        };
        let kubeconfig = dir.join(format!("{user}.kubeconfig"));
        std::fs::write(
            &kubeconfig,
            format!(
                r#"apiVersion: v1
kind: Config
clusters:
  - name: kubecache
    cluster:
      server: {server}
      certificate-authority: {ca}
users:
  - name: {user}
    user:
      {credential}
contexts:
  - name: {user}
    context: {{ cluster: kubecache, user: {user}, namespace: {namespace} }}
current-context: {user}
"#,
                ca = ca.display(),
            ),
        )
        .unwrap();
        Kubectl {
            cache: dir.join(format!("{user}.cache")),
            kubeconfig,
        }
    }

    /// Runs `kubectl args…` with `env` set, off the async workers.
    pub async fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = command();
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args);
        for (name, value) in env {
            command.env(name, value);
        }
        tokio::task::spawn_blocking(move || command.output().expect("kubectl runs"))
            .await
            .unwrap()
    }

    /// What `kubectl args…` prints; it must succeed.
    pub async fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, &[]).await
    }

    /// What `kubectl args…` prints with `env` set; it must succeed.
    pub async fn ok_with(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        printed(args, self.run(args, env).await)
    }

    /// What `kubectl args…` says on failing; it must fail.
    pub async fn fails(&self, args: &[&str]) -> String {
        let output = self.run(args, &[]).await;
        assert!(
            !output.status.success(),
            "kubectl {args:?} succeeded: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8(output.stderr).expect("kubectl prints UTF-8")
    }
}
