//! `--metrics-addr`: leaderwatch's own `/metrics` (OpenMetrics text, written by the
//! `prometheus-client` crate) and `/healthz`, so that a Prometheus (on GKE: Managed
//! Service for Prometheus through a PodMonitoring) can graph and alert on what the
//! sampler sees. [`Exporter`] is fed by the recorder, round by round; [`serve`] answers
//! scrapes from what it last set. Series and their meaning: docs/exporter.md.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::analysis::engine::Export;
use crate::io::run_dir::HealthRow;
use crate::model::canary::Op;
use crate::model::observation::Round;

/// The OpenMetrics content type; Prometheus and Managed Prometheus both ask for it.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A client that sends no complete request head within this is dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemberLabel {
    member: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartLabels {
    member: String,
    /// `metrics`, `health`, `status` (that part failed) or `round` (no answer within the round).
    part: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    kind: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

type FGauge = Gauge<f64, AtomicU64>;

#[derive(Clone)]
struct LatencyBuckets;

impl MetricConstructor<Histogram> for LatencyBuckets {
    fn new_metric(&self) -> Histogram {
        // 1 ms .. ~4 s: a healthy op takes milliseconds, an election holds one for seconds.
        Histogram::new(exponential_buckets(0.001, 2.0, 13))
    }
}

/// What `/healthz` needs: when the last round was recorded, and how stale is too stale.
struct Liveness {
    started: Instant,
    last_round: Mutex<Option<Instant>>,
    stale_after: Duration,
}

/// The registry and liveness, shared with the HTTP server.
#[derive(Clone)]
pub struct Shared {
    registry: Arc<Registry>,
    live: Arc<Liveness>,
}

/// The series. Owned by the recorder, which hands over what the engine counted of each
/// round ([`Export`]): the exporter counts nothing itself. Its metric handles are shared
/// with the registry.
pub struct Exporter {
    elections: Counter,
    transitions: Counter,
    raft_term: Gauge,
    up: Family<MemberLabel, Gauge>,
    healthy: Family<MemberLabel, Gauge>,
    is_leader: Family<MemberLabel, Gauge>,
    leader_changes_seen: Family<MemberLabel, FGauge>,
    round_duration: Histogram,
    last_round: FGauge,
    probe_failures: Family<PartLabels, Counter>,
    canary_ops: Family<OpLabels, Counter>,
    canary_latency: Family<KindLabel, Histogram, LatencyBuckets>,
    wal_fsync_p99: Family<MemberLabel, FGauge>,
    backend_commit_p99: Family<MemberLabel, FGauge>,
    db_size: Family<MemberLabel, FGauge>,
    over: Family<MemberLabel, Gauge>,
    live: Arc<Liveness>,
}

impl Exporter {
    /// The series, registered. `/healthz` fails once no round was recorded for
    /// `stale_after`.
    pub fn new(stale_after: Duration) -> (Exporter, Shared) {
        let mut r = Registry::default();
        let live = Arc::new(Liveness {
            started: Instant::now(),
            last_round: Mutex::new(None),
            stale_after,
        });
        let e = Exporter {
            elections: Counter::default(),
            transitions: Counter::default(),
            raft_term: Gauge::default(),
            up: Family::default(),
            healthy: Family::default(),
            is_leader: Family::default(),
            leader_changes_seen: Family::default(),
            round_duration: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            last_round: FGauge::default(),
            probe_failures: Family::default(),
            canary_ops: Family::default(),
            canary_latency: Family::new_with_constructor(LatencyBuckets),
            wal_fsync_p99: Family::default(),
            backend_commit_p99: Family::default(),
            db_size: Family::default(),
            over: Family::default(),
            live: live.clone(),
        };
        // Counters get `_total` from the crate, and every help text a final period.
        r.register("leaderwatch_elections", "Elections: increases of the highest raft term seen across the cluster since leaderwatch started. A member restart does not move it", e.elections.clone());
        r.register("leaderwatch_leader_transitions", "Changes of the leader the members agree on, between two rounds, since leaderwatch started", e.transitions.clone());
        r.register(
            "leaderwatch_raft_term",
            "Highest raft term reported in the last round (Status RPC)",
            e.raft_term.clone(),
        );
        r.register(
            "leaderwatch_member_up",
            "1 if the member answered any part of the last round's probe",
            e.up.clone(),
        );
        r.register(
            "leaderwatch_member_healthy",
            "1 if the member's /health said true in the last round",
            e.healthy.clone(),
        );
        r.register(
            "leaderwatch_member_is_leader",
            "1 if the member reported itself leader in the last round",
            e.is_leader.clone(),
        );
        r.register(
            "leaderwatch_member_leader_changes_seen",
            "The member's raw etcd_server_leader_changes_seen_total at its last /metrics read: restarts reset it, so it moves by more than the elections",
            e.leader_changes_seen.clone(),
        );
        r.register(
            "leaderwatch_round_duration_seconds",
            "Time from a round's start to its slowest member's answer",
            e.round_duration.clone(),
        );
        r.register(
            "leaderwatch_last_round_timestamp_seconds",
            "Unix time of the last round recorded",
            e.last_round.clone(),
        );
        r.register("leaderwatch_probe_failures", "Failed probe parts by member and part (metrics, health, status; round: no answer within the round)", e.probe_failures.clone());
        r.register("leaderwatch_canary_ops", "Canary ops (a linearizable write and read per interval) by kind and result (ok, error)", e.canary_ops.clone());
        r.register(
            "leaderwatch_canary_latency_seconds",
            "Canary op latency by kind",
            e.canary_latency.clone(),
        );
        r.register(
            "leaderwatch_member_wal_fsync_p99_seconds",
            "WAL fsync p99 over the last health interval (10 s)",
            e.wal_fsync_p99.clone(),
        );
        r.register(
            "leaderwatch_member_backend_commit_p99_seconds",
            "Backend commit p99 over the last health interval",
            e.backend_commit_p99.clone(),
        );
        r.register(
            "leaderwatch_member_db_size_bytes",
            "Backend database size at the end of the last health interval",
            e.db_size.clone(),
        );
        r.register(
            "leaderwatch_member_figures_over_threshold",
            "Member health figures above their documented thresholds in the last health interval",
            e.over.clone(),
        );
        (e, Shared { registry: Arc::new(r), live })
    }

    /// One recorded round, with what the engine counted of it.
    pub fn round(&mut self, r: &Round, x: &Export) {
        self.elections.inc_by(x.elections);
        self.transitions.inc_by(x.transitions as u64);
        if let Some(t) = x.term {
            self.raft_term.set(i64::try_from(t).unwrap_or(i64::MAX));
        }
        for (m, leads) in &x.leads {
            let l = MemberLabel { member: m.0.clone() };
            self.is_leader.get_or_create(&l).set(i64::from(*leads));
        }
        let mut slowest = 0.0f64;
        for o in &r.observations {
            let l = MemberLabel { member: o.member.0.clone() };
            self.up.get_or_create(&l).set(i64::from(o.reachable()));
            self.healthy.get_or_create(&l).set(i64::from(o.health.ok().is_some_and(|h| h.healthy)));
            if let Some(v) = o.metrics.ok().and_then(|m| m.leader_changes_seen_total) {
                self.leader_changes_seen.get_or_create(&l).set(v);
            }
            for (part, failed) in [
                ("metrics", o.metrics.err().is_some()),
                ("health", o.health.err().is_some()),
                ("status", o.status.err().is_some()),
            ] {
                if failed {
                    self.probe_failures
                        .get_or_create(&PartLabels {
                            member: l.member.clone(),
                            part: part.to_owned(),
                        })
                        .inc();
                }
            }
            // A probe started in an earlier round answered `age` earlier in its own time.
            slowest = slowest.max((o.probe_ms() / 1000.0 - r.age_s(o)).max(0.0));
        }
        for s in &r.silent {
            let l = MemberLabel { member: s.member.0.clone() };
            self.up.get_or_create(&l).set(0);
            self.healthy.get_or_create(&l).set(0);
            self.is_leader.get_or_create(&l).set(0);
            self.probe_failures
                .get_or_create(&PartLabels { member: l.member, part: "round".to_owned() })
                .inc();
            slowest = slowest.max(s.in_flight.as_secs_f64());
        }
        self.round_duration.observe(slowest);
        self.last_round.set(r.started.utc.timestamp_millis() as f64 / 1000.0);
        if let Ok(mut g) = self.live.last_round.lock() {
            *g = Some(r.started.mono);
        }
    }

    /// health.csv rows just written: the newest figures per member.
    pub fn health(&mut self, rows: &[HealthRow]) {
        for row in rows {
            let l = MemberLabel { member: row.member.clone() };
            let h = &row.health;
            for (family, v) in [
                (&self.wal_fsync_p99, h.wal_fsync_p99_s),
                (&self.backend_commit_p99, h.backend_commit_p99_s),
                (&self.db_size, h.db_size_bytes),
            ] {
                match v.filter(|v| v.is_finite()) {
                    Some(v) => {
                        family.get_or_create(&l).set(v);
                    }
                    None => {
                        family.remove(&l);
                    }
                }
            }
            self.over.get_or_create(&l).set(h.over.len() as i64);
        }
    }

    /// Canary ops just recorded.
    pub fn canary(&mut self, ops: &[Op]) {
        for op in ops {
            let kind = op.kind.as_str().to_owned();
            self.canary_ops
                .get_or_create(&OpLabels {
                    kind: kind.clone(),
                    result: if op.ok { "ok" } else { "error" }.to_owned(),
                })
                .inc();
            if op.ok {
                self.canary_latency
                    .get_or_create(&KindLabel { kind })
                    .observe(op.latency_ms() / 1000.0);
            }
        }
    }
}

/// The exposition as served: OpenMetrics text ending in `# EOF`.
pub fn encode(shared: &Shared) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; an encoder error would be a bug in a label.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &shared.registry) {
        tracing::error!("encoding /metrics: {e}");
    }
    out
}

