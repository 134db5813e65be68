//! `leaderwatch rate PATH...`: the residual rate of elections, the number ADR-005 budgets.
//! Quiet exposure is pooled over sitting baselines (their at_rest and settle windows) and
//! `sample` run directories (every run in events.csv), minus the time a disruption of our
//! own or a known Kubernetes one was in progress; the elections in it are split by cause,
//! and the rate gets its exact Poisson interval ([`crate::poisson`]). Reading the sources
//! is [`load`]; pooling them is [`pool`], pure. The reading guide is docs/rate.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::attribution::OWN;
use crate::baseline::{Baseline, BASELINE};
use crate::record::EVENTS;
use crate::Error;

/// A disruption in progress is cut from this event to its member's next `back` or
/// `health_true`, or this long after it if none follows.
pub const CUT_CAP: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// Events that start a disruption: ours (attribution's list) and Kubernetes taking a pod
/// or node away (the watcher's kinds, and core/v1 Event reasons).
fn starts_disruption(source: &str, kind: &str, detail: &str) -> bool {
    OWN.contains(&kind) || kind == "disruption_requested" || crate::attribution::is_kubernetes_disruption(source, kind, detail)
}

/// One election as the rate needs it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Election {
    pub at: DateTime<Utc>,
    /// Raft-term delta (an election that took two terms counts 2, as everywhere else).
    pub terms: u64,
    pub cause: String,
    /// The cause's event, for own and Kubernetes disruptions (cut from there to `at`).
    pub cause_at: Option<DateTime<Utc>>,
}

/// One source, read: its exposure, its cuts and its elections.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Source {
    pub path: PathBuf,
    /// `sitting` or `sample`.
    pub kind: String,
    /// Where it ran (a sitting's environment; a sample's member endpoints).
    pub environment: String,
    /// The time it watched a cluster at rest: at_rest and settle windows, sample runs.
    pub spans: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// Disruptions in progress, each with the event that started it.
    pub cuts: Vec<(DateTime<Utc>, DateTime<Utc>, String)>,
    pub elections: Vec<Election>,
    /// What the reader had to assume (a run without its end, an unreadable row).
    pub notes: Vec<String>,
}

/// Causes, grouped as the rate reports them.
pub fn category(cause: &str) -> &'static str {
    match cause {
        "own_disruption" => "own disruption",
        "kubernetes" => "kubernetes disruption",
        "restart" | "unreachable" => "node or pod events",
        "stress" => "stress",
        _ => "unexplained",
    }
}

