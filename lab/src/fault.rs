//! `lw-lab fault`: faults injected below etcd on the running lab's real nodes, the way the
//! real thing comes (a network cut between members, a starved or frozen container, a lost
//! node), never through leaderwatch; each with its undo (`lw-lab fault clear`).
//!
//! The ground truth is kept apart: every act is a row of `<dir>/faults.csv` (when, what,
//! on which member and node), which leaderwatch never reads; tests compare it with
//! leaderwatch's attribution afterwards. What is still in force is in `<dir>/faults.json`,
//! so that `clear` (or `lw-lab down`) can undo it from another process.

use crate::error::{Error, IoContext, Result};
use crate::lab::State;
use crate::proc;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `lw-lab fault` can do. MEMBER is a pod name (dlock-etcd-1), `leader` or `follower`
/// (resolved by asking every member's Status at the moment of the fault).
#[derive(clap::Subcommand, Debug, Clone)]
pub enum FaultCmd {
    /// Cut a member from its peers: a blackhole route to each peer's pod address in its
    /// pod's network namespace and, unless --one-way, to its address in each peer's.
    /// The host's path to it (leaderwatch's, with --reach pod-ip) stays open.
    Partition {
        #[arg(long, value_name = "MEMBER")]
        pod: String,
        /// Routes only in the member's own namespace: what it sends to its peers is
        /// dropped, and so are its answers on the connections they opened (TCP stalls both
        /// ways; what differs is who notices first).
        #[arg(long)]
        one_way: bool,
    },
    /// Slow a member's disk: every fsync on its volume waits DELAY first (lw-slowfs, so the
    /// cluster must be up with `--disk-faults`). MEMBER may be `all` (every member).
    Disk {
        #[arg(long, value_name = "MEMBER")]
        pod: String,
        /// The added latency of each fsync, e.g. 50ms, 1s.
        #[arg(long, value_name = "DELAY", value_parser = parse_delay)]
        fsync: Duration,
    },
    /// Starve a member's container: its CFS quota set to PERCENT of one core (0.1-100;
    /// below 1 % the period grows, up to 1 s, as the kernel's least quota is 1 ms).
    Cpu {
        #[arg(long, value_name = "MEMBER")]
        pod: String,
        #[arg(long, default_value_t = 5.0, value_parser = parse_percent)]
        percent: f64,
    },
    /// Freeze a member's container with the cgroup freezer (no signal reaches etcd, as
    /// when a VM stalls).
    Freeze {
        #[arg(long, value_name = "MEMBER")]
        pod: String,
    },
    /// A node lost, as when its VM goes: its kubelet and containerd stopped (SIGSTOP), every
    /// pod on it frozen (the node's cgroup root, the cgroup freezer) and its link to the
    /// others down. The node controller marks it NotReady after its grace period, and its
    /// taint deletes the pods only after their toleration; NODE is a node name or MEMBER's
    /// node.
    NodeLoss {
        #[arg(long, value_name = "NODE|MEMBER")]
        node: String,
    },
    /// Undo every fault still in force, newest first.
    Clear,
    /// What is in force.
    List,
}

/// One fault in force and how to undo it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Active {
    fault: String,
    target: String,
    at: String,
    undo: Vec<Undo>,
}

/// One step of an undo. Each names what it acts on as it was found at the fault, and is
/// skipped when that is gone (a replaced pod took its namespace and cgroups with it).
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Undo {
    /// Delete blackhole routes in the network namespace of `pod` (while it is `uid`).
    Routes { pod: String, uid: String, addrs: Vec<String> },
    /// Put a CFS quota (and the period, when the fault changed it) back.
    Quota {
        dir: PathBuf,
        was: String,
        #[serde(default)]
        period_was: Option<String>,
    },
    /// Thaw a frozen cgroup.
    Thaw { dir: PathBuf },
    /// SIGCONT stopped processes.
    Resume { names: Vec<String>, pids: Vec<u32> },
    /// Set a network link up again.
    LinkUp { link: String },
    /// Put a volume's fsync delay back (lw-slowfs reads `file`).
    Delay { file: PathBuf, was: String, now: String },
}

