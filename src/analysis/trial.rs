//! The trial, the protocol of one measurement, as a pure state machine: three observation
//! windows around one disruption, as `rehearse` and `measure` run it (and so the Job that
//! `leaderwatch sitting` starts: in this code "sitting" is only that Job's day).
//!
//! ```text
//! at_rest (idle, interval) -> choose the target (fast rounds, at most TARGET_WAIT)
//!   -> disruption (canary ready, request, recovery to the healthy list, fast rounds)
//!   -> settle (settle, interval) -> done
//! ```
//! Fed the engine's state and what the loop saw (rounds, the disruptor's reports and its
//! end, the canary's first ops, a signal), it answers what to do next ([`Next`]). It owns
//! the recovery tracking, the ground truth, the waterfall and baseline.json's assembly;
//! whatever ends the trial (a signal, a failed disruption, no recovery), the baseline is
//! assembled from what was measured, marked `incomplete`. No I/O and no clock.

use std::time::Duration;

use crate::analysis::cadence::Pages;
use crate::analysis::disruption::{DisruptionLog, disruption_record};
use crate::analysis::engine::Engine;
use crate::analysis::protocol::{
    CANARY_POLL, Closing, Cut, DisruptorEnd, Input, Next, Protocol, Shown,
};
use crate::analysis::recovery::{Change, Outcome, RecoveryTracker, Target, resolve_target};
use crate::model::baseline::{
    Baseline, Completion, DisruptionMethod, Environment, SCHEMA_VERSION, WindowName, role,
};
use crate::model::canary::{Kind, Op};
use crate::model::clock::Stamp;
use crate::model::event::{DisruptorReport, Event, EventKind, Source};
use crate::model::lock::{LockEvent, LockEventKind};
use crate::model::member::MemberName;
use crate::model::observation::Round;

/// The spec's observation window: a real trial (`measure`) is never shorter.
pub const MIN_IDLE: Duration = Duration::from_secs(20 * 60);
/// How long the trial keeps sampling (fast) for a single leader when at_rest ends.
pub const TARGET_WAIT: Duration = Duration::from_secs(10);
/// How long the request waits for the canary's first successful write.
pub const CANARY_READY: Duration = Duration::from_secs(5);

/// What the trial is asked to do: its windows, cadences and target.
#[derive(Debug, Clone)]
pub struct TrialPlan {
    pub members: Vec<MemberName>,
    pub idle: Duration,
    pub settle: Duration,
    pub interval: Duration,
    /// From the disruption until the settle window starts.
    pub fast_interval: Duration,
    pub target: Target,
    /// Give up waiting for the healthy list after this long.
    pub recovery_timeout: Duration,
    /// The disruptor's method, for the request's row and the baseline.
    pub method: DisruptionMethod,
    /// Kind, description and timing; versions are filled in from the Status RPC.
    pub environment: Environment,
    /// How far before an election its cause is looked for.
    pub cause_horizon: Duration,
    /// The canary's deadline per op; `None`: no canary.
    pub canary: Option<Duration>,
}

/// Where the trial is.
#[derive(Debug, Clone)]
enum Phase {
    /// Not started yet.
    Begin,
    AtRest,
    /// at_rest is over; fast rounds until one shows the target.
    ChoosingTarget {
        since: Stamp,
    },
    /// The disruption window is opening.
    OpeningDisruption,
    StartingCanary,
    /// The canaries run; the request waits for what they need before it (at most
    /// [`CANARY_READY`] from `since`).
    AwaitingCanary {
        since: Stamp,
        /// A write succeeded (or there is no write canary).
        wrote: bool,
        /// The lock canary granted the lock (or there is none).
        granted: bool,
    },
    /// The request is made; the disruptor's task is starting.
    Requesting,
    /// Fast rounds until the healthy list (or the timeout).
    Recovering,
    /// The healthy list came in a round without every page: one more, at once, with all.
    ClosingRound,
    /// The disruptor is being stopped; `cut` if the disruption did not end well.
    EndingDisruption {
        cut: Option<Cut>,
    },
    OpeningSettle,
    Settle,
    Done {
        cut: Option<Cut>,
    },
}

