//! `leaderwatch rate PATH...`: the residual rate of elections, the number ADR-005 budgets.
//! Quiet exposure is pooled over sitting baselines (their at_rest and settle windows) and
//! `sample` run directories (every run in events.csv), minus the time a disruption of our
//! own or a known Kubernetes one was in progress; the elections in it are split by cause,
//! and the rate gets its exact Poisson interval ([`crate::analysis::poisson`]). Reading the
//! sources is `io::read`; what is read ([`sitting_source`], [`cuts_from`]) and pooling them
//! ([`pool`]) is here, pure. The reading guide is docs/rate.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::analysis::attribution::OWN;
use crate::model::baseline::Baseline;
use crate::model::event::Cause;
use crate::model::event::{EventKind, EventRow};
use crate::model::measurement::Measurement;
use crate::model::rate::{Bound, Election, RateInput, RateInputKind};

/// A disruption in progress is cut from this event to its member's next `back` or
/// `health_true`, or this long after it if none follows.
pub const CUT_CAP: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// Events that start a disruption: ours (attribution's list) and Kubernetes taking a pod
/// or node away (the watcher's kinds, and core/v1 Event reasons).
fn starts_disruption(source: crate::model::event::Source, kind: EventKind, detail: &str) -> bool {
    OWN.contains(&kind)
        || kind == EventKind::DisruptionRequested
        || crate::analysis::attribution::is_kubernetes_disruption(source, kind, detail)
}

/// Causes, grouped as the rate reports them.
pub fn category(cause: Cause) -> &'static str {
    match cause {
        Cause::OwnDisruption => "own disruption",
        Cause::Kubernetes => "kubernetes disruption",
        Cause::Restart | Cause::Unreachable | Cause::Node => "node or pod events",
        Cause::Network => "network between members",
        Cause::Disk => "slow disk",
        Cause::Cpu => "CPU starvation",
        Cause::CpuOrDisk => "CPU starvation or slow disk",
        Cause::Stress => "stress",
        Cause::Unexplained => "unexplained",
    }
}

/// Categories that are residual (counted in the rate), in report order.
pub const RESIDUAL: [&str; 7] = [
    "unexplained",
    "node or pod events",
    "network between members",
    "slow disk",
    "CPU starvation",
    "CPU starvation or slow disk",
    "stress",
];

/// The pooled result.
#[derive(Debug, Clone, Serialize)]
pub struct Rate {
    pub sources: Vec<SourceSummary>,
    /// Seconds of quiet exposure (the union of spans minus the union of cuts).
    pub exposure_s: f64,
    /// Seconds cut from the spans.
    pub cut_s: f64,
    /// Residual elections (terms) by category.
    pub elections: BTreeMap<String, u64>,
    pub residual: u64,
    /// Elections not counted: caused by a disruption, or in cut time, by reason.
    pub excluded: BTreeMap<String, u64>,
    pub confidence: f64,
    /// First and last instant any source watched.
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub per_hour: Option<Bound>,
    pub per_day: Option<Bound>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceSummary {
    pub path: PathBuf,
    pub kind: RateInputKind,
    pub environment: String,
    pub exposure_s: f64,
    pub cut_s: f64,
    pub residual: u64,
    pub notes: Vec<String>,
}

/// Merges overlapping intervals.
fn union(mut v: Vec<(DateTime<Utc>, DateTime<Utc>)>) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    v.retain(|(a, b)| b > a);
    v.sort();
    let mut out: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn secs(v: &[(DateTime<Utc>, DateTime<Utc>)]) -> f64 {
    v.iter().map(|(a, b)| (*b - *a).num_milliseconds() as f64 / 1000.0).sum()
}

/// `spans` minus `cuts` (both merged first).
fn minus(
    spans: &[(DateTime<Utc>, DateTime<Utc>)],
    cuts: &[(DateTime<Utc>, DateTime<Utc>)],
) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let cuts = union(cuts.to_vec());
    let mut out = Vec::new();
    for &(a, b) in &union(spans.to_vec()) {
        let mut from = a;
        for &(c, d) in &cuts {
            if d <= from || c >= b {
                continue;
            }
            if c > from {
                out.push((from, c));
            }
            from = from.max(d);
        }
        if from < b {
            out.push((from, b));
        }
    }
    out
}

