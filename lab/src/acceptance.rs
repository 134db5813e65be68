//! T-056's acceptance criteria 1-8 and its §6 verification, for real: a fresh local cluster,
//! dlock's etcd deployed by deploy/k8s/apply.sh as written, then one PASS/FAIL line per
//! criterion with its evidence, mostly from the spec's own kubectl commands. Then
//! `leaderwatch preflight --reach pod-ip` against it, passing, and failing by name with one
//! member frozen.

use crate::error::{Error, Result};
use crate::lab::{Options, State};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod cluster;
mod criteria;
mod verification;
use cluster::*;
use criteria::*;
use verification::*;

struct Env {
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    repo: PathBuf,
    /// The runc binary and the nodes' shared state directory, to find a member's pid.
    runc: (PathBuf, PathBuf),
}

struct Out {
    ok: bool,
    code: i32,
    stdout: String,
    stderr: String,
}

impl Env {
    async fn run(
        &self,
        program: &Path,
        args: &[&str],
        extra_env: &[(&str, &str)],
        limit: Duration,
    ) -> Out {
        let mut c = tokio::process::Command::new(program);
        c.args(args).env("KUBECONFIG", &self.kubeconfig).current_dir(&self.repo).kill_on_drop(true);
        for (k, v) in extra_env {
            c.env(k, v);
        }
        match tokio::time::timeout(limit, c.output()).await {
            Ok(Ok(o)) => Out {
                ok: o.status.success(),
                code: o.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            },
            Ok(Err(e)) => Out {
                ok: false,
                code: -1,
                stdout: String::new(),
                stderr: format!("{}: {e}", program.display()),
            },
            Err(_) => Out {
                ok: false,
                code: -1,
                stdout: String::new(),
                stderr: format!(
                    "{} {} took over {} s",
                    program.display(),
                    args.join(" "),
                    limit.as_secs()
                ),
            },
        }
    }

    async fn k(&self, args: &[&str]) -> Out {
        self.run(&self.kubectl.clone(), args, &[], Duration::from_secs(60)).await
    }

    async fn json(&self, args: &[&str]) -> Option<Value> {
        let o = self.k(args).await;
        if !o.ok {
            return None;
        }
        serde_json::from_str(&o.stdout).ok()
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

struct Report {
    lines: Vec<(String, bool, String)>,
}

impl Report {
    fn add(&mut self, name: &str, pass: bool, evidence: impl Into<String>) {
        let evidence = evidence.into();
        println!("{} {name}: {evidence}", if pass { "PASS" } else { "FAIL" });
        self.lines.push((name.into(), pass, evidence));
    }
}

pub async fn run(opts: &Options, repo: &Path, leaderwatch: &Path) -> Result<()> {
    let leaderwatch = leaderwatch.to_path_buf();
    if !leaderwatch.is_file() {
        return Err(Error::MissingTool { what: "leaderwatch (make build)", path: leaderwatch });
    }
    let repo = repo.to_path_buf();
    crate::with_lab(opts, move |state| async move { criteria(state, repo, leaderwatch).await })
        .await
}

async fn criteria(state: State, repo: PathBuf, leaderwatch: PathBuf) -> Result<()> {
    let env = Env {
        kubectl: state.kubectl.clone(),
        kubeconfig: state.kubeconfig.clone(),
        repo,
        runc: (state.runc.clone(), state.runc_root.clone()),
    };
    println!(
        "acceptance: local control plane, Kubernetes {} (kube-apiserver, kube-controller-manager, kube-scheduler built from k8s.io/kubernetes), nodes of kubelet {} + containerd, etcd 3.6.14; nodes {}",
        crate::lab::KUBE_VERSION,
        crate::lab::KUBE_VERSION,
        state.nodes.iter().map(|n| format!("{} ({})", n.0, n.1)).collect::<Vec<_>>().join(", ")
    );
    let mut r = Report { lines: vec![] };

    // T-055's precondition: the namespace exists before T-056 starts; leaderwatch's own
    // (its sitting's Job) is applied as an admin does, before its RBAC is dry-run.
    for file in ["deploy/k8s/namespace.yaml", "deploy/k8s/leaderwatch/namespace.yaml"] {
        let ns = env.k(&["apply", "-f", file]).await;
        if !ns.ok {
            return Err(Error::Command(format!(
                "kubectl apply -f {file}: {}",
                one_line(&ns.stderr)
            )));
        }
    }

    criterion_1(&env, &mut r).await;
    deploy(&env).await;
    let zones = criterion_2(&env, &mut r).await;
    criterion_3(&env, &mut r).await;
    // Criterion 4: etcdctl inside a member.
    let (ok4, ev4) = endpoint_status(&env).await;
    r.add(
        "criterion 4 (etcdctl endpoint status inside a member: three endpoints, one leader)",
        ok4,
        ev4,
    );
    criterion_5(&env, &mut r).await;
    preflight(&env, &mut r, &leaderwatch).await;
    wait_healthy(&env, Duration::from_secs(120)).await;

    // Criterion 6 and §6's delete: the StatefulSet recreates it, in its disk's zone.
    let (ok6, ev6) = delete_member(&env, &zones).await;
    r.add("criterion 6 (a deleted member pod returns to a healthy 3-endpoint list without intervention)", ok6, ev6);
    criterion_7(&env, &mut r).await;
    criterion_8(&env, &mut r);

    // §6 verification, command by command.
    let (ok_v, ev_v) = verification(&env).await;
    r.add("§6 verification", ok_v, ev_v);

    let failed = r.lines.iter().filter(|(_, p, _)| !p).count();
    println!("acceptance: {} PASS, {failed} FAIL", r.lines.len() - failed);
    if failed > 0 {
        return Err(Error::Acceptance(failed, r.lines.len()));
    }
    Ok(())
}
