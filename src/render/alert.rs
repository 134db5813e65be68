//! `report --alert-rule`: an alert on `increase(leaderwatch_elections_total[15m])` whose
//! threshold comes from measured baselines, as a managed-Prometheus `Rules` manifest or a
//! plain Prometheus rule file ([`AlertFormat`]). [`derive`] is pure (baselines in,
//! threshold and its derivation out, or [`NoThreshold`]: why none can be derived, as facts
//! the command words with its flags); [`render`] writes the YAML. The reasoning is in
//! docs/exporter.md ("The threshold").

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::model::baseline::{Baseline, WindowName};
use crate::render::InternalError;

/// The alert's name in Prometheus.
pub const ALERT: &str = "DlockEtcdElections";

/// What [`render`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertFormat {
    /// A managed Prometheus (GMP) `Rules` manifest, for `kubectl apply`.
    Rules,
    /// A plain Prometheus rule file, for promtool or a Prometheus of one's own.
    Prometheus,
}

/// Why no threshold can be derived from the baselines given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoThreshold {
    /// None of the `given` was measured on the target cluster, and local ones were not
    /// allowed ([`Params::allow_local`]).
    OnlyLocal { given: usize },
    /// None of those that could be used is complete.
    NoneComplete,
    /// None of the `used` disrupted a leader (so the threshold would say nothing about a
    /// leader loss), and it was not forced ([`Params::force`]).
    NoLeaderLost { used: usize },
}

/// How the threshold is to be derived.
#[derive(Debug, Clone)]
pub struct Params {
    /// The range of `increase()`.
    pub window: Duration,
    /// Voluntary disruptions the PDB lets through in one window; `None`: one rolling pass
    /// over the members (maxUnavailable 1 lets them through one at a time).
    pub disruptions: Option<u32>,
    /// Use local (rehearsal) baselines when no Kubernetes baseline is given.
    pub allow_local: bool,
    /// The scrape interval of the PodMonitoring: how far `increase()` may extrapolate.
    pub scrape_interval: Duration,
    /// Derive one even when no baseline used disrupted a leader.
    pub force: bool,
}

/// The threshold and everything it rests on, for the YAML comments and annotations.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    /// Elections a window may hold without alerting.
    pub threshold: u64,
    /// The expression's bound: threshold + slack (see [`slack`]).
    pub bound: f64,
    pub per_disruption: u64,
    pub disruptions: u32,
    /// The most elections a measured rolling restart or drain put in one window, if any
    /// was among the baselines.
    pub worst_routine: Option<u64>,
    /// Elections per window at rest (pooled rate × window).
    pub at_rest: f64,
    pub at_rest_elections: u64,
    pub at_rest_s: f64,
    /// The baselines used (path, run id, environment).
    pub used: Vec<(PathBuf, String, String)>,
    /// Baselines given but not used, and why.
    pub skipped: Vec<(PathBuf, String)>,
    /// One line per step, as printed.
    pub lines: Vec<String>,
}

/// What `increase()` adds on top of whole elections. It extrapolates the samples to the
/// range's edges, so N elections inside the range read as up to N × R / (R − s) (s: the
/// scrape interval); half an election keeps N silent and lets N + 1 fire while that
/// inflation stays under a half, i.e. for N < (R − s) / 2s (14 at 15 m and 30 s).
pub fn slack(threshold: u64, window: Duration, scrape: Duration) -> f64 {
    let (r, s) = (window.as_secs_f64(), scrape.as_secs_f64());
    let inflation = if r > s { threshold as f64 * s / (r - s) } else { f64::INFINITY };
    0.5f64.max(inflation.min(0.99))
}

