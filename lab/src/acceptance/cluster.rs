//! The cluster as the criteria read it: pods ready or not, the nodes' zones, etcdctl's
//! endpoint status inside a member (criterion 4), a member frozen and thawed, the healthy
//! list and the wait for it, each member's leader changes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::*;

pub(super) fn print_indented(s: &str) {
    for l in s.lines() {
        println!("    {l}");
    }
}

/// "; not Ready: dlock-etcd-1 (Running, etcd waiting CrashLoopBackOff: ...)" for the pods that are not.
pub(super) fn not_ready(items: &[Value]) -> String {
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

pub(super) fn ready(p: &Value) -> bool {
    p["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

pub(super) async fn node_zones(env: &Env) -> BTreeMap<String, String> {
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

pub(super) async fn endpoint_status(env: &Env) -> (bool, String) {
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
pub(super) async fn freeze(env: &Env, pod: &str, stop: bool) -> Option<i32> {
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

pub(super) async fn healthy(env: &Env) -> bool {
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

pub(super) async fn wait_healthy(env: &Env, within: Duration) -> Option<Duration> {
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
pub(super) async fn leader_changes(env: &Env) -> BTreeMap<String, f64> {
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

pub(super) fn fmt_counts(m: &BTreeMap<String, f64>) -> String {
    format!(
        "{} (sum {})",
        m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "),
        m.values().sum::<f64>()
    )
}
