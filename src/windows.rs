//! Observation windows that tile a run: every round belongs to exactly one window, and
//! each window starts from the state the previous one ended in (its boundary round), so
//! per-member increases, elections and transitions add up to the whole run's. Pure: the
//! rounds bring their own time.

use crate::baseline::WindowRecord;
use crate::clock::Stamp;
use crate::counts::{LeaderTransition, Window};
use crate::round::Round;

/// The window being filled.
struct Open {
    name: String,
    fold: Window,
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
    pub fn new(first: &str) -> Self {
        Windows { closed: Vec::new(), open: Open { name: first.to_owned(), fold: Window::new(), first: None, last: None } }
    }

    /// Name of the open window: the `phase` of the rounds it owns.
    pub fn current(&self) -> &str {
        &self.open.name
    }

    /// Adds a round to the open window; returns the leader transitions it revealed.
    pub fn push(&mut self, r: &Round) -> Vec<LeaderTransition> {
        let mark = self.open.fold.counts_transitions();
        self.open.fold.push(&r.view());
        self.open.first.get_or_insert(r.started);
        self.open.last = Some(r.started);
        self.open.fold.transitions_since(mark).to_vec()
    }

    /// Closes the open window (`full_length`: it ran as long as planned) and opens `next`,
    /// which starts from the closed window's last state and last round.
    pub fn next(&mut self, full_length: bool, next: &str) {
        let open = Open { name: next.to_owned(), fold: self.open.fold.continue_from(), first: self.open.last, last: self.open.last };
        let done = std::mem::replace(&mut self.open, open);
        self.closed.extend(record(done, full_length));
    }

    /// Closes the open window and returns them all, in order. A window that owns no round
    /// (the run ended at its boundary) is still listed, cut short; one without even a
    /// boundary (no round at all) is not.
    pub fn finish(mut self, full_length: bool) -> Vec<WindowRecord> {
        let open = self.open;
        self.closed.extend(record(open, full_length));
        self.closed
    }

    /// The counts of the open window so far (for `sample`'s summary).
    pub fn counts(&self) -> crate::counts::Counts {
        self.open.fold.counts()
    }
}

fn record(w: Open, full_length: bool) -> Option<WindowRecord> {
    let (first, last) = w.first.zip(w.last)?;
    Some(WindowRecord::new(&w.name, first, last, w.fold.rounds(), &w.fold.counts(), full_length && w.fold.rounds() > 0))
}
