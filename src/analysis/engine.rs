//! The engine: everything a run learns, from what it sees. Rounds, events (Kubernetes,
//! the disruptor, leaderwatch's own) and canary ops go in; out come the rows to write
//! (events with member state, leader transitions and every election with its cause;
//! health intervals; canary rows), the windows that tile the run, and the figures the
//! commands print. No I/O and no clock: time comes with the data. `sample` and the
//! trial feed it through one loop (src/ops/drive.rs), which hands what comes out to the
//! recorder (src/io/recorder.rs).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::analysis::attribution::{self, EVIDENCE_WAIT, Elections, Pending};
use crate::analysis::client::WriteTrail;
use crate::analysis::health::Fold;
use crate::analysis::lock::SafetyCheck;
use crate::analysis::member_changes::Tracker;
use crate::analysis::windows::Windows;
use crate::model::baseline::HealthRow;
use crate::model::baseline::{ElectionDetail, EventRef, MemberHealth, WindowName, WindowRecord};
use crate::model::canary::CanaryRow;
use crate::model::canary::{ClientFigures, Kind, Op};
use crate::model::clock::Stamp;
use crate::model::counts::Counts;
use crate::model::event::{ElectionColumns, Event, EventKind, Source};
use crate::model::lock::LockRow;
use crate::model::lock::{LockEvent, LockEventKind, LockSafety};
use crate::model::member::MemberName;
use crate::model::observation::Round;

/// The cadence of health.csv (window boundaries add rows of their own).
pub const HEALTH_EVERY: Duration = Duration::from_secs(10);

/// How long after an election a row that comes late may still revise its cause: a lost
/// node's lease goes stale 20 s after the loss and NotReady comes 40-50 s after it; a
/// `/metrics` page of a stalled member comes when it answers again.
pub const REVISE_FOR: Duration = Duration::from_secs(120);

/// The rows that come late by their nature and may change a cause already given: a lost
/// node's (20-50 s after the loss) and a stalled member's slow fsyncs (read when it answers
/// again). Other rows do not revise: a member back from a 60 s node loss answers slowly at
/// first, and `cpu` (attribution's `back_slow`) would replace the `unreachable` it was
/// (the lab, 2026-12-08).
const LATE_BY_DESIGN: [EventKind; 3] =
    [EventKind::NodeLeaseStale, EventKind::NodeNotReady, EventKind::SlowDisk];

/// Events kept as evidence for causes: enough for any horizon a user sets, bounded so
/// that a month of `sample` does not grow.
const EVIDENCE_CAP: usize = 20_000;

/// The events.csv and health.csv rows the engine made, to write in the order they were made.
#[derive(Debug, Default)]
pub struct ToWrite {
    pub events: Vec<Event>,
    pub health: Vec<HealthRow>,
}

/// What one round made: its rows, and what the exporter shows of it.
#[derive(Debug)]
pub struct RoundOutput {
    pub rows: ToWrite,
    pub export: Export,
}

/// What the exporter shows of one round, counted here (the exporter counts nothing).
#[derive(Debug, Default, PartialEq)]
pub struct Export {
    /// Elections this round revealed: how far it raised the highest raft term seen in the
    /// run (the windows' count, src/analysis/counts.rs).
    pub elections: u64,
    /// Leader transitions this round completed.
    pub transitions: usize,
    /// The highest raft term a member reported in this round.
    pub term: Option<u64>,
    /// Each member that answered: whether it says it leads (its Status, else its
    /// `/metrics`' `etcd_server_is_leader`).
    pub leads: Vec<(MemberName, bool)>,
}

/// health.csv's open interval: each member's fold since `since`.
#[derive(Default)]
struct Series {
    folds: BTreeMap<MemberName, Fold>,
    since: Option<Stamp>,
    last: Option<Stamp>,
}

/// The canary's cadence and its recent successful writes: all of them (the cluster) and
/// those a one-in-flight client would have sent.
struct CanaryWrites {
    cadence_s: f64,
    all: WriteTrail,
    one_in_flight: WriteTrail,
}

/// The lock canary's grants (for each election's cost) and the run's safety check.
struct LockGrants {
    hold_s: f64,
    trail: WriteTrail,
    safety: SafetyCheck,
}

