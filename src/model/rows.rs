//! The rows of canary.csv, locks.csv and health.csv as the engine (src/analysis/engine.rs) makes
//! them; src/io/run_dir.rs writes them.

use chrono::{DateTime, Utc};

/// One canary op as canary.csv writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryRow {
    pub op: crate::model::canary::Op,
    pub window: String,
    /// The member that answered: its name, its hex id if the name is not known, or empty.
    pub member: String,
}

/// One lock canary event as locks.csv writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct LockRow {
    pub event: crate::model::lock::LockEvent,
    pub window: String,
    /// The member that answered: its name, its hex id if the name is not known, or empty.
    pub member: String,
}

/// One member's health over one interval of health.csv.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthRow {
    /// End of the interval (the start of its last round).
    pub ts: DateTime<Utc>,
    pub window: String,
    pub member: String,
    pub interval_start: DateTime<Utc>,
    /// Monotonic seconds.
    pub interval_s: f64,
    pub health: crate::model::baseline::MemberHealth,
}
