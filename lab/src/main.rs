//! `lw-lab`: a local Kubernetes cluster for leaderwatch (docs/local-cluster.md).
//! Parse, dispatch, map errors to exit codes; nothing else.

mod acceptance;
mod control_plane;
mod coredns;
mod error;
mod events;
mod fault;
mod images;
mod lab;
mod measure;
mod net;
mod node;
mod pki;
mod policies;
mod proc;
mod registry;
mod storage;

use clap::{Parser, Subcommand};
use error::{Error, Result};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "lw-lab",
    version,
    about = "A local Kubernetes control plane (kube-apiserver, controller-manager, scheduler built from k8s.io/kubernetes) and nodes of the real kubelet, containerd, kube-proxy and CoreDNS, for leaderwatch",
    after_help = "Examples:
  lw-lab up                 # foreground; Ctrl-C stops everything
  lw-lab up --detach        # returns once the cluster is ready (make kube-up)
  KUBECONFIG=.tools/lab/kubeconfig .tools/kube-v1.35.4/bin/kubectl get nodes -L topology.kubernetes.io/zone
  lw-lab down               # stops a detached cluster, or cleans what a killed one left (make kube-down)
  lw-lab acceptance         # T-056's acceptance criteria on a fresh cluster (make acceptance)
  lw-lab measure -- --target leader --idle 20m --settle 5m   # the sitting on a fresh cluster (make rehearse-kube)
  lw-lab fault partition --pod leader    # cut the leader from its peers (lw-lab fault clear undoes it)
  lw-lab fault cpu --pod dlock-etcd-1 --percent 5   # its container at 5 % of a core (0.5: 1 ms in 200)
  lw-lab --disk-faults up --detach; lw-lab fault disk --pod leader --fsync 200ms   # a slow disk under the leader
  lw-lab --surge-nodes measure -- --method drain --target leader   # a drain, a surge node joining the zone

