//! What a probe of one member learned ([`Observation`]: `/metrics`, `/health` and the
//! Status RPC, each a [`Part`] that may have failed) and a [`Round`] of every member.
//! samples.csv rows are written from these; src/io/probe.rs and src/io/round.rs fill them.

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::model::clock::{Stamp, mono_secs};
use crate::model::counts::{Point, RoundView};
use crate::model::member::MemberName;
use crate::model::metrics::MemberMetrics;

/// One part's outcome and how long it took.
#[derive(Debug, Clone, PartialEq)]
pub enum Part<T> {
    /// The part answered.
    Ok { value: T, ms: f64 },
    /// The part failed; `error` is one line.
    Failed { error: String, ms: f64 },
    /// The part was not asked this time (`/metrics` during fast sampling).
    Skipped,
    /// Not asked this time: the last answer, `age` old, still holds (a stable member's
    /// `/health`, src/analysis/cadence.rs). Analysis reads it as that answer.
    Kept { value: T, age: Duration },
}

impl<T> Part<T> {
    /// The answer: read this round, or kept from an earlier one.
    pub fn ok(&self) -> Option<&T> {
        match self {
            Part::Ok { value, .. } | Part::Kept { value, .. } => Some(value),
            _ => None,
        }
    }

    /// The answer read in this very probe (not a kept one).
    pub fn answered(&self) -> Option<&T> {
        match self {
            Part::Ok { value, .. } => Some(value),
            _ => None,
        }
    }

    /// The error of a failed part; `None` when it answered or was skipped.
    pub fn err(&self) -> Option<&str> {
        match self {
            Part::Failed { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Milliseconds the part took; 0 when skipped or kept.
    pub fn ms(&self) -> f64 {
        match self {
            Part::Ok { ms, .. } | Part::Failed { ms, .. } => *ms,
            Part::Skipped | Part::Kept { .. } => 0.0,
        }
    }

    pub fn is_skipped(&self) -> bool {
        matches!(self, Part::Skipped)
    }

    pub fn from_result(r: Result<T, String>, ms: f64) -> Self {
        match r {
            Ok(value) => Part::Ok { value, ms },
            Err(error) => Part::Failed { error, ms },
        }
    }
}

/// `/health` as etcd answers it: 200 `{"health":"true"}` or 503 with a reason (3.5+).
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    pub healthy: bool,
    pub reason: String,
}

/// The Maintenance `Status` RPC, as `etcdctl endpoint status` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub member_id: u64,
    /// 0 when this member knows no leader.
    pub leader_id: u64,
    /// Term of the last applied entry: moves once a new leader's first entry applies.
    pub raft_term: u64,
    pub raft_index: u64,
    pub raft_applied_index: u64,
    pub db_size_bytes: i64,
    pub version: String,
    pub errors: Vec<String>,
}

/// Everything one probe of one member learned, failures included.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub member: MemberName,
    pub endpoint: String,
    /// When the probe started (wall clock, for display).
    pub ts: DateTime<Utc>,
    /// When the probe started (monotonic, for ages and durations).
    pub at: tokio::time::Instant,
    pub metrics: Part<MemberMetrics>,
    pub health: Part<Health>,
    pub status: Part<Status>,
}

impl Status {
    /// An answer with what elections depend on (who answered, its leader, its term); the
    /// indexes and size 0, no errors.
    pub fn of(member_id: u64, leader_id: u64, raft_term: u64) -> Status {
        Status {
            member_id,
            leader_id,
            raft_term,
            raft_index: 0,
            raft_applied_index: 0,
            db_size_bytes: 0,
            version: String::new(),
            errors: vec![],
        }
    }
}

impl Observation {
    /// `member`'s probe that started at `at`, with its three parts.
    pub fn new(
        member: MemberName,
        endpoint: String,
        at: Stamp,
        metrics: Part<MemberMetrics>,
        health: Part<Health>,
        status: Part<Status>,
    ) -> Observation {
        Observation { member, endpoint, ts: at.utc, at: at.mono, metrics, health, status }
    }

    /// The member answered at least one part in this probe (a 503 from `/health` is an
    /// answer; a kept one is not).
    pub fn reachable(&self) -> bool {
        self.metrics.answered().is_some()
            || self.health.answered().is_some()
            || self.status.answered().is_some()
    }

    /// Wall time of the probe: the parts run concurrently, so the slowest one.
    pub fn probe_ms(&self) -> f64 {
        self.metrics.ms().max(self.health.ms()).max(self.status.ms())
    }

    /// The failed parts, `part: error; ...`, empty when all succeeded.
    pub fn error_summary(&self) -> String {
        let mut out = String::new();
        let mut add = |name: &str, e: Option<&str>| {
            if let Some(e) = e {
                if !out.is_empty() {
                    out.push_str("; ");
                }
                let _ = write!(out, "{name}: {e}");
            }
        };
        add("metrics", self.metrics.err());
        add("health", self.health.err());
        add("status", self.status.err());
        out
    }
}

/// A member whose probe was still in flight when the round closed.
#[derive(Debug, Clone, PartialEq)]
pub struct Silent {
    pub member: MemberName,
    pub endpoint: String,
    /// When its probe started.
    pub since: Stamp,
    /// How long its probe had been in flight when the round stopped waiting.
    pub in_flight: Duration,
}

/// One look at every member. `observations` are the answers that arrived during this round
/// (fresh, or a probe started in an earlier round); `silent` the members still in flight.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// 0-based, per run.
    pub index: u64,
    pub started: Stamp,
    pub observations: Vec<Observation>,
    pub silent: Vec<Silent>,
}

impl Round {
    /// What counting needs from this round (silent members are simply not observed).
    pub fn view(&self) -> RoundView {
        RoundView {
            round: self.index,
            ts: self.started.utc,
            points: self.observations.iter().map(|o| (o.member.clone(), point(o))).collect(),
        }
    }

    /// This member's answer in this round, if any.
    pub fn observation(&self, name: &MemberName) -> Option<&Observation> {
        self.observations.iter().find(|o| &o.member == name)
    }

    /// Seconds between the start of `o`'s probe and the start of this round (0 for a
    /// probe this round started).
    pub fn age_s(&self, o: &Observation) -> f64 {
        mono_secs(o.at, self.started.mono).max(0.0)
    }

    /// Every member answered and every answer read `/metrics`.
    pub fn has_all_metrics(&self, members: usize) -> bool {
        self.silent.is_empty()
            && self.observations.len() == members
            && self.observations.iter().all(|o| !o.metrics.is_skipped())
    }
}

/// The counting view of one observation.
pub fn point(o: &Observation) -> Point {
    let m = o.metrics.ok();
    let s = o.status.ok();
    Point {
        counter: m.and_then(|m| m.leader_changes_seen_total),
        start_time: m.and_then(|m| m.process_start_time),
        raft_term: s.map(|s| s.raft_term),
        leader_id: s.map(|s| s.leader_id),
    }
}