/// `t` in one of the intervals, each taken as (start, end]: a window starts at its
/// boundary round, which belongs to the window before (an election seen there is that
/// window's).
fn inside(t: DateTime<Utc>, v: &[(DateTime<Utc>, DateTime<Utc>)]) -> bool {
    v.iter().any(|(a, b)| *a < t && t <= *b)
}

/// Pools the sources: quiet exposure, residual elections by category, and the rate per
/// hour and per day with its two-sided interval at `confidence`. Pure.
pub fn pool(sources: &[RateInput], confidence: f64) -> Rate {
    let mut quiet_all = 0.0;
    let mut cut_all = 0.0;
    let mut elections: BTreeMap<String, u64> =
        RESIDUAL.iter().map(|c| ((*c).to_owned(), 0)).collect();
    let mut excluded: BTreeMap<String, u64> = BTreeMap::new();
    let mut summaries = Vec::new();
    for s in sources {
        // Each election caused by a disruption also cuts the time from its cause to it.
        let mut cuts: Vec<_> = s.cuts.iter().map(|(a, b, _)| (*a, *b)).collect();
        for e in &s.elections {
            if let (Some(c), "own disruption" | "kubernetes disruption") =
                (e.cause_at, category(e.cause))
            {
                cuts.push((c.min(e.at), e.at));
            }
        }
        let spans = union(s.spans.clone());
        let quiet = minus(&spans, &cuts);
        let (q, total) = (secs(&quiet), secs(&spans));
        let mut residual = 0;
        for e in &s.elections {
            let cat = category(e.cause);
            if !inside(e.at, &spans) {
                *excluded
                    .entry("outside the quiet windows (a sitting's disruption window)".to_owned())
                    .or_default() += e.terms;
            } else if !RESIDUAL.contains(&cat) {
                *excluded.entry(format!("caused by a {cat}")).or_default() += e.terms;
            } else if !inside(e.at, &quiet) {
                *excluded.entry("while a disruption was in progress".to_owned()).or_default() +=
                    e.terms;
            } else {
                *elections.entry(cat.to_owned()).or_default() += e.terms;
                residual += e.terms;
            }
        }
        quiet_all += q;
        cut_all += total - q;
        summaries.push(SourceSummary {
            path: s.path.clone(),
            kind: s.kind,
            environment: s.environment.clone(),
            exposure_s: q,
            cut_s: total - q,
            residual,
            notes: s.notes.clone(),
        });
    }
    let residual = elections.values().sum();
    let bound =
        |unit_s: f64| {
            crate::analysis::poisson::rate(residual, quiet_all / unit_s, confidence)
                .map(|i| Bound { rate: i.rate, lower: i.lower, upper: i.upper })
        };
    let from = sources.iter().flat_map(|s| s.spans.iter().map(|(a, _)| *a)).min();
    let to = sources.iter().flat_map(|s| s.spans.iter().map(|(_, b)| *b)).max();
    Rate {
        sources: summaries,
        exposure_s: quiet_all,
        cut_s: cut_all,
        elections,
        residual,
        excluded,
        confidence,
        from,
        to,
        per_hour: bound(3600.0),
        per_day: bound(86_400.0),
    }
}

/// Disruptions in progress from events.csv rows: from each disruption event to the
/// member's next `back` or `health_true`, at most [`CUT_CAP`].
pub fn cuts_from(rows: &[EventRow]) -> Vec<(DateTime<Utc>, DateTime<Utc>, String)> {
    let mut out = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if r.member.is_empty() || !starts_disruption(r.source, r.kind, &r.detail) {
            continue;
        }
        let cap = r.ts + CUT_CAP;
        let end = rows[i + 1..]
            .iter()
            .find(|e| {
                e.member == r.member
                    && (e.kind == EventKind::Back || e.kind == EventKind::HealthTrue)
                    && e.ts >= r.ts
            })
            .map_or(cap, |e| e.ts.min(cap));
        out.push((r.ts, end, format!("{} {} {}", r.source, r.kind, r.member)));
    }
    out
}

