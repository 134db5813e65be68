//! Member health between two boundary rounds, pure: histogram and counter snapshots at the
//! start and the end of a window -> reset-aware deltas and quantiles, with the thresholds
//! etcd documents. No I/O, no clock.
//!
//! Quantiles follow Prometheus's `histogram_quantile`: find the bucket where the rank
//! `q × count` falls and interpolate linearly inside it (the lowest bucket starts at 0; a
//! rank in the `+Inf` bucket gives the highest finite bound). A window with no observation
//! has no quantile (`None`), never 0.
//!
//! [`Fold`] accumulates one member's deltas over a window one `/metrics` read at a time,
//! like Prometheus `increase()` over every sample: a restart (a changed process start time
//! or any bucket going down) between two reads counts the later read from zero.

use std::collections::BTreeMap;

use crate::model::baseline::{Flag, MemberHealth};
pub use crate::model::metrics::Histogram;
use crate::model::metrics::MemberMetrics;

/// etcd docs: WAL fsync p99 should stay under 10 ms.
pub const WAL_FSYNC_P99_DOCS_S: f64 = 0.010;
/// etcd docs: backend commit p99 should stay under 25 ms.
pub const BACKEND_COMMIT_P99_DOCS_S: f64 = 0.025;
/// etcd mixin `etcdHighFsyncDurations` (warning): fsync p99 above 0.5 s.
pub const WAL_FSYNC_P99_MIXIN_S: f64 = 0.5;
/// etcd mixin `etcdHighCommitDurations`: commit p99 above 0.25 s.
pub const BACKEND_COMMIT_P99_MIXIN_S: f64 = 0.25;
/// etcd mixin `etcdMemberCommunicationSlow`: peer round trip p99 above 0.15 s.
pub const PEER_RTT_P99_MIXIN_S: f64 = 0.15;
/// The backend is this close to its quota (NOSPACE refuses writes at the quota).
pub const DB_QUOTA_FRACTION: f64 = 0.8;

/// How a counter moved from `start` to `end`, Prometheus `increase()` without
/// extrapolation: a drop is a restart, and the new value counts from zero.
pub fn counter_delta(start: f64, end: f64) -> f64 {
    if end < start { end } else { end - start }
}

/// The observations of one window, bucket by bucket: `end - start`, or `end` alone when
/// the member restarted in between (any bucket went down, or `restarted` says so from the
/// process start time). `None` when the two do not have the same buckets.
pub fn window_delta(start: &Histogram, end: &Histogram, restarted: bool) -> Option<Histogram> {
    if start.buckets.len() != end.buckets.len()
        || start.buckets.iter().zip(&end.buckets).any(|(a, b)| a.0 != b.0)
    {
        return None;
    }
    let reset = restarted || start.buckets.iter().zip(&end.buckets).any(|(a, b)| b.1 < a.1);
    let buckets = start
        .buckets
        .iter()
        .zip(&end.buckets)
        .map(|(a, b)| (b.0, if reset { b.1 } else { b.1 - a.1 }))
        .collect();
    Some(Histogram { buckets })
}

/// Prometheus `histogram_quantile(q, h)`. `None` when it would be NaN: no `+Inf` bucket,
/// fewer than two buckets, no observation, or `q` outside [0, 1].
pub fn quantile(q: f64, h: &Histogram) -> Option<f64> {
    if !(0.0..=1.0).contains(&q) {
        return None;
    }
    let b = &h.buckets;
    if b.len() < 2 || b.last().is_none_or(|(le, _)| *le != f64::INFINITY) {
        return None;
    }
    // Cumulative counts can dip when a scrape catches buckets mid-update; Prometheus
    // takes the running maximum.
    let mut counts = Vec::with_capacity(b.len());
    let mut max = 0.0f64;
    for (_, c) in b {
        max = max.max(*c);
        counts.push(max);
    }
    let total = counts[b.len() - 1];
    if total <= 0.0 {
        return None;
    }
    let mut rank = q * total;
    let i = counts.iter().position(|c| *c >= rank).unwrap_or(b.len() - 1);
    if i == b.len() - 1 {
        return Some(b[b.len() - 2].0);
    }
    if i == 0 && b[0].0 <= 0.0 {
        return Some(b[0].0);
    }
    let (mut start, end, mut count) = (0.0, b[i].0, counts[i]);
    if i > 0 {
        start = b[i - 1].0;
        count -= counts[i - 1];
        rank -= counts[i - 1];
    }
    Some(start + (end - start) * (rank / count))
}

