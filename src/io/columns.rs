//! The columns of the run directory's CSV files, one header each (data/README.md documents
//! every column), and how a member's answer in a round, a silent member, an event, a
//! health interval, a canary op and a lock canary event each become one row. Every field is one line
//! ([`one_line`]): the torn-line repair of src/io/run_dir.rs relies on it.

use serde::Serialize;

use crate::model::baseline::HealthRow;
use crate::model::canary::CanaryRow;
use crate::model::clock::ts;
use crate::model::event::Event;
use crate::model::lock::LockRow;
use crate::model::observation::{Observation, Part, Round, Silent};

pub const CANARY_HEADER: [&str; 10] = [
    "started",
    "run_id",
    "window",
    "kind",
    "delay_ms",
    "latency_ms",
    "ok",
    "error",
    "member",
    "done",
];

pub const LOCKS_HEADER: [&str; 13] = [
    "at",
    "run_id",
    "window",
    "holder",
    "event",
    "lease",
    "key",
    "create_revision",
    "revision",
    "member",
    "latency_ms",
    "held",
    "error",
];

pub const SAMPLES_HEADER: [&str; 30] = [
    "ts",
    "run_id",
    "round",
    "phase",
    "member",
    "endpoint",
    "reachable",
    "health",
    "health_reason",
    "leader_changes_seen_total",
    "has_leader",
    "is_leader",
    "process_start_time",
    "member_id",
    "leader_id",
    "raft_term",
    "raft_index",
    "raft_applied_index",
    "db_size_bytes",
    "etcd_version",
    "heartbeat_send_failures_total",
    "slow_apply_total",
    "wal_fsync_sum_s",
    "wal_fsync_count",
    "metrics_ms",
    "health_ms",
    "status_ms",
    "probe_ms",
    "error",
    "age_ms",
];

pub const EVENTS_HEADER: [&str; 10] = [
    "ts",
    "run_id",
    "source",
    "member",
    "kind",
    "detail",
    "term_from",
    "term_to",
    "cause",
    "cause_ts",
];

pub const HEALTH_HEADER: [&str; 20] = [
    "ts",
    "run_id",
    "window",
    "member",
    "interval_start",
    "interval_s",
    "wal_fsyncs",
    "wal_fsync_p50_s",
    "wal_fsync_p99_s",
    "backend_commits",
    "backend_commit_p99_s",
    "peer_rtt_p99_max_s",
    "heartbeat_send_failures",
    "slow_applies",
    "proposals_failed",
    "slow_read_indexes",
    "db_size_bytes",
    "quota_bytes",
    "restarts",
    "over",
];

/// One row of health.csv.
#[derive(Serialize)]
pub(crate) struct HealthCsvRow<'a> {
    ts: String,
    run_id: &'a str,
    window: &'a str,
    member: &'a str,
    interval_start: String,
    interval_s: String,
    wal_fsyncs: Option<f64>,
    wal_fsync_p50_s: Option<f64>,
    wal_fsync_p99_s: Option<f64>,
    backend_commits: Option<f64>,
    backend_commit_p99_s: Option<f64>,
    peer_rtt_p99_max_s: Option<f64>,
    heartbeat_send_failures: Option<f64>,
    slow_applies: Option<f64>,
    proposals_failed: Option<f64>,
    slow_read_indexes: Option<f64>,
    db_size_bytes: Option<f64>,
    quota_bytes: Option<f64>,
    restarts: u32,
    over: String,
}

