//! The measurement sitting, shared by `rehearse` and `measure`: three observation windows
//! around one disruption.
//!
//! ```text
//! at_rest (--idle, --interval) | disruption (request -> healthy, --fast-interval) | settle (--settle)
//! ```
//! The windows tile the run (src/analysis/windows.rs): every round is in exactly one, and each
//! starts from the state the previous one ended in. The disruptor runs as its own task and
//! reports over a channel; the recovery is judged by the pure [`RecoveryTracker`]; the loop
//! here only moves data between them and the recorder. From the request to the end of
//! settle the canary (src/io/canary.rs) writes and reads through one client, so that each
//! window and each election says what it cost a client. Whatever ends the sitting (a
//! signal, a failed disruption, no recovery), baseline.json is written with what was
//! measured, marked `incomplete`.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio::task::JoinHandle;

use crate::analysis::attribution::OWN;
use crate::analysis::cadence::Pages;
use crate::analysis::engine::Engine;
use crate::analysis::recovery::{Change, Outcome, RecoveryTracker, max_term};
use crate::io::canary::Canary;
use crate::io::disrupt::{Disruptor, Report, Reporter};
use crate::io::probe::ProbeConfig;
use crate::io::recorder::{Recorder, new_run_id};
use crate::io::round::{Rounds, Sampler, probers};
use crate::model::baseline::{
    BASELINE, Baseline, Disruption, DisruptionMethod, Environment, EnvironmentKind, GroundTruth,
    SCHEMA_VERSION, Status, Step, WindowName,
};
use crate::model::canary::Kind;
use crate::model::clock::{Clock, Stamp, mono_secs};
use crate::model::event::{Event, EventKind, Source};
use crate::model::member::{Member, MemberName};
use crate::model::observation::Round;
use crate::render::progress::Progress;
use crate::session::{Session, ticker};
use crate::{Error, Result};

pub use crate::analysis::recovery::{CATCH_UP_BOUND, Target, healthy_list, resolve_target};

/// How long the sitting keeps sampling (fast) for a single leader when at_rest ends.
pub const TARGET_WAIT: Duration = Duration::from_secs(10);
/// How long the request waits for the canary's first successful write.
pub const CANARY_READY: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct SittingConfig {
    pub members: Vec<Member>,
    pub idle: Duration,
    pub settle: Duration,
    pub interval: Duration,
    /// From the disruption until the settle window starts.
    pub fast_interval: Duration,
    pub target: Target,
    pub probe: ProbeConfig,
    pub out: PathBuf,
    /// Give up waiting for the healthy list after this long.
    pub recovery_timeout: Duration,
    /// Kind, description and timing; versions are filled in from the Status RPC.
    pub environment: Environment,
    /// How far before an election its cause is looked for.
    pub cause_horizon: Duration,
    /// The canary's deadline per op; `None`: no canary (`--canary off`).
    pub canary: Option<Duration>,
    /// Serve leaderwatch's own /metrics and /healthz here (`measure --metrics-addr`).
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Members are reached at their pods' addresses (`measure --reach pod-ip`): a pod
    /// recreated at a new address (a `pod_ip` event from the watchers) is probed, and
    /// written to by the canary, there from the next round.
    pub follow_pod_ips: bool,
}

/// Why a sitting ended early. `error` keeps a disruptor's own error for its exit code.
struct Cut {
    reason: String,
    error: Option<Error>,
}

impl Cut {
    fn new(reason: impl Into<String>) -> Self {
        Cut { reason: reason.into(), error: None }
    }
}

/// Why a phase did not run to its end.
enum Halt {
    /// The sitting was cut short: what was measured is still written.
    Cut(Cut),
    /// Recording itself failed (disk full): nothing more can be written.
    Failed(Error),
}

impl From<Cut> for Halt {
    fn from(c: Cut) -> Self {
        Halt::Cut(c)
    }
}

impl From<crate::io::record::RecordError> for Halt {
    fn from(e: crate::io::record::RecordError) -> Self {
        Halt::Failed(e.into())
    }
}

impl From<Error> for Halt {
    fn from(e: Error) -> Self {
        Halt::Failed(e)
    }
}

type Phase<T = ()> = std::result::Result<T, Halt>;