/// A delay as `--fsync` takes it: a number and `us`, `ms` or `s`.
fn parse_delay(s: &str) -> std::result::Result<Duration, String> {
    let i = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (n, unit) = s.split_at(i);
    let n: f64 = n.parse().map_err(|_| format!("{s:?}: a number and a unit, e.g. 50ms"))?;
    let scale = match unit {
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return Err(format!("{s:?}: the unit must be us, ms or s")),
    };
    Duration::try_from_secs_f64(n * scale).map_err(|e| format!("{s:?}: {e}"))
}

/// An etcd member's pod as the fault needs it.
#[derive(Debug, Clone)]
struct Member {
    name: String,
    uid: String,
    ip: String,
    node: String,
    container: String,
}

/// `lw-lab fault ...` on the lab whose state is `state`, run directory `dir`.
pub async fn run(state: &State, dir: &Path, tools: &Path, cmd: FaultCmd) -> Result<()> {
    let members = members(state).await?;
    // (fault, target, undo) of each fault put in force.
    let faults = match cmd {
        FaultCmd::Clear => return clear(state, dir, &members).await,
        FaultCmd::List => {
            for a in read_active(dir)? {
                let what: Vec<String> = a.undo.iter().map(describe).collect();
                println!("{} {} on {}: {}", a.at, a.fault, a.target, what.join("; "));
            }
            return Ok(());
        }
        FaultCmd::Partition { pod, one_way } => {
            let m = resolve(&members, tools, &pod).await?;
            let fault = if one_way { "partition-one-way" } else { "partition" };
            vec![(fault.to_owned(), m.name.clone(), partition(state, &members, &m, one_way).await?)]
        }
        FaultCmd::Disk { pod, fsync } => {
            let on = match pod.as_str() {
                "all" => members.clone(),
                _ => vec![resolve(&members, tools, &pod).await?],
            };
            let fault = format!("disk-fsync-{}ms", fsync.as_secs_f64() * 1e3);
            // Each in force is logged at once: a later member's failure loses none.
            for m in on {
                let undo = vec![slow_disk(state, &m, fsync).await?];
                inject(dir, &members, fault.clone(), m.name.clone(), undo)?;
            }
            vec![]
        }
        FaultCmd::Cpu { pod, percent } => {
            let m = resolve(&members, tools, &pod).await?;
            vec![(format!("cpu-{percent}pct"), m.name.clone(), vec![starve(state, &m, percent)?])]
        }
        FaultCmd::Freeze { pod } => {
            let m = resolve(&members, tools, &pod).await?;
            vec![("freeze".to_owned(), m.name.clone(), vec![freeze(state, &m)?])]
        }
        FaultCmd::NodeLoss { node } => {
            let node = if node.starts_with("lw-node-") {
                node
            } else {
                resolve(&members, tools, &node).await?.node
            };
            vec![("node-loss".to_owned(), node.clone(), lose_node(state, dir, &node).await?)]
        }
    };
    for (fault, target, undo) in faults {
        inject(dir, &members, fault, target, undo)?;
    }
    Ok(())
}

