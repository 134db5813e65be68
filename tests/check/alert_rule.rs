//! `leaderwatch report --alert-rule` as a user runs it on the committed rehearsals: it
//! refuses local-only baselines without --allow-local, and follower-only ones without
//! --force; the Rules manifest has the fields
//! the managed Prometheus CRD takes (typed, unknown fields refused); `promtool check rules`
//! accepts both outputs, and `promtool test rules` shows a rolling restart stays silent
//! while one election more fires (#[ignore]d: needs promtool, which `make test` installs).

use crate::support;
use crate::support::promtool;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use promtool::{promtool, series, silent_case};
use serde::Deserialize;
use support::leaderwatch;

fn rehearsals() -> Vec<PathBuf> {
    support::committed_runs_named("rehearsal-")
        .into_iter()
        .map(|d| d.join("baseline.json"))
        .collect()
}

fn report(args: &[&str], baselines: &[PathBuf]) -> Output {
    leaderwatch().arg("report").args(args).args(baselines).output().expect("leaderwatch report")
}

fn stdout(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A rehearsal's baseline.json marked as measured on Kubernetes, in `dir`.
fn as_kubernetes(src: &Path, dir: &Path) -> PathBuf {
    let mut b: serde_json::Value =
        serde_json::from_slice(&std::fs::read(src).expect("read")).expect("json");
    b["environment"]["kind"] = "kubernetes".into();
    b["environment"]["description"] = "test copy marked kubernetes".into();
    let p = dir.join("baseline.json");
    std::fs::write(&p, serde_json::to_vec(&b).expect("json")).expect("write");
    p
}

// The managed Prometheus Rules CRD (monitoring.googleapis.com/v1), the fields this tool
// writes; an unknown or misspelt field fails to parse.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Rules {
    api_version: String,
    kind: String,
    metadata: Metadata,
    spec: RuleFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata {
    name: String,
    namespace: String,
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    groups: Vec<Group>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Group {
    name: String,
    interval: String,
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    alert: String,
    expr: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

/// Negative control for the strict CRD structs: a field the CRD does not have is refused,
/// so a rule the API server would reject cannot pass `the_rules_manifest_has_the_crd_fields...`.
#[test]
fn the_crd_structs_refuse_a_field_the_crd_does_not_have() {
    let text = stdout(&report(&["--alert-rule", "--allow-local"], &rehearsals()));
    assert!(serde_yaml_ng::from_str::<Rules>(&text).is_ok());
    let extra = text.replacen("spec:", "spec:\n  notAField: 1", 1);
    assert!(
        serde_yaml_ng::from_str::<Rules>(&extra).is_err(),
        "an unknown spec field was accepted:\n{extra}"
    );
}

#[test]
fn local_baselines_are_refused_without_allow_local() {
    let o = report(&["--alert-rule"], &rehearsals());
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("no baseline measured on a Kubernetes cluster (GKE)")
            && err.contains("--allow-local"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "nothing written");
    // --format prometheus is for --alert-rule only.
    let o = report(&["--format", "prometheus"], &rehearsals());
    assert_eq!(o.status.code(), Some(2));
}

/// The committed sittings that took down only followers: a threshold from them would page
/// on the first leader eviction.
#[test]
fn follower_only_runs_are_refused_unless_forced() {
    let followers: Vec<PathBuf> = support::committed_runs_named("kube-")
        .into_iter()
        .filter(|d| {
            let n = d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            n.contains("follower") && !n.contains("rolling-restart")
        })
        .map(|d| d.join("baseline.json"))
        .collect();
    assert!(followers.len() >= 3, "the committed follower sittings: {followers:?}");
    let o = report(&["--alert-rule", "--allow-local"], &followers);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("disrupted a leader") && err.contains("--force"), "{err}");
    assert!(o.stdout.is_empty(), "nothing written");
    let forced = stdout(&report(&["--alert-rule", "--allow-local", "--force"], &followers));
    assert!(forced.contains("DlockEtcdElections"), "{forced}");
}

#[test]
fn the_rules_manifest_has_the_crd_fields_and_names_its_baselines() {
    let b = rehearsals();
    let text = stdout(&report(&["--alert-rule", "--allow-local"], &b));
    let r: Rules = serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(
        (r.api_version.as_str(), r.kind.as_str()),
        ("monitoring.googleapis.com/v1", "Rules")
    );
    assert_eq!(
        (r.metadata.name.as_str(), r.metadata.namespace.as_str()),
        ("leaderwatch-elections", "dlock")
    );
    assert_eq!(
        r.metadata.labels.get("app.kubernetes.io/name").map(String::as_str),
        Some("leaderwatch")
    );
    assert_eq!(r.spec.groups.len(), 1);
    let g = &r.spec.groups[0];
    assert_eq!((g.name.as_str(), g.interval.as_str()), ("leaderwatch", "30s"));
    let rule = &g.rules[0];
    assert_eq!(rule.alert, "DlockEtcdElections");
    // The committed rehearsals: one election per disruption at most, none at rest, 3 members.
    assert_eq!(rule.annotations["threshold"], "3");
    assert_eq!(rule.expr, "increase(leaderwatch_elections_total[15m]) > 3.50");
    assert_eq!(rule.labels.get("severity").map(String::as_str), Some("warning"));
    for p in &b {
        assert!(
            rule.annotations["baselines"].contains(&p.display().to_string()),
            "{} named",
            p.display()
        );
    }
    // The derivation is printed beside the rule.
    assert!(text.contains("threshold = ceil(1 x 3 + 0.000) = 3"), "{text}");
}

#[test]
#[ignore = "needs promtool (Debian's prometheus); make test runs it"]
fn promtool_accepts_the_rule_and_its_unit_tests_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // The leader rehearsal: one election per disruption, so a budget of 3.
    let leader = rehearsals()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("leader-sigterm"))
        .expect("the leader sigterm rehearsal");
    let kube = as_kubernetes(&leader, d);
    // A Kubernetes baseline needs no --allow-local.
    let plain =
        stdout(&report(&["--alert-rule", "--format", "prometheus"], std::slice::from_ref(&kube)));
    std::fs::write(d.join("rules.yml"), &plain).expect("write");
    let o = promtool(&["check", "rules", "rules.yml"], d);
    assert!(
        o.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // Negative control: the same file with a broken expression is refused, so the check
    // above can fail.
    std::fs::write(
        d.join("broken.yml"),
        plain.replace(
            "increase(leaderwatch_elections_total[15m])",
            "increase(leaderwatch_elections_total[15m]",
        ),
    )
    .expect("write");
    assert!(
        !promtool(&["check", "rules", "broken.yml"], d).status.success(),
        "promtool accepted a broken expression"
    );
    // The manifest's spec is the same rule file.
    let text = stdout(&report(&["--alert-rule"], &[kube]));
    let manifest: Rules = serde_yaml_ng::from_str(&text).expect("manifest");
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("yaml");
    std::fs::write(d.join("spec.yml"), serde_yaml_ng::to_string(&value["spec"]).expect("yaml"))
        .expect("write");
    let o = promtool(&["check", "rules", "spec.yml"], d);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rule = &manifest.spec.groups[0].rules[0];
    let n: u64 = rule.annotations["threshold"].parse().expect("threshold");
    assert!(n >= 1);

    // Synthetic scrapes 30 s apart like the PodMonitoring's; the rule is evaluated every
    // 30 s (its group interval), 10 s off the scrapes.
    // A rolling restart: the members one at a time, n elections (the budget) 4 minutes apart.
    let rolling: Vec<f64> = (0..n).map(|i| (300 + i * 240) as f64).collect();
    // The budget in one burst: the worst case for extrapolation.
    let burst: Vec<f64> = (0..n).map(|i| (300 + i * 10) as f64).collect();
    // One election more than the budget, 2 minutes apart: fires once all are in the range.
    let over: Vec<u64> = (0..=n).map(|i| 300 + i * 120).collect();
    let over_at: Vec<f64> = over.iter().map(|t| *t as f64).collect();
    let fire_at = over[over.len() - 1] + 60;
    let ann: String = rule
        .annotations
        .iter()
        .map(|(k, v)| format!("              {k}: {}\n", serde_json::to_string(v).expect("json")))
        .collect();
    let tests = format!(
        "rule_files: [rules.yml]\nevaluation_interval: 30s\ntests:\n{}{}  - name: one election over the budget fires\n    interval: 10s\n    input_series:\n      - series: 'leaderwatch_elections_total{{job=\"leaderwatch\"}}'\n        values: '{}'\n    alert_rule_test:\n      - eval_time: {}s\n        alertname: DlockEtcdElections\n        exp_alerts: []\n      - eval_time: {fire_at}s\n        alertname: DlockEtcdElections\n        exp_alerts:\n          - exp_labels:\n              severity: warning\n              job: leaderwatch\n            exp_annotations:\n{ann}",
        silent_case("a rolling restart stays silent", 40, &rolling),
        silent_case("the budget in one burst stays silent", 40, &burst),
        series(40, &over_at),
        over[over.len() - 2] + 30,
    );
    std::fs::write(d.join("tests.yml"), &tests).expect("write");
    let o = promtool(&["test", "rules", "tests.yml"], d);
    assert!(
        o.status.success(),
        "promtool test rules:\n{}{}\n{tests}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );

    // Negative control: the same tests against a rule without the half-election slack
    // (`> n`) must fail, or the silence above proves nothing about extrapolation.
    std::fs::write(d.join("rules.yml"), plain.replace(&format!("> {n}.50"), &format!("> {n}")))
        .expect("write");
    let o = promtool(&["test", "rules", "tests.yml"], d);
    assert!(!o.status.success(), "a rule at exactly {n} should fire on the burst (extrapolation)");
}

#[test]
#[ignore = "needs promtool (Debian's prometheus); make test runs it"]
fn the_rule_from_the_committed_runs_stays_silent_on_each_recorded_rolling_restart_and_drain_and_fires_on_a_storm()
 {
    // Every committed run: the rehearsals and the sittings on the local control plane,
    // routine maintenance included.
    let all = support::committed_baselines();
    let o = report(&["--alert-rule", "--allow-local", "--format", "prometheus"], &all);
    let rules = stdout(&o).into_bytes();
    let derivation = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        derivation.contains("the worst routine operation"),
        "the derivation names the routine operations: {derivation}"
    );
    let mut routine = 0;
    for p in &all {
        let b: serde_json::Value =
            serde_json::from_slice(&std::fs::read(p).expect("read")).expect("json");
        if b["disruption"]["maintenance"].is_null() {
            continue;
        }
        routine += 1;
        // The recorded elections, two minutes into a 40-minute series.
        let at = promtool::election_times(&b, 120.0);
        assert!(
            promtool::alert_silent(&rules, &at, 40),
            "the alert fired on the recorded {} ({}): elections at {at:?}\n{derivation}",
            b["disruption"]["method"],
            p.display()
        );
    }
    assert!(routine >= 2, "committed rolling restarts and drains under data/: {routine}");
    // Negative control: twice the threshold in three minutes is an election storm.
    let n: usize = derivation
        .lines()
        .find_map(|l| l.strip_prefix("the worst routine operation, "))
        .and_then(|l| l.rsplit("threshold ").next())
        .and_then(|l| l.split(':').next())
        .and_then(|t| t.trim().parse().ok())
        .expect("the threshold in the derivation");
    let storm: Vec<f64> =
        (0..2 * n.max(1)).map(|i| 120.0 + i as f64 * 180.0 / (2 * n.max(1)) as f64).collect();
    assert!(
        !promtool::alert_silent(&rules, &storm, 40),
        "{} elections in three minutes must fire (threshold {n})",
        storm.len()
    );
}