/// A figure and the threshold it is held against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Checked {
    pub value: f64,
    pub threshold: f64,
    pub over: bool,
}

/// `value` against `threshold` (`None` stays `None`: nothing to flag).
pub fn check(value: Option<f64>, threshold: f64) -> Option<Checked> {
    value.map(|value| Checked { value, threshold, over: value > threshold })
}

/// Adds `d` into `acc` bucket by bucket; a changed bucket layout starts over from `d`.
fn add_into(acc: &mut Option<Histogram>, d: Histogram) {
    match acc {
        Some(a)
            if a.buckets.len() == d.buckets.len()
                && a.buckets.iter().zip(&d.buckets).all(|(x, y)| x.0 == y.0) =>
        {
            for (x, y) in a.buckets.iter_mut().zip(&d.buckets) {
                x.1 += y.1;
            }
        }
        _ => *acc = Some(d),
    }
}

/// The counters a window sums (heartbeat send failures, slow applies, proposals failed,
/// slow read indexes), in that order.
fn counters(m: &MemberMetrics) -> [Option<f64>; 4] {
    [
        m.heartbeat_send_failures_total,
        m.slow_apply_total,
        m.proposals_failed_total,
        m.slow_read_indexes_total,
    ]
}

/// One member's health over a window, folded one `/metrics` read at a time. O(buckets)
/// state: a week-long window costs what a minute does.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    /// The last read: the boundary the next delta starts from.
    prev: Option<MemberMetrics>,
    wal_fsync: Option<Histogram>,
    backend_commit: Option<Histogram>,
    peer_rtt: BTreeMap<String, Histogram>,
    counters: [Option<f64>; 4],
    restarts: u32,
}

impl Fold {
    pub fn new() -> Self {
        Self::default()
    }

    /// One more `/metrics` read of this member.
    pub fn push(&mut self, m: &MemberMetrics) {
        if let Some(prev) = &self.prev {
            let restarted =
                crate::analysis::counts::restarted(prev.process_start_time, m.process_start_time);
            self.restarts += u32::from(restarted);
            let pair = |a: &Option<Histogram>, b: &Option<Histogram>| match (a, b) {
                (Some(a), Some(b)) => window_delta(a, b, restarted),
                _ => None,
            };
            if let Some(d) = pair(&prev.wal_fsync, &m.wal_fsync) {
                add_into(&mut self.wal_fsync, d);
            }
            if let Some(d) = pair(&prev.backend_commit, &m.backend_commit) {
                add_into(&mut self.backend_commit, d);
            }
            for (peer, h) in &m.peer_rtt {
                if let Some(d) = prev.peer_rtt.get(peer).and_then(|p| window_delta(p, h, restarted))
                {
                    let mut acc = self.peer_rtt.remove(peer);
                    add_into(&mut acc, d);
                    self.peer_rtt.extend(acc.map(|a| (peer.clone(), a)));
                }
            }
            for (acc, (a, b)) in
                self.counters.iter_mut().zip(counters(prev).into_iter().zip(counters(m)))
            {
                if let (Some(a), Some(b)) = (a, b) {
                    let d = if restarted { b } else { counter_delta(a, b) };
                    *acc = Some(acc.unwrap_or(0.0) + d);
                }
            }
        }
        self.prev = Some(m.clone());
    }

    /// The next window's fold: it starts from this one's last read.
    pub fn continue_from(&self) -> Fold {
        Fold { prev: self.prev.clone(), ..Fold::default() }
    }

