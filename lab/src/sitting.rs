//! The GKE sitting rehearsed on the local cluster, as a user runs it: a fresh cluster,
//! dlock's etcd deployed by deploy/k8s/apply.sh, leaderwatch's ServiceAccount and RBAC
//! from deploy/k8s/leaderwatch/rbac.yaml, a token for that ServiceAccount from TokenRequest
//! (never the admin's credentials), then `leaderwatch measure --reach pod-ip` with its
//! defaults except the environment label, and the baseline table.

use crate::error::{Error, Result};
use crate::lab::{KUBE_VERSION, Options, State};
use std::path::{Path, PathBuf};
use std::time::Duration;

async fn kubectl(state: &State, repo: &Path, args: &[&str]) -> Result<String> {
    let out = tokio::time::timeout(
        Duration::from_secs(900),
        tokio::process::Command::new(&state.kubectl).args(args).env("KUBECONFIG", &state.kubeconfig).current_dir(repo).kill_on_drop(true).output(),
    )
    .await
    .map_err(|_| Error::Command(format!("kubectl {} timed out", args.join(" "))))?
    .map_err(|e| Error::Command(format!("kubectl: {e}")))?;
    if !out.status.success() {
        return Err(Error::Command(format!("kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A kubeconfig for dlock's `leaderwatch` ServiceAccount, with a TokenRequest token.
pub async fn service_account_kubeconfig(state: &State, repo: &Path, path: &Path) -> Result<()> {
    let token = kubectl(state, repo, &["-n", "dlock", "create", "token", "leaderwatch", "--duration=6h"]).await?;
    let admin = std::fs::read_to_string(&state.kubeconfig).map_err(|e| Error::Command(format!("read admin kubeconfig: {e}")))?;
    let ca = admin.lines().find_map(|l| l.trim().strip_prefix("certificate-authority-data: ")).ok_or_else(|| Error::Command("admin kubeconfig has no CA".into()))?;
    let kc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lw-lab\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: dlock-leaderwatch\n  user:\n    token: {}\ncontexts:\n- name: leaderwatch@lw-lab\n  context:\n    cluster: lw-lab\n    user: dlock-leaderwatch\n    namespace: dlock\ncurrent-context: leaderwatch@lw-lab\n",
        state.server,
        token.trim()
    );
    std::fs::write(path, kc).map_err(|e| Error::Command(format!("write {}: {e}", path.display())))
}

/// Namespace, apply.sh, rbac.yaml: what a user does before the sitting.
pub async fn deploy(state: &State, repo: &Path) -> Result<()> {
    kubectl(state, repo, &["apply", "-f", "deploy/k8s/namespace.yaml"]).await?;
    let out = tokio::process::Command::new(repo.join("deploy/k8s/apply.sh"))
        .env("KUBECONFIG", &state.kubeconfig)
        .env("KUBECTL", &state.kubectl)
        .current_dir(repo)
        .kill_on_drop(true)
        .status()
        .await
        .map_err(|e| Error::Command(format!("apply.sh: {e}")))?;
    if !out.success() {
        return Err(Error::Command(format!("deploy/k8s/apply.sh failed ({out})")));
    }
    kubectl(state, repo, &["apply", "-f", "deploy/k8s/leaderwatch/rbac.yaml"]).await?;
    Ok(())
}

/// The value of `--flag` in `args`, if given.
fn arg<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|x| x == flag).and_then(|i| args.get(i + 1)).map(String::as_str)
}

pub fn environment() -> String {
    format!("local control plane, Kubernetes {KUBE_VERSION}, etcd 3.6.14")
}

pub async fn run(opts: &Options, repo: &Path, leaderwatch: &Path, args: Vec<String>) -> Result<()> {
    if !leaderwatch.is_file() {
        return Err(Error::MissingTool { what: "leaderwatch (make build)", path: leaderwatch.to_path_buf() });
    }
    let (repo, lw, dir) = (repo.to_path_buf(), leaderwatch.to_path_buf(), opts.dir.clone());
    crate::with_lab(opts, move |state| async move {
        deploy(&state, &repo).await?;
        let method = arg(&args, "--method").unwrap_or("evict").to_owned();
        if method == "drain" {
            // A drain's cluster-wide rules are applied only for a drain, as a user would.
            kubectl(&state, &repo, &["apply", "-f", "deploy/k8s/leaderwatch/rbac-drain.yaml"]).await?;
        }
        let kc = dir.join("leaderwatch.kubeconfig");
        service_account_kubeconfig(&state, &repo, &kc).await?;
        let mut a: Vec<String> = vec!["measure".into(), "--kubeconfig".into(), kc.display().to_string(), "--reach".into(), "pod-ip".into(), "--environment".into(), environment()];
        let out = match arg(&args, "--out") {
            Some(o) => PathBuf::from(o),
            None => {
                let target = if method == "rolling-restart" { "all" } else { arg(&args, "--target").unwrap_or("follower") };
                let what = if method == "evict" { "eviction" } else { method.as_str() };
                let p = PathBuf::from(format!("data/kube-{target}-{what}-{}", chrono::Utc::now().format("%Y%m%dT%H%M%SZ")));
                a.extend(["--out".into(), p.display().to_string()]);
                p
            }
        };
        a.extend(args);
        println!("lw-lab: {} {}", lw.display(), a.join(" "));
        let st = tokio::process::Command::new(&lw).args(&a).current_dir(&repo).kill_on_drop(true).status().await.map_err(|e| Error::Command(format!("leaderwatch: {e}")))?;
        let baseline = repo.join(&out).join("baseline.json");
        if baseline.is_file() {
            let _ = tokio::process::Command::new(&lw).arg("report").arg(&baseline).current_dir(&repo).status().await;
        }
        match st.code() {
            Some(0) => Ok(()),
            c => Err(Error::Command(format!("leaderwatch measure exited {}", c.map(|c| c.to_string()).unwrap_or_else(|| "by a signal".into())))),
        }
    })
    .await
}