/// Whether a member says it leads: its Status (its id is the leader's), else its
/// `/metrics` (`etcd_server_is_leader`); a member that said neither does not.
fn leads(o: &crate::model::observation::Observation) -> bool {
    o.status
        .ok()
        .map(|s| s.member_id != 0 && s.member_id == s.leader_id)
        .or_else(|| o.metrics.ok().and_then(|m| m.is_leader))
        .unwrap_or(false)
}

pub struct Engine {
    tracker: Tracker,
    windows: Windows,
    versions: Vec<String>,
    rounds: u64,
    elections: Elections,
    /// Recent events, where causes are looked for.
    evidence: VecDeque<Event>,
    /// Elections with their causes, by window name.
    details: Vec<(WindowName, ElectionDetail)>,
    /// Elections attributed in the last [`REVISE_FOR`], with their place in `details`:
    /// a row that comes later may still change their cause.
    recent: Vec<(Pending, usize)>,
    /// Evidence came since the recent causes were last checked.
    fresh: bool,
    /// How far before an election its cause is looked for.
    horizon: Duration,
    series: Series,
    /// The canary's recent successful writes, once it runs, for each election's cost.
    canary: Option<CanaryWrites>,
    /// The lock canary's, once it runs.
    lock: Option<LockGrants>,
}

impl Engine {
    /// `first_window` names the first window (`sample`, `at_rest`); `members` is the
    /// cluster size (a quorum is a majority of it); causes of elections are looked for
    /// `horizon` back.
    pub fn new(first_window: WindowName, members: usize, horizon: Duration) -> Self {
        Engine {
            tracker: Tracker::new(),
            windows: Windows::new(first_window),
            versions: Vec::new(),
            rounds: 0,
            elections: Elections::new(members),
            evidence: VecDeque::new(),
            details: Vec::new(),
            recent: Vec::new(),
            fresh: false,
            horizon,
            series: Series::default(),
            canary: None,
            lock: None,
        }
    }

    /// The open window: the one the next round's samples belong to.
    pub fn window(&self) -> WindowName {
        self.windows.current()
    }

    /// Rounds seen so far in this run.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// One round in the open window: what it changed, the health interval if one is due,
    /// and the elections whose late evidence has had time to arrive.
    pub fn round(&mut self, r: &Round) -> RoundOutput {
        self.rounds += 1;
        let mut rows = ToWrite::default();
        let mut events: Vec<Event> =
            r.observations.iter().flat_map(|o| self.tracker.observe(o)).collect();
        events.extend(r.silent.iter().filter_map(|s| self.tracker.silent(s)));
        crate::analysis::member_changes::name_peers(&mut events, |id| self.elections.peer_name(id));
        let (transitions, elections) = self.windows.push(r);
        for t in &transitions {
            events.push(Event::new(
                t.ts,
                Source::Leaderwatch,
                "",
                EventKind::LeaderTransition,
                format!("{} -> {} (round {})", t.from, t.to, t.round),
            ));
        }
        for v in r.observations.iter().filter_map(|o| o.status.ok().map(|s| s.version.clone())) {
            if !self.versions.contains(&v) {
                self.versions.push(v);
            }
        }
        self.keep(&events);
        rows.events = events;
        for o in &r.observations {
            if let Some(m) = o.metrics.ok() {
                self.series.folds.entry(o.member.clone()).or_default().push(m);
            }
        }
        self.series.since.get_or_insert(r.started);
        self.series.last = Some(r.started);
        if self.series.since.is_some_and(|s| s.secs_to(&r.started) >= HEALTH_EVERY.as_secs_f64()) {
            rows.health = self.health_rows();
        }
        self.elections.push(r, self.windows.current());
        rows.events.extend(self.attribute(&r.started, false));
        rows.events.extend(self.revise(&r.started));
        let export = Export {
            elections,
            transitions: transitions.len(),
            term: r.observations.iter().filter_map(|o| o.status.ok().map(|s| s.raft_term)).max(),
            leads: r.observations.iter().map(|o| (o.member.clone(), leads(o))).collect(),
        };
        RoundOutput { rows, export }
    }