/// Categories that are residual (counted in the rate), in report order.
pub const RESIDUAL: [&str; 3] = ["unexplained", "node or pod events", "stress"];

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Bound {
    pub rate: f64,
    pub lower: f64,
    pub upper: f64,
}

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
    pub kind: String,
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
fn minus(spans: &[(DateTime<Utc>, DateTime<Utc>)], cuts: &[(DateTime<Utc>, DateTime<Utc>)]) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
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
pub fn pool(sources: &[Source], confidence: f64) -> Rate {
    let mut quiet_all = 0.0;
    let mut cut_all = 0.0;
    let mut elections: BTreeMap<String, u64> = RESIDUAL.iter().map(|c| ((*c).to_owned(), 0)).collect();
    let mut excluded: BTreeMap<String, u64> = BTreeMap::new();
    let mut summaries = Vec::new();
    for s in sources {
        // Each election caused by a disruption also cuts the time from its cause to it.
        let mut cuts: Vec<_> = s.cuts.iter().map(|(a, b, _)| (*a, *b)).collect();
        for e in &s.elections {
            if let (Some(c), "own disruption" | "kubernetes disruption") = (e.cause_at, category(&e.cause)) {
                cuts.push((c.min(e.at), e.at));
            }
        }
        let spans = union(s.spans.clone());
        let quiet = minus(&spans, &cuts);
        let (q, total) = (secs(&quiet), secs(&spans));
        let mut residual = 0;
        for e in &s.elections {
            let cat = category(&e.cause);
            if !inside(e.at, &spans) {
                *excluded.entry("outside the quiet windows (a sitting's disruption window)".to_owned()).or_default() += e.terms;
            } else if !RESIDUAL.contains(&cat) {
                *excluded.entry(format!("caused by a {cat}")).or_default() += e.terms;
            } else if !inside(e.at, &quiet) {
                *excluded.entry("while a disruption was in progress".to_owned()).or_default() += e.terms;
            } else {
                *elections.entry(cat.to_owned()).or_default() += e.terms;
                residual += e.terms;
            }
        }
        quiet_all += q;
        cut_all += total - q;
        summaries.push(SourceSummary { path: s.path.clone(), kind: s.kind.clone(), environment: s.environment.clone(), exposure_s: q, cut_s: total - q, residual, notes: s.notes.clone() });
    }
    let residual = elections.values().sum();
    let bound = |unit_s: f64| {
        crate::poisson::rate(residual, quiet_all / unit_s, confidence).map(|i| Bound { rate: i.rate, lower: i.lower, upper: i.upper })
    };
    let from = sources.iter().flat_map(|s| s.spans.iter().map(|(a, _)| *a)).min();
    let to = sources.iter().flat_map(|s| s.spans.iter().map(|(_, b)| *b)).max();
    Rate { sources: summaries, exposure_s: quiet_all, cut_s: cut_all, elections, residual, excluded, confidence, from, to, per_hour: bound(3600.0), per_day: bound(86_400.0) }
}

/// What `sample`'s summary.json says of the rate: every run in its directory pooled, so a
/// month of sampling reads as one figure.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Residual {
    /// Runs of `sample` in the directory (events.csv), this one included.
    pub runs: usize,
    pub exposure_s: f64,
    pub cut_s: f64,
    pub residual: u64,
    pub by_cause: BTreeMap<String, u64>,
    pub confidence: f64,
    pub per_hour: Option<Bound>,
    pub per_day: Option<Bound>,
}

impl Residual {
    pub fn of(dir: &Path, confidence: f64) -> Result<Residual, Error> {
        let s = from_sample(dir)?;
        let runs = s.spans.len();
        let r = pool(std::slice::from_ref(&s), confidence);
        Ok(Residual { runs, exposure_s: r.exposure_s, cut_s: r.cut_s, residual: r.residual, by_cause: r.elections, confidence, per_hour: r.per_hour, per_day: r.per_day })
    }

    /// One line for the log.
    pub fn line(&self) -> String {
        format!(
            "residual rate over {} run(s) in this directory, {} of quiet exposure: {} election(s), {}",
            self.runs,
            fmt_s(self.exposure_s),
            self.residual,
            fmt_bound(&self.per_day, "day")
        ) + &format!(" ({:.0}% exact Poisson interval)", self.confidence * 100.0)
    }
}

// ---------------------------------------------------------------------------------------
// Reading the sources
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Row {
    ts: DateTime<Utc>,
    run_id: String,
    source: String,
    member: String,
    kind: String,
    detail: String,
}