impl Phase {
    /// The phase's name in a cut's reason ("interrupted by a signal during ...").
    fn during(&self) -> &'static str {
        match self {
            Phase::Begin | Phase::AtRest | Phase::ChoosingTarget { .. } => "at_rest",
            Phase::OpeningSettle | Phase::Settle | Phase::Done { .. } => "settle",
            _ => "the disruption",
        }
    }

    /// The disruptor's task may be running: ending the phase must stop it.
    fn disrupting(&self) -> bool {
        matches!(self, Phase::Requesting | Phase::Recovering | Phase::ClosingRound)
    }
}

/// The trial's state machine ([`Protocol`]).
#[derive(Debug)]
pub struct Trial {
    plan: TrialPlan,
    phase: Phase,
    /// The latest round before the request: the target (and the leader) are read from it.
    last: Option<Round>,
    /// The target and whether it led, once chosen.
    chosen: Option<(MemberName, bool)>,
    log: Option<DisruptionLog>,
    /// What a watcher sees: the phase's name, length and start.
    shown: Option<Shown>,
    events: Vec<Event>,
}

impl Trial {
    pub fn new(plan: TrialPlan) -> Self {
        Trial {
            plan,
            phase: Phase::Begin,
            last: None,
            chosen: None,
            log: None,
            shown: None,
            events: Vec::new(),
        }
    }

    fn say(&mut self, now: Stamp, member: &str, kind: EventKind, detail: impl Into<String>) {
        self.events.push(Event::stamped(now, Source::Leaderwatch, member, kind, detail));
    }

    fn show(&mut self, phase: String, planned: Option<Duration>, since: Stamp) {
        self.shown = Some(Shown { phase, planned, since, note: String::new() });
    }

    fn tick(&self, every: Duration, restart: bool) -> Next {
        Next::Tick { every, restart }
    }

    /// Ends the trial at once (no disruptor runs).
    fn done(&mut self, cut: Option<Cut>) -> Next {
        self.phase = Phase::Done { cut };
        Next::Finish
    }

    /// Ends the disruption phase: the loop stops the disruptor, then
    /// [`Input::DisruptionEnded`].
    fn end_disruption(&mut self, cut: Option<Cut>) -> Next {
        self.phase = Phase::EndingDisruption { cut };
        Next::EndDisruption
    }

    /// A signal: the trial ends, after the disruptor is stopped if it runs.
    fn signal(&mut self) -> Next {
        let cut = Cut::interrupted(self.phase.during());
        if self.phase.disrupting() { self.end_disruption(Some(cut)) } else { self.done(Some(cut)) }
    }

    fn start(&mut self, now: Stamp) -> Next {
        let p = &self.plan;
        let detail = format!(
            "idle {}, settle {}, target {:?}",
            humantime::format_duration(p.idle),
            humantime::format_duration(p.settle),
            p.target
        );
        self.say(now, "", EventKind::SittingStarted, detail);
        self.phase = Phase::AtRest;
        self.show("at_rest".to_owned(), Some(self.plan.idle), now);
        self.tick(self.plan.interval, true)
    }

    /// An at_rest round: at_rest ends once its window spans the idle time (its first
    /// round to its last: a loop on the time since the phase began let the boundary round
    /// land a hair early, a 20 min at_rest of 1199.9996 s).
    fn at_rest(&mut self, r: &Round, engine: &Engine, now: Stamp) -> Next {
        self.last = Some(r.clone());
        if engine.open_span_s() < self.plan.idle.as_secs_f64() {
            return self.tick(self.plan.interval, false);
        }
        self.phase = Phase::ChoosingTarget { since: now };
        self.choose(now, true)
    }

    /// The target, from the last round; fast rounds (still at_rest) until one is clear.
    fn choose(&mut self, now: Stamp, restart: bool) -> Next {
        let Phase::ChoosingTarget { since } = self.phase else { return Next::Finish };
        let err = match self.last.as_ref().map(|r| resolve_target(&self.plan.target, r)) {
            Some(Ok(chosen)) => {
                self.chosen = Some(chosen);
                self.phase = Phase::OpeningDisruption;
                return Next::OpenWindow(WindowName::Disruption);
            }
            Some(Err(e)) => e,
            None => "no round yet".to_owned(),
        };
        if since.secs_to(&now) >= TARGET_WAIT.as_secs_f64() {
            return self.done(Some(Cut::new(format!(
                "cannot choose the target within {}: {err}",
                humantime::format_duration(TARGET_WAIT)
            ))));
        }
        self.tick(self.plan.fast_interval, restart)
    }

