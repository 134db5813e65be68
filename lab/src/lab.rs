//! The whole local cluster, started and stopped as one: the pod network, credentials, the
//! control plane, three Nodes in three zones with their process kubelets, GKE's
//! StorageClasses with the directory-backed provisioner, and cluster DNS.

use crate::control_plane::{Binaries, ControlPlane};
use crate::dns::Dns;
use crate::error::{Error, IoContext, KubeContext, Result};
use crate::kubelet::{self, Kubelet, Shared};
use crate::net::{self, Network};
use crate::nodes::{self, NodeSpec};
use crate::pki::Pki;
use crate::registry::{self, alive};
use crate::storage::{self, Provisioner};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// The Kubernetes version the harness runs: the one lab/go/kube/go.mod requires, which
/// `make kube-tools` builds into .tools/kube-<version>/bin.
pub const KUBE_VERSION: &str = kube_version();

const fn kube_version() -> &'static str {
    const GO_MOD: &str = include_str!("../go/kube/go.mod");
    const NEEDLE: &[u8] = b"\tk8s.io/kubernetes ";
    let b = GO_MOD.as_bytes();
    let mut i = 0;
    while i + NEEDLE.len() < b.len() {
        let mut j = 0;
        while j < NEEDLE.len() && b[i + j] == NEEDLE[j] {
            j += 1;
        }
        if j == NEEDLE.len() {
            let start = i + j;
            let mut end = start;
            while end < b.len() && b[end] != b'\n' && b[end] != b' ' {
                end += 1;
            }
            let (_, rest) = GO_MOD.split_at(start);
            let (v, _) = rest.split_at(end - start);
            return v;
        }
        i += 1;
    }
    panic!("lab/go/kube/go.mod requires no k8s.io/kubernetes version")
}
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
    pub runc_root: PathBuf,
    pub audit_log: PathBuf,
    pub nodes: Vec<NodeRow>,
    /// The control plane's processes (kube-apiserver, ...), for tests that signal them.
    #[serde(default)]
    pub pids: std::collections::BTreeMap<String, u32>,
}