    /// Events written beside the rounds (the watchers', the disruptor's, leaderwatch's
    /// own): recent ones are kept as evidence for causes.
    pub fn keep(&mut self, events: &[Event]) {
        // Long enough that a revision still finds every row the first answer rested on.
        let keep = self.horizon + EVIDENCE_WAIT + REVISE_FOR + Duration::from_secs(60);
        let keep = chrono::Duration::from_std(keep).unwrap_or(chrono::Duration::MAX);
        let bound =
            |e: &Event| attribution::OPEN.contains(&e.kind) || attribution::CLOSE.contains(&e.kind);
        for e in events.iter().filter(|e| {
            (!e.member.is_empty() || bound(e))
                && !matches!(e.kind, EventKind::Election | EventKind::ElectionRevised)
        }) {
            self.evidence.push_back(e.clone());
            self.fresh |= LATE_BY_DESIGN.contains(&e.kind);
        }
        if let Some(newest) = self.evidence.iter().map(|e| e.ts).max() {
            while self.evidence.front().is_some_and(|e| newest - e.ts > keep)
                || self.evidence.len() > EVIDENCE_CAP
            {
                self.evidence.pop_front();
            }
        }
    }

    /// health.csv rows for the interval up to the last round; the next starts there.
    fn health_rows(&mut self) -> Vec<HealthRow> {
        let (Some(since), Some(last)) = (self.series.since, self.series.last) else {
            return Vec::new();
        };
        if since.secs_to(&last) <= 0.0 {
            return Vec::new();
        }
        let el = &self.elections;
        let peers = |hex: &str| el.peer_name(hex);
        let window = self.windows.current().as_str().to_owned();
        let rows = self
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
        rows
    }

    /// The cause of each election that is ready (all of them when `force`): its
    /// `election` row.
    fn attribute(&mut self, now: &Stamp, force: bool) -> Vec<Event> {
        let ready = self.elections.ready(now, force);
        let evidence = self.evidence.make_contiguous();
        let mut rows = Vec::new();
        for p in ready {
            let mut d = self.elections.detail(&p, evidence, self.horizon);
            if let Some(c) = &self.canary {
                d.write_unavailable_s = c.all.unavailable_over(p.after, p.observed, c.cadence_s);
                d.write_unavailable_one_in_flight_s =
                    c.one_in_flight.unavailable_over(p.after, p.observed, c.cadence_s);
            }
            if let Some(l) = &self.lock {
                // Grant to grant, less the hold (one hold apart is normal).
                d.lock_unavailable_s = l.trail.unavailable_over(p.after, p.observed, l.hold_s);
            }
            rows.push(election_row(p.observed, &d));
            self.details.push((p.window, d));
            self.recent.push((p, self.details.len() - 1));
        }
        rows
    }