/// A sitting's source: its quiet windows, its elections, and the cuts of the events.csv
/// rows beside it (`None`: there was no events.csv, so nothing could be cut).
pub fn sitting_source(path: &Path, b: &Baseline, events: Option<&[EventRow]>) -> RateInput {
    let mut notes = Vec::new();
    if !b.is_complete() {
        notes.push(format!(
            "incomplete sitting ({}): its windows count as far as they ran",
            b.incomplete_reason.as_deref().unwrap_or("no reason")
        ));
    }
    let mut spans = Vec::new();
    let mut elections = Vec::new();
    for w in &b.windows {
        if w.name.is_quiet() {
            spans.push((w.start, w.end));
        }
        for d in &w.elections_detail {
            elections.push(Election {
                at: d.observed_at,
                terms: d.term_to.saturating_sub(d.term_from).max(1),
                cause: d.cause,
                cause_at: d.cause_event.as_ref().map(|e| e.ts),
            });
        }
        // A raft-term rise with no election attributed (a count without details): its
        // cause is not known.
        if w.elections_detail.is_empty() && w.elections.unwrap_or(0) > 0 {
            if w.name.is_quiet() {
                notes.push(format!(
                    "{}: {} election(s) without causes, counted as unexplained at the window's end",
                    w.name,
                    w.elections.unwrap_or(0)
                ));
            }
            elections.push(Election {
                at: w.end,
                terms: w.elections.unwrap_or(0),
                cause: Cause::Unexplained,
                cause_at: None,
            });
        }
    }
    let cuts = match events {
        Some(rows) => cuts_from(rows),
        None => {
            notes.push("no events.csv beside it: no Kubernetes disruption could be cut".to_owned());
            Vec::new()
        }
    };
    RateInput {
        path: path.to_owned(),
        kind: RateInputKind::Trial,
        environment: b.environment.description.clone(),
        spans,
        cuts,
        elections,
        notes,
    }
}

/// An `election` row as the rate needs it, from its columns (`None` without them).
pub fn election_of(r: &EventRow) -> Option<Election> {
    let c = r.election()?;
    Some(Election {
        at: r.ts,
        terms: c.term_to.saturating_sub(c.term_from).max(1),
        cause: c.cause,
        cause_at: c.cause_ts,
    })
}