    /// The figures so far, checked against the thresholds. `peer_name` turns a peer's hex
    /// id (the `To` label) into a member name where it is known.
    pub fn figures(&self, peer_name: impl Fn(&str) -> Option<String>) -> MemberHealth {
        let q = |q: f64, h: &Option<Histogram>| h.as_ref().and_then(|h| quantile(q, h));
        let last = self.prev.as_ref();
        let mut h = MemberHealth {
            wal_fsyncs: self.wal_fsync.as_ref().and_then(Histogram::count),
            wal_fsync_p50_s: q(0.5, &self.wal_fsync),
            wal_fsync_p99_s: q(0.99, &self.wal_fsync),
            backend_commits: self.backend_commit.as_ref().and_then(Histogram::count),
            backend_commit_p99_s: q(0.99, &self.backend_commit),
            peer_rtt_p99_s: self
                .peer_rtt
                .iter()
                .map(|(p, h)| (peer_name(p).unwrap_or_else(|| p.clone()), quantile(0.99, h)))
                .collect(),
            heartbeat_send_failures: self.counters[0],
            slow_applies: self.counters[1],
            proposals_failed: self.counters[2],
            slow_read_indexes: self.counters[3],
            db_size_bytes: last.and_then(|m| m.db_total_size_bytes),
            quota_bytes: last.and_then(|m| m.quota_backend_bytes),
            restarts: self.restarts,
            over: Vec::new(),
        };
        h.over = flags(&h);
        h
    }
}

