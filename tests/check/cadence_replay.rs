//! The committed sittings' rounds replayed through the recovery tracker twice: as recorded
//! (`/health` read from every member in every round) and as the sampler now probes
//! (src/analysis/cadence.rs: a healthy member whose Status did not change keeps its last
//! `/health` answer for up to a second). No recovery instant may move by more than one
//! round. The replay as recorded must first give the instants the baseline says, or the
//! comparison would prove nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use leaderwatch::analysis::cadence::{Cadence, HealthAsk, Pages};
use leaderwatch::analysis::recovery::{Mark, RecoveryTracker, healthy_list};
use leaderwatch::model::clock::Stamp;
use leaderwatch::model::member::MemberName;
use leaderwatch::model::observation::{Health, Observation, Part, Round, Silent, Status};
use tokio::time::Instant;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One sitting's disruption as its baseline.json recorded it.
struct Recorded {
    target: MemberName,
    requested: DateTime<Utc>,
    marks: [Option<DateTime<Utc>>; 4],
}

const MARKS: [&str; 4] = ["member_lost_at", "member_back_at", "leader_elected_at", "healthy_at"];

fn recorded(dir: &Path) -> Option<Recorded> {
    let b: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("baseline.json")).ok()?).ok()?;
    let d = b.get("disruption")?;
    let at = |k: &str| d.get(k)?.as_str()?.parse::<DateTime<Utc>>().ok();
    Some(Recorded {
        target: MemberName(d.get("target")?.as_str()?.to_owned()),
        requested: at("requested_at")?,
        marks: MARKS.map(at),
    })
}

/// samples.csv back into rounds, the instants laid on a monotonic clock from the rows'
/// UTC times (millisecond precision, which is all the file keeps).
fn rounds(dir: &Path, base: Instant, t0: DateTime<Utc>) -> Vec<Round> {
    let mut rdr = csv::Reader::from_path(dir.join("samples.csv")).expect("samples.csv");
    let h = rdr.headers().expect("header").clone();
    let col = |name: &str| h.iter().position(|c| c == name).expect(name);
    let (ts, round, member, endpoint, health, reason, error) = (
        col("ts"),
        col("round"),
        col("member"),
        col("endpoint"),
        col("health"),
        col("health_reason"),
        col("error"),
    );
    let (age, health_ms) = (col("age_ms"), col("health_ms"));
    let (member_id, leader_id, term, applied) =
        (col("member_id"), col("leader_id"), col("raft_term"), col("raft_applied_index"));
    let mono = |t: DateTime<Utc>| {
        base + Duration::from_micros((t - t0).num_microseconds().unwrap_or(0).max(0) as u64)
    };
    let mut by_round: BTreeMap<u64, Round> = BTreeMap::new();
    for rec in rdr.records() {
        let r = rec.expect("row");
        let at: DateTime<Utc> = r[ts].parse().expect("ts");
        let stamp = Stamp { utc: at, mono: mono(at) };
        let index: u64 = r[round].parse().expect("round");
        let silent = r[error].starts_with("silent:");
        // An answer's age is from its probe's start to the round's; a silent row's is its
        // time in flight.
        let started = if silent {
            None
        } else {
            let age_us = (r[age].parse::<f64>().unwrap_or(0.0) * 1000.0).round() as i64;
            let utc = at + chrono::Duration::microseconds(age_us);
            Some(Stamp { utc, mono: mono(utc) })
        };
        let round = by_round.entry(index).or_insert_with(|| Round {
            index,
            started: started.unwrap_or(stamp),
            observations: vec![],
            silent: vec![],
        });
        if let Some(s) = started {
            round.started = s;
        }
        let name = MemberName(r[member].to_owned());
        if silent {
            round.silent.push(Silent {
                member: name,
                endpoint: r[endpoint].to_owned(),
                since: stamp,
                in_flight: Duration::ZERO,
            });
            continue;
        }
        fn failed<T>(part: &str) -> Part<T> {
            Part::Failed { error: format!("{part} failed"), ms: 1.0 }
        }
        let health = match &r[health] {
            // A run recorded with the cadence: an answer kept, not read (health_ms empty).
            "true" | "false" if r[health_ms].is_empty() => Part::Kept {
                value: Health { healthy: &r[health] == "true", reason: r[reason].to_owned() },
                age: Duration::ZERO,
            },
            "true" | "false" => Part::Ok {
                value: Health { healthy: &r[health] == "true", reason: r[reason].to_owned() },
                ms: 1.0,
            },
            _ if r[error].contains("health:") => failed("health"),
            _ => Part::Skipped,
        };
        let hex = |c: usize| u64::from_str_radix(&r[c], 16).ok();
        let status = match (hex(member_id), hex(leader_id), r[term].parse::<u64>()) {
            (Some(m), Some(l), Ok(t)) => {
                let mut s = Status::of(m, l, t);
                s.raft_applied_index = r[applied].parse().unwrap_or(0);
                Part::Ok { value: s, ms: 1.0 }
            }
            _ => failed("status"),
        };
        round.observations.push(Observation::new(
            name,
            r[endpoint].to_owned(),
            stamp,
            Part::Skipped,
            health,
            status,
        ));
    }
    by_round.into_values().collect()
}