/// What the disruption phase learned; written into baseline.json however it ended.
struct DisruptionLog {
    target: MemberName,
    was_leader: bool,
    /// The leader when the disruption was requested: a routine operation replaces several
    /// members, and its record says which one led.
    leader: Option<MemberName>,
    /// Every member's name, for the routine operation's record.
    members: Vec<String>,
    method: DisruptionMethod,
    requested: Stamp,
    tracker: RecoveryTracker,
    /// The disruptor's own events and the watchers' events about the target.
    steps: Vec<Event>,
    attempts: u32,
    blocked_s: f64,
    /// Completions of the canary's successful writes (for `writes_ok` in the waterfall).
    write_oks: Vec<Stamp>,
}

struct Sitting<'a, S: Rounds, F: Future<Output = ()>> {
    cfg: &'a SittingConfig,
    clock: Arc<dyn Clock>,
    s: Session<S, F>,
    progress: Progress,
    /// The latest at_rest round: the target is chosen from it.
    last: Option<Round>,
    /// Highest raft term seen so far: a higher one after the request is an election.
    max_term: Option<u64>,
    log: Option<DisruptionLog>,
}

/// Runs one sitting and writes `baseline.json` however it ends. A sitting that was
/// interrupted, whose disruption failed, or whose cluster did not recover within
/// `recovery_timeout` is written with `status: incomplete` and returns an error
/// ([`Error::Incomplete`], or the disruptor's own error, e.g. a 403).
pub async fn run<D: Disruptor>(
    cfg: SittingConfig,
    disruptor: D,
    clock: Arc<dyn Clock>,
    side: Option<UnboundedReceiver<Event>>,
    shutdown: impl Future<Output = ()>,
) -> Result<Baseline> {
    cfg.target.check(&cfg.members).map_err(Error::Target)?;
    let sampler = Sampler::new(probers(&cfg.members, &cfg.probe, &clock)?, clock.clone());
    run_with(cfg, disruptor, sampler, clock, side, shutdown).await
}

/// [`run`] with its rounds from `rounds` (the members, or a script in tests).
pub async fn run_with<D: Disruptor, S: Rounds>(
    cfg: SittingConfig,
    disruptor: D,
    rounds: S,
    clock: Arc<dyn Clock>,
    side: Option<UnboundedReceiver<Event>>,
    shutdown: impl Future<Output = ()>,
) -> Result<Baseline> {
    cfg.target.check(&cfg.members).map_err(Error::Target)?;
    let run_id = new_run_id(clock.as_ref());
    let exporter = match cfg.metrics_addr {
        Some(addr) => Some(crate::io::exporter::start(addr, cfg.interval).await?),
        None => None,
    };
    let engine = Engine::new(WindowName::AtRest, cfg.members.len(), cfg.cause_horizon);
    let rec = Recorder::open(&cfg.out, &run_id, clock.as_ref())?;
    let mut session = Session::open(rec, engine, rounds, clock.clone(), side, shutdown)?;
    if let Some((e, bound)) = exporter {
        session.export_to(e, bound)?;
    }
    let mut s = Sitting {
        cfg: &cfg,
        clock: clock.clone(),
        s: session,
        progress: Progress::new(),
        last: None,
        max_term: None,
        log: None,
    };
    s.s.say(
        "",
        EventKind::SittingStarted,
        format!(
            "idle {}, settle {}, target {:?}",
            humantime::format_duration(cfg.idle),
            humantime::format_duration(cfg.settle),
            cfg.target
        ),
    )?;
    let ended = s.phases(disruptor).await;
    s.progress.finish();
    s.s.rounds.abort();
    // Revoke the canary's lease whatever ended the sitting, and keep its last ops.
    let ops = s.s.stop_canary().await?;
    s.write_oks(&ops);
    let ended = match ended {
        Ok(()) => None,
        Err(Halt::Cut(cut)) => Some(cut),
        Err(Halt::Failed(e)) => return Err(e),
    };
    s.finish(ended)
}

