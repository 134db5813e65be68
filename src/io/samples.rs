//! samples.csv read back into rounds, each with the window (`phase`) it was sampled in: what
//! `recount` replays through the analysis. The file keeps each member's Status and
//! `/health` answers whole, but of `/metrics` only a few counters, so the rounds come back
//! with `/metrics` skipped: what rests on the Status (terms, leaders, time without one)
//! can be counted again, the health figures cannot.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::io::InputError;
use crate::model::baseline::WindowName;
use crate::model::clock::Stamp;
use crate::model::member::MemberName;
use crate::model::observation::{Health, Observation, Part, Round, Silent, Status};

/// A part the row says failed (the file keeps the error in one column for the probe).
fn failed<T>(part: &str) -> Part<T> {
    Part::Failed { error: format!("{part}: failed"), ms: 0.0 }
}

/// The columns read, by name (the file's header says where each is).
const COLUMNS: [&str; 13] = [
    "ts",
    "round",
    "phase",
    "member",
    "endpoint",
    "reachable",
    "health",
    "health_reason",
    "member_id",
    "leader_id",
    "raft_term",
    "error",
    "age_ms",
];

/// `utc` on the replay's monotonic clock: `base` stands for the Unix epoch, so rounds and
/// events.csv rows laid with the same `base` compare as the run compared them, to the
/// millisecond the files keep.
pub fn stamp(base: Instant, utc: DateTime<Utc>) -> Stamp {
    let us = (utc - DateTime::UNIX_EPOCH).num_microseconds().unwrap_or(0).max(0);
    Stamp { utc, mono: base + Duration::from_micros(us as u64) }
}

/// The rounds of `path` in order, laid on the replay clock `base` ([`stamp`]): durations
/// between rounds come back to within a millisecond. A row that cannot be read is an
/// error naming its line: a recount of a damaged file would be a wrong figure, not a
/// partial one.
pub fn rounds(path: &Path, base: Instant) -> Result<Vec<(Round, WindowName)>, InputError> {
    let mut rdr = csv::Reader::from_path(path).map_err(|e| InputError::new(path, e))?;
    let header = rdr.headers().map_err(|e| InputError::new(path, e))?.clone();
    let mut at = [0usize; COLUMNS.len()];
    for (i, name) in COLUMNS.iter().enumerate() {
        at[i] = header
            .iter()
            .position(|c| c == *name)
            .ok_or_else(|| InputError::new(path, format!("no column {name:?} in the header")))?;
    }
    let [
        ts,
        round,
        phase,
        member,
        endpoint,
        reachable,
        health,
        reason,
        member_id,
        leader_id,
        term,
        error,
        age,
    ] = at;
    let mut by_round: BTreeMap<u64, (Round, WindowName)> = BTreeMap::new();
    for (line, rec) in rdr.records().enumerate() {
        let line = line + 2; // the header is line 1
        let bad = |what: &str| InputError::new(path, format!("line {line}: {what}"));
        let r = rec.map_err(|e| bad(&e.to_string()))?;
        let utc: DateTime<Utc> = r[ts].parse().map_err(|_| bad("ts is not a timestamp"))?;
        let stamp_of = |t: DateTime<Utc>| stamp(base, t);
        let index: u64 = r[round].parse().map_err(|_| bad("round is not a number"))?;
        let window: WindowName = r[phase].parse().map_err(|e: String| bad(&e))?;
        let stamp = stamp_of(utc);
        let silent = &r[reachable] == "false" && r[error].starts_with("silent:");
        // An answer's age runs from its probe's start to its round's start; a silent row's
        // is its time in flight.
        let age_ms: f64 = r[age].parse().unwrap_or(0.0);
        let (entry, _) = by_round.entry(index).or_insert_with(|| {
            (Round { index, started: stamp, observations: vec![], silent: vec![] }, window)
        });
        let name = MemberName(r[member].to_owned());
        if silent {
            entry.silent.push(Silent {
                member: name,
                endpoint: r[endpoint].to_owned(),
                since: stamp,
                in_flight: Duration::from_secs_f64(age_ms.max(0.0) / 1000.0),
            });
            continue;
        }
        let started = utc + chrono::Duration::microseconds((age_ms * 1000.0).round() as i64);
        entry.started = stamp_of(started);
        let health = match &r[health] {
            "true" | "false" => Part::Ok {
                value: Health { healthy: &r[health] == "true", reason: r[reason].to_owned() },
                ms: 0.0,
            },
            _ if r[error].contains("health:") => failed("health"),
            _ => Part::Skipped,
        };
        let hex = |c: usize| u64::from_str_radix(&r[c], 16).ok();
        let status = match (hex(member_id), hex(leader_id), r[term].parse::<u64>()) {
            (Some(m), Some(l), Ok(t)) => Part::Ok { value: Status::of(m, l, t), ms: 0.0 },
            _ => failed("status"),
        };
        entry.observations.push(Observation::new(
            name,
            r[endpoint].to_owned(),
            stamp,
            Part::Skipped,
            health,
            status,
        ));
    }
    Ok(by_round.into_values().collect())
}
