//! `leaderwatch recount`: a recorded run's election figures counted again from its raw
//! files (samples.csv, events.csv) with the rules of this version, the differences
//! listed, and with `write` the run's baseline.json or summary.json rewritten with them.
//! What is and is not recounted: src/analysis/recount.rs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Error;
use crate::analysis::recount::{self, Outcome, Recounted};
use crate::io::InputError;
use crate::io::json_edit::Step::{self, Index, Key};
use crate::model::baseline::{BASELINE, ElectionDetail, WindowName};
use crate::model::event::{Event, Source};
use crate::model::observation::Round;
use crate::model::summary::Summary;

/// The cause horizon of a run that recorded none (the default of this version).
const HORIZON: Duration = Duration::from_secs(30);

/// The runs under `paths`: run directories, found at any depth (data/ holds runs, and
/// folders of runs); each recounted, and rewritten when `write`.
pub fn recount(paths: &[PathBuf], write: bool) -> Result<Vec<Recounted>, Error> {
    let mut runs = Vec::new();
    for p in paths {
        let before = runs.len();
        find_runs(p, &mut runs).map_err(|e| InputError::new(p, e))?;
        if runs.len() == before {
            let why = "no run directory here (samples.csv with baseline.json or summary.json)";
            return Err(InputError::new(p, why).into());
        }
    }
    runs.iter().map(|d| one(d, write)).collect()
}

/// `dir` if it is a run, else the runs below it, in name order.
fn find_runs(dir: &Path, runs: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if is_run(dir) {
        runs.push(dir.to_owned());
        return Ok(());
    }
    let mut subs: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    subs.sort();
    for s in subs {
        find_runs(&s, runs)?;
    }
    Ok(())
}

fn is_run(d: &Path) -> bool {
    d.join("samples.csv").is_file()
        && (d.join(BASELINE).is_file() || d.join("summary.json").is_file())
}

fn one(dir: &Path, write: bool) -> Result<Recounted, Error> {
    let base = tokio::time::Instant::now();
    let rounds = crate::io::samples::rounds(&dir.join("samples.csv"), base)?;
    let events_path = dir.join("events.csv");
    let (rows, _) = crate::io::read::events(&events_path)?;
    let events: Vec<Event> = rows
        .into_iter()
        .map(|r| {
            let mut at = crate::io::samples::stamp(base, r.ts);
            // A probe's row is stamped with the probe's start, which comes just after its
            // round's start: the file keeps both to the same millisecond, the run knew
            // the order. A row of the round that saw an election is after it, as the run
            // counted it.
            if r.source == Source::Leaderwatch && !r.member.is_empty() {
                at.mono += Duration::from_micros(1);
            }
            Event::stamped(at, r.source, &r.member, r.kind, r.detail)
        })
        .collect();
    let baseline = dir.join(BASELINE);
    // Each recorded election with its place in the file.
    let (file, run_id, horizon, members, mut located) = if baseline.is_file() {
        let b = crate::io::read::baseline(&baseline)?;
        let horizon = b.cause_horizon_s.map_or(HORIZON, Duration::from_secs_f64);
        let mut located = Vec::new();
        for (wi, w) in b.windows.into_iter().enumerate() {
            for (di, d) in w.elections_detail.into_iter().enumerate() {
                let at = vec![Key("windows"), Index(wi), Key("elections_detail"), Index(di)];
                located.push((at, d));
            }
        }
        (baseline, b.run_id, horizon, members(&rounds), located)
    } else {
        let path = dir.join("summary.json");
        let text = std::fs::read_to_string(&path).map_err(|e| InputError::new(&path, e))?;
        let s: Summary = serde_json::from_str(&text).map_err(|e| InputError::new(&path, e))?;
        let horizon = if s.cause_horizon_s > 0.0 {
            Duration::from_secs_f64(s.cause_horizon_s)
        } else {
            HORIZON
        };
        let located = s
            .elections_detail
            .into_iter()
            .enumerate()
            .map(|(di, d)| (vec![Key("elections_detail"), Index(di)], d))
            .collect();
        (path, s.run_id, horizon, s.members.len(), located)
    };
    let counted: Vec<ElectionDetail> = recount::elections(&rounds, &events, members, horizon)
        .into_iter()
        .map(|(_, d)| d)
        .collect();
    let mut recorded: Vec<&mut ElectionDetail> = located.iter_mut().map(|(_, d)| d).collect();
    let outcome = recount::apply(&mut recorded, &counted);
    let written = write && !outcome.changes.is_empty();
    if written {
        let details: Vec<&ElectionDetail> = located.iter().map(|(_, d)| d).collect();
        append_revisions(&events_path, &run_id, &details, &outcome)?;
        rewrite(&file, &located, &outcome)?;
    }
    let rate_rewritten = written && rate_again(dir)?;
    Ok(Recounted { file, outcome, written, rate_rewritten })
}

