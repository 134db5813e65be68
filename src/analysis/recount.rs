//! A run's elections counted again from its own rounds and events, with today's rules,
//! and what that changes in the figures it recorded. Pure: `ops::recount` reads the files
//! and writes the result.
//!
//! What is recounted: each election's terms, old and new leader, time without a leader and
//! cause (with its row). What is kept as recorded: the instants (the file keeps rounds to
//! the millisecond), the canaries' unavailability (from canary.csv and locks.csv, not the
//! rounds) and everything the `/metrics` pages made (health; samples.csv keeps only a few
//! counters of them).

use std::time::Duration;

use crate::analysis::attribution::{CLOSE, Elections, OPEN};
use crate::model::baseline::{ElectionDetail, EventRef, WindowName};
use crate::model::clock;
use crate::model::event::{Event, EventKind};
use crate::model::observation::Round;

/// Two times without a leader closer than this are the same figure: the rounds come back
/// from samples.csv to the millisecond (a row's time and its age, at each end).
const SAME_S: f64 = 0.005;

/// Every election in `rounds` (each with the window it was sampled in), with its cause
/// found among `events` (events.csv's rows: the election rows themselves are left out).
pub fn elections(
    rounds: &[(Round, WindowName)],
    events: &[Event],
    members: usize,
    horizon: Duration,
) -> Vec<(WindowName, ElectionDetail)> {
    let mut el = Elections::new(members);
    for (r, w) in rounds {
        el.push(r, *w);
    }
    let Some(last) = rounds.last().map(|(r, _)| r.started) else { return Vec::new() };
    // As the engine keeps its evidence: rows about a member, and the routine operations'
    // bounds.
    let evidence: Vec<Event> = events
        .iter()
        .filter(|e| !matches!(e.kind, EventKind::Election | EventKind::ElectionRevised))
        .filter(|e| !e.member.is_empty() || OPEN.contains(&e.kind) || CLOSE.contains(&e.kind))
        .cloned()
        .collect();
    el.ready(&last, true)
        .into_iter()
        .map(|p| (p.window, el.detail(&p, &evidence, horizon)))
        .collect()
}

/// One run recounted.
#[derive(Debug)]
pub struct Recounted {
    /// The baseline.json or summary.json the figures are in.
    pub file: std::path::PathBuf,
    pub outcome: Outcome,
    /// The file was rewritten (asked for, and something changed).
    pub written: bool,
    /// The run's rate.json (`leaderwatch rate DIR -o json`, as lab/fault-runs.sh writes
    /// it) was written again from the recounted causes, and came out different.
    pub rate_rewritten: bool,
}

/// One recorded figure that the recount gives otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Which election: its terms, before and after.
    pub terms: (u64, u64),
    /// The baseline.json / summary.json key.
    pub field: &'static str,
    pub recorded: String,
    pub recounted: String,
}

/// What recounting gave beside what was recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub changes: Vec<Change>,
    /// Elections the recount finds that the run did not record, and the reverse: said,
    /// never written (a different election list is not a figure to patch).
    pub unmatched: Vec<String>,
}

/// Compares `recorded` with `recounted` election by election (by their terms) and, for
/// each figure the recount owns, takes the recounted one into `recorded`.
pub fn apply(recorded: &mut [&mut ElectionDetail], recounted: &[ElectionDetail]) -> Outcome {
    let mut out = Outcome::default();
    for r in recorded.iter_mut() {
        let terms = (r.term_from, r.term_to);
        let name = format!("terms {} -> {}", r.term_from, r.term_to);
        let Some(n) =
            recounted.iter().find(|n| (n.term_from, n.term_to) == (r.term_from, r.term_to))
        else {
            out.unmatched.push(format!("{name}: recorded, not found again in samples.csv"));
            continue;
        };
        let mut change = |field: &'static str, recorded: String, recounted: String| {
            out.changes.push(Change { terms, field, recorded, recounted })
        };
        if r.old_leader != n.old_leader {
            change("old_leader", show(&r.old_leader), show(&n.old_leader));
            r.old_leader = n.old_leader.clone();
        }
        if r.new_leader != n.new_leader {
            change("new_leader", show(&r.new_leader), show(&n.new_leader));
            r.new_leader = n.new_leader.clone();
        }
        let same = match (r.leaderless_s, n.leaderless_s) {
            (Some(a), Some(b)) => (a - b).abs() < SAME_S,
            (a, b) => a == b,
        };
        if !same {
            let s = |v: Option<f64>| v.map_or("none".to_owned(), |v| format!("{v:.3}"));
            change("leaderless_s", s(r.leaderless_s), s(n.leaderless_s));
            r.leaderless_s = n.leaderless_s.map(|v| (v * 1000.0).round() / 1000.0);
        }
        if r.cause != n.cause {
            change("cause", r.cause.as_str().to_owned(), n.cause.as_str().to_owned());
            r.cause = n.cause;
        }
        if !same_row(&r.cause_event, &n.cause_event) {
            change("cause_event", row(&r.cause_event), row(&n.cause_event));
            r.cause_event = n.cause_event.clone();
        }
    }
    for n in recounted {
        if !recorded.iter().any(|r| (r.term_from, r.term_to) == (n.term_from, n.term_to)) {
            out.unmatched.push(format!(
                "terms {} -> {}: found in samples.csv, not recorded",
                n.term_from, n.term_to
            ));
        }
    }
    out
}

fn show(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "none".to_owned())
}

/// The same events.csv row: its kind, member and time to the millisecond (what the file
/// keeps; the recorded reference has the nanoseconds the run saw).
fn same_row(a: &Option<EventRef>, b: &Option<EventRef>) -> bool {
    let ms = |e: &EventRef| e.ts.timestamp_millis();
    match (a, b) {
        (Some(a), Some(b)) => (a.kind, &a.member, ms(a)) == (b.kind, &b.member, ms(b)),
        (a, b) => a.is_none() && b.is_none(),
    }
}

fn row(e: &Option<EventRef>) -> String {
    e.as_ref().map_or("none".to_owned(), |e| format!("{} {} {}", e.kind, e.member, clock::ts(e.ts)))
}

/// The `election_revised` row of a recounted election `d` (its figures as they now are),
/// its detail first saying what changed: appended to the run's events.csv, so a reader of
/// the rows (the rate) takes the new figures and the original row stays as it was.
pub fn revised_row(d: &ElectionDetail, changes: &[Change], version: &str) -> Event {
    let mine: Vec<String> = changes
        .iter()
        .filter(|c| c.terms == (d.term_from, d.term_to))
        .map(|c| format!("{} {} -> {}", c.field, c.recorded, c.recounted))
        .collect();
    let at = clock::Stamp { utc: d.observed_at, mono: tokio::time::Instant::now() };
    let mut row = crate::analysis::engine::election_row(at, d);
    row.kind = EventKind::ElectionRevised;
    row.at = None;
    row.detail = format!("recounted by leaderwatch {version}: {}; {}", mine.join(", "), row.detail);
    row
}
