//! The one recorder of `sample` and the sitting alike: each round to samples.csv (under
//! the open window's name), what changed to events.csv (member state, leader transitions),
//! the windows that tile the run, and the etcd versions seen. Every row is flushed as it
//! is written, so a crash or a signal loses nothing already measured.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::baseline::WindowRecord;
use crate::clock::Clock;
use crate::counts::Counts;
use crate::events::{Event, Tracker};
use crate::record::{RecordError, RunDir};
use crate::round::Round;
use crate::windows::Windows;

/// A run id that sorts by time and differs between runs started in the same second.
pub fn new_run_id(clock: &dyn Clock) -> String {
    let now = clock.now();
    let salt = (std::process::id() as u64 ^ now.timestamp_subsec_nanos() as u64) & 0xffff;
    format!("{}-{salt:04x}", now.format("%Y%m%dT%H%M%SZ"))
}

pub struct Recorder {
    dir: RunDir,
    tracker: Tracker,
    windows: Windows,
    versions: Vec<String>,
    rounds: u64,
}

impl Recorder {
    /// Opens (or reopens) `out`; a torn last line left by a crash is cut and said so in
    /// events.csv. `first_window` names the first window (`sample`, `at_rest`).
    pub fn open(out: &Path, run_id: &str, clock: &dyn Clock, first_window: &str) -> Result<Self, RecordError> {
        let dir = RunDir::open(out, run_id)?;
        let now = clock.now();
        let mut startup = Vec::new();
        let (s, e) = dir.reopened.clone();
        if s.rows > 0 || e.rows > 0 {
            startup.push(Event::new(now, "record", "", "reopened", format!("{} sample row(s), {} event row(s) from earlier runs kept", s.rows, e.rows)));
        }
        for (file, r) in [("samples.csv", &s), ("events.csv", &e)] {
            if r.torn_bytes > 0 {
                tracing::warn!("{file}: cut a torn last line of {} byte(s) left by an earlier crash", r.torn_bytes);
                startup.push(Event::new(now, "record", "", "repaired", format!("{file}: cut a torn last line of {} byte(s)", r.torn_bytes)));
            }
        }
        let mut rec = Recorder { dir, tracker: Tracker::new(), windows: Windows::new(first_window), versions: Vec::new(), rounds: 0 };
        rec.events(&startup)?;
        Ok(rec)
    }

    pub fn run_id(&self) -> &str {
        self.dir.run_id()
    }

    /// Rounds recorded so far in this run.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// Records one round in the open window: its rows, then what it changed.
    pub fn round(&mut self, r: &Round) -> Result<(), RecordError> {
        self.dir.append_round(r, self.windows.current())?;
        self.rounds += 1;
        let mut events: Vec<Event> = r.observations.iter().flat_map(|o| self.tracker.observe(o)).collect();
        for t in self.windows.push(r) {
            events.push(Event::new(t.ts, "leaderwatch", "", "leader_transition", format!("{} -> {} (round {})", t.from, t.to, t.round)));
        }
        for v in r.observations.iter().filter_map(|o| o.status.ok().map(|s| s.version.clone())) {
            if !self.versions.contains(&v) {
                self.versions.push(v);
            }
        }
        self.events(&events)
    }

    /// Appends events (logged as they are written).
    pub fn events(&mut self, events: &[Event]) -> Result<(), RecordError> {
        for e in events {
            tracing::info!(source = %e.source, member = %e.member, kind = %e.kind, "{}", e.detail);
        }
        self.dir.append_events(events)
    }

    pub fn event(&mut self, e: Event) -> Result<(), RecordError> {
        self.events(std::slice::from_ref(&e))
    }

    /// Closes the open window and opens `next` at its last round.
    pub fn next_window(&mut self, full_length: bool, next: &str) {
        self.windows.next(full_length, next);
    }

    /// The open window's counts so far.
    pub fn counts(&self) -> Counts {
        self.windows.counts()
    }

    /// Closes the open window; returns every window of the run, in order.
    pub fn close_windows(&mut self, full_length: bool) -> Vec<WindowRecord> {
        std::mem::replace(&mut self.windows, Windows::new("")).finish(full_length)
    }

    /// etcd versions the Status RPC reported, in the order first seen.
    pub fn versions(&self) -> &[String] {
        &self.versions
    }

    /// Flushes both CSV files to disk, then writes `name` atomically.
    pub fn write_json<T: Serialize>(&mut self, name: &str, value: &T) -> Result<PathBuf, RecordError> {
        self.dir.sync()?;
        self.dir.write_json(name, value)
    }
}
