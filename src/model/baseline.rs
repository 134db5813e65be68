//! `baseline.json` (schema_version 3): the observation windows of one sitting (with each
//! member's health and every election's cause), the disruption's instants, and where it
//! ran. Documented in data/README.md. Only this version loads: the one committed file of
//! an older one was migrated to it once (#35).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::clock::Stamp;
use crate::model::counts::{Counts, LeaderChanges, LeaderTransition};
use crate::model::event::{Cause, EventKind, Source};

pub const SCHEMA_VERSION: u32 = 3;
pub const BASELINE: &str = "baseline.json";

/// One observation window and its counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowRecord {
    pub name: WindowName,
    /// Time of the boundary round the window starts from (the previous window's last).
    pub start: DateTime<Utc>,
    /// Time of its last round.
    pub end: DateTime<Utc>,
    /// From the monotonic clock, not `end - start`: a wall-clock step changes nothing.
    pub duration_s: f64,
    /// Rounds the window owns (its `phase` in samples.csv); the boundary round is not one.
    pub rounds: u64,
    /// It ran as long as planned (`false`: cut short by a signal, a failure or a timeout).
    pub full_length: bool,
    pub leader_changes: LeaderChanges,
    pub elections: Option<u64>,
    pub leader_transitions: Vec<LeaderTransition>,
    /// Every election seen in the window, with its cause.
    pub elections_detail: Vec<ElectionDetail>,
    /// Each member's health over the window, by member name.
    pub health: BTreeMap<String, MemberHealth>,
    /// What the canary's writes and reads saw in the window; absent when it did not run
    /// (at rest, or `--canary off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<crate::model::canary::ClientFigures>,
    /// What the lock canary saw in the window; absent when it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<crate::model::lock::LockFigures>,
}

named! {
    /// The windows of a run, as samples.csv's `phase` and baseline.json's `windows[].name`
    /// name them.
    WindowName {
        /// A sitting's `--idle`: the cluster left alone.
        AtRest = "at_rest",
        /// From the disruption request to the healthy list.
        Disruption = "disruption",
        /// A sitting's `--settle`, after the recovery.
        Settle = "settle",
        /// The one window of a `sample` run.
        Sample = "sample",
    }
}

impl WindowName {
    /// A window of quiet time, where the residual rate is counted.
    pub fn is_quiet(self) -> bool {
        matches!(self, WindowName::AtRest | WindowName::Settle)
    }
}

/// One member's health over one window (or one health.csv interval), from the deltas of
/// its histograms and counters between the boundary rounds (src/analysis/health.rs). `None`: not
/// known (no two `/metrics` reads, or no observation for a quantile), never 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemberHealth {
    /// WAL fsyncs in the window: how many observations the fsync quantiles rest on.
    pub wal_fsyncs: Option<f64>,
    pub wal_fsync_p50_s: Option<f64>,
    pub wal_fsync_p99_s: Option<f64>,
    pub backend_commits: Option<f64>,
    pub backend_commit_p99_s: Option<f64>,
    /// Round-trip time p99 to each peer, by the peer's member name (its hex id when the
    /// name is not known).
    pub peer_rtt_p99_s: BTreeMap<String, Option<f64>>,
    pub heartbeat_send_failures: Option<f64>,
    pub slow_applies: Option<f64>,
    pub proposals_failed: Option<f64>,
    pub slow_read_indexes: Option<f64>,
    /// At the end of the window.
    pub db_size_bytes: Option<f64>,
    pub quota_bytes: Option<f64>,
    /// Process restarts inside the window: each delta counts from zero after one.
    pub restarts: u32,
    /// The figures above a documented threshold.
    pub over: Vec<Flag>,
}

/// A figure above the threshold it is held against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flag {
    /// e.g. `wal_fsync_p99_s`, `peer_rtt_p99_s{etcd-1}`, `db_size_bytes`.
    pub figure: String,
    pub value: f64,
    pub threshold: f64,
    /// Where the threshold comes from, e.g. `etcd docs`, `etcd mixin etcdHighFsyncDurations`.
    pub source: String,
}