/// Logs a fault just put in force and adds it to faults.json.
fn inject(
    dir: &Path,
    members: &[Member],
    fault: String,
    target: String,
    undo: Vec<Undo>,
) -> Result<()> {
    let at = now();
    let detail = undo.iter().map(describe).collect::<Vec<_>>().join("; ");
    log(
        dir,
        &Row { at: &at, act: "inject", fault: &fault, target: &target, detail: &detail },
        members,
    )?;
    let mut active = read_active(dir)?;
    active.push(Active { fault: fault.clone(), target: target.clone(), at: at.clone(), undo });
    write_active(dir, &active)?;
    println!("lw-lab: {at} {fault} on {target} ({detail}); undo with `lw-lab fault clear`");
    Ok(())
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Undoes every fault in force (best effort when the cluster's API cannot list the pods:
/// `lw-lab down` calls it before it stops anything, since a frozen process cannot be killed).
pub async fn clear_all(state: &State, dir: &Path) -> Result<()> {
    if read_active(dir)?.is_empty() {
        return Ok(());
    }
    let members = members(state).await.unwrap_or_default();
    clear(state, dir, &members).await
}

/// Undoes every fault in force, newest first; logs each.
async fn clear(state: &State, dir: &Path, members: &[Member]) -> Result<()> {
    let mut active = read_active(dir)?;
    while let Some(a) = active.pop() {
        let mut done = Vec::new();
        for u in a.undo.iter().rev() {
            done.push(undo_step(state, members, u).await?);
        }
        let at = now();
        let detail = done.join("; ");
        let row =
            Row { at: &at, act: "clear", fault: &a.fault, target: &a.target, detail: &detail };
        log(dir, &row, members)?;
        write_active(dir, &active)?;
        println!("lw-lab: {at} cleared {} on {} ({})", a.fault, a.target, done.join("; "));
    }
    Ok(())
}

/// Blackhole routes between `m` and its peers.
async fn partition(state: &State, all: &[Member], m: &Member, one_way: bool) -> Result<Vec<Undo>> {
    let peers: Vec<&Member> = all.iter().filter(|p| p.name != m.name).collect();
    let mut undo = Vec::new();
    let addrs: Vec<String> = peers.iter().map(|p| p.ip.clone()).collect();
    routes(state, m, "add", &addrs).await?;
    undo.push(Undo::Routes { pod: m.name.clone(), uid: m.uid.clone(), addrs });
    if !one_way {
        for p in peers {
            routes(state, p, "add", std::slice::from_ref(&m.ip)).await?;
            undo.push(Undo::Routes {
                pod: p.name.clone(),
                uid: p.uid.clone(),
                addrs: vec![m.ip.clone()],
            });
        }
    }
    Ok(undo)
}

/// `ip route <add|del> blackhole <addr>/32` in `m`'s pod network namespace.
async fn routes(state: &State, m: &Member, op: &str, addrs: &[String]) -> Result<()> {
    let pid = container_pid(state, &m.container)?.to_string();
    for a in addrs {
        let dst = format!("{a}/32");
        proc::run("nsenter", &["-t", &pid, "-n", "ip", "route", op, "blackhole", &dst]).await?;
    }
    Ok(())
}

/// Lowers the CFS quota of `m`'s container to `percent` of one core. The kernel's least
/// quota is 1 ms, so below 1 % of the 100 ms period the period grows to fit (0.5 %: 1 ms
/// every 200 ms): the process then runs in rarer, equally short bursts.
fn starve(state: &State, m: &Member, percent: f64) -> Result<Undo> {
    let dir = cgroup_dir(container_pid(state, &m.container)?, "cpu")?;
    let was = read(&dir.join("cpu.cfs_quota_us"))?;
    let period_file = dir.join("cpu.cfs_period_us");
    let period_now = read(&period_file)?;
    let period: u64 = period_now
        .parse()
        .map_err(|e| Error::Command(format!("{}: {e}", period_file.display())))?;
    let (quota, period) = quota_for(period, percent);
    // The quota first: written before the period grows, neither write exceeds the
    // parent's share on the way.
    write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
    let period_was = (period.to_string() != period_now).then_some(period_now);
    if period_was.is_some() {
        write(&period_file, &period.to_string())?;
    }
    Ok(Undo::Quota { dir, was, period_was })
}

/// The CFS quota and period (microseconds) that give `percent` of one core: `period` kept
/// while the quota is at least the kernel's least (1 ms), else the period grown to fit.
fn quota_for(period: u64, percent: f64) -> (u64, u64) {
    const MIN_QUOTA: u64 = 1000;
    let quota = (period as f64 * percent / 100.0).round() as u64;
    if quota >= MIN_QUOTA {
        return (quota, period);
    }
    (MIN_QUOTA, (MIN_QUOTA as f64 * 100.0 / percent).round() as u64)
}

/// `--percent`: a share of one core the kernel can enforce (0.1 % is 1 ms a second).
fn parse_percent(s: &str) -> std::result::Result<f64, String> {
    let p: f64 = s.parse().map_err(|e| format!("{s:?} is not a number: {e}"))?;
    if (0.1..=100.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("{p} is not a percentage from 0.1 to 100"))
    }
}

/// Sets the fsync delay of `m`'s volume (its PVC's PV names the file lw-slowfs reads).
async fn slow_disk(state: &State, m: &Member, fsync: Duration) -> Result<Undo> {
    let kubeconfig = state.kubeconfig.display().to_string();
    let kubectl = state.kubectl.display().to_string();
    let pvc = format!("data-{}", m.name);
    let get = ["--kubeconfig", &kubeconfig, "-n", "dlock", "get", "pvc", &pvc];
    let pv =
        proc::run(&kubectl, &[&get[..], &["-o", "jsonpath={.spec.volumeName}"]].concat()).await?;
    // storage::FSYNC_DELAY_ANNOTATION, its slash escaped for jsonpath.
    let path = r"jsonpath={.metadata.annotations.lw-lab\/fsync-delay-file}";
    let file =
        proc::run(&kubectl, &["--kubeconfig", &kubeconfig, "get", "pv", pv.trim(), "-o", path])
            .await?;
    if file.trim().is_empty() {
        return Err(Error::Usage(format!(
            "{}'s volume {} is not on lw-slowfs: bring the cluster up with `lw-lab --disk-faults up --detach`",
            m.name,
            pv.trim()
        )));
    }
    let file = PathBuf::from(file.trim());
    let was = read(&file)?;
    let now = format!("{}us", fsync.as_micros());
    write(&file, &now)?;
    Ok(Undo::Delay { file, was, now })
}

/// Freezes `m`'s container's freezer cgroup; waits until the kernel says FROZEN.
fn freeze(state: &State, m: &Member) -> Result<Undo> {
    freeze_dir(cgroup_dir(container_pid(state, &m.container)?, "freezer")?)
}

/// Freezes a freezer cgroup (with all below it) and waits until it is.
fn freeze_dir(dir: PathBuf) -> Result<Undo> {
    write(&dir.join("freezer.state"), "FROZEN")?;
    for _ in 0..50 {
        if read(&dir.join("freezer.state"))? == "FROZEN" {
            return Ok(Undo::Thaw { dir });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = write(&dir.join("freezer.state"), "THAWED");
    Err(Error::Command(format!("{}: not FROZEN within 1 s", dir.display())))
}

/// A node gone as a VM goes: its kubelet and containerd stopped, its pods frozen, its link
/// down (in that order, so that the kubelet reports nothing of the rest). Each step put in
/// force is undone again if a later one fails.
async fn lose_node(state: &State, dir: &Path, node: &str) -> Result<Vec<Undo>> {
    let (cgroup, link) = node_names(state, dir, node)?;
    let mut undo = vec![stop_node(state, node)?];
    let rest = async {
        undo.push(freeze_dir(Path::new("/sys/fs/cgroup/freezer").join(&cgroup))?);
        proc::run("ip", &["link", "set", &link, "down"]).await?;
        undo.push(Undo::LinkUp { link: link.clone() });
        Ok::<(), Error>(())
    };
    if let Err(e) = rest.await {
        for u in undo.iter().rev() {
            let _ = undo_step(state, &[], u).await;
        }
        return Err(e);
    }
    Ok(undo)
}

/// A node's cgroup root (its kubelet's `cgroupRoot`, `/lw<id>-n<k>`) and the host's end of
/// its veth (`lw<id>n<k>`, src/net.rs), from the kubelet's config in the run directory.
fn node_names(state: &State, dir: &Path, node: &str) -> Result<(String, String)> {
    let config = dir.join("nodes").join(node).join("kubelet.yaml");
    let text = std::fs::read_to_string(&config).map_err(|_| {
        Error::Usage(format!("node {node}: no {} (the nodes: {})", config.display(), nodes(state)))
    })?;
    names_in_kubelet_config(&state.id, &text)
        .map_err(|e| Error::Command(format!("{}: {e}", config.display())))
}

/// [`node_names`] from the text of run `id`'s kubelet.yaml.
fn names_in_kubelet_config(id: &str, text: &str) -> std::result::Result<(String, String), String> {
    let root = text
        .lines()
        .find_map(|l| l.strip_prefix("cgroupRoot:"))
        .map(|v| v.trim().trim_matches('"').trim_start_matches('/').to_owned())
        .ok_or("no cgroupRoot")?;
    let k = root
        .strip_prefix(&format!("{}{id}-n", crate::net::PREFIX))
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_digit()))
        .ok_or_else(|| format!("cgroupRoot {root} is not run {id}'s"))?;
    Ok((root.clone(), format!("{}{id}n{k}", crate::net::PREFIX)))
}

/// SIGSTOPs a node's kubelet and containerd (their pids from state.json).
fn stop_node(state: &State, node: &str) -> Result<Undo> {
    let names = [format!("{node}-kubelet"), format!("{node}-containerd")];
    let mut pids = Vec::new();
    for n in &names {
        let pid = *state.pids.get(n).ok_or_else(|| {
            Error::Usage(format!(
                "node {node}: no process {n} in state.json (the nodes: {})",
                nodes(state)
            ))
        })?;
        pids.push(pid);
    }
    for &p in &pids {
        signal(p, nix::sys::signal::Signal::SIGSTOP)?;
    }
    Ok(Undo::Resume { names: names.to_vec(), pids })
}

fn nodes(state: &State) -> String {
    state.nodes.iter().map(|n| n.0.as_str()).collect::<Vec<_>>().join(", ")
}

fn signal(pid: u32, s: nix::sys::signal::Signal) -> Result<()> {
    let p = i32::try_from(pid).map_err(|_| Error::Command(format!("pid {pid}")))?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), s)
        .map_err(|e| Error::Command(format!("{s} to pid {pid}: {e}")))
}

