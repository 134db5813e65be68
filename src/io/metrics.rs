//! `/metrics` text -> the few values leaderwatch needs, behind one function: [`extract`].
//!
//! A full etcd page is ~170 KB and ~1,600 lines, of which about a hundred are wanted. So
//! sample lines are filtered by metric name first, and only those are parsed: the twelve
//! unlabelled values and the three health histograms, each by the few lines of code their
//! fixed form needs (a general parser, prometheus-parse, was slower and its code stayed
//! resident in every sampler; the fixtures' tests still compare against it).

use std::collections::BTreeMap;

use crate::model::metrics::{Histogram, MemberMetrics};

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

/// Why a page yielded nothing useful.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MetricsError {
    #[error("/metrics has no {LEADER_CHANGES} sample (not an etcd metrics page?)")]
    NoLeaderChanges,
}

/// The metric name of a sample line (bytes up to `{` or whitespace); `None` for a comment.
fn sample_name(line: &[u8]) -> Option<&[u8]> {
    if line.first() == Some(&b'#') {
        return None;
    }
    let end = line.iter().position(|&b| b == b'{' || b == b' ' || b == b'\t').unwrap_or(line.len());
    Some(&line[..end])
}

/// Reduces a whole Prometheus text page to [`MemberMetrics`]: [`Extractor`] fed at once.
pub fn extract(page: impl AsRef<[u8]>) -> Result<MemberMetrics, MetricsError> {
    let mut e = Extractor::default();
    e.feed(page.as_ref());
    e.finish()
}

/// Longest line kept across two chunks; longer lines are not etcd's and are skipped.
const MAX_LINE: usize = 64 * 1024;

/// Reads a page as it arrives, chunk by chunk, keeping only the wanted lines: the probe
/// never holds the ~160 KB page, and nothing is copied but those lines. The one entry
/// point for metrics parsing: callers never see prometheus-parse.
///
/// Works on raw bytes: at most ~100 of a page's ~1,600 lines are wanted, so only those are
/// checked as UTF-8 and parsed (validating and splitting the whole page as text was a
/// quarter of a full round's CPU). A wanted line that is not UTF-8 is skipped, as the
/// parser would skip it.
#[derive(Debug, Default)]
pub struct Extractor {
    /// The unfinished last line of the chunks so far, when it may be wanted.
    partial: Vec<u8>,
    /// The unfinished last line is not wanted (or too long): drop bytes up to its end.
    skipping: bool,
    buckets: BTreeMap<(&'static str, String), Vec<(f64, f64)>>,
    /// The unlabelled values, by their place in [`WANTED`]; a later line wins.
    wanted: [Option<f64>; WANTED.len()],
}

impl Extractor {
    /// The next bytes of the page, split anywhere.
    pub fn feed(&mut self, mut chunk: &[u8]) {
        if self.skipping || !self.partial.is_empty() {
            let Some(i) = memchr::memchr(b'\n', chunk) else {
                self.hold(chunk);
                return;
            };
            self.hold(&chunk[..i]);
            if !std::mem::take(&mut self.skipping) {
                let line = std::mem::take(&mut self.partial);
                self.line(&line);
                self.partial = line; // keep the allocation for the next split line
                self.partial.clear();
            }
            chunk = &chunk[i + 1..];
        }
        let mut start = 0;
        while let Some(i) = memchr::memchr(b'\n', &chunk[start..]) {
            self.line(&chunk[start..start + i]);
            start += i + 1;
        }
        self.hold(&chunk[start..]);
    }

    /// Keeps the start of an unfinished line if it may be wanted.
    fn hold(&mut self, bytes: &[u8]) {
        if self.skipping || bytes.is_empty() {
            return;
        }
        let first = self.partial.first().or(bytes.first());
        if !matches!(first, Some(b'e' | b'p')) || self.partial.len() + bytes.len() > MAX_LINE {
            self.partial.clear();
            self.skipping = true;
            return;
        }
        self.partial.extend_from_slice(bytes);
    }

