//! The run directory ([`RunDir`]): `samples.csv`, `events.csv`, `health.csv` and
//! `canary.csv`, append-only and flushed every round (their columns: src/io/columns.rs),
//! and JSON written atomically. Reopening a directory repairs a torn last line left by a
//! crash and appends after it; a file with another header is refused, never rewritten;
//! `sample`'s daily files are rolled and housekept here (src/io/rotate.rs).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::io::columns::{
    CANARY_HEADER, EVENTS_HEADER, HEALTH_HEADER, LOCKS_HEADER, SAMPLES_HEADER, canary_record,
    event_record, health_row, lock_record, sample_row, silent_row,
};
use crate::io::rotate::Rotation;
pub use crate::model::baseline::HealthRow;
pub use crate::model::canary::CanaryRow;
use crate::model::event::{Event, EventKind, Source};
pub use crate::model::lock::LockRow;
use crate::model::observation::Round;

pub const SAMPLES: &str = "samples.csv";
pub const EVENTS: &str = "events.csv";
pub const HEALTH: &str = "health.csv";
pub const CANARY: &str = "canary.csv";
pub const LOCKS: &str = "locks.csv";

/// Errors of the run directory; each names the path.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: {source}")]
    Csv { path: PathBuf, source: csv::Error },
    /// A file of an older (or another) version: its rows would not read back. The command
    /// says which flag names another directory (lib.rs).
    #[error("{path}: header differs from this version's ({found:?})")]
    Schema { path: PathBuf, found: String },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RecordError + '_ {
    move |source| RecordError::Io { path: path.to_owned(), source }
}

/// One append-only CSV file.
struct CsvFile {
    path: PathBuf,
    w: csv::Writer<File>,
    /// UTC day of its first row (rotation closes the file when a later day starts).
    day: Option<NaiveDate>,
}

/// What reopening found in one file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reopened {
    /// Bytes of a torn last line that were cut off.
    pub torn_bytes: u64,
    /// Complete rows already in the file (from earlier runs).
    pub rows: u64,
}

impl CsvFile {
    /// Opens `path` for appending, creating it with `header`; a file with another header
    /// is refused.
    fn open(path: PathBuf, header: &[&str]) -> Result<(Self, Reopened), RecordError> {
        let mut f = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io_err(&path))?;
        let mut text = Vec::new();
        f.read_to_end(&mut text).map_err(io_err(&path))?;
        let mut found = Reopened::default();
        if !text.is_empty() {
            let first = text.split(|b| *b == b'\n').next().unwrap_or_default();
            let want = header.join(",");
            if first != want.as_bytes() {
                let found = String::from_utf8_lossy(&first[..first.len().min(120)]).into_owned();
                return Err(RecordError::Schema { path, found });
            }
            // A crash can leave a partial last line: keep everything up to the last newline.
            let keep = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            if keep < text.len() {
                found.torn_bytes = (text.len() - keep) as u64;
                f.set_len(keep as u64).map_err(io_err(&path))?;
                f.seek(SeekFrom::End(0)).map_err(io_err(&path))?;
                text.truncate(keep);
            }
            found.rows = text.iter().filter(|b| **b == b'\n').count().saturating_sub(1) as u64;
        }
        let needs_header = text.is_empty();
        let day = crate::io::rotate::first_row_day(&text);
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(f);
        if needs_header {
            w.write_record(header)
                .map_err(|source| RecordError::Csv { path: path.clone(), source })?;
            w.flush().map_err(io_err(&path))?;
        }
        Ok((CsvFile { path, w, day }, found))
    }

    /// Before rows of `day` are written: with rotation on and a live file of an earlier
    /// day, closes it (renamed to its day) and starts a new one. Returns the closed file.
    fn roll(
        &mut self,
        rotation: Option<Rotation>,
        day: NaiveDate,
        header: &[&str],
    ) -> Result<Option<PathBuf>, RecordError> {
        let prev = self.day.get_or_insert(day);
        if rotation.is_none() || day <= *prev {
            return Ok(None);
        }
        let prev = *prev;
        self.flush()?;
        self.w.get_ref().sync_all().map_err(io_err(&self.path))?;
        let dir = self.path.parent().unwrap_or(Path::new(".")).to_owned();
        let live =
            self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let closed = crate::io::rotate::close(&dir, &live, prev).map_err(io_err(&self.path))?;
        let (mut next, _) = CsvFile::open(self.path.clone(), header)?;
        next.day = Some(day);
        *self = next;
        Ok(Some(closed))
    }

    fn flush(&mut self) -> Result<(), RecordError> {
        self.w.flush().map_err(io_err(&self.path))
    }
}

