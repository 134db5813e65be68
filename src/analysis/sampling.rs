//! `sample`'s protocol as a pure state machine: one window, `sample`, a round per interval
//! (`/metrics` as often as asked) until the duration runs out or a signal comes; then
//! summary.json's figures from the engine. No I/O and no clock; the residual rate over
//! the whole run directory is read from disk, so the command adds it.

use std::time::Duration;

use crate::analysis::cadence::Pages;
use crate::analysis::engine::Engine;
use crate::analysis::protocol::{Closing, Input, Next, Protocol};
use crate::model::clock::Stamp;
use crate::model::counts::LeaderChanges;
use crate::model::event::{Event, EventKind, Source};
use crate::model::member::Member;
use crate::model::summary::{EndedBy, MemberRef, SCHEMA_VERSION, Summary, explain};

/// What `sample` is asked to do.
#[derive(Debug, Clone)]
pub struct SamplingPlan {
    pub members: Vec<Member>,
    /// Time between round starts; a round waits at most this long for a member, so one
    /// silent member never slows the others.
    pub interval: Duration,
    /// Rounds between two reads of `/metrics` (1: every round; `None`: only from a member
    /// whose Status changed, src/analysis/cadence.rs). The page is what costs etcd the most
    /// to serve; Status is read every round regardless.
    pub metrics_every: Option<u64>,
    /// `None`: until a signal.
    pub duration: Option<Duration>,
    /// How far before an election its cause is looked for.
    pub cause_horizon: Duration,
    /// The canary's deadline per op; `None`: no canary (the default for `sample`).
    pub canary: Option<Duration>,
}

/// `sample`'s state machine ([`Protocol`]).
#[derive(Debug)]
pub struct Sampling {
    plan: SamplingPlan,
    started: Stamp,
    /// Rounds asked for so far: which of them read `/metrics`.
    rounds: u64,
    ended_by: Option<EndedBy>,
    events: Vec<Event>,
}

impl Sampling {
    /// A run that started at `started`: its `run_started` row is the first event.
    pub fn new(plan: SamplingPlan, started: Stamp) -> Self {
        let names: Vec<String> =
            plan.members.iter().map(|m| format!("{}={}", m.name, m.url)).collect();
        let detail = format!(
            "interval {}; members {}",
            humantime::format_duration(plan.interval),
            names.join(" ")
        );
        let first = Event::stamped(started, Source::Leaderwatch, "", EventKind::RunStarted, detail);
        Sampling { plan, started, rounds: 0, ended_by: None, events: vec![first] }
    }

    fn tick(&self, restart: bool) -> Next {
        Next::Tick { every: self.plan.interval, restart }
    }

    fn end(&mut self, by: EndedBy) -> Next {
        self.ended_by = Some(by);
        Next::Finish
    }

    /// A tick: a round, unless the duration has run out.
    fn ticked(&mut self, now: Stamp) -> Next {
        if self.plan.duration.is_some_and(|d| self.started.secs_to(&now) >= d.as_secs_f64()) {
            return self.end(EndedBy::Duration);
        }
        let pages = match self.plan.metrics_every {
            Some(n) if self.rounds.is_multiple_of(n.max(1)) => Pages::Every,
            Some(_) => Pages::Skip,
            None => Pages::OnChange,
        };
        self.rounds += 1;
        Next::Round { pages, wait: Some(self.plan.interval) }
    }
}

impl Protocol for Sampling {
    type Document = Summary;

    fn step(&mut self, input: Input<'_>, now: Stamp, _engine: &Engine) -> Next {
        match input {
            Input::Start => match self.plan.canary {
                Some(timeout) => {
                    Next::StartCanary { every: self.plan.interval, timeout, say_deadline: false }
                }
                None => self.tick(true),
            },
            Input::CanaryStarted { .. } => self.tick(true),
            Input::Tick => self.ticked(now),
            Input::Round { .. } => self.tick(false),
            Input::Signal => self.end(EndedBy::Signal),
            // Nothing else is asked for by `sample`: sampling goes on.
            _ => self.tick(false),
        }
    }

    fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// summary.json of the run that just ended: its counts, elections, health and client
    /// figures (the residual rate is the command's: it reads the directory).
    fn finish(mut self, engine: &mut Engine, run_id: &str, now: Stamp) -> Closing<Summary> {
        let ended_by = self.ended_by.unwrap_or(EndedBy::Signal);
        let counts = engine.counts();
        let rounds = engine.rounds();
        let health = engine.health();
        let client = engine.client();
        let lock_safety = engine.lock_safety();
        let (rows, windows) = engine.close_windows(true);
        let lock = windows.iter().rev().find_map(|w| w.lock.clone());
        let elections_detail = windows.into_iter().flat_map(|w| w.elections_detail).collect();
        let detail = format!("{ended_by}; {rounds} round(s)");
        self.events.push(Event::stamped(now, Source::Leaderwatch, "", EventKind::RunEnded, detail));
        let plan = &self.plan;
        let summary = Summary {
            schema_version: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            run_id: run_id.to_owned(),
            started_at: self.started.utc,
            ended_at: now.utc,
            duration_s: self.started.secs_to(&now),
            ended_by,
            rounds,
            members: plan
                .members
                .iter()
                .map(|m| MemberRef { name: m.name.clone(), endpoint: m.url.clone() })
                .collect(),
            leader_changes: LeaderChanges::from_counts(&counts),
            elections: counts.elections,
            leader_transitions: counts.leader_transitions.clone(),
            elections_detail,
            health,
            client,
            lock,
            lock_safety,
            cause_horizon_s: plan.cause_horizon.as_secs_f64(),
            explanation: explain(&counts),
            residual: None,
        };
        Closing { rows, events: self.take_events(), document: summary, cut: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::baseline::WindowName;
    use crate::model::member::MemberName;
    use chrono::{TimeZone, Utc};

    fn at(base: tokio::time::Instant, s: f64) -> Stamp {
        let t0 = Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).single().expect("instant");
        let d = Duration::from_secs_f64(s);
        Stamp { utc: t0 + d, mono: base + d }
    }

    fn plan(metrics_every: Option<u64>, duration: Option<Duration>) -> SamplingPlan {
        SamplingPlan {
            members: vec![Member {
                name: MemberName("m0".to_owned()),
                url: "http://m0".to_owned(),
            }],
            interval: Duration::from_secs(1),
            metrics_every,
            duration,
            cause_horizon: Duration::from_secs(30),
            canary: None,
        }
    }

    #[test]
    fn pages_are_read_every_nth_round_and_the_run_ends_at_the_first_tick_past_its_duration() {
        let base = tokio::time::Instant::now();
        let engine = Engine::new(WindowName::Sample, 1, Duration::from_secs(30));
        let mut s = Sampling::new(plan(Some(3), Some(Duration::from_secs(5))), at(base, 0.0));
        let every = Duration::from_secs(1);
        assert_eq!(
            s.step(Input::Start, at(base, 0.0), &engine),
            Next::Tick { every, restart: true }
        );
        let mut pages = Vec::new();
        for i in 0..10 {
            match s.step(Input::Tick, at(base, i as f64), &engine) {
                Next::Round { pages: p, wait } => {
                    assert_eq!(wait, Some(every));
                    pages.push(p);
                }
                Next::Finish => break,
                other => panic!("{other:?}"),
            }
        }
        use Pages::{Every, Skip};
        assert_eq!(
            pages,
            [Every, Skip, Skip, Every, Skip],
            "ticks at 0..4 s; the one at 5 s ends it"
        );
        assert_eq!(s.ended_by, Some(EndedBy::Duration));
        assert_eq!(s.take_events().first().map(|e| e.kind), Some(EventKind::RunStarted));
    }

    #[test]
    fn a_canary_starts_before_the_first_tick_and_a_signal_ends_the_run() {
        let base = tokio::time::Instant::now();
        let mut engine = Engine::new(WindowName::Sample, 1, Duration::from_secs(30));
        let timeout = Duration::from_millis(500);
        let p = SamplingPlan { canary: Some(timeout), ..plan(None, None) };
        let mut s = Sampling::new(p, at(base, 0.0));
        let every = Duration::from_secs(1);
        let next = s.step(Input::Start, at(base, 0.0), &engine);
        assert_eq!(next, Next::StartCanary { every, timeout, say_deadline: false });
        let next =
            s.step(Input::CanaryStarted { writes: true, lock: false }, at(base, 0.1), &engine);
        assert_eq!(next, Next::Tick { every, restart: true });
        let next = s.step(Input::Tick, at(base, 0.1), &engine);
        assert_eq!(next, Next::Round { pages: Pages::OnChange, wait: Some(every) });
        assert_eq!(s.step(Input::Signal, at(base, 0.5), &engine), Next::Finish);
        let c = s.finish(&mut engine, "run", at(base, 0.5));
        assert_eq!(c.document.ended_by, EndedBy::Signal);
        assert_eq!(c.document.duration_s, 0.5);
        let kinds: Vec<EventKind> = c.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EventKind::RunStarted, EventKind::RunEnded]);
    }
}
