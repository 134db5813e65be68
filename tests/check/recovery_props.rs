//! Property tests of the recovery state machine (src/analysis/recovery.rs) on synthetic rounds,
//! against a deliberately naive reference: what each step means, written out plainly.

use std::time::Duration;

use chrono::{DateTime, Utc};
use leaderwatch::analysis::recovery::{Change, RecoveryTracker};
use leaderwatch::model::clock::Stamp;
use leaderwatch::model::member::MemberName;
use leaderwatch::model::metrics::MemberMetrics;
use leaderwatch::model::observation::{Health, Observation, Part, Round, Silent, Status};
use proptest::prelude::*;
use tokio::time::Instant;

/// One member in one round.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Answers /health true and Status, `lag` entries behind the leader.
    Healthy { lag: u64 },
    /// Answers, /health 503.
    Unhealthy,
    /// Refuses every part.
    Down,
    /// Its probe is still in flight.
    Silent,
}

#[derive(Debug, Clone)]
struct Row {
    states: [State; 3],
    /// The leader every answering member reports (member ids are 1..=3; 0 = none).
    leader: u64,
    term: u64,
}

fn state() -> impl Strategy<Value = State> {
    prop_oneof![
        // Caught up, at the catch-up bound (16 entries: still caught up), one past it, far behind.
        6 => prop_oneof![Just(0u64), Just(16u64), Just(17u64), Just(100u64)].prop_map(|lag| State::Healthy { lag }),
        1 => Just(State::Unhealthy),
        1 => Just(State::Down),
        1 => Just(State::Silent),
    ]
}

fn rows() -> impl Strategy<Value = Vec<Row>> {
    proptest::collection::vec(([state(), state(), state()], 0u64..4, 0u64..2), 0..40).prop_map(
        |v| {
            let mut term = 2;
            v.into_iter()
                .map(|(states, leader, bump)| {
                    term += bump;
                    Row { states, leader, term }
                })
                .collect()
        },
    )
}

fn name(i: usize) -> MemberName {
    MemberName(format!("m{i}"))
}

fn stamp(base: Instant, ms: u64) -> Stamp {
    Stamp {
        utc: DateTime::<Utc>::default() + chrono::Duration::milliseconds(ms as i64),
        mono: base + Duration::from_millis(ms),
    }
}

fn failed<T>(why: &str) -> Part<T> {
    Part::Failed { error: why.to_owned(), ms: 1.0 }
}

fn round(index: u64, at: Stamp, row: &Row) -> Round {
    let mut observations = Vec::new();
    let mut silent = Vec::new();
    for (i, st) in row.states.iter().enumerate() {
        let status = |lag: u64| Part::Ok {
            value: Status {
                raft_index: 1000,
                raft_applied_index: 1000 - lag,
                ..Status::of(i as u64 + 1, row.leader, row.term)
            },
            ms: 1.0,
        };
        let metrics = Part::Ok { value: MemberMetrics::default(), ms: 1.0 };
        let (health, status) = match st {
            State::Healthy { lag } => (
                Part::Ok { value: Health { healthy: true, reason: String::new() }, ms: 1.0 },
                status(*lag),
            ),
            State::Unhealthy => (
                Part::Ok {
                    value: Health { healthy: false, reason: "RAFT NO LEADER".into() },
                    ms: 1.0,
                },
                status(0),
            ),
            State::Down => (failed("connection refused"), failed("connection refused")),
            State::Silent => {
                silent.push(Silent {
                    member: name(i),
                    endpoint: String::new(),
                    since: at,
                    in_flight: Duration::from_millis(STEP_MS),
                });
                continue;
            }
        };
        let metrics =
            if matches!(st, State::Down) { failed("connection refused") } else { metrics };
        observations.push(Observation::new(name(i), String::new(), at, metrics, health, status));
    }
    Round { index, started: at, observations, silent }
}

/// What the tracker should say, computed plainly from the rows.
#[derive(Debug, Default, PartialEq)]
struct Expected {
    lost: Option<u64>,
    back: Option<u64>,
    elected: Option<u64>,
    healthy: Option<u64>,
    timed_out: Option<u64>,
}

const STEP_MS: u64 = 100;

