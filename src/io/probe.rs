//! One member, probed three ways at once, each part with its own timeout and duration:
//! `GET /metrics` (reduced by [`crate::io::metrics::extract`]), `GET /health`, and the
//! Maintenance `Status` RPC through this member's own etcd client. A failure of any part
//! is recorded in the [`Observation`] as data; probing never panics and never hangs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};

use crate::analysis::cadence::{HealthAsk, Plan};
use crate::io::metrics;
use crate::model::clock::Clock;
use crate::model::member::Member;
use crate::model::metrics::MemberMetrics;
use crate::model::observation::{Health, Observation, Part, Status};

/// Largest `/metrics` body read; a real etcd page is ~150 KB, so more means something is wrong.
pub const METRICS_BODY_CAP: usize = 16 * 1024 * 1024;
/// Largest `/health` body read: it is a one-line JSON object.
const HEALTH_BODY_CAP: usize = 64 * 1024;

/// CA, client certificate and key, read once at start-up and used by HTTP and gRPC alike.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    pub cacert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// The PEM contents of [`TlsFiles`].
#[derive(Clone, Default)]
struct TlsMaterial {
    ca: Option<Vec<u8>>,
    cert_and_key: Option<(Vec<u8>, Vec<u8>)>,
}

fn read_pem(what: &str, path: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("--{what} {}: {e}", path.display()))?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(format!("--{what} {}: not a PEM file", path.display()));
    }
    Ok(bytes)
}

impl TlsFiles {
    fn load(&self) -> Result<TlsMaterial, String> {
        let ca = self.cacert.as_deref().map(|p| read_pem("cacert", p)).transpose()?;
        let cert_and_key = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Some((read_pem("cert", c)?, read_pem("key", k)?)),
            (None, None) => None,
            _ => return Err("--cert and --key must be given together".to_owned()),
        };
        Ok(TlsMaterial { ca, cert_and_key })
    }
}

/// Settings shared by every member's probe.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// Bound on each part (metrics, health, status); a frozen member costs this, once.
    pub timeout: Duration,
    pub tls: TlsFiles,
    /// Skip `/metrics` (the expensive part for etcd) when the caller only needs
    /// health, leader and term, e.g. during fast sampling.
    pub with_metrics: bool,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            timeout: Duration::from_secs(2),
            tls: TlsFiles::default(),
            with_metrics: true,
        }
    }
}

/// Probes one member. Owns that member's etcd client: a multi-endpoint client would
/// balance across members and hide who answered. Shared (`&self`) so that each member's
/// probe can run as its own task.
pub struct Prober {
    member: Member,
    http: reqwest::Client,
    /// `<url>/metrics` and `<url>/health`, parsed once: parsing them per request was ~3% of
    /// a round's CPU.
    metrics_url: reqwest::Url,
    health_url: reqwest::Url,
    /// Connected on first use and kept: tonic reconnects by itself after a restart.
    etcd: std::sync::Mutex<Option<Client>>,
    etcd_options: ConnectOptions,
    cfg: ProbeConfig,
    clock: Arc<dyn Clock>,
}

/// Builds the HTTP client shared by all probers (one connection pool, same TLS).
pub fn http_client(cfg: &ProbeConfig) -> Result<reqwest::Client, String> {
    let tls = cfg.tls.load()?;
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .connect_timeout(cfg.timeout)
        .timeout(cfg.timeout)
        .pool_max_idle_per_host(2)
        .user_agent(concat!("leaderwatch/", env!("CARGO_PKG_VERSION")));
    if let Some(ca) = &tls.ca {
        let certs =
            reqwest::Certificate::from_pem_bundle(ca).map_err(|e| format!("--cacert: {e}"))?;
        if certs.is_empty() {
            return Err("--cacert: no certificate in the file".to_owned());
        }
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    if let Some((cert, key)) = &tls.cert_and_key {
        let mut pem = cert.clone();
        pem.push(b'\n');
        pem.extend_from_slice(key);
        let id = reqwest::Identity::from_pem(&pem).map_err(|e| format!("--cert/--key: {e}"))?;
        b = b.identity(id);
    }
    b.build().map_err(|e| format!("HTTP client: {}", error_chain(&e)))
}

/// Connect options for an etcd client of `member` (TLS from `cfg` for an https:// member).
pub(crate) fn etcd_options(cfg: &ProbeConfig, member: &Member) -> Result<ConnectOptions, String> {
    let mut o = ConnectOptions::new().with_connect_timeout(cfg.timeout).with_timeout(cfg.timeout);
    if member.is_tls() {
        let tls = cfg.tls.load()?;
        let mut t = TlsOptions::new();
        if let Some(ca) = tls.ca {
            t = t.ca_certificate(Certificate::from_pem(ca));
        }
        if let Some((cert, key)) = tls.cert_and_key {
            t = t.identity(Identity::from_pem(cert, key));
        }
        o = o.with_tls(t);
    }
    Ok(o)
}

/// `reqwest`'s Display hides the cause; the chain names it ("connection refused").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    s
}

