//! One row of events.csv: what leaderwatch, the local cluster or Kubernetes did or saw.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::model::baseline::Cause;
use crate::model::clock::Stamp;
pub use crate::model::kind::{EventKind, Source};

/// One row of events.csv (run_id is added by the recorder).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub ts: DateTime<Utc>,
    pub source: Source,
    /// Empty for run-wide events.
    pub member: String,
    pub kind: EventKind,
    pub detail: String,
    /// The monotonic instant, when leaderwatch itself saw or did it (not for events that
    /// come from the API server, which only have the server's wall time).
    pub at: Option<tokio::time::Instant>,
    /// An `election` row's figures, in columns of their own (empty on other rows).
    pub election: Option<ElectionColumns>,
}

/// The columns of an `election` row that a reader needs: the terms, the cause and the
/// instant of the row it points to. The `detail` says the same in words, for people.
#[derive(Debug, Clone, PartialEq)]
pub struct ElectionColumns {
    pub term_from: u64,
    pub term_to: u64,
    pub cause: Cause,
    pub cause_ts: Option<DateTime<Utc>>,
}

impl Event {
    pub fn new(
        ts: DateTime<Utc>,
        source: Source,
        member: &str,
        kind: EventKind,
        detail: impl Into<String>,
    ) -> Self {
        Event {
            ts,
            source,
            member: member.to_owned(),
            kind,
            detail: detail.into(),
            at: None,
            election: None,
        }
    }

    /// An event at a [`Stamp`]: both clocks.
    pub fn stamped(
        at: Stamp,
        source: Source,
        member: &str,
        kind: EventKind,
        detail: impl Into<String>,
    ) -> Self {
        Event { at: Some(at.mono), ..Event::new(at.utc, source, member, kind, detail) }
    }
}

/// One report from a running disruptor.
#[derive(Debug, Clone, PartialEq)]
pub enum DisruptorReport {
    /// A step, with its instant (signal, exit, restart; eviction blocked, accepted, pod gone).
    Event(Event),
    /// Requests taken so far (a PDB-blocked eviction takes several) and the time from the
    /// first to the latest.
    Attempts { attempts: u32, blocked_s: f64 },
}

/// An events.csv row as read back (src/io/read.rs), by column name. The election columns
/// are empty on every row but an `election` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct EventRow {
    pub ts: DateTime<Utc>,
    pub run_id: String,
    pub source: Source,
    pub member: String,
    pub kind: EventKind,
    pub detail: String,
    #[serde(deserialize_with = "empty_is_none")]
    pub term_from: Option<u64>,
    #[serde(deserialize_with = "empty_is_none")]
    pub term_to: Option<u64>,
    #[serde(deserialize_with = "empty_is_none")]
    pub cause: Option<Cause>,
    #[serde(deserialize_with = "empty_is_none")]
    pub cause_ts: Option<DateTime<Utc>>,
}

impl EventRow {
    /// The election columns, when this row has them.
    pub fn election(&self) -> Option<ElectionColumns> {
        Some(ElectionColumns {
            term_from: self.term_from?,
            term_to: self.term_to?,
            cause: self.cause?,
            cause_ts: self.cause_ts,
        })
    }
}

/// An empty CSV field is `None`; anything else must parse.
fn empty_is_none<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let s = String::deserialize(d)?;
    if s.is_empty() { Ok(None) } else { s.parse().map(Some).map_err(serde::de::Error::custom) }
}
