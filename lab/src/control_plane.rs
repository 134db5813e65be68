//! The control plane, each component in its own process: a control-plane etcd of its own
//! (never one of dlock's members), kube-apiserver (RBAC + Node authorizer, ServiceAccount
//! tokens, default admission plugins + NodeRestriction, an audit log of evictions and pod
//! deletions, the kubelets' serving certificates verified against the cluster CA),
//! kube-controller-manager (every default controller) and kube-scheduler.

use crate::error::{Error, IoContext, Result};
use crate::pki::{Identity, Pki};
use crate::proc::{Proc, free_port, last_line};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct Binaries {
    pub etcd: PathBuf,
    pub apiserver: PathBuf,
    pub controller_manager: PathBuf,
    pub scheduler: PathBuf,
    pub kubectl: PathBuf,
}

impl Binaries {
    pub fn find(tools: &Path, kube_version: &str) -> Result<Binaries> {
        let kube = tools.join(format!("kube-{kube_version}/bin"));
        let b = Binaries {
            etcd: tools.join("bin/etcd"),
            apiserver: kube.join("kube-apiserver"),
            controller_manager: kube.join("kube-controller-manager"),
            scheduler: kube.join("kube-scheduler"),
            kubectl: kube.join("kubectl"),
        };
        for (what, p) in [
            ("etcd", &b.etcd),
            ("kube-apiserver", &b.apiserver),
            ("kube-controller-manager", &b.controller_manager),
            ("kube-scheduler", &b.scheduler),
            ("kubectl", &b.kubectl),
        ] {
            if !p.is_file() {
                return Err(Error::MissingTool { what, path: p.clone() });
            }
        }
        Ok(b)
    }
}

/// The cluster's Service range (each node's kube-proxy routes it).
pub const SERVICE_CIDR: &str = "10.96.0.0/16";

pub struct ControlPlane {
    pub procs: Vec<Proc>,
    pub server: String,
    pub admin_kubeconfig: PathBuf,
    pub audit_log: PathBuf,
    /// What a restart of the API server needs: the same binary, flags and port.
    apiserver: (PathBuf, Vec<String>, PathBuf),
    ca_pem: String,
    admin_token: String,
    restarts: u32,
}

