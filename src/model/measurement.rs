//! One row of the tidy list ([`Measurement`]): one figure of one run, as `report --format
//! csv` writes it and the tables and `compare` read it. A baseline is flattened into that
//! list by src/analysis/flatten.rs.

use chrono::{DateTime, Utc};

/// Units of [`Measurement::unit`].
pub const SECONDS: &str = "s";
pub const COUNT: &str = "count";
/// Raft-term increments: what `elections` counts (docs/counting.md).
pub const TERMS: &str = "terms";
pub const BYTES: &str = "bytes";

/// The `window` of the recovery figures (they span member loss to healthy, not a window).
pub const RECOVERY: &str = "recovery";
/// The `window` of the row "client writes unavailable during the disruption".
pub const CLIENT: &str = "client";
/// The `window` of the row "a lock during the disruption" (the lock canary's grants, and
/// the run's safety verdict).
pub const LOCK: &str = "lock";
/// The `window` of "elections per disruption": the disruption and settle windows together.
pub const PER_DISRUPTION: &str = "per_disruption";

/// One figure of one baseline. `analysis::flatten::measurements` lists them; the window table, the health
/// table, the CSV and `compare` only format, group or match that list.
///
/// Serialized, it is one row of `report --format csv`, columns in this order:
///
/// `run_id,source,environment,window,member,figure,value,unit,threshold,threshold_source,over,label,note,window_start,window_end,window_s,target_role`
///
/// - `source`: the baseline.json path as given; `environment`: where it ran;
/// - `window`: `at_rest`, `disruption`, `settle` (baseline.json's windows), `recovery`,
///   `client`, `lock` or `per_disruption` (the disruption and settle windows together: its one
///   figure, `elections`, is what `report --alert-rule` calls elections per disruption);
/// - `member`: empty for a cluster-wide figure, else whose health figure it is;
/// - `figure`, `value`, `unit` (`s`, `count`, `terms`, `bytes`): `value` is empty when not
///   known, never 0;
/// - `threshold`, `threshold_source`: the highest documented threshold the figure went over
///   (the member's `over` flags in baseline.json), empty when none; `over`: `true` or `false`;
/// - `label`: the row the figure belongs to in the window table; `note`: words that go with
///   the value (an election's cause, how the member was kept down);
/// - `window_start`, `window_end` (RFC 3339, ms; `window_end` empty: never recovered),
///   `window_s`: the monotonic duration;
/// - `target_role`: what the disrupted member was when it was lost, `leader` or
///   `follower`; empty for a run without a disruption and for the pooled rate rows.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Measurement {
    pub run_id: String,
    pub source: String,
    pub environment: String,
    pub window: String,
    pub member: String,
    pub figure: String,
    pub value: Option<f64>,
    pub unit: &'static str,
    pub threshold: Option<f64>,
    pub threshold_source: String,
    pub over: bool,
    pub label: String,
    pub note: String,
    #[serde(serialize_with = "ser_ts")]
    pub window_start: DateTime<Utc>,
    #[serde(serialize_with = "ser_opt_ts")]
    pub window_end: Option<DateTime<Utc>>,
    pub window_s: Option<f64>,
    pub target_role: &'static str,
}

fn ser_ts<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::model::clock::ts(*t))
}

fn ser_opt_ts<S: serde::Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser_ts(t, s),
        None => s.serialize_none(),
    }
}