    /// The disruption window is open: the canary first, when there is one. Its first
    /// write (a lease grant and a Put) lands before the request, so that what follows
    /// starts from a known-good client, not from its set-up.
    fn disruption_opened(&mut self, now: Stamp, engine: &Engine) -> Next {
        match self.plan.canary {
            Some(timeout) => {
                self.phase = Phase::StartingCanary;
                Next::StartCanary { every: self.plan.fast_interval, timeout, say_deadline: true }
            }
            None => self.request(now, engine),
        }
    }

    /// The canaries are started: wait for what they need, or request at once when
    /// neither runs.
    fn canary_started(&mut self, writes: bool, lock: bool, now: Stamp, engine: &Engine) -> Next {
        if !writes && !lock {
            return self.request(now, engine);
        }
        self.phase = Phase::AwaitingCanary { since: now, wrote: !writes, granted: !lock };
        Next::AwaitCanary { after: Duration::ZERO }
    }

    /// The canaries' ops while waiting for the write canary's first successful write and
    /// the lock canary's first grant: an election's cost is measured from a client that
    /// worked before it, never from the client's own start (regression: a lock canary
    /// first granted after the election had its start-up counted as the election's cost).
    /// Without them the trial's own figures still stand: it goes on, and says so.
    fn canary_ops(
        &mut self,
        (ops, lock): (&[Op], &[LockEvent]),
        (since, wrote, granted): (Stamp, bool, bool),
        now: Stamp,
        engine: &Engine,
    ) -> Next {
        let wrote = wrote || ops.iter().any(|o| o.ok && o.kind == Kind::Write);
        let granted = granted || lock.iter().any(|e| e.kind == LockEventKind::Granted);
        if wrote && granted {
            return self.request(now, engine);
        }
        if since.secs_to(&now) < CANARY_READY.as_secs_f64() {
            self.phase = Phase::AwaitingCanary { since, wrote, granted };
            return Next::AwaitCanary { after: CANARY_POLL };
        }
        let missing = match (wrote, granted) {
            (false, false) => "no successful canary write and no lock grant",
            (false, true) => "no successful canary write",
            _ => "no lock grant",
        };
        let detail = format!(
            "{missing} within {}; disrupting anyway",
            humantime::format_duration(CANARY_READY)
        );
        self.say(now, "", EventKind::CanaryNotReady, detail);
        self.request(now, engine)
    }

    /// The disruption is requested now: its row, the recovery tracker, the log.
    fn request(&mut self, now: Stamp, engine: &Engine) -> Next {
        let Some((target, was_leader)) = self.chosen.clone() else { return Next::Finish };
        let method = self.plan.method;
        self.say(
            now,
            &target.0,
            EventKind::DisruptionRequested,
            format!("{method} ({})", role(was_leader)),
        );
        self.show(format!("disruption of {target} ({method})"), None, now);
        let n = self.plan.members.len();
        let tracker = RecoveryTracker::new(
            target.clone(),
            n,
            now,
            engine.max_term(),
            self.plan.recovery_timeout,
        );
        let leader = self
            .last
            .as_ref()
            .and_then(|r| resolve_target(&Target::Leader, r).ok())
            .map(|(m, _)| m);
        self.log = Some(DisruptionLog {
            target: target.clone(),
            was_leader,
            leader,
            requested: now,
            tracker,
            steps: Vec::new(),
            attempts: 0,
            blocked_s: 0.0,
        });
        self.phase = Phase::Requesting;
        Next::Disrupt { target, requested: now }
    }
}

