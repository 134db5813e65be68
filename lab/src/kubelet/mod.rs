//! The process kubelet: for every pod bound to one of its nodes it builds a sandbox (network
//! namespace, hosts, resolv.conf, volumes), runs each container from the manifest unmodified
//! through runc, runs its probes, restarts what exits with back-off, posts the kubelet's
//! Events, keeps the pod's status, and on deletion does what the kubelet does: SIGTERM, wait
//! the grace period, SIGKILL, then delete the pod with grace 0. Its HTTPS port serves `exec`
//! and `containerLogs` to the API server.

pub mod env;
mod pod;
pub mod probe;
pub mod runtime;
mod sandbox;
pub mod server;

use crate::images::Image;
use crate::net::Network;
use crate::nodes::NodeSpec;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// What the kubelets of all nodes share.
pub struct Shared {
    pub net: Arc<Network>,
    pub runc: runtime::Runc,
    pub images: Vec<Image>,
    pub dir: PathBuf,
    pub dns_ip: Ipv4Addr,
    /// KUBERNETES_SERVICE_HOST/PORT: the API server itself (no kube-proxy routes the ClusterIP).
    pub api_host: String,
    pub api_port: u16,
    /// Running containers by (namespace, pod, container), for exec and logs.
    pub registry: Mutex<HashMap<(String, String, String), ContainerEntry>>,
}

#[derive(Clone)]
pub struct ExecTarget {
    pub runc: runtime::Runc,
    pub id: String,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

#[derive(Clone)]
pub struct ContainerEntry {
    pub exec: Option<ExecTarget>,
    pub log: PathBuf,
    pub previous_log: Option<PathBuf>,
}

pub enum Msg {
    Exited { idx: usize, generation: u64, code: i32 },
    Probe { idx: usize, generation: u64, outcome: probe::Outcome },
}

pub struct Kubelet {
    pub client: Client,
    pub node: NodeSpec,
    pub shared: Arc<Shared>,
}

impl Kubelet {
    /// Watches this node's pods and keeps one worker per pod UID, until cancelled.
    pub async fn run(self) {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", self.node.name));
        let mut stream = watcher(pods, cfg).boxed();
        let mut workers: HashMap<String, watch::Sender<Option<Pod>>> = HashMap::new();
        let mut listing: Option<HashSet<String>> = None;
        while let Some(ev) = stream.next().await {
            workers.retain(|_, tx| !tx.is_closed());
            match ev {
                Ok(watcher::Event::Init) => listing = Some(HashSet::new()),
                Ok(watcher::Event::InitApply(p)) | Ok(watcher::Event::Apply(p)) => {
                    let uid = p.metadata.uid.clone().unwrap_or_default();
                    if let Some(l) = listing.as_mut() {
                        l.insert(uid.clone());
                    }
                    match workers.get(&uid) {
                        Some(tx) => {
                            let _ = tx.send(Some(p));
                        }
                        None => {
                            let (tx, rx) = watch::channel(Some(p));
                            workers.insert(uid, tx);
                            let w = pod::Worker::new(
                                self.client.clone(),
                                self.node.clone(),
                                self.shared.clone(),
                                rx,
                            );
                            tokio::spawn(w.run());
                        }
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    // After a relist, a pod that is gone was deleted while we were not watching.
                    if let Some(seen) = listing.take() {
                        for (uid, tx) in &workers {
                            if !seen.contains(uid) {
                                let _ = tx.send(None);
                            }
                        }
                    }
                }
                Ok(watcher::Event::Delete(p)) => {
                    if let Some(tx) = workers.get(&p.metadata.uid.clone().unwrap_or_default()) {
                        let _ = tx.send(None);
                    }
                    tracing::debug!(
                        "pod {}/{} deleted",
                        p.namespace().unwrap_or_default(),
                        p.name_any()
                    );
                }
                Err(e) => tracing::warn!("kubelet {} pod watch: {e}", self.node.name),
            }
        }
    }
}
