//! Startup, readiness and liveness probes as the kubelet runs them: initial delay, period,
//! timeout, success and failure thresholds; startup gates the other two; every failure is an
//! `Unhealthy` Event. HTTP and TCP probes go from the node to the pod's address, exec probes
//! through the runtime.

use super::Msg;
use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::net::Ipv4Addr;
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Startup,
    Readiness,
    Liveness,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Startup => "Startup",
            Kind::Readiness => "Readiness",
            Kind::Liveness => "Liveness",
        }
    }
}

#[derive(Debug)]
pub enum Outcome {
    StartupSucceeded,
    Ready(bool),
    /// Startup or liveness gave up: the container is restarted.
    Failed(Kind),
    /// One failed attempt, for the Unhealthy Event.
    Unhealthy(Kind, String),
}

pub struct Target {
    pub pod_ip: Ipv4Addr,
    pub container: Container,
    pub exec: Option<super::ExecTarget>,
}

fn port(c: &Container, p: &IntOrString) -> Option<u16> {
    match p {
        IntOrString::Int(i) => u16::try_from(*i).ok(),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|cp| cp.name.as_deref() == Some(name.as_str()))
            .and_then(|cp| u16::try_from(cp.container_port).ok()),
    }
}

/// One attempt: Ok, or the kubelet's failure message.
async fn attempt(p: &Probe, t: &Target, timeout: Duration) -> Result<(), String> {
    if let Some(h) = &p.http_get {
        let port =
            port(&t.container, &h.port).ok_or_else(|| format!("unknown port {:?}", h.port))?;
        let scheme = h.scheme.as_deref().unwrap_or("HTTP").to_ascii_lowercase();
        let host = h.host.clone().unwrap_or_else(|| t.pod_ip.to_string());
        let path = h.path.clone().unwrap_or_else(|| "/".into());
        let url = format!("{scheme}://{host}:{port}{path}");
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .danger_accept_invalid_certs(true)
            .user_agent("kube-probe/1.35")
            .build()
            .map_err(|e| e.to_string())?;
        let mut req = client.get(&url);
        for hd in h.http_headers.iter().flatten() {
            req = req.header(hd.name.as_str(), hd.value.as_str());
        }
        return match req.send().await {
            Ok(r) if (200..400).contains(&r.status().as_u16()) => Ok(()),
            Ok(r) => Err(format!("HTTP probe failed with statuscode: {}", r.status().as_u16())),
            Err(e) if e.is_timeout() => Err(format!(
                "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            )),
            Err(e) => Err(format!("Get \"{url}\": {}", root_cause(&e))),
        };
    }
    if let Some(tcp) = &p.tcp_socket {
        let port =
            port(&t.container, &tcp.port).ok_or_else(|| format!("unknown port {:?}", tcp.port))?;
        let addr = (t.pod_ip, port);
        return match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("dial tcp {}:{port}: {e}", t.pod_ip)),
            Err(_) => Err(format!("dial tcp {}:{port}: i/o timeout", t.pod_ip)),
        };
    }
    if let Some(ex) = &p.exec {
        let cmd = ex.command.clone().unwrap_or_default();
        let Some(et) = &t.exec else { return Err("exec probe: container not running".into()) };
        let child = et
            .runc
            .exec(&et.id, et.uid, et.gid, &et.groups, &cmd, false)
            .map_err(|e| e.to_string())?;
        return match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Ok(Ok(o)) if o.status.success() => Ok(()),
            Ok(Ok(o)) => Err(format!(
                "command {cmd:?} exited with {}: {}",
                o.status,
                String::from_utf8_lossy(&o.stdout).trim()
            )),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("command {cmd:?} timed out")),
        };
    }
    Err("probe has no handler the process kubelet supports (httpGet, tcpSocket, exec)".into())
}

fn root_cause(e: &dyn std::error::Error) -> String {
    let mut cur: &dyn std::error::Error = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// Runs one probe for one container instance until it decides or the task is aborted.
pub async fn run(
    kind: Kind,
    p: Probe,
    t: Target,
    idx: usize,
    generation: u64,
    tx: mpsc::Sender<Msg>,
) {
    let period = Duration::from_secs(p.period_seconds.unwrap_or(10).max(1) as u64);
    let timeout = Duration::from_secs(p.timeout_seconds.unwrap_or(1).max(1) as u64);
    let failure_threshold = p.failure_threshold.unwrap_or(3).max(1);
    let success_threshold = p.success_threshold.unwrap_or(1).max(1);
    tokio::time::sleep(Duration::from_secs(p.initial_delay_seconds.unwrap_or(0).max(0) as u64))
        .await;
    let (mut ok_run, mut fail_run, mut ready) = (0, 0, false);
    let send = |o: Outcome| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(Msg::Probe { idx, generation, outcome: o }).await;
        }
    };
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match attempt(&p, &t, timeout).await {
            Ok(()) => {
                fail_run = 0;
                ok_run += 1;
                match kind {
                    Kind::Startup => {
                        send(Outcome::StartupSucceeded).await;
                        return;
                    }
                    Kind::Readiness if !ready && ok_run >= success_threshold => {
                        ready = true;
                        send(Outcome::Ready(true)).await;
                    }
                    _ => {}
                }
            }
            Err(msg) => {
                ok_run = 0;
                fail_run += 1;
                send(Outcome::Unhealthy(kind, msg.clone())).await;
                if fail_run >= failure_threshold {
                    match kind {
                        Kind::Readiness => {
                            if ready {
                                ready = false;
                                send(Outcome::Ready(false)).await;
                            }
                        }
                        Kind::Startup | Kind::Liveness => {
                            send(Outcome::Failed(kind)).await;
                            return;
                        }
                    }
                }
            }
        }
    }
}