/// One row of samples.csv.
#[derive(Serialize)]
pub(crate) struct SampleRow<'a> {
    ts: String,
    run_id: &'a str,
    round: u64,
    phase: &'a str,
    member: &'a str,
    endpoint: &'a str,
    reachable: bool,
    health: Option<bool>,
    health_reason: String,
    leader_changes_seen_total: Option<f64>,
    has_leader: Option<u8>,
    is_leader: Option<u8>,
    process_start_time: Option<f64>,
    member_id: Option<String>,
    leader_id: Option<String>,
    raft_term: Option<u64>,
    raft_index: Option<u64>,
    raft_applied_index: Option<u64>,
    db_size_bytes: Option<i64>,
    etcd_version: String,
    heartbeat_send_failures_total: Option<f64>,
    slow_apply_total: Option<f64>,
    wal_fsync_sum_s: Option<f64>,
    wal_fsync_count: Option<f64>,
    metrics_ms: String,
    health_ms: String,
    status_ms: String,
    probe_ms: String,
    error: String,
    age_ms: String,
}

/// Fields never contain line breaks, so that every record is exactly one line and the
/// torn-line repair (cut after the last newline) can never split a quoted field.
pub fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

fn ms(v: f64) -> String {
    format!("{v:.1}")
}

/// The row of a member that answered in `round`.
pub(crate) fn sample_row<'a>(
    o: &'a Observation,
    round: &Round,
    run_id: &'a str,
    phase: &'a str,
) -> SampleRow<'a> {
    let m = o.metrics.ok();
    let h = o.health.ok();
    let s = o.status.ok();
    SampleRow {
        ts: ts(o.ts),
        run_id,
        round: round.index,
        phase,
        member: &o.member.0,
        endpoint: &o.endpoint,
        reachable: o.reachable(),
        health: h.map(|h| h.healthy),
        health_reason: one_line(h.map_or("", |h| h.reason.as_str())),
        leader_changes_seen_total: m.and_then(|m| m.leader_changes_seen_total),
        has_leader: m.and_then(|m| m.has_leader).map(u8::from),
        is_leader: m.and_then(|m| m.is_leader).map(u8::from),
        process_start_time: m.and_then(|m| m.process_start_time),
        member_id: s.map(|s| format!("{:x}", s.member_id)),
        leader_id: s.map(|s| format!("{:x}", s.leader_id)),
        raft_term: s.map(|s| s.raft_term),
        raft_index: s.map(|s| s.raft_index),
        raft_applied_index: s.map(|s| s.raft_applied_index),
        db_size_bytes: s.map(|s| s.db_size_bytes),
        etcd_version: one_line(s.map_or("", |s| s.version.as_str())),
        heartbeat_send_failures_total: m.and_then(|m| m.heartbeat_send_failures_total),
        slow_apply_total: m.and_then(|m| m.slow_apply_total),
        wal_fsync_sum_s: m.and_then(|m| m.wal_fsync_sum),
        wal_fsync_count: m.and_then(|m| m.wal_fsync_count),
        metrics_ms: ms(o.metrics.ms()),
        // Empty when the answer was kept, not read (src/analysis/cadence.rs).
        health_ms: if matches!(o.health, Part::Kept { .. }) {
            String::new()
        } else {
            ms(o.health.ms())
        },
        status_ms: ms(o.status.ms()),
        probe_ms: ms(o.probe_ms()),
        error: one_line(&o.error_summary()),
        age_ms: ms(round.age_s(o) * 1000.0),
    }
}

/// The row of a member whose probe was still in flight when the round closed.
pub(crate) fn silent_row<'a>(
    s: &'a Silent,
    round: &Round,
    run_id: &'a str,
    phase: &'a str,
) -> SampleRow<'a> {
    let age_ms = s.in_flight.as_secs_f64() * 1000.0;
    SampleRow {
        ts: ts(round.started.utc),
        run_id,
        round: round.index,
        phase,
        member: &s.member.0,
        endpoint: &s.endpoint,
        reachable: false,
        health: None,
        health_reason: String::new(),
        leader_changes_seen_total: None,
        has_leader: None,
        is_leader: None,
        process_start_time: None,
        member_id: None,
        leader_id: None,
        raft_term: None,
        raft_index: None,
        raft_applied_index: None,
        db_size_bytes: None,
        etcd_version: String::new(),
        heartbeat_send_failures_total: None,
        slow_apply_total: None,
        wal_fsync_sum_s: None,
        wal_fsync_count: None,
        metrics_ms: String::new(),
        health_ms: String::new(),
        status_ms: String::new(),
        probe_ms: String::new(),
        error: format!("silent: no answer within the round (probe in flight for {age_ms:.0} ms)"),
        age_ms: ms(age_ms),
    }
}

