//! Observation windows that tile a run: every round belongs to exactly one window, and
//! each window starts from the state the previous one ended in (its boundary round), so
//! per-member increases, elections and transitions add up to the whole run's, and each
//! member's health deltas run from the boundary round's `/metrics` read. Pure: the rounds
//! bring their own time.

use std::collections::BTreeMap;

use crate::analysis::client::ClientFold;
use crate::analysis::counts::Window;
use crate::analysis::health::Fold;
use crate::analysis::lock::LockFold;
use crate::model::baseline::{WindowName, WindowRecord};
use crate::model::canary::Op;
use crate::model::clock::Stamp;
use crate::model::counts::LeaderTransition;
use crate::model::member::MemberName;
use crate::model::observation::Round;

/// Turns a peer's hex member id into its name, where known.
pub type PeerName<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The window being filled.
struct Open {
    name: WindowName,
    fold: Window,
    /// Each member's health since the boundary round.
    health: BTreeMap<MemberName, Fold>,
    /// The canary's ops that completed while the window was open.
    client: ClientFold,
    /// The lock canary's events recorded while the window was open.
    lock: LockFold,
    /// The boundary: the previous window's last round, or this window's first.
    first: Option<Stamp>,
    last: Option<Stamp>,
}

/// The closed windows and the open one.
pub struct Windows {
    closed: Vec<WindowRecord>,
    open: Open,
}

impl Windows {
    pub fn new(first: WindowName) -> Self {
        Windows {
            closed: Vec::new(),
            open: Open {
                name: first,
                fold: Window::new(),
                health: BTreeMap::new(),
                client: ClientFold::default(),
                lock: LockFold::default(),
                first: None,
                last: None,
            },
        }
    }

    /// Seconds the open window spans so far, from its first round to its last (monotonic):
    /// what its `duration_s` will say if it closes now.
    pub fn open_span_s(&self) -> f64 {
        match (&self.open.first, &self.open.last) {
            (Some(a), Some(b)) => a.secs_to(b),
            _ => 0.0,
        }
    }

    /// Name of the open window: the `phase` of the rounds it owns.
    pub fn current(&self) -> WindowName {
        self.open.name
    }

    /// Adds a round to the open window; returns the leader transitions it revealed and the
    /// elections (the rise of the highest term across the windows so far).
    pub fn push(&mut self, r: &Round) -> (Vec<LeaderTransition>, u64) {
        let mark = self.open.fold.counts_transitions();
        let elections = self.open.fold.push(&r.view());
        for o in &r.observations {
            if let Some(m) = o.metrics.ok() {
                self.open.health.entry(o.member.clone()).or_default().push(m);
            }
        }
        self.open.first.get_or_insert(r.started);
        self.open.last = Some(r.started);
        (self.open.fold.transitions_since(mark).to_vec(), elections)
    }

    /// Closes the open window (`full_length`: it ran as long as planned) and opens `next`,
    /// which starts from the closed window's last state and last round.
    pub fn next(&mut self, full_length: bool, next: WindowName, peers: PeerName) {
        let health = self.open.health.iter().map(|(n, f)| (n.clone(), f.continue_from())).collect();
        let client = self.open.client.continue_from();
        let open = Open {
            name: next,
            fold: self.open.fold.continue_from(),
            health,
            client,
            lock: self.open.lock.continue_from(),
            first: self.open.last,
            last: self.open.last,
        };
        let done = std::mem::replace(&mut self.open, open);
        self.closed.extend(record(done, full_length, peers));
    }

    /// Closes the open window and returns them all, in order. A window that owns no round
    /// (the run ended at its boundary) is still listed, cut short; one without even a
    /// boundary (no round at all) is not.
    pub fn finish(mut self, full_length: bool, peers: PeerName) -> Vec<WindowRecord> {
        let open = self.open;
        self.closed.extend(record(open, full_length, peers));
        self.closed
    }

    /// The canary started at `at`, one op of each kind every `cadence_s`.
    pub fn canary_started(&mut self, at: Stamp, cadence_s: f64) {
        self.open.client.started(at, cadence_s);
    }

    /// A canary op, in the window open when it is recorded.
    pub fn push_op(&mut self, op: &Op) {
        self.open.client.push(op);
    }

    /// The lock canary started, each holder holding `hold_s`.
    pub fn lock_started(&mut self, hold_s: f64) {
        self.open.lock.started(hold_s);
    }

    /// A lock canary event, in the window open when it is recorded.
    pub fn push_lock(&mut self, e: &crate::model::lock::LockEvent) {
        self.open.lock.push(e);
    }

    /// The open window's client figures so far (for `sample`'s summary).
    pub fn client(&self) -> Option<crate::model::canary::ClientFigures> {
        self.open.client.figures()
    }

    /// The open window's member health so far (for `sample`'s summary).
    pub fn health(
        &self,
        peers: PeerName,
    ) -> BTreeMap<String, crate::model::baseline::MemberHealth> {
        self.open.health.iter().map(|(n, f)| (n.0.clone(), f.figures(peers))).collect()
    }

    /// The highest raft term seen since the first window opened (each window continues
    /// from the last one's).
    pub fn max_term(&self) -> Option<u64> {
        self.open.fold.max_term()
    }

    /// The counts of the open window so far (for `sample`'s summary).
    pub fn counts(&self) -> crate::model::counts::Counts {
        self.open.fold.counts()
    }
}

fn record(w: Open, full_length: bool, peers: PeerName) -> Option<WindowRecord> {
    let (first, last) = w.first.zip(w.last)?;
    let mut r = WindowRecord::new(
        w.name,
        first,
        last,
        w.fold.rounds(),
        &w.fold.counts(),
        full_length && w.fold.rounds() > 0,
    );
    r.health = w.health.iter().map(|(n, f)| (n.0.clone(), f.figures(peers))).collect();
    r.client = w.client.figures();
    r.lock = w.lock.figures();
    Some(r)
}
