//! The measurement sitting, shared by `rehearse` and `measure`: three observation windows
//! around one disruption, and the one definition of a "healthy 3-member endpoint list".
//!
//! ```text
//! at_rest (--idle, --interval) | disruption (request -> healthy, --fast-interval) | settle (--settle)
//! ```
//! Adjacent windows share their boundary round, so per-member increases add up.

use std::future::Future;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::MissedTickBehavior;

use crate::baseline::{seconds_between, Baseline, Disruption, Environment, GroundTruth, Step, WindowRecord, BASELINE, SCHEMA_VERSION};
use crate::clock::Clock;
use crate::counts::Window;
use crate::disrupt::{DisruptReport, Disruptor};
use crate::events::{Event, Tracker};
use crate::member::{Member, MemberName};
use crate::probe::{Observation, ProbeConfig};
use crate::progress::Progress;
use crate::record::RunDir;
use crate::round::{Round, Sampler};
use crate::sample::{new_run_id, probers};
use crate::{Error, Result};

/// How far (in raft entries) the disrupted member's applied index may trail the leader's
/// and still count as caught up: at rest the cluster applies almost nothing.
pub const CATCH_UP_BOUND: u64 = 16;

/// Which member to disrupt, resolved from live status at the moment of disruption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Leader,
    Follower,
    Name(MemberName),
}

impl FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "leader" => Ok(Target::Leader),
            "follower" => Ok(Target::Follower),
            "" => Err("--target must be leader, follower or a member name".to_owned()),
            name => Ok(Target::Name(MemberName(name.to_owned()))),
        }
    }
}

impl Target {
    /// Rejects a name that is not a member, before any window starts.
    pub fn check(&self, members: &[Member]) -> std::result::Result<(), String> {
        match self {
            Target::Name(n) if !members.iter().any(|m| &m.name == n) => {
                let names: Vec<&str> = members.iter().map(|m| m.name.0.as_str()).collect();
                Err(format!("--target {n}: no such member (members: {})", names.join(", ")))
            }
            _ => Ok(()),
        }
    }
}

/// The member that reports itself as leader (Status RPC: its id is its leader id).
fn self_leader(o: &Observation) -> bool {
    o.status.ok().is_some_and(|s| s.leader_id != 0 && s.leader_id == s.member_id)
}

/// Picks the target from one round. Returns the member and whether it was the leader.
pub fn resolve_target(target: &Target, round: &Round) -> std::result::Result<(MemberName, bool), String> {
    let leaders: Vec<&Observation> = round.observations.iter().filter(|o| self_leader(o)).collect();
    let leader = match leaders.as_slice() {
        [one] => Some(one.member.clone()),
        _ => None,
    };
    match target {
        Target::Leader => leader.map(|l| (l, true)).ok_or_else(|| format!("no single leader in round {}", round.index)),
        Target::Follower => {
            let l = leader.ok_or_else(|| format!("no single leader in round {}", round.index))?;
            round
                .observations
                .iter()
                .find(|o| o.member != l && o.health.ok().is_some_and(|h| h.healthy))
                .map(|o| (o.member.clone(), false))
                .ok_or_else(|| format!("no healthy follower in round {}", round.index))
        }
        Target::Name(n) => {
            let o = round.observations.iter().find(|o| &o.member == n).ok_or_else(|| format!("--target {n}: no such member"))?;
            Ok((n.clone(), self_leader(o)))
        }
    }
}