/// An events.csv row: the election columns are empty on every other row.
pub(crate) fn event_record(e: &Event, run_id: &str) -> [String; 10] {
    let el = e.election.as_ref();
    [
        ts(e.ts),
        run_id.to_owned(),
        e.source.to_string(),
        e.member.clone(),
        e.kind.to_string(),
        one_line(&e.detail),
        el.map_or(String::new(), |c| c.term_from.to_string()),
        el.map_or(String::new(), |c| c.term_to.to_string()),
        el.map_or(String::new(), |c| c.cause.as_str().to_owned()),
        el.and_then(|c| c.cause_ts).map_or(String::new(), ts),
    ]
}

/// A health.csv row: a quantile that is not a finite number is empty, the peers' RTT is
/// the worst peer's.
pub(crate) fn health_row<'a>(r: &'a HealthRow, run_id: &'a str) -> HealthCsvRow<'a> {
    let opt = |v: Option<f64>| v.filter(|v| v.is_finite());
    let h = &r.health;
    HealthCsvRow {
        ts: ts(r.ts),
        run_id,
        window: &r.window,
        member: &r.member,
        interval_start: ts(r.interval_start),
        interval_s: format!("{:.3}", r.interval_s),
        wal_fsyncs: h.wal_fsyncs,
        wal_fsync_p50_s: opt(h.wal_fsync_p50_s),
        wal_fsync_p99_s: opt(h.wal_fsync_p99_s),
        backend_commits: h.backend_commits,
        backend_commit_p99_s: opt(h.backend_commit_p99_s),
        peer_rtt_p99_max_s: h.peer_rtt_p99_s.values().filter_map(|v| opt(*v)).reduce(f64::max),
        heartbeat_send_failures: h.heartbeat_send_failures,
        slow_applies: h.slow_applies,
        proposals_failed: h.proposals_failed,
        slow_read_indexes: h.slow_read_indexes,
        db_size_bytes: h.db_size_bytes,
        quota_bytes: h.quota_bytes,
        restarts: h.restarts,
        over: one_line(
            &h.over
                .iter()
                .map(|f| format!("{} {} > {}", f.figure, f.value, f.threshold))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    }
}

/// A canary.csv row.
pub(crate) fn canary_record(r: &CanaryRow, run_id: &str) -> [String; 10] {
    let o = &r.op;
    [
        ts(o.started.utc),
        run_id.to_owned(),
        r.window.clone(),
        o.kind.as_str().to_owned(),
        ms(o.delay_ms()),
        ms(o.latency_ms()),
        o.ok.to_string(),
        one_line(&o.error),
        r.member.clone(),
        ts(o.done.utc),
    ]
}

/// A locks.csv row.
pub(crate) fn lock_record(r: &LockRow, run_id: &str) -> [String; 13] {
    let e = &r.event;
    let num = |n: i64| if n == 0 { String::new() } else { n.to_string() };
    [
        ts(e.at.utc),
        run_id.to_owned(),
        r.window.clone(),
        e.holder.map_or_else(String::new, |h| h.to_string()),
        e.kind.as_str().to_owned(),
        if e.lease == 0 { String::new() } else { format!("{:x}", e.lease) },
        one_line(&e.key),
        num(e.create_revision),
        num(e.revision),
        r.member.clone(),
        if e.latency_ms > 0.0 { ms(e.latency_ms) } else { String::new() },
        e.held.to_string(),
        one_line(&e.error),
    ]
}