pub struct Lab {
    pub state: State,
    pub shared: Arc<Shared>,
    cp: ControlPlane,
    tasks: Vec<JoinHandle<()>>,
    dir: PathBuf,
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
        if which("runc").is_none() {
            return Err(Error::MissingTool {
                what: "runc (Debian package runc)",
                path: PathBuf::from("runc"),
            });
        }
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
        std::fs::create_dir_all(&o.dir).ctx(|| format!("create {}", o.dir.display()))?;
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
        match Self::start_on(o, bins, id.clone(), net.clone()).await {
            Ok(lab) => Ok(lab),
            Err(e) => {
                registry::unregister(&id);
                let _ = net::remove_leftovers().await;
                Err(e)
            }
        }
    }

    async fn start_on(o: &Options, bins: Binaries, id: String, net: Arc<Network>) -> Result<Lab> {
        let dir = o.dir.clone();
        let mut pki = Pki::create(&dir.join("pki"))?;
        let admin = pki.add_identity("admin", "lw-lab:admin", &["system:masters"]);
        pki.add_identity("kube-controller-manager", "system:kube-controller-manager", &[]);
        pki.add_identity("kube-scheduler", "system:kube-scheduler", &[]);
        let mut node_specs = Vec::new();
        let mut surge_specs = Vec::new();
        for (i, zone) in ZONES.iter().enumerate() {
            let ip = net.add_node_ip(i as u8).await?;
            let name = format!("lw-node-{}", zone.rsplit('-').next().unwrap_or("x"));
            pki.add_identity(&name, &format!("system:node:{name}"), &["system:nodes"]);
            node_specs.push(NodeSpec {
                name: name.clone(),
                zone: zone.to_string(),
                region: REGION.into(),
                ip,
            });
            if o.surge {
                // Its identity must be in the API server's token file from the start.
                let ip = net.add_node_ip((ZONES.len() + i) as u8).await?;
                let name = format!("{name}-surge");
                pki.add_identity(&name, &format!("system:node:{name}"), &["system:nodes"]);
                surge_specs.push(NodeSpec {
                    name,
                    zone: zone.to_string(),
                    region: REGION.into(),
                    ip,
                });
            }
        }
        let mut cp =
            ControlPlane::start(&dir, &bins, &mut pki, net.gateway, &admin, &o.apiserver_args)
                .await?;
        let client = client_from(&cp.admin_kubeconfig).await?;
        let mut tasks = Vec::new();
        let result: Result<(Arc<Shared>, Vec<NodeRow>)> = async {
            storage::create_classes(&client).await?;
            let images =
                crate::images::prepare(&dir.join("images"), &o.tools.join("bin"), &o.images)?;
            let dns = Dns::default();
            tasks.push(tokio::spawn(dns.clone().follow(client.clone())));
            let dns_addr = SocketAddr::new(IpAddr::V4(net.gateway), 53);
            let d2 = dns.clone();
            tasks.push(tokio::spawn(async move {
                if let Err(e) = d2.serve(dns_addr).await {
                    tracing::error!("cluster DNS: {e}");
                }
            }));
            let port: u16 =
                cp.server.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(443);
            let runc_root = dir.join("runc");
            std::fs::create_dir_all(&runc_root)
                .ctx(|| format!("create {}", runc_root.display()))?;
            let shared = Arc::new(Shared {
                net: net.clone(),
                runc: kubelet::runtime::Runc { root: runc_root },
                images,
                dir: dir.join("pods"),
                dns_ip: net.gateway,
                api_host: net.gateway.to_string(),
                api_port: port,
                registry: Default::default(),
            });
            let mut nodes_out = Vec::new();
            for n in &node_specs {
                let kit = NodeKit::prepare(&mut pki, &cp.server, n)?;
                tasks.extend(kit.start(shared.clone()).await?);
                nodes_out.push((n.name.clone(), n.zone.clone(), n.ip.to_string()));
            }
            if !surge_specs.is_empty() {
                let kits = surge_specs
                    .iter()
                    .map(|n| NodeKit::prepare(&mut pki, &cp.server, n))
                    .collect::<Result<Vec<_>>>()?;
                tasks.push(tokio::spawn(surge_on_cordon(client.clone(), kits, shared.clone())));
            }
            let prov = Provisioner { client: client.clone(), root: dir.join("volumes") };
            tasks.push(tokio::spawn(prov.run()));
            wait_nodes_schedulable(&client, node_specs.len()).await?;
            Ok((shared, nodes_out))
        }
        .await;
        let (shared, nodes_out) = match result {
            Ok(x) => x,
            Err(e) => {
                for t in &tasks {
                    t.abort();
                }
                cp.stop().await;
                return Err(e);
            }
        };
        let state = State {
            pid: std::process::id(),
            id,
            server: cp.server.clone(),
            kubeconfig: cp.admin_kubeconfig.clone(),
            kubectl: bins.kubectl.clone(),
            bridge: net.bridge.clone(),
            pod_cidr: net.cidr(),
            runc_root: shared.runc.root.clone(),
            audit_log: cp.audit_log.clone(),
            nodes: nodes_out,
            pids: cp.pids(),
        };
        write_state(&dir, &state)?;
        Ok(Lab { state, shared, cp, tasks, dir })
    }

    /// SIGUSR1: the API server restarted in place (state.json gets its new pid).
    pub async fn restart_apiserver(&mut self) -> Result<()> {
        self.cp.restart_apiserver().await?;
        self.state.pids = self.cp.pids();
        write_state(&self.dir, &self.state)
    }

    /// A component that has died, by name.
    pub fn check(&mut self) -> Result<()> {
        self.cp.check()
    }

    pub async fn stop(mut self) {
        for t in &self.tasks {
            t.abort();
        }
        // Containers first (SIGKILL: the cluster is going away, nobody observes them).
        for id in self.shared.runc.list().await {
            self.shared.runc.kill(&id, "KILL").await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        for id in self.shared.runc.list().await {
            self.shared.runc.delete(&id).await;
        }
        self.cp.stop().await;
        // Unregistered first: its own names count as left over only once it is not live.
        registry::unregister(&self.state.id);
        let _ = net::remove_leftovers().await;
        let _ = std::fs::remove_file(state_path(&self.dir));
        let _ = std::fs::remove_file(self.dir.join("ready"));
    }
}

/// What a node needs to join: its spec, its identity's kubeconfig, its kubelet's TLS.
pub struct NodeKit {
    spec: NodeSpec,
    kubeconfig: PathBuf,
    tls: rustls::ServerConfig,
}

impl NodeKit {
    fn prepare(pki: &mut Pki, server: &str, n: &NodeSpec) -> Result<NodeKit> {
        let id = pki
            .tokens
            .iter()
            .find(|t| t.name == n.name)
            .cloned()
            .ok_or_else(|| Error::Command("node identity".into()))?;
        let kubeconfig = pki.dir.join(format!("{}.kubeconfig", n.name));
        pki.write_kubeconfig(&kubeconfig, server, &id)?;
        let (crt, key) = pki.leaf(
            &format!("kubelet-{}", n.name),
            &format!("system:node:{}", n.name),
            &["system:nodes"],
            &[&n.name],
            &[IpAddr::V4(n.ip)],
            true,
        )?;
        let tls = kubelet::server::tls_config(&crt, &key, &pki.ca_pem)?;
        Ok(NodeKit { spec: n.clone(), kubeconfig, tls })
    }

