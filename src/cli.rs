//! The command line: clap definitions and their help text with examples.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::analysis::recovery::Target;
use crate::model::baseline::KubeMethod;
use crate::model::baseline::LocalMethod;
use crate::model::clock::parse_duration;

pub use crate::ops::measure::args::{
    CadenceArgs, ConnArgs, KubeArgs, MeasureArgs, Switch, Timeouts,
};

mod examples;
use examples::{
    MEASURE_EXAMPLES, PREFLIGHT_EXAMPLES, RATE_EXAMPLES, RECOUNT_EXAMPLES, REHEARSE_EXAMPLES,
    REPORT_EXAMPLES, SAMPLE_EXAMPLES, SITTING_EXAMPLES,
};

/// `-o` of `preflight` and `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// `-o` of `rate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RateOutput {
    Text,
    Json,
    Csv,
}

/// `report --format`: the two tables' forms, or the two forms of `--alert-rule`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Markdown,
    Csv,
    Rules,
    Prometheus,
}

/// Measures etcd leader changes (raw counter sum, reset-aware increase, raft-term
/// elections) for the dlock lock backend.
#[derive(Debug, Parser)]
#[command(name = "leaderwatch", version = crate::model::build::LONG_VERSION, about, long_about = None)]
pub struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `leaderwatch=debug`. The
    /// Kubernetes client's own log is off by default: every error of it reaches
    /// leaderwatch, which says it once, in its words (`kube_client=debug` shows it).
    #[arg(long, env = "LEADERWATCH_LOG", default_value = "info,kube_client=off", global = true)]
    pub log: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a whole trial on a local etcd cluster it starts itself: at rest, one disruption
    /// of a member (--method sigterm, sigkill or sigstop), settle; print the baseline table.
    #[command(after_help = REHEARSE_EXAMPLES)]
    Rehearse(RehearseArgs),
    /// Sample every member at a fixed interval into samples.csv, events.csv and summary.json.
    #[command(after_help = SAMPLE_EXAMPLES)]
    Sample(SampleArgs),
    /// Render baseline.json files as the observation-window table (elections with their
    /// causes) and, for schema 3, the member-health table; --update splices both into a
    /// README between <!-- baseline:begin --> and <!-- baseline:end -->.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// The residual rate of elections (per hour and per day, with its exact Poisson
    /// interval) over the quiet time of trials (baseline.json) and `sample` run directories.
    #[command(after_help = RATE_EXAMPLES)]
    Rate(RateArgs),
    /// Count a recorded run's elections again from its samples.csv and events.csv with
    /// this version's rules (terms, leaders, time without a leader, cause), list what
    /// differs from its baseline.json or summary.json, and with --write rewrite that file.
    #[command(after_help = RECOUNT_EXAMPLES)]
    Recount(RecountArgs),
    /// Every figure of two baselines (windows, causes, member health, recovery) side by
    /// side, matched by window, member and figure, with B − A.
    #[command(
        after_help = "Example:\n  leaderwatch compare data/rehearsal-leader-*/baseline.json data/gke-*/baseline.json\n  leaderwatch compare A/baseline.json B/baseline.json -o json"
    )]
    Compare(CompareArgs),
    /// Check the spec's acceptance criteria 2-6 live on the cluster: PASS/FAIL with evidence.
    #[command(after_help = PREFLIGHT_EXAMPLES)]
    Preflight(PreflightArgs),
    /// The trial on the real cluster: preflight, >= 20 min at rest, one PDB-respecting
    /// eviction, recovery, settle; writes baseline.json (what the sitting's Job runs).
    #[command(after_help = MEASURE_EXAMPLES)]
    Measure(MeasureArgs),
    /// The sitting: the trial run in the cluster as a Job, from this machine: checks, the
    /// Job (the committed manifests with your image and flags, running `measure`), its
    /// progress, then its run directory brought back into data/, the etcd README's table
    /// and the T-056 note.
    #[command(after_help = SITTING_EXAMPLES)]
    Sitting(SittingArgs),
    /// Print a run directory as an archive block on stdout (what `sitting` runs in a pod to
    /// bring the files back through the pod's log).
    #[command(hide = true)]
    Pack(PackArgs),
}

