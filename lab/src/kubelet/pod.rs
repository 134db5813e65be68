//! One pod's life on the process kubelet: sandbox, containers, probes, restarts with
//! back-off, status, and the kubelet's part of deletion.

use super::probe::{self, Kind as ProbeKind, Outcome};
use super::runtime::{self, Mount, Spec};
use super::sandbox::{self, Sandbox};
use super::{ContainerEntry, ExecTarget, Msg, Shared};
use crate::events::{self, Kind, Source};
use crate::nodes::NodeSpec;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

const MAX_BACKOFF: Duration = Duration::from_secs(300);

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

#[derive(Clone)]
struct Term {
    exit_code: i32,
    reason: String,
    started_at: String,
    finished_at: String,
    container_id: String,
}

struct Instance {
    id: String,
    exit: watch::Receiver<Option<i32>>,
    started_at: String,
    since: Instant,
    exec: ExecTarget,
}

struct Ctr {
    spec: Container,
    generation: u64,
    instance: Option<Instance>,
    restarts: i32,
    started: bool,
    ready: bool,
    waiting: Option<(String, String)>,
    last_term: Option<Term>,
    /// Terminated and not to be restarted.
    done: Option<Term>,
    backoff: Duration,
    next_start: Option<Instant>,
    probes: Vec<JoinHandle<()>>,
    log: std::path::PathBuf,
    previous_log: Option<std::path::PathBuf>,
}

pub struct Worker {
    client: Client,
    node: NodeSpec,
    sh: Arc<Shared>,
    rx: watch::Receiver<Option<Pod>>,
    pod: Pod,
    src: Source,
    sandbox: Option<Sandbox>,
    ctrs: Vec<Ctr>,
    conditions: HashMap<&'static str, (bool, String)>,
    start_time: Option<String>,
    last_status: Option<Value>,
    tx: mpsc::Sender<Msg>,
    msgs: mpsc::Receiver<Msg>,
}

impl Worker {
    pub fn new(
        client: Client,
        node: NodeSpec,
        sh: Arc<Shared>,
        rx: watch::Receiver<Option<Pod>>,
    ) -> Worker {
        let pod = rx.borrow().clone().unwrap_or_default();
        let (tx, msgs) = mpsc::channel(64);
        let ctrs = pod
            .spec
            .as_ref()
            .map(|s| s.containers.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|spec| Ctr {
                spec,
                generation: 0,
                instance: None,
                restarts: 0,
                started: false,
                ready: false,
                waiting: Some(("ContainerCreating".into(), String::new())),
                last_term: None,
                done: None,
                backoff: Duration::ZERO,
                next_start: Some(Instant::now()),
                probes: vec![],
                log: Default::default(),
                previous_log: None,
            })
            .collect();
        let src = Source { component: "kubelet".into(), host: Some(node.name.clone()) };
        Worker {
            client,
            node,
            sh,
            rx,
            pod,
            src,
            sandbox: None,
            ctrs,
            conditions: HashMap::new(),
            start_time: None,
            last_status: None,
            tx,
            msgs,
        }
    }

    fn ns(&self) -> String {
        self.pod.namespace().unwrap_or_default()
    }

    fn uid(&self) -> String {
        self.pod.metadata.uid.clone().unwrap_or_default()
    }