/// The threshold from the baselines, with its derivation. Refuses ([`NoThreshold`]) when
/// no baseline was measured on Kubernetes and `allow_local` is off, or when none is usable.
pub fn derive(baselines: &[(PathBuf, Baseline)], p: &Params) -> Result<Derived, NoThreshold> {
    let (used, skipped) = select(baselines, p)?;
    let per_disruption = per_disruption(&used);
    let members = used.iter().map(|(_, b)| b.environment.members.len()).max().unwrap_or(3).max(1);
    let disruptions = p.disruptions.unwrap_or(members as u32);
    let (at_rest_elections, at_rest_s) = at_rest(&used);
    let at_rest = if at_rest_s > 0.0 {
        at_rest_elections as f64 / at_rest_s * p.window.as_secs_f64()
    } else {
        0.0
    };
    let operations = routine_operations(&used, p.window);
    let worst_routine = operations.iter().map(|o| o.2).max();
    let budget =
        (per_disruption as f64 * f64::from(disruptions)).max(worst_routine.unwrap_or(0) as f64);
    // Never below 1: a threshold of 0 would page on every election.
    let threshold = ((budget + at_rest).ceil() as u64).max(1);
    let mut d = Derived {
        threshold,
        bound: threshold as f64 + slack(threshold, p.window, p.scrape_interval),
        per_disruption,
        disruptions,
        worst_routine,
        at_rest,
        at_rest_elections,
        at_rest_s,
        used: used
            .iter()
            .map(|(p, b)| ((*p).clone(), b.run_id.clone(), b.environment.description.clone()))
            .collect(),
        skipped,
        lines: Vec::new(),
    };
    d.lines = steps(&d, &operations, members, p);
    Ok(d)
}

/// A rolling restart or a drain: several pods, with a maintenance record.
fn routine(b: &Baseline) -> bool {
    b.disruption.as_ref().is_some_and(|d| d.maintenance.is_some())
}

/// The baselines the threshold rests on and those left out (with why): only the target
/// cluster's when there are any, only complete ones, and at least one that took a leader
/// down (a follower's eviction costs no election or one at most, a leader's at least one:
/// a threshold without a leader loss would page on a sitting day of leader evictions).
#[allow(clippy::type_complexity)]
fn select<'a>(
    baselines: &'a [(PathBuf, Baseline)],
    p: &Params,
) -> Result<(Vec<(&'a PathBuf, &'a Baseline)>, Vec<(PathBuf, String)>), NoThreshold> {
    // A sitting on the local control plane counts as local here: its elections are not GKE's.
    // A dry run counts for nothing: it evicted nothing.
    let kube = baselines.iter().any(|(_, b)| b.environment.on_target_cluster() && !b.is_dry_run());
    if !kube && !p.allow_local {
        return Err(NoThreshold::OnlyLocal { given: baselines.len() });
    }
    let mut used = Vec::new();
    let mut skipped = Vec::new();
    for (path, b) in baselines {
        if b.is_dry_run() {
            skipped.push((path.clone(), "a dry run: nothing was evicted".to_owned()));
        } else if kube && !b.environment.on_target_cluster() {
            skipped.push((
                path.clone(),
                format!(
                    "{} baseline; ones from the target cluster were given",
                    if b.environment.kind == crate::model::baseline::EnvironmentKind::Kubernetes {
                        "local control plane"
                    } else {
                        b.environment.kind.as_str()
                    }
                ),
            ));
        } else if !b.is_complete() {
            skipped.push((
                path.clone(),
                format!(
                    "incomplete: {}",
                    b.incomplete_reason.as_deref().unwrap_or("no reason recorded")
                ),
            ));
        } else {
            used.push((path, b));
        }
    }
    if used.is_empty() {
        return Err(NoThreshold::NoneComplete);
    }
    let leader_lost = |b: &Baseline| {
        b.disruption.as_ref().is_some_and(|d| d.target_was_leader)
            || (routine(b)
                && crate::analysis::maintenance::cost(b)
                    .is_some_and(|c| !c.election_times.is_empty()))
    };
    if !p.force && !used.iter().any(|(_, b)| leader_lost(b)) {
        return Err(NoThreshold::NoLeaderLost { used: used.len() });
    }
    Ok((used, skipped))
}

/// The worst single voluntary disruption measured: elections from the request to the end
/// of settle. A routine operation (several pods) is held against the threshold apart
/// ([`routine_operations`]).
fn per_disruption(used: &[(&PathBuf, &Baseline)]) -> u64 {
    used.iter()
        .filter(|(_, b)| b.disruption.is_some() && !routine(b))
        .filter_map(|(_, b)| crate::analysis::flatten::elections_per_disruption(b))
        .max()
        .unwrap_or(0)
}

/// Elections and seconds at rest over every baseline used: the pooled at-rest rate.
fn at_rest(used: &[(&PathBuf, &Baseline)]) -> (u64, f64) {
    used.iter()
        .flat_map(|(_, b)| b.windows.iter().filter(|w| w.name == WindowName::AtRest))
        .fold((0u64, 0.0f64), |(n, s), w| (n + w.elections.unwrap_or(0), s + w.duration_s.max(0.0)))
}