impl Trial {
    /// A round of the disruption window: the recovery tracker takes it.
    fn recovering(&mut self, r: &Round) -> Next {
        let n = self.plan.members.len();
        let Some(log) = self.log.as_mut() else { return Next::Finish };
        let changes = log.tracker.observe(r);
        let waiting = log.tracker.waiting_for().to_owned();
        if let Some(s) = self.shown.as_mut() {
            s.note.clone_from(&waiting);
        }
        for c in changes {
            match c {
                // The round that closes this window must show every member's counter.
                Change::HealthyList(_) if !r.has_all_metrics(n) => {
                    self.phase = Phase::ClosingRound;
                    return Next::Round { pages: Pages::Every, wait: None };
                }
                Change::HealthyList(_) => return self.end_disruption(None),
                Change::TimedOut(_) => {
                    let timeout = humantime::format_duration(self.plan.recovery_timeout);
                    return self.end_disruption(Some(Cut::new(format!(
                        "no healthy {n}-member endpoint list within {timeout} of the disruption (waiting for {waiting})"
                    ))));
                }
                _ => {}
            }
        }
        if log.tracker.outcome() == Some(Outcome::Healthy) {
            return self.end_disruption(None);
        }
        self.tick(self.plan.fast_interval, false)
    }

    /// A report from the disruptor: its event is a step of the disruption.
    fn report(&mut self, report: &DisruptorReport) {
        let Some(log) = self.log.as_mut() else { return };
        match report {
            DisruptorReport::Event(e) => log.steps.push(e.clone()),
            DisruptorReport::Attempts { attempts, blocked_s } => {
                log.attempts = *attempts;
                log.blocked_s = *blocked_s;
            }
        }
    }

    /// The disruptor's task ended by itself: its part is over, or it failed (the
    /// trial stops). `Some` cut when it failed.
    fn disruptor_ended(&mut self, end: &DisruptorEnd, now: Stamp) -> Option<Cut> {
        match end {
            DisruptorEnd::Done => {
                if let Some(log) = self.log.as_mut() {
                    log.tracker.disruptor_done();
                }
                None
            }
            DisruptorEnd::Failed(e) => {
                self.say(now, "", EventKind::DisruptionFailed, e.clone());
                Some(Cut::new(format!("the disruption failed: {e}")))
            }
            DisruptorEnd::Lost(e) => Some(Cut::new(format!("the disruptor task failed: {e}"))),
        }
    }

    /// The disruptor is stopped: settle, unless the disruption was cut short (a disruptor
    /// that failed as it was stopped wins: its error is the trial's).
    fn disruption_ended(
        &mut self,
        ended: Option<&DisruptorEnd>,
        reports: &[DisruptorReport],
        now: Stamp,
    ) -> Next {
        let Phase::EndingDisruption { cut } = std::mem::replace(&mut self.phase, Phase::Begin)
        else {
            return Next::Finish;
        };
        let failed = ended.and_then(|e| self.disruptor_ended(e, now));
        for r in reports {
            self.report(r);
        }
        match failed.or(cut) {
            Some(cut) => self.done(Some(cut)),
            None => {
                self.phase = Phase::OpeningSettle;
                Next::OpenWindow(WindowName::Settle)
            }
        }
    }

    /// A settle round, or the window just opened: settle ends once its window spans the
    /// settle time.
    fn settle(&mut self, engine: &Engine, restart: bool) -> Next {
        if engine.open_span_s() >= self.plan.settle.as_secs_f64() {
            return self.done(None);
        }
        self.tick(self.plan.interval, restart)
    }
}

impl Protocol for Trial {
    type Document = Baseline;

