//! `/metrics` text -> the few values leaderwatch needs, behind one function: [`extract`].
//!
//! A full etcd page is ~150 KB and ~1,550 lines; prometheus-parse is slow on it and silently
//! drops what it cannot parse. So sample lines are filtered by metric name *before*
//! parsing, and only the few below ever reach the parser.

use std::io;

use prometheus_parse::{Scrape, Value};

const LEADER_CHANGES: &str = "etcd_server_leader_changes_seen_total";
const HAS_LEADER: &str = "etcd_server_has_leader";
const IS_LEADER: &str = "etcd_server_is_leader";
const PROCESS_START: &str = "process_start_time_seconds";
const HEARTBEAT_FAILURES: &str = "etcd_server_heartbeat_send_failures_total";
const SLOW_APPLY: &str = "etcd_server_slow_apply_total";
const WAL_FSYNC_SUM: &str = "etcd_disk_wal_fsync_duration_seconds_sum";
const WAL_FSYNC_COUNT: &str = "etcd_disk_wal_fsync_duration_seconds_count";

/// Every sample name [`extract`] reads. Anything else is skipped before parsing.
const WANTED: [&str; 8] = [
    LEADER_CHANGES,
    HAS_LEADER,
    IS_LEADER,
    PROCESS_START,
    HEARTBEAT_FAILURES,
    SLOW_APPLY,
    WAL_FSYNC_SUM,
    WAL_FSYNC_COUNT,
];

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
    let lines = text
        .lines()
        .filter(|l| l.starts_with(['e', 'p']) && line_name(l).is_some_and(|n| WANTED.contains(&n)))
        .map(|l| Ok::<_, io::Error>(l.to_owned()));
    // Parsing from in-memory lines cannot fail with an I/O error.
    let scrape = Scrape::parse(lines).unwrap_or(Scrape { docs: Default::default(), samples: vec![] });

    let mut m = MemberMetrics::default();
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
            _ => {}
        }
    }
    if m.leader_changes_seen_total.is_none() {
        return Err(MetricsError::NoLeaderChanges);
    }
    Ok(m)
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
