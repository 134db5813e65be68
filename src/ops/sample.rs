//! What `leaderwatch sample` runs: rounds at a fixed interval into a run directory until
//! the duration runs out or a signal arrives, then `summary.json`. One window, `sample`; the
//! protocol is [`Sampling`], run by the one loop ([`Drive`]).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::Result;
use crate::analysis::sampling::{Sampling, SamplingPlan};
use crate::io::probe::ProbeConfig;
use crate::io::round::{Rounds, Sampler, probers};
use crate::model::baseline::WindowName;
use crate::model::clock::Clock;
use crate::model::member::Member;
use crate::model::summary::Summary;
use crate::ops::drive::{Drive, NoDisruptor, RunSetup};

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
    /// The lock canary beside it; `None`: none (the default for `sample`).
    pub lock: Option<crate::io::lock::LockConfig>,
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
    let setup = RunSetup {
        members: cfg.members.clone(),
        probe: cfg.probe.clone(),
        out: cfg.out.clone(),
        first_window: WindowName::Sample,
        cause_horizon: cfg.cause_horizon,
        metrics: cfg.metrics_addr.map(|a| (a, cfg.interval)),
        follow_pod_ips: false,
        lock: cfg.lock.clone(),
    };
    let mut drive = Drive::open(setup, rounds, clock.clone(), None, shutdown).await?;
    let plan = SamplingPlan {
        members: cfg.members.clone(),
        interval: cfg.interval,
        metrics_every: cfg.metrics_every,
        duration: cfg.duration,
        cause_horizon: cfg.cause_horizon,
        canary: cfg.canary,
    };
    let mut sampling = Sampling::new(plan, clock.stamp());
    drive.events(&crate::analysis::protocol::Protocol::take_events(&mut sampling))?;
    if let Some(r) = cfg.rotation {
        drive.rotate_daily(r)?;
    }
    drive.serve_metrics()?;
    tracing::info!(
        run_id = drive.run_id(),
        out = %cfg.out.display(),
        members = cfg.members.len(),
        "sampling"
    );
    // `sample` disrupts nothing: the loop is given no disruptor.
    let ended = drive.run(sampling, None::<(NoDisruptor, _)>).await?;
    let mut summary = ended.document;
    // Every run of this directory, this one just ended included (events.csv is flushed).
    summary.residual = match crate::io::read::residual(&cfg.out, 0.95) {
        Ok(r) => {
            tracing::info!("{}", crate::render::rate::residual_line(&r));
            Some(r)
        }
        Err(e) => {
            tracing::warn!("residual rate not computed: {e}");
            None
        }
    };
    let path = drive.write_json(SUMMARY, &summary)?;
    tracing::info!(summary = %path.display(), "{}", summary.explanation);
    Ok(summary)
}