/// Each measured rolling restart and drain: (operation, path, the most elections it put
/// in one `window`).
fn routine_operations(
    used: &[(&PathBuf, &Baseline)],
    window: Duration,
) -> Vec<(String, String, u64)> {
    used.iter()
        .filter(|(_, b)| routine(b))
        .filter_map(|(path, b)| {
            let c = crate::analysis::maintenance::cost(b)?;
            let op = c.method.map_or("routine operation", |m| m.as_str()).to_owned();
            Some((
                op,
                path.display().to_string(),
                crate::analysis::maintenance::most_in_window(&c.election_times, window),
            ))
        })
        .collect()
}

/// The derivation step by step, as printed and as the rule's comments: what a reader
/// needs to check the threshold by hand.
fn steps(
    d: &Derived,
    operations: &[(String, String, u64)],
    members: usize,
    p: &Params,
) -> Vec<String> {
    let (per_disruption, disruptions, threshold, at_rest) =
        (d.per_disruption, d.disruptions, d.threshold, d.at_rest);
    let w = humantime::format_duration(p.window);
    let disruptions_why = match p.disruptions {
        Some(_) => "--disruptions".to_owned(),
        None => {
            format!("one rolling pass over {members} members, one at a time (PDB maxUnavailable 1)")
        }
    };
    let mut lines = vec![
        format!(
            "elections per voluntary disruption: {per_disruption} (the most any used baseline saw from the disruption request to the end of settle)"
        ),
        format!("disruptions the PDB allows in {w}: {disruptions} ({disruptions_why})"),
        format!(
            "at-rest rate: {} election(s) in {:.0} s at rest = {at_rest:.3} per {w}",
            d.at_rest_elections, d.at_rest_s
        ),
    ];
    for (op, path, n) in operations {
        lines.push(format!("measured {op}: {n} election(s) in its worst {w} ({path})"));
    }
    match d.worst_routine {
        Some(worst) => {
            lines.push(format!("threshold = ceil(max({per_disruption} x {disruptions}, {worst} (the worst routine operation)) + {at_rest:.3}) = {threshold} (never below 1)"));
            lines.push(format!("the worst routine operation, {worst} election(s) in {w}, stays at or below the threshold {threshold}: it does not page"));
        }
        None => {
            lines.push(format!("threshold = ceil({per_disruption} x {disruptions} + {at_rest:.3}) = {threshold} (never below 1)"));
            lines.push("no rolling restart or drain among the baselines: the pass over the members is assumed, not measured (measure --method rolling-restart, drain)".to_owned());
        }
    }
    lines.push(format!(
        "fires when increase() > {:.2}: increase() extrapolates to the range's edges ({}s scrapes), so {threshold} election(s) can read slightly above {threshold}",
        d.bound,
        p.scrape_interval.as_secs()
    ));
    if slack(threshold, p.window, p.scrape_interval) > 0.5 {
        lines.push(format!(
            "warning: at {threshold} elections per {w} the extrapolation of increase() can reach half an election: one election more may stay silent until it is well inside the range"
        ));
    }
    lines
}

