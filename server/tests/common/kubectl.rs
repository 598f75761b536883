//! kubectl, the real client, run against kubecache with a kubeconfig of its
//! own. kubectl is on every machine image: on CI (`CI` set) a missing one
//! fails the test rather than skipping it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Whether kubectl runs here; says why not when it does not.
///
/// # Panics
///
/// On CI, when it does not.
pub fn available() -> bool {
    let why = match Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    {
        Ok(output) if output.status.success() => return true,
        Ok(output) => format!(
            "`kubectl version --client` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => format!("kubectl is not on PATH ({error})"),
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run kubectl: {why}"
    );
    eprintln!("skipped: {why}");
    false
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
        let mut command = Command::new("kubectl");
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
        let output = self.run(args, env).await;
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("kubectl prints UTF-8")
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
