//! The sitting's protocol as a pure state machine: three observation windows around one
//! disruption, as `rehearse`, `measure` and the in-cluster Job run it.
//!
//! ```text
//! at_rest (idle, interval) -> choose the target (fast rounds, at most TARGET_WAIT)
//!   -> disruption (canary ready, request, recovery to the healthy list, fast rounds)
//!   -> settle (settle, interval) -> done
//! ```
//! Fed the engine's state and what the loop saw (rounds, the disruptor's reports and its
//! end, the canary's first ops, a signal), it answers what to do next ([`Next`]). It owns
//! the recovery tracking, the ground truth, the waterfall and baseline.json's assembly;
//! whatever ends the sitting (a signal, a failed disruption, no recovery), the baseline is
//! assembled from what was measured, marked `incomplete`. No I/O and no clock.

use std::time::Duration;

use crate::analysis::attribution::OWN;
use crate::analysis::cadence::Pages;
use crate::analysis::engine::Engine;
use crate::analysis::protocol::{
    CANARY_POLL, Closing, Cut, DisruptorEnd, Input, Next, Protocol, Shown,
};
use crate::analysis::recovery::{Change, Outcome, RecoveryTracker, Target, resolve_target};
use crate::model::baseline::{
    Baseline, Completion, Disruption, DisruptionMethod, Environment, GroundTruth, Maintenance,
    SCHEMA_VERSION, Step, WindowName, role,
};
use crate::model::canary::{Kind, Op};
use crate::model::clock::{Stamp, mono_secs};
use crate::model::event::{DisruptorReport, Event, EventKind, Source};
use crate::model::member::MemberName;
use crate::model::observation::Round;

/// The spec's observation window: a real sitting (`measure`) is never shorter.
pub const MIN_IDLE: Duration = Duration::from_secs(20 * 60);
/// How long the sitting keeps sampling (fast) for a single leader when at_rest ends.
pub const TARGET_WAIT: Duration = Duration::from_secs(10);
/// How long the request waits for the canary's first successful write.
pub const CANARY_READY: Duration = Duration::from_secs(5);

