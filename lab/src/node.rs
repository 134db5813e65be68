//! A node made of the real parts: in its own network namespace, its own containerd (root,
//! state, socket, CNI config and IPAM), its own kubelet (root dir, cgroup root, pod logs,
//! serving certificate, `system:node:<name>` credentials) and its own kube-proxy, all
//! built from their upstream Go modules by `make kube-tools`. This file owns their
//! configuration, their start and their teardown, and finding what a killed run left.

use crate::error::{Error, IoContext, Result};
use crate::images::Archive;
use crate::net::NodeNet;
use crate::pki::write;
use crate::proc::{Proc, last_line, run};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const KUBELET_PORT: u16 = 10250;

/// Where `make kube-tools` put the nodes' binaries.
#[derive(Clone, Debug)]
pub struct NodeBinaries {
    pub kubelet: PathBuf,
    pub kube_proxy: PathBuf,
    /// containerd, its shim, ctr, runc, the CNI plugins, CoreDNS and pause.
    pub bin: PathBuf,
}

impl NodeBinaries {
    pub fn find(tools: &Path, kube_version: &str) -> Result<NodeBinaries> {
        let kube = tools.join(format!("kube-{kube_version}/bin"));
        let b = NodeBinaries {
            kubelet: kube.join("kubelet"),
            kube_proxy: kube.join("kube-proxy"),
            bin: tools.join("node/bin"),
        };
        let mut need = vec![("kubelet", b.kubelet.clone()), ("kube-proxy", b.kube_proxy.clone())];
        need.extend(RUNTIME.iter().map(|c| (*c, b.bin.join(c))));
        for (what, p) in need {
            if !p.is_file() {
                return Err(Error::MissingTool { what, path: p });
            }
        }
        Ok(b)
    }

    pub fn ctr(&self) -> PathBuf {
        self.bin.join("ctr")
    }

    /// The slow disk under the volumes of `--disk-faults` (lab/go/node/slowfs).
    pub fn slowfs(&self) -> PathBuf {
        self.bin.join("lw-slowfs")
    }
}

/// What `make kube-tools` builds into `.tools/node/bin` (lab/go/node, and pause.c).
const RUNTIME: [&str; 11] = [
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
    "bridge",
    "host-local",
    "loopback",
    "portmap",
    "coredns",
    "lw-slowfs",
    "pause",
];

#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    pub zone: String,
    pub region: String,
    /// Its slot in the run's /21 (net::MAX_NODES).
    pub index: u8,
}

/// What every node of a cluster shares.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub id: String,
    /// The run directory (absolute: shims and mounts are found by it).
    pub dir: PathBuf,
    pub bins: NodeBinaries,
    pub ca_file: PathBuf,
    /// Cluster DNS (CoreDNS on the host's bridge address).
    pub dns: Ipv4Addr,
    pub images: Vec<Archive>,
    /// kube-proxy's kubeconfig (`system:kube-proxy`, which the default RBAC binds to
    /// `system:node-proxier`).
    pub proxy_kubeconfig: PathBuf,
    /// Every pod address of the run (kube-proxy's cluster CIDR).
    pub pod_cidr: String,
}

/// One runc root for every node's containerd: container ids are unique, and the tests and
/// the teardown find any container's process by id.
fn runc_root(dir: &Path) -> PathBuf {
    dir.join("runc")
}

/// Where runc keeps the pods' containers: the shim adds containerd's namespace (the
/// kubelet's is `k8s.io`) to the root it is given.
pub fn container_root(dir: &Path) -> PathBuf {
    runc_root(dir).join("k8s.io")
}

/// The pid (on the host) of a container's process, by its id (`containerd://<id>` in a
/// pod's status, without the prefix).
pub async fn container_pid(runc: &Path, root: &Path, id: &str) -> Option<i32> {
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::process::Command::new(runc).arg("--root").arg(root).args(["state", id]).output(),
    )
    .await
    .ok()?
    .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v["pid"].as_i64().map(|p| p as i32).filter(|p| *p > 0)
}

/// The node's credentials and serving certificate, made before the API server starts
/// (its token must be in the token file).
#[derive(Clone, Debug)]
pub struct NodeKit {
    pub spec: NodeSpec,
    pub kubeconfig: PathBuf,
    pub tls_crt: PathBuf,
    pub tls_key: PathBuf,
}

