//! One member, probed up to three ways at once (as its [`Plan`] says), each part with its
//! own timeout and duration: `GET /metrics` (reduced by [`crate::io::metrics::extract`]),
//! `GET /health` (both over src/io/http/exchange.rs), and the Maintenance `Status` RPC
//! over this member's own HTTP/2 connection (src/io/grpc.rs). A failure of any part is
//! recorded in the [`Observation`] as data; probing never panics and never hangs.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};

use crate::analysis::cadence::{HealthAsk, Plan};
use crate::io::grpc::StatusClient;
use crate::io::http::exchange::Http1Conn;
use crate::io::http::pace::{Pace, Paced};
use crate::io::http::tls::{TlsConfig, tls_config};
use crate::io::metrics;
use crate::model::clock::Clock;
use crate::model::member::Member;
use crate::model::metrics::MemberMetrics;
use crate::model::observation::{Health, Observation, Part};

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

/// One of the [`TlsFiles`], by what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFile {
    Ca,
    Cert,
    Key,
}

impl std::fmt::Display for TlsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TlsFile::Ca => "CA bundle",
            TlsFile::Cert => "client certificate",
            TlsFile::Key => "client key",
        })
    }
}

/// What is wrong with the TLS files given (the command says it with its flags).
#[derive(Debug, thiserror::Error)]
pub enum TlsFilesError {
    #[error("{file} {}: {problem}", path.display())]
    Unreadable { file: TlsFile, path: PathBuf, problem: String },
    #[error("{file} {}: not a PEM file", path.display())]
    NotPem { file: TlsFile, path: PathBuf },
    /// A client certificate without its key, or a key without its certificate.
    #[error("a client certificate and its key go together")]
    Unpaired,
}

fn read_pem(file: TlsFile, path: &Path) -> Result<Vec<u8>, TlsFilesError> {
    let bytes = std::fs::read(path).map_err(|e| TlsFilesError::Unreadable {
        file,
        path: path.to_owned(),
        problem: e.to_string(),
    })?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(TlsFilesError::NotPem { file, path: path.to_owned() });
    }
    Ok(bytes)
}

impl TlsFiles {
    fn load(&self) -> Result<TlsMaterial, TlsFilesError> {
        let ca = self.cacert.as_deref().map(|p| read_pem(TlsFile::Ca, p)).transpose()?;
        let cert_and_key = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Some((read_pem(TlsFile::Cert, c)?, read_pem(TlsFile::Key, k)?)),
            (None, None) => None,
            _ => return Err(TlsFilesError::Unpaired),
        };
        Ok(TlsMaterial { ca, cert_and_key })
    }

    /// The files can be read, are PEM, and the certificate comes with its key: what the
    /// probers check again before any round, for a command to say first with its flags.
    pub fn check(&self) -> Result<(), TlsFilesError> {
        self.load().map(|_| ())
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

/// Probes one member. Owns that member's connections: its own Status client (a
/// multi-endpoint client would balance across members and hide who answered), and two
/// HTTP connections, one per path, because `/metrics` and `/health` are asked at once.
/// Shared (`&self`) so that each member's probe can run as its own task.
pub struct Prober {
    member: Member,
    metrics_conn: Http1Conn,
    health_conn: Http1Conn,
    status: StatusClient,
    cfg: ProbeConfig,
    clock: Arc<dyn Clock>,
}

/// The TLS client settings every prober shares, checked before any round: `None` when no
/// TLS file is given and no member is https:// (then no TLS code runs at all).
pub fn http_tls(cfg: &ProbeConfig, members: &[Member]) -> Result<Option<TlsConfig>, String> {
    let tls = cfg.tls.load().map_err(|e| e.to_string())?;
    if tls.ca.is_none() && tls.cert_and_key.is_none() && !members.iter().any(Member::is_tls) {
        return Ok(None);
    }
    let pair = tls.cert_and_key.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice()));
    tls_config(tls.ca.as_deref(), pair).map(Some)
}

