//! The criteria 1-3, 5, 7 and 8 and leaderwatch's preflight, each one PASS/FAIL line with
//! its evidence (4 and 6 read the cluster: cluster.rs, verification.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use super::*;

/// Criterion 1, with a negative control so that a dry run that accepts anything fails here;
/// leaderwatch's own RBAC, Job and Deployment are dry-run too.
pub(super) async fn criterion_1(env: &Env, r: &mut Report) {
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
pub(super) async fn deploy(env: &Env) {
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
pub(super) async fn criterion_2(env: &Env, r: &mut Report) -> BTreeMap<String, String> {
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
pub(super) async fn criterion_3(env: &Env, r: &mut Report) {
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
pub(super) async fn criterion_5(env: &Env, r: &mut Report) {
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
pub(super) async fn preflight(env: &Env, r: &mut Report, leaderwatch: &Path) {
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
pub(super) async fn criterion_7(env: &Env, r: &mut Report) {
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
pub(super) fn criterion_8(env: &Env, r: &mut Report) {
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