/// An open run directory.
pub struct RunDir {
    dir: PathBuf,
    run_id: String,
    samples: CsvFile,
    events: CsvFile,
    health: CsvFile,
    /// Opened on the first op: a run without the canary has no canary.csv.
    canary: Option<CsvFile>,
    /// Opened on the first event: a run without the lock canary has no locks.csv.
    locks: Option<CsvFile>,
    /// What reopening found in samples.csv, events.csv and health.csv.
    pub reopened: [(&'static str, Reopened); 3],
    /// `sample`'s daily files; `None`: one file each, forever (a sitting).
    rotation: Option<Rotation>,
    /// Compression and retention run off the sampling path, one pass at a time.
    housekeeping: Option<std::thread::JoinHandle<crate::io::rotate::Done>>,
    /// A day closed while a pass was running: run another after it.
    housekeeping_due: Option<NaiveDate>,
    /// What rotation did, for events.csv (the recorder takes them).
    notes: Vec<Event>,
    /// The newest row's time, for those notes.
    last_ts: Option<DateTime<Utc>>,
}

/// The files that rotate: those written every round or interval. events.csv does not:
/// it grows only with changes, and a month of it is what the rate of elections rests on.
const ROTATED: [&str; 4] = [SAMPLES, HEALTH, CANARY, LOCKS];

impl RunDir {
    /// Creates or reopens `dir`, repairing torn last lines.
    pub fn open(dir: &Path, run_id: &str) -> Result<Self, RecordError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let (samples, rs) = CsvFile::open(dir.join(SAMPLES), &SAMPLES_HEADER)?;
        let (events, re) = CsvFile::open(dir.join(EVENTS), &EVENTS_HEADER)?;
        let (health, rh) = CsvFile::open(dir.join(HEALTH), &HEALTH_HEADER)?;
        Ok(RunDir {
            dir: dir.to_owned(),
            run_id: run_id.to_owned(),
            samples,
            events,
            health,
            canary: None,
            locks: None,
            reopened: [(SAMPLES, rs), (EVENTS, re), (HEALTH, rh)],
            rotation: None,
            housekeeping: None,
            housekeeping_due: None,
            notes: Vec::new(),
            last_ts: None,
        })
    }

    /// Turns daily rotation on at `now`: a live file of an earlier day (a restart after
    /// midnight) is closed at once, and closed files are compressed and pruned now and at
    /// every rotation.
    pub fn rotate_daily(
        &mut self,
        rotation: Rotation,
        now: DateTime<Utc>,
    ) -> Result<(), RecordError> {
        self.rotation = Some(rotation);
        if self.canary.is_none() && self.dir.join(CANARY).exists() {
            // A canary.csv of an earlier run rotates too, even if this run writes none.
            let (f, _) = CsvFile::open(self.dir.join(CANARY), &CANARY_HEADER)?;
            self.canary = Some(f);
        }
        if self.locks.is_none() && self.dir.join(LOCKS).exists() {
            let (f, _) = CsvFile::open(self.dir.join(LOCKS), &LOCKS_HEADER)?;
            self.locks = Some(f);
        }
        let today = now.date_naive();
        self.housekeeping_due = Some(today);
        for which in ROTATED {
            // Only files with rows: an empty one takes the day of its first row.
            if self.rotated(which).is_some_and(|(f, _)| f.day.is_some()) {
                self.roll(which, today, now)?;
            }
        }
        self.housekeep();
        Ok(())
    }

    /// One of the [`ROTATED`] files (canary.csv and locks.csv only once open) and its header.
    fn rotated(&mut self, which: &str) -> Option<(&mut CsvFile, &'static [&'static str])> {
        match which {
            SAMPLES => Some((&mut self.samples, &SAMPLES_HEADER[..])),
            HEALTH => Some((&mut self.health, &HEALTH_HEADER[..])),
            LOCKS => self.locks.as_mut().map(|c| (c, &LOCKS_HEADER[..])),
            _ => self.canary.as_mut().map(|c| (c, &CANARY_HEADER[..])),
        }
    }