/// The changed figures written into `file` where they stand, every other byte kept.
fn rewrite(
    file: &Path,
    located: &[(Vec<Step<'static>>, ElectionDetail)],
    outcome: &Outcome,
) -> Result<(), Error> {
    let mut text = std::fs::read_to_string(file).map_err(|e| InputError::new(file, e))?;
    for (at, d) in located {
        for c in outcome.changes.iter().filter(|c| c.terms == (d.term_from, d.term_to)) {
            let mut path = at.clone();
            path.push(Key(c.field));
            let edit = |v: &dyn erased::Json| v.replace_in(&text, &path);
            text = match c.field {
                "old_leader" => edit(&d.old_leader),
                "new_leader" => edit(&d.new_leader),
                "leaderless_s" => edit(&d.leaderless_s),
                "cause" => edit(&d.cause),
                "cause_event" => edit(&d.cause_event),
                other => Err(format!("recount changed {other:?}, which it does not write")),
            }
            .map_err(|e| InputError::new(file, e))?;
        }
    }
    crate::io::run_dir::write_atomic(file, text.as_bytes())?;
    Ok(())
}

/// A trial's member count: every member samples.csv names.
fn members(rounds: &[(Round, WindowName)]) -> usize {
    let mut names = std::collections::BTreeSet::new();
    for (r, _) in rounds {
        names.extend(r.observations.iter().map(|o| o.member.clone()));
        names.extend(r.silent.iter().map(|s| s.member.clone()));
    }
    names.len()
}

/// The run's rate.json, if it has one, computed again from the rewritten file with the
/// confidence and the source path it recorded: whether it changed (and was written).
fn rate_again(dir: &Path) -> Result<bool, Error> {
    let path = dir.join("rate.json");
    let Ok(old) = std::fs::read_to_string(&path) else { return Ok(false) };
    let v: serde_json::Value = serde_json::from_str(&old).map_err(|e| InputError::new(&path, e))?;
    let confidence = v["confidence"].as_f64().unwrap_or(0.95);
    let mut r = crate::ops::report::rate(&[dir.to_owned()], confidence)?;
    let recorded = v["sources"].as_array().cloned().unwrap_or_default();
    for (s, o) in r.sources.iter_mut().zip(recorded) {
        if let Some(p) = o["path"].as_str() {
            s.path = PathBuf::from(p);
        }
    }
    let mut new =
        serde_json::to_string_pretty(&r).map_err(|e| Error::Internal(format!("json: {e}")))?;
    new.push('\n');
    if new == old {
        return Ok(false);
    }
    crate::io::run_dir::write_atomic(&path, new.as_bytes())?;
    Ok(true)
}

/// One `election_revised` row for each election that changed, appended to events.csv
/// before the JSON is rewritten: a crash between the two leaves rows the JSON does not
/// say yet, and a second recount appends them again (readers take the last word, the same).
fn append_revisions(
    events: &Path,
    run_id: &str,
    details: &[&ElectionDetail],
    outcome: &Outcome,
) -> Result<(), Error> {
    let rows: Vec<Event> = details
        .iter()
        .filter(|d| outcome.changes.iter().any(|c| c.terms == (d.term_from, d.term_to)))
        .map(|d| recount::revised_row(d, &outcome.changes, crate::model::build::VERSION))
        .collect();
    crate::io::run_dir::append_to_closed_events(events, run_id, &rows)?;
    Ok(())
}

/// A field of any type, replaced in the text (each field has its own type).
mod erased {
    use crate::io::json_edit::{Step, replace};

    pub trait Json {
        fn replace_in(&self, text: &str, path: &[Step]) -> Result<String, String>;
    }

    impl<T: serde::Serialize> Json for T {
        fn replace_in(&self, text: &str, path: &[Step]) -> Result<String, String> {
            replace(text, path, self)
        }
    }
}