Exit codes: 0 ok, 1 error, 2 bad usage, 3 a tool is missing (make kube-tools), 4 left over from an earlier run (lw-lab down), 5 a component did not start, 6 an acceptance criterion failed."
)]
struct Cli {
    /// Run directory (kubeconfig, logs, state.json, volumes).
    #[arg(long, global = true, default_value = ".tools/lab")]
    dir: PathBuf,
    /// Where `make kube-tools` put etcd (bin/) and Kubernetes (kube-<version>/bin/).
    #[arg(long, global = true, default_value = ".tools")]
    tools: PathBuf,
    /// A surge node joins a zone when one of its nodes is cordoned, as a GKE surge upgrade
    /// adds one: a drained member then comes back on it (without, it waits for the uncordon).
    #[arg(long, global = true)]
    surge_nodes: bool,
    /// Every volume on lw-slowfs (a passthrough FUSE filesystem), so that `lw-lab fault
    /// disk` can slow a member's fsync while it runs; without, a volume is a plain directory.
    #[arg(long, global = true)]
    disk_faults: bool,
    /// An image the nodes hold besides etcd's and pause, REF=LAYOUT[:TAG] (repeatable):
    /// imported into every node's containerd as REF, e.g.
    /// --image europe-west1-docker.pkg.dev/lw-lab/dlock/leaderwatch:0.1.0=target/image/oci:0.1.0
    #[arg(long = "image", global = true, value_name = "REF=LAYOUT[:TAG]")]
    images: Vec<images::OciSource>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start the cluster; stays in the foreground unless --detach.
    Up {
        /// Return once the cluster is ready; the cluster keeps running (stop it with `down`).
        #[arg(long)]
        detach: bool,
        /// An extra kube-apiserver flag (repeatable), e.g. --apiserver-arg=--etcd-compaction-interval=10s.
        #[arg(long = "apiserver-arg", allow_hyphen_values = true)]
        apiserver_args: Vec<String>,
    },
    /// Stop a running cluster and remove what a killed run left behind.
    Down,
    /// Say whether a cluster is running, and where its kubeconfig is.
    Status,
    /// The GKE sitting on a fresh cluster: apply.sh, rbac.yaml, a ServiceAccount token, then
    /// `leaderwatch measure --reach pod-ip` with ARGS (e.g. --target leader --idle 20m), the table, tear down.
    Measure {
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        #[arg(long, default_value = "target/release/leaderwatch")]
        leaderwatch: PathBuf,
        /// Move etcd's leadership to this member first (etcdctl move-leader), e.g.
        /// dlock-etcd-2 for a rolling restart that replaces the leader first.
        #[arg(long)]
        leader: Option<String>,
        /// Passed to `leaderwatch measure` (after `--`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// A fault below etcd on the running cluster (`up --detach`), or its undo: each act is
    /// a row of <dir>/faults.csv (the ground truth leaderwatch never reads).
    Fault {
        #[command(subcommand)]
        cmd: fault::FaultCmd,
    },
    /// Bring a fresh cluster up, deploy with deploy/k8s/apply.sh, check T-056's criteria 1-8 and §6, tear down.
    Acceptance {
        /// The repository (deploy/, target/release/leaderwatch).
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// The leaderwatch binary whose `preflight` is checked against the cluster.
        #[arg(long, default_value = "target/release/leaderwatch")]
        leaderwatch: PathBuf,
    },
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LW_LAB_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("lw-lab: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}

fn abs(p: PathBuf) -> PathBuf {
    if p.is_absolute() { p } else { std::env::current_dir().map(|d| d.join(&p)).unwrap_or(p) }
}

fn run(cli: Cli) -> Result<()> {
    if !nix::unistd::Uid::effective().is_root() {
        return Err(Error::Usage(
            "lw-lab needs root (network namespaces, bridges, cgroups, containerd)".into(),
        ));
    }
    let apiserver_args = match &cli.cmd {
        Cmd::Up { apiserver_args, .. } => apiserver_args.clone(),
        _ => vec![],
    };
    let opts = lab::Options {
        dir: abs(cli.dir),
        tools: abs(cli.tools),
        apiserver_args,
        surge: cli.surge_nodes,
        disk_faults: cli.disk_faults,
        images: cli
            .images
            .into_iter()
            .map(|mut i| {
                i.layout = abs(i.layout);
                i
            })
            .collect(),
    };
    if let Cmd::Up { detach: true, .. } = cli.cmd {
        return detach(&opts);
    }
    let rt = tokio::runtime::Runtime::new().map_err(|e| Error::Command(format!("tokio: {e}")))?;
    rt.block_on(async move {
        match cli.cmd {
            Cmd::Up { .. } => up(opts).await,
            Cmd::Down => {
                down(&opts).await;
                Ok(())
            }
            Cmd::Status => match lab::read_state(&opts.dir) {
                Some(s) if registry::alive(s.pid) => {
                    println!(
                        "running (pid {}): API server {}, KUBECONFIG={}",
                        s.pid,
                        s.server,
                        s.kubeconfig.display()
                    );
                    Ok(())
                }
                Some(s) => Err(Error::Leftover(format!(
                    "state of a run that is no longer alive (pid {}); run `lw-lab down`",
                    s.pid
                ))),
                None => {
                    println!("not running");
                    Ok(())
                }
            },
            Cmd::Measure { repo, leaderwatch, leader, args } => {
                let repo = abs(repo);
                let lw =
                    if leaderwatch.is_absolute() { leaderwatch } else { repo.join(leaderwatch) };
                measure::run(&opts, &repo, &lw, leader, args).await
            }
            Cmd::Fault { cmd } => match lab::read_state(&opts.dir) {
                Some(s) if registry::alive(s.pid) => {
                    fault::run(&s, &opts.dir, &opts.tools, cmd).await
                }
                _ => Err(Error::Usage(format!(
                    "no cluster running in {} (start one with `lw-lab up --detach`)",
                    opts.dir.display()
                ))),
            },
            Cmd::Acceptance { repo, leaderwatch } => {
                let repo = abs(repo);
                let lw =
                    if leaderwatch.is_absolute() { leaderwatch } else { repo.join(leaderwatch) };
                acceptance::run(&opts, &repo, &lw).await
            }
        }
    })
}

/// Runs `f` with the cluster up; Ctrl-C, SIGTERM, SIGHUP or a panic in `f` all tear it down.
pub async fn with_lab<F, Fut>(opts: &lab::Options, f: F) -> Result<()>
where
    F: FnOnce(lab::State) -> Fut,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    use tokio::signal::unix::{SignalKind, signal};
    // Signals are caught from the start: a SIGTERM while the cluster is still coming up
    // (a test giving up) must not leave its bridge and namespaces behind.
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| Error::Command(format!("signal: {e}")))?;
    let mut hup =
        signal(SignalKind::hangup()).map_err(|e| Error::Command(format!("signal: {e}")))?;
    let started = tokio::select! {
        r = lab::Lab::start(opts) => Some(r),
        _ = tokio::signal::ctrl_c() => None,
        _ = term.recv() => None,
        _ = hup.recv() => None,
    };
    let mut lab = match started {
        Some(r) => r?,
        None => {
            // The start future is gone: its processes were killed on drop; its names are
            // no longer registered as live once the registry entry goes.
            let removed = lab::clean_leftovers(&opts.dir, &opts.tools).await;
            return Err(Error::Command(format!(
                "interrupted while starting; removed {}",
                if removed.is_empty() { "nothing".to_string() } else { removed.join(", ") }
            )));
        }
    };
    // SIGUSR1 restarts kube-apiserver in place (tests of leaderwatch's watchers).
    let mut usr1 =
        signal(SignalKind::user_defined1()).map_err(|e| Error::Command(format!("signal: {e}")))?;
    let mut task = tokio::spawn(f(lab.state.clone()));
    let mut watchdog = tokio::time::interval(std::time::Duration::from_secs(2));
    let result = loop {
        tokio::select! {
            r = &mut task => break match r {
                Ok(r) => r,
                Err(e) if e.is_panic() => Err(Error::Command("panicked; the cluster was torn down".into())),
                Err(e) => Err(Error::Command(e.to_string())),
            },
            _ = tokio::signal::ctrl_c() => { task.abort(); break Err(Error::Command("interrupted; the cluster was torn down".into())); }
            _ = term.recv() => { task.abort(); break Ok(()); }
            _ = hup.recv() => { task.abort(); break Ok(()); }
            _ = watchdog.tick() => if let Err(e) = lab.check().await { task.abort(); break Err(e); },
            _ = usr1.recv() => if let Err(e) = lab.restart_apiserver().await { task.abort(); break Err(e); },
        }
    };
    lab.stop().await;
    result
}

async fn up(opts: lab::Options) -> Result<()> {
    let dir = opts.dir.clone();
    with_lab(&opts, move |s| async move {
        println!(
            "lw-lab: cluster up (Kubernetes {}, nodes {}); export KUBECONFIG={}",
            lab::KUBE_VERSION,
            s.nodes.iter().map(|n| format!("{} in {}", n.0, n.1)).collect::<Vec<_>>().join(", "),
            s.kubeconfig.display()
        );
        let _ = std::fs::write(dir.join("ready"), b"ready\n");
        std::future::pending::<()>().await;
        Ok(())
    })
    .await
}

/// Starts `up` in its own session, its output in <dir>.log, and waits for it to be ready.
fn detach(opts: &lab::Options) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|e| Error::Command(format!("current_exe: {e}")))?;
    let log_path = opts.dir.with_extension("log");
    if let Some(p) = log_path.parent() {
        let _ = std::fs::create_dir_all(p);
    }
    let log = std::fs::File::create(&log_path)
        .map_err(|e| Error::Command(format!("create {}: {e}", log_path.display())))?;
    let ready = opts.dir.join("ready");
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("--dir").arg(&opts.dir).arg("--tools").arg(&opts.tools);
    if opts.surge {
        cmd.arg("--surge-nodes");
    }
    if opts.disk_faults {
        cmd.arg("--disk-faults");
    }
    for i in &opts.images {
        cmd.arg(format!("--image={}={}:{}", i.reference, i.layout.display(), i.tag));
    }
    cmd.arg("up");
    for a in &opts.apiserver_args {
        cmd.arg(format!("--apiserver-arg={a}"));
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(log.try_clone().map_err(|e| Error::Command(e.to_string()))?)
        .stderr(log);
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|e| Error::Command(format!("start lw-lab up: {e}")))?;
    let start = std::time::Instant::now();
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            let last = proc::last_line(&log_path);
            return Err(Error::Exited {
                component: "lw-lab up".into(),
                status: st.to_string(),
                last,
                log: log_path,
            });
        }
        if ready.is_file() && lab::read_state(&opts.dir).is_some() {
            let s =
                lab::read_state(&opts.dir).ok_or_else(|| Error::Command("state.json".into()))?;
            println!(
                "lw-lab: cluster up (pid {}); export KUBECONFIG={}",
                s.pid,
                s.kubeconfig.display()
            );
            return Ok(());
        }
        if start.elapsed() > std::time::Duration::from_secs(240) {
            let _ = child.kill();
            return Err(Error::NotReady {
                component: "lw-lab up".into(),
                secs: 240,
                detail: proc::last_line(&log_path),
                log: log_path,
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

async fn down(opts: &lab::Options) {
    if let Some(s) = lab::read_state(&opts.dir)
        && registry::alive(s.pid)
    {
        // A frozen container cannot be killed, a stopped kubelet not stopped: undo first.
        if let Err(e) = fault::clear_all(&s, &opts.dir).await {
            eprintln!("lw-lab: undoing the faults in force: {e}");
        }
        let pid = nix::unistd::Pid::from_raw(s.pid as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let start = std::time::Instant::now();
        while registry::alive(s.pid) && start.elapsed() < std::time::Duration::from_secs(90) {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        println!("lw-lab: stopped the cluster (pid {})", s.pid);
    }
    let removed = lab::clean_leftovers(&opts.dir, &opts.tools).await;
    if removed.is_empty() {
        println!("lw-lab: nothing left behind");
    } else {
        println!("lw-lab: removed what a killed run left: {}", removed.join(", "));
    }
}
