//! `leaderwatch sample`: rounds at a fixed interval into a run directory until the
//! duration runs out or a signal arrives, then `summary.json`. One window, `sample`.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::Result;
use crate::analysis::cadence::Pages;
use crate::analysis::engine::Engine;
use crate::io::probe::ProbeConfig;
use crate::io::recorder::{Recorder, new_run_id};
use crate::io::round::{Rounds, Sampler, probers};
use crate::model::baseline::WindowName;
use crate::model::clock::{Clock, Stamp};
use crate::model::counts::LeaderChanges;
use crate::model::event::{Event, EventKind, Source};
use crate::model::member::Member;
use crate::model::summary::{EndedBy, MemberRef, SCHEMA_VERSION, Summary, explain};
use crate::session::{Session, ticker};

pub const SUMMARY: &str = "summary.json";

#[derive(Debug, Clone)]
pub struct SampleConfig {
    pub members: Vec<Member>,
    /// Time between round starts; a round waits at most this long for a member, so one
    /// silent member never slows the others.
    pub interval: Duration,
    /// Rounds between two reads of `/metrics` (1: every round; `None`: only from a member
    /// whose Status changed, src/analysis/cadence.rs). The page is what costs etcd the most
    /// to serve; Status is read every round regardless.
    pub metrics_every: Option<u64>,
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
    let sampler = Sampler::new(probers(&cfg.members, &cfg.probe, &clock)?, clock.clone());
    run_with(cfg, sampler, clock, shutdown).await
}

/// [`run`] with its rounds from `rounds` (the members, or a script in tests).
pub async fn run_with<S: Rounds>(
    cfg: SampleConfig,
    rounds: S,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()>,
) -> Result<Summary> {
    // Bound before anything is written: a taken port is bad input, not a half-started run.
    let exporter = match cfg.metrics_addr {
        Some(addr) => Some(crate::io::exporter::start(addr, cfg.interval).await?),
        None => None,
    };
    let run_id = new_run_id(clock.as_ref());
    let engine = Engine::new(WindowName::Sample, cfg.members.len(), cfg.cause_horizon);
    let rec = Recorder::open(&cfg.out, &run_id, clock.as_ref())?;
    let mut s = Session::open(rec, engine, rounds, clock.clone(), None, shutdown)?;
    let started = clock.stamp();
    let names: Vec<String> = cfg.members.iter().map(|m| format!("{}={}", m.name, m.url)).collect();
    s.event(Event::stamped(
        started,
        Source::Leaderwatch,
        "",
        EventKind::RunStarted,
        format!(
            "interval {}; members {}",
            humantime::format_duration(cfg.interval),
            names.join(" ")
        ),
    ))?;
    if let Some(r) = cfg.rotation {
        s.rotate_daily(r)?;
    }
    if let Some((e, bound)) = exporter {
        s.export_to(e, bound)?;
    }
    tracing::info!(run_id, out = %cfg.out.display(), members = cfg.members.len(), "sampling");

    if let Some(timeout) = cfg.canary {
        let every = cfg.interval;
        s.start_canary(&cfg.members, &cfg.probe, every, timeout, |c| {
            format!("{} every {}", c.key(), humantime::format_duration(every))
        })
        .await?;
    }
    let ended_by = sample_until_stopped(&cfg, started, &mut s).await?;
    s.rounds.abort();
    s.stop_canary().await?;
    let summary = summarize(&cfg, started, clock.stamp(), ended_by, &mut s)?;
    let path = s.write_json(SUMMARY, &summary)?;
    tracing::info!(summary = %path.display(), "{}", summary.explanation);
    Ok(summary)
}

/// One round per interval (with `/metrics` as `metrics_every` says) and the canary's
/// ops, until `--duration` runs out or a signal comes.
async fn sample_until_stopped<S: Rounds>(
    cfg: &SampleConfig,
    started: Stamp,
    s: &mut Session<S, impl Future<Output = ()>>,
) -> Result<EndedBy> {
    let mut tick = ticker(cfg.interval);
    loop {
        if !s.tick(&mut tick).await {
            return Ok(EndedBy::Signal);
        }
        if cfg.duration.is_some_and(|d| started.mono.elapsed() >= d) {
            return Ok(EndedBy::Duration);
        }
        s.rounds.set_pages(match cfg.metrics_every {
            Some(n) if s.rounds.next_index().is_multiple_of(n.max(1)) => Pages::Every,
            Some(_) => Pages::Skip,
            None => Pages::OnChange,
        });
        let Some(round) = s.take_round(Some(cfg.interval)).await else {
            return Ok(EndedBy::Signal);
        };
        s.record(&round)?;
    }
}

/// summary.json of the run that just ended: its counts, elections, health and client
/// figures, and the residual rate of every run in the directory.
fn summarize<S: Rounds>(
    cfg: &SampleConfig,
    started: Stamp,
    ended: Stamp,
    ended_by: EndedBy,
    s: &mut Session<S, impl Future<Output = ()>>,
) -> Result<Summary> {
    let counts = s.engine.counts();
    let rounds = s.engine.rounds();
    let health = s.engine.health();
    let client = s.engine.client();
    let elections_detail: Vec<_> =
        s.close_windows(true)?.into_iter().flat_map(|w| w.elections_detail).collect();
    s.event(Event::stamped(
        ended,
        Source::Leaderwatch,
        "",
        EventKind::RunEnded,
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
        run_id: s.run_id().to_owned(),
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
