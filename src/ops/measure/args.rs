//! `leaderwatch measure`'s arguments, the one description of them: clap parses them on
//! the command line and in the Job (`leaderwatch sitting` reads a Job's arguments back with
//! [`MeasureArgs::parse_job`]), and [`MeasureArgs::to_args`] writes them for the Job; a
//! test round-trips every flag. The parts other commands share (the cluster, the cadence,
//! the timeouts) are here too, and src/cli.rs uses them.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, FromArgMatches, ValueEnum};

use crate::analysis::recovery::Target;
use crate::io::lock::LockConfig;
use crate::k8s::discover::Reach;
use crate::model::baseline::{KubeMethod, LocalMethod};
use crate::model::build::Build;
use crate::model::clock::parse_duration;

/// `--canary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// clap's list of a layer's own enum: its variants by their one name (`named!`, in
/// src/model/mod.rs), which `FromStr` takes too.
macro_rules! value_enum_by_name {
    ($($t:ty),+) => {$(
        impl ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                <$t>::ALL
            }
            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(PossibleValue::new(self.as_str()))
            }
        }
    )+};
}

value_enum_by_name!(KubeMethod, LocalMethod, Reach);

/// How long a sitting waits on its disruption: `measure`'s own, and what `sitting` passes to
/// the Job.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct Timeouts {
    /// Give up on a PDB-blocked eviction after this long (retried every 5 s, like kubectl
    /// drain), or on a rolling restart that has not finished.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub evict_timeout: Duration,
    /// Give up if the healthy list has not come back this long after the eviction (a
    /// rolling restart on zonal disks may need more).
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub recovery_timeout: Duration,
}

/// Which cluster, and how long one API request may take.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct ConnArgs {
    /// kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig context (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    /// Bound on each API request.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub request_timeout: Duration,
}

/// Where the cluster is and which pods are the members.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct KubeArgs {
    /// Namespace of the etcd pods.
    #[arg(short = 'n', long, default_value = "dlock")]
    pub namespace: String,
    /// Label selector of the etcd pods.
    #[arg(long, default_value = "app.kubernetes.io/name=dlock-etcd")]
    pub selector: String,
    #[command(flatten)]
    pub conn: ConnArgs,
    /// How to reach the members: dns (<pod>.<headless svc>, in the cluster), pod-ip
    /// (follows a recreated pod to its new address), or port-forward (from a laptop;
    /// follows a recreated pod by name).
    #[arg(long, value_enum, default_value = "dns")]
    pub reach: Reach,
    /// Same as `--reach port-forward`: built-in port-forwards, for running from a laptop.
    #[arg(long, conflicts_with = "reach")]
    pub port_forward: bool,
}

impl KubeArgs {
    /// `--port-forward`, else `--reach`.
    pub fn reach(&self) -> Reach {
        if self.port_forward { Reach::PortForward } else { self.reach }
    }