fn read_events(path: &Path) -> Result<(Vec<Row>, usize), Error> {
    let mut r = csv::ReaderBuilder::new().flexible(false).from_path(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
    let mut rows = Vec::new();
    let mut bad = 0;
    for rec in r.records() {
        let Ok(rec) = rec else {
            bad += 1;
            continue;
        };
        let get = |i: usize| rec.get(i).unwrap_or_default().to_owned();
        match get(0).parse::<DateTime<Utc>>() {
            Ok(ts) => rows.push(Row { ts, run_id: get(1), source: get(2), member: get(3), kind: get(4), detail: get(5) }),
            Err(_) => bad += 1,
        }
    }
    Ok((rows, bad))
}

/// Disruptions in progress from events.csv rows: from each disruption event to the
/// member's next `back` or `health_true`, at most [`CUT_CAP`].
fn cuts_from(rows: &[Row]) -> Vec<(DateTime<Utc>, DateTime<Utc>, String)> {
    let mut out = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if r.member.is_empty() || !starts_disruption(&r.source, &r.kind, &r.detail) {
            continue;
        }
        let cap = r.ts + CUT_CAP;
        let end = rows[i + 1..]
            .iter()
            .find(|e| e.member == r.member && (e.kind == "back" || e.kind == "health_true") && e.ts >= r.ts)
            .map_or(cap, |e| e.ts.min(cap));
        out.push((r.ts, end, format!("{} {} {}", r.source, r.kind, r.member)));
    }
    out
}

/// An `election` row's detail: "term A -> B, ...; cause C (source kind ts)".
fn parse_election(r: &Row) -> Option<Election> {
    let terms = r.detail.strip_prefix("term ")?.split(',').next()?;
    let (from, to) = terms.split_once(" -> ")?;
    let (from, to): (u64, u64) = (from.trim().parse().ok()?, to.trim().parse().ok()?);
    let cause_part = r.detail.rsplit_once("; cause ")?.1;
    let cause = cause_part.split_whitespace().next()?.to_owned();
    let cause_at = cause_part.split_once('(').and_then(|(_, p)| p.trim_end_matches(')').split_whitespace().last()).and_then(|t| t.parse().ok());
    Some(Election { at: r.ts, terms: to.saturating_sub(from).max(1), cause, cause_at })
}

/// A sitting's quiet windows, elections and (from the events.csv beside it) cuts.
pub fn from_sitting(path: &Path, b: &Baseline) -> Result<Source, Error> {
    let mut notes = Vec::new();
    if !b.is_complete() {
        notes.push(format!("incomplete sitting ({}): its windows count as far as they ran", b.incomplete_reason.as_deref().unwrap_or("no reason")));
    }
    let mut spans = Vec::new();
    let mut elections = Vec::new();
    for w in &b.windows {
        if w.name == "at_rest" || w.name == "settle" {
            spans.push((w.start, w.end));
        }
        for d in &w.elections_detail {
            elections.push(Election { at: d.observed_at, terms: d.term_to.saturating_sub(d.term_from).max(1), cause: d.cause.clone(), cause_at: d.cause_event.as_ref().map(|e| e.ts) });
        }
        // Schema 1-2 windows have counts but no details: their elections have no cause.
        if w.elections_detail.is_empty() && w.elections.unwrap_or(0) > 0 {
            if w.name == "at_rest" || w.name == "settle" {
                notes.push(format!("{}: {} election(s) without causes (schema {}), counted as unexplained at the window's end", w.name, w.elections.unwrap_or(0), b.schema_version));
            }
            elections.push(Election { at: w.end, terms: w.elections.unwrap_or(0), cause: "unexplained".to_owned(), cause_at: None });
        }
    }
    let events = path.parent().map(|d| d.join(EVENTS)).filter(|p| p.exists());
    let cuts = match events {
        Some(p) => cuts_from(&read_events(&p)?.0),
        None => {
            notes.push("no events.csv beside it: no Kubernetes disruption could be cut".to_owned());
            Vec::new()
        }
    };
    Ok(Source { path: path.to_owned(), kind: "sitting".to_owned(), environment: b.environment.description.clone(), spans, cuts, elections, notes })
}

