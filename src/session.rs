//! One run, as `sample` and the sitting both drive it: rounds from a [`Rounds`] source,
//! the canary's ops and the watchers' events go into the [`Engine`], and what it makes
//! goes to the [`Recorder`]. The loop's steps (wait for the tick or a signal, take a
//! round, record it with everything that arrived beside it) are written here once; the
//! commands only say when to take which round.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::{Interval, MissedTickBehavior};

use crate::analysis::engine::Engine;
use crate::io::canary::{Canary, CanaryConfig};
use crate::io::exporter::Exporter;
use crate::io::probe::ProbeConfig;
use crate::io::record::RecordError;
use crate::io::recorder::Recorder;
use crate::io::round::Rounds;
use crate::model::baseline::{WindowName, WindowRecord};
use crate::model::canary::Op;
use crate::model::clock::Clock;
use crate::model::event::{Event, EventKind, Source};
use crate::model::member::Member;
use crate::model::observation::Round;

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

/// What was recorded beside a round: the canary's ops and the watchers' events.
#[derive(Debug, Default)]
pub struct Beside {
    pub ops: Vec<Op>,
    pub side: Vec<Event>,
}

pub struct Session<S: Rounds, F: Future<Output = ()>> {
    pub clock: Arc<dyn Clock>,
    pub rounds: S,
    pub engine: Engine,
    rec: Recorder,
    stop: Stop<F>,
    /// Events from watchers running beside the run (the Kubernetes side).
    side: Option<UnboundedReceiver<Event>>,
    pub canary: Option<Canary>,
}

impl<S: Rounds, F: Future<Output = ()>> Session<S, F> {
    /// Opens the run directory (what reopening found is its first events) and the engine
    /// with its first window.
    pub fn open(
        rec: (Recorder, Vec<Event>),
        engine: Engine,
        rounds: S,
        clock: Arc<dyn Clock>,
        side: Option<UnboundedReceiver<Event>>,
        shutdown: F,
    ) -> Result<Self, RecordError> {
        let (rec, startup) = rec;
        let mut s = Session {
            clock,
            rounds,
            engine,
            rec,
            stop: Stop { fut: Box::pin(shutdown), fired: false },
            side,
            canary: None,
        };
        s.events(&startup)?;
        Ok(s)
    }

    pub fn run_id(&self) -> &str {
        self.rec.run_id()
    }

    /// Writes events (logged as they are written); the engine keeps them as evidence.
    pub fn events(&mut self, events: &[Event]) -> Result<(), RecordError> {
        self.engine.keep(events);
        self.rec.events(events)
    }

    pub fn event(&mut self, e: Event) -> Result<(), RecordError> {
        self.events(std::slice::from_ref(&e))
    }

    /// A leaderwatch event, now.
    pub fn say(
        &mut self,
        member: &str,
        kind: EventKind,
        detail: impl Into<String>,
    ) -> Result<(), RecordError> {
        self.event(Event::stamped(self.clock.stamp(), Source::Leaderwatch, member, kind, detail))
    }

    /// `sample`'s daily files from now on.
    pub fn rotate_daily(&mut self, r: crate::io::rotate::Rotation) -> Result<(), RecordError> {
        self.rec.rotate_daily(r, self.clock.now())?;
        let notes = self.rec.take_notes();
        self.events(&notes)
    }

    /// From now on the exporter is fed too; the address it serves on goes to events.csv.
    pub fn export_to(
        &mut self,
        e: Exporter,
        bound: std::net::SocketAddr,
    ) -> Result<(), RecordError> {
        self.rec.export_to(e);
        self.say("", EventKind::MetricsServing, format!("http://{bound}/metrics"))
    }

    /// Waits for the next tick; false when a signal came first.
    pub async fn tick(&mut self, tick: &mut Interval) -> bool {
        tokio::select! {
            biased;
            _ = self.stop.wait() => false,
            _ = tick.tick() => true,
        }
    }

    /// Takes a round that waits at most `wait` for each member (`None`: for all);
    /// `None` when a signal came first (also while the round was in flight).
    pub async fn take_round(&mut self, wait: Option<Duration>) -> Option<Round> {
        tokio::select! {
            biased;
            _ = self.stop.wait() => None,
            r = self.rounds.round_within(wait) => Some(r),
        }
    }

