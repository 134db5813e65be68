//! The pure member-health maths (src/analysis/health.rs): properties of the quantile and the
//! window deltas, and a cross-check of the quantile against Prometheus itself
//! (`promtool test rules`, Debian's prometheus package, installed by `make deps`; run by `make test`).

use leaderwatch::analysis::health::{Fold, Histogram, quantile, window_delta};
use leaderwatch::model::metrics::MemberMetrics;
use proptest::prelude::*;

/// etcd's WAL fsync buckets (0.001 .. 8.192 s, doubling) and a +Inf bucket.
fn bounds() -> Vec<f64> {
    let mut b: Vec<f64> = (0..14).map(|i| 0.001 * f64::from(1u32 << i)).collect();
    b.push(f64::INFINITY);
    b
}

/// Cumulative buckets from per-bucket observation counts.
fn histogram(per_bucket: &[u32]) -> Histogram {
    let mut acc = 0.0;
    Histogram::new(
        bounds()
            .into_iter()
            .zip(per_bucket)
            .map(|(le, n)| {
                acc += f64::from(*n);
                (le, acc)
            })
            .collect(),
    )
}

fn per_bucket() -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::vec(prop_oneof![3 => Just(0u32), 2 => 0u32..50, 1 => 0u32..5000], 15)
}

proptest! {
    #[test]
    fn the_quantile_rises_with_q_and_stays_inside_the_finite_buckets(n in per_bucket(), q1 in 0.0f64..=1.0, q2 in 0.0f64..=1.0) {
        let h = histogram(&n);
        let (lo, hi) = (q1.min(q2), q1.max(q2));
        match (quantile(lo, &h), quantile(hi, &h)) {
            (Some(a), Some(b)) => {
                prop_assert!(a <= b, "p{lo} = {a} > p{hi} = {b}");
                prop_assert!((0.0..=8.192).contains(&a) && (0.0..=8.192).contains(&b));
            }
            (None, None) => prop_assert_eq!(n.iter().sum::<u32>(), 0, "None only without observations"),
            other => prop_assert!(false, "one quantile but not the other: {:?}", other),
        }
    }

    /// Reads of one member, some after a restart (a new process counts from zero): the fold
    /// counts every observation made in the window exactly once and never goes negative.
    #[test]
    fn a_fold_counts_each_observation_once_across_restarts(steps in proptest::collection::vec((per_bucket(), any::<bool>(), 0u32..5), 1..8), first in per_bucket()) {
        let mut f = Fold::new();
        let mut cum = first.clone();
        let mut start = 1.0;
        let mut hb = 0u32;
        let read = |cum: &[u32], start: f64, hb: u32| MemberMetrics {
            process_start_time: Some(start),
            heartbeat_send_failures_total: Some(f64::from(hb)),
            wal_fsync: Some(histogram(cum)),
            ..MemberMetrics::default()
        };
        f.push(&read(&cum, start, hb));
        let (mut want, mut want_hb) = (vec![0u32; 15], 0u32);
        for (during, restart, failures) in &steps {
            if *restart {
                start += 1.0;
                cum = vec![0; 15];
                hb = 0;
            }
            cum = cum.iter().zip(during).map(|(a, b)| a + b).collect();
            hb += failures;
            want = want.iter().zip(during).map(|(a, b)| a + b).collect();
            want_hb += failures;
            f.push(&read(&cum, start, hb));
        }
        let g = f.figures(|_| None);
        prop_assert_eq!(g.wal_fsyncs, Some(f64::from(want.iter().sum::<u32>())));
        prop_assert_eq!(g.heartbeat_send_failures, Some(f64::from(want_hb)));
        prop_assert_eq!(g.wal_fsync_p99_s, quantile(0.99, &histogram(&want)));
        prop_assert_eq!(g.restarts as usize, steps.iter().filter(|s| s.1).count());
    }

    #[test]
    fn a_window_without_restart_is_the_difference_of_its_ends(before in per_bucket(), during in per_bucket()) {
        let start = histogram(&before);
        let both: Vec<u32> = before.iter().zip(&during).map(|(a, b)| a + b).collect();
        let d = window_delta(&start, &histogram(&both), false).expect("same buckets");
        prop_assert_eq!(d, histogram(&during));
    }
}

/// Random windows, each quantile computed here and by Prometheus's own
/// `histogram_quantile(q, b - b offset 1m)` under `promtool test rules`: each test case
/// expects `abs(prometheus - ours) < 1e-9` to be 1. Ignored by plain `cargo test` (it needs
/// promtool); `make test` installs Debian's prometheus package and runs it.
#[test]
#[ignore = "needs promtool (Debian prometheus); `make test` runs it"]
fn the_quantile_matches_promtool() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config {
        rng_seed: proptest::test_runner::RngSeed::Fixed(56),
        ..Config::default()
    });
    let mut yaml = String::from("rule_files: []\nevaluation_interval: 1m\ntests:\n");
    let mut cases = 0;
    while cases < 60 {
        let (before, during) = (
            per_bucket().new_tree(&mut runner).expect("tree").current(),
            per_bucket().new_tree(&mut runner).expect("tree").current(),
        );
        let both: Vec<u32> = before.iter().zip(&during).map(|(a, b)| a + b).collect();
        let (h0, h1) = (histogram(&before), histogram(&both));
        let q = [0.5, 0.9, 0.99, 0.999][cases % 4];
        let Some(ours) = window_delta(&h0, &h1, false).and_then(|d| quantile(q, &d)) else {
            continue;
        };
        yaml.push_str("  - interval: 1m\n    input_series:\n");
        for ((le, a), (_, b)) in h0.buckets.iter().zip(&h1.buckets) {
            let le = if le.is_infinite() { "+Inf".to_owned() } else { format!("{le}") };
            yaml.push_str(&format!(
                "      - series: 'fsync_bucket{{le=\"{le}\"}}'\n        values: '{a} {b}'\n"
            ));
        }
        yaml.push_str(&format!(
            "    promql_expr_test:\n      - expr: abs(histogram_quantile({q}, fsync_bucket - fsync_bucket offset 1m) - {ours:.17e}) < bool 1e-9\n        eval_time: 1m\n        exp_samples:\n          - labels: '{{}}'\n            value: 1\n"
        ));
        cases += 1;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("quantile_test.yaml");
    std::fs::write(&file, yaml).expect("write the promtool test");
    let o = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("promtool (make crosscheck installs it)");
    assert!(
        o.status.success(),
        "promtool disagrees:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
