//! The lock canary's events (src/io/lock.rs makes them) and what they fold into
//! (src/analysis/lock.rs): locks.csv rows, `windows[].lock`, each election's lock figure and
//! the run's safety verdict in baseline.json.
//!
//! A grant is what etcd's `concurrency.Mutex` calls acquiring: the holder's key
//! `<prefix>/<lease hex>` (created under its lease) has the lowest create revision under the
//! prefix. That create revision is the **fencing token** (the key is never updated, so its
//! mod revision is the same). The holder keeps the lease alive on a keep-alive stream and
//! loses the lock when the lease expires.

use serde::{Deserialize, Serialize};

use crate::model::clock::Stamp;

named! {
    /// What happened, as locks.csv's `event` column names it.
    LockEventKind {
        /// The holder has a new lease (a session, in clientv3's words).
        LeaseGranted = "lease_granted",
        /// The holder asks for the lock: its acquire begins.
        Requested = "requested",
        /// An acquire op (the Txn, a Get, the watch) answered an error; it is tried again.
        AcquireFailed = "acquire_failed",
        /// A retried acquire found the key an earlier attempt created, though that attempt
        /// was answered with an error: the grant Txn was applied anyway.
        AppliedAfterError = "applied_after_error",
        /// The holder owns the lock: `create_revision` is its fencing token, `revision` the
        /// server's revision of the answer that said so.
        Granted = "granted",
        /// The holder's Delete of its key was answered: `revision` is the delete's.
        Released = "released",
        /// A Delete answered an error; it is tried again while the lease lives.
        ReleaseFailed = "release_failed",
        /// A keep-alive was answered (the lease's TTL renewed).
        KeepAliveOk = "keepalive_ok",
        /// The keep-alive stream failed; it is opened again on the next member.
        KeepAliveFailed = "keepalive_failed",
        /// The lease is gone: no keep-alive answer within its TTL, or etcd said it has
        /// expired. `held` says whether the holder held the lock then.
        LeaseLost = "lease_lost",
        /// The server's record (a watch on the prefix): a key was created at `revision`.
        Created = "created",
        /// The server's record: a key was deleted at `revision` (a release, or its lease's
        /// expiry).
        Deleted = "deleted",
    }
}

/// One event of the lock canary.
#[derive(Debug, Clone, PartialEq)]
pub struct LockEvent {
    pub kind: LockEventKind,
    /// When the answer (or the loss) was seen.
    pub at: Stamp,
    /// The holder (0, 1, ...); `None` for the server's record (`created`, `deleted`).
    pub holder: Option<u16>,
    /// The holder's lease (0 when it has none yet).
    pub lease: i64,
    /// The holder's key (empty when it has none yet).
    pub key: String,
    /// The key's create revision: for `granted`, the fencing token.
    pub create_revision: i64,
    /// The server's revision of the answer (or of the watched change).
    pub revision: i64,
    /// The member that answered (0 = not known).
    pub member_id: u64,
    /// How long the op took, in milliseconds (0 for events without an op).
    pub latency_ms: f64,
    /// For `lease_lost`: the holder held the lock when it lost the lease.
    pub held: bool,
    /// One line; empty unless something failed.
    pub error: String,
}

impl LockEvent {
    /// An event with no revision, member or error yet: the fields a caller fills in.
    pub fn new(kind: LockEventKind, at: Stamp, holder: Option<u16>) -> Self {
        LockEvent {
            kind,
            at,
            holder,
            lease: 0,
            key: String::new(),
            create_revision: 0,
            revision: 0,
            member_id: 0,
            latency_ms: 0.0,
            held: false,
            error: String::new(),
        }
    }
}

/// `windows[].lock` in baseline.json: what the lock canary saw while the window was open.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LockFigures {
    pub grants: u64,
    /// Acquire ops answered with an error (each tried again).
    pub acquire_failures: u64,
    /// Grant Txns answered with an error but applied (the retry found the key).
    pub applied_after_error: u64,
    /// Leases lost (no keep-alive answer within the TTL, or expired at the server).
    pub leases_lost: u64,
    /// Of those, while the holder held the lock: the case fencing tokens exist for.
    pub leases_lost_while_held: u64,
    /// The longest time from one grant to the next (any holder; a waiter is always
    /// asking while there are two holders or more), minus the hold (one hold apart is
    /// normal), never below 0: null until a second grant.
    pub longest_unavailable_s: Option<f64>,
    /// The median of the same: the usual hand-over from one holder to the next, to read
    /// the longest against.
    pub handover_p50_s: Option<f64>,
}

named! {
    /// The run's lock safety verdict.
    Verdict {
        /// Every grant's fencing token was above the one before, and no two holds
        /// overlapped in the server's revision order.
        Held = "held",
        /// At least one of the two failed: the run's `lock_safety` says which grants.
        Broken = "broken",
        /// Neither failed, but the server's record lacks the end of a grant that another
        /// followed (the watch on the prefix missed its deletion): not every pair checked.
        Incomplete = "incomplete",
        /// No grant to check (no lock canary, or it never got the lock).
        NotChecked = "not_checked",
    }
}

/// `lock_safety` in baseline.json: the checks over every grant of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockSafety {
    pub verdict: Verdict,
    pub grants_checked: u64,
    /// Grants whose end (the deletion of the key) the server's record does not show: they
    /// are checked as held to the end of the run.
    pub grants_without_end: u64,
    /// One line per grant whose token was not above the previous grant's.
    pub tokens_not_increasing: Vec<String>,
    /// One line per grant made while an earlier one still held.
    pub overlaps: Vec<String>,
}

/// One lock canary event as locks.csv writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct LockRow {
    pub event: LockEvent,
    pub window: String,
    /// The member that answered: its name, its hex id if the name is not known, or empty.
    pub member: String,
}
