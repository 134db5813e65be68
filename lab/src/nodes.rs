//! The Nodes: one per zone, each registered by its own identity (`system:node:<name>`, so
//! the Node authorizer and NodeRestriction apply as on a real cluster), with a Lease renewed
//! every 10 s and a status heartbeat, so the node-lifecycle controller keeps them Ready.

use crate::error::{KubeContext, Result};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::net::Ipv4Addr;
use std::time::Duration;

pub const KUBELET_PORT: u16 = 10250;

#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    pub zone: String,
    pub region: String,
    pub ip: Ipv4Addr,
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

fn conditions(t: &str) -> serde_json::Value {
    let c = |ty: &str, status: &str, reason: &str, msg: &str| json!({"type": ty, "status": status, "reason": reason, "message": msg, "lastHeartbeatTime": t, "lastTransitionTime": t});
    json!([
        c(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available"
        ),
        c("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        c(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available"
        ),
        c("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ])
}

pub async fn register(client: &Client, n: &NodeSpec, kube_version: &str) -> Result<()> {
    let t = now();
    // 4 CPU / 16 GiB per node: room for dlock's three 500m/1Gi members and leaderwatch.
    let resources =
        json!({"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n.name, "labels": {
            "kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": n.zone, "topology.kubernetes.io/region": n.region,
            "node.kubernetes.io/instance-type": "lw-lab-process",
        }},
        "spec": {},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": conditions(&t),
            "addresses": [{"type": "InternalIP", "address": n.ip.to_string()}, {"type": "Hostname", "address": n.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
            "nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "lw-lab process kubelet",
                "containerRuntimeVersion": "runc://1.1.5", "kubeletVersion": kube_version, "kubeProxyVersion": "",
                "operatingSystem": "linux", "architecture": "amd64",
            },
        },
    }))
    .map_err(|e| crate::error::Error::Command(format!("node object: {e}")))?;
    let api: Api<Node> = Api::all(client.clone());
    api.create(&PostParams::default(), &node).await.kctx(|| format!("register node {}", n.name))?;
    Ok(())
}

/// Renews the node's Lease every 10 s and its Ready heartbeat every 60 s, until cancelled.
pub async fn heartbeat(client: Client, n: NodeSpec) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let nodes: Api<Node> = Api::all(client);
    let mut tick = 0u64;
    loop {
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": n.name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": n.name, "leaseDurationSeconds": 40, "renewTime": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()},
        });
        let pp = PatchParams::apply("lw-lab-kubelet").force();
        if let Err(e) = tokio::time::timeout(
            Duration::from_secs(10),
            leases.patch(&n.name, &pp, &Patch::Apply(&lease)),
        )
        .await
        .map_err(|_| "timeout".to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
        {
            tracing::warn!("lease of node {}: {e}", n.name);
        }
        if tick.is_multiple_of(6) {
            // Heartbeat only: lastTransitionTime stays as registered (merge by condition type).
            let t = now();
            let beats: Vec<_> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
                .iter()
                .map(|ty| json!({"type": ty, "lastHeartbeatTime": t}))
                .collect();
            let p = json!({"status": {"conditions": beats}});
            if let Err(e) = tokio::time::timeout(
                Duration::from_secs(10),
                nodes.patch_status(&n.name, &PatchParams::default(), &Patch::Strategic(&p)),
            )
            .await
            .map_err(|_| "timeout".to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
            {
                tracing::warn!("status of node {}: {e}", n.name);
            }
        }
        tick += 1;
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
}