pub struct Node {
    pub spec: NodeSpec,
    pub net: NodeNet,
    procs: Vec<Proc>,
}

/// The node's cgroup root, under which its kubelet puts `kubepods`: one name in every
/// hierarchy, starting with the run's prefix so that a killed run's are found.
fn cgroup_name(c: &Cluster, n: &NodeSpec) -> String {
    format!("{}{}-n{}", crate::net::PREFIX, c.id, n.index)
}

fn hierarchies() -> Vec<PathBuf> {
    std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("cgroup.procs").exists())
        .collect()
}

/// The kubelet refuses a cgroupRoot that does not exist in every hierarchy; a new cpuset
/// directory is empty until its cpus and mems are copied from the parent.
fn create_cgroups(name: &str) -> Result<()> {
    for h in hierarchies() {
        let d = h.join(name);
        std::fs::create_dir_all(&d).ctx(|| format!("create cgroup {}", d.display()))?;
        for f in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(v) = std::fs::read_to_string(h.join(f)) {
                std::fs::write(d.join(f), v.trim())
                    .ctx(|| format!("write {}", d.join(f).display()))?;
            }
        }
    }
    Ok(())
}

/// Removes cgroup directories whose name passes `ours`, deepest first. Any process still
/// in one (a container runc does not know of: a run with another state directory) is
/// killed first: a node's cgroups hold all of its pods.
pub async fn remove_cgroups(ours: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut removed = Vec::new();
    let mut killed = std::collections::BTreeSet::new();
    for h in hierarchies() {
        for e in std::fs::read_dir(&h).into_iter().flatten().flatten() {
            if !ours(&e.file_name().to_string_lossy()) || !e.path().is_dir() {
                continue;
            }
            let mut dirs = Vec::new();
            collect_dirs(&e.path(), &mut dirs);
            // A frozen process takes no SIGKILL until thawed (a run killed during a freeze
            // fault left an etcd member so, in D state, 2026-12-07): thaw from the top, as
            // a child stays frozen while its parent is.
            let mut frozen: Vec<&PathBuf> =
                dirs.iter().filter(|d| d.join("freezer.state").exists()).collect();
            frozen.sort_by_key(|d| d.components().count());
            for d in frozen {
                let _ = std::fs::write(d.join("freezer.state"), "THAWED");
            }
            for d in &dirs {
                let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
                for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    let p = nix::unistd::Pid::from_raw(pid);
                    if nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL).is_ok() {
                        killed.insert(pid);
                    }
                }
            }
        }
    }
    if !killed.is_empty() {
        removed.push(format!("{} processes in the nodes' cgroups", killed.len()));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for h in hierarchies() {
        for e in std::fs::read_dir(&h).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if !ours(&name) || !e.path().is_dir() {
                continue;
            }
            let mut dirs = Vec::new();
            collect_dirs(&e.path(), &mut dirs);
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            for d in &dirs {
                let _ = std::fs::remove_dir(d);
            }
            if !e.path().exists() {
                removed.push(format!("cgroup {}", e.path().display()));
            }
        }
    }
    removed
}

fn collect_dirs(d: &Path, out: &mut Vec<PathBuf>) {
    out.push(d.to_path_buf());
    for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            collect_dirs(&e.path(), out);
        }
    }
}

/// Where every pull goes (containerd's hosts.toml for all registries): port 9 of the
/// node's own loopback, where nothing listens, so the pull is refused at once.
const NO_REGISTRY: &str =
    "# lw-lab: no registry; a pull is refused at once\nserver = \"http://127.0.0.1:9\"\n";

