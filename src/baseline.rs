//! `baseline.json` (schema_version 1): the observation windows of one sitting, the
//! disruption's instants, and where it ran. Documented in data/README.md.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::counts::{Counts, LeaderTransition};
use crate::summary::LeaderChanges;

pub const SCHEMA_VERSION: u32 = 1;
pub const BASELINE: &str = "baseline.json";

/// One observation window and its counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowRecord {
    /// `at_rest`, `disruption` or `settle`.
    pub name: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub duration_s: f64,
    pub rounds: u64,
    pub leader_changes: LeaderChanges,
    pub elections: Option<u64>,
    pub leader_transitions: Vec<LeaderTransition>,
}

impl WindowRecord {
    pub fn new(name: &str, start: DateTime<Utc>, end: DateTime<Utc>, rounds: u64, c: &Counts) -> Self {
        WindowRecord {
            name: name.to_owned(),
            start,
            end,
            duration_s: (end - start).num_milliseconds() as f64 / 1000.0,
            rounds,
            leader_changes: LeaderChanges::from_counts(c),
            elections: c.elections,
            leader_transitions: c.leader_transitions.clone(),
        }
    }
}

/// The one disruption of a sitting and the instants that time its recovery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disruption {
    pub target: String,
    pub target_was_leader: bool,
    /// `local-sigterm` (rehearse) or `kubernetes-eviction` (measure).
    pub method: String,
    pub requested_at: DateTime<Utc>,
    /// First round in which the target no longer answered healthy.
    pub member_lost_at: Option<DateTime<Utc>>,
    /// First round after that in which it answered healthy again.
    pub member_back_at: Option<DateTime<Utc>>,
    /// First round in which the healthy 3-member endpoint list held again.
    pub healthy_at: Option<DateTime<Utc>>,
    pub loss_to_healthy_s: Option<f64>,
    pub request_to_healthy_s: Option<f64>,
    /// What the disruptor itself knows exactly (local: signal and restart instants), and
    /// how far the measured instants are from it.
    pub ground_truth: Vec<GroundTruth>,
    /// Requests the disruption took (a PDB-blocked eviction is retried).
    #[serde(default)]
    pub attempts: u32,
    /// Time the disruption was blocked (first attempt to the accepted one).
    #[serde(default)]
    pub blocked_s: f64,
    /// The recovery step by step (eviction accepted, DisruptionTarget, deletion, old pod
    /// gone, replacement scheduled, Running, Ready, member back, healthy list).
    #[serde(default)]
    pub waterfall: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub step: String,
    pub at: DateTime<Utc>,
    pub since_previous_s: f64,
    pub since_request_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundTruth {
    /// e.g. `sigterm_sent`, `exited`, `restarted`.
    pub kind: String,
    pub at: DateTime<Utc>,
    /// The measured instant compared with it (`member_lost_at` for the signal,
    /// `member_back_at` for the restart), and the difference in seconds.
    pub compared_with: Option<String>,
    pub measured_minus_truth_s: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// `local` or `kubernetes`.
    pub kind: String,
    /// Human label for tables, e.g. "local loopback, etcd 3.5.1, 3 members".
    pub description: String,
    pub members: Vec<String>,
    pub etcd_versions: Vec<String>,
    pub heartbeat_ms: Option<u64>,
    pub election_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub schema_version: u32,
    pub tool_version: String,
    pub run_id: String,
    pub windows: Vec<WindowRecord>,
    pub disruption: Option<Disruption>,
    pub environment: Environment,
}

/// Lines around baseline.json in a run's log, so that `kubectl logs` alone retrieves it
/// (deploy/k8s/leaderwatch/baseline-from-log.sh).
pub const LOG_BEGIN: &str = "--- baseline.json begin ---";
pub const LOG_END: &str = "--- baseline.json end ---";

/// baseline.json between [`LOG_BEGIN`] and [`LOG_END`], newline-terminated.
pub fn log_block(b: &Baseline) -> String {
    let json = serde_json::to_string_pretty(b).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    format!("{LOG_BEGIN}\n{json}\n{LOG_END}\n")
}

pub fn seconds_between(a: DateTime<Utc>, b: DateTime<Utc>) -> f64 {
    (b - a).num_milliseconds() as f64 / 1000.0
}