    /// Rolls `which` to `day` if due; notes and housekeeping follow a rotation.
    fn roll(&mut self, which: &str, day: NaiveDate, ts: DateTime<Utc>) -> Result<(), RecordError> {
        let rotation = self.rotation;
        self.last_ts = Some(ts);
        let closed = match self.rotated(which) {
            Some((f, header)) => f.roll(rotation, day, header)?,
            None => None,
        };
        if let Some(closed) = closed {
            let name =
                closed.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            self.notes.push(Event::new(
                ts,
                Source::Record,
                "",
                EventKind::Rotated,
                format!("{which}: the rows before {day} are in {name}"),
            ));
            self.housekeeping_due = Some(day);
        }
        self.housekeep();
        Ok(())
    }

    /// Collects a finished pass (its notes) and starts the one that is due.
    fn housekeep(&mut self) {
        if self.housekeeping.as_ref().is_some_and(|h| h.is_finished()) {
            self.collect();
        }
        // One pass at a time; a day closed meanwhile waits for the next call.
        if self.housekeeping.is_some() {
            return;
        }
        let (Some(rotation), Some(due)) = (self.rotation, self.housekeeping_due.take()) else {
            return;
        };
        let dir = self.dir.clone();
        self.housekeeping = Some(std::thread::spawn(move || {
            crate::io::rotate::housekeep(&dir, &ROTATED, due, rotation)
        }));
    }

    fn collect(&mut self) {
        let Some(h) = self.housekeeping.take() else { return };
        // Stamped with the newest row's time: the recorder's clock, not the system's.
        let ts = self.last_ts.unwrap_or_else(Utc::now);
        let done = h.join().unwrap_or_else(|_| crate::io::rotate::Done {
            failed: vec!["housekeeping panicked".into()],
            ..Default::default()
        });
        let name =
            |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        for (from, from_len, to, to_len) in &done.compressed {
            self.notes.push(Event::new(
                ts,
                Source::Record,
                "",
                EventKind::Compressed,
                format!("{} ({from_len} bytes) -> {} ({to_len} bytes)", name(from), name(to)),
            ));
        }
        for p in &done.deleted {
            self.notes.push(Event::new(
                ts,
                Source::Record,
                "",
                EventKind::Deleted,
                format!("{} (older than --retain)", name(p)),
            ));
        }
        for f in &done.failed {
            tracing::warn!("housekeeping: {f}");
            self.notes.push(Event::new(
                ts,
                Source::Record,
                "",
                EventKind::HousekeepingFailed,
                f.clone(),
            ));
        }
    }

    /// Waits for a running compression/retention pass (at the end of a run).
    pub fn finish_housekeeping(&mut self) {
        self.collect();
        // A pass that was due while the last one ran.
        if self.housekeeping_due.is_some() {
            self.housekeep();
            self.collect();
        }
    }