impl<S: Rounds, F: Future<Output = ()>> Sitting<'_, S, F> {
    /// The canary's successful writes, for `writes_ok` in the waterfall.
    fn write_oks(&mut self, ops: &[crate::model::canary::Op]) {
        if let Some(log) = self.log.as_mut() {
            log.write_oks
                .extend(ops.iter().filter(|o| o.ok && o.kind == Kind::Write).map(|o| o.done));
        }
    }

    /// Waits (recording its ops) until the canary has written once, at most `within`.
    async fn canary_ready(&mut self, within: Duration) -> Phase<bool> {
        let t0 = self.clock.stamp();
        loop {
            let ops = self.s.drain_canary()?;
            self.write_oks(&ops);
            if ops.iter().any(|o| o.ok && o.kind == Kind::Write) {
                return Ok(true);
            }
            if t0.mono.elapsed() >= within {
                return Ok(false);
            }
            tokio::select! {
                biased;
                _ = self.s.stopped() => return Err(interrupted("the disruption")),
                _ = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        }
    }

    /// The member `name` is now at `ip` (same scheme and port): its prober and the
    /// canary's connection are replaced. A member not in the sitting is ignored.
    fn repoint(&mut self, name: &str, ip: &str) -> Phase {
        let Some(old) = self.cfg.members.iter().find(|m| m.name.0 == name) else {
            return Ok(());
        };
        let Some(member) = old.at_host(ip) else { return Ok(()) };
        self.s.rounds.repoint(&member, &self.cfg.probe)?;
        if let Some(c) = self.s.canary.as_ref() {
            c.repoint(member, &self.cfg.probe);
        }
        Ok(())
    }

    /// Records a round (and the watchers' events and the canary's ops so far) in the open
    /// window.
    fn record(&mut self, r: &Round) -> Phase {
        let beside = self.s.record(r)?;
        self.write_oks(&beside.ops);
        if self.cfg.follow_pod_ips {
            for e in beside.side.iter().filter(|e| e.kind == EventKind::PodIp) {
                self.repoint(&e.member, &e.detail)?;
            }
        }
        if let Some(log) = self.log.as_mut() {
            log.steps.extend(beside.side.into_iter().filter(|e| e.member == log.target.0));
        }
        if let Some(t) = max_term(r) {
            self.max_term = Some(self.max_term.map_or(t, |m| m.max(t)));
        }
        Ok(())
    }

    async fn phases<D: Disruptor>(&mut self, disruptor: D) -> Phase {
        let cfg = self.cfg;
        // at_rest
        self.progress.phase("at_rest", Some(cfg.idle));
        let t0 = self.clock.stamp();
        let mut tick = ticker(cfg.interval);
        self.s.rounds.set_pages(Pages::Every);
        // Until the window itself spans --idle (its first round to its last): a loop on the
        // time since the phase began let the boundary round land a hair early (a 20 min
        // at_rest of 1199.9996 s, an 8 s rehearsal of 7.9995 s).
        while self.last.is_none() || self.s.engine.open_span_s() < cfg.idle.as_secs_f64() {
            let Some(r) = self.s.next_round(&mut tick, cfg.interval).await else {
                return Err(interrupted("at_rest"));
            };
            self.record(&r)?;
            self.last = Some(r); // what the target is chosen from
            self.progress.tick(t0.mono.elapsed(), "");
        }
        // The target, from live status; fast rounds (still at_rest) until one is clear.
        let mut tick = ticker(cfg.fast_interval);
        let choosing = self.clock.stamp();
        let (target, was_leader) = loop {
            let err = match self.last.as_ref().map(|r| resolve_target(&cfg.target, r)) {
                Some(Ok(t)) => break t,
                Some(Err(e)) => e,
                None => "no round yet".to_owned(),
            };
            if choosing.mono.elapsed() >= TARGET_WAIT {
                return Err(Halt::Cut(Cut::new(format!(
                    "cannot choose the target within {}: {err}",
                    humantime::format_duration(TARGET_WAIT)
                ))));
            }
            let Some(r) = self.s.next_round(&mut tick, cfg.fast_interval).await else {
                return Err(interrupted("at_rest"));
            };
            self.record(&r)?;
            self.last = Some(r); // what the target is chosen from
        };
        self.s.next_window(true, WindowName::Disruption)?;
        self.disruption(disruptor, target, was_leader).await?;
        // settle, from the round that closed the disruption
        self.s.next_window(true, WindowName::Settle)?;
        self.progress.phase("settle", Some(cfg.settle));
        let t1 = self.clock.stamp();
        let mut tick = ticker(cfg.interval);
        self.s.rounds.set_pages(Pages::Every);
        while self.s.engine.open_span_s() < cfg.settle.as_secs_f64() {
            let Some(r) = self.s.next_round(&mut tick, cfg.interval).await else {
                return Err(interrupted("settle"));
            };
            self.record(&r)?;
            self.progress.tick(t1.mono.elapsed(), "");
        }
        Ok(())
    }

    async fn disruption<D: Disruptor>(
        &mut self,
        disruptor: D,
        target: MemberName,
        was_leader: bool,
    ) -> Phase {
        let cfg = self.cfg;
        let n = cfg.members.len();
        let method = disruptor.method();
        if let Some(timeout) = cfg.canary {
            let every = cfg.fast_interval;
            let detail = |c: &Canary| {
                format!(
                    "{} every {}, deadline {}",
                    c.key(),
                    humantime::format_duration(every),
                    humantime::format_duration(timeout)
                )
            };
            // Its first write (a lease grant and a Put) lands before the request, so what
            // follows starts from a known-good client, not from its set-up. Without it the
            // sitting's own figures still stand: it goes on, and says so.
            if self.s.start_canary(&cfg.members, &cfg.probe, every, timeout, detail).await?
                && !self.canary_ready(CANARY_READY).await?
            {
                self.s.say(
                    "",
                    EventKind::CanaryNotReady,
                    format!(
                        "no successful canary write within {}; disrupting anyway",
                        humantime::format_duration(CANARY_READY)
                    ),
                )?;
            }
        }
        let requested = self.clock.stamp();
        let role = crate::model::baseline::role(was_leader);
        self.s.event(Event::stamped(
            requested,
            Source::Leaderwatch,
            &target.0,
            EventKind::DisruptionRequested,
            format!("{method} ({role})"),
        ))?;
        self.progress.phase(&format!("disruption of {target} ({method})"), None);
        let tracker =
            RecoveryTracker::new(target.clone(), n, requested, self.max_term, cfg.recovery_timeout);
        let leader = self
            .last
            .as_ref()
            .and_then(|r| resolve_target(&Target::Leader, r).ok())
            .map(|(m, _)| m);
        let members = cfg.members.iter().map(|m| m.name.0.clone()).collect();
        self.log = Some(DisruptionLog {
            target: target.clone(),
            was_leader,
            leader,
            members,
            method,
            requested,
            tracker,
            steps: Vec::new(),
            attempts: 0,
            blocked_s: 0.0,
            write_oks: Vec::new(),
        });

        let (tx, mut rx) = mpsc::unbounded_channel();
        let reporter = Reporter::new(tx, self.clock.clone(), source_of(&self.cfg.environment));
        let undo = disruptor.undo();
        let mut task: Option<JoinHandle<Result<()>>> =
            Some(tokio::spawn(disruptor.disrupt(target.clone(), reporter.clone())));
        let ended = self.recover(&mut rx, &mut task).await;
        // Whatever ended the phase, keep every report the disruptor sent.
        let mut finished = Ok(());
        if let Some(t) = task.take() {
            t.abort();
            if let Ok(done) = t.await {
                finished = self.disruptor_finished(done);
            }
        }
        // Put back what the disruptor left (a cordoned node), also when it was cut short.
        if let Some(undo) = undo {
            undo(reporter).await;
        }
        finished?;
        while let Ok(report) = rx.try_recv() {
            self.report(report)?;
        }
        ended
    }

    /// The disruption window: rounds at the fast interval until the tracker says healthy
    /// or timed out, driven beside the disruptor's reports.
    async fn recover(
        &mut self,
        rx: &mut UnboundedReceiver<Report>,
        task: &mut Option<JoinHandle<Result<()>>>,
    ) -> Phase {
        let cfg = self.cfg;
        let n = cfg.members.len();
        // Status every round; /health when its last answer may no longer hold; /metrics (the
        // expensive page) only from a member whose Status changed (src/analysis/cadence.rs).
        // Reading the page every round once the target was back cost each member ten pages
        // a second, and once a second still as much as Prometheus's whole scrape
        // (docs/benchmarks.md: observer cost).
        self.s.rounds.set_pages(Pages::OnChange);
        let mut tick = ticker(cfg.fast_interval);
        loop {
            tokio::select! {
                biased;
                _ = self.s.stopped() => return Err(interrupted("the disruption")),
                Some(report) = rx.recv() => { self.report(report)?; continue; }
                done = async { match task.as_mut() { Some(t) => t.await, None => std::future::pending().await } }, if task.is_some() => {
                    *task = None;
                    match done {
                        Ok(result) => self.disruptor_finished(result)?,
                        Err(e) => return Err(Cut::new(format!("the disruptor task failed: {e}")).into()),
                    }
                    continue;
                }
                _ = tick.tick() => {}
            }
            // The round that closes this window must show every member's counter: the extra
            // full round below sees to that.
            let Some(r) = self.s.take_round(Some(cfg.fast_interval)).await else {
                return Err(interrupted("the disruption"));
            };
            self.record(&r)?;
            let (changes, waiting) = match self.log.as_mut() {
                Some(log) => (log.tracker.observe(&r), log.tracker.waiting_for().to_owned()),
                None => (Vec::new(), String::new()),
            };
            let elapsed = self.log.as_ref().map_or(Duration::ZERO, |l| l.requested.mono.elapsed());
            self.progress.tick(elapsed, &waiting);
            for c in changes {
                match c {
                    Change::HealthyList(_) => {
                        if !r.has_all_metrics(n) {
                            // One more round, at once, that reads every counter: see above.
                            self.s.rounds.set_pages(Pages::Every);
                            let Some(r2) = self.s.take_round(None).await else {
                                return Err(interrupted("the disruption"));
                            };
                            self.record(&r2)?;
                        }
                        return Ok(());
                    }
                    Change::TimedOut(_) => {
                        tracing::warn!(
                            "no healthy {n}-member endpoint list within {}",
                            humantime::format_duration(cfg.recovery_timeout)
                        );
                        return Err(Cut::new(format!(
                            "no healthy {n}-member endpoint list within {} of the disruption (waiting for {waiting})",
                            humantime::format_duration(cfg.recovery_timeout)
                        ))
                        .into());
                    }
                    _ => {}
                }
            }
            if self.log.as_ref().is_some_and(|l| l.tracker.outcome() == Some(Outcome::Healthy)) {
                return Ok(());
            }
        }
    }

    /// One report from the disruptor: written at once.
    fn report(&mut self, report: Report) -> Phase {
        match report {
            Report::Event(e) => {
                self.s.event(e.clone())?;
                if let Some(log) = self.log.as_mut() {
                    log.steps.push(e);
                }
            }
            Report::Attempts { attempts, blocked_s } => {
                if let Some(log) = self.log.as_mut() {
                    log.attempts = attempts;
                    log.blocked_s = blocked_s;
                }
            }
        }
        Ok(())
    }

    /// The disruptor's task ended: its part is over, or it failed (the sitting stops).
    fn disruptor_finished(&mut self, result: Result<()>) -> Phase {
        match result {
            Ok(()) => {
                if let Some(log) = self.log.as_mut() {
                    log.tracker.disruptor_done();
                }
                Ok(())
            }
            Err(e) => {
                let reason = format!("the disruption failed: {e}");
                self.s.say("", EventKind::DisruptionFailed, e.to_string())?;
                Err(Cut { reason, error: Some(e) }.into())
            }
        }
    }

    /// Writes baseline.json and the closing event; returns the baseline or why it is
    /// incomplete.
    fn finish(mut self, cut: Option<Cut>) -> Result<Baseline> {
        let cfg = self.cfg;
        let windows = self.s.close_windows(cut.is_none())?;
        let disruption = self.log.take().map(disruption_record);
        let mut environment = cfg.environment.clone();
        environment.members = cfg.members.iter().map(|m| m.name.0.clone()).collect();
        environment.etcd_versions = self.s.engine.versions().to_vec();
        environment.description =
            environment.description.replace("{etcd}", &environment.etcd_versions.join("/"));
        let baseline = Baseline {
            schema_version: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            run_id: self.s.run_id().to_owned(),
            status: if cut.is_none() { Status::Complete } else { Status::Incomplete },
            incomplete_reason: cut.as_ref().map(|c| c.reason.clone()),
            windows,
            disruption,
            environment,
            cause_horizon_s: Some(cfg.cause_horizon.as_secs_f64()),
        };
        self.s.say(
            "",
            EventKind::SittingEnded,
            cut.as_ref().map_or("complete", |c| c.reason.as_str()).to_owned(),
        )?;
        let path = self.s.write_json(BASELINE, &baseline)?;
        tracing::info!(baseline = %path.display(), status = %baseline.status, "sitting written");
        match cut {
            None => Ok(baseline),
            Some(Cut { error: Some(e @ Error::Kube(_)), .. }) => Err(e),
            Some(Cut { reason, .. }) => Err(Error::Incomplete(format!(
                "{reason}; what was measured is in {}",
                path.display()
            ))),
        }
    }
}