    /// The recent elections' causes found again with the evidence that came since: each
    /// that changed is changed in place (baseline.json, summary.json) and gets an
    /// `election_revised` row saying so; the `election` row stays as written.
    fn revise(&mut self, now: &Stamp) -> Vec<Event> {
        self.recent.retain(|(p, _)| p.observed.secs_to(now) <= REVISE_FOR.as_secs_f64());
        if !std::mem::take(&mut self.fresh) {
            return Vec::new();
        }
        let evidence = self.evidence.make_contiguous();
        let mut rows = Vec::new();
        for (p, i) in &self.recent {
            let again = self.elections.detail(p, evidence, self.horizon);
            let Some((_, d)) = self.details.get_mut(*i) else { continue };
            let same_row = |a: &Option<EventRef>, b: &Option<EventRef>| match (a, b) {
                (Some(a), Some(b)) => (a.kind, &a.member, a.ts) == (b.kind, &b.member, b.ts),
                (a, b) => a.is_none() && b.is_none(),
            };
            if again.cause == d.cause && same_row(&again.cause_event, &d.cause_event) {
                continue;
            }
            let was = d.cause;
            d.cause = again.cause;
            d.cause_event = again.cause_event;
            let mut row = election_row(p.observed, d);
            row.kind = EventKind::ElectionRevised;
            row.detail = format!(
                "revised: cause {was} -> {} (a row that came after the cause was given); {}",
                d.cause, row.detail
            );
            rows.push(row);
        }
        rows
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

    /// The canary's finished ops: canary.csv rows; the open window's client figures and
    /// the successful writes kept for the elections' cost take them in.
    pub fn canary(&mut self, ops: &[Op]) -> Vec<CanaryRow> {
        let window = self.windows.current().as_str().to_owned();
        let rows = ops
            .iter()
            .map(|op| CanaryRow {
                op: op.clone(),
                window: window.clone(),
                member: self.member(op.member_id),
            })
            .collect();
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
        rows
    }

    /// The lock canary starts now, each holder holding `hold`: its first gap starts here.
    pub fn lock_started(&mut self, at: Stamp, hold: Duration) {
        let hold_s = hold.as_secs_f64();
        self.lock =
            Some(LockGrants { hold_s, trail: WriteTrail::new(at), safety: SafetyCheck::default() });
        self.windows.lock_started(hold_s);
    }

    /// The lock canary's events: locks.csv rows; the open window's lock figures, the
    /// grants kept for the elections' cost and the safety check take them in.
    pub fn lock(&mut self, events: &[LockEvent]) -> Vec<LockRow> {
        let window = self.windows.current().as_str().to_owned();
        let rows = events
            .iter()
            .map(|e| LockRow {
                event: e.clone(),
                window: window.clone(),
                member: self.member(e.member_id),
            })
            .collect();
        let keep = (self.horizon + EVIDENCE_WAIT + Duration::from_secs(60)).as_secs_f64();
        for e in events {
            self.windows.push_lock(e);
            if let Some(l) = self.lock.as_mut() {
                if e.kind == LockEventKind::Granted {
                    l.trail.push(e.at);
                }
                l.safety.push(e);
            }
        }
        if let Some(l) = self.lock.as_mut() {
            l.trail.trim(keep);
        }
        rows
    }

    /// The lock canary's safety verdict over the run so far; `None` when it never ran.
    pub fn lock_safety(&self) -> Option<LockSafety> {
        self.lock.as_ref().map(|l| l.safety.verdict())
    }

    /// A member's name from its id: its hex id if the name is not known, empty for 0.
    fn member(&self, id: u64) -> String {
        match id {
            0 => String::new(),
            id => self.elections.name(id).map_or_else(|| format!("{id:x}"), str::to_owned),
        }
    }

    /// Closes the open window and opens `next` at its last round; the closed window's
    /// last health interval comes back.
    pub fn next_window(&mut self, full_length: bool, next: WindowName) -> Vec<HealthRow> {
        let rows = self.health_rows();
        let el = &self.elections;
        let peers = |hex: &str| el.peer_name(hex);
        self.windows.next(full_length, next, &peers);
        rows
    }

    /// Seconds the open window spans so far (first to last round, monotonic).
    pub fn open_span_s(&self) -> f64 {
        self.windows.open_span_s()
    }

    /// The open window's counts so far.
    pub fn counts(&self) -> Counts {
        self.windows.counts()
    }

    /// Closes the open window and gives every election seen its cause: the last rows, and
    /// every window of the run, in order.
    pub fn close_windows(&mut self, full_length: bool) -> (ToWrite, Vec<WindowRecord>) {
        let health = self.health_rows();
        let events = match self.series.last {
            Some(last) => {
                let mut rows = self.attribute(&last, true);
                rows.extend(self.revise(&last));
                rows
            }
            None => Vec::new(),
        };
        let el = &self.elections;
        let peers = |hex: &str| el.peer_name(hex);
        let mut windows = std::mem::replace(&mut self.windows, Windows::new(WindowName::Sample))
            .finish(full_length, &peers);
        for (name, d) in &self.details {
            if let Some(w) = windows.iter_mut().rev().find(|w| w.name == *name) {
                w.elections_detail.push(d.clone());
            }
        }
        (ToWrite { events, health }, windows)
    }

    /// Every election attributed so far, with the window it is in.
    pub fn elections(&self) -> &[(WindowName, ElectionDetail)] {
        &self.details
    }

    /// The open window's client figures so far.
    pub fn client(&self) -> Option<ClientFigures> {
        self.windows.client()
    }

    /// The open window's member health so far.
    pub fn health(&self) -> BTreeMap<String, MemberHealth> {
        let el = &self.elections;
        let peers = |hex: &str| el.peer_name(hex);
        self.windows.health(&peers)
    }

    /// The highest raft term seen so far in the run.
    pub fn max_term(&self) -> Option<u64> {
        self.windows.max_term()
    }

    /// From `at` on, every successful canary write is kept (for
    /// [`Engine::first_write_ok_after`]), not only the recent ones.
    pub fn hold_writes_from(&mut self, at: Stamp) {
        if let Some(c) = self.canary.as_mut() {
            c.all.hold_from(at);
        }
    }

    /// The canary's first successful write completed after `t` (held by
    /// [`Engine::hold_writes_from`]): when a lock could be granted again.
    pub fn first_write_ok_after(&self, t: Stamp) -> Option<Stamp> {
        self.canary.as_ref().and_then(|c| c.all.first_after(t))
    }

    /// etcd versions the Status RPC reported, in the order first seen.
    pub fn versions(&self) -> &[String] {
        &self.versions
    }
}

/// An election's `election` row: its figures in words, and in columns of their own.
/// An election's events.csv row: its figures in words for people, its terms and cause in
/// columns for readers.
pub fn election_row(observed: Stamp, d: &ElectionDetail) -> Event {
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
        observed,
        Source::Leaderwatch,
        d.old_leader.as_deref().unwrap_or(""),
        EventKind::Election,
        detail,
    );
    row.election = Some(ElectionColumns {
        term_from: d.term_from,
        term_to: d.term_to,
        cause: d.cause,
        cause_ts: d.cause_event.as_ref().map(|e| e.ts),
    });
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::Cause;
    use crate::model::metrics::MemberMetrics;
    use crate::model::observation::{Health, Observation, Part, Status};
    use chrono::{TimeZone, Utc};