/// What the sitting is asked to do: its windows, cadences and target.
#[derive(Debug, Clone)]
pub struct SittingPlan {
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

/// Where the sitting is.
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
    AwaitingCanary {
        since: Stamp,
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

/// What the disruption phase learned; in baseline.json however it ended.
#[derive(Debug)]
struct DisruptionLog {
    target: MemberName,
    was_leader: bool,
    /// The leader when the disruption was requested: a routine operation replaces several
    /// members, and its record says which one led.
    leader: Option<MemberName>,
    requested: Stamp,
    tracker: RecoveryTracker,
    /// The disruptor's own events and the watchers' events about the target.
    steps: Vec<Event>,
    attempts: u32,
    blocked_s: f64,
}

/// The sitting's state machine ([`Protocol`]).
#[derive(Debug)]
pub struct Sitting {
    plan: SittingPlan,
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

impl Sitting {
    pub fn new(plan: SittingPlan) -> Self {
        Sitting {
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

    /// Ends the sitting at once (no disruptor runs).
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

    /// A signal: the sitting ends, after the disruptor is stopped if it runs.
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

    /// The canary's ops while waiting for its first successful write. Without one the
    /// sitting's own figures still stand: it goes on, and says so.
    fn canary_ops(&mut self, ops: &[Op], since: Stamp, now: Stamp, engine: &Engine) -> Next {
        if ops.iter().any(|o| o.ok && o.kind == Kind::Write) {
            return self.request(now, engine);
        }
        if since.secs_to(&now) < CANARY_READY.as_secs_f64() {
            return Next::AwaitCanary { after: CANARY_POLL };
        }
        let detail = format!(
            "no successful canary write within {}; disrupting anyway",
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

impl Sitting {
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
    /// sitting stops). `Some` cut when it failed.
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
    /// that failed as it was stopped wins: its error is the sitting's).
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

impl Protocol for Sitting {
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
            (Phase::StartingCanary, Input::CanaryStarted(true)) => {
                self.phase = Phase::AwaitingCanary { since: now };
                Next::AwaitCanary { after: Duration::ZERO }
            }
            (Phase::StartingCanary, Input::CanaryStarted(false)) => self.request(now, engine),
            (&Phase::AwaitingCanary { since }, Input::CanaryOps(ops)) => {
                self.canary_ops(ops, since, now, engine)
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
            disruption_record(log, plan, &plan.members, writes_ok)
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
        };
        let ended = cut.as_ref().map_or("complete", |c| c.reason.as_str()).to_owned();
        self.say(now, "", EventKind::SittingEnded, ended);
        Closing { rows, events: self.take_events(), document: baseline, cut }
    }
}

/// An event's instant in seconds since the request. A Kubernetes event only has the
/// server's wall time, placed against the request's wall time (in microseconds: in
/// milliseconds a server event could land up to 1 ms before a local one it follows).
fn since_request(req: Stamp, e: &Event) -> f64 {
    e.at.map_or_else(
        || (e.ts - req.utc).num_microseconds().map_or(0.0, |us| us as f64 / 1e6),
        |a| mono_secs(req.mono, a),
    )
}

/// The disruptor's own instants, each against what the rounds measured of it.
fn ground_truth(log: &DisruptionLog) -> Vec<GroundTruth> {
    let t = &log.tracker;
    let req = log.requested;
    log.steps
        .iter()
        // The disruptor's own instants (the watchers' events have no monotonic instant).
        .filter(|e| e.at.is_some())
        .map(|e| {
            let compared = match e.kind {
                k if OWN.contains(&k) && e.member == log.target.0 => {
                    t.lost.map(|m| ("member_lost_at", m))
                }
                EventKind::Restarted | EventKind::Continued => {
                    t.back.map(|m| ("member_back_at", m))
                }
                _ => None,
            };
            let truth = since_request(req, e);
            GroundTruth {
                kind: e.kind,
                at: e.ts,
                since_request_s: Some(truth),
                compared_with: compared.map(|(n, _)| n.to_owned()),
                measured_minus_truth_s: compared.map(|(_, m)| req.secs_to(&m.at) - truth),
            }
        })
        .collect()
}

/// A routine operation's record (a rolling restart, a drain: several members replaced).
fn maintenance(
    log: &DisruptionLog,
    method: DisruptionMethod,
    members: &[MemberName],
) -> Option<Maintenance> {
    let op = method.kube_method().filter(|m| m.is_maintenance())?;
    let own: Vec<(f64, &Event)> = log
        .steps
        .iter()
        .filter(|e| e.at.is_some())
        .map(|e| (since_request(log.requested, e), e))
        .collect();
    let names: Vec<String> = members.iter().map(|m| m.0.clone()).collect();
    Some(crate::analysis::maintenance::record(
        op,
        &own,
        &names,
        log.leader.as_ref().map(|m| m.0.as_str()),
    ))
}

/// Every step of the disruption in order, from the request: the disruptor's, the
/// watchers', what the rounds measured, and the canary's first write after the loss.
fn waterfall(log: &DisruptionLog, several: bool, writes_ok: Option<Stamp>) -> Vec<Step> {
    let t = &log.tracker;
    let req = log.requested;
    let mut steps: Vec<(f64, chrono::DateTime<chrono::Utc>, String)> =
        vec![(0.0, req.utc, "requested".to_owned())];
    // A routine operation's steps name their member: several are replaced.
    steps.extend(log.steps.iter().map(|e| {
        let name = if several && !e.member.is_empty() {
            format!("{} {}", e.kind, e.member)
        } else {
            e.kind.to_string()
        };
        (since_request(req, e), e.ts, name)
    }));
    for (m, label) in [
        (t.lost, "member_lost (measured)"),
        (t.back, "member_back (measured)"),
        (t.elected, "leader_elected (measured)"),
        (t.healthy, "healthy_list (measured)"),
    ] {
        if let Some(m) = m {
            steps.push((req.secs_to(&m.at), m.at.utc, label.to_owned()));
        }
    }
    // When a lock could be granted again.
    if let Some(w) = writes_ok {
        steps.push((req.secs_to(&w), w.utc, "writes_ok (canary)".to_owned()));
    }
    steps.retain(|(s, _, _)| *s >= 0.0);
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut prev = 0.0;
    steps
        .into_iter()
        .map(|(s, at, step)| {
            let st = Step { step, at, since_previous_s: s - prev, since_request_s: s };
            prev = s;
            st
        })
        .collect()
}

/// baseline.json's `disruption`: what the disruption phase learned, however it ended.
/// `writes_ok`: the canary's first successful write after the member was lost (after the
/// request when its loss was not seen).
fn disruption_record(
    log: DisruptionLog,
    plan: &SittingPlan,
    members: &[MemberName],
    writes_ok: Option<Stamp>,
) -> Disruption {
    let maintenance = maintenance(&log, plan.method, members);
    let waterfall = waterfall(&log, maintenance.is_some(), writes_ok);
    let ground_truth = ground_truth(&log);
    let t = &log.tracker;
    let req = log.requested;
    Disruption {
        target: log.target.0.clone(),
        target_was_leader: log.was_leader,
        method: plan.method,
        requested_at: req.utc,
        member_lost_at: t.lost.map(|m| m.at.utc),
        member_back_at: t.back.map(|m| m.at.utc),
        leader_elected_at: t.elected.map(|m| m.at.utc),
        healthy_at: t.healthy.map(|m| m.at.utc),
        loss_to_healthy_s: t.lost.zip(t.healthy).map(|(a, b)| a.at.secs_to(&b.at)),
        request_to_healthy_s: t.healthy.map(|h| req.secs_to(&h.at)),
        ground_truth,
        attempts: log.attempts,
        blocked_s: log.blocked_s,
        waterfall,
        maintenance,
    }
}

#[cfg(test)]
mod tests {
    //! The phases one by one, driven as the loop drives them (the engine takes each round
    //! first); tests/check/sitting_script.rs runs whole sittings through the real loop.

    use super::*;
    use crate::model::baseline::{EnvironmentKind, LocalMethod};
    use crate::model::metrics::MemberMetrics;
    use crate::model::observation::{Health, Observation, Part, Status};
    use chrono::{TimeZone, Utc};

    const SECOND: Duration = Duration::from_secs(1);
    const FAST: Duration = Duration::from_millis(100);

    fn plan(canary: Option<Duration>) -> SittingPlan {
        SittingPlan {
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

    /// A sitting and its engine, fed as the loop feeds them, on a clock of its own.
    struct Bench {
        sitting: Sitting,
        engine: Engine,
        base: tokio::time::Instant,
        t: f64,
        index: u64,
    }

    impl Bench {
        fn new(canary: Option<Duration>) -> Bench {
            Bench {
                sitting: Sitting::new(plan(canary)),
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
            self.sitting.step(input, now, &self.engine)
        }

        /// A round at the bench's time, taken in by the engine, then by the sitting.
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

        /// Rounds at `every` until the sitting asks for something other than the next
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
            self.sitting.take_events().iter().map(|e| e.kind).collect()
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
            assert_eq!(
                b.step(Input::Tick),
                Next::Round { pages: Pages::Every, wait: Some(SECOND) }
            );
            next = b.round(AT_REST);
            rounds += 1;
        }
        // Rounds at 0..=5 s: the window spans 5 s at the sixth.
        assert_eq!((rounds, next), (6, Next::OpenWindow(WindowName::Disruption)));
        assert_eq!(b.sitting.chosen, Some((MemberName("m0".to_owned()), true)));
        let shown = b.sitting.shown().expect("shown");
        assert_eq!(
            (shown.phase.as_str(), shown.planned),
            ("at_rest", Some(Duration::from_secs(5)))
        );
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
            b.sitting.finish(&mut b.engine, "run", now)
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
        assert_eq!(b.step(Input::CanaryStarted(true)), Next::AwaitCanary { after: Duration::ZERO });
        assert_eq!(b.step(Input::CanaryOps(&[])), Next::AwaitCanary { after: CANARY_POLL });
        b.t += CANARY_READY.as_secs_f64();
        b.kinds();
        let next = b.step(Input::CanaryOps(&[]));
        assert!(matches!(next, Next::Disrupt { ref target, .. } if target.0 == "m0"), "{next:?}");
        assert_eq!(b.kinds(), [EventKind::CanaryNotReady, EventKind::DisruptionRequested]);

        // A canary that cannot connect: the request at once.
        let mut b = Bench::new(Some(timeout));
        b.through_to_request();
        assert!(matches!(b.step(Input::CanaryStarted(false)), Next::Disrupt { .. }));
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
            b.sitting.finish(&mut b.engine, "run", now)
        };
        assert_eq!(c.cut, None);
        let base = c.document;
        assert_eq!(base.status, Completion::Complete);
        let names: Vec<WindowName> = base.windows.iter().map(|w| w.name).collect();
        assert_eq!(names, [WindowName::AtRest, WindowName::Disruption, WindowName::Settle]);
        assert_eq!(base.environment.description, "unit, etcd 3.6.14");
        let d = base.disruption.expect("the disruption");
        assert_eq!((d.target.as_str(), d.target_was_leader), ("m0", true));
        assert!(
            d.member_lost_at.is_some() && d.leader_elected_at.is_some() && d.healthy_at.is_some()
        );
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
            b.sitting.finish(&mut b.engine, "run", now)
        };
        assert_eq!(
            c.cut.map(|c| c.reason),
            Some("the disruption failed: 403 forbidden".to_owned())
        );
        let d = c.document.disruption.expect("kept");
        assert_eq!((d.attempts, d.blocked_s), (3, 2.5), "the last reports are kept");
    }

    fn cut_reason(mut b: Bench) -> String {
        let now = b.now();
        let c = b.sitting.finish(&mut b.engine, "run", now);
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
}