fn from_sample(dir: &Path) -> Result<Source, Error> {
    let (rows, bad) = read_events(&dir.join(EVENTS))?;
    let mut notes = Vec::new();
    if bad > 0 {
        notes.push(format!("{bad} unreadable events.csv row(s) skipped"));
    }
    // Each run from run_started to run_ended; a run that crashed ends at its last event.
    type Run = (Option<DateTime<Utc>>, Option<DateTime<Utc>>, DateTime<Utc>); // started, ended, last event
    let mut runs: BTreeMap<&str, Run> = BTreeMap::new();
    let mut endpoints = String::new();
    for r in &rows {
        let e = runs.entry(&r.run_id).or_insert((None, None, r.ts));
        e.2 = e.2.max(r.ts);
        match r.kind.as_str() {
            "run_started" => {
                e.0 = Some(r.ts);
                if let Some(m) = r.detail.split("; members ").nth(1) {
                    endpoints = m.to_owned();
                }
            }
            "run_ended" => e.1 = Some(r.ts),
            _ => {}
        }
    }
    let mut spans = Vec::new();
    for (id, (start, end, last)) in &runs {
        // Rows of a sitting in the same directory have no run_started: not sample time.
        let Some(start) = start else { continue };
        let end = end.unwrap_or_else(|| {
            // Killed: its last samples.csv row (the live file, then closed days, newest
            // first) says how long it ran; at rest its last event can be hours earlier.
            match last_row(dir, id, *last) {
                Some(t) if t > *last => {
                    notes.push(format!("run {id} has no run_ended (killed?): counted to its last samples row, {}", crate::record::ts(t)));
                    t
                }
                _ => {
                    notes.push(format!("run {id} has no run_ended (killed?): counted to its last event, {}", crate::record::ts(*last)));
                    *last
                }
            }
        });
        spans.push((*start, end));
    }
    let mut elections = Vec::new();
    for r in rows.iter().filter(|r| r.kind == "election") {
        match parse_election(r) {
            Some(e) => elections.push(e),
            None => {
                notes.push(format!("election row at {} not understood ({:?}): counted as 1, unexplained", crate::record::ts(r.ts), r.detail));
                elections.push(Election { at: r.ts, terms: 1, cause: "unexplained".to_owned(), cause_at: None });
            }
        }
    }
    let environment = if endpoints.is_empty() { "sample".to_owned() } else { format!("sample of {endpoints}") };
    Ok(Source { path: dir.to_owned(), kind: "sample".to_owned(), environment, spans, cuts: cuts_from(&rows), elections, notes })
}

/// Reads every PATH (see [`load`]); a directory that is neither a sitting nor a sample
/// stands for the runs directly inside it (`rate data/`).
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<Source>, Error> {
    let mut out = Vec::new();
    for p in paths {
        let is_run = |d: &Path| d.join(BASELINE).exists() || d.join(EVENTS).exists();
        if p.is_dir() && !is_run(p) {
            let mut runs: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Error::Usage(format!("{}: {e}", p.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|d| d.is_dir() && is_run(d))
                .collect();
            if !runs.is_empty() {
                runs.sort();
                for r in runs {
                    out.push(load(&r)?);
                }
                continue;
            }
        }
        out.push(load(p)?);
    }
    // The same run named twice (data/ and data/run/) counts once.
    let mut seen = std::collections::HashSet::new();
    out.retain(|s| seen.insert(std::fs::canonicalize(&s.path).unwrap_or_else(|_| s.path.clone())));
    Ok(out)
}

/// The time of run `id`'s last row in `dir`'s samples files, looked for in the live
/// samples.csv and the closed days from `since`'s day on, newest first.
fn last_row(dir: &Path, id: &str, since: DateTime<Utc>) -> Option<DateTime<Utc>> {
    use std::io::Read;
    let mut files: Vec<(chrono::NaiveDate, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (live, day, _) = crate::rotate::parse_closed(&name)?;
            (live == crate::record::SAMPLES && day >= since.date_naive()).then(|| (day, e.path()))
        })
        .collect();
    files.sort();
    let live = dir.join(crate::record::SAMPLES);
    let tag = format!(",{id},");
    for path in std::iter::once(live).chain(files.into_iter().rev().map(|(_, p)| p)) {
        let Ok(f) = std::fs::File::open(&path) else { continue };
        let mut text = String::new();
        let read = if path.extension().is_some_and(|e| e == "gz") {
            flate2::read::GzDecoder::new(f).read_to_string(&mut text)
        } else {
            std::io::BufReader::new(f).read_to_string(&mut text)
        };
        if read.is_err() {
            continue;
        }
        // Rows start `ts,run_id,`; the last one of this run wins.
        if let Some(t) = text.lines().rev().find(|l| l.get(24..).is_some_and(|rest| rest.starts_with(&tag[..]))).and_then(|l| l.get(..24)).and_then(|t| t.parse().ok()) {
            return Some(t);
        }
    }
    None
}