/// `/healthz`: 200 while rounds are being recorded (or in the first `stale_after` after
/// start), 503 naming how long ago the last one was.
fn healthz(live: &Liveness) -> (StatusCode, String) {
    let now = Instant::now();
    let last = live.last_round.lock().ok().and_then(|g| *g);
    let since = now.saturating_duration_since(last.unwrap_or(live.started));
    if since <= live.stale_after {
        (StatusCode::OK, "ok\n".to_owned())
    } else {
        let what =
            if last.is_some() { "last round recorded" } else { "started, no round recorded yet," };
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "stale: {what} {:.0} s ago (limit {:.0} s)\n",
                since.as_secs_f64(),
                live.stale_after.as_secs_f64()
            ),
        )
    }
}

fn answer(req: &Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match (req.method().as_str(), req.uri().path()) {
        ("GET" | "HEAD", "/metrics") => (StatusCode::OK, CONTENT_TYPE, encode(shared)),
        ("GET" | "HEAD", "/healthz") => {
            let (s, b) = healthz(&shared.live);
            (s, "text/plain; charset=utf-8", b)
        }
        ("GET" | "HEAD", _) => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: try /metrics or /healthz\n".to_owned(),
        ),
        _ => (StatusCode::METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", "GET only\n".to_owned()),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

/// An address the exporter cannot listen on (taken, or not this host's).
#[derive(Debug, thiserror::Error)]
#[error("{addr}: {source}")]
pub struct BindError {
    pub addr: SocketAddr,
    pub source: std::io::Error,
}

/// Binds `addr`, serves scrapes, and returns the exporter for the recorder with the bound
/// address (port 0 picks a free one). `/healthz` goes stale after ten missed `interval`s
/// (30 s at least). A taken or foreign address is a [`BindError`]: nothing has run yet.
pub async fn start(
    addr: SocketAddr,
    interval: Duration,
) -> Result<(Exporter, SocketAddr), BindError> {
    let (e, shared) = Exporter::new((interval * 10).max(Duration::from_secs(30)));
    let bound = serve(addr, shared).await.map_err(|source| BindError { addr, source })?;
    tracing::info!("serving http://{bound}/metrics and /healthz");
    Ok((e, bound))
}

/// Binds `addr` now (so that a taken port is a clear error before anything runs) and
/// serves scrapes on a task until the runtime ends. Returns the bound address.
pub async fn serve(addr: SocketAddr, shared: Shared) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!("exporter: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let shared = shared.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let resp = answer(&req, &shared);
                    async move { Ok::<_, std::convert::Infallible>(resp) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
                if let Err(e) = conn.await {
                    tracing::debug!("exporter: connection: {e}");
                }
            });
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::clock::Stamp;
    use crate::model::member::MemberName;
    use crate::model::observation::{Health, Observation, Part, Status};

    fn obs(name: &str, id: u64, leader: u64, term: u64) -> Observation {
        let at = Stamp { utc: chrono::Utc::now(), mono: Instant::now() };
        let healthy = Part::Ok { value: Health { healthy: true, reason: String::new() }, ms: 1.0 };
        Observation::new(
            MemberName(name.to_owned()),
            format!("http://{name}"),
            at,
            Part::Skipped,
            healthy,
            Part::Ok { value: Status::of(id, leader, term), ms: 1.0 },
        )
    }

    fn round(i: u64, leader: u64, term: u64) -> Round {
        Round {
            index: i,
            started: Stamp { utc: chrono::Utc::now(), mono: Instant::now() },
            observations: (1..=3).map(|id| obs(&format!("m{id}"), id, leader, term)).collect(),
            silent: vec![],
        }
    }

    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
    }

    /// What the engine hands over for a round where `leader` leads at `term`.
    fn export(elections: u64, transitions: usize, leader: u64, term: u64) -> Export {
        let leads = (1..=3).map(|id| (MemberName(format!("m{id}")), id == leader)).collect();
        Export { elections, transitions, term: Some(term), leads }
    }

    #[test]
    fn the_series_are_what_the_engine_counted() {
        let (mut e, shared) = Exporter::new(Duration::from_secs(10));
        e.round(&round(0, 1, 7), &export(0, 0, 1, 7));
        let t = encode(&shared);
        assert_eq!(value(&t, "leaderwatch_elections_total "), Some(0.0), "{t}");
        assert_eq!(value(&t, "leaderwatch_raft_term "), Some(7.0));
        e.round(&round(1, 2, 9), &export(2, 1, 2, 9));
        e.round(&round(2, 2, 9), &export(0, 0, 2, 9));
        let t = encode(&shared);
        assert_eq!(value(&t, "leaderwatch_elections_total "), Some(2.0), "{t}");
        assert_eq!(value(&t, "leaderwatch_leader_transitions_total "), Some(1.0));
        assert_eq!(value(&t, "leaderwatch_member_is_leader{member=\"m2\"} "), Some(1.0));
        assert_eq!(value(&t, "leaderwatch_member_is_leader{member=\"m1\"} "), Some(0.0));
        assert!(t.ends_with("# EOF\n"));
    }

    #[tokio::test(start_paused = true)]
    async fn healthz_goes_stale_without_rounds() {
        let (mut e, shared) = Exporter::new(Duration::from_secs(10));
        assert_eq!(healthz(&shared.live).0, StatusCode::OK, "within the first limit");
        tokio::time::advance(Duration::from_secs(11)).await;
        let (s, body) = healthz(&shared.live);
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(body.contains("no round recorded yet"), "{body}");
        e.round(&round(0, 1, 1), &export(0, 0, 1, 1));
        assert_eq!(healthz(&shared.live).0, StatusCode::OK);
        tokio::time::advance(Duration::from_secs(11)).await;
        let (s, body) = healthz(&shared.live);
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("last round recorded 11 s ago"), "{body}");
    }
}
