//! `leaderwatch sample`: rounds at a fixed interval into a run directory until the
//! duration runs out or a signal arrives, then `summary.json`. One window, `sample`.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;

use crate::Result;
use crate::io::canary::{Canary, CanaryConfig};
use crate::io::probe::ProbeConfig;
use crate::io::recorder::{Recorder, new_run_id};
use crate::io::round::{Sampler, probers};
use crate::model::baseline::WindowName;
use crate::model::clock::{Clock, Stamp};
use crate::model::counts::LeaderChanges;
use crate::model::event::Event;
use crate::model::member::Member;
use crate::model::summary::{EndedBy, MemberRef, SCHEMA_VERSION, Summary, explain};

pub const SUMMARY: &str = "summary.json";

#[derive(Debug, Clone)]
pub struct SampleConfig {
    pub members: Vec<Member>,
    /// Time between round starts; a round waits at most this long for a member, so one
    /// silent member never slows the others.
    pub interval: Duration,
    /// Rounds between two reads of `/metrics` (1: every round). The page is what costs
    /// etcd the most to serve; health and Status are read every round regardless.
    pub metrics_every: u64,
    /// `None`: until a signal.
    pub duration: Option<Duration>,
    pub out: PathBuf,
    pub probe: ProbeConfig,
    /// How far before an election its cause is looked for.
    pub cause_horizon: Duration,
    /// The canary's deadline per op; `None`: no canary (the default for `sample`).
    pub canary: Option<Duration>,
    /// Serve leaderwatch's own /metrics and /healthz here (`--metrics-addr`).
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Daily files and their retention; `None`: one samples.csv forever.
    pub rotation: Option<crate::io::rotate::Rotation>,
}

/// Runs the sampler until `cfg.duration` or `shutdown`, whichever comes first.
pub async fn run(
    cfg: SampleConfig,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()>,
) -> Result<Summary> {
    let mut sampler = Sampler::new(probers(&cfg.members, &cfg.probe, &clock)?, clock.clone());
    // Bound before anything is written: a taken port is bad input, not a half-started run.
    let exporter = match cfg.metrics_addr {
        Some(addr) => Some(crate::io::exporter::start(addr, cfg.interval).await?),
        None => None,
    };
    let run_id = new_run_id(clock.as_ref());
    let mut rec = Recorder::open(
        &cfg.out,
        &run_id,
        clock.as_ref(),
        WindowName::Sample,
        cfg.members.len(),
        cfg.cause_horizon,
    )?;
    let started = clock.stamp();
    let names: Vec<String> = cfg.members.iter().map(|m| format!("{}={}", m.name, m.url)).collect();
    rec.event(Event::stamped(
        started,
        "leaderwatch",
        "",
        "run_started",
        format!(
            "interval {}; members {}",
            humantime::format_duration(cfg.interval),
            names.join(" ")
        ),
    ))?;
    if let Some(r) = cfg.rotation {
        rec.rotate_daily(r, clock.now())?;
    }
    if let Some((e, bound)) = exporter {
        rec.export_to(e, bound, clock.stamp())?;
    }
    tracing::info!(run_id, out = %cfg.out.display(), members = cfg.members.len(), "sampling");

    let mut canary = start_canary(&cfg, &run_id, &clock, &mut rec).await?;
    let ended_by =
        sample_until_stopped(&cfg, started, &mut sampler, &mut rec, canary.as_mut(), shutdown)
            .await?;
    sampler.abort();
    if let Some(c) = canary.take() {
        rec.canary(&c.stop().await)?;
    }
    let summary = summarize(&cfg, &run_id, started, clock.stamp(), ended_by, &mut rec)?;
    let path = rec.write_json(SUMMARY, &summary)?;
    tracing::info!(summary = %path.display(), "{}", summary.explanation);
    Ok(summary)
}

/// `--canary`: started, or, when it cannot connect, left out with a `canary_failed` row
/// (sampling does not need it).
async fn start_canary(
    cfg: &SampleConfig,
    run_id: &str,
    clock: &Arc<dyn Clock>,
    rec: &mut Recorder,
) -> Result<Option<Canary>> {
    let Some(timeout) = cfg.canary else { return Ok(None) };
    match Canary::start(
        &cfg.members,
        &cfg.probe,
        CanaryConfig { every: cfg.interval, timeout },
        run_id,
        clock.clone(),
    )
    .await
    {
        Ok(c) => {
            rec.canary_started(clock.stamp(), cfg.interval);
            rec.event(Event::stamped(
                clock.stamp(),
                "leaderwatch",
                "",
                "canary_started",
                format!("{} every {}", c.key(), humantime::format_duration(cfg.interval)),
            ))?;
            Ok(Some(c))
        }
        Err(e) => {
            rec.event(Event::stamped(clock.stamp(), "leaderwatch", "", "canary_failed", e))?;
            Ok(None)
        }
    }
}

/// One round per interval (with `/metrics` every `metrics_every` rounds) and the canary's
/// ops, until `--duration` runs out or a signal comes.
async fn sample_until_stopped(
    cfg: &SampleConfig,
    started: Stamp,
    sampler: &mut Sampler,
    rec: &mut Recorder,
    mut canary: Option<&mut Canary>,
    shutdown: impl Future<Output = ()>,
) -> Result<EndedBy> {
    let mut ticker = tokio::time::interval(cfg.interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            _ = &mut shutdown => return Ok(EndedBy::Signal),
            _ = ticker.tick() => {}
        }
        if cfg.duration.is_some_and(|d| started.mono.elapsed() >= d) {
            return Ok(EndedBy::Duration);
        }
        sampler.set_with_metrics(sampler.next_index().is_multiple_of(cfg.metrics_every.max(1)));
        let round = tokio::select! {
            biased;
            _ = &mut shutdown => return Ok(EndedBy::Signal),
            r = sampler.round_within(Some(cfg.interval)) => r,
        };
        rec.round(&round)?;
        if let Some(c) = canary.as_deref_mut() {
            rec.canary(&c.drain())?;
        }
    }
}

/// summary.json of the run that just ended: its counts, elections, health and client
/// figures, and the residual rate of every run in the directory.
fn summarize(
    cfg: &SampleConfig,
    run_id: &str,
    started: Stamp,
    ended: Stamp,
    ended_by: EndedBy,
    rec: &mut Recorder,
) -> Result<Summary> {
    let counts = rec.counts();
    let rounds = rec.rounds();
    let health = rec.health();
    let client = rec.client();
    let elections_detail: Vec<_> =
        rec.close_windows(true)?.into_iter().flat_map(|w| w.elections_detail).collect();
    rec.event(Event::stamped(
        ended,
        "leaderwatch",
        "",
        "run_ended",
        format!("{ended_by}; {rounds} round(s)"),
    ))?;
    // Every run of this directory, this one just ended included (events.csv is flushed).
    let residual = match crate::io::read::residual(&cfg.out, 0.95) {
        Ok(r) => {
            tracing::info!("{}", crate::render::rate::residual_line(&r));
            Some(r)
        }
        Err(e) => {
            tracing::warn!("residual rate not computed: {e}");
            None
        }
    };
    Ok(Summary {
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        run_id: run_id.to_owned(),
        started_at: started.utc,
        ended_at: ended.utc,
        duration_s: started.secs_to(&ended),
        ended_by,
        rounds,
        members: cfg
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
        cause_horizon_s: cfg.cause_horizon.as_secs_f64(),
        explanation: explain(&counts),
        residual,
    })
}