#[derive(Debug, Args)]
pub struct SittingArgs {
    /// The leaderwatch image the Job runs (the one you built and pushed).
    #[arg(long, required_unless_present_any = ["attach", "fetch"])]
    pub image: Option<String>,
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Member to disrupt: leader, follower or a pod name (the Job's `--target`).
    #[arg(long, default_value = "follower")]
    pub target: Target,
    /// evict (the spec's), delete, rolling-restart or drain (the Job's `--method`; the two
    /// last and delete need their extra RBAC file applied by an admin).
    #[arg(long, value_enum, default_value = "evict")]
    pub method: KubeMethod,
    /// Length of the at_rest window; at least 20m [default: 20m; with --dry-run 2m].
    #[arg(long, value_parser = parse_duration)]
    pub idle: Option<Duration>,
    /// Length of the settle window [default: 5m; with --dry-run 1m].
    #[arg(long, value_parser = parse_duration)]
    pub settle: Option<Duration>,
    /// Passed to the Job; together with the windows they make its deadline.
    #[command(flatten)]
    pub timeouts: Timeouts,
    /// Cluster label recorded in baseline.json and every table.
    #[arg(long, default_value = "GKE Autopilot, dlock-gke")]
    pub environment: String,
    /// First part of the local run directory's name: LABEL-TARGET-METHOD-UTC (a dry run's
    /// ends in -dry-run) [default: gke; --attach and --fetch: the sitting's own].
    #[arg(long)]
    pub label: Option<String>,
    /// Where the run directory lands [default: data/ of the leaderwatch checkout this runs
    /// in (or was installed from), else ./data].
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
    /// The README whose table is rendered from OUT-DIR/*/baseline.json [default:
    /// deploy/k8s/etcd/README.md of that checkout; said, not skipped, when there is none].
    #[arg(long)]
    pub readme: Option<PathBuf>,
    /// The T-056 ledger (tasks/README.md) whose baseline section, between its markers, the
    /// GKE runs' notes replace.
    #[arg(long, value_name = "PATH")]
    pub ledger: Option<PathBuf>,
    /// Everything but the disruption: the checks, the apply, the Job with the eviction sent
    /// as a server-side dry run, the follow, the fetch and the report. Nothing is evicted;
    /// the first thing to run on a new cluster.
    #[arg(long)]
    pub dry_run: bool,
    /// Follow the sitting already in the cluster (after a Ctrl-C), then fetch.
    #[arg(long, conflicts_with = "fetch")]
    pub attach: bool,
    /// Only bring back the finished sitting's results (after a failed fetch).
    #[arg(long)]
    pub fetch: bool,
    /// Leave the Job and its pod in the cluster (their log stays readable).
    #[arg(long)]
    pub keep: bool,
    /// Delete the PVC with the results too (only after they were fetched).
    #[arg(long)]
    pub cleanup_pvc: bool,
    /// The live view: apply podmonitoring-sitting.yaml beside the Job, so that Managed
    /// Service for Prometheus scrapes the sitting's own /metrics while it runs (GKE's
    /// managed collection must be on); deleted in the clean-up.
    #[arg(long, conflicts_with_all = ["attach", "fetch"])]
    pub pod_monitoring: bool,
    /// While following, requests that fail (a laptop asleep, a VPN down, a token that did
    /// not refresh) are tried again for this long; then it detaches (exit 9) with the
    /// `--attach` command. The sitting goes on in the cluster either way.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub reconnect_for: Duration,
}

#[derive(Debug, Args)]
pub struct PackArgs {
    /// The run directory.
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct PreflightArgs {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Output format: text or json.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct RehearseArgs {
    /// Members of the local cluster.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=9))]
    pub members: u16,
    /// Length of the at_rest window (rehearse may go below the 20 minutes of a real trial).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub idle: Duration,
    /// Length of the settle window after the cluster is healthy again.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub settle: Duration,
    /// Member to disrupt: leader, follower, or a member name (m0, m1, ...), chosen from live
    /// status at the moment of disruption.
    #[arg(long, default_value = "leader")]
    pub target: Target,
    /// How to fail the member: sigterm (what an eviction sends; etcd hands leadership over
    /// first), sigkill (a crash), or sigstop (a freeze for --down, then SIGCONT).
    #[arg(long, value_enum, default_value = "sigterm")]
    pub method: LocalMethod,
    /// How long the disrupted member stays down (sigterm, sigkill: until its restart, the
    /// reschedule) or frozen (sigstop: until SIGCONT).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub down: Duration,
    #[command(flatten)]
    pub cadence: CadenceArgs,
    /// Give up if the healthy list has not come back this long after the disruption.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub recovery_timeout: Duration,
    /// etcd binary (else ETCD_BIN, .tools/bin/etcd, PATH).
    #[arg(long)]
    pub etcd_bin: Option<PathBuf>,
    /// Run directory (default: data/rehearsal-<target>-<method>-<UTC time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// baseline.json files, in the order their rows should appear.
    #[arg(required = true, value_name = "BASELINE.json")]
    pub baselines: Vec<PathBuf>,
    /// Replace the table between the baseline markers in this README instead of printing it.
    #[arg(long, value_name = "README.md", conflicts_with = "format")]
    pub update: Option<PathBuf>,
    /// Output: markdown (the README tables) or csv (the tidy list: one row per figure per
    /// window and member, for documents); with --alert-rule: rules (a managed Prometheus
    /// Rules manifest, the default) or prometheus (a plain rule file).
    #[arg(long, value_enum)]
    pub format: Option<ReportFormat>,
    /// Write an alert on increase(leaderwatch_elections_total[WINDOW]) whose threshold is
    /// derived from the baselines (elections per voluntary disruption x the disruptions
    /// the PDB allows in the window + the at-rest rate, rounded up, at least 1).
    #[arg(long, conflicts_with = "update")]
    pub alert_rule: bool,
    /// With --alert-rule: derive from local (rehearsal) baselines when no Kubernetes one is given.
    #[arg(long, requires = "alert_rule")]
    pub allow_local: bool,
    /// With --alert-rule: the range of increase().
    #[arg(long, default_value = "15m", value_parser = parse_duration, requires = "alert_rule")]
    pub window: Duration,
    /// With --alert-rule: voluntary disruptions allowed in one window (default: one rolling
    /// pass over the members, which the PDB lets through one at a time).
    #[arg(long, requires = "alert_rule")]
    pub disruptions: Option<u32>,
    /// With --alert-rule: the scrape interval of the sampler's PodMonitoring (and the rule
    /// group's evaluation interval).
    #[arg(long, default_value = "30s", value_parser = parse_duration, requires = "alert_rule")]
    pub scrape_interval: Duration,
    /// With --alert-rule: derive a threshold even when no baseline disrupted a leader (it
    /// then says nothing about a leader loss, and is refused without this).
    #[arg(long, requires = "alert_rule")]
    pub force: bool,
    /// With --alert-rule: the namespace of the Rules manifest.
    #[arg(long, default_value = "dlock", requires = "alert_rule")]
    pub namespace: String,
}

#[derive(Debug, Args)]
pub struct RateArgs {
    /// baseline.json files, directories holding one, `sample` run directories, or a
    /// directory of such runs (e.g. data/).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Two-sided confidence of the interval, between 0 and 1.
    #[arg(long, default_value = "0.95", value_parser = parse_confidence)]
    pub confidence: f64,
    /// Output: text (a table), json, or csv (the columns of report --format csv).
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: RateOutput,
}

#[derive(Debug, Args)]
pub struct RecountArgs {
    /// Run directories (samples.csv, events.csv and baseline.json or summary.json), or
    /// directories holding them one level down (e.g. data/).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Rewrite each baseline.json or summary.json whose figures change (atomically; the
    /// raw files are never touched). Without it nothing is written.
    #[arg(long)]
    pub write: bool,
}

/// `--confidence`: a probability strictly between 0 and 1 (0.95, or 95%).
pub fn parse_confidence(s: &str) -> Result<f64, String> {
    let v = match s.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => s.trim().parse::<f64>(),
    }
    .map_err(|_| format!("{s:?} is not a number; use e.g. 0.95 or 95%"))?;
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(format!("{s:?}: must be between 0 and 1 (e.g. 0.95)"))
    }
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    #[arg(value_name = "A/baseline.json")]
    pub a: PathBuf,
    #[arg(value_name = "B/baseline.json")]
    pub b: PathBuf,
    /// Output format: text (a markdown table) or json.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

/// `--retain`: a duration of at least one day, in whole days (rounded up).
pub fn parse_retain(s: &str) -> Result<u32, String> {
    let d = parse_duration(s)?;
    const DAY: u64 = 86_400;
    if d.as_secs() < DAY {
        return Err(format!("{s:?}: keep at least 1d (the files are daily)"));
    }
    u32::try_from(d.as_secs().div_ceil(DAY)).map_err(|_| format!("{s:?}: too long"))
}

/// `sample --metrics-interval`: a duration or `on-change`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsInterval {
    Every(Duration),
    OnChange,
}

pub fn parse_metrics_interval(s: &str) -> Result<MetricsInterval, String> {
    if s == "on-change" {
        return Ok(MetricsInterval::OnChange);
    }
    parse_duration(s).map(MetricsInterval::Every).map_err(|e| format!("{e}, or on-change"))
}

#[derive(Debug, Args)]
pub struct SampleArgs {
    /// A member to sample, NAME=URL (client URL, port 2379 on a real member). Repeat per member.
    #[arg(long = "endpoint", value_name = "NAME=URL", required = true)]
    pub endpoints: Vec<String>,
    /// Time between round starts.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Stop after this long; without it, run until Ctrl-C / SIGTERM.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Read /metrics (the page that costs etcd the most to serve) only this often, in
    /// whole intervals, or `on-change`: only from a member whose Status RPC shows a new
    /// leader, term or alarm, or that comes back (what a sitting's fast phase does, e.g.
    /// `--interval 100ms --metrics-interval on-change`). The Status RPC runs every
    /// --interval; /health too, but a healthy member whose Status did not change is asked
    /// once a second. Default: every round.
    #[arg(long, value_parser = parse_metrics_interval)]
    pub metrics_interval: Option<MetricsInterval>,
    /// Bound on each part of a probe (metrics, health, status RPC).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// How far before an election its cause (a Kubernetes event, a restart, an unreachable
    /// or stressed leader) is looked for.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub cause_horizon: Duration,
    /// Also run the canary: each interval one linearizable write (a Put of
    /// __leaderwatch/canary/<run_id> under a 30 s lease, revoked at exit) and one
    /// linearizable read, into canary.csv. Off by default: it adds a small write load.
    #[arg(long)]
    pub canary: bool,
    /// With --canary, also the lock canary: 3 clients take turns on one lock under
    /// __leaderwatch/lock/<run_id>/ as etcd's Go concurrency.Mutex does (leases of 10 s kept
    /// alive, each holding 100 ms), every event into locks.csv (rotated daily like
    /// canary.csv). Off by default: it adds a write load of its own.
    #[arg(long, requires = "canary")]
    pub lock_canary: bool,
    /// Deadline of each canary op.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub canary_timeout: Duration,
    /// Run directory: samples.csv, events.csv, health.csv, canary.csv (with --canary),
    /// summary.json. samples.csv, health.csv and canary.csv hold the current UTC day; a
    /// day that is over becomes samples-YYYY-MM-DD.csv.gz (and so on).
    #[arg(long)]
    pub out: PathBuf,
    /// Keep the daily files of this many days before the current one (rounded up to whole
    /// days); older ones are deleted, whole files only. events.csv and summary.json are
    /// never deleted.
    #[arg(long, default_value = "30d", value_parser = parse_retain)]
    pub retain: u32,
    /// Serve leaderwatch's own /metrics (OpenMetrics) and /healthz on HOST:PORT, e.g.
    /// 0.0.0.0:9464 in a pod, 127.0.0.1:0 for any free port (the address goes to events.csv).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// CA bundle (PEM) for https:// members, used by HTTP and gRPC alike.
    #[arg(long)]
    pub cacert: Option<PathBuf>,
    /// Client certificate (PEM); needs --key.
    #[arg(long)]
    pub cert: Option<PathBuf>,
    /// Client key (PEM); needs --cert.
    #[arg(long)]
    pub key: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::discover::Reach;

    fn kube(args: &[&str]) -> Result<KubeArgs, clap::Error> {
        let mut all = vec!["leaderwatch", "preflight"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| match c.command {
            Command::Preflight(p) => p.kube,
            _ => unreachable!("parsed as preflight"),
        })
    }

    #[test]
    fn port_forward_flag_is_reach_port_forward_and_excludes_reach() {
        assert_eq!(kube(&["--port-forward"]).map(|k| k.reach()).ok(), Some(Reach::PortForward));
        assert_eq!(kube(&[]).map(|k| k.reach()).ok(), Some(Reach::Dns));
        assert!(kube(&["--port-forward", "--reach", "dns"]).is_err());
    }
}