fn containerd_config(c: &Cluster, d: &Path, n: &NodeSpec) -> String {
    let bin = c.bins.bin.display();
    let pause = c
        .images
        .iter()
        .find(|i| i.reference.starts_with("registry.k8s.io/pause:"))
        .map(|i| i.reference.clone())
        .unwrap_or_default();
    format!(
        r#"# containerd of node {name} (lw-lab; docs/local-cluster.md)
version = 3
root = "{d}/containerd/root"
state = "{d}/containerd/state"

[grpc]
  address = "{d}/containerd.sock"

[plugins.'io.containerd.cri.v1.runtime']
  # root here lacks CAP_SYS_RESOURCE: the kubelet's -998 for sandboxes cannot be set.
  restrict_oom_score_adj = true
  # The sandboxes' network namespaces under this node's state, not /var/run/netns.
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{bin}/runc"
        Root = "{runc}"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{bin}"]
    conf_dir = "{d}/cni/net.d"

# NRI listens on one fixed socket (/var/run/nri/nri.sock) for the whole machine: a second
# containerd would fail to start on it. No NRI plugin runs here.
[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{pause}"
  # Every registry is a closed port on the node's loopback (certs.d/_default): the lab
  # has none, and a pull of an image not imported fails at once, as a registry answers a
  # missing digest at once, not after a minute of unanswered DNS.
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "{d}/containerd/certs.d"
"#,
        name = n.name,
        d = d.display(),
        runc = runc_root(&c.dir).display(),
    )
}

fn cni_config(d: &Path, net: &NodeNet) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "lw-lab",
        "plugins": [
            {
                "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": net.pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": d.join("cni/ipam").display().to_string(),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
    .to_string()
}

fn kubelet_config(c: &Cluster, d: &Path, k: &NodeKit, net: &NodeNet) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {ip}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: "{ca}"}}
authorization: {{mode: Webhook}}
tlsCertFile: "{crt}"
tlsPrivateKeyFile: "{key}"
containerRuntimeEndpoint: "unix://{d}/containerd.sock"
# cgroup v1 on these machines (1.35 refuses it unless told), no systemd as PID 1.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: "/{cgroup}"
failSwapOn: false
clusterDNS: ["{dns}"]
clusterDomain: cluster.local
podLogsDir: "{d}/pod-logs"
# Every node is the same machine: no eviction or image GC on its disk (as kind does).
evictionHard: {{nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
"#,
        ip = net.ip,
        port = KUBELET_PORT,
        ca = c.ca_file.display(),
        crt = k.tls_crt.display(),
        key = k.tls_key.display(),
        d = d.display(),
        cgroup = cgroup_name(c, &k.spec),
        dns = c.dns,
    )
}

fn kube_proxy_config(c: &Cluster, k: &NodeKit) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {{kubeconfig: "{kc}"}}
hostnameOverride: {name}
mode: iptables
clusterCIDR: {cidr}
# Leave the conntrack table's size as the machine has it (needs CAP_SYS_RESOURCE-free sysctls).
conntrack: {{maxPerCore: 0}}
"#,
        kc = c.proxy_kubeconfig.display(),
        name = k.spec.name,
        cidr = c.pod_cidr,
    )
}

/// A program run inside the node's network namespace only (`nsenter --net`, not `ip
/// netns exec`: that also makes a mount namespace, which would hide the kubelet's volume
/// mounts from containerd).
fn spawn_in(
    net: &NodeNet,
    c: &Cluster,
    name: &str,
    program: &Path,
    args: &[String],
) -> Result<Proc> {
    let mut a = vec![
        format!("--net=/run/netns/{}", net.netns),
        "--".into(),
        "env".into(),
        format!(
            "PATH={}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            c.bins.bin.display()
        ),
        program.display().to_string(),
    ];
    a.extend(args.iter().cloned());
    let log = c.dir.join("logs").join(format!("{name}.log"));
    Proc::spawn(name, Path::new("nsenter"), &a, log)
}

/// The kubelet's device-plugin socket. Its directory is compiled into the kubelet, not under
/// `--root-dir`, so every kubelet on the host shares it: each one empties the directory and
/// then binds its socket when its container manager starts, and two starting together fail
/// with "bind: address already in use" (regression: one of about fifteen clusters this way
/// lost a node at start-up). The kubelets therefore start one at a time; the one that starts
/// later removes the earlier one's socket, which no device plugin here needs.
const DEVICE_PLUGIN_SOCKET: &str = "/var/lib/kubelet/device-plugins/kubelet.sock";

static KUBELET_START: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits (at most 30 s) until the socket is newer than the kubelet's start, or the kubelet
/// has exited (its last log line is the error). After 30 s it goes on: the socket only
/// orders the starts, and a kubelet that never binds it fails its node's readiness anyway.
async fn wait_device_plugin_socket(
    kubelet: &mut Proc,
    spawned: std::time::SystemTime,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        kubelet.check_running()?;
        let fresh = std::fs::metadata(DEVICE_PLUGIN_SOCKET)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= spawned);
        if fresh {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::warn!("{} has not bound {DEVICE_PLUGIN_SOCKET} within 30 s", kubelet.name);
    Ok(())
}

