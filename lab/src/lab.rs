//! The whole local cluster, started and stopped as one: the node network, credentials, the
//! control plane, three nodes in three zones made of the real kubelet, containerd and
//! kube-proxy, GKE's StorageClasses with the directory-backed provisioner, and CoreDNS.

use crate::control_plane::{Binaries, ControlPlane};
use crate::error::{Error, IoContext, KubeContext, Result};
use crate::images::Archive;
use crate::net::{self, Network};
use crate::node::{self, Cluster, Node, NodeBinaries, NodeKit, NodeSpec};
use crate::pki::{Identity, Pki};
use crate::proc::Proc;
use crate::registry::{self, alive};
use crate::storage::{self, Provisioner};
use k8s_openapi::api::core::v1::Node as NodeObject;
use kube::Client;
use kube::api::Api;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// The Kubernetes version the harness runs: the one lab/go/kube/go.mod requires, which
/// `make kube-tools` builds into .tools/kube-<version>/bin.
pub const KUBE_VERSION: &str = pinned(include_str!("../go/kube/go.mod"), b"\tk8s.io/kubernetes ");
/// The nodes' containerd: the version lab/go/node/containerd/go.mod requires.
pub const CONTAINERD_VERSION: &str =
    pinned(include_str!("../go/node/containerd/go.mod"), b"\tgithub.com/containerd/containerd/v2 ");

/// The version a wrapper go.mod requires of a module (`needle` is its require line's start).
const fn pinned(go_mod: &'static str, needle: &[u8]) -> &'static str {
    let b = go_mod.as_bytes();
    let mut i = 0;
    while i + needle.len() < b.len() {
        let mut j = 0;
        while j < needle.len() && b[i + j] == needle[j] {
            j += 1;
        }
        if j == needle.len() {
            let start = i + j;
            let mut end = start;
            while end < b.len() && b[end] != b'\n' && b[end] != b' ' {
                end += 1;
            }
            let (_, rest) = go_mod.split_at(start);
            let (v, _) = rest.split_at(end - start);
            return v;
        }
        i += 1;
    }
    panic!("a wrapper go.mod lacks a pinned module")
}
/// `kubectl` arguments that list dlock's etcd member pods (add `-o <format>`).
pub const MEMBER_PODS: [&str; 6] =
    ["-n", "dlock", "get", "pods", "-l", "app.kubernetes.io/name=dlock-etcd"];

pub const REGION: &str = "europe-west1";
pub const ZONES: [&str; 3] = ["europe-west1-b", "europe-west1-c", "europe-west1-d"];

/// (name, zone, address) of a node, as state.json lists them.
pub type NodeRow = (String, String, String);

pub struct Options {
    pub dir: PathBuf,
    pub tools: PathBuf,
    /// Extra kube-apiserver flags (e.g. `--etcd-compaction-interval=10s`).
    pub apiserver_args: Vec<String>,
    /// A surge node joins a zone when one of its nodes is cordoned, as a GKE surge upgrade
    /// adds one (`--surge-nodes`): a drained member then has a node to come back on.
    pub surge: bool,
    /// Images served from OCI layouts besides etcd's (`--image`).
    pub images: Vec<crate::images::OciSource>,
    /// Every volume on lw-slowfs, so that `lw-lab fault disk` can slow its fsync
    /// (`--disk-faults`; off, a volume is a plain directory).
    pub disk_faults: bool,
}

/// state.json: what `down`, `status` and tests read about a running cluster.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct State {
    pub pid: u32,
    pub id: String,
    pub server: String,
    pub kubeconfig: PathBuf,
    pub kubectl: PathBuf,
    pub bridge: String,
    pub pod_cidr: String,
    /// The nodes' runc state directory (every node's), and the runc that reads it.
    pub runc_root: PathBuf,
    pub runc: PathBuf,
    pub audit_log: PathBuf,
    pub nodes: Vec<NodeRow>,
    /// The control plane's processes (kube-apiserver, ...), for tests that signal them.
    #[serde(default)]
    pub pids: std::collections::BTreeMap<String, u32>,
}

pub struct Lab {
    pub state: State,
    cp: ControlPlane,
    coredns: Proc,
    /// The nodes, surge nodes included once they join.
    nodes: Arc<Mutex<Vec<Node>>>,
    tasks: Vec<JoinHandle<()>>,
    dir: PathBuf,
    runc: PathBuf,
}

pub fn state_path(dir: &Path) -> PathBuf {
    dir.join("state.json")
}