    /// One complete line (without its newline).
    fn line(&mut self, line: &[u8]) {
        // Every wanted name starts with e or p; `# TYPE` lines change nothing for
        // unlabelled values (a counter parses as untyped with the same value).
        if !matches!(line.first(), Some(b'e' | b'p')) {
            return;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(name) = sample_name(line) else { return };
        if let Some(&family) = BUCKETS.iter().find(|b| b.as_bytes() == name) {
            if let Some((peer, le, v)) = std::str::from_utf8(line).ok().and_then(bucket_line) {
                self.buckets.entry((family, peer.to_owned())).or_default().push((le, v));
            }
        } else if let Some(i) = WANTED.iter().position(|w| w.as_bytes() == name)
            && let Some(v) = std::str::from_utf8(line).ok().and_then(plain_value)
        {
            self.wanted[i] = Some(v);
        }
    }

    /// The values of the page fed so far (its last line need not end in a newline).
    pub fn finish(mut self) -> Result<MemberMetrics, MetricsError> {
        if !self.skipping && !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line);
        }
        let mut m = MemberMetrics::default();
        for ((name, peer), b) in self.buckets {
            let h = Histogram::new(b);
            match name {
                WAL_FSYNC_BUCKET => m.wal_fsync = Some(h),
                BACKEND_COMMIT_BUCKET => m.backend_commit = Some(h),
                _ if !peer.is_empty() => {
                    m.peer_rtt.insert(peer, h);
                }
                _ => {}
            }
        }
        for (name, v) in WANTED.iter().zip(self.wanted) {
            let Some(v) = v.filter(|v| v.is_finite()) else { continue };
            match *name {
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

/// An unlabelled sample line, `<name>[{}] <value>[ <timestamp>]` -> its value. A line with
/// labels is `None`: etcd exports the wanted families without them.
fn plain_value(line: &str) -> Option<f64> {
    let mut fields = line.split_ascii_whitespace();
    let name = fields.next()?;
    let name = name.strip_suffix("{}").unwrap_or(name);
    if name.contains('{') {
        return None;
    }
    match fields.next()? {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        v => v.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_name_reads_sample_lines_only() {
        assert_eq!(sample_name(b"etcd_server_has_leader 1"), Some(&b"etcd_server_has_leader"[..]));
        assert_eq!(sample_name(b"x{a=\"b\"} 2"), Some(&b"x"[..]));
        assert_eq!(sample_name(b"x\t3"), Some(&b"x"[..]));
        assert_eq!(sample_name(b"# TYPE etcd_server_is_leader gauge"), None);
    }

    #[test]
    fn crlf_lines_and_bytes_that_are_not_utf8_elsewhere_do_not_matter() {
        let mut page = b"# HELP go_x \xff\xfe not UTF-8\r\ngo_x{a=\"\xff\"} 1\r\n".to_vec();
        page.extend_from_slice(
            b"etcd_server_leader_changes_seen_total 3\r\netcd_server_is_leader 1\r\n",
        );
        page.extend_from_slice(b"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 5\r\n");
        page.extend_from_slice(b"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 6\r\n");
        page.extend_from_slice(b"etcd_server_has_leader \xff1\n"); // a wanted line, not UTF-8: skipped
        let m = extract(&page).expect("page has the counter");
        assert_eq!(m.leader_changes_seen_total, Some(3.0));
        assert_eq!(m.is_leader, Some(true));
        assert_eq!(m.has_leader, None);
        assert!(m.wal_fsync.is_some());
    }

    #[test]
    fn bucket_lines_in_etcds_forms_only() {
        assert_eq!(bucket_line(r#"x_bucket{le="0.001"} 12"#), Some(("", 0.001, 12.0)));
        assert_eq!(
            bucket_line(r#"x_bucket{To="ab12",le="+Inf"} 3"#),
            Some(("ab12", f64::INFINITY, 3.0))
        );
        for bad in [
            r#"x_bucket{le=0.1} 1"#,
            r#"x_bucket{le="a"} 1"#,
            r#"x_bucket{le="1"} NaN"#,
            r#"x_bucket{other="1",le="1"} 1"#,
            "x_bucket{le=\"1\"",
            r#"x_bucket{To="p"} 1"#,
        ] {
            assert_eq!(bucket_line(bad), None, "{bad}");
        }
    }

    #[test]
    fn plain_values_in_the_forms_a_page_writes() {
        assert_eq!(plain_value("etcd_server_has_leader 1"), Some(1.0));
        assert_eq!(plain_value("x{} 2.5e3 1700000000000"), Some(2500.0));
        assert_eq!(plain_value("x +Inf"), Some(f64::INFINITY));
        assert!(plain_value("x NaN").is_some_and(f64::is_nan));
        for bad in ["x{a=\"b\"} 1", "x", "x one"] {
            assert_eq!(plain_value(bad), None, "{bad}");
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
