//! Criterion 6 (a deleted member comes back, in its disk's zone) and T-056's §6
//! verification, command by command.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::*;

pub(super) async fn delete_member(env: &Env, zones: &BTreeMap<String, String>) -> (bool, String) {
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
pub(super) async fn verification(env: &Env) -> (bool, String) {
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
pub(super) async fn apply_and_rollout(env: &Env) -> (bool, String) {
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
pub(super) async fn status_and_member_tables(env: &Env) -> (bool, Vec<String>) {
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
pub(super) async fn leader_changes_by_metrics(env: &Env) -> (bool, String) {
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
