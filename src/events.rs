//! What changed for a member between two rounds -> events.csv rows: reachability, health
//! flips, the member's view of the leader, counter resets and process restarts, and
//! stress (heartbeat send failures, slow applies, slow WAL fsyncs) starting and ending.
//! Pure: the caller supplies the observations, the tracker only remembers the last state
//! of each member.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::clock::Stamp;
use crate::counts::{reset_between, Reset};
use crate::health::{counter_delta, quantile, window_delta, WAL_FSYNC_P99_DOCS_S};
use crate::member::MemberName;
use crate::metrics::MemberMetrics;
use crate::probe::Observation;

/// One row of events.csv (run_id is added by the recorder).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub ts: DateTime<Utc>,
    /// Who saw it: `leaderwatch` (polling), `local` (the local cluster's own actions),
    /// `kubernetes` (the API server), `record` (the recorder itself).
    pub source: String,
    /// Empty for run-wide events.
    pub member: String,
    pub kind: String,
    pub detail: String,
    /// The monotonic instant, when leaderwatch itself saw or did it (not for events that
    /// come from the API server, which only have the server's wall time).
    pub at: Option<tokio::time::Instant>,
}

impl Event {
    pub fn new(ts: DateTime<Utc>, source: &str, member: &str, kind: &str, detail: impl Into<String>) -> Self {
        Event { ts, source: source.to_owned(), member: member.to_owned(), kind: kind.to_owned(), detail: detail.into(), at: None }
    }

    /// An event at a [`Stamp`]: both clocks.
    pub fn stamped(at: Stamp, source: &str, member: &str, kind: &str, detail: impl Into<String>) -> Self {
        Event { at: Some(at.mono), ..Event::new(at.utc, source, member, kind, detail) }
    }
}

#[derive(Debug, Clone, Default)]
struct Last {
    reachable: Option<bool>,
    healthy: Option<bool>,
    leader: Option<u64>,
    counter: Option<f64>,
    start_time: Option<f64>,
    /// The last `/metrics` read, for the stress figures of the next one.
    metrics: Option<MemberMetrics>,
    stressed: bool,
}

/// What in the step from `prev` to `now` says the member is under stress (empty: none):
/// heartbeat send failures or slow applies rose, or the WAL fsync p99 of the step is over
/// the 10 ms etcd documents.
pub fn stress(prev: &MemberMetrics, now: &MemberMetrics, restarted: bool) -> Vec<String> {
    let mut out = Vec::new();
    let rose = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(if restarted { b } else { counter_delta(a, b) }).filter(|d| *d > 0.0),
        _ => None,
    };
    if let Some(d) = rose(prev.heartbeat_send_failures_total, now.heartbeat_send_failures_total) {
        out.push(format!("heartbeat send failures +{d}"));
    }
    if let Some(d) = rose(prev.slow_apply_total, now.slow_apply_total) {
        out.push(format!("slow applies +{d}"));
    }
    let p99 = prev.wal_fsync.as_ref().zip(now.wal_fsync.as_ref()).and_then(|(a, b)| window_delta(a, b, restarted)).and_then(|d| quantile(0.99, &d));
    if let Some(p) = p99.filter(|p| *p > WAL_FSYNC_P99_DOCS_S) {
        out.push(format!("WAL fsync p99 {p:.3} s > {WAL_FSYNC_P99_DOCS_S} s (etcd docs)"));
    }
    out
}

/// Remembers each member's last state and reports what changed.
#[derive(Debug, Default)]
pub struct Tracker {
    last: BTreeMap<MemberName, Last>,
}

impl Tracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Events for one new observation. The first observation of a member reports only
    /// what is abnormal (unreachable, unhealthy), so a run starts quietly.
    pub fn observe(&mut self, o: &Observation) -> Vec<Event> {
        let mut out = Vec::new();
        let ev = |kind: &str, detail: String| Event::stamped(Stamp { utc: o.ts, mono: o.at }, "leaderwatch", &o.member.0, kind, detail);
        let last = self.last.entry(o.member.clone()).or_default();

        let reachable = o.reachable();
        match (last.reachable, reachable) {
            (Some(true) | None, false) => out.push(ev("unreachable", o.error_summary())),
            (Some(false), true) => out.push(ev("back", String::new())),
            _ => {}
        }
        last.reachable = Some(reachable);

        if let Some(h) = o.health.ok() {
            match (last.healthy, h.healthy) {
                (Some(true) | None, false) => out.push(ev("health_false", h.reason.clone())),
                (Some(false), true) => out.push(ev("health_true", String::new())),
                _ => {}
            }
            last.healthy = Some(h.healthy);
        }

        if let Some(s) = o.status.ok() {
            if let Some(prev) = last.leader.filter(|p| *p != s.leader_id) {
                out.push(ev("leader_changed", format!("{prev:x} -> {:x} (term {})", s.leader_id, s.raft_term)));
            }
            last.leader = Some(s.leader_id);
        }

        if let Some(m) = o.metrics.ok() {
            if let (Some(prev), Some(now)) = (last.counter, m.leader_changes_seen_total) {
                if let Some(why) = reset_between(prev, last.start_time, now, m.process_start_time) {
                    let why = match why {
                        Reset::Restarted => "process start time changed",
                        Reset::Dropped => "counter dropped",
                    };
                    out.push(ev("counter_reset", format!("{prev} -> {now} ({why})")));
                }
            }
            let restarted = matches!((last.start_time, m.process_start_time), (Some(a), Some(b)) if (a - b).abs() > 1e-3);
            if let (true, Some(start)) = (restarted, m.process_start_time) {
                // Stamped with the restart itself (the member's own clock), not when it was seen.
                let at = DateTime::from_timestamp_micros((start * 1e6) as i64).unwrap_or(o.ts);
                let was = last.start_time.unwrap_or_default();
                out.push(Event::new(at, "leaderwatch", &o.member.0, "process_restarted", format!("process_start_time_seconds {start} (was {was})")));
            }
            if let Some(prev) = &last.metrics {
                let why = stress(prev, m, restarted);
                match (last.stressed, why.is_empty()) {
                    (false, false) => out.push(ev("stress", why.join("; "))),
                    (true, true) => out.push(ev("stress_over", String::new())),
                    _ => {}
                }
                last.stressed = !why.is_empty();
            }
            last.metrics = Some(m.clone());
            if m.leader_changes_seen_total.is_some() {
                last.counter = m.leader_changes_seen_total;
            }
            if m.process_start_time.is_some() {
                last.start_time = m.process_start_time;
            }
        }
        out
    }
}