fn interrupted(phase: &str) -> Halt {
    Halt::Cut(Cut::new(format!("interrupted by a signal during {phase}")))
}

/// Who the disruptor's events come from, in events.csv.
fn source_of(env: &Environment) -> Source {
    match env.kind {
        EnvironmentKind::Local => Source::Local,
        EnvironmentKind::Kubernetes => Source::Kubernetes,
    }
}

fn disruption_record(log: DisruptionLog) -> Disruption {
    let t = &log.tracker;
    let req = log.requested;
    let since = |s: &Stamp| req.secs_to(s);
    // An event's monotonic instant; a Kubernetes event only has the server's wall time,
    // placed against the request's wall time.
    // (Microseconds: milliseconds would put a server event up to 1 ms before a local one
    // that it follows on the wall clock.)
    let mono_of = |e: &Event| {
        e.at.map_or_else(
            || (e.ts - req.utc).num_microseconds().map_or(0.0, |us| us as f64 / 1e6),
            |a| mono_secs(req.mono, a),
        )
    };
    let ground_truth = log
        .steps
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
            let truth = mono_of(e);
            GroundTruth {
                kind: e.kind,
                at: e.ts,
                since_request_s: Some(truth),
                compared_with: compared.map(|(n, _)| n.to_owned()),
                measured_minus_truth_s: compared.map(|(_, m)| since(&m.at) - truth),
            }
        })
        .collect();
    let maintenance = log.method.kube_method().filter(|m| m.is_maintenance()).map(|op| {
        let own: Vec<(f64, &Event)> =
            log.steps.iter().filter(|e| e.at.is_some()).map(|e| (mono_of(e), e)).collect();
        crate::analysis::maintenance::record(
            op,
            &own,
            &log.members,
            log.leader.as_ref().map(|m| m.0.as_str()),
        )
    });
    let mut steps: Vec<(f64, chrono::DateTime<chrono::Utc>, String)> =
        vec![(0.0, req.utc, "requested".to_owned())];
    // A routine operation's steps name their member: several are replaced.
    let several = maintenance.is_some();
    steps.extend(log.steps.iter().map(|e| {
        (
            mono_of(e),
            e.ts,
            if several && !e.member.is_empty() {
                format!("{} {}", e.kind, e.member)
            } else {
                e.kind.to_string()
            },
        )
    }));
    for (m, label) in [
        (t.lost, "member_lost (measured)"),
        (t.back, "member_back (measured)"),
        (t.elected, "leader_elected (measured)"),
        (t.healthy, "healthy_list (measured)"),
    ] {
        if let Some(m) = m {
            steps.push((since(&m.at), m.at.utc, label.to_owned()));
        }
    }
    // The first canary write that completed after the member was lost (after the request
    // when its loss was not seen): when a lock could be granted again.
    let lost = t.lost.map_or(req, |m| m.at);
    if let Some(w) = log.write_oks.iter().filter(|w| w.mono > lost.mono).min_by_key(|w| w.mono) {
        steps.push((since(w), w.utc, "writes_ok (canary)".to_owned()));
    }
    steps.retain(|(s, _, _)| *s >= 0.0);
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut prev = 0.0;
    let waterfall = steps
        .into_iter()
        .map(|(s, at, step)| {
            let st = Step { step, at, since_previous_s: s - prev, since_request_s: s };
            prev = s;
            st
        })
        .collect();
    Disruption {
        target: log.target.0,
        target_was_leader: log.was_leader,
        method: log.method,
        requested_at: req.utc,
        member_lost_at: t.lost.map(|m| m.at.utc),
        member_back_at: t.back.map(|m| m.at.utc),
        leader_elected_at: t.elected.map(|m| m.at.utc),
        healthy_at: t.healthy.map(|m| m.at.utc),
        loss_to_healthy_s: t.lost.zip(t.healthy).map(|(a, b)| a.at.secs_to(&b.at)),
        request_to_healthy_s: t.healthy.map(|h| since(&h.at)),
        ground_truth,
        attempts: log.attempts,
        blocked_s: log.blocked_s,
        waterfall,
        maintenance,
    }
}
