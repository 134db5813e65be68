//! What `leaderwatch rehearse` runs: the trial against a local etcd cluster it starts
//! itself, with the local-process disruptor (sigterm, sigkill or sigstop).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::Result;
use crate::analysis::recovery::Target;
use crate::io::disrupt::LocalDisruptor;
use crate::io::local::{LocalCluster, LocalOptions};
use crate::model::baseline::{BASELINE, Environment, EnvironmentKind, LocalMethod};
use crate::model::clock::{Clock, SystemClock};
use crate::ops::drive::{self, Finished, TrialConfig, check_target};

/// The kubelet's default grace, and the StatefulSet's terminationGracePeriodSeconds.
const GRACE: Duration = Duration::from_secs(30);

/// A rehearsal: the local cluster and the trial's windows. `trial.members`,
/// `trial.out` (when `out` is none) and `trial.environment` are filled in here.
pub struct RehearseOptions {
    pub local: LocalOptions,
    /// The run directory; `None`: `data/rehearsal-TARGET-METHOD-UTC`.
    pub out: Option<PathBuf>,
    pub method: LocalMethod,
    /// How long a SIGSTOPped member stays stopped.
    pub down: Duration,
    pub trial: TrialConfig,
}

/// The target named by `--target` is checked against m0..m{n-1} before etcd is started
/// for nothing.
pub fn check(target: &Target, members: usize) -> Result<()> {
    let names: Vec<crate::model::member::Member> = (0..members)
        .map(|i| crate::model::member::Member {
            name: crate::model::member::MemberName(format!("m{i}")),
            url: String::new(),
        })
        .collect();
    check_target(target, &names)
}

/// Starts the local cluster, runs the trial against it, stops it; the run directory and
/// what the trial left there.
pub async fn rehearse(
    o: RehearseOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(PathBuf, Finished)> {
    check(&o.trial.target, o.local.members)?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let out = o.out.unwrap_or_else(|| {
        PathBuf::from(format!(
            "data/rehearsal-{}-{}-{}",
            o.trial.target,
            o.method,
            clock.now().format("%Y%m%dT%H%M%SZ")
        ))
    });
    tracing::info!(members = o.local.members, "starting a local etcd cluster");
    let cluster = LocalCluster::start(o.local).await?;
    let members = cluster.members();
    let (heartbeat, election) = cluster.timing();
    let cfg = TrialConfig {
        members: members.clone(),
        out: out.clone(),
        environment: Environment {
            kind: EnvironmentKind::Local,
            // Labelled before the trial, so an incomplete baseline says where it ran too.
            description: format!("local loopback, etcd {{etcd}}, {} members", members.len()),
            members: vec![],
            etcd_versions: vec![],
            heartbeat_ms: Some(heartbeat),
            election_ms: Some(election),
            timing_source: "rehearse flags (--heartbeat-interval, --election-timeout)".to_owned(),
        },
        ..o.trial
    };
    let cluster = Arc::new(Mutex::new(cluster));
    let disruptor =
        LocalDisruptor { cluster: cluster.clone(), method: o.method, down: o.down, grace: GRACE };
    let since = std::time::SystemTime::now();
    let result = drive::run_trial(cfg, disruptor, clock, None, shutdown).await;
    drop(cluster); // the last handle: stops the members before printing
    Ok((out.clone(), drive::finished(&out.join(BASELINE), since, result)))
}
