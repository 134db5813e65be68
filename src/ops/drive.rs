//! The one loop every command that samples runs (`sample`, `rehearse`, `measure`, and so
//! the in-cluster Job): a protocol ([`crate::analysis::trial`], the trial;
//! [`crate::analysis::sampling`], `sample`) says what to do next; the loop does it: waits
//! for ticks and signals, takes rounds, feeds them with the watchers' events, the canary's
//! ops and the disruptor's reports into the engine and the protocol, and hands every row
//! to the recorder. The run's set-up (exporter, run id, engine, recorder) is here once,
//! and so is the trial's ([`run_trial`]).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio::task::JoinHandle;
use tokio::time::{Interval, MissedTickBehavior};

use crate::analysis::engine::Engine;
use crate::analysis::protocol::{Closing, Cut, DisruptorEnd, Input, Next, Protocol};
use crate::analysis::recovery::Target;
use crate::analysis::trial::{Trial, TrialPlan};
use crate::io::canary::{Canary, CanaryConfig};
use crate::io::disrupt::{DisruptError, Disruptor, Reporter, Undo};
use crate::io::exporter::Exporter;
use crate::io::lock::{LockCanary, LockConfig};
use crate::io::probe::ProbeConfig;
use crate::io::recorder::{Recorder, new_run_id};
use crate::io::round::{Rounds, Sampler, probers};
use crate::io::run_dir::RecordError;
use crate::model::baseline::{BASELINE, Baseline, Environment, EnvironmentKind, WindowName};
use crate::model::canary::Op;
use crate::model::clock::Clock;
use crate::model::event::{DisruptorReport, Event, EventKind, Source};
use crate::model::lock::LockEvent;
use crate::model::member::{Member, MemberName};
use crate::model::observation::Round;
use crate::render::progress::Progress;
use crate::{Error, Result};

/// A tick every `every`; a late one is taken late, never twice.
pub fn ticker(every: Duration) -> Interval {
    let mut t = tokio::time::interval(every);
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t
}

/// The shutdown future, polled at most to completion once.
struct Stop<F> {
    fut: Pin<Box<F>>,
    fired: bool,
}

impl<F: Future<Output = ()>> Stop<F> {
    /// Resolves when the signal has come (at once if it already has).
    async fn wait(&mut self) {
        if !self.fired {
            (&mut self.fut).await;
            self.fired = true;
        }
    }
}

/// What every run is set up from.
#[derive(Debug, Clone)]
pub struct RunSetup {
    pub members: Vec<Member>,
    pub probe: ProbeConfig,
    pub out: PathBuf,
    /// The name of the run's first window (`sample`, `at_rest`).
    pub first_window: WindowName,
    /// How far before an election its cause is looked for.
    pub cause_horizon: Duration,
    /// Serve leaderwatch's own /metrics and /healthz here, at this round interval.
    pub metrics: Option<(SocketAddr, Duration)>,
    /// Members are reached at their pods' addresses: a `pod_ip` event from the watchers
    /// moves a member's prober, and the canary's connection, there from the next round.
    pub follow_pod_ips: bool,
    /// The lock canary, started with the write canary; `None`: off.
    pub lock: Option<LockConfig>,
}

/// The disruptor while it runs.
struct Running {
    task: Option<JoinHandle<Result<(), DisruptError>>>,
    reports: UnboundedReceiver<DisruptorReport>,
    reporter: Reporter,
    undo: Option<Undo>,
}

/// How a run ended: its document (already whole in memory, not yet written), whether it
/// was cut short, and the disruptor's own error if it failed (for its exit code).
pub struct Ended<T> {
    pub document: T,
    pub cut: Option<Cut>,
    pub disruptor_error: Option<Error>,
}

/// One run: its rounds, engine, recorder, signal, watchers' events and canary.
pub struct Drive<S: Rounds, F: Future<Output = ()>> {
    clock: Arc<dyn Clock>,
    rounds: S,
    engine: Engine,
    rec: Recorder,
    stop: Stop<F>,
    /// Events from watchers running beside the run (the Kubernetes side).
    side: Option<UnboundedReceiver<Event>>,
    canary: Option<Canary>,
    lock: Option<LockCanary>,
    setup: RunSetup,
    /// Bound before anything was written (a taken port is bad input, not a half-started
    /// run); fed once [`Drive::serve_metrics`] says so.
    exporter: Option<(Exporter, SocketAddr)>,
    progress: Option<(Progress, String)>,
}

