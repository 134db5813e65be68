//! The Kubernetes side: the client (no hidden retries, explicit timeouts), member
//! discovery from the pods, the PDB-respecting eviction, and the preflight of the spec's
//! acceptance criteria 2-6; the kubelet's `$(VAR)` expansion ([`expand`]); the in-cluster
//! sitting's objects and fetch ([`job`]) and following its Job ([`follow`]).

pub mod discover;
pub mod evict;
pub mod expand;
pub mod follow;
pub mod forward;
pub mod job;
pub mod maintenance;
pub mod preflight;
pub mod timing;
pub mod watch;

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Where the cluster is and which pods are the members.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub namespace: String,
    pub selector: String,
    /// Bound on every API request (watches excepted).
    pub request_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error("Kubernetes config: {0}")]
    Config(String),
    #[error(
        "Kubernetes API {what}: forbidden ({message}); deploy/k8s/leaderwatch/rbac.yaml grants what a sitting needs, with rbac-maintenance.yaml for a delete or a rolling restart, rbac-drain.yaml for a drain and rbac-port-forward.yaml for reaching the members by port-forward"
    )]
    Forbidden { what: String, message: String },
    #[error("Kubernetes API {what}: {message}")]
    Api { what: String, message: String },
    #[error("Kubernetes API {what}: no answer within {timeout:?}")]
    Timeout { what: String, timeout: Duration },
}

/// Builds the client: kubeconfig (`--kubeconfig`, `--context`) or in-cluster, with kube's
/// default retry OFF (it would retry a PDB-blocked eviction's 429 for up to 1000 s, hidden).
/// The first line of a config error: the YAML parser's caret diagram is noise in one line.
fn first_line(e: impl std::fmt::Display) -> String {
    e.to_string().lines().next().unwrap_or_default().trim().to_owned()
}

pub async fn client(o: &KubeOptions) -> Result<Client, KubeError> {
    let opts = KubeConfigOptions { context: o.context.clone(), ..KubeConfigOptions::default() };
    let cfg = match &o.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| KubeError::Config(format!("{}: {}", path.display(), first_line(e))))?;
            Config::from_custom_kubeconfig(kc, &opts)
                .await
                .map_err(|e| KubeError::Config(format!("{}: {}", path.display(), first_line(e))))?
        }
        None if o.context.is_some() => {
            Config::from_kubeconfig(&opts).await.map_err(|e| KubeError::Config(first_line(e)))?
        }
        None => Config::infer().await.map_err(|e| KubeError::Config(first_line(e)))?,
    };
    from_config(cfg, o.request_timeout)
}

/// The client for a given config (tests point it at the fake API server).
pub fn from_config(mut cfg: Config, timeout: Duration) -> Result<Client, KubeError> {
    cfg.default_retry = false;
    cfg.connect_timeout = Some(timeout);
    Client::try_from(cfg).map_err(|e| KubeError::Config(e.to_string()))
}

/// Runs one API request under `timeout` and names it in any error.
pub async fn call<T>(
    what: &str,
    timeout: Duration,
    req: impl Future<Output = kube::Result<T>>,
) -> Result<T, KubeError> {
    match tokio::time::timeout(timeout, req).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(api_error(what, e)),
        Err(_) => Err(KubeError::Timeout { what: what.to_owned(), timeout }),
    }
}

pub fn api_error(what: &str, e: kube::Error) -> KubeError {
    match e {
        kube::Error::Api(s) if s.code == 403 => {
            KubeError::Forbidden { what: what.to_owned(), message: s.message.clone() }
        }
        kube::Error::Api(s) => KubeError::Api {
            what: what.to_owned(),
            message: format!("HTTP {}: {}", s.code, s.message),
        },
        other => KubeError::Api {
            what: what.to_owned(),
            message: crate::io::http::exchange::error_chain(&other),
        },
    }
}