    /// A stamp `s` seconds after a fixed instant, on both clocks.
    fn at(base: tokio::time::Instant, s: f64) -> Stamp {
        let t0 = Utc.with_ymd_and_hms(2026, 12, 2, 12, 0, 0).single().expect("instant");
        let d = Duration::from_secs_f64(s);
        Stamp { utc: t0 + d, mono: base + d }
    }

    /// Round `i` at second `i`: three members agree that `leader` (id) leads at `term`,
    /// each having seen `seen` leader changes.
    fn round(base: tokio::time::Instant, i: u64, leader: u64, term: u64, seen: f64) -> Round {
        let started = at(base, i as f64);
        let observations = (0..3)
            .map(|m| {
                let metrics = MemberMetrics {
                    leader_changes_seen_total: Some(seen),
                    process_start_time: Some(100.0),
                    ..MemberMetrics::default()
                };
                Observation::new(
                    MemberName(format!("m{m}")),
                    format!("http://m{m}:2379"),
                    started,
                    Part::Ok { value: metrics, ms: 1.0 },
                    Part::Ok { value: Health { healthy: true, reason: String::new() }, ms: 1.0 },
                    Part::Ok { value: Status::of(m + 1, leader, term), ms: 1.0 },
                )
            })
            .collect();
        Round { index: i, started, observations, silent: vec![] }
    }

    #[test]
    fn an_election_gets_its_row_with_a_cause_once_its_evidence_had_time_to_arrive() {
        let base = tokio::time::Instant::now();
        let mut e = Engine::new(WindowName::Sample, 3, Duration::from_secs(30));
        let mut elections = Vec::new();
        for i in 0..60 {
            let (leader, term, seen) = if i < 20 { (1, 2, 1.0) } else { (2, 3, 2.0) };
            if i == 19 {
                e.keep(&[Event::new(
                    at(base, 19.5).utc,
                    Source::Local,
                    "m0",
                    EventKind::SigkillSent,
                    "",
                )]);
            }
            let made = e.round(&round(base, i, leader, term, seen));
            elections
                .extend(made.rows.events.into_iter().filter(|ev| ev.kind == EventKind::Election));
        }
        assert_eq!(e.rounds(), 60);
        let [row] = &elections[..] else { panic!("one election row: {elections:?}") };
        let cols = row.election.as_ref().expect("election columns");
        assert_eq!((cols.term_from, cols.term_to), (2, 3));
        assert!(row.detail.contains("leader m0 -> m1"), "{}", row.detail);
        assert!(row.detail.contains("sigkill_sent"), "the kill is its cause: {}", row.detail);
        let (rows, windows) = e.close_windows(true);
        assert!(rows.events.is_empty(), "nothing left to attribute: {:?}", rows.events);
        let [w] = &windows[..] else { panic!("one window") };
        assert_eq!((w.elections, w.elections_detail.len()), (Some(1), 1));
    }