impl<S: Rounds, F: Future<Output = ()>> Drive<S, F> {
    /// Binds the exporter, opens the run directory (what reopening found is its first
    /// events) and the engine with its first window.
    pub async fn open(
        setup: RunSetup,
        rounds: S,
        clock: Arc<dyn Clock>,
        side: Option<UnboundedReceiver<Event>>,
        shutdown: F,
    ) -> Result<Self> {
        let exporter = match setup.metrics {
            Some((addr, interval)) => Some(crate::io::exporter::start(addr, interval).await?),
            None => None,
        };
        let run_id = new_run_id(clock.as_ref());
        let engine = Engine::new(setup.first_window, setup.members.len(), setup.cause_horizon);
        let (rec, startup) = Recorder::open(&setup.out, &run_id, clock.as_ref())?;
        // What `leaderwatch sitting` reads in a Job's log: from here on, there is a run to fetch.
        eprintln!("{} {}", crate::k8s::follow::RUN_DIR_OPENED, setup.out.display());
        let mut d = Drive {
            clock,
            rounds,
            engine,
            rec,
            stop: Stop { fut: Box::pin(shutdown), fired: false },
            side,
            canary: None,
            lock: None,
            setup,
            exporter,
            progress: None,
        };
        d.events(&startup)?;
        Ok(d)
    }

    pub fn run_id(&self) -> &str {
        self.rec.run_id()
    }

    pub fn out(&self) -> &Path {
        &self.setup.out
    }

    /// Writes events (logged as they are written); the engine keeps them as evidence.
    pub fn events(&mut self, events: &[Event]) -> Result<(), RecordError> {
        self.engine.keep(events);
        self.rec.events(events)
    }

    /// `sample`'s daily files from now on.
    pub fn rotate_daily(&mut self, r: crate::io::rotate::Rotation) -> Result<(), RecordError> {
        self.rec.rotate_daily(r, self.clock.now())?;
        let notes = self.rec.take_notes();
        self.events(&notes)
    }

    /// From now on the exporter (if one is bound) is fed too; the address it serves on
    /// goes to events.csv.
    pub fn serve_metrics(&mut self) -> Result<(), RecordError> {
        let Some((e, bound)) = self.exporter.take() else { return Ok(()) };
        self.rec.export_to(e);
        let ev = Event::stamped(
            self.clock.stamp(),
            Source::Leaderwatch,
            "",
            EventKind::MetricsServing,
            format!("http://{bound}/metrics"),
        );
        self.events(&[ev])
    }

    /// Flushes the CSV files (with housekeeping's last notes) to disk, then writes `name`
    /// atomically.
    pub fn write_json<T: serde::Serialize>(
        &mut self,
        name: &str,
        value: &T,
    ) -> Result<PathBuf, RecordError> {
        let notes = self.rec.finish_housekeeping();
        self.events(&notes)?;
        self.rec.write_json(name, value)
    }

    /// Runs `protocol` to its end with `disruptor` (if it asks for one; its events in
    /// events.csv come from the given source) and writes its last rows; the document is
    /// the caller's to write.
    pub async fn run<P: Protocol, D: Disruptor>(
        &mut self,
        mut protocol: P,
        disruptor: Option<(D, Source)>,
    ) -> Result<Ended<P::Document>> {
        let mut disruptor = disruptor;
        let mut state = LoopState::default();
        let mut next = self.step(&mut protocol, Input::Start)?;
        loop {
            next = match next {
                Next::Tick { every, restart } => {
                    self.tick(&mut protocol, &mut state, every, restart).await?
                }
                Next::Round { pages, wait } => {
                    self.rounds.set_pages(pages);
                    match self.take_round(wait).await {
                        Some(r) => self.round(&mut protocol, &r)?,
                        None => self.step(&mut protocol, Input::Signal)?,
                    }
                }
                Next::StartCanary { every, timeout, say_deadline } => {
                    let writes = self.start_canary(every, timeout, say_deadline).await?;
                    let lock = self.lock.is_some();
                    self.step(&mut protocol, Input::CanaryStarted { writes, lock })?
                }
                Next::AwaitCanary { after } => {
                    if !after.is_zero() && !self.sleep(after).await {
                        self.step(&mut protocol, Input::Signal)?
                    } else {
                        let (ops, lock) = self.drain_canaries()?;
                        self.step(&mut protocol, Input::CanaryOps { ops: &ops, lock: &lock })?
                    }
                }
                Next::OpenWindow(name) => {
                    let rows = self.engine.next_window(true, name);
                    self.rec.health(&rows)?;
                    self.step(&mut protocol, Input::WindowOpened)?
                }
                Next::Disrupt { target, requested } => {
                    self.engine.hold_writes_from(requested);
                    match disruptor.take() {
                        Some((d, source)) => {
                            state.running = Some(self.spawn(d, source, target));
                            self.step(&mut protocol, Input::Disrupting)?
                        }
                        None => self.step(
                            &mut protocol,
                            Input::DisruptorEnded(DisruptorEnd::Lost("no disruptor".to_owned())),
                        )?,
                    }
                }
                Next::EndDisruption => self.end_disruption(&mut protocol, &mut state).await?,
                Next::Finish => break,
            };
        }
        self.finish(protocol, state.disruptor_error).await
    }

