//! `/metrics` text -> the few values leaderwatch needs, behind one function: [`extract`].
//!
//! A full etcd page is ~150 KB and ~1,550 lines; prometheus-parse is slow on it and silently
//! drops what it cannot parse. So sample lines are filtered by metric name *before*
//! parsing, and only the few below ever reach the parser.

use std::collections::BTreeMap;
use std::io;

use prometheus_parse::{Scrape, Value};

use crate::health::Histogram;

const LEADER_CHANGES: &str = "etcd_server_leader_changes_seen_total";
const HAS_LEADER: &str = "etcd_server_has_leader";
const IS_LEADER: &str = "etcd_server_is_leader";
const PROCESS_START: &str = "process_start_time_seconds";
const HEARTBEAT_FAILURES: &str = "etcd_server_heartbeat_send_failures_total";
const SLOW_APPLY: &str = "etcd_server_slow_apply_total";
const WAL_FSYNC_SUM: &str = "etcd_disk_wal_fsync_duration_seconds_sum";
const WAL_FSYNC_COUNT: &str = "etcd_disk_wal_fsync_duration_seconds_count";
const PROPOSALS_FAILED: &str = "etcd_server_proposals_failed_total";
const SLOW_READ_INDEXES: &str = "etcd_server_slow_read_indexes_total";
const DB_SIZE: &str = "etcd_mvcc_db_total_size_in_bytes";
const QUOTA: &str = "etcd_server_quota_backend_bytes";
const WAL_FSYNC_BUCKET: &str = "etcd_disk_wal_fsync_duration_seconds_bucket";
const BACKEND_COMMIT_BUCKET: &str = "etcd_disk_backend_commit_duration_seconds_bucket";
const PEER_RTT_BUCKET: &str = "etcd_network_peer_round_trip_time_seconds_bucket";

/// Every unlabelled sample name [`extract`] reads. Anything else is skipped before parsing.
const WANTED: [&str; 12] = [
    LEADER_CHANGES,
    HAS_LEADER,
    IS_LEADER,
    PROCESS_START,
    HEARTBEAT_FAILURES,
    SLOW_APPLY,
    WAL_FSYNC_SUM,
    WAL_FSYNC_COUNT,
    PROPOSALS_FAILED,
    SLOW_READ_INDEXES,
    DB_SIZE,
    QUOTA,
];

/// The histograms behind member health, read by [`bucket_line`] (not prometheus-parse).
const BUCKETS: [&str; 3] = [WAL_FSYNC_BUCKET, BACKEND_COMMIT_BUCKET, PEER_RTT_BUCKET];

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
}

/// Why a page yielded nothing useful.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MetricsError {
    #[error("/metrics has no {LEADER_CHANGES} sample (not an etcd metrics page?)")]
    NoLeaderChanges,
}

/// The metric name of a sample line, or of a `# TYPE`/`# HELP` line.
fn line_name(line: &str) -> Option<&str> {
    let line = line.trim_start();
    if let Some(rest) = line.strip_prefix('#') {
        let mut parts = rest.split_whitespace();
        return match parts.next() {
            Some("TYPE") | Some("HELP") => parts.next(),
            _ => None,
        };
    }
    let end = line.find(|c: char| c == '{' || c.is_whitespace()).unwrap_or(line.len());
    Some(&line[..end])
}