    /// A lost node: the election is given a cause from what came first (here nothing:
    /// `unexplained`), and when the node's stale lease comes 40 s later, stamped with its
    /// last renewal before the election, the cause is revised in place and an
    /// `election_revised` row says so; the `election` row stays as written. A row that
    /// comes after REVISE_FOR changes nothing.
    #[test]
    fn a_late_node_row_revises_the_cause_with_a_row_of_its_own() {
        let base = tokio::time::Instant::now();
        let mut e = Engine::new(WindowName::Sample, 3, Duration::from_secs(30));
        let mut rows = Vec::new();
        let lease = |s: f64, member: &str| {
            Event::new(
                at(base, s).utc,
                Source::Kubernetes,
                member,
                EventKind::NodeLeaseStale,
                "node n0: lease last renewed ...",
            )
        };
        for i in 0..80 {
            let (leader, term, seen) = if i < 20 { (1, 2, 1.0) } else { (2, 3, 2.0) };
            if i == 60 {
                // Renewed last at 15 s, seen stale at 60 s.
                e.keep(&[lease(15.0, "m0")]);
            }
            rows.extend(e.round(&round(base, i, leader, term, seen)).rows.events);
        }
        let kinds: Vec<EventKind> = rows
            .iter()
            .filter(|r| matches!(r.kind, EventKind::Election | EventKind::ElectionRevised))
            .map(|r| r.kind)
            .collect();
        assert_eq!(kinds, [EventKind::Election, EventKind::ElectionRevised], "{rows:?}");
        let first = rows.iter().find(|r| r.kind == EventKind::Election).expect("election");
        assert_eq!(first.election.as_ref().map(|c| c.cause), Some(Cause::Unexplained));
        let revised = rows.iter().find(|r| r.kind == EventKind::ElectionRevised).expect("row");
        assert_eq!(revised.election.as_ref().map(|c| c.cause), Some(Cause::Node));
        assert_eq!(revised.ts, first.ts, "the election's own instant");
        assert!(
            revised.detail.starts_with("revised: cause unexplained -> node"),
            "{}",
            revised.detail
        );
        assert_eq!(e.elections()[0].1.cause, Cause::Node);
        // Too late: past REVISE_FOR, another node row changes nothing.
        let mut e2 = Engine::new(WindowName::Sample, 3, Duration::from_secs(30));
        let mut late = Vec::new();
        for i in 0..160 {
            let (leader, term, seen) = if i < 20 { (1, 2, 1.0) } else { (2, 3, 2.0) };
            if i == 150 {
                e2.keep(&[lease(15.0, "m0")]);
            }
            late.extend(e2.round(&round(base, i, leader, term, seen)).rows.events);
        }
        assert!(!late.iter().any(|r| r.kind == EventKind::ElectionRevised), "{late:?}");
        assert_eq!(e2.elections()[0].1.cause, Cause::Unexplained);
    }

