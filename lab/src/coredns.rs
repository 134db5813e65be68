//! Cluster DNS: CoreDNS v1.15.0 (built from github.com/coredns/coredns) with its
//! `kubernetes` plugin, run as a process on the host's bridge address, which every
//! kubelet's `clusterDNS` names. A process rather than GKE's Deployment behind a Service:
//! one replica as a pod would make a drain or eviction of its node a DNS outage that GKE's
//! replicated kube-dns (with its PDB) does not have, and the tests drain nodes; the
//! answers are the same plugin's. Its identity is `system:coredns` with the ClusterRole
//! kubeadm gives CoreDNS.

use crate::error::{Error, KubeContext, Result};
use crate::pki::{Pki, write};
use crate::proc::{Proc, last_line};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

/// kubeadm's Corefile for CoreDNS, less `health`, `ready` and `prometheus` (fixed ports a
/// second cluster beside this one would collide on) and with `bind` to the bridge address.
fn corefile(bind: Ipv4Addr, kubeconfig: &Path) -> String {
    format!(
        ".:53 {{
    bind {bind}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kc}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    forward . /etc/resolv.conf
    cache 30
    loop
    loadbalance
}}
",
        kc = kubeconfig.display()
    )
}

/// The ClusterRole kubeadm binds to CoreDNS's ServiceAccount, bound here to its user.
async fn rbac(client: &Client) -> Result<()> {
    let objs = [
        (
            ApiResource::erase::<k8s_openapi::api::rbac::v1::ClusterRole>(&()),
            serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "system:coredns"},
                "rules": [
                    {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
                    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
                ],
            }),
        ),
        (
            ApiResource::erase::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(&()),
            serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "system:coredns"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:coredns"}],
            }),
        ),
    ];
    for (ar, obj) in objs {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        api.patch(&name, &PatchParams::apply("lw-lab").force(), &Patch::Apply(&obj))
            .await
            .kctx(|| format!("apply {} {name}", ar.kind))?;
    }
    Ok(())
}

/// Starts CoreDNS and returns once it answers for the cluster domain.
pub async fn start(
    client: &Client,
    pki: &Pki,
    server: &str,
    coredns: &Path,
    dir: &Path,
    bind: Ipv4Addr,
) -> Result<Proc> {
    rbac(client).await?;
    let id = pki
        .tokens
        .iter()
        .find(|t| t.user == "system:coredns")
        .cloned()
        .ok_or_else(|| Error::Command("no CoreDNS identity".into()))?;
    let kc = pki.dir.join("coredns.kubeconfig");
    pki.write_kubeconfig(&kc, server, &id)?;
    let conf = dir.join("Corefile");
    write(&conf, &corefile(bind, &kc))?;
    let mut p = Proc::spawn(
        "coredns",
        coredns,
        &[format!("-conf={}", conf.display())],
        dir.join("logs/coredns.log"),
    )?;
    let start = Instant::now();
    let mut last = String::from("no answer yet");
    while start.elapsed() < Duration::from_secs(30) {
        p.check_running()?;
        match lookup(bind, "kubernetes.default.svc.cluster.local").await {
            Ok(true) => return Ok(p),
            Ok(false) => last = "no A record for kubernetes.default.svc.cluster.local".into(),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Err(Error::NotReady {
        component: "coredns".into(),
        secs: 30,
        detail: format!("{last}; last log line: {}", last_line(&p.log)),
        log: p.log.clone(),
    })
}

/// One A query over UDP (a readiness check; the tests resolve through the pods' own
/// resolv.conf).
async fn lookup(server: Ipv4Addr, name: &str) -> std::result::Result<bool, String> {
    let mut q = vec![0x4c, 0x77, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    let sock = tokio::net::UdpSocket::bind("0.0.0.0:0").await.map_err(|e| e.to_string())?;
    sock.send_to(&q, (server, 53)).await.map_err(|e| e.to_string())?;
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(1), sock.recv(&mut buf))
        .await
        .map_err(|_| "no answer in 1 s".to_string())?
        .map_err(|e| e.to_string())?;
    // Answer count (bytes 6-7) and RCODE (low bits of byte 3).
    Ok(n >= 12 && buf[3] & 0x0f == 0 && u16::from_be_bytes([buf[6], buf[7]]) > 0)
}