pub fn read_state(dir: &Path) -> Option<State> {
    serde_json::from_slice(&std::fs::read(state_path(dir)).ok()?).ok()
}

fn random_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{:04x}", (nanos ^ std::process::id()) & 0xffff)
}

pub async fn client_from(kubeconfig: &Path) -> Result<Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| Error::Command(format!("read {}: {e}", kubeconfig.display())))?;
    let mut cfg =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Command(format!("kubeconfig {}: {e}", kubeconfig.display())))?;
    cfg.connect_timeout = Some(Duration::from_secs(5));
    cfg.read_timeout = Some(Duration::from_secs(330));
    Client::try_from(cfg).kctx(|| "API client".into())
}

impl Lab {
    pub async fn start(o: &Options) -> Result<Lab> {
        let bins = Binaries::find(&o.tools, KUBE_VERSION)?;
        let node_bins = NodeBinaries::find(&o.tools, KUBE_VERSION)?;
        if let Some(s) = read_state(&o.dir)
            && alive(s.pid)
        {
            return Err(Error::Leftover(format!(
                "a local cluster is already running (pid {}, {})",
                s.pid,
                o.dir.display()
            )));
        }
        let left = net::leftovers().await?;
        if !left.is_empty() {
            return Err(Error::Leftover(left.join(", ")));
        }
        if o.dir.exists() {
            let prev = o.dir.with_extension("previous");
            let _ = std::fs::remove_dir_all(&prev);
            std::fs::rename(&o.dir, &prev)
                .ctx(|| format!("move the previous run's {} aside", o.dir.display()))?;
        }
        std::fs::create_dir_all(o.dir.join("logs"))
            .ctx(|| format!("create {}", o.dir.display()))?;
        let id = random_id();
        // Registered before its first name exists, so that a cluster starting beside it never
        // takes its names for leftovers.
        registry::register(&id, std::process::id())?;
        let net = match Network::create(&id).await {
            Ok(n) => Arc::new(n),
            Err(e) => {
                registry::unregister(&id);
                return Err(e);
            }
        };
        match Self::start_on(o, bins, node_bins.clone(), id.clone(), net.clone()).await {
            Ok(lab) => Ok(lab),
            Err(e) => {
                let _ = node::teardown(&o.dir, &node_bins.bin.join("runc"), &|n| {
                    n.starts_with(&format!("{}{id}", net::PREFIX))
                })
                .await;
                registry::unregister(&id);
                let _ = net::remove_leftovers().await;
                Err(e)
            }
        }
    }

    /// Everything after the network: credentials, the control plane, the cluster's
    /// services and its nodes; whatever started is stopped again if a later step fails.
    async fn start_on(
        o: &Options,
        bins: Binaries,
        node_bins: NodeBinaries,
        id: String,
        net: Arc<Network>,
    ) -> Result<Lab> {
        let dir = o.dir.clone();
        let mut pki = Pki::create(&dir.join("pki"))?;
        let plan = identities(&mut pki, o.surge);
        let cp =
            ControlPlane::start(&dir, &bins, &mut pki, net.gateway, &plan.admin, &o.apiserver_args)
                .await?;
        let client = client_from(&cp.admin_kubeconfig).await?;
        let mut up =
            Started { cp, client, coredns: None, nodes: Arc::default(), tasks: Vec::new() };
        let rows = match up.services_and_nodes(o, &mut pki, &node_bins, &id, &net, &plan).await {
            Ok(x) => x,
            Err(e) => {
                up.stop().await;
                return Err(e);
            }
        };
        let Started { cp, coredns, nodes, tasks, .. } = up;
        let coredns = coredns.ok_or_else(|| Error::Command("CoreDNS did not start".into()))?;
        let mut lab = Lab {
            state: State {
                pid: std::process::id(),
                id,
                server: cp.server.clone(),
                kubeconfig: cp.admin_kubeconfig.clone(),
                kubectl: bins.kubectl.clone(),
                bridge: net.bridge.clone(),
                pod_cidr: net.cidr(),
                runc_root: node::container_root(&dir),
                runc: node_bins.bin.join("runc"),
                audit_log: cp.audit_log.clone(),
                nodes: rows,
                pids: Default::default(),
            },
            cp,
            coredns,
            nodes,
            tasks,
            dir,
            runc: node_bins.bin.join("runc"),
        };
        lab.state.pids = lab.pids().await;
        write_state(&lab.dir, &lab.state)?;
        Ok(lab)
    }