impl Node {
    /// Its network, containerd (with the images imported and pinned), kubelet and
    /// kube-proxy. The kubelet registers the Node itself.
    pub async fn start(c: &Cluster, k: &NodeKit, net: NodeNet) -> Result<Node> {
        let n = &k.spec;
        let d = c.dir.join("nodes").join(&n.name);
        for sub in ["containerd", "cni/net.d", "cni/ipam", "kubelet", "pod-logs"] {
            std::fs::create_dir_all(d.join(sub))
                .ctx(|| format!("create {}", d.join(sub).display()))?;
        }
        create_cgroups(&cgroup_name(c, n))?;
        write(&d.join("containerd.toml"), &containerd_config(c, &d, n))?;
        std::fs::create_dir_all(d.join("containerd/certs.d/_default"))
            .ctx(|| format!("create {}", d.join("containerd/certs.d/_default").display()))?;
        write(&d.join("containerd/certs.d/_default/hosts.toml"), NO_REGISTRY)?;
        write(&d.join("cni/net.d/10-lw-lab.conflist"), &cni_config(&d, &net))?;
        write(&d.join("kubelet.yaml"), &kubelet_config(c, &d, k, &net))?;
        write(&d.join("kube-proxy.yaml"), &kube_proxy_config(c, k))?;
        let mut node = Node { spec: n.clone(), net: net.clone(), procs: Vec::new() };
        let containerd = spawn_in(
            &net,
            c,
            &format!("{}-containerd", n.name),
            &c.bins.bin.join("containerd"),
            &[format!("--config={}", d.join("containerd.toml").display())],
        )?;
        node.procs.push(containerd);
        let sock = d.join("containerd.sock");
        wait_containerd(&mut node.procs[0], &c.bins.ctr(), &sock).await?;
        for img in &c.images {
            crate::images::import(&c.bins.ctr(), &sock, img).await?;
        }
        let labels = format!(
            "topology.kubernetes.io/zone={},topology.kubernetes.io/region={},node.kubernetes.io/instance-type=lw-lab-kubelet",
            n.zone, n.region
        );
        // One kubelet at a time until its device-plugin socket is bound (DEVICE_PLUGIN_SOCKET).
        let one_at_a_time = KUBELET_START.lock().await;
        let spawned = std::time::SystemTime::now();
        let kubelet = spawn_in(
            &net,
            c,
            &format!("{}-kubelet", n.name),
            &c.bins.kubelet,
            &[
                format!("--config={}", d.join("kubelet.yaml").display()),
                format!("--kubeconfig={}", k.kubeconfig.display()),
                format!("--root-dir={}", d.join("kubelet").display()),
                format!("--cert-dir={}", d.join("kubelet/pki").display()),
                format!("--hostname-override={}", n.name),
                format!("--node-ip={}", net.ip),
                format!("--node-labels={labels}"),
                "--v=1".into(),
            ],
        )?;
        node.procs.push(kubelet);
        let bound = wait_device_plugin_socket(&mut node.procs[1], spawned).await;
        drop(one_at_a_time);
        bound?;
        let proxy = spawn_in(
            &net,
            c,
            &format!("{}-kube-proxy", n.name),
            &c.bins.kube_proxy,
            &[format!("--config={}", d.join("kube-proxy.yaml").display())],
        )?;
        node.procs.push(proxy);
        Ok(node)
    }

    /// A component that has died, by name.
    pub fn check(&mut self) -> Result<()> {
        for p in self.procs.iter_mut() {
            p.check_running()?;
        }
        Ok(())
    }

    pub fn pids(&self) -> Vec<(String, u32)> {
        self.procs.iter().filter_map(|p| p.pid().map(|pid| (p.name.clone(), pid))).collect()
    }

    /// kube-proxy and the kubelet first (the pods stay as they are: the teardown kills
    /// them), then containerd.
    pub async fn stop(&mut self) {
        while let Some(mut p) = self.procs.pop() {
            p.stop(Duration::from_secs(10)).await;
        }
    }
}

