//! The phases one by one, driven as the loop drives them (the engine takes each round
//! first); tests/check/trial_script.rs runs whole trials through the real loop.

use super::*;
use crate::model::baseline::{EnvironmentKind, LocalMethod};
use crate::model::metrics::MemberMetrics;
use crate::model::observation::{Health, Observation, Part, Status};
use chrono::{TimeZone, Utc};

const SECOND: Duration = Duration::from_secs(1);
const FAST: Duration = Duration::from_millis(100);

fn plan(canary: Option<Duration>) -> TrialPlan {
    TrialPlan {
        members: (0..3).map(|i| MemberName(format!("m{i}"))).collect(),
        idle: Duration::from_secs(5),
        settle: Duration::from_secs(3),
        interval: SECOND,
        fast_interval: FAST,
        target: Target::Leader,
        recovery_timeout: Duration::from_secs(20),
        method: DisruptionMethod::local(LocalMethod::Sigkill),
        environment: Environment {
            kind: EnvironmentKind::Local,
            description: "unit, etcd {etcd}".to_owned(),
            ..Environment::default()
        },
        cause_horizon: Duration::from_secs(30),
        canary,
    }
}

/// How the members answer a round: `down` (m0) answers nothing; the others agree on
/// `leader` (an id; 0 none) at `term`; `pages`: the round read /metrics.
#[derive(Clone, Copy)]
struct View {
    leader: u64,
    term: u64,
    down: bool,
    pages: bool,
}

const AT_REST: View = View { leader: 1, term: 2, down: false, pages: true };

/// A trial and its engine, fed as the loop feeds them, on a clock of its own.
struct Bench {
    trial: Trial,
    engine: Engine,
    base: tokio::time::Instant,
    t: f64,
    index: u64,
}

impl Bench {
    fn new(canary: Option<Duration>) -> Bench {
        Bench {
            trial: Trial::new(plan(canary)),
            engine: Engine::new(WindowName::AtRest, 3, Duration::from_secs(30)),
            base: tokio::time::Instant::now(),
            t: 0.0,
            index: 0,
        }
    }

    fn now(&self) -> Stamp {
        let t0 = Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).single().expect("instant");
        let d = Duration::from_secs_f64(self.t);
        Stamp { utc: t0 + d, mono: self.base + d }
    }

    fn step(&mut self, input: Input<'_>) -> Next {
        let now = self.now();
        self.trial.step(input, now, &self.engine)
    }

    /// A round at the bench's time, taken in by the engine, then by the trial.
    fn round(&mut self, v: View) -> Next {
        let started = self.now();
        let observations = (0..3u64)
            .map(|i| {
                let name = MemberName(format!("m{i}"));
                let url = format!("http://m{i}:2379");
                if i == 0 && v.down {
                    let error = "refused".to_owned();
                    return Observation::new(
                        name,
                        url,
                        started,
                        Part::Failed { error: error.clone(), ms: 1.0 },
                        Part::Failed { error: error.clone(), ms: 1.0 },
                        Part::Failed { error, ms: 1.0 },
                    );
                }
                let metrics = MemberMetrics {
                    leader_changes_seen_total: Some(1.0),
                    process_start_time: Some(100.0),
                    ..MemberMetrics::default()
                };
                let metrics =
                    if v.pages { Part::Ok { value: metrics, ms: 1.0 } } else { Part::Skipped };
                let health = Health { healthy: v.leader != 0, reason: String::new() };
                let mut status = Status::of(i + 1, v.leader, v.term);
                status.version = "3.6.14".to_owned();
                Observation::new(
                    name,
                    url,
                    started,
                    metrics,
                    Part::Ok { value: health, ms: 1.0 },
                    Part::Ok { value: status, ms: 1.0 },
                )
            })
            .collect();
        let r = Round { index: self.index, started, observations, silent: vec![] };
        self.index += 1;
        self.engine.round(&r);
        self.step(Input::Round { round: &r, side: &[] })
    }

    /// What the loop does for [`Next::OpenWindow`].
    fn open(&mut self, name: WindowName) -> Next {
        self.engine.next_window(true, name);
        self.step(Input::WindowOpened)
    }

    /// Rounds at `every` until the trial asks for something other than the next
    /// tick of that cadence; returns that.
    fn rounds_until_done(&mut self, v: View, every: Duration) -> Next {
        for _ in 0..1000 {
            match self.step(Input::Tick) {
                Next::Round { .. } => {}
                other => return other,
            }
            match self.round(v) {
                Next::Tick { every: e, restart: false } if e == every => {
                    self.t += every.as_secs_f64()
                }
                other => return other,
            }
        }
        panic!("the phase never ended");
    }

    fn kinds(&mut self) -> Vec<EventKind> {
        self.trial.take_events().iter().map(|e| e.kind).collect()
    }

    /// Through at_rest and the target's choice to the request.
    fn through_to_request(&mut self) -> Next {
        assert_eq!(self.step(Input::Start), Next::Tick { every: SECOND, restart: true });
        let next = self.rounds_until_done(AT_REST, SECOND);
        assert_eq!(next, Next::OpenWindow(WindowName::Disruption));
        self.open(WindowName::Disruption)
    }
}