fn http_error(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        format!("timed out after {}", humantime::format_duration(timeout))
    } else {
        error_chain(e)
    }
}

/// Hands each chunk of the body to `each` as it arrives; more than `cap` bytes in all is
/// an error, not a truncation.
async fn read_chunks(
    mut resp: reqwest::Response,
    cap: usize,
    timeout: Duration,
    mut each: impl FnMut(&[u8]),
) -> Result<(), String> {
    let mut read = 0;
    while let Some(chunk) = resp.chunk().await.map_err(|e| http_error(&e, timeout))? {
        read += chunk.len();
        if read > cap {
            return Err(too_large(cap));
        }
        each(&chunk);
    }
    Ok(())
}

/// Reads at most `cap` bytes of the body; more is an error, not a truncation.
async fn read_capped(
    resp: reqwest::Response,
    cap: usize,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let mut body = Vec::with_capacity(resp.content_length().map_or(1024, |n| n as usize).min(cap));
    read_chunks(resp, cap, timeout, |chunk| body.extend_from_slice(chunk)).await?;
    Ok(body)
}

/// The error for a body over `cap` bytes, with the cap in MiB or KiB (the /health cap is 64 KiB).
fn too_large(cap: usize) -> String {
    if cap >= 1024 * 1024 {
        format!("body larger than the {} MiB cap", cap / (1024 * 1024))
    } else {
        format!("body larger than the {} KiB cap", cap / 1024)
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

impl Prober {
    pub fn new(
        member: Member,
        http: reqwest::Client,
        cfg: ProbeConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, String> {
        let etcd_options = etcd_options(&cfg, &member)?;
        let url = |path: &str| {
            let u = format!("{}{path}", member.url);
            reqwest::Url::parse(&u).map_err(|e| format!("{}: {u} is not a URL ({e})", member.name))
        };
        let (metrics_url, health_url) = (url("/metrics")?, url("/health")?);
        Ok(Prober {
            member,
            http,
            metrics_url,
            health_url,
            etcd: std::sync::Mutex::new(None),
            etcd_options,
            cfg,
            clock,
        })
    }

    pub fn member(&self) -> &Member {
        &self.member
    }

    /// Whether probes read `/metrics` unless told otherwise ([`ProbeConfig::with_metrics`]).
    pub fn default_with_metrics(&self) -> bool {
        self.cfg.with_metrics
    }

    /// Probes the member once as `plan` says; the parts asked run concurrently.
    pub async fn probe(&self, plan: Plan) -> Observation {
        let stamp = self.clock.stamp();
        let client = self.etcd_client().await;
        let (metrics, health, status) = tokio::join!(
            async { if plan.metrics { self.metrics().await } else { Part::Skipped } },
            async {
                match plan.health {
                    HealthAsk::Ask => self.health().await,
                    HealthAsk::Keep(value, age) => Part::Kept { value, age },
                }
            },
            Self::status(client, self.cfg.timeout),
        );
        Observation {
            member: self.member.name.clone(),
            endpoint: self.member.url.clone(),
            ts: stamp.utc,
            at: stamp.mono,
            metrics,
            health,
            status,
        }
    }

    /// The member's client, connected on first use and kept: tonic reconnects by itself
    /// after the member restarts.
    async fn etcd_client(&self) -> Result<Client, String> {
        if let Some(c) = self.etcd.lock().ok().and_then(|g| g.clone()) {
            return Ok(c);
        }
        let connect = Client::connect([self.member.url.as_str()], Some(self.etcd_options.clone()));
        match tokio::time::timeout(self.cfg.timeout, connect).await {
            Ok(Ok(c)) => {
                if let Ok(mut g) = self.etcd.lock() {
                    *g = Some(c.clone());
                }
                Ok(c)
            }
            Ok(Err(e)) => Err(format!("connect: {}", error_chain(&e))),
            Err(_) => Err(format!(
                "connect timed out after {}",
                humantime::format_duration(self.cfg.timeout)
            )),
        }
    }

    /// `GET url` with the probe's timeout; the body is the caller's to read.
    async fn send(&self, url: &reqwest::Url) -> Result<reqwest::Response, String> {
        let timeout = self.cfg.timeout;
        self.http
            .get(url.clone())
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| http_error(&e, timeout))
    }

    /// The page is extracted as its chunks arrive: the ~160 KB body is never held whole.
    async fn metrics(&self) -> Part<MemberMetrics> {
        timed(self.cfg.timeout, async {
            let resp = self.send(&self.metrics_url).await?;
            let code = resp.status().as_u16();
            if !(200..300).contains(&code) {
                return Err(format!("HTTP {code}"));
            }
            let mut page = metrics::Extractor::default();
            read_chunks(resp, METRICS_BODY_CAP, self.cfg.timeout, |chunk| page.feed(chunk)).await?;
            page.finish().map_err(|e| e.to_string())
        })
        .await
    }

    async fn health(&self) -> Part<Health> {
        timed(self.cfg.timeout, async {
            let resp = self.send(&self.health_url).await?;
            let code = resp.status().as_u16();
            parse_health(code, &read_capped(resp, HEALTH_BODY_CAP, self.cfg.timeout).await?)
        })
        .await
    }

    async fn status(client: Result<Client, String>, timeout: Duration) -> Part<Status> {
        // The client has its own request timeout; the outer bound (a little longer) guards
        // against a call that never reaches it (e.g. stuck in channel setup).
        timed(timeout + Duration::from_millis(100), async {
            let mut client = client?;
            let s = client.status().await.map_err(|e| etcd_error(&e, timeout))?;
            Ok(Status {
                member_id: s.header().map(|h| h.member_id()).unwrap_or_default(),
                leader_id: s.leader(),
                raft_term: s.raft_term(),
                raft_index: s.raft_index(),
                raft_applied_index: s.raft_applied_index(),
                db_size_bytes: s.db_size(),
                version: s.version().to_owned(),
                errors: s.errors().to_vec(),
            })
        })
        .await
    }
}

/// Runs one part of a probe under `timeout` and records how long it took.
async fn timed<T>(
    timeout: Duration,
    part: impl std::future::Future<Output = Result<T, String>>,
) -> Part<T> {
    let t = Instant::now();
    let value = match tokio::time::timeout(timeout, part).await {
        Ok(v) => v,
        Err(_) => Err(format!("timed out after {}", humantime::format_duration(timeout))),
    };
    Part::from_result(value, ms_since(t))
}

fn etcd_error(e: &etcd_client::Error, timeout: Duration) -> String {
    if let etcd_client::Error::GRpcStatus(s) = e {
        if matches!(s.code(), tonic::Code::DeadlineExceeded | tonic::Code::Cancelled) {
            return format!("timed out after {}", humantime::format_duration(timeout));
        }
        return format!("{:?}: {}", s.code(), s.message());
    }
    error_chain(e)
}

/// `/health` body -> [`Health`]. etcd 3.4 has no `reason`; `health` is the string "true".
pub fn parse_health(http_status: u16, body: &[u8]) -> Result<Health, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|_| {
        let text = String::from_utf8_lossy(&body[..body.len().min(80)]).replace('\n', " ");
        format!("HTTP {http_status}, body is not etcd health JSON: {text:?}")
    })?;
    let healthy = match v.get("health") {
        Some(serde_json::Value::String(s)) => s == "true",
        Some(serde_json::Value::Bool(b)) => *b,
        _ => return Err(format!("HTTP {http_status}, JSON without a \"health\" field")),
    };
    let reason = v.get("reason").and_then(|r| r.as_str()).unwrap_or_default().to_owned();
    // A 200 that says false, or a 503 that says true, is not something to trust.
    if healthy != (http_status == 200) {
        return Err(format!("HTTP {http_status} disagrees with health={healthy}"));
    }
    Ok(Health { healthy, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_parses_3_5_and_3_4_bodies() {
        let h = parse_health(200, br#"{"health":"true","reason":""}"#).expect("3.5 ok");
        assert!(h.healthy);
        let h =
            parse_health(503, br#"{"health":"false","reason":"RAFT NO LEADER"}"#).expect("3.5 503");
        assert_eq!(h, Health { healthy: false, reason: "RAFT NO LEADER".into() });
        let h = parse_health(200, br#"{"health":"true"}"#).expect("3.4 has no reason");
        assert!(h.healthy && h.reason.is_empty());
    }

    #[test]
    fn the_cap_is_named_in_the_unit_it_was_set_in() {
        assert_eq!(too_large(METRICS_BODY_CAP), "body larger than the 16 MiB cap");
        assert_eq!(too_large(HEALTH_BODY_CAP), "body larger than the 64 KiB cap");
    }

    #[test]
    fn health_nonsense_is_an_error() {
        assert!(parse_health(200, b"<html>hi</html>").is_err());
        assert!(parse_health(200, br#"{"status":"ok"}"#).is_err());
        assert!(parse_health(200, br#"{"health":"false"}"#).is_err());
        assert!(parse_health(500, b"internal error").is_err());
    }
}
