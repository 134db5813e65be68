//! All members at once -> one [`Round`]. Each member's probe runs as its own task, so a
//! member that does not answer (frozen, black-holed, a hung port-forward) holds back only
//! itself: a round waits at most its cadence, records that member as [`Silent`], and its
//! answer (or its timeout) lands in a later round with its age. Every member's answers
//! (its `/metrics` page, `/health` and Status) are first read at one instant of the round,
//! learned from the rounds before ([`ReadWait`]), so they cost one wakeup between them;
//! each is still timed to when it came (the kernel's receive stamp).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::analysis::cadence::{Arrival, Cadence, Pages, ReadWait};
use crate::io::http::pace::{Pace, Paced};
use crate::io::probe::{ProbeConfig, Prober, http_tls};
use crate::model::clock::{Clock, Stamp};
use crate::model::member::Member;
use crate::model::observation::{Observation, Part, Round, Silent};

/// How many rounds of `round_every` make one read of `/metrics` every `page_every` (at
/// least 1): the page is what costs etcd the most to serve, so it may be read less often.
pub fn rounds_per_page(page_every: Duration, round_every: Duration) -> u64 {
    (page_every.as_nanos() / round_every.as_nanos().max(1)).max(1) as u64
}

/// How often a member's answers are read once their first read found one unfinished
/// (tokio's timer tick): the round then ends at most this much later, which no figure
/// depends on (each answer is timed to when it came).
const READ_POLL: Duration = Duration::from_millis(1);

/// The longest a round's answers wait for their first read, whatever the rounds before
/// said: an answer that slow is read by polling ([`READ_POLL`]) anyway.
const READ_WAIT_CAP: Duration = Duration::from_millis(500);

/// The probes cannot be set up from what was given: a TLS file missing or not PEM, a
/// member's URL. Nothing was started.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SetupError(pub String);

/// Builds one prober per member (bad TLS files are reported here, before any round).
pub fn probers(
    members: &[Member],
    cfg: &ProbeConfig,
    clock: &Arc<dyn Clock>,
) -> Result<Vec<Prober>, SetupError> {
    let tls = http_tls(cfg, members).map_err(SetupError)?;
    members
        .iter()
        .map(|m| {
            Prober::new(m.clone(), tls.clone(), cfg.clone(), clock.clone()).map_err(SetupError)
        })
        .collect()
}

/// Where a run's rounds come from: the members themselves ([`Sampler`]), or, in the
/// loops' unit tests, a script. The loop (src/ops/drive.rs) sees only this.
pub trait Rounds: Send {
    /// A round that waits at most `wait` for each member (`None`: for every answer).
    fn round_within(&mut self, wait: Option<Duration>) -> impl Future<Output = Round> + Send;

    /// When the probes started from now on read `/metrics`.
    fn set_pages(&mut self, pages: Pages);

    /// The index the next round will have.
    fn next_index(&self) -> u64;

    /// `member` (known by its name) is now reached at its new address.
    fn repoint(&mut self, member: &Member, cfg: &ProbeConfig) -> Result<(), SetupError>;

    /// Stops every probe in flight (at the end of a run).
    fn abort(&mut self);
}

/// What a probe task returns: its observation, and how its page was read.
type Probed = (Observation, Option<Paced>);

/// When a round's answers are first read: rounds that read pages wait for them, rounds
/// that do not would wait for nothing, so each kind learns its own.
#[derive(Debug)]
struct ReadWaits {
    with_pages: ReadWait,
    without: ReadWait,
}

impl ReadWaits {
    fn of(&mut self, with_pages: bool) -> &mut ReadWait {
        if with_pages { &mut self.with_pages } else { &mut self.without }
    }
}

/// One member's prober, its probe in flight, if any, and what its probes learned so far
/// (what the next one needs to ask).
struct Slot {
    prober: Arc<Prober>,
    inflight: Option<(JoinHandle<Probed>, Stamp)>,
    cadence: Cadence,
}

/// The probers of every member, their probes in flight, and the round counter.
pub struct Sampler {
    slots: Vec<Slot>,
    next: u64,
    pages: Pages,
    /// When a round's answers are first read: every member's in the same wakeup.
    waits: ReadWaits,
    clock: Arc<dyn Clock>,
}

impl Sampler {
    pub fn new(probers: Vec<Prober>, clock: Arc<dyn Clock>) -> Self {
        let pages = if probers.first().is_none_or(|p| p.default_with_metrics()) {
            Pages::Every
        } else {
            Pages::Skip
        };
        let slots = probers
            .into_iter()
            .map(|p| Slot { prober: Arc::new(p), inflight: None, cadence: Cadence::default() })
            .collect();
        let waits = ReadWaits {
            with_pages: ReadWait::new(READ_WAIT_CAP),
            without: ReadWait::new(READ_WAIT_CAP),
        };
        Sampler { slots, next: 0, pages, waits, clock }
    }

    /// Replaces the prober of the member of the same name (a pod recreated at a new
    /// address): probes start at the new address from the next round; one in flight at
    /// the old address is still collected. Returns false when no member has that name.
    pub fn replace(&mut self, prober: Prober) -> bool {
        match self.slots.iter_mut().find(|s| s.prober.member().name == prober.member().name) {
            Some(slot) => {
                slot.prober = Arc::new(prober);
                slot.cadence = Cadence::default(); // a new process: nothing of the old holds
                true
            }
            None => false,
        }
    }

