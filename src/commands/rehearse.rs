//! `leaderwatch rehearse`: the sitting against a local etcd cluster it starts itself,
//! with the local-process disruptor (sigterm, sigkill or sigstop); prints the baseline
//! table at the end.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::commands::cli::RehearseArgs;
use crate::commands::drive::{self, SittingConfig, check_target};
use crate::io::disrupt::LocalDisruptor;
use crate::io::local::{LocalCluster, LocalOptions};
use crate::io::probe::ProbeConfig;
use crate::io::read;
use crate::model::baseline::LocalMethod;
use crate::model::baseline::{BASELINE, Environment, EnvironmentKind};
use crate::model::clock::{Clock, SystemClock};
use crate::{Error, Result, render::report};

/// The kubelet's default grace, and the StatefulSet's terminationGracePeriodSeconds.
const GRACE: Duration = Duration::from_secs(30);

/// `leaderwatch rehearse` from its arguments.
pub async fn command(a: RehearseArgs, shutdown: impl Future<Output = ()>) -> Result<()> {
    let target = a.target;
    let method: LocalMethod = a.method;
    if a.cadence.fast_interval > a.cadence.interval {
        return Err(Error::Usage("--fast-interval must not be longer than --interval".to_owned()));
    }
    // A name is checked against m0..m{n-1} before etcd is started for nothing.
    let names: Vec<crate::model::member::Member> = (0..a.members)
        .map(|i| crate::model::member::Member {
            name: crate::model::member::MemberName(format!("m{i}")),
            url: String::new(),
        })
        .collect();
    check_target(&target, &names)?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let out = a.out.unwrap_or_else(|| {
        PathBuf::from(format!(
            "data/rehearsal-{target}-{method}-{}",
            clock.now().format("%Y%m%dT%H%M%SZ")
        ))
    });
    let opts = LocalOptions {
        members: a.members as usize,
        etcd_bin: a.etcd_bin,
        ..LocalOptions::default()
    };
    tracing::info!(members = opts.members, "starting a local etcd cluster");
    let cluster = LocalCluster::start(opts).await?;
    let members = cluster.members();
    let (heartbeat, election) = cluster.timing();
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
            kind: EnvironmentKind::Local,
            // Labelled before the sitting, so an incomplete baseline says where it ran too.
            description: format!("local loopback, etcd {{etcd}}, {} members", members.len()),
            members: vec![],
            etcd_versions: vec![],
            heartbeat_ms: Some(heartbeat),
            election_ms: Some(election),
            timing_source: "rehearse flags (--heartbeat-interval, --election-timeout)".to_owned(),
        },
        cause_horizon: a.cadence.cause_horizon,
        canary: a.cadence.canary(),
        lock: a.cadence.lock(),
        metrics_addr: None,
        follow_pod_ips: false,
    };
    let cluster = Arc::new(Mutex::new(cluster));
    let disruptor = LocalDisruptor { cluster: cluster.clone(), method, down: a.down, grace: GRACE };
    let since = std::time::SystemTime::now();
    let result = drive::run_sitting(cfg, disruptor, clock, None, shutdown).await;
    drop(cluster); // the last handle: stops the members before printing
    let path = out.join(BASELINE);
    match result {
        Ok(baseline) => report::print_result(&read::with_rate(&path, baseline)?, false),
        Err(e) => {
            if let Some(f) = read::written_since(&path, since) {
                report::print_result(&f, false);
            }
            return Err(e);
        }
    }
    eprintln!("rehearsal written to {}", out.display());
    Ok(())
}