/// The healthy 3-member endpoint list, defined once: every member answers `/health`
/// true and the Status RPC; all report the same, non-zero leader id; exactly one says it
/// is that leader; and `caught_up` (the disrupted member) has applied within
/// [`CATCH_UP_BOUND`] entries of the leader. `Err` says what is missing.
pub fn healthy_list(round: &Round, members: usize, caught_up: Option<&MemberName>) -> std::result::Result<(), String> {
    if round.observations.len() != members {
        return Err(format!("{} of {members} members probed", round.observations.len()));
    }
    for o in &round.observations {
        match (o.health.ok(), o.status.ok()) {
            (Some(h), Some(_)) if h.healthy => {}
            (Some(h), _) if !h.healthy => return Err(format!("{} unhealthy: {}", o.member, h.reason)),
            _ => return Err(format!("{} not answering: {}", o.member, o.error_summary())),
        }
    }
    let statuses: Vec<_> = round.observations.iter().filter_map(|o| o.status.ok().map(|s| (o, s))).collect();
    let Some(leader_id) = statuses.first().map(|(_, s)| s.leader_id) else {
        return Err("no member to check".to_owned());
    };
    if leader_id == 0 || statuses.iter().any(|(_, s)| s.leader_id != leader_id) {
        return Err("members disagree on the leader".to_owned());
    }
    let leaders: Vec<_> = statuses.iter().filter(|(_, s)| s.member_id == leader_id).collect();
    let [(_, leader)] = leaders.as_slice() else {
        return Err(format!("{} members claim to be leader {leader_id:x}", leaders.len()));
    };
    if let Some(name) = caught_up {
        if let Some((_, s)) = statuses.iter().find(|(o, _)| &o.member == name) {
            if s.raft_applied_index + CATCH_UP_BOUND < leader.raft_applied_index {
                return Err(format!("{name} applied {} of the leader's {}", s.raft_applied_index, leader.raft_applied_index));
            }
        }
    }
    Ok(())
}

fn member_ok(round: &Round, name: &MemberName) -> bool {
    round
        .observations
        .iter()
        .find(|o| &o.member == name)
        .is_some_and(|o| o.reachable() && o.health.ok().is_some_and(|h| h.healthy))
}

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
    /// Kind, description and timing flags; versions are filled in from the Status RPC.
    pub environment: Environment,
}

/// Sampler + run directory + event tracker: one round, recorded.
struct Recorder {
    sampler: Sampler,
    dir: RunDir,
    tracker: Tracker,
    clock: Arc<dyn Clock>,
    versions: Vec<String>,
    /// Events from watchers running beside the sitting (the Kubernetes side).
    side: Option<UnboundedReceiver<Event>>,
}

impl Recorder {
    async fn round(&mut self, phase: &str, with_metrics: bool) -> Result<Round> {
        self.sampler.set_with_metrics(with_metrics);
        let round = self.sampler.round(self.clock.now()).await;
        self.record(&round, phase)?;
        Ok(round)
    }

    /// Records the watchers' events that arrived so far, and returns them.
    fn drain_side(&mut self) -> Result<Vec<Event>> {
        let mut got = Vec::new();
        if let Some(rx) = self.side.as_mut() {
            while let Ok(e) = rx.try_recv() {
                got.push(e);
            }
        }
        for e in &got {
            tracing::info!(source = %e.source, member = %e.member, kind = %e.kind, "{}", e.detail);
        }
        self.dir.append_events(&got)?;
        Ok(got)
    }

    fn record(&mut self, round: &Round, phase: &str) -> Result<()> {
        self.dir.append_round(round, phase)?;
        let events: Vec<Event> = round.observations.iter().flat_map(|o| self.tracker.observe(o)).collect();
        for e in &events {
            tracing::info!(phase, member = %e.member, kind = %e.kind, "{}", e.detail);
        }
        for v in round.observations.iter().filter_map(|o| o.status.ok().map(|s| s.version.clone())) {
            if !self.versions.contains(&v) {
                self.versions.push(v);
            }
        }
        Ok(self.dir.append_events(&events)?)
    }
}

