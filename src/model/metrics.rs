//! What one member's `/metrics` page says, as src/io/metrics.rs extracts it: the counter
//! under study and the figures that explain elections. No imports from the crate, so the
//! fuzz target can build the extractor with this file alone.

use std::collections::BTreeMap;

/// A cumulative histogram at one instant: `(upper bound, cumulative count)`, as
/// `<name>_bucket{le=...}` reports it. The `+Inf` bucket holds the total count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, f64)>,
}

impl Histogram {
    /// Sorted by upper bound (a page may list them in any order).
    pub fn new(mut buckets: Vec<(f64, f64)>) -> Self {
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Histogram { buckets }
    }

    /// Observations so far: the `+Inf` bucket's count, if there is one.
    pub fn count(&self) -> Option<f64> {
        self.buckets.last().filter(|(le, _)| *le == f64::INFINITY).map(|(_, c)| *c)
    }
}

/// What one member's `/metrics` says. `None` means the page did not carry that value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberMetrics {
    /// The counter under study: +1 each time this member learns a new leader; resets on restart.
    pub leader_changes_seen_total: Option<f64>,
    pub has_leader: Option<bool>,
    pub is_leader: Option<bool>,
    /// Unix seconds; a change means the process restarted, even if the counter did not drop.
    pub process_start_time: Option<f64>,
    /// Explains elections: a leader that cannot reach followers in time.
    pub heartbeat_send_failures_total: Option<f64>,
    /// Explains elections: applies slower than expected, usually disk.
    pub slow_apply_total: Option<f64>,
    /// WAL fsync histogram sum (seconds) and count: disk latency behind Raft commits.
    pub wal_fsync_sum: Option<f64>,
    pub wal_fsync_count: Option<f64>,
    /// Explains elections: proposals that failed, normally during elections or quorum loss.
    pub proposals_failed_total: Option<f64>,
    /// Linearizable reads that waited too long for the leader's read index.
    pub slow_read_indexes_total: Option<f64>,
    /// Backend size and its quota: at the quota etcd refuses writes (NOSPACE).
    pub db_total_size_bytes: Option<f64>,
    pub quota_backend_bytes: Option<f64>,
    /// WAL fsync and backend commit latency (cumulative buckets): slow disks cause elections.
    pub wal_fsync: Option<Histogram>,
    pub backend_commit: Option<Histogram>,
    /// Round-trip time to each peer, by the peer's member id (the `To` label, hex).
    pub peer_rtt: BTreeMap<String, Histogram>,
    /// CPU seconds the process has used: a member that is alive but not running (starved,
    /// frozen) shows it flat.
    pub process_cpu_seconds_total: Option<f64>,
    /// The network between members, per peer (its member id, hex), from rafthttp. A peer
    /// appears only once its series exists: etcd exports a counter's series on its first
    /// increment, the gauge once a stream to the peer has been up.
    pub peers: BTreeMap<String, PeerLink>,
}

/// What one member's rafthttp says about its link to one peer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeerLink {
    /// `etcd_network_active_peers`: 1 while a stream to the peer is up, 0 once it went down.
    pub active: Option<f64>,
    /// `etcd_network_disconnected_peers_total`: times the streams to the peer went down.
    pub disconnected_total: Option<f64>,
    /// `etcd_network_peer_sent_failures_total`: messages to the peer that could not be sent.
    pub sent_failures_total: Option<f64>,
    /// `etcd_network_peer_sent_bytes_total`: bytes sent to the peer (a leader's heartbeats
    /// alone keep it rising).
    pub sent_bytes_total: Option<f64>,
}