/// Every figure of `h` above a documented threshold.
pub fn flags(h: &MemberHealth) -> Vec<Flag> {
    let mut checks: Vec<(String, Option<f64>, f64, &str)> = vec![
        ("wal_fsync_p99_s".into(), h.wal_fsync_p99_s, WAL_FSYNC_P99_DOCS_S, "etcd docs"),
        (
            "wal_fsync_p99_s".into(),
            h.wal_fsync_p99_s,
            WAL_FSYNC_P99_MIXIN_S,
            "etcd mixin etcdHighFsyncDurations",
        ),
        (
            "backend_commit_p99_s".into(),
            h.backend_commit_p99_s,
            BACKEND_COMMIT_P99_DOCS_S,
            "etcd docs",
        ),
        (
            "backend_commit_p99_s".into(),
            h.backend_commit_p99_s,
            BACKEND_COMMIT_P99_MIXIN_S,
            "etcd mixin etcdHighCommitDurations",
        ),
    ];
    for (peer, v) in &h.peer_rtt_p99_s {
        checks.push((
            format!("peer_rtt_p99_s{{{peer}}}"),
            *v,
            PEER_RTT_P99_MIXIN_S,
            "etcd mixin etcdMemberCommunicationSlow",
        ));
    }
    if let Some(quota) = h.quota_bytes.filter(|q| *q > 0.0) {
        checks.push((
            "db_size_bytes".into(),
            h.db_size_bytes,
            DB_QUOTA_FRACTION * quota,
            "80% of the backend quota",
        ));
    }
    checks
        .into_iter()
        .filter_map(|(figure, v, t, source)| {
            check(v, t).filter(|c| c.over).map(|c| Flag {
                figure,
                value: c.value,
                threshold: c.threshold,
                source: source.into(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INF: f64 = f64::INFINITY;

    fn h(b: &[(f64, f64)]) -> Histogram {
        Histogram::new(b.to_vec())
    }

    /// Worked by hand from Prometheus's algorithm (promql/quantile.go).
    #[test]
    fn matches_prometheus_on_worked_examples() {
        // 100 observations: 50 under 1 ms, 40 in (1, 2] ms, 10 in (2, 4] ms.
        let x = h(&[(0.001, 50.0), (0.002, 90.0), (0.004, 100.0), (INF, 100.0)]);
        // p50: rank 50 falls in the first bucket, at its top.
        assert_eq!(quantile(0.5, &x), Some(0.001));
        // p99: rank 99, bucket (0.002, 0.004] holds 10, 9 of them below: 0.002 + 0.002 * 0.9.
        assert!((quantile(0.99, &x).expect("p99") - 0.0038).abs() < 1e-12);
        // A rank in +Inf: the highest finite bound.
        let y = h(&[(0.001, 1.0), (0.002, 1.0), (INF, 10.0)]);
        assert_eq!(quantile(0.99, &y), Some(0.002));
    }

    #[test]
    fn no_observation_is_none_not_zero() {
        assert_eq!(quantile(0.99, &h(&[(0.001, 0.0), (INF, 0.0)])), None);
        assert_eq!(quantile(0.99, &h(&[(0.001, 3.0)])), None, "no +Inf bucket");
        assert_eq!(quantile(1.5, &h(&[(0.001, 3.0), (INF, 3.0)])), None);
    }

    #[test]
    fn a_restart_inside_the_window_counts_from_zero() {
        let start = h(&[(0.001, 500.0), (0.01, 600.0), (INF, 600.0)]);
        let end = h(&[(0.001, 5.0), (0.01, 8.0), (INF, 10.0)]);
        let d = window_delta(&start, &end, false).expect("same buckets");
        assert_eq!(d.buckets, end.buckets, "a bucket went down: the end counts from zero");
        let d = window_delta(&start, &h(&[(0.001, 600.0), (0.01, 700.0), (INF, 700.0)]), true)
            .expect("same buckets");
        assert_eq!(
            d.count(),
            Some(700.0),
            "a restart that the buckets hide, known from the start time"
        );
        assert_eq!(counter_delta(7.0, 2.0), 2.0);
        assert_eq!(counter_delta(2.0, 7.0), 5.0);
    }

    fn read(start: f64, fsync: &[(f64, f64)], hb: f64) -> MemberMetrics {
        MemberMetrics {
            leader_changes_seen_total: Some(1.0),
            process_start_time: Some(start),
            heartbeat_send_failures_total: Some(hb),
            wal_fsync: Some(h(fsync)),
            ..MemberMetrics::default()
        }
    }

    #[test]
    fn a_fold_sums_every_step_and_counts_a_restart_from_zero() {
        let mut f = Fold::new();
        f.push(&read(10.0, &[(0.001, 100.0), (0.1, 100.0), (INF, 100.0)], 4.0));
        assert_eq!(f.figures(|_| None).wal_fsync_p99_s, None, "one read: no window yet");
        assert_eq!(f.figures(|_| None).heartbeat_send_failures, None);
        f.push(&read(10.0, &[(0.001, 150.0), (0.1, 160.0), (INF, 160.0)], 6.0));
        // The member restarts: its counts start again from zero.
        f.push(&read(20.0, &[(0.001, 1.0), (0.1, 2.0), (INF, 2.0)], 1.0));
        let g = f.figures(|_| None);
        assert_eq!(g.restarts, 1);
        assert_eq!(g.wal_fsyncs, Some(62.0), "60 before the restart, 2 after");
        assert_eq!(g.heartbeat_send_failures, Some(3.0), "2 before, 1 after");
        // 51 of 62 under 1 ms, 11 in (1, 100] ms: p99 at rank 61.38 lies in the second bucket.
        let p99 = g.wal_fsync_p99_s.expect("p99");
        assert!((p99 - (0.001 + 0.099 * (61.38 - 51.0) / 11.0)).abs() < 1e-9, "{p99}");
        assert_eq!(g.over.len(), 1, "over the docs' 10 ms, under the mixin's 0.5 s: {:?}", g.over);
        let next = f.continue_from().figures(|_| None);
        assert_eq!(
            (next.wal_fsyncs, next.restarts),
            (None, 0),
            "the next window starts empty, from the last read"
        );
    }

    #[test]
    fn thresholds_flag_only_what_is_over() {
        assert_eq!(check(Some(0.02), WAL_FSYNC_P99_DOCS_S).map(|c| c.over), Some(true));
        assert_eq!(check(Some(0.002), WAL_FSYNC_P99_DOCS_S).map(|c| c.over), Some(false));
        assert_eq!(check(None, WAL_FSYNC_P99_DOCS_S), None);
    }
}