/// Reads PATH: a baseline.json (a sitting), or a directory holding one, or a `sample`
/// run directory (events.csv without baseline.json).
pub fn load(path: &Path) -> Result<Source, Error> {
    if path.is_dir() {
        if path.join(BASELINE).exists() {
            let p = path.join(BASELINE);
            return from_sitting(&p, &crate::report::load(&p)?);
        }
        if path.join(EVENTS).exists() {
            return from_sample(path);
        }
        return Err(Error::Usage(format!("{}: neither a sitting (baseline.json) nor a sample run directory (events.csv), nor a directory of them", path.display())));
    }
    if path.file_name().is_some_and(|n| n == "summary.json") {
        return from_sample(path.parent().unwrap_or(Path::new(".")));
    }
    from_sitting(path, &crate::report::load(path)?)
}

fn fmt_s(s: f64) -> String {
    let d = std::time::Duration::from_secs(s.max(0.0).round() as u64);
    format!("{} ({s:.0} s)", humantime::format_duration(d))
}

fn fmt_bound(b: &Option<Bound>, unit: &str) -> String {
    match b {
        Some(b) => format!("{:.3} per {unit} ({:.3} - {:.3})", b.rate, b.lower, b.upper),
        None => "no quiet exposure".to_owned(),
    }
}

/// The table.
pub fn render(r: &Rate) -> String {
    let mut out = String::from("| source | kind | where | quiet exposure | cut | residual elections |\n|---|---|---|---|---|---|\n");
    for s in &r.sources {
        out.push_str(&format!("| {} | {} | {} | {} | {:.0} s | {} |\n", s.path.display(), s.kind, s.environment, fmt_s(s.exposure_s), s.cut_s, s.residual));
    }
    let split: Vec<String> = r.elections.iter().map(|(c, n)| format!("{c} {n}")).collect();
    out.push_str(&format!("\nquiet exposure: {} (cut: {:.0} s while a disruption was in progress)\n", fmt_s(r.exposure_s), r.cut_s));
    out.push_str(&format!("residual elections: {} ({})\n", r.residual, split.join(", ")));
    if !r.excluded.is_empty() {
        let ex: Vec<String> = r.excluded.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        out.push_str(&format!("not counted: {}\n", ex.join("; ")));
    }
    let pct = r.confidence * 100.0;
    out.push_str(&format!("rate, exact Poisson {pct:.0}% interval: {}; {}\n", fmt_bound(&r.per_hour, "hour"), fmt_bound(&r.per_day, "day")));
    for s in &r.sources {
        for n in &s.notes {
            out.push_str(&format!("note: {}: {n}\n", s.path.display()));
        }
    }
    out
}

