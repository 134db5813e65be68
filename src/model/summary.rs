//! `summary.json` (schema_version 3) of a `sample` run, documented in data/README.md.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::baseline::{ElectionDetail, MemberHealth};
use crate::model::counts::{Counts, LeaderChanges, LeaderTransition};
use crate::model::member::MemberName;

pub const SCHEMA_VERSION: u32 = 3;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberRef {
    pub name: MemberName,
    pub endpoint: String,
}

named! {
    /// Why a `sample` run ended.
    EndedBy {
        /// `--duration` ran out.
        Duration = "duration",
        /// SIGINT or SIGTERM.
        Signal = "signal",
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub schema_version: u32,
    pub tool_version: String,
    pub run_id: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub duration_s: f64,
    pub ended_by: EndedBy,
    pub rounds: u64,
    pub members: Vec<MemberRef>,
    pub leader_changes: LeaderChanges,
    /// Raft-term delta over the run: the best single figure for elections.
    pub elections: Option<u64>,
    pub leader_transitions: Vec<LeaderTransition>,
    /// Every election of the run with its cause (schema 2).
    #[serde(default)]
    pub elections_detail: Vec<ElectionDetail>,
    /// Each member's health over the whole run, by name (schema 2).
    #[serde(default)]
    pub health: BTreeMap<String, MemberHealth>,
    /// How far before an election its cause was looked for.
    #[serde(default)]
    pub cause_horizon_s: f64,
    /// What the canary saw over the run (`--canary`); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<crate::model::canary::ClientFigures>,
    /// What the lock canary saw over the run (`--lock-canary`); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<crate::model::lock::LockFigures>,
    /// The lock canary's safety checks over every grant of the run; absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_safety: Option<crate::model::lock::LockSafety>,
    /// One sentence that puts the three counts side by side for a reader.
    pub explanation: String,
    /// The residual rate of elections over every run in the directory (schema 3); absent
    /// when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual: Option<crate::model::rate::Residual>,
}

/// Says in words why the three counts differ, so that nobody quotes the raw sum as elections.
pub fn explain(c: &Counts) -> String {
    let fmt = |v: Option<f64>| v.map_or("unknown".to_owned(), |v| format!("{v}"));
    let resets: u32 = c.per_member.values().map(|m| m.resets).sum();
    format!(
        "raw sum of etcd_server_leader_changes_seen_total went {} -> {} (counts observations: each member counts every leader it learns, and restarts reset it); \
         reset-aware increase {} with {} detected reset(s); elections (raft term delta) {}; leader transitions seen by polling {}",
        fmt(c.raw_sum_start),
        fmt(c.raw_sum_end),
        c.reset_aware_increase,
        resets,
        c.elections.map_or("unknown".to_owned(), |e| e.to_string()),
        c.leader_transitions.len()
    )
}
