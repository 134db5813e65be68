//! Member health between two boundary rounds, pure: histogram and counter snapshots at the
//! start and the end of a window -> reset-aware deltas and quantiles, with the thresholds
//! etcd documents. No I/O, no clock.
//!
//! Quantiles follow Prometheus's `histogram_quantile`: find the bucket where the rank
//! `q × count` falls and interpolate linearly inside it (the lowest bucket starts at 0; a
//! rank in the `+Inf` bucket gives the highest finite bound). A window with no observation
//! has no quantile (`None`), never 0.

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

/// How a counter moved from `start` to `end`, Prometheus `increase()` without
/// extrapolation: a drop is a restart, and the new value counts from zero.
pub fn counter_delta(start: f64, end: f64) -> f64 {
    if end < start { end } else { end - start }
}

/// The observations of one window, bucket by bucket: `end - start`, or `end` alone when
/// the member restarted in between (any bucket went down, or `restarted` says so from the
/// process start time). `None` when the two do not have the same buckets.
pub fn window_delta(start: &Histogram, end: &Histogram, restarted: bool) -> Option<Histogram> {
    if start.buckets.len() != end.buckets.len() || start.buckets.iter().zip(&end.buckets).any(|(a, b)| a.0 != b.0) {
        return None;
    }
    let reset = restarted || start.buckets.iter().zip(&end.buckets).any(|(a, b)| b.1 < a.1);
    let buckets = start.buckets.iter().zip(&end.buckets).map(|(a, b)| (b.0, if reset { b.1 } else { b.1 - a.1 })).collect();
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
        let d = window_delta(&start, &h(&[(0.001, 600.0), (0.01, 700.0), (INF, 700.0)]), true).expect("same buckets");
        assert_eq!(d.count(), Some(700.0), "a restart that the buckets hide, known from the start time");
        assert_eq!(counter_delta(7.0, 2.0), 2.0);
        assert_eq!(counter_delta(2.0, 7.0), 5.0);
    }

    #[test]
    fn thresholds_flag_only_what_is_over() {
        assert_eq!(check(Some(0.02), WAL_FSYNC_P99_DOCS_S).map(|c| c.over), Some(true));
        assert_eq!(check(Some(0.002), WAL_FSYNC_P99_DOCS_S).map(|c| c.over), Some(false));
        assert_eq!(check(None, WAL_FSYNC_P99_DOCS_S), None);
    }
}
