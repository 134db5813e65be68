//! `promtool test rules` on leaderwatch's alert rule over a recorded or synthetic election
//! series. Included by `#[path]` (tests/check/alert_rule.rs, tests/lab/kube.rs).

use std::path::Path;
use std::process::{Command, Output};

pub fn promtool(args: &[&str], dir: &Path) -> Output {
    Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool (Debian's prometheus; make deps installs it)")
}

/// promtool's values (10 s steps) for a counter scraped every 30 s, 10 s off the rule
/// evaluations (which promtool runs on the 30 s grid): on a real server the two are not
/// aligned, and `increase()` then extrapolates. It rises by one at each of `at` (seconds).
pub fn series(minutes: u64, at: &[f64]) -> String {
    (0..=minutes * 6)
        .map(|k| {
            if k % 3 == 1 {
                at.iter().filter(|t| **t <= (k * 10) as f64).count().to_string()
            } else {
                "_".to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A promtool test case `name`: the counter of [`series`], evaluated every 30 s for
/// `minutes`, the alert expected at none of them.
pub fn silent_case(name: &str, minutes: u64, at: &[f64]) -> String {
    let evals: Vec<String> = (0..minutes * 2).map(|i| format!("      - eval_time: {}s\n        alertname: DlockEtcdElections\n        exp_alerts: []\n", i * 30)).collect();
    format!(
        "  - name: {name}\n    interval: 10s\n    input_series:\n      - series: 'leaderwatch_elections_total{{job=\"leaderwatch\"}}'\n        values: '{}'\n    alert_rule_test:\n{}",
        series(minutes, at),
        evals.concat()
    )
}

/// True when `promtool test rules` finds the rule file `rules` silent over the whole of
/// `at` (see [`silent_case`]).
pub fn alert_silent(rules: &[u8], at: &[f64], minutes: u64) -> bool {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("rules.yml"), rules).expect("write");
    let tests = format!(
        "rule_files: [rules.yml]\nevaluation_interval: 30s\ntests:\n{}",
        silent_case("recorded", minutes, at)
    );
    std::fs::write(dir.path().join("tests.yml"), &tests).expect("write");
    promtool(&["test", "rules", "tests.yml"], dir.path()).status.success()
}

/// The elections of a baseline.json, as seconds from its first window's start, shifted by
/// `offset` (their `observed_at`).
pub fn election_times(baseline: &serde_json::Value, offset: f64) -> Vec<f64> {
    let ts = |v: &serde_json::Value| {
        v.as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
    };
    let start = ts(&baseline["windows"][0]["start"]).expect("a window start");
    baseline["windows"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|w| w["elections_detail"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| ts(&e["observed_at"]))
        .map(|t| offset + (t - start).num_milliseconds() as f64 / 1e3)
        .collect()
}