/// The rounds as the sampler now probes them: a member's `/health` answer is replaced by
/// the kept one wherever its cadence would not have asked.
fn as_probed_now(rounds: &[Round]) -> (Vec<Round>, usize) {
    let mut cadence: BTreeMap<MemberName, Cadence> = BTreeMap::new();
    let mut kept = 0;
    let out = rounds
        .iter()
        .map(|r| {
            let mut r = r.clone();
            for o in &mut r.observations {
                let c = cadence.entry(o.member.clone()).or_default();
                if let HealthAsk::Keep(value, age) = c.plan(Pages::Every, o.at).health {
                    o.health = Part::Kept { value, age };
                    kept += 1;
                }
                c.observe(o);
            }
            r
        })
        .collect();
    (out, kept)
}

fn as_recorded_len(rounds: &[Round]) -> usize {
    rounds.iter().map(|r| r.observations.len() + r.silent.len()).max().unwrap_or(0)
}

/// The tracker's marks over `rounds`, as in the sitting: fed from the request on, the
/// disruptor's part over at the same round both replays get.
fn replay(rounds: &[Round], rec: &Recorded, requested: Stamp, done_at: usize) -> [Option<Mark>; 4] {
    let n = as_recorded_len(rounds);
    let term_before = rounds
        .iter()
        .filter(|r| r.started.mono < requested.mono)
        .flat_map(|r| r.observations.iter().filter_map(|o| o.status.ok().map(|s| s.raft_term)))
        .max();
    let mut t = RecoveryTracker::new(
        rec.target.clone(),
        n,
        requested,
        term_before,
        Duration::from_secs(3600),
    );
    for (i, r) in rounds.iter().enumerate() {
        if i == done_at {
            t.disruptor_done();
        }
        t.observe(r);
    }
    [t.lost, t.back, t.elected, t.healthy]
}

#[tokio::test(start_paused = true)]
async fn no_recovery_instant_of_a_committed_sitting_moves_by_more_than_one_round() {
    let base = Instant::now();
    let mut checked = 0;
    let mut dirs: Vec<_> = std::fs::read_dir(repo().join("data"))
        .expect("data/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("samples.csv").is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        let Some(rec) = recorded(&dir) else { continue };
        let Some(healthy_at) = rec.marks[3] else { continue };
        let name = dir.file_name().unwrap_or_default().to_string_lossy().to_string();
        let t0 = rec.requested - chrono::Duration::hours(2);
        let rounds = rounds(&dir, base, t0);
        let mono = |t: DateTime<Utc>| {
            base + Duration::from_micros((t - t0).num_microseconds().unwrap_or(0) as u64)
        };
        let requested = Stamp { utc: rec.requested, mono: mono(rec.requested) };
        // The disruptor's part ended at the latest in the round that was healthy.
        let healthy_round = rounds
            .iter()
            .position(|r| (r.started.utc - healthy_at).num_milliseconds().abs() <= 2)
            .unwrap_or_else(|| panic!("{name}: no round at healthy_at {healthy_at}"));
        let as_recorded = replay(&rounds, &rec, requested, healthy_round);
        for (k, (got, want)) in as_recorded.iter().zip(&rec.marks).enumerate() {
            let got = got.map(|m| m.at.utc);
            let close = match (got, want) {
                (Some(g), Some(w)) => (g - *w).num_milliseconds().abs() <= 2,
                (None, None) => true,
                _ => false,
            };
            assert!(
                close,
                "{name}: the replay as recorded gives {} {got:?}, the baseline {want:?}",
                MARKS[k]
            );
        }
        let (now, kept) = as_probed_now(&rounds);
        let as_now = replay(&now, &rec, requested, healthy_round);
        for (k, (a, b)) in as_recorded.iter().zip(&as_now).enumerate() {
            let (a, b) = (a.map(|m| m.round as i64), b.map(|m| m.round as i64));
            assert!(
                matches!((a, b), (Some(x), Some(y)) if (x - y).abs() <= 1) || a == b,
                "{name}: {} moved from round {a:?} to {b:?}",
                MARKS[k]
            );
        }
        // And no round from the request to the healthy one reads as the healthy list only
        // because an answer was kept.
        let n = as_recorded_len(&rounds);
        for (r, g) in rounds.iter().zip(&now).take(healthy_round + 1) {
            if r.started.mono < requested.mono {
                continue;
            }
            let (was, is) =
                (healthy_list(r, n, Some(&rec.target)), healthy_list(g, n, Some(&rec.target)));
            assert!(
                was.is_ok() || is.is_err(),
                "{name}: round {} reads healthy with kept answers, was not: {was:?}",
                r.index
            );
        }
        assert!(kept > 0, "{name}: the cadence kept no /health answer, so this compares nothing");
        let rounds_of = |m: &[Option<Mark>; 4]| m.map(|m| m.map(|m| m.round));
        eprintln!(
            "{name}: {kept} /health reads kept; lost, back, elected, healthy in rounds {:?} -> {:?}",
            rounds_of(&as_recorded),
            rounds_of(&as_now)
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} committed sittings with a recovery found");
}
