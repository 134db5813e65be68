//! Text for people and tools, from the model and the analysis: the report's tables and
//! CSV, `compare`, the rate table, the alert rule, the progress line.

pub mod alert;
pub mod ledger;
pub mod progress;
pub mod rate;
pub mod recount;
pub mod report;

/// Text leaderwatch made itself that could not be written (its own rows to CSV, its own
/// rule to YAML): a bug, said as one.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InternalError(pub String);