/// Carries out one undo step; says what it did.
async fn undo_step(state: &State, members: &[Member], u: &Undo) -> Result<String> {
    Ok(match u {
        Undo::Routes { pod, uid, addrs } => match members.iter().find(|m| &m.name == pod) {
            Some(m) if &m.uid == uid => {
                routes(state, m, "del", addrs).await?;
                format!("routes to {} removed in {pod}", addrs.join(", "))
            }
            _ => format!("{pod} was replaced: its namespace and routes went with it"),
        },
        Undo::Quota { dir, was, period_was } if dir.is_dir() => {
            // Quota first: a period shortened under a lowered quota could exceed the parent's.
            write(&dir.join("cpu.cfs_quota_us"), was)?;
            if let Some(p) = period_was {
                write(&dir.join("cpu.cfs_period_us"), p)?;
            }
            format!("quota {was} back on {}", dir.display())
        }
        Undo::Thaw { dir } if dir.is_dir() => {
            write(&dir.join("freezer.state"), "THAWED")?;
            format!("{} thawed", dir.display())
        }
        Undo::Quota { dir, .. } | Undo::Thaw { dir } => {
            format!("{} is gone (the container was replaced)", dir.display())
        }
        Undo::Delay { file, was, .. } if file.exists() => {
            write(file, was)?;
            format!("fsync delay {was} back on {}", file.display())
        }
        Undo::Delay { file, .. } => format!("{} is gone (the volume was deleted)", file.display()),
        Undo::Resume { names, pids } => {
            for &p in pids {
                // A process that died meanwhile has nothing to resume.
                let _ = signal(p, nix::sys::signal::Signal::SIGCONT);
            }
            format!("{} resumed", names.join(" and "))
        }
        Undo::LinkUp { link } => {
            proc::run("ip", &["link", "set", link, "up"]).await?;
            format!("link {link} up")
        }
    })
}