    /// What rotation and housekeeping did since the last call, for events.csv.
    pub fn take_notes(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.notes)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Appends one row per member of `round` (answers, then silent members) and flushes
    /// them to the OS.
    pub fn append_round(&mut self, round: &Round, phase: &str) -> Result<(), RecordError> {
        // A round belongs to the day it started, so that its rows stay in one file.
        self.roll(SAMPLES, round.started.utc.date_naive(), round.started.utc)?;
        let path = &self.samples.path;
        for o in &round.observations {
            let row = sample_row(o, round, &self.run_id, phase);
            self.samples
                .w
                .serialize(row)
                .map_err(|source| RecordError::Csv { path: path.clone(), source })?;
        }
        for s in &round.silent {
            let row = silent_row(s, round, &self.run_id, phase);
            self.samples
                .w
                .serialize(row)
                .map_err(|source| RecordError::Csv { path: path.clone(), source })?;
        }
        self.samples.flush()
    }

    /// Appends events and flushes them.
    pub fn append_events(&mut self, events: &[Event]) -> Result<(), RecordError> {
        if events.is_empty() {
            return Ok(());
        }
        for e in events {
            self.events
                .w
                .write_record(event_record(e, &self.run_id))
                .map_err(|source| RecordError::Csv { path: self.events.path.clone(), source })?;
        }
        self.events.flush()
    }

    /// Appends health.csv rows and flushes them.
    pub fn append_health(&mut self, rows: &[HealthRow]) -> Result<(), RecordError> {
        let Some(first) = rows.first() else { return Ok(()) };
        self.roll(HEALTH, first.ts.date_naive(), first.ts)?;
        for r in rows {
            let row = health_row(r, &self.run_id);
            self.health
                .w
                .serialize(row)
                .map_err(|source| RecordError::Csv { path: self.health.path.clone(), source })?;
        }
        self.health.flush()
    }

    /// Appends canary.csv rows (creating or reopening the file on the first) and flushes.
    pub fn append_canary(&mut self, rows: &[CanaryRow]) -> Result<(), RecordError> {
        if rows.is_empty() {
            return Ok(());
        }
        if self.canary.is_none() {
            let (f, found) = CsvFile::open(self.dir.join(CANARY), &CANARY_HEADER)?;
            if found.torn_bytes > 0 {
                tracing::warn!(
                    "{CANARY}: cut a torn last line of {} byte(s) left by an earlier crash",
                    found.torn_bytes
                );
            }
            self.canary = Some(f);
        }
        let first = rows[0].op.started.utc;
        self.roll(CANARY, first.date_naive(), first)?;
        let Some(f) = self.canary.as_mut() else { return Ok(()) };
        for r in rows {
            let rec = canary_record(r, &self.run_id);
            f.w.write_record(&rec)
                .map_err(|source| RecordError::Csv { path: f.path.clone(), source })?;
        }
        f.flush()
    }

    /// Appends locks.csv rows (creating or reopening the file on the first) and flushes.
    pub fn append_locks(&mut self, rows: &[LockRow]) -> Result<(), RecordError> {
        if rows.is_empty() {
            return Ok(());
        }
        if self.locks.is_none() {
            let (f, found) = CsvFile::open(self.dir.join(LOCKS), &LOCKS_HEADER)?;
            if found.torn_bytes > 0 {
                tracing::warn!(
                    "{LOCKS}: cut a torn last line of {} byte(s) left by an earlier crash",
                    found.torn_bytes
                );
            }
            self.locks = Some(f);
        }
        let first = rows[0].event.at.utc;
        self.roll(LOCKS, first.date_naive(), first)?;
        let Some(f) = self.locks.as_mut() else { return Ok(()) };
        for r in rows {
            f.w.write_record(lock_record(r, &self.run_id))
                .map_err(|source| RecordError::Csv { path: f.path.clone(), source })?;
        }
        f.flush()
    }