    /// One input to the protocol, stamped now: its events are written, and what a
    /// watcher sees is brought up to date.
    fn step<P: Protocol>(&mut self, p: &mut P, input: Input<'_>) -> Result<Next, RecordError> {
        let now = self.clock.stamp();
        let is_round = matches!(input, Input::Round { .. });
        let next = p.step(input, now, &self.engine);
        let events = p.take_events();
        self.events(&events)?;
        if let Some(shown) = p.shown() {
            let (progress, phase) =
                self.progress.get_or_insert_with(|| (Progress::new(), String::new()));
            if *phase != shown.phase {
                progress.phase(&shown.phase, shown.planned);
                phase.clone_from(&shown.phase);
            }
            if is_round {
                progress.tick(shown.since.mono.elapsed(), &shown.note);
            }
        }
        Ok(next)
    }

    /// Waits for the cadence's tick, a signal, a report from the disruptor or its end.
    async fn tick<P: Protocol>(
        &mut self,
        p: &mut P,
        state: &mut LoopState,
        every: Duration,
        restart: bool,
    ) -> Result<Next> {
        if restart || state.ticker.is_none() {
            state.ticker = Some(ticker(every));
        }
        let Some(tick) = state.ticker.as_mut() else { return Ok(Next::Finish) };
        let running = state.running.as_mut();
        let (reports, task) = match running {
            Some(r) => (Some(&mut r.reports), r.task.as_mut()),
            None => (None, None),
        };
        let has_task = task.is_some();
        tokio::select! {
            biased;
            _ = self.stop.wait() => Ok(self.step(p, Input::Signal)?),
            Some(report) = async { match reports { Some(rx) => rx.recv().await, None => std::future::pending().await } } => {
                if let DisruptorReport::Event(e) = &report {
                    self.events(std::slice::from_ref(e))?;
                }
                Ok(self.step(p, Input::Report(&report))?)
            }
            done = async { match task { Some(t) => t.await, None => std::future::pending().await } }, if has_task => {
                if let Some(r) = state.running.as_mut() {
                    r.task = None;
                }
                let end = ended(done, &mut state.disruptor_error);
                Ok(self.step(p, Input::DisruptorEnded(end))?)
            }
            _ = tick.tick() => Ok(self.step(p, Input::Tick)?),
        }
    }

    /// Waits `d`; false when a signal came first.
    async fn sleep(&mut self, d: Duration) -> bool {
        tokio::select! {
            biased;
            _ = self.stop.wait() => false,
            _ = tokio::time::sleep(d) => true,
        }
    }

    /// Takes a round that waits at most `wait` for each member (`None`: for all);
    /// `None` when a signal came first (also while the round was in flight).
    async fn take_round(&mut self, wait: Option<Duration>) -> Option<Round> {
        tokio::select! {
            biased;
            _ = self.stop.wait() => None,
            r = self.rounds.round_within(wait) => Some(r),
        }
    }

    /// Records a round in the open window, then the canary's ops and the watchers' events
    /// that arrived meanwhile; the protocol takes it.
    fn round<P: Protocol>(&mut self, p: &mut P, r: &Round) -> Result<Next> {
        self.rec.samples(r, self.engine.window().as_str())?;
        let notes = self.rec.take_notes();
        self.events(&notes)?;
        let made = self.engine.round(r);
        self.rec.round(r, &made)?;
        self.drain_canaries()?;
        let side: Vec<Event> = match self.side.as_mut() {
            Some(rx) => std::iter::from_fn(|| rx.try_recv().ok()).collect(),
            None => Vec::new(),
        };
        self.events(&side)?;
        if self.setup.follow_pod_ips {
            for e in side.iter().filter(|e| e.kind == EventKind::PodIp) {
                self.repoint(&e.member, &e.detail)?;
            }
        }
        Ok(self.step(p, Input::Round { round: r, side: &side })?)
    }

