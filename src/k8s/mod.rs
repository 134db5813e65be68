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

impl KubeError {
    /// The HTTP status the API server answered, when it answered one.
    pub fn status(&self) -> Option<u16> {
        match self {
            KubeError::Forbidden { .. } => Some(403),
            KubeError::Api { message, .. } => message.strip_prefix("HTTP ")?.get(..3)?.parse().ok(),
            KubeError::Config(_) | KubeError::Timeout { .. } => None,
        }
    }

    /// Worth asking again: no answer, a connection that broke, the server's own trouble
    /// (5xx), too many requests, or credentials that failed (an expired token that the next
    /// request refreshes). A config error, a refusal (403) or a bad request stay as they are.
    pub fn transient(&self) -> bool {
        match self {
            KubeError::Timeout { .. } => true,
            KubeError::Config(_) | KubeError::Forbidden { .. } => false,
            KubeError::Api { .. } => match self.status() {
                None => true,
                Some(code) => code >= 500 || matches!(code, 401 | 408 | 429),
            },
        }
    }
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

/// A Kubernetes failure during a disruption, kept whole (the command says it as the API's).
impl From<KubeError> for crate::io::disrupt::DisruptError {
    fn from(e: KubeError) -> Self {
        crate::io::disrupt::DisruptError::Api(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_errors_that_can_clear_by_themselves_are_transient() {
        let api = |m: &str| KubeError::Api { what: "get the Job".into(), message: m.into() };
        let timeout = KubeError::Timeout { what: "x".into(), timeout: Duration::from_secs(1) };
        assert!(timeout.transient());
        assert!(api("error trying to connect: tcp connect error: Connection refused").transient());
        assert!(api("HTTP 503: the server is currently unable").transient());
        assert!(api("HTTP 401: Unauthorized").transient());
        assert!(api("HTTP 429: too many requests").transient());
        assert!(!api("HTTP 404: jobs.batch \"leaderwatch-measure\" not found").transient());
        assert!(!api("HTTP 400: bad").transient());
        assert!(!KubeError::Forbidden { what: "x".into(), message: "no".into() }.transient());
        assert!(!KubeError::Config("x".into()).transient());
        assert_eq!(api("HTTP 404: gone").status(), Some(404));
        assert_eq!(api("HTTP error").status(), None);
    }
}