fn reference(rows: &[Row], done_at: usize, term_before: u64, timeout_ms: u64) -> Expected {
    let mut e = Expected::default();
    for (i, row) in rows.iter().enumerate() {
        let i64 = i as u64;
        if e.healthy.is_some() || e.timed_out.is_some() {
            break;
        }
        let target_ok = matches!(row.states[0], State::Healthy { .. });
        if e.lost.is_none() && !target_ok {
            e.lost = Some(i64);
        } else if e.lost.is_some() && e.back.is_none() && target_ok {
            e.back = Some(i64);
        }
        // The agreed leader: every answering member reports the same one here.
        let answering = row.states.iter().any(|s| !matches!(s, State::Down | State::Silent));
        if e.elected.is_none() && answering && row.leader != 0 && row.term > term_before {
            e.elected = Some(i64);
        }
        let all_healthy = row.states.iter().all(|s| matches!(s, State::Healthy { .. }));
        let applied = |i: usize| match row.states[i] {
            State::Healthy { lag } => 1000 - lag,
            _ => 0,
        };
        let caught_up = row.leader == 0
            || applied(0) + 16 >= applied(row.leader.saturating_sub(1) as usize % 3);
        let list = all_healthy && (1..=3).contains(&row.leader) && caught_up;
        let waiting = i < done_at || (e.lost.is_some() && e.back.is_none());
        if !waiting && list {
            e.healthy = Some(i64);
        } else if (i64 + 1) * STEP_MS > timeout_ms {
            e.timed_out = Some(i64);
        }
    }
    e
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_tracker_matches_the_plain_reference(rs in rows(), done_at in 0usize..40, timeout_steps in 2u64..40) {
        // Between two rounds, so that no float rounding decides the comparison.
        let timeout_ms = timeout_steps * STEP_MS + STEP_MS / 2;
        let base = Instant::now();
        let requested = stamp(base, 0);
        let term_before = 2;
        let mut t = RecoveryTracker::new(name(0), 3, requested, Some(term_before), Duration::from_millis(timeout_ms));
        let mut changes = Vec::new();
        for (i, row) in rs.iter().enumerate() {
            if i == done_at {
                t.disruptor_done();
            }
            let r = round(i as u64, stamp(base, (i as u64 + 1) * STEP_MS), row);
            changes.extend(t.observe(&r));
        }
        let got = Expected {
            lost: t.lost.map(|m| m.round),
            back: t.back.map(|m| m.round),
            elected: t.elected.map(|m| m.round),
            healthy: t.healthy.map(|m| m.round),
            timed_out: t.timed_out.map(|m| m.round),
        };
        prop_assert_eq!(got, reference(&rs, done_at, term_before, timeout_ms));
        // Each step is reported once, and nothing after the outcome.
        let ends = changes.iter().filter(|c| matches!(c, Change::HealthyList(_) | Change::TimedOut(_))).count();
        prop_assert!(ends <= 1);
        let lost = changes.iter().filter(|c| matches!(c, Change::MemberLost(_))).count();
        prop_assert!(lost <= 1);
        if let Some(end) = changes.iter().position(|c| matches!(c, Change::HealthyList(_) | Change::TimedOut(_))) {
            prop_assert_eq!(end, changes.len() - 1, "a change reported after the outcome: {:?}", changes);
        }
    }

    #[test]
    fn rounds_before_the_request_change_nothing(rs in rows()) {
        let base = Instant::now();
        let mut t = RecoveryTracker::new(name(0), 3, stamp(base, 100_000), Some(2), Duration::from_secs(1));
        t.disruptor_done();
        for (i, row) in rs.iter().enumerate() {
            prop_assert!(t.observe(&round(i as u64, stamp(base, i as u64 * STEP_MS), row)).is_empty());
        }
    }
}

/// A frozen member (sigstop) comes back without a restart: silent, then answering again.
#[test]
fn a_member_that_comes_back_without_a_restart_is_back_then_healthy() {
    let base = Instant::now();
    let mut t = RecoveryTracker::new(name(0), 3, stamp(base, 0), Some(2), Duration::from_secs(10));
    let ok = State::Healthy { lag: 0 };
    let frozen = Row { states: [State::Silent, ok, ok], leader: 2, term: 3 };
    let thawed = Row { states: [ok, ok, ok], leader: 2, term: 3 };
    assert_eq!(
        t.observe(&round(0, stamp(base, 100), &frozen)).len(),
        2,
        "lost, and a new leader at term 3"
    );
    t.disruptor_done();
    let c = t.observe(&round(1, stamp(base, 200), &thawed));
    assert!(matches!(c.as_slice(), [Change::MemberBack(_), Change::HealthyList(_)]), "{c:?}");
}