/// The text a ground-truth row gives for one undo step (what the fault did).
fn describe(u: &Undo) -> String {
    match u {
        Undo::Routes { pod, addrs, .. } => format!("blackhole {} in {pod}", addrs.join(" ")),
        Undo::Quota { dir, .. } => format!("cfs quota lowered on {}", dir.display()),
        Undo::Thaw { dir } => format!("frozen {}", dir.display()),
        Undo::Resume { names, .. } => format!("SIGSTOP {}", names.join(" and ")),
        Undo::LinkUp { link } => format!("link {link} down"),
        Undo::Delay { file, now, .. } => format!("fsync delay {now} on {}", file.display()),
    }
}

/// dlock's etcd pods, from the API server.
async fn members(state: &State) -> Result<Vec<Member>> {
    let kubeconfig = state.kubeconfig.display().to_string();
    let mut args = vec!["--kubeconfig", &kubeconfig];
    args.extend(crate::lab::MEMBER_PODS);
    args.extend(["-o", "json"]);
    let out = proc::run(&state.kubectl.display().to_string(), &args).await?;
    let v: Value =
        serde_json::from_str(&out).map_err(|e| Error::Command(format!("kubectl get pods: {e}")))?;
    let s =
        |p: &Value, path: &str| p.pointer(path).and_then(Value::as_str).unwrap_or("").to_owned();
    Ok(v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| Member {
            name: s(p, "/metadata/name"),
            uid: s(p, "/metadata/uid"),
            ip: s(p, "/status/podIP"),
            node: s(p, "/spec/nodeName"),
            container: s(p, "/status/containerStatuses/0/containerID")
                .trim_start_matches("containerd://")
                .to_owned(),
        })
        .collect())
}