    fn restart_policy(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into())
    }

    fn grace(&self) -> Duration {
        let g = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| self.pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
            .unwrap_or(30);
        Duration::from_secs(g.max(0) as u64)
    }

    async fn event(&self, container: Option<&str>, kind: Kind, reason: &str, msg: &str) {
        events::pod(&self.client, &self.src, &self.pod, container, kind, reason, msg).await;
    }

    pub async fn run(mut self) {
        if self
            .pod
            .spec
            .as_ref()
            .is_some_and(|s| s.init_containers.as_ref().is_some_and(|i| !i.is_empty()))
        {
            self.event(
                None,
                Kind::Warning,
                "FailedCreatePodSandBox",
                "the lw-lab process kubelet does not run init containers",
            )
            .await;
        }
        // The sandbox, retried until it works or the pod goes.
        while self.sandbox.is_none() {
            if self.pod.metadata.deletion_timestamp.is_some() {
                self.finish_deletion().await;
                return;
            }
            // Bounded: the volumes need the API server, which may not answer for a while.
            let made = tokio::time::timeout(
                Duration::from_secs(30),
                sandbox::create(&self.sh, &self.client, &self.pod),
            )
            .await
            .unwrap_or_else(|_| {
                Err(crate::error::Error::Command(
                    "the API server did not answer within 30 s while mounting the volumes".into(),
                ))
            });
            match made {
                Ok(sb) => {
                    self.set_condition("PodReadyToStartContainers", true);
                    self.set_condition("Initialized", true);
                    self.start_time = Some(now());
                    self.sandbox = Some(sb);
                }
                Err(e) => {
                    self.event(None, Kind::Warning, "FailedMount", &e.to_string()).await;
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                        r = self.rx.changed() => if r.is_err() || self.rx.borrow().is_none() { return; }
                    }
                    if let Some(p) = self.rx.borrow().clone() {
                        self.pod = p;
                    }
                }
            }
        }
        self.push_status().await;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                r = self.rx.changed() => {
                    let latest = if r.is_ok() { self.rx.borrow().clone() } else { None };
                    match latest {
                        None => { self.force_stop().await; return; }
                        Some(p) => {
                            self.pod = p;
                            if self.pod.metadata.deletion_timestamp.is_some() {
                                self.terminate().await;
                                self.finish_deletion().await;
                                return;
                            }
                        }
                    }
                }
                Some(m) = self.msgs.recv() => self.handle(m).await,
                _ = tick.tick() => self.start_due().await,
            }
            self.push_status().await;
        }
    }

    async fn start_due(&mut self) {
        let terminal = self.phase() != "Pending" && self.phase() != "Running";
        if terminal {
            return;
        }
        for i in 0..self.ctrs.len() {
            let c = &self.ctrs[i];
            if c.instance.is_none()
                && c.done.is_none()
                && c.next_start.is_some_and(|t| t <= Instant::now())
            {
                self.ctrs[i].next_start = None;
                self.start(i).await;
            }
        }
    }

    /// Creates and starts container `i` (one attempt; failures are waiting states).
    async fn start(&mut self, i: usize) {
        let Some(sb) = &self.sandbox else { return };
        let c = self.ctrs[i].spec.clone();
        let name = c.name.clone();
        let image_ref = c.image.clone().unwrap_or_default();
        let Some(image) = self.sh.images.iter().find(|im| im.reference == image_ref) else {
            let known: Vec<&str> = self.sh.images.iter().map(|im| im.reference.as_str()).collect();
            self.event(Some(&name), Kind::Warning, "Failed", &format!("Failed to pull image \"{image_ref}\": the lw-lab image map has no such image (it has: {})", known.join(", "))).await;
            self.back_off(
                i,
                "ImagePullBackOff",
                &format!("Back-off pulling image \"{image_ref}\""),
            )
            .await;
            return;
        };
        let psc =
            self.pod.spec.as_ref().and_then(|s| s.security_context.clone()).unwrap_or_default();
        let csc = c.security_context.clone().unwrap_or_default();
        // The pod's user, else the image's USER, else root (as the kubelet resolves it).
        let (image_uid, image_gid) = image.user.unwrap_or((0, 0));
        let uid = csc.run_as_user.or(psc.run_as_user).map(|u| u as u32).unwrap_or(image_uid);
        let gid = csc.run_as_group.or(psc.run_as_group).map(|g| g as u32).unwrap_or(image_gid);
        if csc.run_as_non_root.or(psc.run_as_non_root) == Some(true) && uid == 0 {
            let msg = "container has runAsNonRoot and image will run as root";
            self.event(Some(&name), Kind::Warning, "Failed", &format!("Error: {msg}")).await;
            self.ctrs[i].waiting = Some(("CreateContainerConfigError".into(), msg.into()));
            self.ctrs[i].next_start = Some(Instant::now() + Duration::from_secs(10));
            return;
        }
        let mut groups: Vec<u32> = psc.fs_group.map(|g| vec![g as u32]).unwrap_or_default();
        groups.extend(psc.supplemental_groups.iter().flatten().map(|g| *g as u32));
        // Environment: image env, the `kubernetes` Service's variables, then the container's.
        let mut base: Vec<(String, String)> = image
            .env
            .iter()
            .filter_map(|e| e.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        base.push(("HOSTNAME".into(), sb.hostname.clone()));
        let (h, p) = (self.sh.api_host.clone(), self.sh.api_port);
        for (k, v) in [
            ("KUBERNETES_SERVICE_HOST", h.clone()),
            ("KUBERNETES_SERVICE_PORT", p.to_string()),
            ("KUBERNETES_SERVICE_PORT_HTTPS", p.to_string()),
            ("KUBERNETES_PORT", format!("tcp://{h}:{p}")),
            ("KUBERNETES_PORT_443_TCP", format!("tcp://{h}:{p}")),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp".into()),
            ("KUBERNETES_PORT_443_TCP_PORT", p.to_string()),
            ("KUBERNETES_PORT_443_TCP_ADDR", h.clone()),
        ] {
            base.push((k.into(), v));
        }
        let lookups = self.lookups(&c).await;
        let lookup = move |name: &str, key: &str, secret: bool| -> Option<String> {
            let m = lookups.get(&(secret, name.to_string()))?;
            if key == "*" {
                return Some(m.iter().map(|(k, v)| format!("{k}={v}\n")).collect());
            }
            m.get(key).cloned()
        };
        let host_ip = self.node.ip.to_string();
        let env =
            match super::env::build(&self.pod, &c, &base, &sb.ip.to_string(), &host_ip, &lookup) {
                Ok(e) => e,
                Err(msg) => {
                    self.event(Some(&name), Kind::Warning, "Failed", &format!("Error: {msg}"))
                        .await;
                    self.ctrs[i].waiting = Some(("CreateContainerConfigError".into(), msg));
                    self.ctrs[i].next_start = Some(Instant::now() + Duration::from_secs(10));
                    return;
                }
            };
        let vars: HashMap<String, String> = env.iter().cloned().collect();
        let cmd: Vec<String> = c.command.clone().unwrap_or_default();
        let args: Vec<String> = c.args.clone().unwrap_or_default();
        let mut argv: Vec<String> = match (cmd.is_empty(), args.is_empty()) {
            (false, _) => cmd.iter().chain(args.iter()).cloned().collect(),
            (true, false) => image.entrypoint.iter().chain(args.iter()).cloned().collect(),
            (true, true) => image.entrypoint.iter().chain(image.cmd.iter()).cloned().collect(),
        };
        if !cmd.is_empty() || !args.is_empty() {
            argv = argv.iter().map(|a| super::env::expand(a, &vars)).collect();
        }
        let mut mounts = Vec::new();
        let has = |d: &str, mounts: &Vec<Mount>| mounts.iter().any(|m| m.destination == d);
        for vm in c.volume_mounts.iter().flatten() {
            let Some(src) = sb.volumes.get(&vm.name) else { continue };
            let mut src = src.clone();
            if let Some(sp) = vm.sub_path.as_ref().filter(|s| !s.is_empty()) {
                src = src.join(sp);
                let _ = std::fs::create_dir_all(&src);
            }
            mounts.push(Mount {
                source: src,
                destination: vm.mount_path.clone(),
                read_only: vm.read_only == Some(true),
            });
        }
        for (dst, srcp) in [
            ("/etc/hosts", &sb.hosts),
            ("/etc/resolv.conf", &sb.resolv),
            ("/etc/hostname", &sb.hostname_file),
        ] {
            if !has(dst, &mounts) {
                mounts.push(Mount {
                    source: srcp.clone(),
                    destination: dst.into(),
                    read_only: false,
                });
            }
        }
        let caps = csc.capabilities.clone().unwrap_or_default();
        let drop: Vec<String> = caps.drop.clone().unwrap_or_default();
        let drop_all = drop.iter().any(|d| d == "ALL");
        let mut capabilities: Vec<String> = if drop_all {
            vec![]
        } else {
            runtime::DEFAULT_CAPS
                .iter()
                .map(|c| c.to_string())
                .filter(|c| !drop.iter().any(|d| format!("CAP_{d}") == *c))
                .collect()
        };
        capabilities.extend(caps.add.iter().flatten().map(|a| format!("CAP_{a}")));
        let restarts = self.ctrs[i].restarts;
        let uid_s = self.uid();
        let id = format!("{}-{}-{}", &uid_s[..uid_s.len().min(8)], name, restarts);
        let bundle = sb.dir.join("containers").join(format!("{name}-{restarts}"));
        let logdir = sb.dir.join("logs").join(&name);
        let _ = std::fs::create_dir_all(&logdir);
        let log = logdir.join(format!("{restarts}.log"));
        let spec = Spec {
            bundle: &bundle,
            image_rootfs: &image.rootfs,
            args: argv,
            env: env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            cwd: c.working_dir.clone().unwrap_or_else(|| "/".into()),
            uid,
            gid,
            groups: groups.clone(),
            hostname: sb.hostname.clone(),
            netns: &sb.netns,
            read_only_root: csc.read_only_root_filesystem == Some(true),
            no_new_privileges: csc.allow_privilege_escalation == Some(false),
            capabilities,
            mounts,
        };
        self.event(
            Some(&name),
            Kind::Normal,
            "Pulled",
            &format!("Container image \"{image_ref}\" already present on machine"),
        )
        .await;
        if let Err(e) = self.sh.runc.create_bundle(&spec) {
            self.event(Some(&name), Kind::Warning, "Failed", &format!("Error: {e}")).await;
            self.back_off(i, "CreateContainerError", &e.to_string()).await;
            return;
        }
        self.event(Some(&name), Kind::Normal, "Created", &format!("Created container: {name}"))
            .await;
        let mut child = match self.sh.runc.run(&id, &bundle, &log) {
            Ok(ch) => ch,
            Err(e) => {
                self.event(Some(&name), Kind::Warning, "Failed", &format!("Error: {e}")).await;
                self.back_off(i, "RunContainerError", &e.to_string()).await;
                return;
            }
        };
        let (exit_tx, exit_rx) = watch::channel(None);
        let generation = self.ctrs[i].generation;
        let (tx, runc) = (self.tx.clone(), self.sh.runc.clone());
        let id2 = id.clone();
        tokio::spawn(async move {
            let code = match child.wait().await {
                Ok(st) => st.code().unwrap_or_else(|| {
                    128 + std::os::unix::process::ExitStatusExt::signal(&st).unwrap_or(9)
                }),
                Err(_) => 255,
            };
            runc.delete(&id2).await;
            let _ = exit_tx.send(Some(code));
            let _ = tx.send(Msg::Exited { idx: i, generation, code }).await;
        });
        self.event(Some(&name), Kind::Normal, "Started", &format!("Started container {name}"))
            .await;
        let exec = ExecTarget { runc: self.sh.runc.clone(), id: id.clone(), uid, gid, groups };
        let key = (self.ns(), self.pod.name_any(), name.clone());
        let ctr = &mut self.ctrs[i];
        ctr.previous_log = if restarts > 0 { Some(ctr.log.clone()) } else { None };
        ctr.log = log.clone();
        ctr.instance = Some(Instance {
            id,
            exit: exit_rx,
            started_at: now(),
            since: Instant::now(),
            exec: exec.clone(),
        });
        ctr.waiting = None;
        ctr.started = c.startup_probe.is_none();
        ctr.ready = false;
        if let Ok(mut reg) = self.sh.registry.lock() {
            reg.insert(
                key,
                ContainerEntry { exec: Some(exec), log, previous_log: ctr.previous_log.clone() },
            );
        }
        if c.startup_probe.is_some() {
            self.spawn_probe(i, ProbeKind::Startup);
        } else {
            self.after_startup(i);
        }
    }

    /// ConfigMaps and Secrets the container's env names, read once per start.
    async fn lookups(&self, c: &Container) -> HashMap<(bool, String), HashMap<String, String>> {
        let ns = self.ns();
        let mut names: Vec<(bool, String)> = Vec::new();
        for e in c.env.iter().flatten() {
            if let Some(vf) = &e.value_from {
                if let Some(r) = &vf.config_map_key_ref {
                    names.push((false, r.name.clone()));
                }
                if let Some(r) = &vf.secret_key_ref {
                    names.push((true, r.name.clone()));
                }
            }
        }
        for ef in c.env_from.iter().flatten() {
            if let Some(r) = &ef.config_map_ref {
                names.push((false, r.name.clone()));
            }
            if let Some(r) = &ef.secret_ref {
                names.push((true, r.name.clone()));
            }
        }
        let mut out = HashMap::new();
        for (secret, name) in names {
            let data: Option<HashMap<String, String>> = if secret {
                Api::<Secret>::namespaced(self.client.clone(), &ns)
                    .get_opt(&name)
                    .await
                    .ok()
                    .flatten()
                    .map(|s| {
                        s.data
                            .unwrap_or_default()
                            .into_iter()
                            .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                            .collect()
                    })
            } else {
                Api::<ConfigMap>::namespaced(self.client.clone(), &ns)
                    .get_opt(&name)
                    .await
                    .ok()
                    .flatten()
                    .map(|cm| cm.data.unwrap_or_default().into_iter().collect())
            };
            if let Some(d) = data {
                out.insert((secret, name), d);
            }
        }
        out
    }

    fn spawn_probe(&mut self, i: usize, kind: ProbeKind) {
        let c = &self.ctrs[i];
        let p = match kind {
            ProbeKind::Startup => c.spec.startup_probe.clone(),
            ProbeKind::Readiness => c.spec.readiness_probe.clone(),
            ProbeKind::Liveness => c.spec.liveness_probe.clone(),
        };
        let (Some(p), Some(sb), Some(inst)) = (p, &self.sandbox, &c.instance) else { return };
        let target = probe::Target {
            pod_ip: sb.ip,
            container: c.spec.clone(),
            exec: Some(inst.exec.clone()),
        };
        let h = tokio::spawn(probe::run(kind, p, target, i, c.generation, self.tx.clone()));
        self.ctrs[i].probes.push(h);
    }

    fn after_startup(&mut self, i: usize) {
        self.ctrs[i].started = true;
        if self.ctrs[i].spec.readiness_probe.is_some() {
            self.spawn_probe(i, ProbeKind::Readiness);
        } else {
            self.ctrs[i].ready = true;
        }
        self.spawn_probe(i, ProbeKind::Liveness);
    }

    async fn back_off(&mut self, i: usize, reason: &str, message: &str) {
        let c = &mut self.ctrs[i];
        c.backoff = if c.backoff.is_zero() {
            Duration::from_secs(10)
        } else {
            (c.backoff * 2).min(MAX_BACKOFF)
        };
        c.next_start = Some(Instant::now() + c.backoff);
        c.waiting = Some((reason.into(), message.into()));
        let name = c.spec.name.clone();
        self.event(Some(&name), Kind::Warning, "BackOff", message).await;
    }

    async fn handle(&mut self, m: Msg) {
        match m {
            Msg::Exited { idx, generation, code } => {
                if self.ctrs[idx].generation == generation {
                    self.on_exit(idx, code).await;
                }
            }
            Msg::Probe { idx, generation, outcome } => {
                if self.ctrs[idx].generation != generation {
                    return;
                }
                let name = self.ctrs[idx].spec.name.clone();
                match outcome {
                    Outcome::StartupSucceeded => self.after_startup(idx),
                    Outcome::Ready(r) => self.ctrs[idx].ready = r,
                    Outcome::Unhealthy(kind, msg) => {
                        self.event(
                            Some(&name),
                            Kind::Warning,
                            "Unhealthy",
                            &format!("{} probe failed: {msg}", kind.label()),
                        )
                        .await;
                    }
                    Outcome::Failed(kind) => {
                        let what = if kind == ProbeKind::Startup { "startup" } else { "liveness" };
                        self.event(
                            Some(&name),
                            Kind::Normal,
                            "Killing",
                            &format!("Container {name} failed {what} probe, will be restarted"),
                        )
                        .await;
                        let grace = self
                            .pod
                            .spec
                            .as_ref()
                            .and_then(|s| s.termination_grace_period_seconds)
                            .unwrap_or(30);
                        if let Some(code) =
                            self.stop(idx, Duration::from_secs(grace.max(0) as u64)).await
                        {
                            self.on_exit(idx, code).await;
                        }
                    }
                }
            }
        }
    }

    /// SIGTERM, wait up to `grace`, SIGKILL; the exit code, if the container ran.
    async fn stop(&mut self, i: usize, grace: Duration) -> Option<i32> {
        for p in self.ctrs[i].probes.drain(..) {
            p.abort();
        }
        let inst = self.ctrs[i].instance.as_ref()?;
        let (id, mut exit) = (inst.id.clone(), inst.exit.clone());
        self.sh.runc.kill(&id, "TERM").await;
        let waited = tokio::time::timeout(grace, exit.wait_for(|e| e.is_some())).await.is_ok();
        if !waited {
            self.sh.runc.kill(&id, "KILL").await;
            let _ = tokio::time::timeout(Duration::from_secs(10), exit.wait_for(|e| e.is_some()))
                .await
                .is_ok();
        }
        let code = *exit.borrow();
        Some(code.unwrap_or(137))
    }

    async fn on_exit(&mut self, i: usize, code: i32) {
        let policy = self.restart_policy();
        let pod_ref = format!("{}_{}({})", self.pod.name_any(), self.ns(), self.uid());
        let c = &mut self.ctrs[i];
        for p in c.probes.drain(..) {
            p.abort();
        }
        let Some(inst) = c.instance.take() else { return };
        c.generation += 1;
        c.started = false;
        c.ready = false;
        let term = Term {
            exit_code: code,
            reason: if code == 0 { "Completed".into() } else { "Error".into() },
            started_at: inst.started_at.clone(),
            finished_at: now(),
            container_id: format!("runc://{}", inst.id),
        };
        let restart = match policy.as_str() {
            "Never" => false,
            "OnFailure" => code != 0,
            _ => true,
        };
        if !restart {
            c.done = Some(term);
            return;
        }
        c.last_term = Some(term);
        c.restarts += 1;
        if inst.since.elapsed() >= Duration::from_secs(600) {
            c.backoff = Duration::ZERO;
        }
        if c.backoff.is_zero() {
            // The first restart is immediate; later ones wait 10 s, 20 s, ... up to 300 s.
            c.backoff = Duration::from_secs(10);
            c.next_start = Some(Instant::now());
        } else {
            let delay = c.backoff;
            c.backoff = (c.backoff * 2).min(MAX_BACKOFF);
            c.next_start = Some(Instant::now() + delay);
            let name = c.spec.name.clone();
            c.waiting = Some((
                "CrashLoopBackOff".into(),
                format!(
                    "back-off {}s restarting failed container={name} pod={pod_ref}",
                    delay.as_secs()
                ),
            ));
            self.event(
                Some(&name),
                Kind::Warning,
                "BackOff",
                &format!("Back-off restarting failed container {name} in pod {pod_ref}"),
            )
            .await;
        }
    }

    /// The kubelet's part of a graceful deletion: Killing, SIGTERM, grace, SIGKILL.
    async fn terminate(&mut self) {
        let grace = self.grace();
        let deadline = Instant::now() + grace;
        for i in 0..self.ctrs.len() {
            if self.ctrs[i].instance.is_some() {
                let name = self.ctrs[i].spec.name.clone();
                self.event(
                    Some(&name),
                    Kind::Normal,
                    "Killing",
                    &format!("Stopping container {name}"),
                )
                .await;
            }
        }
        for i in 0..self.ctrs.len() {
            for p in self.ctrs[i].probes.drain(..) {
                p.abort();
            }
            if let Some(inst) = &self.ctrs[i].instance {
                self.sh.runc.kill(&inst.id, "TERM").await;
            }
        }
        for i in 0..self.ctrs.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Some(code) = self.stop(i, left).await {
                let c = &mut self.ctrs[i];
                if let Some(inst) = c.instance.take() {
                    c.generation += 1;
                    c.ready = false;
                    c.done = Some(Term {
                        exit_code: code,
                        reason: if code == 0 { "Completed".into() } else { "Error".into() },
                        started_at: inst.started_at,
                        finished_at: now(),
                        container_id: format!("runc://{}", inst.id),
                    });
                }
            }
            self.ctrs[i].next_start = None;
            if self.ctrs[i].done.is_none() {
                self.ctrs[i].done = self.ctrs[i].last_term.clone();
            }
        }
        self.set_condition("Ready", false);
        self.push_status().await;
    }

    async fn finish_deletion(&mut self) {
        self.teardown().await;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns());
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some(self.uid()), resource_version: None }),
            ..Default::default()
        };
        // Retried until it lands, as the kubelet's status manager does: a pod the kubelet
        // has stopped but not deleted would block its StatefulSet forever.
        let start = std::time::Instant::now();
        loop {
            match tokio::time::timeout(
                Duration::from_secs(10),
                api.delete(&self.pod.name_any(), &dp),
            )
            .await
            {
                Ok(Ok(_)) => return,
                // Gone already, or a new pod of that name (the UID precondition failed).
                Ok(Err(kube::Error::Api(s))) if s.code == 404 || s.code == 409 => return,
                Ok(Err(e)) => tracing::warn!(
                    "delete pod {}/{}: {e} (retrying)",
                    self.ns(),
                    self.pod.name_any()
                ),
                Err(_) => tracing::warn!(
                    "delete pod {}/{}: no answer within 10 s (retrying)",
                    self.ns(),
                    self.pod.name_any()
                ),
            }
            if start.elapsed() > Duration::from_secs(600) {
                tracing::error!(
                    "delete pod {}/{}: gave up after 10 min",
                    self.ns(),
                    self.pod.name_any()
                );
                return;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    /// The pod is gone from the API (force-deleted): no grace left.
    async fn force_stop(&mut self) {
        for i in 0..self.ctrs.len() {
            if let Some(inst) = &self.ctrs[i].instance {
                self.sh.runc.kill(&inst.id, "KILL").await;
            }
            let _ = self.stop(i, Duration::ZERO).await;
        }
        self.teardown().await;
    }

    async fn teardown(&mut self) {
        if let Ok(mut reg) = self.sh.registry.lock() {
            let (ns, name) = (self.ns(), self.pod.name_any());
            reg.retain(|(n, p, _), _| !(n == &ns && p == &name));
        }
        if let Some(sb) = self.sandbox.take() {
            self.sh.net.remove_pod(&sb.netns, sb.ip).await;
        }
    }

    fn set_condition(&mut self, ty: &'static str, status: bool) {
        let changed = self.conditions.get(ty).map(|(s, _)| *s != status).unwrap_or(true);
        if changed {
            self.conditions.insert(ty, (status, now()));
        }
    }

    fn phase(&self) -> &'static str {
        if self.ctrs.iter().all(|c| c.done.is_some()) && !self.ctrs.is_empty() {
            return if self.ctrs.iter().all(|c| c.done.as_ref().is_some_and(|t| t.exit_code == 0)) {
                "Succeeded"
            } else {
                "Failed"
            };
        }
        if self.ctrs.iter().any(|c| c.instance.is_some() || c.restarts > 0 || c.last_term.is_some())
        {
            return "Running";
        }
        "Pending"
    }

    fn container_status(c: &Ctr) -> Value {
        let state = if let Some(inst) = &c.instance {
            json!({"running": {"startedAt": inst.started_at}, "waiting": null, "terminated": null})
        } else if let Some(t) = &c.done {
            json!({"terminated": term_json(t), "running": null, "waiting": null})
        } else {
            let (r, m) = c.waiting.clone().unwrap_or(("ContainerCreating".into(), String::new()));
            let mut w = json!({"reason": r});
            if !m.is_empty() {
                w["message"] = json!(m);
            }
            json!({"waiting": w, "running": null, "terminated": null})
        };
        let last = match &c.last_term {
            Some(t) => json!({"terminated": term_json(t)}),
            None => json!({}),
        };
        let id = c
            .instance
            .as_ref()
            .map(|i| format!("runc://{}", i.id))
            .or_else(|| c.done.as_ref().map(|t| t.container_id.clone()))
            .or_else(|| c.last_term.as_ref().map(|t| t.container_id.clone()));
        let image = c.spec.image.clone().unwrap_or_default();
        let mut s = json!({
            "name": c.spec.name, "image": image, "imageID": format!("lw-lab://{image}"),
            "ready": c.ready, "started": c.started && c.instance.is_some(), "restartCount": c.restarts,
            "state": state, "lastState": last,
        });
        if let Some(id) = id {
            s["containerID"] = json!(id);
        }
        s
    }

    async fn push_status(&mut self) {
        let all_ready =
            !self.ctrs.is_empty() && self.ctrs.iter().all(|c| c.ready && c.instance.is_some());
        self.set_condition("ContainersReady", all_ready);
        self.set_condition("Ready", all_ready);
        if self.sandbox.is_none() && self.conditions.contains_key("PodReadyToStartContainers") {
            self.set_condition("PodReadyToStartContainers", false);
        }
        let conditions: Vec<Value> = ["PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"]
            .iter()
            .filter_map(|ty| {
                self.conditions.get(ty).map(|(s, t)| {
                    let mut c = json!({"type": ty, "status": if *s { "True" } else { "False" }, "lastTransitionTime": t, "lastProbeTime": null});
                    if !*s && (*ty == "Ready" || *ty == "ContainersReady") {
                        let unready: Vec<String> = self.ctrs.iter().filter(|c| !c.ready).map(|c| c.spec.name.clone()).collect();
                        c["reason"] = json!("ContainersNotReady");
                        c["message"] = json!(format!("containers with unready status: [{}]", unready.join(" ")));
                    } else {
                        c["reason"] = json!(null);
                        c["message"] = json!(null);
                    }
                    c
                })
            })
            .collect();
        let mut status = json!({
            "phase": self.phase(),
            "hostIP": self.node.ip.to_string(), "hostIPs": [{"ip": self.node.ip.to_string()}],
            "conditions": conditions,
            "containerStatuses": self.ctrs.iter().map(Self::container_status).collect::<Vec<_>>(),
        });
        if let Some(sb) = &self.sandbox {
            status["podIP"] = json!(sb.ip.to_string());
            status["podIPs"] = json!([{"ip": sb.ip.to_string()}]);
        }
        if let Some(t) = &self.start_time {
            status["startTime"] = json!(t);
        }
        if self.last_status.as_ref() == Some(&status) {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns());
        let patch = json!({"status": status});
        match tokio::time::timeout(
            Duration::from_secs(10),
            api.patch_status(
                &self.pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            ),
        )
        .await
        {
            Ok(Ok(_)) => self.last_status = Some(status),
            Ok(Err(e)) => tracing::warn!("status of {}/{}: {e}", self.ns(), self.pod.name_any()),
            Err(_) => tracing::warn!("status of {}/{}: timed out", self.ns(), self.pod.name_any()),
        }
        // Terminal pods give their address back (the sandbox is gone on a real node too).
        if matches!(self.phase(), "Succeeded" | "Failed")
            && self.pod.metadata.deletion_timestamp.is_none()
            && let Some(sb) = self.sandbox.take()
        {
            self.sh.net.remove_pod(&sb.netns, sb.ip).await;
        }
    }
}

fn term_json(t: &Term) -> Value {
    json!({"exitCode": t.exit_code, "reason": t.reason, "startedAt": t.started_at, "finishedAt": t.finished_at, "containerID": t.container_id})
}
