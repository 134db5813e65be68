//! What changed for a member between two rounds -> events.csv rows: reachability, health
//! flips, the member's view of the leader, counter resets. Pure: the caller supplies the
//! observations, the tracker only remembers the last state of each member.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::clock::Stamp;
use crate::counts::{reset_between, Reset};
use crate::member::MemberName;
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
