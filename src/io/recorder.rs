//! The recorder: where a run's rows go. It writes what the engine
//! (src/analysis/engine.rs) made to the run directory (src/io/run_dir.rs) and to the
//! exporter, logging each event as it is written. It keeps no state of its own beyond
//! the open files: every row is flushed as it is written, so a crash or a signal loses
//! nothing already measured.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::analysis::engine::{RoundOutput, ToWrite};
use crate::io::exporter::Exporter;
use crate::io::run_dir::{CanaryRow, HealthRow, LockRow, RecordError, RunDir};
use crate::model::canary::Op;
use crate::model::clock::Clock;
use crate::model::event::{Event, EventKind, Source};
use crate::model::observation::Round;

/// A run id that sorts by time and differs between runs started in the same second.
pub fn new_run_id(clock: &dyn Clock) -> String {
    let now = clock.now();
    let salt = (std::process::id() as u64 ^ now.timestamp_subsec_nanos() as u64) & 0xffff;
    format!("{}-{salt:04x}", now.format("%Y%m%dT%H%M%SZ"))
}

pub struct Recorder {
    dir: RunDir,
    /// `--metrics-addr`: fed what is recorded, as it is recorded.
    exporter: Option<Exporter>,
}

impl Recorder {
    /// Opens (or reopens) `out`. The events that say what reopening found (rows kept, a
    /// torn last line left by a crash and cut) come back, to be written first.
    pub fn open(
        out: &Path,
        run_id: &str,
        clock: &dyn Clock,
    ) -> Result<(Self, Vec<Event>), RecordError> {
        let dir = RunDir::open(out, run_id)?;
        let now = clock.now();
        let mut startup = Vec::new();
        let [(_, s), (_, e), _] = dir.reopened.clone();
        if s.rows > 0 || e.rows > 0 {
            startup.push(Event::new(
                now,
                Source::Record,
                "",
                EventKind::Reopened,
                format!("{} sample row(s), {} event row(s) from earlier runs kept", s.rows, e.rows),
            ));
        }
        for (file, r) in dir.reopened.clone() {
            if r.torn_bytes > 0 {
                tracing::warn!(
                    "{file}: cut a torn last line of {} byte(s) left by an earlier crash",
                    r.torn_bytes
                );
                startup.push(Event::new(
                    now,
                    Source::Record,
                    "",
                    EventKind::Repaired,
                    format!("{file}: cut a torn last line of {} byte(s)", r.torn_bytes),
                ));
            }
        }
        Ok((Recorder { dir, exporter: None }, startup))
    }

    pub fn run_id(&self) -> &str {
        self.dir.run_id()
    }

    /// `sample`'s daily files (run_dir.rs, rotate.rs), from `now` on.
    pub fn rotate_daily(
        &mut self,
        rotation: crate::io::rotate::Rotation,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), RecordError> {
        self.dir.rotate_daily(rotation, now)
    }

    /// What rotation and housekeeping did since last asked, as events to write.
    pub fn take_notes(&mut self) -> Vec<Event> {
        self.dir.take_notes()
    }

    /// From now on, every round, health interval and canary op also goes to `e`.
    pub fn export_to(&mut self, e: Exporter) {
        self.exporter = Some(e);
    }

    /// A round's samples.csv rows, under the window it is in.
    pub fn samples(&mut self, r: &Round, window: &str) -> Result<(), RecordError> {
        self.dir.append_round(r, window)
    }

    /// What the engine made of a round.
    pub fn round(&mut self, r: &Round, made: &RoundOutput) -> Result<(), RecordError> {
        if let Some(e) = self.exporter.as_mut() {
            e.round(r, &made.export);
        }
        self.rows(&made.rows)
    }

    /// Events, then health rows.
    pub fn rows(&mut self, rows: &ToWrite) -> Result<(), RecordError> {
        self.events(&rows.events)?;
        self.health(&rows.health)
    }

    /// Appends events, logging each.
    pub fn events(&mut self, events: &[Event]) -> Result<(), RecordError> {
        for e in events {
            tracing::info!(source = %e.source, member = %e.member, kind = %e.kind, "{}", e.detail);
        }
        self.dir.append_events(events)
    }

    pub fn health(&mut self, rows: &[HealthRow]) -> Result<(), RecordError> {
        if rows.is_empty() {
            return Ok(());
        }
        if let Some(e) = self.exporter.as_mut() {
            e.health(rows);
        }
        self.dir.append_health(rows)
    }

    /// The canary's finished ops: their canary.csv rows, and the exporter's counts.
    pub fn canary(&mut self, ops: &[Op], rows: &[CanaryRow]) -> Result<(), RecordError> {
        if ops.is_empty() {
            return Ok(());
        }
        self.dir.append_canary(rows)?;
        if let Some(e) = self.exporter.as_mut() {
            e.canary(ops);
        }
        Ok(())
    }

    /// The lock canary's events: their locks.csv rows.
    pub fn locks(&mut self, rows: &[LockRow]) -> Result<(), RecordError> {
        self.dir.append_locks(rows)
    }

    /// Ends housekeeping (its last notes come back, to be written before the JSON).
    pub fn finish_housekeeping(&mut self) -> Vec<Event> {
        self.dir.finish_housekeeping();
        self.dir.take_notes()
    }

    /// Flushes the CSV files to disk, then writes `name` atomically.
    pub fn write_json<T: Serialize>(
        &mut self,
        name: &str,
        value: &T,
    ) -> Result<PathBuf, RecordError> {
        self.dir.sync()?;
        self.dir.write_json(name, value)
    }
}