    /// Every component's pid by name (tests freeze or signal them).
    async fn pids(&self) -> std::collections::BTreeMap<String, u32> {
        let mut p = self.cp.pids();
        if let Some(pid) = self.coredns.pid() {
            p.insert("coredns".into(), pid);
        }
        for n in self.nodes.lock().await.iter() {
            p.extend(n.pids());
        }
        p
    }

    /// SIGUSR1: the API server restarted in place (state.json gets its new pid).
    pub async fn restart_apiserver(&mut self) -> Result<()> {
        self.cp.restart_apiserver().await?;
        self.state.pids = self.pids().await;
        write_state(&self.dir, &self.state)
    }

    /// A component that has died, by name.
    pub async fn check(&mut self) -> Result<()> {
        self.cp.check()?;
        self.coredns.check_running()?;
        for n in self.nodes.lock().await.iter_mut() {
            n.check()?;
        }
        Ok(())
    }

    pub async fn stop(mut self) {
        for t in &self.tasks {
            t.abort();
        }
        // The nodes' processes first, then their pods (SIGKILL: the cluster is going away,
        // nobody observes them), mounts and cgroups; then the control plane.
        for n in self.nodes.lock().await.iter_mut() {
            n.stop().await;
        }
        let prefix = format!("{}{}", net::PREFIX, self.state.id);
        node::teardown(&self.dir, &self.runc, &|n| n.starts_with(&prefix)).await;
        self.coredns.stop(Duration::from_secs(5)).await;
        self.cp.stop().await;
        // Its own names removed while it is registered (a cluster starting beside it would
        // take them for a killed run's), then unregistered, then any a killed run left.
        let _ = net::remove_own(&self.state.id).await;
        registry::unregister(&self.state.id);
        let _ = net::remove_leftovers().await;
        let _ = std::fs::remove_file(state_path(&self.dir));
        let _ = std::fs::remove_file(self.dir.join("ready"));
    }
}

/// The identities the API server's token file must hold from its start (it reads the file
/// once): the admin's, the components', and every node's, surge nodes' included.
struct Identities {
    admin: Identity,
    proxy: Identity,
    /// The three nodes, one per zone.
    specs: Vec<NodeSpec>,
    /// With --surge-nodes, one per zone, joining when a node of it is cordoned.
    surge_specs: Vec<NodeSpec>,
}

fn identities(pki: &mut Pki, surge: bool) -> Identities {
    let admin = pki.add_identity("admin", "lw-lab:admin", &["system:masters"]);
    pki.add_identity("kube-controller-manager", "system:kube-controller-manager", &[]);
    pki.add_identity("kube-scheduler", "system:kube-scheduler", &[]);
    let proxy = pki.add_identity("kube-proxy", "system:kube-proxy", &[]);
    pki.add_identity("coredns", "system:coredns", &[]);
    let mut specs = Vec::new();
    let mut surge_specs = Vec::new();
    for (i, zone) in ZONES.iter().enumerate() {
        let name = format!("lw-node-{}", zone.rsplit('-').next().unwrap_or("x"));
        // Its identity must be in the API server's token file from the start.
        pki.add_identity(&name, &format!("system:node:{name}"), &["system:nodes"]);
        specs.push(NodeSpec {
            name: name.clone(),
            zone: zone.to_string(),
            region: REGION.into(),
            index: i as u8,
        });
        if surge {
            let name = format!("{name}-surge");
            pki.add_identity(&name, &format!("system:node:{name}"), &["system:nodes"]);
            surge_specs.push(NodeSpec {
                name,
                zone: zone.to_string(),
                region: REGION.into(),
                index: (ZONES.len() + i) as u8,
            });
        }
    }
    Identities { admin, proxy, specs, surge_specs }
}