    /// The next tick, then a round that waits at most `wait`; `None` on a signal.
    pub async fn next_round(&mut self, tick: &mut Interval, wait: Duration) -> Option<Round> {
        if !self.tick(tick).await {
            return None;
        }
        self.take_round(Some(wait)).await
    }

    /// Resolves when the signal has come.
    pub async fn stopped(&mut self) {
        self.stop.wait().await
    }

    /// Records a round in the open window, then the canary's ops and the watchers' events
    /// that arrived meanwhile (returned, for the sitting's own bookkeeping).
    pub fn record(&mut self, r: &Round) -> Result<Beside, RecordError> {
        self.rec.samples(r, self.engine.window().as_str())?;
        let notes = self.rec.take_notes();
        self.events(&notes)?;
        let made = self.engine.round(r);
        self.rec.round(r, &made)?;
        let ops = self.drain_canary()?;
        let side: Vec<Event> = match self.side.as_mut() {
            Some(rx) => std::iter::from_fn(|| rx.try_recv().ok()).collect(),
            None => Vec::new(),
        };
        self.events(&side)?;
        Ok(Beside { ops, side })
    }

    /// Records the canary's finished ops and returns them.
    pub fn drain_canary(&mut self) -> Result<Vec<Op>, RecordError> {
        let ops = self.canary.as_mut().map(Canary::drain).unwrap_or_default();
        self.canary_ops(&ops)?;
        Ok(ops)
    }

    fn canary_ops(&mut self, ops: &[Op]) -> Result<(), RecordError> {
        let rows = self.engine.canary(ops);
        self.rec.canary(ops, &rows)
    }

    /// Starts the canary (one op of each kind every `every`, each within `timeout`): a
    /// `canary_started` row with `detail`, or, when it cannot connect, a `canary_failed`
    /// row and no canary (the run's own figures do not need it). True when it runs.
    pub async fn start_canary(
        &mut self,
        members: &[Member],
        probe: &ProbeConfig,
        every: Duration,
        timeout: Duration,
        detail: impl FnOnce(&Canary) -> String,
    ) -> Result<bool, RecordError> {
        let run_id = self.run_id().to_owned();
        let cfg = CanaryConfig { every, timeout };
        match Canary::start(members, probe, cfg, &run_id, self.clock.clone()).await {
            Ok(c) => {
                self.engine.canary_started(self.clock.stamp(), every);
                self.say("", EventKind::CanaryStarted, detail(&c))?;
                self.canary = Some(c);
                Ok(true)
            }
            Err(e) => {
                self.say("", EventKind::CanaryFailed, e)?;
                Ok(false)
            }
        }
    }

    /// Stops the canary (its leases revoked) and records its last ops, which come back.
    pub async fn stop_canary(&mut self) -> Result<Vec<Op>, RecordError> {
        let Some(c) = self.canary.take() else { return Ok(Vec::new()) };
        let ops = c.stop().await;
        self.canary_ops(&ops)?;
        Ok(ops)
    }

    /// Closes the open window and opens `next` at its last round.
    pub fn next_window(&mut self, full_length: bool, next: WindowName) -> Result<(), RecordError> {
        let rows = self.engine.next_window(full_length, next);
        self.rec.health(&rows)
    }

    /// Closes the open window, gives every election its cause, and returns every window.
    pub fn close_windows(&mut self, full_length: bool) -> Result<Vec<WindowRecord>, RecordError> {
        let (rows, windows) = self.engine.close_windows(full_length);
        self.rec.rows(&rows)?;
        Ok(windows)
    }

    /// Flushes the CSV files (with housekeeping's last notes) to disk, then writes `name`
    /// atomically.
    pub fn write_json<T: serde::Serialize>(
        &mut self,
        name: &str,
        value: &T,
    ) -> Result<std::path::PathBuf, RecordError> {
        let notes = self.rec.finish_housekeeping();
        self.events(&notes)?;
        self.rec.write_json(name, value)
    }
}