    /// Registers the Node and starts its heartbeat, kubelet server and kubelet.
    async fn start(self, shared: Arc<Shared>) -> Result<Vec<JoinHandle<()>>> {
        let n = self.spec;
        let nc = client_from(&self.kubeconfig).await?;
        nodes::register(&nc, &n, KUBE_VERSION).await?;
        let mut tasks = vec![tokio::spawn(nodes::heartbeat(nc.clone(), n.clone()))];
        let (sh, tls) = (shared.clone(), self.tls);
        let addr = SocketAddr::new(IpAddr::V4(n.ip), nodes::KUBELET_PORT);
        tasks.push(tokio::spawn(async move {
            if let Err(e) = kubelet::server::serve(sh, addr, tls).await {
                tracing::error!("kubelet server {addr}: {e}");
            }
        }));
        tasks.push(tokio::spawn(Kubelet { client: nc, node: n, shared }.run()));
        Ok(tasks)
    }
}

/// A cordoned node with this annotation gets no surge node: a test measures both cases
/// on one cluster.
pub const NO_SURGE: &str = "lw-lab/no-surge";

/// `--surge-nodes`: when a node is cordoned, its zone's surge node joins (once), as a GKE
/// surge upgrade adds an upgraded node before it drains the old one. Its tasks end with
/// this one (the cluster's teardown aborts it).
async fn surge_on_cordon(client: Client, kits: Vec<NodeKit>, shared: Arc<Shared>) {
    struct Abort(Vec<JoinHandle<()>>);
    impl Drop for Abort {
        fn drop(&mut self) {
            for t in &self.0 {
                t.abort();
            }
        }
    }
    let api: Api<Node> = Api::all(client);
    let mut waiting: Vec<Option<NodeKit>> = kits.into_iter().map(Some).collect();
    let mut started = Abort(Vec::new());
    loop {
        if let Ok(Ok(list)) =
            tokio::time::timeout(Duration::from_secs(10), api.list(&Default::default())).await
        {
            for node in &list.items {
                let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
                let zone = node
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("topology.kubernetes.io/zone"))
                    .cloned();
                let opted_out =
                    node.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(NO_SURGE));
                if !cordoned || opted_out {
                    continue;
                }
                for slot in waiting.iter_mut() {
                    if slot.as_ref().is_some_and(|k| Some(&k.spec.zone) == zone.as_ref())
                        && let Some(kit) = slot.take()
                    {
                        let name = kit.spec.name.clone();
                        match kit.start(shared.clone()).await {
                            Ok(t) => {
                                tracing::info!(
                                    "node {} cordoned: surge node {name} joined its zone",
                                    node.metadata.name.as_deref().unwrap_or("")
                                );
                                started.0.extend(t);
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

fn write_state(dir: &Path, state: &State) -> Result<()> {
    let s = serde_json::to_vec_pretty(state).map_err(|e| Error::Command(format!("state: {e}")))?;
    std::fs::write(state_path(dir), s).ctx(|| "write state.json".into())
}

/// Every node Ready and without the not-ready taint the node-lifecycle controller lifts.
async fn wait_nodes_schedulable(client: &Client, n: usize) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let start = Instant::now();
    let mut detail = String::new();
    while start.elapsed() < Duration::from_secs(90) {
        if let Ok(list) = api.list(&Default::default()).await {
            let ok = list.items.iter().filter(|node| {
                let tainted =
                    node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| {
                        t.iter().any(|t| t.key.starts_with("node.kubernetes.io/"))
                    });
                !tainted
            });
            let count = ok.count();
            if count == n && list.items.len() == n {
                return Ok(());
            }
            detail = format!("{count} of {n} nodes schedulable");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(Error::NotReady {
        component: "nodes".into(),
        secs: 90,
        detail,
        log: PathBuf::from("logs/kube-controller-manager.log"),
    })
}

pub fn which(prog: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join(prog)).find(|p| p.is_file()))
}

/// Kills what a killed run left: its runc containers, then its network objects. A run of
/// this very process (interrupted while starting) is unregistered first.
pub async fn clean_leftovers(dir: &Path) -> Vec<String> {
    registry::unregister_pid(std::process::id());
    let mut removed = Vec::new();
    let root = dir.join("runc");
    if root.is_dir() {
        let runc = kubelet::runtime::Runc { root };
        for id in runc.list().await {
            runc.kill(&id, "KILL").await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            runc.delete(&id).await;
            removed.push(format!("container {id}"));
        }
    }
    removed.extend(net::remove_leftovers().await.unwrap_or_default());
    let _ = std::fs::remove_file(state_path(dir));
    removed
}
