//! The vocabulary between a run's protocol and the one loop that carries it out
//! (src/ops/drive.rs): what the loop tells a protocol ([`Input`]) and what a protocol
//! asks the loop to do next ([`Next`]). A protocol is a pure state machine (the trial in
//! [`crate::analysis::trial`], `sample` in [`crate::analysis::sampling`]): no I/O, no
//! clock; the loop stamps every input with the time it happened.

use std::time::Duration;

use crate::analysis::cadence::Pages;
use crate::analysis::engine::{Engine, ToWrite};
use crate::model::baseline::WindowName;
use crate::model::canary::Op;
use crate::model::clock::Stamp;
use crate::model::event::{DisruptorReport, Event};
use crate::model::lock::LockEvent;
use crate::model::member::MemberName;
use crate::model::observation::Round;

/// What the loop tells a protocol, each with the instant it happened.
#[derive(Debug)]
pub enum Input<'a> {
    /// The run is set up: the first thing a protocol hears.
    Start,
    /// The tick asked for by [`Next::Tick`] came.
    Tick,
    /// The round asked for by [`Next::Round`], already taken in by the engine, with the
    /// watchers' events that arrived beside it (already recorded).
    Round { round: &'a Round, side: &'a [Event] },
    /// [`Next::StartCanary`] carried out: whether the write canary runs, and the lock
    /// canary (off, or failed to start: `false`).
    CanaryStarted { writes: bool, lock: bool },
    /// [`Next::AwaitCanary`] carried out: the canaries' ops and the lock canary's events
    /// since (already recorded).
    CanaryOps { ops: &'a [Op], lock: &'a [LockEvent] },
    /// [`Next::OpenWindow`] carried out.
    WindowOpened,
    /// [`Next::Disrupt`] carried out: the disruptor's task runs.
    Disrupting,
    /// A report from the running disruptor (already written to events.csv if an event).
    Report(&'a DisruptorReport),
    /// The disruptor's task ended by itself.
    DisruptorEnded(DisruptorEnd),
    /// [`Next::EndDisruption`] carried out: the disruptor is stopped and its undo has run;
    /// how its task ended if it ended by itself meanwhile, and the reports it sent since
    /// (already written).
    DisruptionEnded { ended: Option<DisruptorEnd>, reports: &'a [DisruptorReport] },
    /// SIGINT or SIGTERM.
    Signal,
}

/// How a disruptor's task ended by itself.
#[derive(Debug, Clone, PartialEq)]
pub enum DisruptorEnd {
    /// Its own part is over (restarted, thawed, the old pod gone).
    Done,
    /// It returned an error: the disruption failed.
    Failed(String),
    /// Its task panicked or was cancelled: a bug, not the cluster.
    Lost(String),
}

/// What the loop does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Wait for the next tick of a cadence of `every` (a new cadence whose first tick is at
    /// once when `restart`; a late tick is taken late, never twice), then [`Input::Tick`].
    /// Reports from a running disruptor and a signal are taken meanwhile.
    Tick { every: Duration, restart: bool },
    /// Take a round now, reading `/metrics` as `pages` says and waiting at most `wait` for
    /// each member (`None`: for every member's whole answer), then [`Input::Round`].
    Round { pages: Pages, wait: Option<Duration> },
    /// Start the write canary (and the lock canary, if the run has one): one op of each
    /// kind every `every`, each within `timeout`; its `canary_started` row says the
    /// deadline when `say_deadline`.
    StartCanary { every: Duration, timeout: Duration, say_deadline: bool },
    /// Wait `after` (or for a signal), then the canaries' ops: [`Input::CanaryOps`].
    AwaitCanary { after: Duration },
    /// Close the open window and open this one at its last round.
    OpenWindow(WindowName),
    /// Start the disruptor against `target`; the engine keeps every successful canary
    /// write from `requested` on (the waterfall's `writes_ok`).
    Disrupt { target: MemberName, requested: Stamp },
    /// Stop the disruptor if it still runs, run its undo, take its last reports.
    EndDisruption,
    /// The run is over: stop the rounds and the canary, then [`Protocol::finish`].
    Finish,
}

/// How long [`Next::AwaitCanary`] waits between two looks at the canary.
pub const CANARY_POLL: Duration = Duration::from_millis(10);

/// Why a run ended before its protocol did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub reason: String,
}

impl Cut {
    pub fn new(reason: impl Into<String>) -> Self {
        Cut { reason: reason.into() }
    }

    /// A signal came during `phase`.
    pub fn interrupted(phase: &str) -> Self {
        Cut::new(format!("interrupted by a signal during {phase}"))
    }
}

/// What a protocol leaves when the run is over: the rows and closing events to write, in
/// that order, and the document (baseline.json, summary.json) with whether it is whole.
#[derive(Debug)]
pub struct Closing<T> {
    pub rows: ToWrite,
    pub events: Vec<Event>,
    pub document: T,
    /// `None`: the protocol ran to its end.
    pub cut: Option<Cut>,
}

/// What a person watching sees of a protocol: its phase, how long it is planned to last
/// (`None`: until a condition), since when, and what it waits for.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub phase: String,
    pub planned: Option<Duration>,
    pub since: Stamp,
    pub note: String,
}

/// A run's protocol, as the loop drives it.
pub trait Protocol {
    /// What the run writes at its end (baseline.json, summary.json).
    type Document;

    /// Takes one input, seen at `now` (the engine shows the run so far), and answers what
    /// to do next.
    fn step(&mut self, input: Input<'_>, now: Stamp, engine: &Engine) -> Next;

    /// The events the protocol made since last asked (written by the loop, in order).
    fn take_events(&mut self) -> Vec<Event>;

    /// What a person watching sees now; `None`: nothing (a protocol with no phases).
    fn shown(&self) -> Option<Shown> {
        None
    }

    /// The run is over ([`Next::Finish`] carried out): the engine closes its windows and
    /// the protocol assembles its document.
    fn finish(self, engine: &mut Engine, run_id: &str, now: Stamp) -> Closing<Self::Document>;
}
