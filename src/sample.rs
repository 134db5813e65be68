//! `leaderwatch sample`: rounds at a fixed interval into a run directory until the
//! duration runs out or a signal arrives, then `summary.json`.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::MissedTickBehavior;

use crate::clock::Clock;
use crate::counts::Window;
use crate::events::{Event, Tracker};
use crate::member::Member;
use crate::probe::{http_client, ProbeConfig, Prober};
use crate::record::RunDir;
use crate::round::Sampler;
use crate::summary::{explain, LeaderChanges, MemberRef, Summary, SCHEMA_VERSION};
use crate::{Error, Result};

pub const SUMMARY: &str = "summary.json";

#[derive(Debug, Clone)]
pub struct SampleConfig {
    pub members: Vec<Member>,
    /// Time between round starts; a round slower than this delays the next one instead
    /// of overlapping it.
    pub interval: Duration,
    /// `None`: until a signal.
    pub duration: Option<Duration>,
    pub out: PathBuf,
    pub probe: ProbeConfig,
}

/// A run id that sorts by time and differs between runs started in the same second.
pub fn new_run_id(clock: &dyn Clock) -> String {
    let now = clock.now();
    let salt = (std::process::id() as u64 ^ now.timestamp_subsec_nanos() as u64) & 0xffff;
    format!("{}-{salt:04x}", now.format("%Y%m%dT%H%M%SZ"))
}

/// Builds one prober per member (bad TLS files are reported here, before any round).
pub fn probers(members: &[Member], cfg: &ProbeConfig, clock: &Arc<dyn Clock>) -> Result<Vec<Prober>> {
    let http = http_client(cfg).map_err(Error::Usage)?;
    members
        .iter()
        .map(|m| Prober::new(m.clone(), http.clone(), cfg.clone(), clock.clone()).map_err(Error::Usage))
        .collect()
}

/// Runs the sampler until `cfg.duration` or `shutdown`, whichever comes first.
pub async fn run(cfg: SampleConfig, clock: Arc<dyn Clock>, shutdown: impl Future<Output = ()>) -> Result<Summary> {
    let mut sampler = Sampler::new(probers(&cfg.members, &cfg.probe, &clock)?);
    let run_id = new_run_id(clock.as_ref());
    let mut dir = RunDir::open(&cfg.out, &run_id)?;
    let started_at = clock.now();
    let t0 = Instant::now();

    let mut startup = Vec::new();
    let (s, e) = dir.reopened.clone();
    if s.rows > 0 || e.rows > 0 {
        startup.push(Event::new(started_at, "record", "", "reopened", format!("{} sample row(s), {} event row(s) from earlier runs kept", s.rows, e.rows)));
    }
    for (file, r) in [("samples.csv", &s), ("events.csv", &e)] {
        if r.torn_bytes > 0 {
            startup.push(Event::new(started_at, "record", "", "repaired", format!("{file}: cut a torn last line of {} byte(s)", r.torn_bytes)));
            tracing::warn!("{}: cut a torn last line of {} byte(s) left by an earlier crash", file, r.torn_bytes);
        }
    }
    let names: Vec<String> = cfg.members.iter().map(|m| format!("{}={}", m.name, m.url)).collect();
    startup.push(Event::new(
        started_at,
        "leaderwatch",
        "",
        "run_started",
        format!("interval {}; members {}", humantime::format_duration(cfg.interval), names.join(" ")),
    ));
    dir.append_events(&startup)?;
    tracing::info!(run_id, out = %cfg.out.display(), members = cfg.members.len(), "sampling");

    let mut window = Window::new();
    let mut tracker = Tracker::new();
    let mut ticker = tokio::time::interval(cfg.interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    let ended_by = loop {
        tokio::select! {
            _ = &mut shutdown => break "signal",
            _ = ticker.tick() => {}
        }
        if cfg.duration.is_some_and(|d| t0.elapsed() >= d) {
            break "duration";
        }
        let round = tokio::select! {
            _ = &mut shutdown => break "signal",
            r = sampler.round(clock.now()) => r,
        };
        dir.append_round(&round, "sample")?;
        let mut events: Vec<Event> = round.observations.iter().flat_map(|o| tracker.observe(o)).collect();
        let before = window.counts_transitions();
        window.push(&round.view());
        for t in window.transitions_since(before) {
            events.push(Event::new(t.ts, "leaderwatch", "", "leader_transition", format!("{} -> {} (round {})", t.from, t.to, t.round)));
        }
        for e in &events {
            tracing::info!(member = %e.member, kind = %e.kind, "{}", e.detail);
        }
        dir.append_events(&events)?;
    };

    let ended_at = clock.now();
    let counts = window.counts();
    let summary = Summary {
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        run_id: run_id.clone(),
        started_at,
        ended_at,
        duration_s: t0.elapsed().as_secs_f64(),
        ended_by: ended_by.to_owned(),
        rounds: window.rounds(),
        members: cfg.members.iter().map(|m| MemberRef { name: m.name.clone(), endpoint: m.url.clone() }).collect(),
        leader_changes: LeaderChanges::from_counts(&counts),
        elections: counts.elections,
        leader_transitions: counts.leader_transitions.clone(),
        explanation: explain(&counts),
    };
    dir.append_events(&[Event::new(ended_at, "leaderwatch", "", "run_ended", format!("{ended_by}; {} round(s)", window.rounds()))])?;
    dir.sync()?;
    let path = dir.write_json(SUMMARY, &summary)?;
    tracing::info!(summary = %path.display(), "{}", summary.explanation);
    Ok(summary)
}