/// The rate as rows of `report --format csv` (same columns, so the two concatenate).
pub fn measurements(r: &Rate) -> Vec<crate::report::Measurement> {
    let env: Vec<&str> = r.sources.iter().map(|s| s.environment.as_str()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let sources: Vec<String> = r.sources.iter().map(|s| s.path.display().to_string()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    // Pooled over runs: no run id, cluster-wide (no member), no threshold.
    let base = crate::report::Measurement {
        source: sources.join(" "),
        environment: env.join("; "),
        window: "quiet".to_owned(),
        label: "residual rate".to_owned(),
        window_start: r.from.unwrap_or_default(),
        window_end: r.to,
        window_s: Some(r.exposure_s),
        ..Default::default()
    };
    let row = |figure: &str, value: Option<f64>, unit: &'static str, note: String| crate::report::Measurement { figure: figure.to_owned(), value, unit, note, ..base.clone() };
    let conf = format!("exact Poisson, {:.0}% two-sided", r.confidence * 100.0);
    let mut v = vec![row("quiet_exposure_s", Some(r.exposure_s), "s", String::new()), row("residual_elections", Some(r.residual as f64), "count", String::new())];
    for (c, n) in &r.elections {
        v.push(row(&format!("residual_elections{{cause={c}}}"), Some(*n as f64), "count", String::new()));
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

    fn src(spans: &[(i64, i64)], cuts: &[(i64, i64)], elections: &[(i64, &str, Option<i64>)]) -> Source {
        Source {
            path: "x".into(),
            kind: "sample".into(),
            environment: "test".into(),
            spans: spans.iter().map(|(a, b)| (t(*a), t(*b))).collect(),
            cuts: cuts.iter().map(|(a, b)| (t(*a), t(*b), "cut".to_owned())).collect(),
            elections: elections.iter().map(|(at, c, ca)| Election { at: t(*at), terms: 1, cause: (*c).to_owned(), cause_at: ca.map(t) }).collect(),
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
            &[(50, "unexplained", None), (150, "stress", None), (300, "own_disruption", Some(290)), (400, "restart", None), (500, "stress", None), (2000, "unexplained", None)],
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
    fn an_election_row_parses_back() {
        let row = Row {
            ts: t(0),
            run_id: "r".into(),
            source: "leaderwatch".into(),
            member: "m0".into(),
            kind: "election".into(),
            detail: "term 2 -> 4, leader a -> b, leaderless 1.000 s; cause own_disruption (local sigkill_sent 2026-11-30T13:24:35.123Z)".into(),
        };
        let e = parse_election(&row).expect("parsed");
        assert_eq!((e.terms, e.cause.as_str()), (2, "own_disruption"));
        assert_eq!(e.cause_at, "2026-11-30T13:24:35.123Z".parse().ok());
        let plain = Row { detail: "term 5 -> 6, leader a -> unknown, leaderless unknown; cause unexplained".into(), ..row };
        assert_eq!(parse_election(&plain).map(|e| (e.terms, e.cause, e.cause_at)), Some((1, "unexplained".to_owned(), None)));
    }

    #[test]
    fn a_disruption_is_cut_until_its_member_is_back() {
        let row = |s: i64, source: &str, member: &str, kind: &str| Row { ts: t(s), run_id: "r".into(), source: source.into(), member: member.into(), kind: kind.into(), detail: String::new() };
        let rows = [row(10, "local", "m0", "sigterm_sent"), row(12, "leaderwatch", "m1", "back"), row(16, "leaderwatch", "m0", "back"), row(100, "kubernetes", "m2", "pod_deleting")];
        let cuts = cuts_from(&rows);
        assert_eq!(cuts.len(), 2);
        assert_eq!((cuts[0].0, cuts[0].1), (t(10), t(16)));
        assert_eq!(cuts[1].1, t(100) + CUT_CAP, "no back: capped");
    }

    #[test]
    fn an_election_at_a_window_boundary_belongs_to_the_window_before() {
        // at_rest (0, 60], disruption (60, 70] not quiet, settle (70, 100].
        let r = pool(&[src(&[(0, 60), (70, 100)], &[], &[(60, "stress", None), (70, "stress", None)])], 0.95);
        assert_eq!(r.residual, 1, "the one at 60 ends at_rest; the one at 70 ends the disruption window");
        assert_eq!(r.excluded.values().sum::<u64>(), 1);
    }
}
