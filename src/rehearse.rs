//! `leaderwatch rehearse`: the sitting against a local etcd cluster it starts itself,
//! with the local-process disruptor; prints the baseline table at the end.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::baseline::{Environment, BASELINE};
use crate::cli::RehearseArgs;
use crate::clock::{Clock, SystemClock};
use crate::disrupt::LocalDisruptor;
use crate::local::{LocalCluster, LocalOptions};
use crate::probe::ProbeConfig;
use crate::sitting::{self, SittingConfig, Target};
use crate::{report, Error, Result};

/// The kubelet's default grace, and the StatefulSet's terminationGracePeriodSeconds.
const GRACE: Duration = Duration::from_secs(30);

pub async fn run(a: RehearseArgs, shutdown: impl Future<Output = ()>) -> Result<()> {
    let target: Target = a.target.parse().map_err(Error::Usage)?;
    if a.cadence.fast_interval > a.cadence.interval {
        return Err(Error::Usage("--fast-interval must not be longer than --interval".to_owned()));
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let out = a
        .out
        .unwrap_or_else(|| PathBuf::from(format!("data/rehearsal-{}", clock.now().format("%Y%m%dT%H%M%SZ"))));
    let opts = LocalOptions { members: a.members as usize, etcd_bin: a.etcd_bin, ..LocalOptions::default() };
    tracing::info!(members = opts.members, "starting a local etcd cluster");
    let mut cluster = LocalCluster::start(opts).await?;
    let members = cluster.members();
    target.check(&members).map_err(Error::Usage)?;
    let cfg = SittingConfig {
        members: members.clone(),
        idle: a.idle,
        settle: a.settle,
        interval: a.cadence.interval,
        fast_interval: a.cadence.fast_interval,
        target,
        probe: ProbeConfig { timeout: a.cadence.timeout, ..ProbeConfig::default() },
        out: out.clone(),
        recovery_timeout: a.recovery_timeout,
        environment: Environment {
            kind: "local".to_owned(),
            description: String::new(),
            members: vec![],
            etcd_versions: vec![],
            // The local members run with etcd's defaults.
            heartbeat_ms: Some(100),
            election_ms: Some(1000),
        },
    };
    let mut disruptor = LocalDisruptor { cluster: &mut cluster, down: a.down, grace: GRACE, clock: clock.clone() };
    let result = sitting::run(cfg, &mut disruptor, clock, None, shutdown).await;
    drop(cluster); // stop the members before printing
    let mut baseline = result?;
    // Label the figures with where they ran: never to be mistaken for GKE.
    baseline.environment.description = format!(
        "local loopback, etcd {}, {} members",
        baseline.environment.etcd_versions.join("/"),
        baseline.environment.members.len()
    );
    let path = out.join(BASELINE);
    crate::record::write_json_atomic(&path, &baseline)?;
    report::print_result(&path, &baseline);
    eprintln!("rehearsal written to {}", out.display());
    Ok(())
}
