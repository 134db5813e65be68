//! One row of events.csv: what leaderwatch, the local cluster or Kubernetes did or saw, and
//! its words: who saw it ([`Source`]) and what happened ([`EventKind`]), each with its on-disk
//! name. The files keep their words; the code matches on variants, so a misspelt kind does
//! not compile.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::model::clock::Stamp;

/// One row of events.csv (run_id is added by the recorder).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub ts: DateTime<Utc>,
    pub source: Source,
    /// Empty for run-wide events.
    pub member: String,
    pub kind: EventKind,
    pub detail: String,
    /// The monotonic instant, when leaderwatch itself saw or did it (not for events that
    /// come from the API server, which only have the server's wall time).
    pub at: Option<tokio::time::Instant>,
    /// An `election` row's figures, in columns of their own (empty on other rows).
    pub election: Option<ElectionColumns>,
}

/// The columns of an `election` row that a reader needs: the terms, the cause and the
/// instant of the row it points to. The `detail` says the same in words, for people.
#[derive(Debug, Clone, PartialEq)]
pub struct ElectionColumns {
    pub term_from: u64,
    pub term_to: u64,
    pub cause: Cause,
    pub cause_ts: Option<DateTime<Utc>>,
}

impl Event {
    pub fn new(
        ts: DateTime<Utc>,
        source: Source,
        member: &str,
        kind: EventKind,
        detail: impl Into<String>,
    ) -> Self {
        Event {
            ts,
            source,
            member: member.to_owned(),
            kind,
            detail: detail.into(),
            at: None,
            election: None,
        }
    }

    /// An event at a [`Stamp`]: both clocks.
    pub fn stamped(
        at: Stamp,
        source: Source,
        member: &str,
        kind: EventKind,
        detail: impl Into<String>,
    ) -> Self {
        Event { at: Some(at.mono), ..Event::new(at.utc, source, member, kind, detail) }
    }
}

/// One report from a running disruptor.
#[derive(Debug, Clone, PartialEq)]
pub enum DisruptorReport {
    /// A step, with its instant (signal, exit, restart; eviction blocked, accepted, pod gone).
    Event(Event),
    /// Requests taken so far (a PDB-blocked eviction takes several) and the time from the
    /// first to the latest.
    Attempts { attempts: u32, blocked_s: f64 },
}

/// An events.csv row as read back (src/io/read.rs), by column name. The election columns
/// are empty on every row but an `election` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct EventRow {
    pub ts: DateTime<Utc>,
    pub run_id: String,
    pub source: Source,
    pub member: String,
    pub kind: EventKind,
    pub detail: String,
    #[serde(deserialize_with = "empty_is_none")]
    pub term_from: Option<u64>,
    #[serde(deserialize_with = "empty_is_none")]
    pub term_to: Option<u64>,
    #[serde(deserialize_with = "empty_is_none")]
    pub cause: Option<Cause>,
    #[serde(deserialize_with = "empty_is_none")]
    pub cause_ts: Option<DateTime<Utc>>,
}

impl EventRow {
    /// The election columns, when this row has them.
    pub fn election(&self) -> Option<ElectionColumns> {
        Some(ElectionColumns {
            term_from: self.term_from?,
            term_to: self.term_to?,
            cause: self.cause?,
            cause_ts: self.cause_ts,
        })
    }
}

/// An empty CSV field is `None`; anything else must parse.
fn empty_is_none<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let s = String::deserialize(d)?;
    if s.is_empty() { Ok(None) } else { s.parse().map(Some).map_err(serde::de::Error::custom) }
}

named! {
    /// Who saw or did what an events.csv row says.
    Source {
        /// leaderwatch itself: its polling, its run, its canary.
        Leaderwatch = "leaderwatch",
        /// The local cluster's own actions (`rehearse`'s disruptor).
        Local = "local",
        /// The API server: watchers and the Kubernetes disruptors.
        Kubernetes = "kubernetes",
        /// The recorder: what reopening, rotation and retention did to the files.
        Record = "record",
    }
}