#[test]
fn at_rest_takes_full_rounds_at_the_interval_until_its_window_spans_the_idle_time() {
    let mut b = Bench::new(None);
    assert_eq!(b.step(Input::Start), Next::Tick { every: SECOND, restart: true });
    assert_eq!(b.kinds(), [EventKind::SittingStarted]);
    assert_eq!(b.step(Input::Tick), Next::Round { pages: Pages::Every, wait: Some(SECOND) });
    let mut rounds = 1;
    let mut next = b.round(AT_REST);
    while next == (Next::Tick { every: SECOND, restart: false }) {
        b.t += 1.0;
        assert_eq!(b.step(Input::Tick), Next::Round { pages: Pages::Every, wait: Some(SECOND) });
        next = b.round(AT_REST);
        rounds += 1;
    }
    // Rounds at 0..=5 s: the window spans 5 s at the sixth.
    assert_eq!((rounds, next), (6, Next::OpenWindow(WindowName::Disruption)));
    assert_eq!(b.trial.chosen, Some((MemberName("m0".to_owned()), true)));
    let shown = b.trial.shown().expect("shown");
    assert_eq!((shown.phase.as_str(), shown.planned), ("at_rest", Some(Duration::from_secs(5))));
}

#[test]
fn no_single_leader_is_waited_for_with_fast_rounds_then_cuts_the_sitting() {
    let mut b = Bench::new(None);
    b.step(Input::Start);
    let leaderless = View { leader: 0, ..AT_REST };
    let next = b.rounds_until_done(leaderless, SECOND);
    assert_eq!(next, Next::Tick { every: FAST, restart: true }, "fast rounds to choose");
    b.t += FAST.as_secs_f64();
    assert_eq!(b.step(Input::Tick), Next::Round { pages: Pages::Every, wait: Some(FAST) });
    assert_eq!(b.round(leaderless), Next::Tick { every: FAST, restart: false });
    b.t += TARGET_WAIT.as_secs_f64();
    assert_eq!(b.step(Input::Tick), Next::Round { pages: Pages::Every, wait: Some(FAST) });
    assert_eq!(b.round(leaderless), Next::Finish);
    let base = {
        let now = b.now();
        b.trial.finish(&mut b.engine, "run", now)
    }
    .document;
    assert_eq!(base.status, Completion::Incomplete);
    let reason = base.incomplete_reason.unwrap_or_default();
    assert!(
        reason.starts_with("cannot choose the target within 10s: no single leader"),
        "{reason}"
    );
    assert!(base.disruption.is_none(), "nothing was disrupted");
}

#[test]
fn the_request_waits_for_the_canary_s_first_write_at_most_canary_ready() {
    let timeout = Duration::from_millis(500);
    let mut b = Bench::new(Some(timeout));
    let next = b.through_to_request();
    assert_eq!(next, Next::StartCanary { every: FAST, timeout, say_deadline: true });
    let started = Input::CanaryStarted { writes: true, lock: false };
    assert_eq!(b.step(started), Next::AwaitCanary { after: Duration::ZERO });
    let none = Input::CanaryOps { ops: &[], lock: &[] };
    assert_eq!(b.step(none), Next::AwaitCanary { after: CANARY_POLL });
    b.t += CANARY_READY.as_secs_f64();
    b.kinds();
    let next = b.step(Input::CanaryOps { ops: &[], lock: &[] });
    assert!(matches!(next, Next::Disrupt { ref target, .. } if target.0 == "m0"), "{next:?}");
    assert_eq!(b.kinds(), [EventKind::CanaryNotReady, EventKind::DisruptionRequested]);

    // A canary that cannot connect: the request at once.
    let mut b = Bench::new(Some(timeout));
    b.through_to_request();
    let neither = Input::CanaryStarted { writes: false, lock: false };
    assert!(matches!(b.step(neither), Next::Disrupt { .. }));
}

