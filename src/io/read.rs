//! The readers: baseline.json and events.csv (this version's formats only, checked; one
//! reader for the rate and the report), and the rate's sources (a sitting with the
//! events.csv beside it, a `sample` run directory, a directory of runs). Errors name the
//! file: a bad input is one line and exit 2.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::analysis::rate::{cuts_from, election_of, pool, sitting_source};
use crate::io::InputError;
use crate::io::columns::EVENTS_HEADER;
use crate::io::run_dir::EVENTS;
use crate::model::baseline::{BASELINE, Baseline, SCHEMA_VERSION};
use crate::model::clock::ts;
use crate::model::event::Cause;
use crate::model::event::{EventKind, EventRow};
use crate::model::rate::{BaselineFile, Election, RateInput, RateInputKind, Residual};

/// Reads and checks one baseline.json: this version's schema only.
pub fn baseline(path: &Path) -> Result<Baseline, InputError> {
    let text = std::fs::read(path).map_err(|e| InputError::new(path, e))?;
    // The version first: another schema is named as such, not as its first missing field.
    #[derive(serde::Deserialize)]
    struct Version {
        schema_version: Option<u32>,
    }
    if let Ok(Version { schema_version: Some(v) }) = serde_json::from_slice(&text)
        && v != SCHEMA_VERSION
    {
        return Err(InputError::new(
            path,
            format!("schema_version {v} is not supported (this version reads {SCHEMA_VERSION})"),
        ));
    }
    serde_json::from_slice(&text)
        .map_err(|e| InputError::new(path, format!("not a leaderwatch baseline.json: {e}")))
}

/// A baseline.json and what the rate reads beside it (its events.csv), for the report.
pub fn baseline_file(path: &Path) -> Result<BaselineFile, InputError> {
    with_rate(path, baseline(path)?)
}

/// A baseline just written to `path`, with the rate's source read beside it.
pub fn with_rate(path: &Path, b: Baseline) -> Result<BaselineFile, InputError> {
    let rate = from_sitting(path, &b)?;
    Ok(BaselineFile { path: path.to_owned(), baseline: b, rate })
}

/// The baseline.json a sitting that ended with an error wrote at or after `since` (never
/// an older run's), to print it.
pub fn written_since(path: &Path, since: std::time::SystemTime) -> Option<BaselineFile> {
    let fresh = std::fs::metadata(path).and_then(|m| m.modified()).is_ok_and(|t| t >= since);
    fresh.then(|| baseline_file(path).ok()).flatten()
}

/// events.csv: its rows, by column name, and how many rows could not be read (skipped). A
/// file with another header than this version's is refused.
pub fn events(path: &Path) -> Result<(Vec<EventRow>, usize), InputError> {
    let mut r = csv::ReaderBuilder::new().from_path(path).map_err(|e| InputError::new(path, e))?;
    let header = r.headers().map_err(|e| InputError::new(path, e))?;
    // An empty file (created, no header yet) has no rows.
    if !header.is_empty() && header != EVENTS_HEADER.as_slice() {
        return Err(InputError::new(
            path,
            format!(
                "not this version's events.csv header ({:?})",
                header.iter().collect::<Vec<_>>().join(",")
            ),
        ));
    }
    let mut rows = Vec::new();
    let mut bad = 0;
    for row in r.deserialize::<EventRow>() {
        match row {
            Ok(row) => rows.push(row),
            Err(_) => bad += 1,
        }
    }
    Ok((rows, bad))
}

/// A sitting's quiet windows, elections and (from the events.csv beside it) cuts.
pub fn from_sitting(path: &Path, b: &Baseline) -> Result<RateInput, InputError> {
    let beside = path.parent().map(|d| d.join(EVENTS)).filter(|p| p.exists());
    let rows = match beside {
        Some(p) => Some(events(&p)?.0),
        None => None,
    };
    Ok(sitting_source(path, b, rows.as_deref()))
}