/// MEMBER: a pod name, or `leader` / `follower` as the members' Status says now.
async fn resolve(members: &[Member], tools: &Path, m: &str) -> Result<Member> {
    if m != "leader" && m != "follower" {
        return members.iter().find(|x| x.name == m).cloned().ok_or_else(|| {
            let names: Vec<_> = members.iter().map(|x| x.name.as_str()).collect();
            Error::Usage(format!("no etcd member {m} (the members: {})", names.join(", ")))
        });
    }
    let eps: Vec<String> = members.iter().map(|x| format!("http://{}:2379", x.ip)).collect();
    let etcdctl = tools.join("bin/etcdctl");
    let out = tokio::process::Command::new(&etcdctl)
        .args([
            "--endpoints",
            &eps.join(","),
            "--command-timeout=2s",
            "endpoint",
            "status",
            "-w",
            "json",
        ])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(10), out)
        .await
        .map_err(|_| Error::Command("etcdctl endpoint status took over 10 s".into()))?
        .ctx(|| format!("run {}", etcdctl.display()))?;
    // A member that does not answer is left out of the list, not an error.
    let status: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let rows = status.as_array().cloned().unwrap_or_default();
    let leader = rows.iter().find_map(|r| r["Status"]["leader"].as_u64());
    let leads =
        |r: &Value| leader.is_some() && r["Status"]["header"]["member_id"].as_u64() == leader;
    let ip_of = |r: &Value| {
        r["Endpoint"]
            .as_str()
            .map(|e| e.trim_start_matches("http://").trim_end_matches(":2379").to_owned())
    };
    let want = rows.iter().find(|r| if m == "leader" { leads(r) } else { !leads(r) });
    let ip = want.and_then(ip_of).ok_or_else(|| {
        Error::Command(format!(
            "no {m} among the members that answered ({} of {})",
            rows.len(),
            eps.len()
        ))
    })?;
    members
        .iter()
        .find(|x| x.ip == ip)
        .cloned()
        .ok_or_else(|| Error::Command(format!("the {m} at {ip} is no pod of dlock-etcd")))
}