    /// The member `name` is now at `ip` (same scheme and port): its prober and the
    /// canary's connection are replaced. A member not in the run is ignored.
    fn repoint(&mut self, name: &str, ip: &str) -> Result<()> {
        let Some(old) = self.setup.members.iter().find(|m| m.name.0 == name) else {
            return Ok(());
        };
        let Some(member) = old.at_host(ip) else { return Ok(()) };
        self.rounds.repoint(&member, &self.setup.probe)?;
        if let Some(l) = self.lock.as_ref() {
            l.repoint(member.clone(), &self.setup.probe);
        }
        if let Some(c) = self.canary.as_ref() {
            c.repoint(member, &self.setup.probe);
        }
        Ok(())
    }

    /// Records the write canary's finished ops and the lock canary's events, and returns
    /// them.
    fn drain_canaries(&mut self) -> Result<(Vec<Op>, Vec<LockEvent>), RecordError> {
        let ops = self.canary.as_mut().map(Canary::drain).unwrap_or_default();
        self.canary_ops(&ops)?;
        let events = self.lock.as_mut().map(LockCanary::drain).unwrap_or_default();
        self.lock_events(&events)?;
        Ok((ops, events))
    }

    fn lock_events(&mut self, events: &[LockEvent]) -> Result<(), RecordError> {
        if events.is_empty() {
            return Ok(());
        }
        let rows = self.engine.lock(events);
        self.rec.locks(&rows)
    }

    /// Starts the lock canary if the run has one: a `lock_canary_started` row, or a
    /// `lock_canary_failed` row and none (the run goes on without it).
    async fn start_lock(&mut self) -> Result<(), RecordError> {
        let Some(cfg) = self.setup.lock.clone() else { return Ok(()) };
        let run_id = self.run_id().to_owned();
        let started = LockCanary::start(
            &self.setup.members,
            &self.setup.probe,
            cfg.clone(),
            &run_id,
            self.clock.clone(),
        )
        .await;
        let (kind, detail) = match started {
            Ok(l) => {
                self.engine.lock_started(self.clock.stamp(), cfg.hold);
                let detail = format!(
                    "{} holders on {}, lease TTL {} s, each holding {}",
                    cfg.holders,
                    l.prefix(),
                    cfg.ttl_s,
                    humantime::format_duration(cfg.hold)
                );
                self.lock = Some(l);
                (EventKind::LockCanaryStarted, detail)
            }
            Err(e) => (EventKind::LockCanaryFailed, e),
        };
        let ev = Event::stamped(self.clock.stamp(), Source::Leaderwatch, "", kind, detail);
        self.events(&[ev])
    }

    fn canary_ops(&mut self, ops: &[Op]) -> Result<(), RecordError> {
        let rows = self.engine.canary(ops);
        self.rec.canary(ops, &rows)
    }

    /// Starts the canary (one op of each kind every `every`, each within `timeout`): a
    /// `canary_started` row, or, when it cannot connect, a `canary_failed` row and no
    /// canary (the run's own figures do not need it). True when it runs.
    async fn start_canary(
        &mut self,
        every: Duration,
        timeout: Duration,
        say_deadline: bool,
    ) -> Result<bool, RecordError> {
        let run_id = self.run_id().to_owned();
        let cfg = CanaryConfig { every, timeout };
        let started =
            Canary::start(&self.setup.members, &self.setup.probe, cfg, &run_id, self.clock.clone())
                .await;
        let (kind, detail, canary) = match started {
            Ok(c) => {
                self.engine.canary_started(self.clock.stamp(), every);
                let mut detail = format!("{} every {}", c.key(), humantime::format_duration(every));
                if say_deadline {
                    detail.push_str(&format!(", deadline {}", humantime::format_duration(timeout)));
                }
                (EventKind::CanaryStarted, detail, Some(c))
            }
            Err(e) => (EventKind::CanaryFailed, e, None),
        };
        let ev = Event::stamped(self.clock.stamp(), Source::Leaderwatch, "", kind, detail);
        self.events(&[ev])?;
        let runs = canary.is_some();
        self.canary = canary;
        self.start_lock().await?;
        Ok(runs)
    }

