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
pub mod nodes;
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
    /// The API server answered with a status other than 403.
    #[error("Kubernetes API {what}: HTTP {code}: {message}")]
    Status { what: String, code: u16, message: String },
    /// The request never reached the API server: its connection was refused.
    #[error("Kubernetes API {what}: {message}")]
    Unreachable { what: String, message: String },
    /// Anything else: a connection that broke, an answer that could not be read, an object
    /// that is not what was asked for.
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
            KubeError::Status { code, .. } => Some(*code),
            KubeError::Config(_)
            | KubeError::Timeout { .. }
            | KubeError::Unreachable { .. }
            | KubeError::Api { .. } => None,
        }
    }

    /// Worth asking again: no answer, a connection that broke, the server's own trouble
    /// (5xx), too many requests, or credentials that failed (an expired token that the next
    /// request refreshes). A config error, a refusal (403) or a bad request stay as they are.
    pub fn transient(&self) -> bool {
        match self {
            KubeError::Timeout { .. } | KubeError::Unreachable { .. } | KubeError::Api { .. } => {
                true
            }
            KubeError::Config(_) | KubeError::Forbidden { .. } => false,
            KubeError::Status { code, .. } => *code >= 500 || matches!(code, 401 | 408 | 429),
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
        kube::Error::Api(s) => {
            KubeError::Status { what: what.to_owned(), code: s.code, message: s.message.clone() }
        }
        other if never_sent(&other) => KubeError::Unreachable {
            what: what.to_owned(),
            message: crate::io::http::exchange::error_chain(&other),
        },
        other => KubeError::Api {
            what: what.to_owned(),
            message: crate::io::http::exchange::error_chain(&other),
        },
    }
}

/// The request never reached the API server: its connection was refused (hyper-util's
/// connect error does not always carry the io::Error, so its words are read too).
pub fn never_sent(e: &kube::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        cur = err.source();
    }
    let text = e.to_string();
    text.contains("client error (Connect)") || text.contains("Connection refused")
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
        let status = |code: u16| KubeError::Status {
            what: "get the Job".into(),
            code,
            message: "words".into(),
        };
        let timeout = KubeError::Timeout { what: "x".into(), timeout: Duration::from_secs(1) };
        assert!(timeout.transient());
        let refused = KubeError::Unreachable { what: "x".into(), message: "refused".into() };
        assert!(refused.transient() && refused.status().is_none());
        assert!(KubeError::Api { what: "x".into(), message: "broke".into() }.transient());
        for code in [503, 500, 401, 429, 408] {
            assert!(status(code).transient(), "{code}");
        }
        for code in [404, 400, 409, 422] {
            assert!(!status(code).transient(), "{code}");
        }
        assert!(!KubeError::Forbidden { what: "x".into(), message: "no".into() }.transient());
        assert!(!KubeError::Config("x".into()).transient());
        assert_eq!(status(404).status(), Some(404));
        assert_eq!(status(404).to_string(), "Kubernetes API get the Job: HTTP 404: words");
    }

    /// The caller acts on the variant, never on the words: a refused connection is
    /// `Unreachable` (the eviction retries it until --evict-timeout).
    #[tokio::test]
    async fn a_refused_connection_is_unreachable_not_an_answer() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
            l.local_addr().expect("its address").port()
        };
        let url = format!("http://127.0.0.1:{port}").parse().expect("a url");
        let client = from_config(Config::new(url), Duration::from_secs(2)).expect("a client");
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::all(client);
        let e = call("list pods", Duration::from_secs(5), pods.list(&Default::default()))
            .await
            .expect_err("nothing listens there");
        assert!(matches!(e, KubeError::Unreachable { .. }), "{e:?}");
    }
}