    /// Regression (the lab, 2026-12-08): a revision 100 s after an election found the row
    /// its cause rested on pruned from the evidence and revised `unreachable` to
    /// `unexplained`; and any late row could revise. Now the evidence outlives the revision
    /// window, and only the rows that come late by design revise.
    #[test]
    fn a_revision_keeps_the_first_evidence_and_only_late_kinds_revise() {
        let base = tokio::time::Instant::now();
        let mut e = Engine::new(WindowName::Sample, 3, Duration::from_secs(30));
        let mut rows = Vec::new();
        let row = |s: f64, member: &str, kind: EventKind| {
            Event::new(at(base, s).utc, Source::Local, member, kind, "")
        };
        for i in 0..130 {
            let (leader, term, seen) = if i < 20 { (1, 2, 1.0) } else { (2, 3, 2.0) };
            if i == 19 {
                e.keep(&[row(19.5, "m0", EventKind::SigkillSent)]);
            }
            if i == 60 {
                // A row of no late kind about the old leader: no revision.
                e.keep(&[row(19.8, "m0", EventKind::Unreachable)]);
            }
            if i == 125 {
                // A late kind about another member, 105 s on: looked at again, unchanged.
                e.keep(&[row(125.0, "m2", EventKind::NodeLeaseStale)]);
            }
            rows.extend(e.round(&round(base, i, leader, term, seen)).rows.events);
        }
        assert!(!rows.iter().any(|r| r.kind == EventKind::ElectionRevised), "{rows:?}");
        assert_eq!(e.elections()[0].1.cause, Cause::OwnDisruption);
    }

    /// What the exporter is handed: the elections each round revealed (none for the first
    /// term seen, the term's rise after, across a window boundary too), who leads.
    #[test]
    fn each_round_hands_the_exporter_its_own_elections_and_leader() {
        let base = tokio::time::Instant::now();
        let mut e = Engine::new(WindowName::AtRest, 3, Duration::from_secs(30));
        let mut got = Vec::new();
        for (i, (leader, term)) in [(1, 7), (1, 7), (2, 9), (2, 9), (3, 10)].into_iter().enumerate()
        {
            if i == 3 {
                e.next_window(true, WindowName::Disruption);
            }
            let x = e.round(&round(base, i as u64, leader, term, 1.0)).export;
            let leads: Vec<&str> =
                x.leads.iter().filter(|(_, l)| *l).map(|(m, _)| m.0.as_str()).collect();
            got.push((x.elections, x.transitions, x.term, leads.join(",")));
        }
        let want =
            [(0, 0, 7, "m0"), (0, 0, 7, "m0"), (2, 1, 9, "m1"), (0, 0, 9, "m1"), (1, 1, 10, "m2")];
        let want: Vec<_> =
            want.iter().map(|&(el, t, term, l)| (el, t, Some(term), l.to_owned())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn health_rows_come_every_ten_seconds_and_at_a_window_boundary() {
        let base = tokio::time::Instant::now();
        let mut e = Engine::new(WindowName::AtRest, 3, Duration::from_secs(30));
        let mut intervals = Vec::new();
        for i in 0..25 {
            let rows = e.round(&round(base, i, 1, 2, 1.0)).rows.health;
            if let Some(r) = rows.first() {
                assert_eq!(rows.len(), 3, "one row per member");
                intervals.push((i, r.interval_s));
            }
        }
        assert_eq!(intervals, [(10, 10.0), (20, 10.0)]);
        let at_boundary = e.next_window(true, WindowName::Disruption);
        assert_eq!(at_boundary.iter().map(|r| r.interval_s).collect::<Vec<_>>(), [4.0; 3]);
        assert!(at_boundary.iter().all(|r| r.window == "at_rest"));
        assert_eq!(e.window(), WindowName::Disruption);
        assert_eq!(e.versions(), [String::new()], "the Status RPC's version, once");
    }

    #[test]
    fn canary_rows_name_the_member_that_answered_by_its_id() {
        let base = tokio::time::Instant::now();
        let mut e = Engine::new(WindowName::Disruption, 3, Duration::from_secs(30));
        e.round(&round(base, 0, 1, 2, 1.0)); // the members' ids are learned from Status
        e.canary_started(at(base, 0.0), Duration::from_millis(100));
        let op = |id: u64| Op {
            kind: Kind::Write,
            due: at(base, 0.5),
            started: at(base, 0.5),
            done: at(base, 0.6),
            ok: true,
            error: String::new(),
            member_id: id,
            one_in_flight: true,
        };
        let rows = e.canary(&[op(2), op(9), op(0)]);
        let names: Vec<&str> = rows.iter().map(|r| r.member.as_str()).collect();
        assert_eq!(names, ["m1", "9", ""]);
        assert!(rows.iter().all(|r| r.window == "disruption"));
    }
}