    /// The Kubernetes client's options.
    pub fn options(&self) -> crate::k8s::KubeOptions {
        crate::k8s::KubeOptions {
            kubeconfig: self.conn.kubeconfig.clone(),
            context: self.conn.context.clone(),
            namespace: self.namespace.clone(),
            selector: self.selector.clone(),
            request_timeout: self.conn.request_timeout,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Args)]
pub struct MeasureArgs {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Length of the at_rest window; at least 20m [default: 20m; with --dry-run 2m].
    #[arg(long, value_parser = parse_duration)]
    pub idle: Option<Duration>,
    /// Length of the settle window after the cluster is healthy again [default: 5m; with
    /// --dry-run 1m].
    #[arg(long, value_parser = parse_duration)]
    pub settle: Option<Duration>,
    /// Member to disrupt: leader, follower or a pod name (drain: the member whose node is
    /// drained; rolling-restart: not used, the highest ordinal goes first).
    #[arg(long, default_value = "follower")]
    pub target: Target,
    /// How to disrupt it: `evict` (a policy/v1 Eviction, the PDB decides: the spec's
    /// drain-equivalent), `delete` (DELETE of the pod with its grace period, as the
    /// spec's §6 `kubectl delete pod`; no PDB involved), `rolling-restart` (what `kubectl
    /// rollout restart` does: every member replaced by the StatefulSet controller, one at a
    /// time), or `drain` (`kubectl drain` of the target's node: cordon, evict every pod on
    /// it with the PDB respected, uncordon at the end; needs rbac-drain.yaml).
    #[arg(long, value_enum, default_value = "evict")]
    pub method: KubeMethod,
    /// drain: how long the node stays cordoned after its drain when no other node of the
    /// member's zone takes it (standing in for the node's upgrade); then it is uncordoned
    /// and the member comes back there.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub down: Duration,
    #[command(flatten)]
    pub cadence: CadenceArgs,
    #[command(flatten)]
    pub timeouts: Timeouts,
    /// Everything but the eviction (the Eviction is sent as a server-side dry run).
    #[arg(long)]
    pub dry_run: bool,
    /// Cluster label recorded in baseline.json and every table (or LEADERWATCH_ENVIRONMENT,
    /// which a Job can set without changing its arguments).
    #[arg(long, env = "LEADERWATCH_ENVIRONMENT", default_value = "GKE Autopilot, dlock-gke")]
    pub environment: String,
    /// Run directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Serve leaderwatch's own /metrics (OpenMetrics) and /healthz on HOST:PORT for the
    /// whole sitting, e.g. 0.0.0.0:9464 (the address goes to events.csv).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Write SHA256SUMS of the run directory's files as the last act (what `sitting`
    /// checks its copy against).
    #[arg(long)]
    pub checksums: bool,
    /// The build that made this Job (`leaderwatch sitting` sets it): a binary of another
    /// build refuses to run, before anything is evicted (exit 2).
    #[arg(long, value_name = "VERSION+COMMIT", value_parser = Build::parse)]
    pub expect_build: Option<Build>,
}

/// Sampling cadence and probe bound, shared by `rehearse` and `measure`.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct CadenceArgs {
    /// Sampling interval at rest and while settling.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Sampling interval from the disruption until the cluster is healthy.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub fast_interval: Duration,
    /// Bound on each part of a probe.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// How far before an election its cause (a disruption, a Kubernetes event, a restart,
    /// an unreachable or stressed leader) is looked for.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub cause_horizon: Duration,
    /// The canary: from the disruption request to the end of settle, one linearizable write
    /// (a Put of __leaderwatch/canary/<run_id> under a 30 s lease, revoked at exit) and one
    /// linearizable read every --fast-interval, into canary.csv (`on` or `off`).
    #[arg(long, value_enum, default_value = "on")]
    pub canary: Switch,
    /// Deadline of each canary op.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub canary_timeout: Duration,
    /// The lock canary, beside the canary (so never with `--canary off`): --lock-holders
    /// clients take turns on one lock under __leaderwatch/lock/<run_id>/ as etcd's Go
    /// concurrency.Mutex does, each on a lease kept alive, holding it --lock-hold; every
    /// event into locks.csv, the time between grants and leases lost into baseline.json
    /// (`on` or `off`).
    #[arg(long, value_enum, default_value = "on")]
    pub lock_canary: Switch,
    /// Clients contending for the lock canary's lock (1-32; with two or more a waiter is
    /// always asking, which the time between grants needs).
    #[arg(long, default_value = "3", value_parser = clap::value_parser!(u16).range(1..=32))]
    pub lock_holders: u16,
    /// Lease TTL of each lock canary client, whole seconds: a holder whose keep-alives go
    /// unanswered this long loses the lock. 10 s is of the order a lock service gives its
    /// sessions (clientv3's default is 60 s, which leaves a crashed holder's lock taken a
    /// minute).
    #[arg(long, default_value = "10s", value_parser = parse_lease_ttl)]
    pub lock_ttl: Duration,
    /// How long each lock canary client holds the lock before releasing it.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub lock_hold: Duration,
}

impl CadenceArgs {
    /// The canary's deadline, or `None` when it is off.
    pub fn canary(&self) -> Option<Duration> {
        (self.canary == Switch::On).then_some(self.canary_timeout)
    }

    /// The lock canary's settings, or `None` when it (or the canary) is off.
    pub fn lock(&self) -> Option<LockConfig> {
        (self.canary == Switch::On && self.lock_canary == Switch::On).then(|| LockConfig {
            holders: self.lock_holders,
            ttl_s: i64::try_from(self.lock_ttl.as_secs()).unwrap_or(i64::MAX),
            hold: self.lock_hold,
            timeout: self.canary_timeout,
        })
    }
}

/// A lease TTL: a duration of whole seconds, at least 1 s (etcd's leases count seconds).
fn parse_lease_ttl(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.subsec_nanos() != 0 || d.as_secs() == 0 {
        return Err(format!("{s:?}: a lease TTL is whole seconds, at least 1s (e.g. 10s)"));
    }
    Ok(d)
}

/// A duration as the flags take it back (`parse_duration`): whole milliseconds.
fn d(v: Duration) -> String {
    format!("{}ms", v.as_millis())
}

fn on(s: Switch) -> &'static str {
    match s {
        Switch::On => "on",
        Switch::Off => "off",
    }
}

impl MeasureArgs {
    /// The arguments of a Job's `leaderwatch measure` (after `measure`), parsed as the
    /// Job's binary parses them: clap's defaults for what they leave out.
    pub fn parse_job(args: &[String]) -> Result<MeasureArgs, String> {
        // A Job made by another version may say more: what this one does not know is
        // passed over, as a flag left out would be.
        let cmd = MeasureArgs::augment_args(
            clap::Command::new("measure").no_binary_name(true).ignore_errors(true),
        );
        let m = cmd.try_get_matches_from(args).map_err(|e| e.to_string())?;
        MeasureArgs::from_arg_matches(&m).map_err(|e| e.to_string())
    }