/// A window being filled, with its first and last instants.
struct Open {
    name: &'static str,
    window: Window,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

impl Open {
    fn new(name: &'static str, start: DateTime<Utc>) -> Self {
        Open { name, window: Window::new(), start, end: start }
    }
    fn push(&mut self, r: &Round) {
        self.window.push(&r.view());
        self.end = r.started;
    }
    fn close(self) -> WindowRecord {
        WindowRecord::new(self.name, self.start, self.end, self.window.rounds(), &self.window.counts())
    }
}

fn ticker(every: Duration) -> tokio::time::Interval {
    let mut t = tokio::time::interval(every);
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t
}

/// Runs one sitting and writes `baseline.json`. An interrupted sitting, or one whose
/// cluster did not recover within `recovery_timeout`, still writes what it measured and
/// then returns [`Error::Incomplete`].
pub async fn run<D: Disruptor>(
    cfg: SittingConfig,
    disruptor: &mut D,
    clock: Arc<dyn Clock>,
    side: Option<UnboundedReceiver<Event>>,
    shutdown: impl Future<Output = ()>,
) -> Result<Baseline> {
    cfg.target.check(&cfg.members).map_err(Error::Usage)?;
    let run_id = new_run_id(clock.as_ref());
    let sampler = Sampler::new(probers(&cfg.members, &cfg.probe, &clock)?);
    let dir = RunDir::open(&cfg.out, &run_id)?;
    let mut rec = Recorder { sampler, dir, tracker: Tracker::new(), clock: clock.clone(), versions: Vec::new(), side };
    let n = cfg.members.len();
    let mut progress = Progress::new();
    tokio::pin!(shutdown);
    let mut interrupted = false;
    rec.dir.append_events(&[Event::new(
        clock.now(),
        "leaderwatch",
        "",
        "sitting_started",
        format!("idle {}, settle {}, target {:?}", humantime::format_duration(cfg.idle), humantime::format_duration(cfg.settle), cfg.target),
    )])?;

    // at_rest
    progress.phase("at_rest", Some(cfg.idle));
    let t0 = Instant::now();
    let mut tick = ticker(cfg.interval);
    let mut rest = Open::new("at_rest", clock.now());
    let mut last: Option<Round> = None;
    while t0.elapsed() < cfg.idle || last.is_none() {
        tokio::select! {
            _ = &mut shutdown => { interrupted = true; break; }
            _ = tick.tick() => {}
        }
        let r = rec.round("at_rest", true).await?;
        rec.drain_side()?;
        rest.push(&r);
        progress.tick(t0.elapsed(), "");
        last = Some(r);
    }
    let mut windows = vec![];
    let mut disruption = None;
    if !interrupted {
        let (record, outcome) = disrupt_phase(&cfg, disruptor, &mut rec, &mut progress, &mut shutdown, last, rest).await?;
        windows.extend(record.windows);
        let mut steps = record.steps;
        let target = record.disruption.target.clone();
        disruption = Some(record.disruption);
        interrupted = outcome == Outcome::Interrupted;
        // settle, from the healthy round
        if let (Outcome::Healthy, Some(boundary)) = (outcome, record.boundary) {
            progress.phase("settle", Some(cfg.settle));
            let t1 = Instant::now();
            let mut tick = ticker(cfg.interval);
            let mut settle = Open::new("settle", boundary.started);
            settle.push(&boundary);
            while t1.elapsed() < cfg.settle {
                tokio::select! {
                    _ = &mut shutdown => { interrupted = true; break; }
                    _ = tick.tick() => {}
                }
                let r = rec.round("settle", true).await?;
                // Kubernetes may report the target Ready only after etcd is healthy again.
                steps.extend(rec.drain_side()?.into_iter().filter(|e| e.member == target));
                settle.push(&r);
                progress.tick(t1.elapsed(), "");
            }
            windows.push(settle.close());
        }
        if let Some(d) = disruption.as_mut() {
            d.waterfall = waterfall(&steps, d.requested_at, d.member_lost_at, d.member_back_at, d.healthy_at);
        }
    } else {
        windows.push(rest.close());
    }
    progress.finish();

    let mut environment = cfg.environment.clone();
    environment.members = cfg.members.iter().map(|m| m.name.0.clone()).collect();
    environment.etcd_versions = rec.versions.clone();
    let baseline = Baseline {
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        run_id,
        windows,
        disruption,
        environment,
    };
    let recovered = baseline.disruption.as_ref().is_some_and(|d| d.healthy_at.is_some());
    rec.dir.append_events(&[Event::new(
        clock.now(),
        "leaderwatch",
        "",
        "sitting_ended",
        if interrupted { "interrupted" } else if recovered { "complete" } else { "no recovery" },
    )])?;
    rec.dir.sync()?;
    let path = rec.dir.write_json(BASELINE, &baseline)?;
    tracing::info!(baseline = %path.display(), "sitting written");
    if interrupted {
        return Err(Error::Incomplete(format!("interrupted; what was measured is in {}", path.display())));
    }
    if !recovered {
        return Err(Error::Incomplete(format!(
            "no healthy {n}-member endpoint list within {} of the disruption; see {}",
            humantime::format_duration(cfg.recovery_timeout),
            path.display()
        )));
    }
    Ok(baseline)
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Healthy,
    TimedOut,
    Interrupted,
}

struct DisruptRecord {
    windows: Vec<WindowRecord>,
    disruption: Disruption,
    /// The round in which the healthy list held: the settle window starts there.
    boundary: Option<Round>,
    /// The disruptor's and the watchers' events about the target so far.
    steps: Vec<Event>,
}

async fn disrupt_phase<D: Disruptor>(
    cfg: &SittingConfig,
    disruptor: &mut D,
    rec: &mut Recorder,
    progress: &mut Progress,
    shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    last: Option<Round>,
    rest: Open,
) -> Result<(DisruptRecord, Outcome)> {
    let clock = rec.clock.clone();
    let n = cfg.members.len();
    // Resolve the target from live status; give the cluster up to 10 s to show a leader.
    let mut round = last.ok_or_else(|| Error::Incomplete("no round before the disruption".to_owned()))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let (target, was_leader) = loop {
        match resolve_target(&cfg.target, &round) {
            Ok(t) => break t,
            Err(e) if Instant::now() >= deadline => return Err(Error::Incomplete(format!("cannot choose the target: {e}"))),
            Err(_) => {
                tokio::time::sleep(cfg.fast_interval).await;
                round = rec.round("at_rest", true).await?;
            }
        }
    };
    let windows_rest = rest.close();

    // Metrics (the expensive page) at the slow cadence only; health and status every round.
    let every = (cfg.interval.as_millis() / cfg.fast_interval.as_millis().max(1)).max(1) as u64;
    let method = disruptor.method().to_owned();
    let requested_at = clock.now();
    rec.dir.append_events(&[Event::new(
        requested_at,
        "leaderwatch",
        &target.0,
        "disruption_requested",
        format!("{method} ({})", if was_leader { "leader" } else { "follower" }),
    )])?;
    progress.phase(&format!("disruption of {target}"), None);
    let mut win = Open::new("disruption", requested_at);
    win.push(&round); // the boundary round: the state just before the request
    let disrupt = disruptor.disrupt(&target);
    tokio::pin!(disrupt);
    let mut truth: Option<DisruptReport> = None;
    let mut truth_written = false;
    let mut side_log: Vec<Event> = Vec::new();
    let (mut lost, mut back, mut healthy) = (None, None, None);
    let mut boundary = None;
    let t0 = Instant::now();
    let mut tick = ticker(cfg.fast_interval);
    let mut k = 0u64;
    let outcome = loop {
        // Drive the disruptor while waiting for the tick and while the round runs.
        tokio::select! {
            biased;
            _ = &mut *shutdown => break Outcome::Interrupted,
            r = &mut disrupt, if truth.is_none() => { truth = Some(r?); continue; }
            _ = tick.tick() => {}
        }
        if t0.elapsed() > cfg.recovery_timeout {
            break Outcome::TimedOut;
        }
        // Once the target is back, every round reads the counters: the round that closes
        // this window must show the restarted member's new counter and start time, or its
        // reset would fall between two windows.
        let with_metrics = back.is_some() || k % every == 0;
        rec.sampler.set_with_metrics(with_metrics);
        k += 1;
        let started = clock.now();
        let r = {
            let round_fut = rec.sampler.round(started);
            tokio::pin!(round_fut);
            loop {
                tokio::select! {
                    r = &mut round_fut => break r,
                    d = &mut disrupt, if truth.is_none() => truth = Some(d?),
                }
            }
        };
        rec.record(&r, "disruption")?;
        side_log.extend(rec.drain_side()?.into_iter().filter(|e| e.member == target.0));
        if let (false, Some(t)) = (truth_written, &truth) {
            rec.dir.append_events(&t.events)?;
            truth_written = true;
        }
        win.push(&r);
        let ok = member_ok(&r, &target);
        if lost.is_none() && !ok {
            lost = Some(r.started);
        }
        if lost.is_some() && back.is_none() && ok {
            back = Some(r.started);
        }
        let status = if truth.is_some() && (back.is_some() || lost.is_none()) {
            healthy_list(&r, n, Some(&target))
        } else {
            Err("waiting for the member to come back".to_owned())
        };
        progress.tick(t0.elapsed(), status.as_ref().err().map_or("healthy", |s| s.as_str()));
        if status.is_ok() {
            healthy = Some(r.started);
            let closing = if with_metrics {
                r
            } else {
                // One more round, at once, that reads the counters: see above.
                let r2 = rec.round("disruption", true).await?;
                win.push(&r2);
                r2
            };
            boundary = Some(closing);
            break Outcome::Healthy;
        }
    };
    let truth = truth.unwrap_or_default();
    if !truth_written {
        rec.dir.append_events(&truth.events)?;
    }
    side_log.extend(rec.drain_side()?.into_iter().filter(|e| e.member == target.0));
    let ground_truth = truth
        .events
        .iter()
        .map(|e| {
            let compared = match e.kind.as_str() {
                "sigterm_sent" | "eviction_accepted" => lost.map(|m| ("member_lost_at", m)),
                "restarted" => back.map(|m| ("member_back_at", m)),
                _ => None,
            };
            GroundTruth {
                kind: e.kind.clone(),
                at: e.ts,
                compared_with: compared.map(|(n, _)| n.to_owned()),
                measured_minus_truth_s: compared.map(|(_, m)| seconds_between(e.ts, m)),
            }
        })
        .collect();
    let disruption = Disruption {
        target: target.0.clone(),
        target_was_leader: was_leader,
        method,
        requested_at,
        member_lost_at: lost,
        member_back_at: back,
        healthy_at: healthy,
        loss_to_healthy_s: lost.zip(healthy).map(|(a, b)| seconds_between(a, b)),
        request_to_healthy_s: healthy.map(|h| seconds_between(requested_at, h)),
        ground_truth,
        attempts: truth.attempts,
        blocked_s: truth.blocked_s,
        waterfall: vec![], // completed by `run` once the settle window is over
    };
    if outcome == Outcome::TimedOut {
        tracing::warn!("no healthy {n}-member endpoint list within {}", humantime::format_duration(cfg.recovery_timeout));
    }
    let steps = [truth.events, side_log].concat();
    Ok((DisruptRecord { windows: vec![windows_rest, win.close()], disruption, boundary, steps }, outcome))
}

/// The recovery as a timeline: every instant the disruptor and the watchers know about the
/// target, plus the measured loss, return and healthy list, in time order, each with the
/// gap since the previous step. Steps after the healthy list (a pod that Kubernetes calls
/// Ready later) are kept: they show how the two views of "recovered" differ.
fn waterfall(
    events: &[Event],
    requested_at: DateTime<Utc>,
    lost: Option<DateTime<Utc>>,
    back: Option<DateTime<Utc>>,
    healthy: Option<DateTime<Utc>>,
) -> Vec<Step> {
    let mut steps: Vec<(DateTime<Utc>, String)> = vec![(requested_at, "requested".to_owned())];
    steps.extend(events.iter().map(|e| (e.ts, e.kind.clone())));
    steps.extend(lost.map(|t| (t, "member_lost (measured)".to_owned())));
    steps.extend(back.map(|t| (t, "member_back (measured)".to_owned())));
    steps.extend(healthy.map(|t| (t, "healthy_list (measured)".to_owned())));
    steps.retain(|(t, _)| *t >= requested_at);
    steps.sort_by_key(|(t, _)| *t);
    let mut prev = requested_at;
    steps
        .into_iter()
        .map(|(at, step)| {
            let s = Step { step, at, since_previous_s: seconds_between(prev, at), since_request_s: seconds_between(requested_at, at) };
            prev = at;
            s
        })
        .collect()
}