#[derive(Serialize)]
struct Rule {
    alert: String,
    expr: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct Group {
    name: String,
    interval: String,
    rules: Vec<Rule>,
}

#[derive(Serialize)]
struct RuleFile {
    groups: Vec<Group>,
}

#[derive(Serialize)]
struct Metadata {
    name: String,
    namespace: String,
    labels: BTreeMap<String, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RulesManifest {
    api_version: String,
    kind: String,
    metadata: Metadata,
    spec: RuleFile,
}

/// The alert's expression for a window and bound.
pub fn expr(window: Duration, bound: f64) -> String {
    format!("increase(leaderwatch_elections_total[{}]) > {bound:.2}", prom_duration(window))
}

/// A Prometheus duration: whole minutes as `15m`, else seconds.
fn prom_duration(d: Duration) -> String {
    let s = d.as_secs().max(1);
    if s.is_multiple_of(60) { format!("{}m", s / 60) } else { format!("{s}s") }
}

/// The rule file or the managed Prometheus Rules manifest, as `format` says, with the
/// derivation as comments at the top.
pub fn render(
    d: &Derived,
    p: &Params,
    format: AlertFormat,
    namespace: &str,
) -> Result<String, InternalError> {
    let window = prom_duration(p.window);
    let baselines = d
        .used
        .iter()
        .map(|(path, id, env)| format!("{} ({id}; {env})", path.display()))
        .collect::<Vec<_>>()
        .join("; ");
    let annotations = BTreeMap::from([
        (
            "summary".to_owned(),
            format!(
                "More than {} etcd elections in {window} in the dlock lock backend",
                d.threshold
            ),
        ),
        (
            "description".to_owned(),
            format!(
                "More than {} elections (raft term increases) in {window}: the measured budget is {} per voluntary disruption x {} disruptions{} + {:.3} at rest. More means elections nobody planned: check the causes in the sampler's events.csv and the etcd members' disks and network.",
                d.threshold,
                d.per_disruption,
                d.disruptions,
                d.worst_routine
                    .map(|w| format!(
                        " or {w} in the worst measured rolling restart or drain, whichever is more"
                    ))
                    .unwrap_or_default(),
                d.at_rest
            ),
        ),
        ("threshold".to_owned(), d.threshold.to_string()),
        ("baselines".to_owned(), baselines),
    ]);
    let rule = Rule {
        alert: ALERT.to_owned(),
        expr: expr(p.window, d.bound),
        labels: BTreeMap::from([("severity".to_owned(), "warning".to_owned())]),
        annotations,
    };
    let file = RuleFile {
        groups: vec![Group {
            name: "leaderwatch".to_owned(),
            interval: prom_duration(p.scrape_interval),
            rules: vec![rule],
        }],
    };
    let body = match format {
        AlertFormat::Prometheus => serde_yaml_ng::to_string(&file),
        AlertFormat::Rules => serde_yaml_ng::to_string(&RulesManifest {
            api_version: "monitoring.googleapis.com/v1".to_owned(),
            kind: "Rules".to_owned(),
            metadata: Metadata {
                name: "leaderwatch-elections".to_owned(),
                namespace: namespace.to_owned(),
                labels: BTreeMap::from([
                    ("app.kubernetes.io/name".to_owned(), "leaderwatch".to_owned()),
                    ("app.kubernetes.io/part-of".to_owned(), "dlock".to_owned()),
                ]),
            },
            spec: file,
        }),
    }
    .map_err(|e| InternalError(format!("writing the rule: {e}")))?;
    let mut out = String::from(
        "# Generated by `leaderwatch report --alert-rule`. The threshold, derived from measured baselines:\n",
    );
    for l in &d.lines {
        out.push_str(&format!("#   {l}\n"));
    }
    for (path, id, env) in &d.used {
        out.push_str(&format!("# used: {} ({id}; {env})\n", path.display()));
    }
    for (path, why) in &d.skipped {
        out.push_str(&format!("# not used: {} ({why})\n", path.display()));
    }
    out.push_str(&body);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::baseline::{Environment, EnvironmentKind, WindowRecord};
    use crate::model::clock::Stamp;

    fn window(name: WindowName, secs: f64, elections: u64) -> WindowRecord {
        let s = Stamp { utc: chrono::Utc::now(), mono: tokio::time::Instant::now() };
        let mut w = WindowRecord::new(
            name,
            s,
            s,
            10,
            &crate::model::counts::Counts {
                raw_sum_start: None,
                raw_sum_end: None,
                reset_aware_increase: 0.0,
                per_member: BTreeMap::new(),
                elections: Some(elections),
                leader_transitions: vec![],
            },
            true,
        );
        w.duration_s = secs;
        w
    }

    fn baseline(
        kind: EnvironmentKind,
        at_rest: (f64, u64),
        disruption: u64,
        settle: u64,
    ) -> (PathBuf, Baseline) {
        let b = Baseline {
            schema_version: 3,
            tool_version: "t".into(),
            run_id: format!("{}-run", kind.as_str()),
            status: crate::model::baseline::Completion::Complete,
            incomplete_reason: None,
            windows: vec![window(WindowName::AtRest, at_rest.0, at_rest.1), window(WindowName::Disruption, 30.0, disruption), window(WindowName::Settle, 300.0, settle)],
            disruption: Some(serde_json::from_value(serde_json::json!({"target": "m0", "target_was_leader": true, "method": "kubernetes-eviction", "requested_at": "2026-11-30T00:00:00Z", "member_lost_at": null, "member_back_at": null, "healthy_at": null, "loss_to_healthy_s": null, "request_to_healthy_s": null, "ground_truth": [], "attempts": 0, "blocked_s": 0.0, "waterfall": []})).expect("disruption")),
            environment: Environment { kind, description: format!("{} env", kind.as_str()), members: vec!["a".into(), "b".into(), "c".into()], ..Environment::default() },
            cause_horizon_s: None,
            lock_safety: None,
        };
        (PathBuf::from(format!("{}/baseline.json", kind.as_str())), b)
    }

    fn params() -> Params {
        Params {
            window: Duration::from_secs(900),
            disruptions: None,
            allow_local: false,
            scrape_interval: Duration::from_secs(30),
            force: false,
        }
    }

    #[test]
    fn follower_only_baselines_are_refused_unless_forced() {
        let mut follower = baseline(EnvironmentKind::Kubernetes, (1200.0, 0), 0, 0);
        if let Some(d) = follower.1.disruption.as_mut() {
            d.target_was_leader = false;
        }
        let b = [follower];
        assert_eq!(derive(&b, &params()), Err(NoThreshold::NoLeaderLost { used: 1 }));
        let d = derive(&b, &Params { force: true, ..params() }).expect("forced");
        assert_eq!(d.threshold, 1);
    }

    #[test]
    fn local_only_is_refused_unless_allowed() {
        let b = [baseline(EnvironmentKind::Local, (60.0, 0), 1, 0)];
        assert_eq!(derive(&b, &params()), Err(NoThreshold::OnlyLocal { given: 1 }));
        let d = derive(&b, &Params { allow_local: true, ..params() }).expect("allowed");
        assert_eq!((d.per_disruption, d.disruptions, d.threshold), (1, 3, 3));
    }

    #[test]
    fn threshold_is_disruptions_times_elections_plus_the_rest_rate_rounded_up() {
        // 2 elections in 2 h at rest = 0.25 per 15 m; 2 per disruption x 3 + 0.25 -> 7.
        let b = [
            baseline(EnvironmentKind::Kubernetes, (7200.0, 2), 1, 1),
            baseline(EnvironmentKind::Local, (60.0, 5), 9, 9),
        ];
        let d = derive(&b, &params()).expect("derive");
        assert_eq!(d.per_disruption, 2);
        assert!((d.at_rest - 0.25).abs() < 1e-9, "{}", d.at_rest);
        assert_eq!(d.threshold, 7);
        assert_eq!(d.skipped.len(), 1, "the local baseline is left out when Kubernetes ones exist");
        assert_eq!(d.used.len(), 1);
    }

    /// Regression: a sitting on the local control plane is environment.kind "kubernetes",
    /// and would have passed for GKE's; the alert is for the target cluster only.
    #[test]
    fn a_local_control_plane_sitting_is_not_a_gke_baseline() {
        let mut local_cluster = baseline(EnvironmentKind::Kubernetes, (1200.0, 0), 1, 1);
        local_cluster.1.environment.description =
            "local control plane, Kubernetes v1.35.4, etcd 3.6.14, 3 members".into();
        assert_eq!(
            derive(&[local_cluster.clone()], &params()),
            Err(NoThreshold::OnlyLocal { given: 1 })
        );
        let gke = baseline(EnvironmentKind::Kubernetes, (7200.0, 2), 1, 1);
        let d = derive(&[gke, local_cluster], &params()).expect("derive");
        assert_eq!(
            (d.used.len(), d.skipped.len()),
            (1, 1),
            "the local control plane's left out beside GKE's"
        );
    }

    #[test]
    fn never_below_one() {
        let b = [baseline(EnvironmentKind::Kubernetes, (1200.0, 0), 0, 0)];
        let d = derive(&b, &params()).expect("derive");
        assert_eq!(d.threshold, 1);
        assert_eq!(d.bound, 1.5);
        assert_eq!(
            expr(Duration::from_secs(900), d.bound),
            "increase(leaderwatch_elections_total[15m]) > 1.50"
        );
    }

    #[test]
    fn slack_grows_with_extrapolation_but_stays_under_one() {
        let (r, s) = (Duration::from_secs(900), Duration::from_secs(30));
        assert_eq!(slack(3, r, s), 0.5);
        assert!(slack(20, r, s) > 0.5 && slack(20, r, s) < 1.0);
    }
}