    /// Flushes every file and asks the OS to put them on disk.
    pub fn sync(&mut self) -> Result<(), RecordError> {
        self.samples.flush()?;
        self.events.flush()?;
        self.health.flush()?;
        for f in [self.canary.as_mut(), self.locks.as_mut()].into_iter().flatten() {
            f.flush()?;
        }
        let optional = self.canary.as_ref().into_iter().chain(self.locks.as_ref());
        for f in [&self.samples, &self.events, &self.health].into_iter().chain(optional) {
            f.w.get_ref().sync_all().map_err(io_err(&f.path))?;
        }
        Ok(())
    }

    /// Writes `name` in the run directory atomically (temp file, fsync, rename).
    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<PathBuf, RecordError> {
        write_json_atomic(&self.dir.join(name), value)
    }
}

/// Appends `events` to a closed run's events.csv (`recount --write`): rows after the
/// last, none rewritten, synced before this returns.
pub fn append_to_closed_events(
    path: &Path,
    run_id: &str,
    events: &[Event],
) -> Result<(), RecordError> {
    let f = OpenOptions::new().append(true).open(path).map_err(io_err(path))?;
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(f);
    for e in events {
        w.write_record(event_record(e, run_id))
            .map_err(|source| RecordError::Csv { path: path.to_owned(), source })?;
    }
    let f = w.into_inner().map_err(|e| io_err(path)(e.into_error()))?;
    f.sync_all().map_err(io_err(path))
}

/// Writes JSON so that a reader sees the old file or the new one, never half of one.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<PathBuf, RecordError> {
    let mut body = serde_json::to_vec_pretty(value)
        .map_err(|e| RecordError::Io { path: path.to_owned(), source: e.into() })?;
    body.push(b'\n');
    write_atomic(path, &body)?;
    Ok(path.to_owned())
}

/// Temp file beside `path`, fsync, rename over `path`, fsync the directory.
pub fn write_atomic(path: &Path, body: &[u8]) -> Result<(), RecordError> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(body).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all(); // best effort: not every filesystem syncs directories
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_last_line_is_cut_and_appending_continues() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join(EVENTS);
        let header = EVENTS_HEADER.join(",");
        fs::write(
            &p,
            format!(
                "{header}\n2026-01-01T00:00:00.000Z,r1,leaderwatch,m0,back,\n2026-01-01T00:00:01.0"
            ),
        )
        .expect("write");
        let (mut f, found) = CsvFile::open(p.clone(), &EVENTS_HEADER).expect("reopen");
        assert_eq!(found.torn_bytes, "2026-01-01T00:00:01.0".len() as u64);
        f.w.write_record(["t", "r2", "s", "m", "k", "d"]).expect("write");
        f.flush().expect("flush");
        let text = fs::read_to_string(&p).expect("read");
        assert_eq!(text.lines().count(), 3);
        assert!(text.ends_with("t,r2,s,m,k,d\n"));
    }

    #[test]
    fn another_header_is_refused_not_overwritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join(EVENTS);
        fs::write(&p, "a,b,c\n1,2,3\n").expect("write");
        assert!(matches!(
            CsvFile::open(p.clone(), &EVENTS_HEADER),
            Err(RecordError::Schema { .. })
        ));
        assert_eq!(fs::read_to_string(&p).expect("read"), "a,b,c\n1,2,3\n");
    }

    /// Reopening no longer upgrades the layout before the election columns (#35): the
    /// run refuses the directory and leaves the file as it was.
    #[test]
    fn an_events_csv_of_the_old_layout_is_refused_not_upgraded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join(EVENTS);
        let old = "ts,run_id,source,member,kind,detail\n2026-11-30T10:00:00.000Z,old,leaderwatch,,run_started,\n";
        fs::write(&p, old).expect("write");
        assert!(matches!(RunDir::open(dir.path(), "new"), Err(RecordError::Schema { .. })));
        assert_eq!(fs::read_to_string(&p).expect("read"), old);
    }
}