async fn wait_containerd(p: &mut Proc, ctr: &Path, sock: &Path) -> Result<()> {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < Duration::from_secs(30) {
        p.check_running()?;
        match run(ctr.to_str().unwrap_or("ctr"), &["-a", &sock.display().to_string(), "version"])
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(Error::NotReady {
        component: p.name.clone(),
        secs: 30,
        detail: format!("{last}; last log line: {}", last_line(&p.log)),
        log: p.log.clone(),
    })
}

/// What is left of the nodes once their processes are gone, or of a killed run: its
/// containers (runc, by the shared state directory), the containerd shims and lw-slowfs
/// processes (found by the run directory in their command line), the mounts under the run directory (volumes,
/// root filesystems, sandbox namespaces), and the cgroups. Returns what it removed.
pub async fn teardown(dir: &Path, runc: &Path, ours: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut removed = Vec::new();
    let root = container_root(dir);
    if root.is_dir() {
        let r = root.display().to_string();
        let rc = runc.display().to_string();
        let ids: Vec<String> = run(&rc, &["--root", &r, "list", "-q"])
            .await
            .map(|o| o.lines().map(str::to_string).filter(|l| !l.is_empty()).collect())
            .unwrap_or_default();
        for id in &ids {
            let _ = run(&rc, &["--root", &r, "kill", id, "KILL"]).await;
        }
        if !ids.is_empty() {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        for id in &ids {
            let _ = run(&rc, &["--root", &r, "delete", "--force", id]).await;
            removed.push(format!("container {}", &id[..id.len().min(12)]));
        }
    }
    let needle = dir.display().to_string();
    for (pid, what) in left_behind(dir) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        removed.push(format!("{what} {pid}"));
    }
    let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(unescape))
        .filter(|m| m.starts_with(&format!("{needle}/")))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    mounts.dedup();
    for m in &mounts {
        if nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH).is_ok() {
            removed.push(format!("mount {m}"));
        }
    }
    removed.extend(remove_cgroups(ours).await);
    removed
}

/// /proc/self/mountinfo escapes spaces and the like as \ooo.
pub fn unescape(s: &str) -> String {
    let mut out = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
        {
            out.push(v as char);
            i += 4;
            continue;
        }
        out.push(b[i] as char);
        i += 1;
    }
    out
}

/// The containerd shims (their `-address` is a node's socket in the run directory) and the
/// lw-slowfs filesystems (volumes of `--disk-faults`) of the run directory `dir`, found by
/// `<dir>/` in their command line (with the `/`: .tools/lab is a prefix of
/// .tools/lab-test-b, whose volumes a stopping acceptance cluster once killed): a killed
/// harness leaves them.
fn left_behind(dir: &Path) -> Vec<(i32, &'static str)> {
    let needle = format!("{}/", dir.display());
    let needle = needle.as_str();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd);
        if !cmd.contains(needle) {
            continue;
        }
        if cmd.contains("containerd-shim-runc-v2") {
            out.push((pid, "containerd shim"));
        } else if cmd.contains("lw-slowfs") {
            out.push((pid, "lw-slowfs"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// Regression: a stopping cluster in .tools/lab killed the lw-slowfs volumes of one
    /// running beside it in .tools/lab-test-b (its pods then failed to mount: "transport
    /// endpoint is not connected").
    #[test]
    fn a_run_directory_that_is_a_prefix_of_another_leaves_the_other_s_processes() {
        use std::os::unix::process::CommandExt;
        let base = format!("/nonexistent/lw-{}", std::process::id());
        let mut child = std::process::Command::new("sh")
            .arg0("lw-slowfs")
            .args(["-c", "sleep 30; true", &format!("{base}/lab-test-b/volumes/pvc-1")])
            .spawn()
            .expect("spawn sh");
        let pid = child.id() as i32;
        // Regression (make check, 2026-12-07): read at once, /proc/<pid>/cmdline can still be
        // the test binary's, before the child's exec: wait until it is the child's own.
        let began = std::time::Instant::now();
        while !std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("lab-test-b"))
            && began.elapsed() < std::time::Duration::from_secs(10)
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let found = |dir: String| {
            super::left_behind(std::path::Path::new(&dir)).iter().any(|(p, _)| *p == pid)
        };
        let (other, own) = (found(format!("{base}/lab")), found(format!("{base}/lab-test-b")));
        let _ = child.kill();
        let _ = child.wait();
        assert!(!other, "the process of lab-test-b was taken for one of lab");
        assert!(own, "the process of lab-test-b was not found for its own directory");
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(super::unescape(r"/a\040b/c"), "/a b/c");
        assert_eq!(super::unescape("/plain"), "/plain");
    }
}