/// Connect options for an etcd client of `member` (TLS from `cfg` for an https:// member).
pub(crate) fn etcd_options(cfg: &ProbeConfig, member: &Member) -> Result<ConnectOptions, String> {
    let mut o = ConnectOptions::new().with_connect_timeout(cfg.timeout).with_timeout(cfg.timeout);
    if member.is_tls() {
        let tls = cfg.tls.load().map_err(|e| e.to_string())?;
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

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

impl Prober {
    pub fn new(
        member: Member,
        tls: Option<TlsConfig>,
        cfg: ProbeConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, String> {
        let conn = || {
            Http1Conn::new(&member.url, tls.clone()).map_err(|e| format!("{}: {e}", member.name))
        };
        let (metrics_conn, health_conn) = (conn()?.paced(), conn()?.paced());
        let status = StatusClient::new(&member.url, tls.as_ref())
            .map_err(|e| format!("{}: {e}", member.name))?;
        Ok(Prober { member, metrics_conn, health_conn, status, cfg, clock })
    }

    pub fn member(&self) -> &Member {
        &self.member
    }

    /// Whether probes read `/metrics` unless told otherwise ([`ProbeConfig::with_metrics`]).
    pub fn default_with_metrics(&self) -> bool {
        self.cfg.with_metrics
    }

    /// Probes the member once as `plan` says; the parts asked run concurrently, under one
    /// deadline ([`ProbeConfig::timeout`] from now) that each part meets or fails alone.
    /// Plain connections are read as `pace` says, and each answer timed to when it came;
    /// how they were read, as one, is returned beside the observation.
    pub async fn probe(&self, plan: Plan, pace: Pace) -> (Observation, Option<Paced>) {
        let stamp = self.clock.stamp();
        // Pinned here and lent: moved into the deadline's future, each would be stored twice.
        let metrics = pin!(async {
            if plan.metrics {
                self.metrics(pace).await.into()
            } else {
                PartDone::Part(Part::Skipped)
            }
        });
        let health = pin!(async {
            match plan.health {
                HealthAsk::Ask => self.health(pace).await.into(),
                HealthAsk::Keep(value, age) => PartDone::Part(Part::Kept { value, age }),
            }
        });
        let status = pin!(async { self.status.status(pace).await.into() });
        let ((metrics, m), (health, h), (status, s)) =
            under_one_deadline(self.cfg.timeout, metrics, health, status).await;
        let observation = Observation {
            member: self.member.name.clone(),
            endpoint: self.member.url.clone(),
            ts: stamp.utc,
            at: stamp.mono,
            metrics,
            health,
            status,
        };
        (observation, [m, h, s].into_iter().flatten().reduce(Paced::and))
    }

    /// The page is extracted as its pieces arrive: the ~160 KB body is never held whole.
    async fn metrics(&self, pace: Pace) -> Answer<MemberMetrics> {
        let mut page = metrics::Extractor::default();
        match self
            .metrics_conn
            .get_paced("/metrics", METRICS_BODY_CAP, pace, |chunk| page.feed(chunk))
            .await
        {
            Ok((code, paced)) if !(200..300).contains(&code) => {
                (Err(format!("HTTP {code}")), paced)
            }
            Ok((_, paced)) => (page.finish().map_err(|e| e.to_string()), paced),
            Err(e) => (Err(e), None),
        }
    }

    async fn health(&self, pace: Pace) -> Answer<Health> {
        let mut body = Vec::new();
        match self
            .health_conn
            .get_paced("/health", HEALTH_BODY_CAP, pace, |chunk| body.extend_from_slice(chunk))
            .await
        {
            Ok((code, paced)) => (parse_health(code, &body), paced),
            Err(e) => (Err(e), None),
        }
    }
}

/// A part's answer, and how it was read (`None`: not paced, or no answer came).
type Answer<T> = (Result<T, String>, Option<Paced>);

/// What a part of a probe came to: an answer or an error to time, or a part already
/// settled without asking (skipped, kept).
enum PartDone<T> {
    Asked(Answer<T>),
    Part(Part<T>),
}

impl<T> PartDone<T> {
    /// The part, timed from `t` when it was asked to when its answer came (as the kernel
    /// stamped it on a paced connection: read later, it is timed the same), and how it
    /// was read.
    fn settle(self, t: Instant) -> (Part<T>, Option<Paced>) {
        match self {
            PartDone::Asked((r, paced)) => {
                let ms = match paced {
                    Some(p) => {
                        p.arrived.into_std().saturating_duration_since(t).as_secs_f64() * 1e3
                    }
                    None => ms_since(t),
                };
                (Part::from_result(r, ms), paced)
            }
            PartDone::Part(p) => (p, None),
        }
    }
}

impl<T> From<Answer<T>> for PartDone<T> {
    fn from(a: Answer<T>) -> Self {
        PartDone::Asked(a)
    }
}

/// A settled part and how it was read.
type Settled<T> = (Part<T>, Option<Paced>);

/// Runs three parts at once and times each; a part not done `timeout` after the start
/// fails as timed out, the others keep what they got. One timer for the probe, not one a
/// part: each timer registered costs the runtime a wakeup of its own.
async fn under_one_deadline<A, B, C>(
    timeout: Duration,
    mut a: Pin<&mut impl Future<Output = PartDone<A>>>,
    mut b: Pin<&mut impl Future<Output = PartDone<B>>>,
    mut c: Pin<&mut impl Future<Output = PartDone<C>>>,
) -> (Settled<A>, Settled<B>, Settled<C>) {
    let t = Instant::now();
    let (mut pa, mut pb, mut pc) = (None, None, None);
    let mut deadline = pin!(tokio::time::sleep(timeout));
    std::future::poll_fn(|cx| {
        let all = step(a.as_mut(), &mut pa, t, cx)
            & step(b.as_mut(), &mut pb, t, cx)
            & step(c.as_mut(), &mut pc, t, cx);
        if all { Poll::Ready(()) } else { deadline.as_mut().poll(cx) }
    })
    .await;
    (or_late(pa, timeout, t), or_late(pb, timeout, t), or_late(pc, timeout, t))
}

/// Polls a part not yet done; true once it is.
fn step<T>(
    part: Pin<&mut impl Future<Output = PartDone<T>>>,
    out: &mut Option<Settled<T>>,
    t: Instant,
    cx: &mut Context<'_>,
) -> bool {
    if out.is_none()
        && let Poll::Ready(done) = part.poll(cx)
    {
        *out = Some(done.settle(t));
    }
    out.is_some()
}

/// A part's answer, or its timeout.
fn or_late<T>(out: Option<Settled<T>>, timeout: Duration, t: Instant) -> Settled<T> {
    out.unwrap_or_else(|| {
        let error = format!("timed out after {}", humantime::format_duration(timeout));
        (Part::Failed { error, ms: ms_since(t) }, None)
    })
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
    fn health_nonsense_is_an_error() {
        assert!(parse_health(200, b"<html>hi</html>").is_err());
        assert!(parse_health(200, br#"{"status":"ok"}"#).is_err());
        assert!(parse_health(200, br#"{"health":"false"}"#).is_err());
        assert!(parse_health(500, b"internal error").is_err());
    }
}