const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [\"RequestReceived\"]
rules:
  # Every Eviction request (issue: exactly one member is ever evicted) and pod deletion.
  - level: Request
    resources: [{group: \"\", resources: [\"pods/eviction\"]}]
  - level: Metadata
    verbs: [\"delete\", \"deletecollection\"]
    resources: [{group: \"\", resources: [\"pods\"]}]
  # Everything leaderwatch's ServiceAccount asks, and the operator of tests/lab/sitting_day.rs
  # (tests: every granted verb is used, none refused).
  - level: Metadata
    users: [\"system:serviceaccount:dlock:leaderwatch\", \"system:serviceaccount:default:lw-operator\"]
  - level: None
";

impl ControlPlane {
    /// The control plane's etcd, then kube-apiserver (ready before anything talks to it),
    /// then the controller manager and the scheduler; fails naming the component that did
    /// not start.
    pub async fn start(
        dir: &Path,
        bins: &Binaries,
        pki: &mut Pki,
        bind: Ipv4Addr,
        admin: &Identity,
        extra_apiserver_args: &[String],
    ) -> Result<ControlPlane> {
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).ctx(|| format!("create {}", logs.display()))?;
        let mut procs = Vec::new();
        let (etcd, etcd_url) = start_etcd(dir, bins, &logs).await?;
        procs.push(etcd);

        let ApiServerFlags { mut args, server, audit_log } =
            apiserver_flags(dir, pki, bind, &etcd_url, &logs)?;
        args.extend(extra_apiserver_args.iter().cloned());
        let apiserver_args = args.clone();
        let mut api =
            Proc::spawn("kube-apiserver", &bins.apiserver, &args, logs.join("kube-apiserver.log"))?;
        wait_http(
            &mut api,
            &format!("{server}/readyz"),
            Some((&pki.ca_pem, &admin.token)),
            Duration::from_secs(90),
        )
        .await?;
        procs.push(api);

        let admin_kubeconfig = dir.join("kubeconfig");
        pki.write_kubeconfig(&admin_kubeconfig, &server, admin)?;
        procs.extend(start_controllers(bins, pki, &server, &logs)?);
        tokio::time::sleep(Duration::from_millis(500)).await;
        for p in procs.iter_mut() {
            p.check_running()?;
        }
        Ok(ControlPlane {
            procs,
            server,
            admin_kubeconfig,
            audit_log,
            apiserver: (bins.apiserver.clone(), apiserver_args, logs),
            ca_pem: pki.ca_pem.clone(),
            admin_token: admin.token.clone(),
            restarts: 0,
        })
    }

    /// Pids by component, for state.json (tests freeze or signal them).
    pub fn pids(&self) -> std::collections::BTreeMap<String, u32> {
        self.procs.iter().filter_map(|p| p.pid().map(|pid| (p.name.clone(), pid))).collect()
    }

    /// Stops kube-apiserver (SIGTERM, as a rolling control-plane upgrade does) and starts it
    /// again with the same flags and port; returns once it is ready.
    pub async fn restart_apiserver(&mut self) -> Result<()> {
        let i = self
            .procs
            .iter()
            .position(|p| p.name == "kube-apiserver")
            .ok_or_else(|| Error::Command("no kube-apiserver".into()))?;
        self.procs[i].stop(Duration::from_secs(30)).await;
        self.restarts += 1;
        let (bin, args, logs) = &self.apiserver;
        let mut api = Proc::spawn(
            "kube-apiserver",
            bin,
            args,
            logs.join(format!("kube-apiserver.{}.log", self.restarts)),
        )?;
        wait_http(
            &mut api,
            &format!("{}/readyz", self.server),
            Some((&self.ca_pem, &self.admin_token)),
            Duration::from_secs(90),
        )
        .await?;
        self.procs[i] = api;
        Ok(())
    }

    /// Components whose process has exited.
    pub fn check(&mut self) -> Result<()> {
        for p in self.procs.iter_mut() {
            p.check_running()?;
        }
        Ok(())
    }

    pub async fn stop(&mut self) {
        // Reverse order: the scheduler and controllers first, etcd last.
        while let Some(mut p) = self.procs.pop() {
            p.stop(Duration::from_secs(10)).await;
        }
    }
}

/// The control plane's own etcd, on loopback only (never one of dlock's members), started
/// and healthy; returns it and its client URL.
async fn start_etcd(dir: &Path, bins: &Binaries, logs: &Path) -> Result<(Proc, String)> {
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let (c, p) = (free_port(lo)?, free_port(lo)?);
    let etcd_url = format!("http://127.0.0.1:{c}");
    let peer = format!("http://127.0.0.1:{p}");
    let args = vec![
        "--name=control-plane".into(),
        format!("--data-dir={}", dir.join("control-plane-etcd").display()),
        format!("--listen-client-urls={etcd_url}"),
        format!("--advertise-client-urls={etcd_url}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=control-plane={peer}"),
        "--initial-cluster-state=new".into(),
        "--unsafe-no-fsync=true".into(),
    ];
    let mut etcd =
        Proc::spawn("control-plane etcd", &bins.etcd, &args, logs.join("control-plane-etcd.log"))?;
    wait_http(&mut etcd, &format!("{etcd_url}/health"), None, Duration::from_secs(30)).await?;
    Ok((etcd, etcd_url))
}

/// What kube-apiserver is started with, and where it answers.
struct ApiServerFlags {
    args: Vec<String>,
    server: String,
    audit_log: PathBuf,
}

/// kube-apiserver's flags, with the files they name written first: its serving
/// certificate, its client certificate for the kubelets, the token file, the audit policy.
fn apiserver_flags(
    dir: &Path,
    pki: &Pki,
    bind: Ipv4Addr,
    etcd_url: &str,
    logs: &Path,
) -> Result<ApiServerFlags> {
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let (serving_crt, serving_key) = pki.leaf(
        "apiserver",
        "kube-apiserver",
        &[],
        &[
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
        &[IpAddr::V4(bind), lo, IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1))],
        true,
    )?;
    let (kc_crt, kc_key) = pki.leaf(
        "apiserver-kubelet-client",
        "kube-apiserver-kubelet-client",
        &["system:masters"],
        &[],
        &[],
        false,
    )?;
    let tokens = pki.write_token_file()?;
    let policy = dir.join("audit-policy.yaml");
    crate::pki::write(&policy, AUDIT_POLICY)?;
    let audit_log = logs.join("audit.log");
    let port = free_port(IpAddr::V4(bind))?;
    let server = format!("https://{bind}:{port}");
    let pd = &pki.dir;
    let args: Vec<String> = vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--bind-address={bind}"),
        format!("--advertise-address={bind}"),
        format!("--secure-port={port}"),
        format!("--tls-cert-file={}", serving_crt.display()),
        format!("--tls-private-key-file={}", serving_key.display()),
        format!("--client-ca-file={}", pd.join("ca.crt").display()),
        format!("--token-auth-file={}", tokens.display()),
        "--authorization-mode=Node,RBAC".into(),
        "--enable-admission-plugins=NodeRestriction".into(),
        // As GKE's API server: privileged pods are admitted by the API server (kube-system
        // runs some); Autopilot refuses them elsewhere (lab/policies/autopilot.yaml).
        "--allow-privileged=true".into(),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        format!("--service-account-key-file={}", pd.join("sa.pub").display()),
        format!("--service-account-signing-key-file={}", pd.join("sa.key").display()),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        format!("--kubelet-client-certificate={}", kc_crt.display()),
        format!("--kubelet-client-key={}", kc_key.display()),
        // The kubelets' serving certificates are verified (without a CA the API server skips
        // verification for exec, logs, port-forward and the node proxy): each is signed by
        // the cluster CA for its node's InternalIP, the address dialled (lab.rs, `kit`).
        format!("--kubelet-certificate-authority={}", pd.join("ca.crt").display()),
        "--kubelet-preferred-address-types=InternalIP".into(),
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", audit_log.display()),
        "--audit-log-format=json".into(),
    ];
    Ok(ApiServerFlags { args, server, audit_log })
}

/// kube-controller-manager (every default controller, each with its own ServiceAccount's
/// credentials) and kube-scheduler, each with the static token of its own identity.
fn start_controllers(bins: &Binaries, pki: &Pki, server: &str, logs: &Path) -> Result<Vec<Proc>> {
    let pd = &pki.dir;
    let identity = |name: &str| {
        pki.tokens
            .iter()
            .find(|t| t.name == name)
            .cloned()
            .ok_or_else(|| Error::Command(format!("no {name} identity")))
    };
    let kcm_id = identity("kube-controller-manager")?;
    let sched_id = identity("kube-scheduler")?;
    let kcm_kc = pd.join("kube-controller-manager.kubeconfig");
    pki.write_kubeconfig(&kcm_kc, server, &kcm_id)?;
    let sched_kc = pd.join("kube-scheduler.kubeconfig");
    pki.write_kubeconfig(&sched_kc, server, &sched_id)?;

    let args = vec![
        format!("--kubeconfig={}", kcm_kc.display()),
        "--leader-elect=false".into(),
        "--secure-port=0".into(),
        "--controllers=*".into(),
        "--use-service-account-credentials=true".into(),
        format!("--service-account-private-key-file={}", pd.join("sa.key").display()),
        format!("--root-ca-file={}", pd.join("ca.crt").display()),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
    ];
    let kcm = Proc::spawn(
        "kube-controller-manager",
        &bins.controller_manager,
        &args,
        logs.join("kube-controller-manager.log"),
    )?;
    let args = vec![
        format!("--kubeconfig={}", sched_kc.display()),
        "--leader-elect=false".into(),
        "--secure-port=0".into(),
    ];
    let sched =
        Proc::spawn("kube-scheduler", &bins.scheduler, &args, logs.join("kube-scheduler.log"))?;
    Ok(vec![kcm, sched])
}

/// Polls `url` until it answers 200, failing early if the process exits.
async fn wait_http(
    p: &mut Proc,
    url: &str,
    auth: Option<(&str, &str)>,
    within: Duration,
) -> Result<()> {
    let mut b = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .connect_timeout(Duration::from_secs(2));
    if let Some((ca, _)) = auth {
        let cert = reqwest::Certificate::from_pem(ca.as_bytes())
            .map_err(|e| Error::Command(format!("CA: {e}")))?;
        b = b.add_root_certificate(cert);
    }
    let client = b.build().map_err(|e| Error::Command(format!("HTTP client: {e}")))?;
    let start = Instant::now();
    let mut last = String::from("no answer yet");
    while start.elapsed() < within {
        p.check_running()?;
        let mut req = client.get(url);
        if let Some((_, token)) = auth {
            req = req.bearer_auth(token);
        }
        match req.send().await {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => last = format!("HTTP {}", r.status()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Err(Error::NotReady {
        component: p.name.clone(),
        secs: within.as_secs(),
        detail: format!("{url}: {last}; last log line: {}", last_line(&p.log)),
        log: p.log.clone(),
    })
}