fn from_sample(dir: &Path) -> Result<RateInput, InputError> {
    let (rows, bad) = events(&dir.join(EVENTS))?;
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
        match r.kind {
            EventKind::RunStarted => {
                e.0 = Some(r.ts);
                if let Some(m) = r.detail.split("; members ").nth(1) {
                    endpoints = m.to_owned();
                }
            }
            EventKind::RunEnded => e.1 = Some(r.ts),
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
                    notes.push(format!(
                        "run {id} has no run_ended (killed?): counted to its last samples row, {}",
                        ts(t)
                    ));
                    t
                }
                _ => {
                    notes.push(format!(
                        "run {id} has no run_ended (killed?): counted to its last event, {}",
                        ts(*last)
                    ));
                    *last
                }
            }
        });
        spans.push((*start, end));
    }
    let mut elections = Vec::new();
    for r in last_word_on_each_election(&rows) {
        match election_of(r) {
            Some(e) => elections.push(e),
            None => {
                notes.push(format!(
                    "election row at {} has no election columns ({:?}): counted as 1, unexplained",
                    ts(r.ts),
                    r.detail
                ));
                elections.push(Election {
                    at: r.ts,
                    terms: 1,
                    cause: Cause::Unexplained,
                    cause_at: None,
                });
            }
        }
    }
    let environment =
        if endpoints.is_empty() { "sample".to_owned() } else { format!("sample of {endpoints}") };
    Ok(RateInput {
        path: dir.to_owned(),
        kind: RateInputKind::Sample,
        environment,
        spans,
        cuts: cuts_from(&rows),
        elections,
        notes,
    })
}

/// The `election` rows, each replaced by the last `election_revised` row for the same
/// terms (a recount's), in the order of the originals.
fn last_word_on_each_election(rows: &[EventRow]) -> Vec<&EventRow> {
    let terms = |r: &EventRow| r.election().map(|c| (c.term_from, c.term_to));
    let mut out: Vec<&EventRow> = rows.iter().filter(|r| r.kind == EventKind::Election).collect();
    for revised in rows.iter().filter(|r| r.kind == EventKind::ElectionRevised) {
        let Some(t) = terms(revised) else { continue };
        if let Some(slot) = out.iter_mut().find(|r| terms(r) == Some(t)) {
            *slot = revised;
        }
    }
    out
}

/// Reads every PATH (see [`source`]); a directory that is neither a sitting nor a sample
/// stands for the runs directly inside it (`rate data/`).
pub fn sources(paths: &[PathBuf]) -> Result<Vec<RateInput>, InputError> {
    let mut out = Vec::new();
    for p in paths {
        let is_run = |d: &Path| d.join(BASELINE).exists() || d.join(EVENTS).exists();
        if p.is_dir() && !is_run(p) {
            let mut runs: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| InputError::new(p, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|d| d.is_dir() && is_run(d))
                .collect();
            if !runs.is_empty() {
                runs.sort();
                for r in runs {
                    out.push(source(&r)?);
                }
                continue;
            }
        }
        out.push(source(p)?);
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
            let (live, day, _) = crate::io::rotate::parse_closed(&name)?;
            (live == crate::io::run_dir::SAMPLES && day >= since.date_naive())
                .then(|| (day, e.path()))
        })
        .collect();
    files.sort();
    let live = dir.join(crate::io::run_dir::SAMPLES);
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
        let of_run = |l: &&str| l.find(',').is_some_and(|i| l[i..].starts_with(&tag[..]));
        if let Some(t) = text
            .lines()
            .rev()
            .find(of_run)
            .and_then(|l| l.split(',').next())
            .and_then(|t| t.parse().ok())
        {
            return Some(t);
        }
    }
    None
}

/// Reads PATH: a baseline.json (a sitting), or a directory holding one, or a `sample`
/// run directory (events.csv without baseline.json).
pub fn source(path: &Path) -> Result<RateInput, InputError> {
    if path.is_dir() {
        if path.join(BASELINE).exists() {
            let p = path.join(BASELINE);
            return from_sitting(&p, &baseline(&p)?);
        }
        if path.join(EVENTS).exists() {
            return from_sample(path);
        }
        return Err(InputError::new(
            path,
            "neither a sitting (baseline.json) nor a sample run directory (events.csv), nor a directory of them",
        ));
    }
    if path.file_name().is_some_and(|n| n == "summary.json") {
        return from_sample(path.parent().unwrap_or(Path::new(".")));
    }
    from_sitting(path, &baseline(path)?)
}