/// The rate as rows of `report --format csv` (same columns, so the two concatenate).
pub fn as_measurements(r: &Rate) -> Vec<Measurement> {
    let env: Vec<&str> = r
        .sources
        .iter()
        .map(|s| s.environment.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let sources: Vec<String> = r
        .sources
        .iter()
        .map(|s| s.path.display().to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // Pooled over runs: no run id, cluster-wide (no member), no threshold.
    let base = Measurement {
        source: sources.join(" "),
        environment: env.join("; "),
        window: "quiet".to_owned(),
        label: "residual rate".to_owned(),
        window_start: r.from.unwrap_or_default(),
        window_end: r.to,
        window_s: Some(r.exposure_s),
        ..Default::default()
    };
    let row = |figure: &str, value: Option<f64>, unit: &'static str, note: String| Measurement {
        figure: figure.to_owned(),
        value,
        unit,
        note,
        ..base.clone()
    };
    let conf = format!("exact Poisson, {:.0}% two-sided", r.confidence * 100.0);
    let mut v = vec![
        row("quiet_exposure_s", Some(r.exposure_s), "s", String::new()),
        row("residual_elections", Some(r.residual as f64), "count", String::new()),
    ];
    for (c, n) in &r.elections {
        v.push(row(
            &format!("residual_elections{{cause={c}}}"),
            Some(*n as f64),
            "count",
            String::new(),
        ));
    }
    let b = r.per_day.as_ref();
    v.push(row("residual_rate_per_day", b.map(|b| b.rate), "per_day", String::new()));
    v.push(row("residual_rate_per_day_lower", b.map(|b| b.lower), "per_day", conf.clone()));
    v.push(row("residual_rate_per_day_upper", b.map(|b| b.upper), "per_day", conf));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).expect("ts")
    }

    fn src(
        spans: &[(i64, i64)],
        cuts: &[(i64, i64)],
        elections: &[(i64, Cause, Option<i64>)],
    ) -> RateInput {
        RateInput {
            path: "x".into(),
            kind: RateInputKind::Sample,
            environment: "test".into(),
            spans: spans.iter().map(|(a, b)| (t(*a), t(*b))).collect(),
            cuts: cuts.iter().map(|(a, b)| (t(*a), t(*b), "cut".to_owned())).collect(),
            elections: elections
                .iter()
                .map(|(at, c, ca)| Election {
                    at: t(*at),
                    terms: 1,
                    cause: *c,
                    cause_at: ca.map(t),
                })
                .collect(),
            notes: vec![],
        }
    }

    #[test]
    fn exposure_is_the_union_of_spans_minus_cuts() {
        let r = pool(&[src(&[(0, 100), (50, 200)], &[(150, 250), (10, 20)], &[])], 0.95);
        assert_eq!(r.exposure_s, 200.0 - 10.0 - 50.0);
        assert_eq!(r.cut_s, 60.0);
    }

    #[test]
    fn elections_are_residual_only_in_quiet_time_and_by_cause() {
        let s = src(
            &[(0, 1000)],
            &[(100, 200)],
            &[
                (50, Cause::Unexplained, None),
                (150, Cause::Stress, None),
                (300, Cause::OwnDisruption, Some(290)),
                (400, Cause::Restart, None),
                (500, Cause::Stress, None),
                (2000, Cause::Unexplained, None),
            ],
        );
        let r = pool(&[s], 0.95);
        assert_eq!(r.residual, 3);
        assert_eq!(r.elections["unexplained"], 1);
        assert_eq!(r.elections["node or pod events"], 1);
        assert_eq!(r.elections["stress"], 1);
        assert_eq!(r.excluded.values().sum::<u64>(), 3);
        // The own disruption cut 10 s (290 -> 300) on top of the 100 s cut.
        assert_eq!(r.exposure_s, 1000.0 - 100.0 - 10.0);
        let day = r.per_day.expect("rate");
        assert!((day.rate - 3.0 / (890.0 / 86_400.0)).abs() < 1e-6);
    }

    #[test]
    fn no_exposure_gives_no_rate() {
        let r = pool(&[src(&[], &[], &[])], 0.95);
        assert!(r.per_hour.is_none() && r.per_day.is_none());
    }

    #[test]
    fn a_disruption_is_cut_until_its_member_is_back() {
        let row = |s: i64, source: &str, member: &str, kind: &str| EventRow {
            ts: t(s),
            run_id: "r".into(),
            source: source.parse().expect("source"),
            member: member.into(),
            kind: kind.parse().expect("kind"),
            detail: String::new(),
            term_from: None,
            term_to: None,
            cause: None,
            cause_ts: None,
        };
        let rows = [
            row(10, "local", "m0", "sigterm_sent"),
            row(12, "leaderwatch", "m1", "back"),
            row(16, "leaderwatch", "m0", "back"),
            row(100, "kubernetes", "m2", "pod_deleting"),
        ];
        let cuts = cuts_from(&rows);
        assert_eq!(cuts.len(), 2);
        assert_eq!((cuts[0].0, cuts[0].1), (t(10), t(16)));
        assert_eq!(cuts[1].1, t(100) + CUT_CAP, "no back: capped");
    }

    #[test]
    fn an_election_at_a_window_boundary_belongs_to_the_window_before() {
        // at_rest (0, 60], disruption (60, 70] not quiet, settle (70, 100].
        let r = pool(
            &[src(
                &[(0, 60), (70, 100)],
                &[],
                &[(60, Cause::Stress, None), (70, Cause::Stress, None)],
            )],
            0.95,
        );
        assert_eq!(
            r.residual, 1,
            "the one at 60 ends at_rest; the one at 70 ends the disruption window"
        );
        assert_eq!(r.excluded.values().sum::<u64>(), 1);
    }
}
