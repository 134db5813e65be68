//! What `leaderwatch measure` runs: the trial against the real cluster. Preflight first;
//! no disruption unless every check passes; then the protocol with a Kubernetes eviction
//! (or, `--method`, a pod deletion, a rolling restart of the StatefulSet, a node drain);
//! whatever ends it, the checksums the laptop's fetch checks its copy against.

pub mod args;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};

use crate::analysis::recovery::Target;
use crate::io::probe::ProbeConfig;
use crate::k8s::discover::{Reach, connect};
use crate::k8s::evict::KubeEvictor;
use crate::k8s::maintenance::{Drain, RollingRestart, Scope};
use crate::k8s::preflight::{self, PreflightOptions};
use crate::k8s::{KubeOptions, timing, watch};
use crate::model::baseline::{Baseline, Environment, EnvironmentKind, KubeMethod};
use crate::model::build::{Agreement, Build};
use crate::model::clock::Clock;
use crate::model::clock::SystemClock;
use crate::model::member::MemberName;
use crate::ops::drive::{self, Finished, TrialConfig};
use crate::{Error, Result};

#[derive(Debug, Clone)]
pub struct MeasureConfig {
    pub kube: KubeOptions,
    pub reach: Reach,
    /// The protocol. `members` are discovered from the pods and replace whatever is given;
    /// `environment.description` is the cluster label, e.g. "GKE Autopilot, dlock-gke".
    pub trial: TrialConfig,
    pub evict_timeout: Duration,
    pub dry_run: bool,
    /// `--method`: evict (the spec's protocol), delete, rolling-restart or drain.
    pub method: KubeMethod,
    /// A drain: how long the node stays cordoned when its member has nowhere else to go.
    pub down: Duration,
}

pub async fn run(
    client: Client,
    cfg: MeasureConfig,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()>,
) -> Result<Baseline> {
    let po = PreflightOptions {
        reach: cfg.reach,
        probe: ProbeConfig { with_metrics: false, ..cfg.trial.probe.clone() },
        ..PreflightOptions::default()
    };
    let checks = preflight::run(&client, &cfg.kube, &po, clock.clone()).await?;
    eprintln!("{}", preflight::render(&checks));
    let failed: Vec<&str> = checks.iter().filter(|c| !c.pass).map(|c| c.name).collect();
    if !failed.is_empty() {
        return Err(Error::Preflight(format!("{} failed; nothing was evicted", failed.join(", "))));
    }
    // The Raft timing the members run with, from their StatefulSet. Not knowing it is no
    // reason to skip a trial: the baseline says why it is missing.
    let (heartbeat_ms, election_ms, timing_source) = match timing::read(&client, &cfg.kube).await {
        Ok(t) => (Some(t.heartbeat_ms), Some(t.election_ms), t.source),
        Err(e) => {
            tracing::warn!("election timing not read: {e}");
            (None, None, format!("not read: {e}"))
        }
    };
    // With --reach port-forward the forwarders live as long as `connected`.
    let connected = connect(&client, &cfg.kube, cfg.reach).await?;
    let members = connected.members.clone();
    // Watch the pods, their nodes and their Events for the whole trial, into events.csv.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let prefix = common_prefix(&members.iter().map(|m| m.name.0.as_str()).collect::<Vec<_>>());
    let placement = crate::k8s::nodes::Placement::default();
    let watchers = [
        watch::spawn_pod_watcher(
            client.clone(),
            &cfg.kube,
            placement.clone(),
            clock.clone(),
            tx.clone(),
        ),
        crate::k8s::nodes::spawn_node_watcher(client.clone(), placement, clock.clone(), tx.clone()),
        watch::spawn_event_watcher(client.clone(), &cfg.kube, prefix, clock.clone(), tx.clone()),
        watch::spawn_api_heartbeat(client.clone(), &cfg.kube, po.pdb.clone(), clock.clone(), tx),
    ];
    let label = cfg.trial.environment.description.clone();
    // A rolling restart replaces the highest ordinal first, whatever --target says: that
    // member is the one whose loss and return the trial times.
    let target = match cfg.method {
        KubeMethod::RollingRestart => Target::Name(first_replaced(&members)),
        _ => cfg.trial.target.clone(),
    };
    let trial = TrialConfig {
        target,
        members: members.clone(),
        environment: Environment {
            kind: EnvironmentKind::Kubernetes,
            description: format!(
                "{label}, {} members{}",
                members.len(),
                if cfg.dry_run { ", DRY RUN (nothing evicted)" } else { "" }
            ),
            members: vec![],
            etcd_versions: vec![],
            heartbeat_ms,
            election_ms,
            timing_source,
        },
        follow_pod_ips: cfg.reach == Reach::PodIp,
        ..cfg.trial
    };
    let scope = Scope {
        client: client.clone(),
        kube: cfg.kube.clone(),
        timeout: cfg.evict_timeout,
        dry_run: cfg.dry_run,
    };
    let result = match cfg.method {
        KubeMethod::Evict | KubeMethod::Delete => {
            let pods: Api<Pod> = Api::namespaced(client, &cfg.kube.namespace);
            let evictor = KubeEvictor {
                method: cfg.method,
                ..KubeEvictor::new(
                    pods,
                    &cfg.kube.namespace,
                    cfg.kube.request_timeout,
                    cfg.evict_timeout,
                    cfg.dry_run,
                    clock.clone(),
                )
            };
            drive::run_trial(trial, evictor, clock, Some(rx), shutdown).await
        }
        KubeMethod::RollingRestart => {
            drive::run_trial(trial, RollingRestart::new(scope), clock, Some(rx), shutdown).await
        }
        KubeMethod::Drain => {
            drive::run_trial(trial, Drain::new(scope, cfg.down), clock, Some(rx), shutdown).await
        }
    };
    for w in watchers {
        w.abort();
    }
    drop(connected);
    result
}