/// Regression (make test, 2026-12-07): the request went out on the write canary's first
/// write while the lock canary had not yet been granted the lock, and its start-up was
/// counted as the election's cost to the lock. The write and the grant may come in
/// different polls; each is remembered.
#[test]
fn the_request_waits_for_the_lock_canary_s_first_grant_too() {
    let timeout = Duration::from_millis(500);
    let mut b = Bench::new(Some(timeout));
    b.through_to_request();
    let started = Input::CanaryStarted { writes: true, lock: true };
    assert_eq!(b.step(started), Next::AwaitCanary { after: Duration::ZERO });
    let wrote = [write_ok(b.now())];
    let next = b.step(Input::CanaryOps { ops: &wrote, lock: &[] });
    assert_eq!(next, Next::AwaitCanary { after: CANARY_POLL }, "a write alone is not enough");
    let granted = [LockEvent::new(LockEventKind::Granted, b.now(), Some(0))];
    let next = b.step(Input::CanaryOps { ops: &[], lock: &granted });
    assert!(matches!(next, Next::Disrupt { .. }), "{next:?}");
    assert_eq!(b.kinds().last(), Some(&EventKind::DisruptionRequested));

    // Never granted: the request after CANARY_READY, saying what was missing.
    let mut b = Bench::new(Some(timeout));
    b.through_to_request();
    b.step(Input::CanaryStarted { writes: true, lock: true });
    b.step(Input::CanaryOps { ops: &[write_ok(b.now())], lock: &[] });
    b.t += CANARY_READY.as_secs_f64();
    b.kinds();
    let next = b.step(Input::CanaryOps { ops: &[], lock: &[] });
    assert!(matches!(next, Next::Disrupt { .. }), "{next:?}");
    let said = b.trial.take_events();
    let said = said.iter().find(|e| e.kind == EventKind::CanaryNotReady).expect("said");
    assert!(said.detail.starts_with("no lock grant within 5s"), "{said:?}");

    // The lock canary alone (the write canary could not connect): its grant is enough.
    let mut b = Bench::new(Some(timeout));
    b.through_to_request();
    b.step(Input::CanaryStarted { writes: false, lock: true });
    let granted = [LockEvent::new(LockEventKind::Granted, b.now(), Some(1))];
    let next = b.step(Input::CanaryOps { ops: &[], lock: &granted });
    assert!(matches!(next, Next::Disrupt { .. }), "{next:?}");
}

/// A canary write that succeeded, completed at `done`.
fn write_ok(done: Stamp) -> Op {
    Op {
        kind: Kind::Write,
        due: done,
        started: done,
        done,
        ok: true,
        error: String::new(),
        member_id: 2,
        one_in_flight: true,
    }
}

