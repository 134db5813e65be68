//! The one recorder of `sample` and the sitting alike: each round to samples.csv (under
//! the open window's name), what changed to events.csv (member state, leader transitions,
//! every election with its cause), member health to health.csv every
//! [`HEALTH_EVERY`] and at each window boundary, the windows that tile the run, and the
//! etcd versions seen. Every row is flushed as it is written, so a crash or a signal
//! loses nothing already measured.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::analysis::attribution::{self, EVIDENCE_WAIT, Elections};
use crate::analysis::client::WriteTrail;
use crate::analysis::events::Tracker;
use crate::analysis::health::Fold;
use crate::analysis::windows::Windows;
use crate::io::exporter::Exporter;
use crate::io::record::{CanaryRow, HealthRow, RecordError, RunDir};
use crate::model::baseline::{ElectionDetail, WindowName, WindowRecord};
use crate::model::canary::{Kind, Op};
use crate::model::clock::{Clock, Stamp};
use crate::model::counts::Counts;
use crate::model::event::{ElectionColumns, Event};
use crate::model::member::MemberName;
use crate::model::observation::Round;

/// The cadence of health.csv (window boundaries add rows of their own).
pub const HEALTH_EVERY: Duration = Duration::from_secs(10);

/// Events kept as evidence for causes: enough for any horizon a user sets, bounded so
/// that a month of `sample` does not grow.
const EVIDENCE_CAP: usize = 20_000;

/// health.csv's open interval: each member's fold since `since`.
#[derive(Default)]
struct Series {
    folds: BTreeMap<MemberName, Fold>,
    since: Option<Stamp>,
    last: Option<Stamp>,
}

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
    elections: Elections,
    /// Recent events, where causes are looked for.
    evidence: VecDeque<Event>,
    /// Elections with their causes, by window name.
    details: Vec<(WindowName, ElectionDetail)>,
    horizon: Duration,
    series: Series,
    /// The canary's recent successful writes, once it runs, for each election's cost.
    canary: Option<CanaryWrites>,
    /// `--metrics-addr`: fed what is recorded, as it is recorded.
    exporter: Option<Exporter>,
}

/// The canary's cadence and its recent successful writes: all of them (the cluster) and
/// those a one-in-flight client would have sent.
struct CanaryWrites {
    cadence_s: f64,
    all: WriteTrail,
    one_in_flight: WriteTrail,
}