/// The residual rate over every `sample` run in `dir` (its events.csv), for summary.json.
pub fn residual(dir: &Path, confidence: f64) -> Result<Residual, InputError> {
    let s = from_sample(dir)?;
    let runs = s.spans.len();
    let r = pool(std::slice::from_ref(&s), confidence);
    Ok(Residual {
        runs,
        exposure_s: r.exposure_s,
        cut_s: r.cut_s,
        residual: r.residual,
        by_cause: r.elections,
        confidence,
        per_hour: r.per_hour,
        per_day: r.per_day,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::run_dir::RunDir;
    use crate::model::event::{ElectionColumns, Event};

    /// Regression: the election row was written as a sentence and parsed back by hand, and
    /// the parser's only test used a hand-written string. Now a row written by the
    /// recorder's writer is read back by the one reader, column by column.
    #[test]
    fn an_election_row_written_by_the_recorder_reads_back_by_its_columns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let at: DateTime<Utc> = "2026-12-01T10:00:00.250Z".parse().expect("ts");
        let cause_ts: DateTime<Utc> = "2026-12-01T09:59:59.100Z".parse().expect("ts");
        let mut e = Event::new(
            at,
            crate::model::event::Source::Leaderwatch,
            "m0",
            EventKind::Election,
            "term 7 -> 9, leader m0 -> m1, leaderless 0.200 s; cause kubernetes (kubernetes pod_deleting 2026-12-01T09:59:59.100Z)",
        );
        e.election = Some(ElectionColumns {
            term_from: 7,
            term_to: 9,
            cause: Cause::Kubernetes,
            cause_ts: Some(cause_ts),
        });
        let mut run = RunDir::open(dir.path(), "run-1").expect("run dir");
        run.append_events(&[
            Event::new(
                at,
                crate::model::event::Source::Local,
                "m0",
                EventKind::SigtermSent,
                "a, \"quoted\" detail",
            ),
            e,
        ])
        .expect("append");
        drop(run);
        let (rows, bad) = events(&dir.path().join(EVENTS)).expect("read");
        assert_eq!((rows.len(), bad), (2, 0));
        assert_eq!(rows[0].detail, "a, \"quoted\" detail");
        assert_eq!(rows[0].election(), None, "not an election row");
        let el = crate::analysis::rate::election_of(&rows[1]).expect("election");
        assert_eq!(
            (el.at, el.terms, el.cause, el.cause_at),
            (at, 2, Cause::Kubernetes, Some(cause_ts))
        );
    }

    /// The header is checked before any row: an events.csv of another layout (here the one
    /// before the election columns) is one line naming the file, not rows skipped one by one.
    #[test]
    fn an_events_csv_with_another_header_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(EVENTS);
        std::fs::write(
            &path,
            "ts,run_id,source,member,kind,detail\n\
             2026-11-30T10:00:00.000Z,old,leaderwatch,,run_started,\"sample every 1s; members a=http://x\"\n",
        )
        .expect("write");
        let Err(e) = events(&path) else { panic!("an old header reads") };
        let msg = e.to_string();
        assert!(msg.starts_with(&path.display().to_string()) && !msg.contains('\n'), "{msg}");
        assert!(msg.contains("ts,run_id,source,member,kind,detail"), "{msg}");
    }

    #[test]
    fn a_baseline_of_another_schema_is_refused_by_its_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(BASELINE);
        std::fs::write(&path, r#"{"schema_version": 2, "windows": []}"#).expect("write");
        let Err(e) = baseline(&path) else { panic!("schema 2 reads") };
        let msg = e.to_string();
        assert!(msg.ends_with("schema_version 2 is not supported (this version reads 3)"), "{msg}");
    }
}