#[test]
fn a_leader_loss_is_tracked_to_the_healthy_list_then_settles_into_a_complete_baseline() {
    let mut b = Bench::new(None);
    let Next::Disrupt { requested, .. } = b.through_to_request() else { panic!("the request") };
    b.engine.canary_started(requested, FAST);
    b.engine.hold_writes_from(requested);
    assert_eq!(b.step(Input::Disrupting), Next::Tick { every: FAST, restart: true });
    let sig = Event::stamped(b.now(), Source::Local, "m0", EventKind::SigkillSent, "");
    let next = b.step(Input::Report(&DisruptorReport::Event(sig)));
    assert_eq!(next, Next::Tick { every: FAST, restart: false });
    assert_eq!(b.step(Input::Tick), Next::Round { pages: Pages::OnChange, wait: Some(FAST) });
    // m0 gone, no leader for 1 s, then m1 (id 2) at term 3.
    let gone = View { leader: 0, term: 2, down: true, pages: false };
    for i in 0..10 {
        b.t += 0.1;
        assert_eq!(
            b.round(if i < 5 { gone } else { View { leader: 2, term: 3, ..gone } }),
            Next::Tick { every: FAST, restart: false }
        );
    }
    b.engine.canary(&[write_ok(b.now())]);
    assert_eq!(
        b.step(Input::DisruptorEnded(DisruptorEnd::Done)),
        Next::Tick { every: FAST, restart: false }
    );
    b.t += 0.1;
    // Back and healthy, but this round read no page: one more round, at once, with all.
    let back = View { leader: 2, term: 3, down: false, pages: false };
    assert_eq!(b.round(back), Next::Round { pages: Pages::Every, wait: None });
    assert_eq!(b.round(View { pages: true, ..back }), Next::EndDisruption);
    let next = b.step(Input::DisruptionEnded { ended: None, reports: &[] });
    assert_eq!(next, Next::OpenWindow(WindowName::Settle));
    assert_eq!(b.open(WindowName::Settle), Next::Tick { every: SECOND, restart: true });
    assert_eq!(b.rounds_until_done(View { pages: true, ..back }, SECOND), Next::Finish);

    let c = {
        let now = b.now();
        b.trial.finish(&mut b.engine, "run", now)
    };
    assert_eq!(c.cut, None);
    let base = c.document;
    assert_eq!(base.status, Completion::Complete);
    let names: Vec<WindowName> = base.windows.iter().map(|w| w.name).collect();
    assert_eq!(names, [WindowName::AtRest, WindowName::Disruption, WindowName::Settle]);
    assert_eq!(base.environment.description, "unit, etcd 3.6.14");
    let d = base.disruption.expect("the disruption");
    assert_eq!((d.target.as_str(), d.target_was_leader), ("m0", true));
    assert!(d.member_lost_at.is_some() && d.leader_elected_at.is_some() && d.healthy_at.is_some());
    let steps: Vec<&str> = d.waterfall.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(
        steps,
        [
            "requested",
            "sigkill_sent",
            "member_lost (measured)",
            "leader_elected (measured)",
            "writes_ok (canary)",
            "member_back (measured)",
            "healthy_list (measured)"
        ]
    );
    let [truth] = &d.ground_truth[..] else { panic!("{:?}", d.ground_truth) };
    assert_eq!(truth.compared_with.as_deref(), Some("member_lost_at"));
    assert_eq!(c.events.last().map(|e| e.kind), Some(EventKind::SittingEnded));
}

#[test]
fn a_disruptor_that_fails_ends_the_sitting_with_its_error_after_it_is_stopped() {
    let mut b = Bench::new(None);
    b.through_to_request();
    b.step(Input::Disrupting);
    b.kinds();
    let end = DisruptorEnd::Failed("403 forbidden".to_owned());
    assert_eq!(b.step(Input::DisruptorEnded(end)), Next::EndDisruption);
    assert_eq!(b.kinds(), [EventKind::DisruptionFailed]);
    let attempts = DisruptorReport::Attempts { attempts: 3, blocked_s: 2.5 };
    let next = b.step(Input::DisruptionEnded { ended: None, reports: &[attempts] });
    assert_eq!(next, Next::Finish);
    let c = {
        let now = b.now();
        b.trial.finish(&mut b.engine, "run", now)
    };
    assert_eq!(c.cut.map(|c| c.reason), Some("the disruption failed: 403 forbidden".to_owned()));
    let d = c.document.disruption.expect("kept");
    assert_eq!((d.attempts, d.blocked_s), (3, 2.5), "the last reports are kept");
}

fn cut_reason(mut b: Bench) -> String {
    let now = b.now();
    let c = b.trial.finish(&mut b.engine, "run", now);
    c.cut.map(|c| c.reason).unwrap_or_default()
}

#[test]
fn a_signal_says_the_phase_it_came_in_and_stops_a_running_disruptor_first() {
    let mut b = Bench::new(None);
    b.step(Input::Start);
    assert_eq!(b.step(Input::Signal), Next::Finish);
    assert_eq!(cut_reason(b), "interrupted by a signal during at_rest");

    let mut b = Bench::new(None);
    b.through_to_request();
    b.step(Input::Disrupting);
    assert_eq!(b.step(Input::Signal), Next::EndDisruption, "the disruptor is stopped first");
    let next = b.step(Input::DisruptionEnded { ended: Some(DisruptorEnd::Done), reports: &[] });
    assert_eq!(next, Next::Finish);
    assert_eq!(cut_reason(b), "interrupted by a signal during the disruption");
}
