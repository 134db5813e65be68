//! What the residual rate is made of and what it says: each input read (a baseline.json
//! or a `sample` run directory, [`RateInput`]: its quiet spans, cuts and elections) and
//! the figure `sample` keeps in summary.json ([`Residual`]). Pooling is
//! src/analysis/rate.rs. (An events.csv row's source is another thing: model/event.rs.)

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One election as the rate needs it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Election {
    pub at: DateTime<Utc>,
    /// Raft-term delta (an election that took two terms counts 2, as everywhere else).
    pub terms: u64,
    pub cause: crate::model::event::Cause,
    /// The cause's event, for own and Kubernetes disruptions (cut from there to `at`).
    pub cause_at: Option<DateTime<Utc>>,
}

named! {
    /// What an input of the rate is.
    RateInputKind {
        /// A baseline.json: its trial's at_rest and settle windows (written `sitting`, its
        /// name before the trial was called so: the files keep their words).
        Trial = "sitting",
        /// A `sample` run directory: every run in its events.csv.
        Sample = "sample",
    }
}

/// One input of the rate, read: its exposure, its cuts and its elections.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateInput {
    pub path: PathBuf,
    pub kind: RateInputKind,
    /// Where it ran (a sitting's environment; a sample's member endpoints).
    pub environment: String,
    /// The time it watched a cluster at rest: at_rest and settle windows, sample runs.
    pub spans: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// Disruptions in progress, each with the event that started it.
    pub cuts: Vec<(DateTime<Utc>, DateTime<Utc>, String)>,
    pub elections: Vec<Election>,
    /// What the reader had to assume (a run without its end, an unreadable row).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    pub rate: f64,
    pub lower: f64,
    pub upper: f64,
}

/// What `sample`'s summary.json says of the rate: every run in its directory pooled, so a
/// month of sampling reads as one figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Residual {
    /// Runs of `sample` in the directory (events.csv), this one included.
    pub runs: usize,
    pub exposure_s: f64,
    pub cut_s: f64,
    pub residual: u64,
    pub by_cause: BTreeMap<String, u64>,
    pub confidence: f64,
    pub per_hour: Option<Bound>,
    pub per_day: Option<Bound>,
}

/// A baseline.json as the report reads it: where it is, what it says, and the rate's
/// source made of it and the events.csv beside it.
#[derive(Debug, Clone)]
pub struct BaselineFile {
    pub path: std::path::PathBuf,
    pub baseline: crate::model::baseline::Baseline,
    pub rate: RateInput,
}