/// What `Lab::start_on` has started so far: stopped as a whole if a later step fails, or
/// handed to the `Lab` once every node is schedulable.
struct Started {
    cp: ControlPlane,
    client: Client,
    coredns: Option<Proc>,
    nodes: Arc<Mutex<Vec<Node>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Started {
    /// The cluster's services, its nodes, the surge watcher and the provisioner, in that
    /// order, until every node is Ready and schedulable; returns the nodes for state.json.
    async fn services_and_nodes(
        &mut self,
        o: &Options,
        pki: &mut Pki,
        node_bins: &NodeBinaries,
        id: &str,
        net: &Arc<Network>,
        plan: &Identities,
    ) -> Result<Vec<NodeRow>> {
        let cluster = self.services(o, pki, node_bins, id, net, &plan.proxy).await?;
        let rows = self.start_nodes(pki, &cluster, &plan.specs, net).await?;
        if !plan.surge_specs.is_empty() {
            let kits = plan
                .surge_specs
                .iter()
                .map(|n| kit(pki, &self.cp.server, n, net))
                .collect::<Result<Vec<_>>>()?;
            self.tasks.push(tokio::spawn(surge_on_cordon(
                self.client.clone(),
                kits,
                cluster.clone(),
                net.clone(),
                self.nodes.clone(),
            )));
        }
        let slowfs = o.disk_faults.then(|| node_bins.slowfs());
        let prov = Provisioner::new(self.client.clone(), o.dir.join("volumes"), slowfs);
        self.tasks.push(tokio::spawn(prov.run()));
        wait_nodes_schedulable(&self.client, plan.specs.len(), &self.nodes).await?;
        Ok(rows)
    }

    /// What the nodes need before they start: GKE's StorageClasses, the Autopilot policies
    /// (in effect before any pod), the images they import, CoreDNS (every kubelet's
    /// clusterDNS) and kube-proxy's kubeconfig; returns what every node shares.
    async fn services(
        &mut self,
        o: &Options,
        pki: &Pki,
        node_bins: &NodeBinaries,
        id: &str,
        net: &Network,
        proxy: &Identity,
    ) -> Result<Cluster> {
        let dir = &o.dir;
        storage::create_classes(&self.client).await?;
        crate::policies::apply(&self.client).await?;
        let images: Vec<Archive> = crate::images::prepare(
            &dir.join("images"),
            &o.tools.join("bin"),
            &node_bins.bin,
            &o.images,
        )?;
        self.coredns = Some(
            crate::coredns::start(
                &self.client,
                pki,
                &self.cp.server,
                &node_bins.bin.join("coredns"),
                dir,
                net.gateway,
            )
            .await?,
        );
        let proxy_kubeconfig = pki.dir.join("kube-proxy.kubeconfig");
        pki.write_kubeconfig(&proxy_kubeconfig, &self.cp.server, proxy)?;
        Ok(Cluster {
            id: id.to_string(),
            dir: dir.clone(),
            bins: node_bins.clone(),
            ca_file: pki.dir.join("ca.crt"),
            dns: net.gateway,
            images,
            proxy_kubeconfig,
            pod_cidr: net.cidr(),
        })
    }

    /// The nodes, started together (their kubelets take turns at start-up, see node.rs);
    /// returns them as state.json lists them. The first node that fails fails the start.
    async fn start_nodes(
        &self,
        pki: &mut Pki,
        cluster: &Cluster,
        specs: &[NodeSpec],
        net: &Network,
    ) -> Result<Vec<NodeRow>> {
        let kits =
            specs.iter().map(|n| kit(pki, &self.cp.server, n, net)).collect::<Result<Vec<_>>>()?;
        let started = futures::future::join_all(kits.iter().map(|k| async {
            let nn = net.add_node(k.spec.index).await?;
            Node::start(cluster, k, nn).await
        }))
        .await;
        let mut rows = Vec::new();
        for n in started {
            let n = n?;
            rows.push((n.spec.name.clone(), n.spec.zone.clone(), n.net.ip.to_string()));
            self.nodes.lock().await.push(n);
        }
        Ok(rows)
    }

    /// A start that failed half-way: the watchers, the nodes, CoreDNS, the control plane.
    async fn stop(mut self) {
        for t in &self.tasks {
            t.abort();
        }
        for n in self.nodes.lock().await.iter_mut() {
            n.stop().await;
        }
        if let Some(mut p) = self.coredns.take() {
            p.stop(Duration::from_secs(5)).await;
        }
        self.cp.stop().await;
    }
}

/// A node's credentials (the identity made before the API server started) and its
/// kubelet's serving certificate, for its address and name.
fn kit(pki: &mut Pki, server: &str, n: &NodeSpec, net: &Network) -> Result<NodeKit> {
    let id = pki
        .tokens
        .iter()
        .find(|t| t.name == n.name)
        .cloned()
        .ok_or_else(|| Error::Command(format!("no identity for node {}", n.name)))?;
    let kubeconfig = pki.dir.join(format!("{}.kubeconfig", n.name));
    pki.write_kubeconfig(&kubeconfig, server, &id)?;
    let (tls_crt, tls_key) = pki.leaf(
        &format!("kubelet-{}", n.name),
        &format!("system:node:{}", n.name),
        &["system:nodes"],
        &[&n.name],
        &[IpAddr::V4(net.node_ip(n.index))],
        true,
    )?;
    Ok(NodeKit { spec: n.clone(), kubeconfig, tls_crt, tls_key })
}

/// A cordoned node with this annotation gets no surge node: a test measures both cases
/// on one cluster.
pub const NO_SURGE: &str = "lw-lab/no-surge";

/// `--surge-nodes`: when a node is cordoned, its zone's surge node joins (once), as a GKE
/// surge upgrade adds an upgraded node before it drains the old one. A joined node is the
/// cluster's like the others (stopped with them).
async fn surge_on_cordon(
    client: Client,
    kits: Vec<NodeKit>,
    cluster: Cluster,
    net: Arc<Network>,
    nodes: Arc<Mutex<Vec<Node>>>,
) {
    let api: Api<NodeObject> = Api::all(client);
    let mut waiting: Vec<Option<NodeKit>> = kits.into_iter().map(Some).collect();
    loop {
        if let Ok(Ok(list)) =
            tokio::time::timeout(Duration::from_secs(10), api.list(&Default::default())).await
        {
            for n in &list.items {
                let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
                let zone = n
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("topology.kubernetes.io/zone"))
                    .cloned();
                let opted_out =
                    n.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(NO_SURGE));
                if !cordoned || opted_out {
                    continue;
                }
                for slot in waiting.iter_mut() {
                    if slot.as_ref().is_some_and(|k| Some(&k.spec.zone) == zone.as_ref())
                        && let Some(kit) = slot.take()
                    {
                        let name = kit.spec.name.clone();
                        let started = match net.add_node(kit.spec.index).await {
                            Ok(nn) => Node::start(&cluster, &kit, nn).await,
                            Err(e) => Err(e),
                        };
                        match started {
                            Ok(node) => {
                                tracing::info!(
                                    "node {} cordoned: surge node {name} joined its zone",
                                    n.metadata.name.as_deref().unwrap_or("")
                                );
                                nodes.lock().await.push(node);
                            }
                            Err(e) => tracing::error!("surge node {name}: {e}"),
                        }
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Written beside and renamed over, so that a reader never sees it half-written.
/// Regression (make test, 2026-12-07): a test read state.json for the API server's new pid
/// while it was being rewritten, and found it empty.
fn write_state(dir: &Path, state: &State) -> Result<()> {
    let s = serde_json::to_vec_pretty(state).map_err(|e| Error::Command(format!("state: {e}")))?;
    let (path, tmp) = (state_path(dir), dir.join(".state.json.new"));
    std::fs::write(&tmp, s).ctx(|| "write state.json".into())?;
    std::fs::rename(&tmp, &path).ctx(|| "write state.json".into())
}

/// Every node Ready and without the not-ready taint the node-lifecycle controller lifts;
/// a node whose kubelet or containerd dies meanwhile fails at once, naming it.
async fn wait_nodes_schedulable(client: &Client, n: usize, nodes: &Mutex<Vec<Node>>) -> Result<()> {
    let api: Api<NodeObject> = Api::all(client.clone());
    let start = Instant::now();
    let mut detail = String::new();
    let within = Duration::from_secs(180);
    while start.elapsed() < within {
        for node in nodes.lock().await.iter_mut() {
            node.check()?;
        }
        if let Ok(list) = api.list(&Default::default()).await {
            let ok = list.items.iter().filter(|node| {
                let ready =
                    node.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| {
                        c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                    });
                let tainted =
                    node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| {
                        t.iter().any(|t| t.key.starts_with("node.kubernetes.io/"))
                    });
                ready && !tainted
            });
            let count = ok.count();
            if count == n && list.items.len() == n {
                return Ok(());
            }
            detail = format!("{count} of {n} nodes Ready and schedulable");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(Error::NotReady {
        component: "nodes".into(),
        secs: within.as_secs(),
        detail,
        log: PathBuf::from("logs/lw-node-*-kubelet.log"),
    })
}

/// Kills what a killed run left: its containers and shims, mounts, cgroups, then its
/// network objects. A run of this very process (interrupted while starting) is
/// unregistered first.
pub async fn clean_leftovers(dir: &Path, tools: &Path) -> Vec<String> {
    registry::unregister_pid(std::process::id());
    let runc = tools.join("node/bin/runc");
    let mut removed =
        node::teardown(dir, &runc, &|n| net::ours(n) && !registry::live(&n[2..6])).await;
    removed.extend(net::remove_leftovers().await.unwrap_or_default());
    registry::forget_dead();
    let _ = std::fs::remove_file(state_path(dir));
    removed
}