    fn step(&mut self, input: Input<'_>, now: Stamp, engine: &Engine) -> Next {
        let p = &self.plan;
        let (interval, fast) = (p.interval, p.fast_interval);
        if let Some(log) = self.log.as_mut()
            && let Input::Round { side, .. } = &input
        {
            log.steps.extend(side.iter().filter(|e| e.member == log.target.0).cloned());
        }
        match (&self.phase, input) {
            (_, Input::Signal) => self.signal(),
            (Phase::Begin, Input::Start) => self.start(now),
            (Phase::AtRest, Input::Tick) => {
                Next::Round { pages: Pages::Every, wait: Some(interval) }
            }
            (Phase::AtRest, Input::Round { round, .. }) => self.at_rest(round, engine, now),
            (Phase::ChoosingTarget { .. }, Input::Tick) => {
                Next::Round { pages: Pages::Every, wait: Some(fast) }
            }
            (Phase::ChoosingTarget { .. }, Input::Round { round, .. }) => {
                self.last = Some(round.clone());
                self.choose(now, false)
            }
            (Phase::OpeningDisruption, Input::WindowOpened) => self.disruption_opened(now, engine),
            (Phase::StartingCanary, Input::CanaryStarted { writes, lock }) => {
                self.canary_started(writes, lock, now, engine)
            }
            (&Phase::AwaitingCanary { since, wrote, granted }, Input::CanaryOps { ops, lock }) => {
                self.canary_ops((ops, lock), (since, wrote, granted), now, engine)
            }
            (Phase::Requesting, Input::Disrupting) => {
                self.phase = Phase::Recovering;
                self.tick(fast, true)
            }
            (Phase::Recovering, Input::Tick) => {
                Next::Round { pages: Pages::OnChange, wait: Some(fast) }
            }
            (Phase::Recovering, Input::Round { round, .. }) => self.recovering(round),
            (Phase::Recovering, Input::Report(r)) => {
                self.report(r);
                self.tick(fast, false)
            }
            (Phase::Recovering, Input::DisruptorEnded(end)) => {
                match self.disruptor_ended(&end, now) {
                    Some(cut) => self.end_disruption(Some(cut)),
                    None => self.tick(fast, false),
                }
            }
            (Phase::ClosingRound, Input::Round { .. }) => self.end_disruption(None),
            (Phase::EndingDisruption { .. }, Input::DisruptionEnded { ended, reports }) => {
                self.disruption_ended(ended.as_ref(), reports, now)
            }
            (Phase::OpeningSettle, Input::WindowOpened) => {
                self.phase = Phase::Settle;
                self.show("settle".to_owned(), Some(self.plan.settle), now);
                self.settle(engine, true)
            }
            (Phase::Settle, Input::Tick) => {
                Next::Round { pages: Pages::Every, wait: Some(interval) }
            }
            (Phase::Settle, Input::Round { .. }) => self.settle(engine, false),
            (phase, input) => self.done(Some(Cut::new(format!(
                "internal: the sitting got {input:?} in phase {phase:?}"
            )))),
        }
    }

    fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    fn shown(&self) -> Option<Shown> {
        self.shown.clone()
    }

    fn finish(mut self, engine: &mut Engine, run_id: &str, now: Stamp) -> Closing<Baseline> {
        let cut = match std::mem::replace(&mut self.phase, Phase::Begin) {
            Phase::Done { cut } => cut,
            phase => Some(Cut::new(format!("internal: finished in phase {phase:?}"))),
        };
        let (rows, windows) = engine.close_windows(cut.is_none());
        let plan = &self.plan;
        let disruption = self.log.take().map(|log| {
            let lost = log.tracker.lost.map_or(log.requested, |m| m.at);
            let writes_ok = engine.first_write_ok_after(lost);
            disruption_record(log, plan.method, &plan.members, writes_ok)
        });
        let mut environment = plan.environment.clone();
        environment.members = plan.members.iter().map(|m| m.0.clone()).collect();
        environment.etcd_versions = engine.versions().to_vec();
        environment.description =
            environment.description.replace("{etcd}", &environment.etcd_versions.join("/"));
        let baseline = Baseline {
            schema_version: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            run_id: run_id.to_owned(),
            status: if cut.is_none() { Completion::Complete } else { Completion::Incomplete },
            incomplete_reason: cut.as_ref().map(|c| c.reason.clone()),
            windows,
            disruption,
            environment,
            cause_horizon_s: Some(plan.cause_horizon.as_secs_f64()),
            lock_safety: engine.lock_safety(),
        };
        let ended = cut.as_ref().map_or("complete", |c| c.reason.as_str()).to_owned();
        self.say(now, "", EventKind::SittingEnded, ended);
        Closing { rows, events: self.take_events(), document: baseline, cut }
    }
}

#[cfg(test)]
mod tests;