named! {
    /// What an events.csv row says happened. data/README.md lists them for readers.
    EventKind {
    /// `sample` started (its interval and members in the detail)
    RunStarted = "run_started",
    /// `sample` ended (why, and its rounds)
    RunEnded = "run_ended",
    /// a sitting started (idle, settle, target)
    SittingStarted = "sitting_started",
    /// a sitting ended: `complete`, or why not
    SittingEnded = "sitting_ended",
    /// `--metrics-addr` serves here
    MetricsServing = "metrics_serving",
    /// the canary runs
    CanaryStarted = "canary_started",
    /// the canary could not start; the run goes on without
    CanaryFailed = "canary_failed",
    /// the lock canary runs (its prefix, holders, TTL, hold)
    LockCanaryStarted = "lock_canary_started",
    /// the lock canary could not start; the run goes on without
    LockCanaryFailed = "lock_canary_failed",
    /// no canary write (or no lock grant) before the request; disrupting anyway
    CanaryNotReady = "canary_not_ready",
    /// the member chosen for the disruption
    DisruptionTarget = "disruption_target",
    /// the disruption was asked for
    DisruptionRequested = "disruption_requested",
    /// the disruptor failed; the sitting stops
    DisruptionFailed = "disruption_failed",
    /// a member answered none of its three parts
    Unreachable = "unreachable",
    /// a member answers again
    Back = "back",
    /// a member's probe is still in flight at the round's end
    Unresponsive = "unresponsive",
    /// `/health` says unhealthy
    HealthFalse = "health_false",
    /// `/health` says healthy again
    HealthTrue = "health_true",
    /// a member names another leader
    LeaderChanged = "leader_changed",
    /// a member's counter went down
    CounterReset = "counter_reset",
    /// a member's process start time moved
    ProcessRestarted = "process_restarted",
    /// a member's heartbeats failed or its applies were slow
    Stress = "stress",
    /// no more of either
    StressOver = "stress_over",
    /// a member's disk is slow: its WAL fsync p99 over etcd's 10 ms, or its backend
    /// commit p99 over 25 ms, in one step of `/metrics`
    SlowDisk = "slow_disk",
    /// both under again
    DiskOk = "disk_ok",
    /// a member answers, but slowly: its Status RPC (no disk, no Raft) took over 250 ms,
    /// as when its CPU is starved
    SlowAnswers = "slow_answers",
    /// its Status answers promptly again
    AnswersPrompt = "answers_prompt",
    /// a member's link to a peer went down (rafthttp: stream inactive, disconnected, or
    /// messages it failed to send); the peer's member id in the detail
    PeerDown = "peer_down",
    /// that link is up again
    PeerUp = "peer_up",
    /// a member's round trips to a peer (rafthttp's prober) turned slow: p99 over 0.15 s
    /// in one step of `/metrics`; the peer's member id in the detail. A starved or frozen
    /// peer answers them late; a peer whose disk is slow does not
    SlowRoundTrips = "slow_round_trips",
    /// they are prompt again
    RoundTripsOk = "round_trips_ok",
    /// the members agree on a new leader
    LeaderTransition = "leader_transition",
    /// an election, with its terms and cause in columns
    Election = "election",
    /// an election's figures given again after the fact (`leaderwatch recount`), in the
    /// same columns: readers take the last row for each pair of terms
    ElectionRevised = "election_revised",
    /// SIGTERM sent to a member
    SigtermSent = "sigterm_sent",
    /// SIGKILL sent to a member
    SigkillSent = "sigkill_sent",
    /// SIGSTOP sent to a member
    SigstopSent = "sigstop_sent",
    /// the member's process exited
    Exited = "exited",
    /// the member's process started again
    Restarted = "restarted",
    /// SIGCONT sent: the frozen member runs again
    Continued = "continued",
    /// the PDB refused an eviction (429); it is retried
    EvictionBlocked = "eviction_blocked",
    /// the eviction was accepted
    EvictionAccepted = "eviction_accepted",
    /// the pod's DELETE was accepted
    DeleteAccepted = "delete_accepted",
    /// the replaced pod is gone
    OldPodGone = "old_pod_gone",
    /// its replacement is Ready
    NewPodReady = "new_pod_ready",
    /// a rolling restart was asked for
    RolloutRequested = "rollout_requested",
    /// the rollout replaces this member
    RolloutReplacing = "rollout_replacing",
    /// every member replaced
    RolloutComplete = "rollout_complete",
    /// the sitting ended with the rollout still running
    RolloutLeftRunning = "rollout_left_running",
    /// a node was cordoned
    NodeCordoned = "node_cordoned",
    /// a node's etcd pod was evicted from it
    NodeDrained = "node_drained",
    /// the node was uncordoned
    NodeUncordoned = "node_uncordoned",
    /// the node could not be uncordoned
    UncordonFailed = "uncordon_failed",
    /// a member's pod, as the watch first lists it
    PodSeen = "pod_seen",
    /// a member's pod was created
    PodCreated = "pod_created",
    /// a member's pod was bound to a node
    PodScheduled = "pod_scheduled",
    /// a member's pod changed phase
    PodPhase = "pod_phase",
    /// a member's pod became Ready
    PodReady = "pod_ready",
    /// a member's pod stopped being Ready
    PodNotReady = "pod_not_ready",
    /// a member's pod is terminating
    PodDeleting = "pod_deleting",
    /// a member's pod is gone
    PodDeleted = "pod_deleted",
    /// a member's pod has an address (the detail)
    PodIp = "pod_ip",
    /// a Kubernetes Event about a member (reason: message)
    K8sEvent = "k8s_event",
    /// a watch failed; it restarts
    WatchError = "watch_error",
    /// the lease of the node a member runs on was not renewed for 20 s (stamped with its
    /// last renewal: the last instant the node was heard from)
    NodeLeaseStale = "node_lease_stale",
    /// that lease is renewed again (the gap in the detail)
    NodeLeaseRenewed = "node_lease_renewed",
    /// the node a member runs on turned NotReady (stamped with its last renewal)
    NodeNotReady = "node_not_ready",
    /// that node is Ready again
    NodeReady = "node_ready",
    /// the API server did not answer
    ApiUnreachable = "api_unreachable",
    /// the API server answers again
    ApiReachable = "api_reachable",
    /// the run directory had rows from earlier runs (kept)
    Reopened = "reopened",
    /// a torn last line left by a crash was cut
    Repaired = "repaired",
    /// a day's file was closed
    Rotated = "rotated",
    /// a closed file was gzipped
    Compressed = "compressed",
    /// a file past retention was deleted
    Deleted = "deleted",
    /// rotation or retention failed (the rows are kept)
    HousekeepingFailed = "housekeeping_failed",
    }
}