impl Recorder {
    /// Opens (or reopens) `out`; a torn last line left by a crash is cut and said so in
    /// events.csv. `first_window` names the first window (`sample`, `at_rest`); `members`
    /// is the cluster size (a quorum is a majority of it); causes of elections are looked
    /// for `horizon` back.
    pub fn open(
        out: &Path,
        run_id: &str,
        clock: &dyn Clock,
        first_window: WindowName,
        members: usize,
        horizon: Duration,
    ) -> Result<Self, RecordError> {
        let dir = RunDir::open(out, run_id)?;
        let now = clock.now();
        let mut startup = Vec::new();
        let [(_, s), (_, e), _] = dir.reopened.clone();
        if s.rows > 0 || e.rows > 0 {
            startup.push(Event::new(
                now,
                "record",
                "",
                "reopened",
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
                    "record",
                    "",
                    "repaired",
                    format!("{file}: cut a torn last line of {} byte(s)", r.torn_bytes),
                ));
            }
        }
        let mut rec = Recorder {
            dir,
            tracker: Tracker::new(),
            windows: Windows::new(first_window),
            versions: Vec::new(),
            rounds: 0,
            elections: Elections::new(members),
            evidence: VecDeque::new(),
            details: Vec::new(),
            horizon,
            series: Series::default(),
            canary: None,
            exporter: None,
        };
        rec.events(&startup)?;
        Ok(rec)
    }

    pub fn run_id(&self) -> &str {
        self.dir.run_id()
    }

    /// `sample`'s daily files (record.rs, rotate.rs), from `now` on.
    pub fn rotate_daily(
        &mut self,
        rotation: crate::io::rotate::Rotation,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), RecordError> {
        self.dir.rotate_daily(rotation, now)?;
        self.notes()
    }

    /// Writes what rotation and housekeeping did to events.csv.
    fn notes(&mut self) -> Result<(), RecordError> {
        let notes = self.dir.take_notes();
        self.events(&notes)
    }

    /// From now on, every round, health interval and canary op also goes to `e`; the
    /// address it serves on goes to events.csv.
    pub fn export_to(
        &mut self,
        e: Exporter,
        bound: std::net::SocketAddr,
        at: Stamp,
    ) -> Result<(), RecordError> {
        self.exporter = Some(e);
        self.event(Event::stamped(
            at,
            "leaderwatch",
            "",
            "metrics_serving",
            format!("http://{bound}/metrics"),
        ))
    }

    /// Rounds recorded so far in this run.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// Records one round in the open window: its rows, then what it changed.
    pub fn round(&mut self, r: &Round) -> Result<(), RecordError> {
        self.dir.append_round(r, self.windows.current().as_str())?;
        self.notes()?;
        self.rounds += 1;
        let mut events: Vec<Event> =
            r.observations.iter().flat_map(|o| self.tracker.observe(o)).collect();
        events.extend(r.silent.iter().filter_map(|s| self.tracker.silent(s)));
        let transitions = self.windows.push(r);
        if let Some(e) = self.exporter.as_mut() {
            e.round(r, transitions.len(), self.windows.max_term());
        }
        for t in transitions {
            events.push(Event::new(
                t.ts,
                "leaderwatch",
                "",
                "leader_transition",
                format!("{} -> {} (round {})", t.from, t.to, t.round),
            ));
        }
        for v in r.observations.iter().filter_map(|o| o.status.ok().map(|s| s.version.clone())) {
            if !self.versions.contains(&v) {
                self.versions.push(v);
            }
        }
        self.events(&events)?;
        // Health: the rows of an interval that is due.
        for o in &r.observations {
            if let Some(m) = o.metrics.ok() {
                self.series.folds.entry(o.member.clone()).or_default().push(m);
            }
        }
        self.series.since.get_or_insert(r.started);
        self.series.last = Some(r.started);
        if self.series.since.is_some_and(|s| s.secs_to(&r.started) >= HEALTH_EVERY.as_secs_f64()) {
            self.health_rows()?;
        }
        // Elections: seen now, attributed once late evidence has had time to arrive.
        self.elections.push(r, self.windows.current());
        self.attribute(&r.started, false)
    }

    /// Writes health.csv rows for the interval up to the last round, and starts the next.
    fn health_rows(&mut self) -> Result<(), RecordError> {
        let (Some(since), Some(last)) = (self.series.since, self.series.last) else {
            return Ok(());
        };
        if since.secs_to(&last) <= 0.0 {
            return Ok(());
        }
        let el = &self.elections;
        let peers = |hex: &str| el.peer_name(hex);
        let window = self.windows.current().as_str().to_owned();
        let rows: Vec<HealthRow> = self
            .series
            .folds
            .iter()
            .map(|(n, f)| HealthRow {
                ts: last.utc,
                window: window.clone(),
                member: n.0.clone(),
                interval_start: since.utc,
                interval_s: since.secs_to(&last),
                health: f.figures(peers),
            })
            .collect();
        self.series.folds =
            self.series.folds.iter().map(|(n, f)| (n.clone(), f.continue_from())).collect();
        self.series.since = Some(last);
        if let Some(e) = self.exporter.as_mut() {
            e.health(&rows);
        }
        self.dir.append_health(&rows)
    }

    /// Chooses the cause of each election that is ready (all of them when `force`) and
    /// writes its `election` row.
    fn attribute(&mut self, now: &Stamp, force: bool) -> Result<(), RecordError> {
        let ready = self.elections.ready(now, force);
        if ready.is_empty() {
            return Ok(());
        }
        let evidence = self.evidence.make_contiguous();
        let mut rows = Vec::new();
        for p in ready {
            let mut d = self.elections.detail(&p, evidence, self.horizon);
            if let Some(c) = &self.canary {
                d.write_unavailable_s = c.all.unavailable_over(p.after, p.observed, c.cadence_s);
                d.write_unavailable_one_in_flight_s =
                    c.one_in_flight.unavailable_over(p.after, p.observed, c.cadence_s);
            }
            let pointer = d.cause_event.as_ref().map_or(String::new(), |e| {
                format!(" ({} {} {})", e.source, e.kind, crate::model::clock::ts(e.ts))
            });
            let writes = match (d.write_unavailable_s, d.write_unavailable_one_in_flight_s) {
                (Some(w), Some(one)) => {
                    format!(", writes unavailable {w:.3} s (one op in flight {one:.3} s)")
                }
                (Some(w), None) => format!(", writes unavailable {w:.3} s"),
                _ => String::new(),
            };
            let detail = format!(
                "term {} -> {}, leader {} -> {}, leaderless {}{writes}; cause {}{pointer}",
                d.term_from,
                d.term_to,
                d.old_leader.as_deref().unwrap_or("unknown"),
                d.new_leader.as_deref().unwrap_or("unknown"),
                d.leaderless_s.map_or("unknown".to_owned(), |s| format!("{s:.3} s")),
                d.cause
            );
            let mut row = Event::stamped(
                p.observed,
                "leaderwatch",
                d.old_leader.as_deref().unwrap_or(""),
                "election",
                detail,
            );
            row.election = Some(ElectionColumns {
                term_from: d.term_from,
                term_to: d.term_to,
                cause: d.cause,
                cause_ts: d.cause_event.as_ref().map(|e| e.ts),
            });
            rows.push(row);
            self.details.push((p.window, d));
        }
        self.events(&rows)
    }

    /// The canary starts now, one op of each kind every `cadence`: its intervals start here.
    pub fn canary_started(&mut self, at: Stamp, cadence: Duration) {
        self.canary = Some(CanaryWrites {
            cadence_s: cadence.as_secs_f64(),
            all: WriteTrail::new(at),
            one_in_flight: WriteTrail::new(at),
        });
        self.windows.canary_started(at, cadence.as_secs_f64());
    }

    /// The canary's finished ops: canary.csv rows, the open window's client figures, and
    /// the successful writes kept for the elections' cost.
    pub fn canary(&mut self, ops: &[Op]) -> Result<(), RecordError> {
        if ops.is_empty() {
            return Ok(());
        }
        let window = self.windows.current().as_str().to_owned();
        let rows: Vec<CanaryRow> = ops
            .iter()
            .map(|op| CanaryRow {
                op: op.clone(),
                window: window.clone(),
                member: match op.member_id {
                    0 => String::new(),
                    id => self.elections.name(id).map_or_else(|| format!("{id:x}"), str::to_owned),
                },
            })
            .collect();
        self.dir.append_canary(&rows)?;
        if let Some(e) = self.exporter.as_mut() {
            e.canary(ops);
        }
        let keep = (self.horizon + EVIDENCE_WAIT + Duration::from_secs(60)).as_secs_f64();
        for op in ops {
            self.windows.push_op(op);
            if let (true, Kind::Write, Some(c)) = (op.ok, op.kind, self.canary.as_mut()) {
                c.all.push(op.done);
                if op.one_in_flight {
                    c.one_in_flight.push(op.done);
                }
            }
        }
        if let Some(c) = self.canary.as_mut() {
            c.all.trim(keep);
            c.one_in_flight.trim(keep);
        }
        Ok(())
    }

    /// Appends events (logged as they are written); recent ones are kept as evidence.
    pub fn events(&mut self, events: &[Event]) -> Result<(), RecordError> {
        for e in events {
            tracing::info!(source = %e.source, member = %e.member, kind = %e.kind, "{}", e.detail);
        }
        self.dir.append_events(events)?;
        // Keep what can name a cause: older than horizon + wait it can no longer.
        let keep =
            chrono::Duration::from_std(self.horizon + EVIDENCE_WAIT + Duration::from_secs(60))
                .unwrap_or(chrono::Duration::MAX);
        let bound = |e: &Event| {
            attribution::OPEN.contains(&e.kind.as_str())
                || attribution::CLOSE.contains(&e.kind.as_str())
        };
        for e in
            events.iter().filter(|e| (!e.member.is_empty() || bound(e)) && e.kind != "election")
        {
            self.evidence.push_back(e.clone());
        }
        if let Some(newest) = self.evidence.iter().map(|e| e.ts).max() {
            while self.evidence.front().is_some_and(|e| newest - e.ts > keep)
                || self.evidence.len() > EVIDENCE_CAP
            {
                self.evidence.pop_front();
            }
        }
        Ok(())
    }

    pub fn event(&mut self, e: Event) -> Result<(), RecordError> {
        self.events(std::slice::from_ref(&e))
    }

    /// Closes the open window and opens `next` at its last round (health.csv gets the
    /// closed window's last interval).
    pub fn next_window(&mut self, full_length: bool, next: WindowName) -> Result<(), RecordError> {
        self.health_rows()?;
        let el = &self.elections;
        let peers = |hex: &str| el.peer_name(hex);
        self.windows.next(full_length, next, &peers);
        Ok(())
    }

    /// Seconds the open window spans so far (first to last round, monotonic).
    pub fn open_span_s(&self) -> f64 {
        self.windows.open_span_s()
    }

    /// The open window's counts so far.
    pub fn counts(&self) -> Counts {
        self.windows.counts()
    }

    /// Closes the open window, gives every election seen its cause; returns every window
    /// of the run, in order.
    pub fn close_windows(&mut self, full_length: bool) -> Result<Vec<WindowRecord>, RecordError> {
        self.health_rows()?;
        if let Some(last) = self.series.last {
            self.attribute(&last, true)?;
        }
        let el = &self.elections;
        let peers = |hex: &str| el.peer_name(hex);
        let mut windows = std::mem::replace(&mut self.windows, Windows::new(WindowName::Sample))
            .finish(full_length, &peers);
        for (name, d) in &self.details {
            if let Some(w) = windows.iter_mut().rev().find(|w| w.name == *name) {
                w.elections_detail.push(d.clone());
            }
        }
        Ok(windows)
    }

    /// Every election attributed so far, with the window it is in.
    pub fn elections(&self) -> &[(WindowName, ElectionDetail)] {
        &self.details
    }

    /// The open window's client figures so far.
    pub fn client(&self) -> Option<crate::model::canary::ClientFigures> {
        self.windows.client()
    }

    /// The open window's member health so far.
    pub fn health(&self) -> BTreeMap<String, crate::model::baseline::MemberHealth> {
        let el = &self.elections;
        let peers = |hex: &str| el.peer_name(hex);
        self.windows.health(&peers)
    }

    /// etcd versions the Status RPC reported, in the order first seen.
    pub fn versions(&self) -> &[String] {
        &self.versions
    }

    /// Flushes both CSV files to disk, then writes `name` atomically.
    pub fn write_json<T: Serialize>(
        &mut self,
        name: &str,
        value: &T,
    ) -> Result<PathBuf, RecordError> {
        self.dir.finish_housekeeping();
        self.notes()?;
        self.dir.sync()?;
        self.dir.write_json(name, value)
    }
}