/// One election (a rise of the cluster's raft term) and why it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElectionDetail {
    pub term_from: u64,
    pub term_to: u64,
    /// Start of the last round that still showed `term_from`.
    pub after: DateTime<Utc>,
    /// Start of the first round that showed `term_to`.
    pub observed_at: DateTime<Utc>,
    /// Member names, when the leader was known.
    pub old_leader: Option<String>,
    pub new_leader: Option<String>,
    /// Time with no leader that a quorum of members agreed on, from the first round
    /// without one to the first round with the new one (at the sampling resolution; 0
    /// when every round had one).
    pub leaderless_s: Option<f64>,
    /// docs/counting.md has the order of precedence.
    pub cause: Cause,
    /// The events.csv row the cause points to.
    pub cause_event: Option<EventRef>,
    /// The canary's write unavailability that overlaps the election (the longest gap
    /// between successful writes around it, minus the cadence); absent when the canary was
    /// not running then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_unavailable_s: Option<f64>,
    /// The same over the writes a client with one op in flight would have sent: what
    /// such a client sees; absent as the above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_unavailable_one_in_flight_s: Option<f64>,
    /// The lock canary's longest time from one grant to the next that overlaps the
    /// election, minus the hold (a waiter was asking throughout); absent when it was not
    /// running then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_unavailable_s: Option<f64>,
}

/// Names one events.csv row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRef {
    pub ts: DateTime<Utc>,
    pub source: Source,
    pub member: String,
    pub kind: EventKind,
    pub detail: String,
}

impl Environment {
    /// Measured by `measure` on a cluster of its own (GKE), not on the local control plane
    /// nor by `rehearse`: what the GKE rows of the table and the alert rule are made of.
    pub fn on_target_cluster(&self) -> bool {
        self.kind == EnvironmentKind::Kubernetes
            && !self.description.starts_with(LOCAL_CONTROL_PLANE)
    }
}

impl WindowRecord {
    pub fn new(
        name: WindowName,
        start: Stamp,
        end: Stamp,
        rounds: u64,
        c: &Counts,
        full_length: bool,
    ) -> Self {
        WindowRecord {
            name,
            start: start.utc,
            end: end.utc,
            duration_s: start.secs_to(&end),
            rounds,
            full_length,
            leader_changes: LeaderChanges::from_counts(c),
            elections: c.elections,
            leader_transitions: c.leader_transitions.clone(),
            elections_detail: Vec::new(),
            health: BTreeMap::new(),
            client: None,
            lock: None,
        }
    }
}

/// The one disruption of a sitting and the instants that time its recovery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disruption {
    pub target: String,
    pub target_was_leader: bool,
    /// `local-sigterm`, `local-sigkill`, `local-sigstop` (rehearse) or
    /// `kubernetes-eviction`, `kubernetes-delete`, `kubernetes-rolling-restart` or
    /// `kubernetes-drain` (measure).
    pub method: DisruptionMethod,
    pub requested_at: DateTime<Utc>,
    /// First round in which the target no longer answered healthy.
    pub member_lost_at: Option<DateTime<Utc>>,
    /// First round after that in which it answered healthy again.
    pub member_back_at: Option<DateTime<Utc>>,
    /// First round after the request whose agreed leader has a higher term than before it.
    pub leader_elected_at: Option<DateTime<Utc>>,
    /// First round in which the healthy 3-member endpoint list held again.
    pub healthy_at: Option<DateTime<Utc>>,
    pub loss_to_healthy_s: Option<f64>,
    pub request_to_healthy_s: Option<f64>,
    /// What the disruptor itself knows exactly (local: signal and restart instants), and
    /// how far the measured instants are from it.
    pub ground_truth: Vec<GroundTruth>,
    /// Requests the disruption took (a PDB-blocked eviction is retried).
    pub attempts: u32,
    /// Time the disruption was blocked (first attempt to the accepted one).
    pub blocked_s: f64,
    /// The recovery step by step (eviction accepted, DisruptionTarget, deletion, old pod
    /// gone, replacement scheduled, Running, Ready, member back, healthy list).
    pub waterfall: Vec<Step>,
    /// A rolling restart or a drain: every member it replaced, in order, and how long the
    /// whole operation took. Absent for a single-pod disruption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<Maintenance>,
}

/// What a routine operation (`measure --method rolling-restart` or `drain`) did, from the
/// disruptor's own events (src/analysis/maintenance.rs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Maintenance {
    pub operation: KubeMethod,
    /// The members replaced, in the order their old pods began terminating.
    pub members: Vec<MemberReplacement>,
    /// From the request to the later of the operation's end (rollout complete; node
    /// uncordoned) and the last replaced member Ready.
    pub operation_s: Option<f64>,
    /// A drain: the node cordoned, the pods evicted from it, and where the member came
    /// back (another node of its zone when a surge node was there, else the same node
    /// once uncordoned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evicted: Vec<String>,
    /// When the node was uncordoned (a drain), also after a cut-short sitting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncordoned_at: Option<DateTime<Utc>>,
}

