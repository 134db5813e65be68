//! What counting reads (a round's [`Point`]s) and writes (the [`Counts`] of a window, as
//! summary.json and baseline.json carry them). The counting is src/analysis/counts.rs.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::member::MemberName;

/// What counting needs from one member in one round. `None`: not observed this round.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Point {
    pub counter: Option<f64>,
    pub start_time: Option<f64>,
    pub raft_term: Option<u64>,
    /// 0 = this member knows no leader.
    pub leader_id: Option<u64>,
}

/// One round as counting sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundView {
    pub round: u64,
    pub ts: DateTime<Utc>,
    pub points: BTreeMap<MemberName, Point>,
}

/// One member's share of the counts over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemberCount {
    /// First counter value observed in the window.
    pub start: Option<f64>,
    /// Last counter value observed in the window.
    pub end: Option<f64>,
    /// Reset-aware increase from `start` to `end`.
    pub increase: f64,
    /// Restarts detected (counter drop or changed process start time).
    pub resets: u32,
}

/// The leader seen by polling changed between two rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaderTransition {
    pub round: u64,
    pub ts: DateTime<Utc>,
    /// Member id (hex) of the previous and new leader.
    pub from: String,
    pub to: String,
}

/// The counts for one window, as written to summary.json / baseline.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub raw_sum_start: Option<f64>,
    pub raw_sum_end: Option<f64>,
    pub reset_aware_increase: f64,
    pub per_member: BTreeMap<MemberName, MemberCount>,
    /// Raft-term delta; `None` when no member ever answered the Status RPC.
    pub elections: Option<u64>,
    pub leader_transitions: Vec<LeaderTransition>,
}

/// The three leader-change counts (docs/counting.md), side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaderChanges {
    pub raw_sum_start: Option<f64>,
    pub raw_sum_end: Option<f64>,
    pub reset_aware_increase: f64,
    pub per_member: BTreeMap<MemberName, MemberCount>,
}

impl LeaderChanges {
    pub fn from_counts(c: &Counts) -> Self {
        LeaderChanges {
            raw_sum_start: c.raw_sum_start,
            raw_sum_end: c.raw_sum_end,
            reset_aware_increase: c.reset_aware_increase,
            per_member: c.per_member.clone(),
        }
    }
}