/// Reduces a Prometheus text page to [`MemberMetrics`]. The one entry point for metrics
/// parsing: callers never see prometheus-parse.
pub fn extract(text: &str) -> Result<MemberMetrics, MetricsError> {
    // Sample lines only: `# TYPE` lines change nothing for unlabelled values (a counter
    // parses as untyped with the same value), and every wanted name starts with e or p.
    let mut buckets: BTreeMap<(&str, &str), Vec<(f64, f64)>> = BTreeMap::new();
    let lines = text
        .lines()
        .filter(|l| l.starts_with(['e', 'p']))
        .filter(|l| match line_name(l) {
            Some(n) if BUCKETS.contains(&n) => {
                if let Some((peer, le, v)) = bucket_line(l) {
                    buckets.entry((n, peer)).or_default().push((le, v));
                }
                false
            }
            Some(n) => WANTED.contains(&n),
            None => false,
        })
        .map(|l| Ok::<_, io::Error>(l.to_owned()));
    // Parsing from in-memory lines cannot fail with an I/O error.
    let scrape = Scrape::parse(lines).unwrap_or(Scrape { docs: Default::default(), samples: vec![] });

    let mut m = MemberMetrics::default();
    for ((name, peer), b) in buckets {
        let h = Histogram::new(b);
        match name {
            WAL_FSYNC_BUCKET => m.wal_fsync = Some(h),
            BACKEND_COMMIT_BUCKET => m.backend_commit = Some(h),
            _ if !peer.is_empty() => {
                m.peer_rtt.insert(peer.to_owned(), h);
            }
            _ => {}
        }
    }
    for s in &scrape.samples {
        // Only unlabelled series are used: etcd exports these families without labels.
        if !s.labels.is_empty() {
            continue;
        }
        let v = match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
            Value::Histogram(_) | Value::Summary(_) => continue,
        };
        if !v.is_finite() {
            continue;
        }
        match s.metric.as_str() {
            LEADER_CHANGES => m.leader_changes_seen_total = Some(v),
            HAS_LEADER => m.has_leader = Some(v != 0.0),
            IS_LEADER => m.is_leader = Some(v != 0.0),
            PROCESS_START => m.process_start_time = Some(v),
            HEARTBEAT_FAILURES => m.heartbeat_send_failures_total = Some(v),
            SLOW_APPLY => m.slow_apply_total = Some(v),
            WAL_FSYNC_SUM => m.wal_fsync_sum = Some(v),
            WAL_FSYNC_COUNT => m.wal_fsync_count = Some(v),
            PROPOSALS_FAILED => m.proposals_failed_total = Some(v),
            SLOW_READ_INDEXES => m.slow_read_indexes_total = Some(v),
            DB_SIZE => m.db_total_size_bytes = Some(v),
            QUOTA => m.quota_backend_bytes = Some(v),
            _ => {}
        }
    }
    if m.leader_changes_seen_total.is_none() {
        return Err(MetricsError::NoLeaderChanges);
    }
    Ok(m)
}

/// One `<name>_bucket{[To="<peer>",]le="<bound>"} <count>` line -> (peer or "", bound,
/// count). Only the label forms etcd writes for these families; anything else is `None`.
fn bucket_line(line: &str) -> Option<(&str, f64, f64)> {
    let (_, rest) = line.split_once('{')?;
    let (labels, value) = rest.split_once('}')?;
    let (mut peer, mut le) = ("", None);
    for pair in labels.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = pair.split_once('=')?;
        let v = v.trim().strip_prefix('"')?.strip_suffix('"')?;
        match k.trim() {
            "le" => le = Some(if v == "+Inf" { f64::INFINITY } else { v.parse().ok()? }),
            "To" => peer = v,
            _ => return None,
        }
    }
    let count: f64 = value.split_whitespace().next()?.parse().ok()?;
    (count.is_finite() && count >= 0.0).then_some((peer, le?, count))
}

/// Parses the whole page with prometheus-parse, for the benchmark's comparison only.
#[doc(hidden)]
pub fn parse_full_page(text: &str) -> usize {
    let lines = text.lines().map(|l| Ok::<_, io::Error>(l.to_owned()));
    Scrape::parse(lines).map(|s| s.samples.len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_name_reads_samples_and_type_lines() {
        assert_eq!(line_name("etcd_server_has_leader 1"), Some("etcd_server_has_leader"));
        assert_eq!(line_name("x{a=\"b\"} 2"), Some("x"));
        assert_eq!(line_name("# TYPE etcd_server_is_leader gauge"), Some("etcd_server_is_leader"));
        assert_eq!(line_name("# random comment"), None);
    }

    #[test]
    fn bucket_lines_in_etcds_forms_only() {
        assert_eq!(bucket_line(r#"x_bucket{le="0.001"} 12"#), Some(("", 0.001, 12.0)));
        assert_eq!(bucket_line(r#"x_bucket{To="ab12",le="+Inf"} 3"#), Some(("ab12", f64::INFINITY, 3.0)));
        for bad in [r#"x_bucket{le=0.1} 1"#, r#"x_bucket{le="a"} 1"#, r#"x_bucket{le="1"} NaN"#, r#"x_bucket{other="1",le="1"} 1"#, "x_bucket{le=\"1\"", r#"x_bucket{To="p"} 1"#] {
            assert_eq!(bucket_line(bad), None, "{bad}");
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert_eq!(extract("\u{0}\u{1}garbage {{{ 12"), Err(MetricsError::NoLeaderChanges));
        assert_eq!(extract(""), Err(MetricsError::NoLeaderChanges));
    }

    #[test]
    fn labelled_and_non_finite_samples_are_ignored() {
        let page = "etcd_server_leader_changes_seen_total{x=\"y\"} 9\n\
                    etcd_server_leader_changes_seen_total 2\n\
                    etcd_server_has_leader NaN\n";
        let m = extract(page).expect("page has the counter");
        assert_eq!(m.leader_changes_seen_total, Some(2.0));
        assert_eq!(m.has_leader, None);
    }
}