/// One member's pod replaced by a routine operation. Times are seconds from the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberReplacement {
    pub member: String,
    /// It was the leader when the operation was requested.
    pub was_leader: bool,
    /// Its old pod seen terminating (deletionTimestamp set).
    pub terminating_s: Option<f64>,
    /// Its old pod gone (absent or replaced by a new uid).
    pub gone_s: Option<f64>,
    /// Its new pod Ready.
    pub ready_s: Option<f64>,
    /// terminating -> Ready: what this member cost the operation.
    pub down_s: Option<f64>,
    /// The node the new pod runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

named! {
    /// How `measure` disrupts its target (`--method`; `maintenance.operation` in
    /// baseline.json).
    KubeMethod {
        /// A policy/v1 Eviction: the PDB decides (what `kubectl drain` sends per pod).
        Evict = "evict",
        /// A DELETE of the pod with its grace period (`kubectl delete pod`): no PDB involved.
        Delete = "delete",
        /// `kubectl rollout restart`: the StatefulSet controller replaces every member.
        RollingRestart = "rolling-restart",
        /// `kubectl drain` of the target's node: cordon, evict every pod on it.
        Drain = "drain",
    }
}

impl KubeMethod {
    /// As `disruption.method` records it.
    pub fn recorded(self) -> &'static str {
        match self {
            KubeMethod::Evict => "kubernetes-eviction",
            KubeMethod::Delete => "kubernetes-delete",
            KubeMethod::RollingRestart => "kubernetes-rolling-restart",
            KubeMethod::Drain => "kubernetes-drain",
        }
    }

    /// A routine operation over several pods, with a [`Maintenance`] record.
    pub fn is_maintenance(self) -> bool {
        matches!(self, KubeMethod::RollingRestart | KubeMethod::Drain)
    }
}

named! {
    /// How `rehearse` fails a member (`--method`; `local-<name>` in `disruption.method`).
    LocalMethod {
        /// What the kubelet sends an evicted pod: etcd transfers leadership first. Restart
        /// after the down time.
        Sigterm = "sigterm",
        /// A crash: no transfer, so a leader target forces a timeout election. Restart after
        /// the down time.
        Sigkill = "sigkill",
        /// A freeze for the down time, then SIGCONT: the member comes back without a restart.
        Sigstop = "sigstop",
    }
}

/// What disrupted the target: a method, and whether it was only a server-side dry run.
/// `disruption.method` records it as one word (`local-sigkill`, `kubernetes-drain`, with
/// `-dry-run` appended for a dry run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DisruptionMethod {
    pub kind: MethodKind,
    /// The API server validated the requests and changed nothing (`measure --dry-run`).
    pub dry_run: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodKind {
    Local(LocalMethod),
    Kube(KubeMethod),
}

impl DisruptionMethod {
    pub fn local(m: LocalMethod) -> Self {
        DisruptionMethod { kind: MethodKind::Local(m), dry_run: false }
    }

    pub fn kube(m: KubeMethod, dry_run: bool) -> Self {
        DisruptionMethod { kind: MethodKind::Kube(m), dry_run }
    }

    /// The Kubernetes method, for a sitting `measure` ran.
    pub fn kube_method(self) -> Option<KubeMethod> {
        match self.kind {
            MethodKind::Kube(m) => Some(m),
            MethodKind::Local(_) => None,
        }
    }

    /// Every recorded name, for reading one back.
    fn all() -> impl Iterator<Item = DisruptionMethod> {
        let local = LocalMethod::ALL.iter().map(|&m| DisruptionMethod::local(m));
        let kube = KubeMethod::ALL
            .iter()
            .flat_map(|&m| [false, true].map(|dry| DisruptionMethod::kube(m, dry)));
        local.chain(kube)
    }
}

impl std::fmt::Display for DisruptionMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            MethodKind::Local(m) => write!(f, "local-{m}")?,
            MethodKind::Kube(m) => f.write_str(m.recorded())?,
        }
        if self.dry_run { f.write_str("-dry-run") } else { Ok(()) }
    }
}

impl std::str::FromStr for DisruptionMethod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DisruptionMethod::all()
            .find(|m| m.to_string() == s)
            .ok_or_else(|| format!("unknown disruption method {s:?}"))
    }
}

