//! One row of events.csv: what leaderwatch, the local cluster or Kubernetes did or saw.

use chrono::{DateTime, Utc};

use crate::model::clock::Stamp;

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

/// An events.csv row as read back (src/io/read.rs).
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub ts: DateTime<Utc>,
    pub run_id: String,
    pub source: String,
    pub member: String,
    pub kind: String,
    pub detail: String,
}