named! {
    /// Why an election happened, in attribution's order of precedence (src/analysis/
    /// attribution.rs, docs/counting.md): [`Cause::ALL`] is that order. On disk as
    /// `own_disruption`, `kubernetes`, ... in baseline.json and events.csv.
    Cause {
        /// Our own disruption (a signal, or the eviction leaderwatch asked for).
        OwnDisruption = "own_disruption",
        /// Kubernetes took the old leader's pod or node away.
        Kubernetes = "kubernetes",
        /// The old leader's node went away: its lease stopped being renewed, or it turned
        /// NotReady (`node_lease_stale`, `node_not_ready`, stamped with its last renewal;
        /// given after the fact, as they come tens of seconds after the loss). The remedy
        /// is the node pool, not etcd.
        Node = "node",
        /// The old leader's process restarted.
        Restart = "restart",
        /// The old leader answered, but slowly, up to the election (`slow_answers`): its
        /// CPU starved.
        Cpu = "cpu",
        /// The old leader stopped answering.
        Unreachable = "unreachable",
        /// The old leader's disk was slow (`slow_disk`: WAL fsync or backend commit p99).
        Disk = "disk",
        /// Either: the old leader's fsyncs were slow in a step that began long before the
        /// election, and it answered slowly or not at all since; the rows cannot tell a
        /// disk that stayed slow from a CPU starved after it. Counted as ambiguous, never
        /// as one of the two.
        CpuOrDisk = "cpu|disk",
        /// The network between the members: the old leader, still answering leaderwatch,
        /// said it had no leader, or a link to or from it went down (`peer_down`).
        Network = "network",
        /// The old leader showed stress (heartbeat failures, slow applies).
        Stress = "stress",
        /// Nothing in the horizon explains it.
        Unexplained = "unexplained",
    }
}