impl Serialize for DisruptionMethod {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DisruptionMethod {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// `leader` or `follower`: what the target was when it was disrupted.
pub fn role(was_leader: bool) -> &'static str {
    if was_leader { "leader" } else { "follower" }
}

impl Disruption {
    pub fn role(&self) -> &'static str {
        role(self.target_was_leader)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub step: String,
    pub at: DateTime<Utc>,
    pub since_previous_s: f64,
    pub since_request_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundTruth {
    /// e.g. `sigterm_sent`, `exited`, `restarted`.
    pub kind: EventKind,
    pub at: DateTime<Utc>,
    /// Monotonic seconds from the request.
    pub since_request_s: Option<f64>,
    /// The measured instant compared with it (`member_lost_at` for the signal,
    /// `member_back_at` for the restart), and the difference in seconds.
    pub compared_with: Option<String>,
    pub measured_minus_truth_s: Option<f64>,
}

/// How the environment label of a sitting on the local control plane (`lw-lab measure`,
/// docs/local-cluster.md) begins: Kubernetes, but not the cluster the alert is for.
pub const LOCAL_CONTROL_PLANE: &str = "local control plane";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub kind: EnvironmentKind,
    /// Human label for tables, e.g. "local loopback, etcd 3.6.14, 3 members"; the sitting
    /// replaces `{etcd}` in it with the etcd versions it saw.
    pub description: String,
    pub members: Vec<String>,
    pub etcd_versions: Vec<String>,
    pub heartbeat_ms: Option<u64>,
    pub election_ms: Option<u64>,
    /// Where the two came from: `rehearse flags`, the StatefulSet's etcd container, or
    /// `etcd default` (nothing set them).
    pub timing_source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub schema_version: u32,
    pub tool_version: String,
    pub run_id: String,
    /// `complete`, or `incomplete` with [`Baseline::incomplete_reason`].
    pub status: Completion,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_reason: Option<String>,
    pub windows: Vec<WindowRecord>,
    pub disruption: Option<Disruption>,
    pub environment: Environment,
    /// How far before an election its cause is looked for (`--cause-horizon`).
    pub cause_horizon_s: Option<f64>,
    /// The lock canary's safety checks over every grant of the run; absent when it did
    /// not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_safety: Option<crate::model::lock::LockSafety>,
}

/// Lines around baseline.json in a run's log, so that `kubectl logs` alone retrieves it
/// (deploy/k8s/leaderwatch/baseline-from-log.sh).
pub const LOG_BEGIN: &str = "--- baseline.json begin ---";
pub const LOG_END: &str = "--- baseline.json end ---";

/// baseline.json between [`LOG_BEGIN`] and [`LOG_END`], newline-terminated.
pub fn log_block(b: &Baseline) -> String {
    let json =
        serde_json::to_string_pretty(b).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    format!("{LOG_BEGIN}\n{json}\n{LOG_END}\n")
}

named! {
    /// Where a sitting ran: members `rehearse` started itself, or a Kubernetes cluster
    /// (`measure`; the local control plane is one too, told apart by its label).
    #[derive(Default)]
    EnvironmentKind {
        #[default]
        Local = "local",
        Kubernetes = "kubernetes",
    }
}

named! {
    /// Whether a sitting ran to its end.
    #[derive(Default)]
    Completion {
        #[default]
        Complete = "complete",
        /// Interrupted, or no recovery in time: what was measured is kept.
        Incomplete = "incomplete",
    }
}

impl Baseline {
    /// The window named `name`, if the sitting got that far.
    pub fn window(&self, name: WindowName) -> Option<&WindowRecord> {
        self.windows.iter().find(|w| w.name == name)
    }

    pub fn window_mut(&mut self, name: WindowName) -> Option<&mut WindowRecord> {
        self.windows.iter_mut().find(|w| w.name == name)
    }

    pub fn is_complete(&self) -> bool {
        self.status == Completion::Complete
    }

    /// Its disruption was a server-side dry run: nothing was evicted, so it is in no
    /// derived figure (the table, `--update`, the CSV, the alert, baselines.csv).
    pub fn is_dry_run(&self) -> bool {
        self.disruption.as_ref().is_some_and(|d| d.method.dry_run)
    }
}

/// One member's health over one interval of health.csv.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthRow {
    /// End of the interval (the start of its last round).
    pub ts: DateTime<Utc>,
    pub window: String,
    pub member: String,
    pub interval_start: DateTime<Utc>,
    /// Monotonic seconds.
    pub interval_s: f64,
    pub health: MemberHealth,
}