/// The member a StatefulSet's rolling update replaces first: the highest ordinal.
fn first_replaced(members: &[crate::model::member::Member]) -> MemberName {
    let ordinal = |m: &crate::model::member::Member| {
        m.name.0.rsplit('-').next().and_then(|o| o.parse::<u64>().ok())
    };
    members
        .iter()
        .max_by_key(|m| (ordinal(m), m.name.0.clone()))
        .map(|m| m.name.clone())
        .unwrap_or_else(|| MemberName(String::new()))
}

/// `dlock-etcd-` for `dlock-etcd-0, dlock-etcd-1, dlock-etcd-2`: which Events are about members.
fn common_prefix(names: &[&str]) -> String {
    let Some(first) = names.first() else { return String::new() };
    let mut n = first.len();
    for other in &names[1..] {
        n = n.min(first.bytes().zip(other.bytes()).take_while(|(a, b)| a == b).count());
    }
    first[..n].to_owned()
}

/// The image must run the code of the `leaderwatch sitting` that wrote its arguments.
fn check_build(this: &Build, want: &Build) -> Result<()> {
    match this.agrees(want) {
        Agreement::Same => Ok(()),
        Agreement::CommitUnknown => {
            eprintln!(
                "warning: this image is leaderwatch {this}, the sitting's is {want}: one does not know its commit, so they may differ"
            );
            Ok(())
        }
        Agreement::Differs => Err(Error::Usage(format!(
            "{BUILD_MISMATCH}: this image is leaderwatch {this}, the sitting that made the Job is {want}; nothing was evicted. Build and push the image from the sitting's checkout (docs/gke-sitting.md), or run the sitting from the image's commit"
        ))),
    }
}

/// How a refused build's line starts (`leaderwatch sitting` finds it in the Job's log).
pub const BUILD_MISMATCH: &str = "build mismatch";

/// A measure run: the trial (`cfg`), after the image's build is checked against the one
/// that wrote the Job's arguments (`expect_build`); with `checksums`, the run directory's
/// SHA256SUMS written last, whatever the outcome.
pub async fn measure(
    cfg: MeasureConfig,
    expect_build: Option<&Build>,
    checksums: bool,
    shutdown: impl Future<Output = ()>,
) -> Finished {
    if let Some(want) = expect_build
        && let Err(e) = check_build(&Build::this(), want)
    {
        return Finished { written: None, result: Err(e) };
    }
    let client = match crate::k8s::client(&cfg.kube).await {
        Ok(c) => c,
        Err(e) => return Finished { written: None, result: Err(e.into()) },
    };
    let out = cfg.trial.out.clone();
    let path = out.join(crate::model::baseline::BASELINE);
    let since = std::time::SystemTime::now();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let result = run(client, cfg, clock, shutdown).await;
    if checksums {
        write_sums(&out);
    }
    drive::finished(&path, since, result)
}

/// The last act, whatever the outcome: what `leaderwatch sitting` checks its copy against.
fn write_sums(out: &Path) {
    if out.is_dir()
        && let Err(e) = crate::io::pack::write_sums(out)
    {
        tracing::warn!("checksums: {e}");
    }
}