    /// Starts the disruptor's task against `target`; its events come from `source`.
    fn spawn<D: Disruptor>(&mut self, d: D, source: Source, target: MemberName) -> Running {
        let (tx, reports) = mpsc::unbounded_channel();
        let reporter = Reporter::new(tx, self.clock.clone(), source);
        let undo = d.undo();
        let task = Some(tokio::spawn(d.disrupt(target, reporter.clone())));
        Running { task, reports, reporter, undo }
    }

    /// Stops the disruptor if it still runs and keeps every report it sent; puts back
    /// what it left (a cordoned node), also when it was cut short.
    async fn end_disruption<P: Protocol>(
        &mut self,
        p: &mut P,
        state: &mut LoopState,
    ) -> Result<Next> {
        let Some(mut running) = state.running.take() else {
            return Ok(self.step(p, Input::DisruptionEnded { ended: None, reports: &[] })?);
        };
        let mut end = None;
        if let Some(t) = running.task.take() {
            t.abort();
            // An aborted task ends in a JoinError: it did not end by itself.
            if let Ok(done) = t.await {
                end = Some(ended(Ok(done), &mut state.disruptor_error));
            }
        }
        if let Some(undo) = running.undo.take() {
            undo(running.reporter.clone()).await;
        }
        let mut reports = Vec::new();
        while let Ok(report) = running.reports.try_recv() {
            if let DisruptorReport::Event(e) = &report {
                self.events(std::slice::from_ref(e))?;
            }
            reports.push(report);
        }
        Ok(self.step(p, Input::DisruptionEnded { ended: end, reports: &reports })?)
    }

    /// The run is over: the rounds and the canary stop (its leases revoked, its last ops
    /// kept), the protocol assembles its document, and the last rows are written.
    async fn finish<P: Protocol>(
        &mut self,
        protocol: P,
        disruptor_error: Option<Error>,
    ) -> Result<Ended<P::Document>> {
        if let Some((progress, _)) = self.progress.as_mut() {
            progress.finish();
        }
        self.rounds.abort();
        if let Some(c) = self.canary.take() {
            let ops = c.stop().await;
            self.canary_ops(&ops)?;
        }
        if let Some(l) = self.lock.take() {
            let events = l.stop().await;
            self.lock_events(&events)?;
        }
        let run_id = self.run_id().to_owned();
        let Closing { rows, events, document, cut } =
            protocol.finish(&mut self.engine, &run_id, self.clock.stamp());
        self.rec.rows(&rows)?;
        self.events(&events)?;
        Ok(Ended { document, cut, disruptor_error })
    }
}

/// No disruptor: `sample` runs the loop without one (no value of this type exists).
pub enum NoDisruptor {}

impl Disruptor for NoDisruptor {
    fn method(&self) -> crate::model::baseline::DisruptionMethod {
        match *self {}
    }

    async fn disrupt(self, _: MemberName, _: Reporter) -> Result<(), DisruptError> {
        match self {}
    }
}

/// What the loop holds between its steps.
#[derive(Default)]
struct LoopState {
    ticker: Option<Interval>,
    running: Option<Running>,
    /// The disruptor's own error, kept for its exit code (e.g. a 403).
    disruptor_error: Option<Error>,
}

/// How a disruptor's task ended; its error is kept in `error`.
fn ended(
    done: std::result::Result<Result<(), DisruptError>, tokio::task::JoinError>,
    error: &mut Option<Error>,
) -> DisruptorEnd {
    match done {
        Ok(Ok(())) => DisruptorEnd::Done,
        Ok(Err(e)) => {
            let message = e.to_string();
            *error = Some(e.into());
            DisruptorEnd::Failed(message)
        }
        Err(e) => DisruptorEnd::Lost(e.to_string()),
    }
}

/// A trial's configuration, as `rehearse` and `measure` give it.
#[derive(Debug, Clone)]
pub struct TrialConfig {
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
    /// The lock canary, beside the canary (its ops get the canary's deadline); `None`: off.
    pub lock: Option<LockConfig>,
    /// Serve leaderwatch's own /metrics and /healthz here (`measure --metrics-addr`).
    pub metrics_addr: Option<SocketAddr>,
    /// Members are reached at their pods' addresses (`measure --reach pod-ip`).
    pub follow_pod_ips: bool,
}