/// The pid of a container's first process (runc's state, as the tests read it).
fn container_pid(state: &State, id: &str) -> Result<u32> {
    let out = std::process::Command::new(&state.runc)
        .arg("--root")
        .arg(&state.runc_root)
        .args(["state", id])
        .output()
        .ctx(|| format!("run {}", state.runc.display()))?;
    let v: Value = serde_json::from_slice(&out.stdout).map_err(|_| {
        Error::Command(format!("runc state {id}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    })?;
    v["pid"].as_u64().and_then(|p| u32::try_from(p).ok()).filter(|&p| p > 0).ok_or_else(|| {
        Error::Command(format!("runc state {id}: no pid (is the container running?)"))
    })
}

/// The cgroup v1 directory of `pid` in the hierarchy that has `controller`.
fn cgroup_dir(pid: u32, controller: &str) -> Result<PathBuf> {
    let cg = read(Path::new(&format!("/proc/{pid}/cgroup")))?;
    let dir = cgroup_of(&cg, controller).ok_or_else(|| {
        Error::Command(format!("pid {pid} is in no {controller} cgroup (cgroup v1 expected)"))
    })?;
    if !dir.is_dir() {
        return Err(Error::Command(format!("{}: no such cgroup directory", dir.display())));
    }
    Ok(dir)
}

/// Where `/proc/<pid>/cgroup`'s text puts the process in `controller`'s v1 hierarchy
/// (`4:cpu,cpuacct:/path` -> `/sys/fs/cgroup/cpu,cpuacct/path`).
fn cgroup_of(text: &str, controller: &str) -> Option<PathBuf> {
    text.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        ctrls
            .split(',')
            .any(|c| c == controller)
            .then(|| Path::new("/sys/fs/cgroup").join(ctrls).join(path.trim_start_matches('/')))
    })
}

fn read(p: &Path) -> Result<String> {
    Ok(std::fs::read_to_string(p).ctx(|| format!("read {}", p.display()))?.trim().to_owned())
}

fn write(p: &Path, v: &str) -> Result<()> {
    std::fs::write(p, v).ctx(|| format!("write {v} to {}", p.display()))
}

fn read_active(dir: &Path) -> Result<Vec<Active>> {
    let p = dir.join("faults.json");
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            Error::Command(format!(
                "{}: {e} (remove it once the faults are undone by hand)",
                p.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::Io { context: format!("read {}", p.display()), source: e }),
    }
}

fn write_active(dir: &Path, a: &[Active]) -> Result<()> {
    let p = dir.join("faults.json");
    let tmp = dir.join("faults.json.tmp");
    let text = serde_json::to_vec_pretty(a).map_err(|e| Error::Command(e.to_string()))?;
    std::fs::write(&tmp, text).ctx(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, &p).ctx(|| format!("rename to {}", p.display()))
}

/// One act, as faults.csv records it.
struct Row<'a> {
    at: &'a str,
    act: &'a str,
    fault: &'a str,
    /// A member's pod, or a node (node-loss).
    target: &'a str,
    detail: &'a str,
}

/// Appends one ground-truth row: `ts,act,fault,member,node,detail`; a node's row names the
/// members on it, a member's row its node.
fn log(dir: &Path, r: &Row, members: &[Member]) -> Result<()> {
    use std::io::Write;
    let (member, node) = match members.iter().find(|m| m.name == r.target) {
        Some(m) => (m.name.clone(), m.node.clone()),
        None => {
            let on: Vec<&str> =
                members.iter().filter(|m| m.node == r.target).map(|m| m.name.as_str()).collect();
            (on.join(" "), r.target.to_owned())
        }
    };
    let p = dir.join("faults.csv");
    let new = !p.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .ctx(|| format!("open {}", p.display()))?;
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut line = String::new();
    if new {
        line.push_str("ts,act,fault,member,node,detail\n");
    }
    line.push_str(&format!("{},{},{},{member},{node},{}\n", r.at, r.act, r.fault, q(r.detail)));
    f.write_all(line.as_bytes()).ctx(|| format!("append to {}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_node_s_cgroup_root_and_link_come_from_its_kubelet_config() {
        let config =
            "kind: KubeletConfiguration\ncgroupDriver: cgroupfs\ncgroupRoot: \"/lw1a2b-n2\"\n";
        assert_eq!(
            names_in_kubelet_config("1a2b", config),
            Ok(("lw1a2b-n2".to_owned(), "lw1a2bn2".to_owned()))
        );
        // Another run's config, or none, is refused rather than freezing the wrong cgroup.
        assert!(names_in_kubelet_config("ffff", config).is_err());
        assert!(names_in_kubelet_config("1a2b", "cgroupDriver: cgroupfs\n").is_err());
    }

    #[test]
    fn a_containers_cgroup_is_found_in_the_hierarchy_of_its_controller() {
        let text = "12:freezer:/lw1a2b-n0/kubepods/besteffort/podX/abc\n\
                    4:cpu,cpuacct:/lw1a2b-n0/kubepods/burstable/podY/def\n\
                    0::/\n";
        assert_eq!(
            cgroup_of(text, "cpu"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/lw1a2b-n0/kubepods/burstable/podY/def"))
        );
        assert_eq!(
            cgroup_of(text, "freezer"),
            Some(PathBuf::from("/sys/fs/cgroup/freezer/lw1a2b-n0/kubepods/besteffort/podX/abc"))
        );
        // `cpuacct` is a controller of its own, not a prefix match of `cpu`.
        assert_eq!(cgroup_of("4:cpuacct:/a\n", "cpu"), None);
        assert_eq!(cgroup_of("0::/\n", "freezer"), None);
    }

    #[test]
    fn a_share_under_the_least_quota_grows_the_period() {
        assert_eq!(quota_for(100_000, 5.0), (5_000, 100_000));
        assert_eq!(quota_for(100_000, 1.0), (1_000, 100_000));
        assert_eq!(quota_for(100_000, 0.5), (1_000, 200_000));
        assert_eq!(quota_for(100_000, 0.1), (1_000, 1_000_000));
        assert_eq!(parse_percent("0.5"), Ok(0.5));
        assert!(parse_percent("0.05").is_err() && parse_percent("101").is_err());
        assert!(parse_percent("half").is_err());
    }

    #[test]
    fn an_fsync_delay_is_a_number_and_a_unit() {
        assert_eq!(parse_delay("50ms"), Ok(Duration::from_millis(50)));
        assert_eq!(parse_delay("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_delay("200us"), Ok(Duration::from_micros(200)));
        assert!(parse_delay("50").unwrap_err().contains("unit"));
        assert!(parse_delay("ms").unwrap_err().contains("a number"));
        assert!(parse_delay("-5ms").is_err());
    }
}