    /// When the probes started from now on read `/metrics` (less often during fast
    /// sampling: the counter is cumulative and the full page is the expensive part for etcd).
    pub fn set_pages(&mut self, pages: Pages) {
        self.pages = pages;
    }

    /// The index the next round will have.
    pub fn next_index(&self) -> u64 {
        self.next
    }

    /// A round that waits for every member (each probe is bounded by its own timeout).
    pub async fn round(&mut self) -> Round {
        self.round_within(None).await
    }

    /// Starts a probe of every member that has none in flight, then waits until all
    /// answered or `wait` has passed. Members still in flight are [`Silent`] in this round;
    /// their probes go on and are collected by a later round. Cancel-safe: dropping the
    /// future leaves the probes in flight for the next round.
    pub async fn round_within(&mut self, wait: Option<Duration>) -> Round {
        let started = self.clock.stamp();
        let pages = self.pages;
        let plans: Vec<_> = self
            .slots
            .iter_mut()
            .map(|s| match s.inflight {
                // A page due while the last probe is still out is asked by the next one.
                Some(_) => {
                    s.cadence.missed(pages);
                    None
                }
                None => Some(s.cadence.plan_next(pages, started.mono)),
            })
            .collect();
        let with_pages = plans.iter().flatten().any(|p| p.metrics);
        // Read no later than halfway through the round's own wait.
        let learned = self.waits.of(with_pages).wait();
        let first_read = wait.map_or(learned, |w| learned.min(w / 2));
        let pace = Pace { first: started.mono + first_read, every: READ_POLL };
        for (slot, plan) in self.slots.iter_mut().zip(plans) {
            if let Some(plan) = plan {
                let p = slot.prober.clone();
                let stamp = self.clock.stamp();
                let probe = tokio::spawn(async move { p.probe(plan, pace).await });
                slot.inflight = Some((probe, stamp));
            }
        }
        // One timer for the round's wait, not one a member: each costs a wakeup.
        let mut deadline = wait.map(|w| Box::pin(tokio::time::sleep_until(started.mono + w)));
        let mut done: Vec<Option<_>> = self.slots.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut waiting = false;
            for (slot, got) in self.slots.iter_mut().zip(done.iter_mut()) {
                if let Some((handle, _)) = slot.inflight.as_mut() {
                    match Pin::new(handle).poll(cx) {
                        Poll::Ready(r) => {
                            *got = Some(r);
                            slot.inflight = None;
                        }
                        Poll::Pending => waiting = true,
                    }
                }
            }
            match (waiting, deadline.as_mut()) {
                (false, _) => Poll::Ready(()),
                (true, Some(d)) => d.as_mut().poll(cx),
                (true, None) => Poll::Pending,
            }
        })
        .await;
        let mut observations = Vec::new();
        let mut silent = Vec::new();
        let mut arrivals = Vec::new();
        for (slot, got) in self.slots.iter_mut().zip(done) {
            match got {
                Some(Ok((o, paced))) => {
                    slot.cadence.observe(&o);
                    // Answers read whole (the only kind a probe says how it read), asked
                    // in this round, say when answers come.
                    if let Some(p) = paced
                        && let Some(after) = p.arrived.checked_duration_since(started.mono)
                    {
                        arrivals.push(Arrival { after, at_first_read: p.early == 0 });
                    }
                    observations.push(o)
                }
                // The probe task panicked or was cancelled: record it as a failed probe.
                Some(Err(e)) => {
                    let o = lost_probe(&slot.prober, &e.to_string(), &started);
                    slot.cadence.observe(&o);
                    observations.push(o)
                }
                None => {
                    let since = slot.inflight.as_ref().map_or(started, |(_, s)| *s);
                    silent.push(Silent {
                        member: slot.prober.member().name.clone(),
                        endpoint: slot.prober.member().url.clone(),
                        since,
                        in_flight: since.mono.elapsed(),
                    });
                }
            }
        }
        self.waits.of(with_pages).observe(arrivals);
        let index = self.next;
        self.next += 1;
        Round { index, started, observations, silent }
    }

    /// Stops every probe in flight (at the end of a run).
    pub fn abort(&mut self) {
        for slot in &mut self.slots {
            if let Some((h, _)) = slot.inflight.take() {
                h.abort();
            }
        }
    }
}

impl Rounds for Sampler {
    fn round_within(&mut self, wait: Option<Duration>) -> impl Future<Output = Round> + Send {
        Sampler::round_within(self, wait)
    }

    fn set_pages(&mut self, pages: Pages) {
        Sampler::set_pages(self, pages);
    }

    fn next_index(&self) -> u64 {
        Sampler::next_index(self)
    }

    fn repoint(&mut self, member: &Member, cfg: &ProbeConfig) -> Result<(), SetupError> {
        for p in probers(std::slice::from_ref(member), cfg, &self.clock)? {
            self.replace(p);
        }
        Ok(())
    }

    fn abort(&mut self) {
        Sampler::abort(self);
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.abort();
    }
}

fn lost_probe(p: &Prober, why: &str, at: &Stamp) -> Observation {
    let error = format!("probe task failed: {why}");
    Observation {
        member: p.member().name.clone(),
        endpoint: p.member().url.clone(),
        ts: at.utc,
        at: at.mono,
        metrics: Part::Failed { error: error.clone(), ms: 0.0 },
        health: Part::Failed { error: error.clone(), ms: 0.0 },
        status: Part::Failed { error, ms: 0.0 },
    }
}