    /// Every flag, as `--name=value` (`--name` for a switch that is set): what the Job is
    /// given, so that [`MeasureArgs::parse_job`] gives back this value.
    pub fn to_args(&self) -> Vec<String> {
        let k = &self.kube;
        let c = &self.cadence;
        let mut a = vec![
            format!("--namespace={}", k.namespace),
            format!("--selector={}", k.selector),
            format!("--request-timeout={}", d(k.conn.request_timeout)),
            format!("--reach={}", k.reach.as_str()),
            format!("--target={}", self.target),
            format!("--method={}", self.method.as_str()),
            format!("--down={}", d(self.down)),
            format!("--interval={}", d(c.interval)),
            format!("--fast-interval={}", d(c.fast_interval)),
            format!("--timeout={}", d(c.timeout)),
            format!("--cause-horizon={}", d(c.cause_horizon)),
            format!("--canary={}", on(c.canary)),
            format!("--canary-timeout={}", d(c.canary_timeout)),
            format!("--lock-canary={}", on(c.lock_canary)),
            format!("--lock-holders={}", c.lock_holders),
            format!("--lock-ttl={}s", c.lock_ttl.as_secs()),
            format!("--lock-hold={}", d(c.lock_hold)),
            format!("--evict-timeout={}", d(self.timeouts.evict_timeout)),
            format!("--recovery-timeout={}", d(self.timeouts.recovery_timeout)),
            format!("--environment={}", self.environment),
            format!("--out={}", self.out.display()),
        ];
        let optional = [
            ("--kubeconfig", k.conn.kubeconfig.as_ref().map(|p| p.display().to_string())),
            ("--context", k.conn.context.clone()),
            ("--idle", self.idle.map(d)),
            ("--settle", self.settle.map(d)),
            ("--metrics-addr", self.metrics_addr.map(|a| a.to_string())),
            ("--expect-build", self.expect_build.as_ref().map(|b| b.to_string())),
        ];
        a.extend(optional.into_iter().filter_map(|(n, v)| v.map(|v| format!("{n}={v}"))));
        for (set, name) in [
            (k.port_forward, "--port-forward"),
            (self.dry_run, "--dry-run"),
            (self.checksums, "--checksums"),
        ] {
            if set {
                a.push(name.to_owned());
            }
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every flag, none at its default.
    fn every_flag() -> Vec<String> {
        [
            "--namespace=etcd",
            "--selector=app=etcd",
            "--kubeconfig=/k/config",
            "--context=lab",
            "--request-timeout=3s",
            "--reach=pod-ip",
            "--idle=25m",
            "--settle=7m",
            "--target=leader",
            "--method=drain",
            "--down=90s",
            "--interval=2s",
            "--fast-interval=50ms",
            "--timeout=1500ms",
            "--cause-horizon=45s",
            "--canary=on",
            "--canary-timeout=700ms",
            "--lock-canary=off",
            "--lock-holders=5",
            "--lock-ttl=20s",
            "--lock-hold=250ms",
            "--evict-timeout=12m",
            "--recovery-timeout=20m",
            "--dry-run",
            "--environment=GKE Autopilot, dlock-gke, test",
            "--out=/data/$(POD_NAME)",
            "--metrics-addr=0.0.0.0:9464",
            "--checksums",
            "--expect-build=0.1.0+abc",
        ]
        .map(String::from)
        .to_vec()
    }

    fn described() -> BTreeSet<String> {
        MeasureArgs::augment_args(clap::Command::new("measure"))
            .get_arguments()
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .filter(|l| l != "--help")
            .collect()
    }

    fn names(args: &[String]) -> BTreeSet<String> {
        args.iter().map(|a| a.split('=').next().unwrap_or_default().to_owned()).collect()
    }

    #[test]
    fn every_flag_round_trips_through_the_jobs_arguments() {
        let a = MeasureArgs::parse_job(&every_flag()).expect("every flag parses");
        let mut set = names(&every_flag());
        set.insert("--port-forward".into()); // below: it conflicts with --reach
        assert_eq!(set, described(), "the test sets every flag clap knows");
        let written = a.to_args();
        assert_eq!(MeasureArgs::parse_job(&written).expect("parses"), a);
        // --port-forward conflicts with --reach: it round-trips on its own.
        let mut pf = every_flag();
        pf.retain(|f| !f.starts_with("--reach"));
        pf.push("--port-forward".into());
        let pf = MeasureArgs::parse_job(&pf).expect("parses");
        assert_eq!(MeasureArgs::parse_job(&pf.to_args()).expect("parses"), pf);
        let mut all = names(&written);
        all.extend(names(&pf.to_args()));
        assert_eq!(all, described(), "to_args writes every flag of the description");
    }

    #[test]
    fn what_a_job_leaves_out_is_claps_default_and_an_unknown_flag_is_passed_over() {
        let a = MeasureArgs::parse_job(&["--out=/data/x".into(), "--from-the-future=1".into()])
            .expect("parses");
        assert_eq!((a.target, a.method), (Target::Follower, KubeMethod::Evict));
        assert_eq!((a.kube.namespace.as_str(), a.idle, a.dry_run), ("dlock", None, false));
        assert_eq!(a.timeouts.evict_timeout, Duration::from_secs(600));
    }
}
