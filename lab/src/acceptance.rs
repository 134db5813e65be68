//! T-056's acceptance criteria 1-8 and its §6 verification, for real: a fresh local cluster,
//! dlock's etcd deployed by deploy/k8s/apply.sh as written, then one PASS/FAIL line per
//! criterion with its evidence, mostly from the spec's own kubectl commands. Then
//! `leaderwatch preflight --reach pod-ip` against it, passing, and failing by name with one
//! member frozen.

use crate::error::{Error, Result};
use crate::lab::{Options, State};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// Criterion 1, with a negative control so that a dry run that accepts anything fails here;
/// leaderwatch's own RBAC, Job and Deployment are dry-run too.
async fn criterion_1(env: &Env, r: &mut Report) {
    let dry = env.k(&["apply", "--dry-run=server", "-f", "deploy/k8s/etcd/", "-R"]).await;
    let bad = env
        .k(&["apply", "--dry-run=server", "-f", "tests/fixtures/invalid-statefulset.yaml"])
        .await;
    let lw_files = [
        "deploy/k8s/leaderwatch/rbac.yaml",
        "deploy/k8s/leaderwatch/rbac-maintenance.yaml",
        "deploy/k8s/leaderwatch/rbac-drain.yaml",
        "deploy/k8s/leaderwatch/job-measure.yaml",
        "deploy/k8s/leaderwatch/deployment-sample.yaml",
    ];
    let mut lw_args = vec!["apply", "--dry-run=server"];
    for f in &lw_files {
        lw_args.extend(["-f", f]);
    }
    let lw = env.k(&lw_args).await;
    r.add(
        "criterion 1 (kubectl apply --dry-run=server -f deploy/k8s/etcd/ -R)",
        dry.ok && !bad.ok && dry.stdout.matches("(server dry run)").count() == 3,
        format!(
            "{}; negative control (unknown field) refused by the API server: {}; leaderwatch's rbac/job/deployment: {}",
            one_line(&dry.stdout) + &one_line(&dry.stderr),
            if bad.ok { "NO, it was accepted".to_string() } else { one_line(&bad.stderr) },
            if lw.ok { format!("accepted ({} objects)", lw.stdout.matches("(server dry run)").count()) } else { one_line(&lw.stderr) }
        ),
    );
}

/// Deploys as the spec says: deploy/k8s/apply.sh, unmodified, with its own waits. Its
/// failure is printed, not returned: the criteria after it say what is missing.
async fn deploy(env: &Env) {
    let t0 = Instant::now();
    let kubectl_s = env.kubectl.display().to_string();
    let apply = env
        .run(
            &env.repo.join("deploy/k8s/apply.sh"),
            &[],
            &[("KUBECTL", &kubectl_s)],
            Duration::from_secs(900),
        )
        .await;
    let apply_took = t0.elapsed().as_secs_f64();
    println!(
        "deploy: deploy/k8s/apply.sh exited {} after {apply_took:.1} s; last line: {}",
        apply.code,
        apply.stdout.lines().last().unwrap_or("")
    );
    if !apply.ok {
        println!("deploy: apply.sh failed: {}", one_line(&apply.stderr));
    }
}

/// Criterion 2: three members Running and Ready on three nodes in three zones. Returns
/// each node's zone (criterion 6 checks the recreated member's).
async fn criterion_2(env: &Env, r: &mut Report) -> BTreeMap<String, String> {
    let wide = env.k(&[&crate::lab::MEMBER_PODS[..], &["-o", "wide"]].concat()).await;
    print_indented(&wide.stdout);
    let zones = node_zones(env).await;
    let pods = env.json(&[&crate::lab::MEMBER_PODS[..], &["-o", "json"]].concat()).await;
    let items = pods.as_ref().and_then(|p| p["items"].as_array().cloned()).unwrap_or_default();
    let running: Vec<(String, String)> = items
        .iter()
        .filter(|p| p["status"]["phase"] == "Running" && ready(p))
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let nodes: BTreeSet<&String> = running.iter().map(|(_, n)| n).collect();
    let pod_zones: BTreeSet<String> =
        running.iter().filter_map(|(_, n)| zones.get(n).cloned()).collect();
    r.add(
        "criterion 2 (3/3 Running on three nodes in three zones)",
        running.len() == 3 && nodes.len() == 3 && pod_zones.len() == 3,
        format!(
            "{}/3 Running and Ready: {}{}",
            running.len(),
            running
                .iter()
                .map(|(p, n)| format!(
                    "{p} on {n} in {}",
                    zones.get(n).map(String::as_str).unwrap_or("?")
                ))
                .collect::<Vec<_>>()
                .join(", "),
            not_ready(&items)
        ),
    );
    zones
}