/// `--target` names a member of the cluster (or is `leader` or `follower`): checked
/// before any window starts.
pub fn check_target(target: &Target, members: &[Member]) -> Result<()> {
    match target {
        Target::Name(n) if !members.iter().any(|m| &m.name == n) => {
            let names: Vec<&str> = members.iter().map(|m| m.name.0.as_str()).collect();
            Err(Error::Target(format!(
                "--target {n}: no such member (members: {})",
                names.join(", ")
            )))
        }
        _ => Ok(()),
    }
}

/// Runs one trial against the members and writes `baseline.json` however it ends. A
/// trial that was interrupted, whose disruption failed, or whose cluster did not
/// recover within `recovery_timeout` is written with `status: incomplete` and returns an
/// error ([`Error::Incomplete`], or the disruptor's own Kubernetes error, e.g. a 403).
pub async fn run_trial<D: Disruptor>(
    cfg: TrialConfig,
    disruptor: D,
    clock: Arc<dyn Clock>,
    side: Option<UnboundedReceiver<Event>>,
    shutdown: impl Future<Output = ()>,
) -> Result<Baseline> {
    let sampler = Sampler::new(probers(&cfg.members, &cfg.probe, &clock)?, clock.clone());
    run_trial_with(cfg, disruptor, sampler, clock, side, shutdown).await
}

/// [`run_trial`] with its rounds from `rounds` (the members, or a script in tests).
pub async fn run_trial_with<D: Disruptor, S: Rounds>(
    cfg: TrialConfig,
    disruptor: D,
    rounds: S,
    clock: Arc<dyn Clock>,
    side: Option<UnboundedReceiver<Event>>,
    shutdown: impl Future<Output = ()>,
) -> Result<Baseline> {
    check_target(&cfg.target, &cfg.members)?;
    let plan = TrialPlan {
        members: cfg.members.iter().map(|m| m.name.clone()).collect(),
        idle: cfg.idle,
        settle: cfg.settle,
        interval: cfg.interval,
        fast_interval: cfg.fast_interval,
        target: cfg.target,
        recovery_timeout: cfg.recovery_timeout,
        method: disruptor.method(),
        environment: cfg.environment,
        cause_horizon: cfg.cause_horizon,
        canary: cfg.canary,
    };
    // Who the disruptor's events come from, in events.csv.
    let source = match plan.environment.kind {
        EnvironmentKind::Local => Source::Local,
        EnvironmentKind::Kubernetes => Source::Kubernetes,
    };
    let setup = RunSetup {
        members: cfg.members,
        probe: cfg.probe,
        out: cfg.out,
        first_window: WindowName::AtRest,
        cause_horizon: cfg.cause_horizon,
        metrics: cfg.metrics_addr.map(|a| (a, cfg.interval)),
        follow_pod_ips: cfg.follow_pod_ips,
        lock: cfg.lock,
    };
    let mut drive = Drive::open(setup, rounds, clock, side, shutdown).await?;
    drive.serve_metrics()?;
    let ended = drive.run(Trial::new(plan), Some((disruptor, source))).await?;
    let path = drive.write_json(BASELINE, &ended.document)?;
    tracing::info!(baseline = %path.display(), status = %ended.document.status, "trial written");
    match (ended.cut, ended.disruptor_error) {
        (None, _) => Ok(ended.document),
        (Some(_), Some(e @ Error::Kube(_))) => Err(e),
        (Some(cut), _) => Err(Error::Incomplete(format!(
            "{}; what was measured is in {}",
            cut.reason,
            path.display()
        ))),
    }
}

/// A trial that ended, however: its baseline.json as written (with the rate), to print,
/// and how it ended.
pub struct Finished {
    pub written: Option<crate::model::rate::BaselineFile>,
    pub result: Result<()>,
}

/// What a trial left at `path` (baseline.json), from its result: the baseline with its
/// rate when it ended well; when not, the file it wrote since `since`, if any (never an
/// older run's).
pub fn finished(path: &Path, since: std::time::SystemTime, result: Result<Baseline>) -> Finished {
    match result {
        Ok(b) => match crate::io::read::with_rate(path, b) {
            Ok(f) => Finished { written: Some(f), result: Ok(()) },
            Err(e) => Finished { written: None, result: Err(e.into()) },
        },
        Err(e) => Finished { written: crate::io::read::written_since(path, since), result: Err(e) },
    }
}
