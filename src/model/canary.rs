//! The canary's ops (src/io/canary.rs runs them) and the figures they fold into
//! (src/analysis/client.rs): what canary.csv rows and `windows[].client` are made of.

use serde::{Deserialize, Serialize};

use crate::model::clock::Stamp;

named! {
    /// What an op is, as canary.csv's `kind` column names it.
    Kind {
        Write = "write",
        Read = "read",
    }
}

/// One op and how it went.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub kind: Kind,
    /// When its tick was due: later than that, the previous op of its kind held it up.
    pub due: Stamp,
    pub started: Stamp,
    pub done: Stamp,
    pub ok: bool,
    /// One line; empty when `ok`.
    pub error: String,
    /// The member it went to: the answer's header, or for a failure the id that member
    /// gave in its earlier answers (0 = not known).
    pub member_id: u64,
    /// A client with one op in flight would have sent this one (see the module header).
    pub one_in_flight: bool,
}

impl Op {
    pub fn latency_ms(&self) -> f64 {
        self.started.secs_to(&self.done) * 1000.0
    }

    /// How long the op started after its tick (waiting for the in-flight limit, or the
    /// runtime being late).
    pub fn delay_ms(&self) -> f64 {
        (self.due.secs_to(&self.started) * 1000.0).max(0.0)
    }
}

/// The figures of one kind of op over one window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KindFigures {
    pub ops: u64,
    pub failures: u64,
    /// Successful ops / ops; null without ops.
    pub availability: Option<f64>,
    /// Latency of the successful ops, nearest rank; null without one.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// See the module header; null until a successful op completed in the window.
    pub longest_unavailable_s: Option<f64>,
    /// The same over the ops a client with one op in flight would have sent: what it
    /// sees, the canary's own queue included. Absent in runs before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_in_flight_longest_unavailable_s: Option<f64>,
}

/// `windows[].client` in baseline.json.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientFigures {
    pub write: KindFigures,
    pub read: KindFigures,
}

/// One canary op as canary.csv writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryRow {
    pub op: Op,
    pub window: String,
    /// The member that answered: its name, its hex id if the name is not known, or empty.
    pub member: String,
}