/// Criterion 3: three PVCs, premium-rwo, 10Gi, Bound.
async fn criterion_3(env: &Env, r: &mut Report) {
    let pvc_table = env.k(&["-n", "dlock", "get", "pvc"]).await;
    print_indented(&pvc_table.stdout);
    let pvcs = env.json(&["-n", "dlock", "get", "pvc", "-o", "json"]).await;
    let pvc_items = pvcs.as_ref().and_then(|p| p["items"].as_array().cloned()).unwrap_or_default();
    let good: Vec<String> = pvc_items
        .iter()
        .filter(|c| {
            c["spec"]["storageClassName"] == "premium-rwo"
                && c["status"]["capacity"]["storage"] == "10Gi"
                && c["status"]["phase"] == "Bound"
        })
        .map(|c| c["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect();
    r.add(
        "criterion 3 (three PVCs, premium-rwo, 10Gi, Bound)",
        pvc_items.len() == 3 && good.len() == 3,
        format!(
            "{} PVC(s), {} premium-rwo 10Gi Bound: {}",
            pvc_items.len(),
            good.len(),
            good.join(", ")
        ),
    );
}

/// Criterion 5: the PDB's disruptionsAllowed is 1, as the disruption controller computed
/// it (asynchronously: polled for up to 30 s).
async fn criterion_5(env: &Env, r: &mut Report) {
    let mut allowed = None;
    for _ in 0..30 {
        allowed = env
            .json(&["-n", "dlock", "get", "pdb", "dlock-etcd-pdb", "-o", "json"])
            .await
            .and_then(|p| p["status"]["disruptionsAllowed"].as_i64());
        if allowed == Some(1) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let pdb_table = env.k(&["-n", "dlock", "get", "pdb", "dlock-etcd-pdb"]).await;
    print_indented(&pdb_table.stdout);
    r.add(
        "criterion 5 (PDB dlock-etcd-pdb ALLOWED DISRUPTIONS 1)",
        allowed == Some(1),
        format!(
            "status.disruptionsAllowed = {}",
            allowed.map(|a| a.to_string()).unwrap_or_else(|| "unknown".into())
        ),
    );
}

/// `leaderwatch preflight --reach pod-ip` passes now, and names the failing check (exit 7)
/// with dlock-etcd-2's etcd frozen by SIGSTOP.
async fn preflight(env: &Env, r: &mut Report, leaderwatch: &Path) {
    let pre = env
        .run(leaderwatch, &["preflight", "--reach", "pod-ip"], &[], Duration::from_secs(120))
        .await;
    println!("  leaderwatch preflight --reach pod-ip, all members up:");
    print_indented(&pre.stdout);
    let frozen = freeze(env, "dlock-etcd-2", true).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pre_bad = env
        .run(leaderwatch, &["preflight", "--reach", "pod-ip"], &[], Duration::from_secs(120))
        .await;
    let _ = freeze(env, "dlock-etcd-2", false).await;
    let failing: Vec<&str> = pre_bad.stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    println!("  leaderwatch preflight --reach pod-ip, dlock-etcd-2 frozen:");
    print_indented(&pre_bad.stdout);
    r.add(
        "leaderwatch preflight --reach pod-ip",
        pre.ok && frozen.is_some() && pre_bad.code == 7 && !failing.is_empty(),
        format!(
            "exit {} with all members up; exit {} with dlock-etcd-2's etcd frozen (SIGSTOP pid {}): {}",
            pre.code,
            pre_bad.code,
            frozen.map(|p| p.to_string()).unwrap_or_else(|| "?".into()),
            failing.join(" | ")
        ),
    );
}

/// Criterion 7: no standard-rwo under deploy/k8s/etcd.
async fn criterion_7(env: &Env, r: &mut Report) {
    let grep = env
        .run(
            Path::new("sh"),
            &["-c", "grep -n 'standard-rwo' deploy/k8s/etcd/*"],
            &[],
            Duration::from_secs(10),
        )
        .await;
    r.add(
        "criterion 7 (grep -n 'standard-rwo' deploy/k8s/etcd/* returns nothing)",
        grep.code == 1 && grep.stdout.is_empty(),
        if grep.stdout.is_empty() {
            "no match (grep exit 1)".into()
        } else {
            one_line(&grep.stdout)
        },
    );
}

/// Criterion 8: the etcd README has a leader-change count with its observation window,
/// and the PVC deletion command.
fn criterion_8(env: &Env, r: &mut Report) {
    let readme =
        std::fs::read_to_string(env.repo.join("deploy/k8s/etcd/README.md")).unwrap_or_default();
    let row = readme.lines().find(|l| {
        l.contains("leader changes at rest") && l.contains("raw sum") && l.contains("Z –")
    });
    let pvc_cmd = readme.lines().find(|l| l.contains("kubectl") && l.contains("delete pvc"));
    r.add(
        "criterion 8 (etcd README: a leader-change count with its observation window, and the PVC deletion command)",
        row.is_some() && pvc_cmd.is_some(),
        format!(
            "count row: {}; PVC command: {}",
            row.map(|l| l.chars().take(160).collect::<String>()).unwrap_or_else(|| "none".into()),
            pvc_cmd.map(|l| l.trim().to_string()).unwrap_or_else(|| "none".into())
        ),
    );
}

fn print_indented(s: &str) {
    for l in s.lines() {
        println!("    {l}");
    }
}

/// "; not Ready: dlock-etcd-1 (Running, etcd waiting CrashLoopBackOff: ...)" for the pods that are not.
fn not_ready(items: &[Value]) -> String {
    let v: Vec<String> = items
        .iter()
        .filter(|p| !(p["status"]["phase"] == "Running" && ready(p)))
        .map(|p| {
            let st = &p["status"]["containerStatuses"][0]["state"];
            let why = st
                .as_object()
                .and_then(|o| o.iter().next())
                .map(|(k, v)| format!("{k} {}", v["reason"].as_str().unwrap_or("")))
                .unwrap_or_default();
            format!(
                "{} ({}, {why})",
                p["metadata"]["name"].as_str().unwrap_or("?"),
                p["status"]["phase"].as_str().unwrap_or("?")
            )
        })
        .collect();
    if v.is_empty() { String::new() } else { format!("; not Ready: {}", v.join(", ")) }
}

fn ready(p: &Value) -> bool {
    p["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

async fn node_zones(env: &Env) -> BTreeMap<String, String> {
    let nodes = env.json(&["get", "nodes", "-o", "json"]).await;
    nodes
        .and_then(|n| n["items"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap_or("").to_string(),
                n["metadata"]["labels"]["topology.kubernetes.io/zone"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

async fn endpoint_status(env: &Env) -> (bool, String) {
    let o = env
        .k(&[
            "-n",
            "dlock",
            "exec",
            "dlock-etcd-0",
            "--",
            "etcdctl",
            "endpoint",
            "status",
            "--cluster",
            "-w",
            "json",
        ])
        .await;
    let Ok(v) = serde_json::from_str::<Value>(&o.stdout) else {
        return (false, format!("exit {}: {}", o.code, one_line(&o.stderr)));
    };
    let eps = v.as_array().cloned().unwrap_or_default();
    let leaders =
        eps.iter().filter(|e| e["Status"]["header"]["member_id"] == e["Status"]["leader"]).count();
    let versions: BTreeSet<String> =
        eps.iter().filter_map(|e| e["Status"]["version"].as_str().map(str::to_string)).collect();
    let terms: BTreeSet<u64> =
        eps.iter().filter_map(|e| e["Status"]["raftTerm"].as_u64()).collect();
    (
        eps.len() == 3 && leaders == 1 && versions.len() == 1 && versions.contains("3.6.14"),
        format!(
            "{} endpoints, {leaders} leader, version {}, raft term {:?}",
            eps.len(),
            versions.into_iter().collect::<Vec<_>>().join("/"),
            terms
        ),
    )
}

/// SIGSTOP / SIGCONT a member's etcd (its pid from runc's state of the container).
async fn freeze(env: &Env, pod: &str, stop: bool) -> Option<i32> {
    let p = env.json(&["-n", "dlock", "get", "pod", pod, "-o", "json"]).await?;
    let id = p["status"]["containerStatuses"][0]["containerID"]
        .as_str()?
        .strip_prefix("containerd://")?
        .to_string();
    let pid = crate::node::container_pid(&env.runc.0, &env.runc.1, &id).await?;
    let sig =
        if stop { nix::sys::signal::Signal::SIGSTOP } else { nix::sys::signal::Signal::SIGCONT };
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).ok()?;
    Some(pid)
}

async fn healthy(env: &Env) -> bool {
    let o = env
        .k(&[
            "-n",
            "dlock",
            "exec",
            "dlock-etcd-0",
            "--",
            "etcdctl",
            "--dial-timeout=3s",
            "--command-timeout=5s",
            "endpoint",
            "health",
            "--cluster",
            "-w",
            "json",
        ])
        .await;
    let n = o.stdout.matches("\"health\":true").count();
    o.ok && n == 3 && endpoint_status(env).await.0
}

async fn wait_healthy(env: &Env, within: Duration) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < within {
        if healthy(env).await {
            return Some(t.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// Each member's etcd_server_leader_changes_seen_total, from its /metrics at the pod address.
async fn leader_changes(env: &Env) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let pods = env.json(&[&crate::lab::MEMBER_PODS[..], &["-o", "json"]].concat()).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().ok();
    for p in pods.and_then(|p| p["items"].as_array().cloned()).unwrap_or_default() {
        let (Some(name), Some(ip), Some(c)) =
            (p["metadata"]["name"].as_str(), p["status"]["podIP"].as_str(), client.as_ref())
        else {
            continue;
        };
        let Ok(resp) = c.get(format!("http://{ip}:2379/metrics")).send().await else { continue };
        let Ok(text) = resp.text().await else { continue };
        if let Some(v) = text
            .lines()
            .find(|l| l.starts_with("etcd_server_leader_changes_seen_total "))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
        {
            out.insert(name.to_string(), v);
        }
    }
    out
}

fn fmt_counts(m: &BTreeMap<String, f64>) -> String {
    format!(
        "{} (sum {})",
        m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "),
        m.values().sum::<f64>()
    )
}

async fn delete_member(env: &Env, zones: &BTreeMap<String, String>) -> (bool, String) {
    let target = "dlock-etcd-1";
    let before = leader_changes(env).await;
    let old_uid = env
        .json(&["-n", "dlock", "get", "pod", target, "-o", "json"])
        .await
        .and_then(|p| p["metadata"]["uid"].as_str().map(str::to_string));
    let term_before = env
        .json(&[
            "-n",
            "dlock",
            "exec",
            "dlock-etcd-0",
            "--",
            "etcdctl",
            "endpoint",
            "status",
            "-w",
            "json",
        ])
        .await
        .and_then(|v| v[0]["Status"]["raftTerm"].as_u64());
    let t0 = Instant::now();
    let del = env.k(&["-n", "dlock", "delete", "pod", target]).await;
    if !del.ok {
        return (false, format!("kubectl delete pod: {}", one_line(&del.stderr)));
    }
    // The replacement: a new UID, Running and Ready, then a healthy list.
    let mut replaced = None;
    while t0.elapsed() < Duration::from_secs(300) {
        if let Some(p) = env.json(&["-n", "dlock", "get", "pod", target, "-o", "json"]).await
            && p["metadata"]["uid"].as_str().map(str::to_string) != old_uid
            && ready(&p)
        {
            replaced = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let Some(p) = replaced else {
        return (false, format!("{target} was not recreated and Ready within 300 s"));
    };
    let ready_after = t0.elapsed();
    let healthy_after = wait_healthy(env, Duration::from_secs(120)).await.map(|d| ready_after + d);
    let node = p["spec"]["nodeName"].as_str().unwrap_or("").to_string();
    let node_zone = zones.get(&node).cloned().unwrap_or_default();
    let pv_zone = async {
        let pvc = env.json(&["-n", "dlock", "get", "pvc", &format!("data-{target}"), "-o", "json"]).await?;
        let pv = env.json(&["get", "pv", pvc["spec"]["volumeName"].as_str()?, "-o", "json"]).await?;
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0].as_str().map(str::to_string)
    }
    .await
    .unwrap_or_default();
    let after = leader_changes(env).await;
    let term_after = env
        .json(&[
            "-n",
            "dlock",
            "exec",
            "dlock-etcd-0",
            "--",
            "etcdctl",
            "endpoint",
            "status",
            "-w",
            "json",
        ])
        .await
        .and_then(|v| v[0]["Status"]["raftTerm"].as_u64());
    let ok = healthy_after.is_some() && !node_zone.is_empty() && node_zone == pv_zone;
    (
        ok,
        format!(
            "deleted {target}: recreated Ready on {node} ({node_zone}; its PV is pinned to {pv_zone}) after {:.1} s, healthy 3-endpoint list after {}; leader_changes_seen_total before {} after {}; raft term {} -> {}",
            ready_after.as_secs_f64(),
            healthy_after
                .map(|d| format!("{:.1} s", d.as_secs_f64()))
                .unwrap_or_else(|| "never (120 s)".into()),
            fmt_counts(&before),
            fmt_counts(&after),
            term_before.map(|t| t.to_string()).unwrap_or_else(|| "?".into()),
            term_after.map(|t| t.to_string()).unwrap_or_else(|| "?".into()),
        ),
    )
}

/// §6, each command as the spec writes it. The fourth runs `sh` and `wget` in the member,
/// which the upstream distroless image has neither of (on GKE too): that line is reported
/// and the counter read from the member's /metrics instead.
async fn verification(env: &Env) -> (bool, String) {
    let (applied, mut ev) = apply_and_rollout(env).await;
    let (listed, tables) = status_and_member_tables(env).await;
    ev.push_str("; ");
    ev.push_str(&tables.join("; "));
    let (counted, line) = leader_changes_by_metrics(env).await;
    ev.push_str("; ");
    ev.push_str(&line);
    let cc = env
        .k(&[
            "-n",
            "dlock",
            "get",
            "pods",
            "-o",
            "custom-columns=NAME:.metadata.name,ZONE:.spec.nodeName",
        ])
        .await;
    print_indented(&cc.stdout);
    ev.push_str("; custom-columns listing printed above");
    (applied && listed && counted && cc.ok, ev)
}

/// §6's `kubectl apply -f deploy/k8s/etcd/ -R` and `kubectl rollout status`.
async fn apply_and_rollout(env: &Env) -> (bool, String) {
    let a = env.k(&["apply", "-f", "deploy/k8s/etcd/", "-R"]).await;
    let b = env
        .run(
            &env.kubectl.clone(),
            &["-n", "dlock", "rollout", "status", "sts/dlock-etcd", "--timeout=5m"],
            &[],
            Duration::from_secs(330),
        )
        .await;
    (
        a.ok && b.ok,
        format!(
            "apply + rollout status: {}",
            if a.ok && b.ok {
                one_line(b.stdout.lines().last().unwrap_or(""))
            } else {
                one_line(&(a.stderr + &b.stderr))
            }
        ),
    )
}

/// §6's `etcdctl endpoint status -w table` and `member list -w table` inside a member,
/// printed; passes with three members started.
async fn status_and_member_tables(env: &Env) -> (bool, Vec<String>) {
    let st = env
        .k(&[
            "-n",
            "dlock",
            "exec",
            "dlock-etcd-0",
            "--",
            "etcdctl",
            "--endpoints=http://localhost:2379",
            "endpoint",
            "status",
            "-w",
            "table",
        ])
        .await;
    print_indented(&st.stdout);
    let ml = env
        .k(&[
            "-n",
            "dlock",
            "exec",
            "dlock-etcd-0",
            "--",
            "etcdctl",
            "member",
            "list",
            "-w",
            "table",
        ])
        .await;
    print_indented(&ml.stdout);
    let started = ml.stdout.matches("| started |").count();
    (
        st.ok && ml.ok && started == 3,
        vec![
            format!("endpoint status -w table: exit {}", st.code),
            format!("member list: {started} started"),
        ],
    )
}

/// §6's `wget .../metrics | grep leader_changes` in a member (which fails on the distroless
/// image), the etcd README's API-server pod proxy instead, and every member's counter.
async fn leader_changes_by_metrics(env: &Env) -> (bool, String) {
    let w = env
        .k(&[
            "-n",
            "dlock",
            "exec",
            "dlock-etcd-0",
            "--",
            "sh",
            "-c",
            "wget -qO- localhost:2379/metrics | grep leader_changes",
        ])
        .await;
    // The etcd README's replacement for it: the API server's pod proxy.
    let raw = env
        .k(&["get", "--raw", "/api/v1/namespaces/dlock/pods/dlock-etcd-0:2379/proxy/metrics"])
        .await;
    let proxied = raw
        .stdout
        .lines()
        .find(|l| l.starts_with("etcd_server_leader_changes_seen_total "))
        .map(str::to_string);
    let counts = leader_changes(env).await;
    let line = format!(
        "sh -c 'wget ...': exit {} ({}), as on GKE's distroless image; the README's `kubectl get --raw .../pods/dlock-etcd-0:2379/proxy/metrics` instead: {}; every member: {}",
        w.code,
        one_line(w.stderr.lines().next().unwrap_or("")),
        proxied.clone().unwrap_or_else(|| format!("failed: {}", one_line(&raw.stderr))),
        fmt_counts(&counts)
    );
    (counts.len() == 3 && proxied.is_some(), line)
}
