//! Property tests of the pure counting (src/analysis/counts.rs) against its invariants and a
//! deliberately naive reference.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use leaderwatch::analysis::counts::{Window, count, round_leader};
use leaderwatch::model::counts::{Point, RoundView};
use leaderwatch::model::member::MemberName;
use proptest::prelude::*;

fn point() -> impl Strategy<Value = Option<Point>> {
    proptest::option::weighted(
        0.85,
        // A member whose /metrics lacks process_start_time_seconds: resets only by drops.
        (
            0u32..20,
            proptest::option::weighted(0.8, 1u32..4),
            proptest::option::weighted(0.9, 1u64..10),
            0u64..4,
        )
            .prop_map(|(c, st, term, leader)| Point {
                counter: Some(c as f64),
                start_time: st.map(f64::from),
                raft_term: term,
                leader_id: Some(leader),
            }),
    )
}

fn rounds() -> impl Strategy<Value = Vec<RoundView>> {
    (1usize..4).prop_flat_map(|members| {
        proptest::collection::vec(proptest::collection::vec(point(), members), 0..25).prop_map(
            |rows| {
                rows.into_iter()
                    .enumerate()
                    .map(|(i, row)| RoundView {
                        round: i as u64,
                        ts: DateTime::<Utc>::default(),
                        points: row
                            .into_iter()
                            .enumerate()
                            .filter_map(|(m, p)| p.map(|p| (MemberName(format!("m{m}")), p)))
                            .collect(),
                    })
                    .collect()
            },
        )
    })
}

/// Monotone counters from one process each: no resets possible.
fn monotone_rounds() -> impl Strategy<Value = Vec<RoundView>> {
    proptest::collection::vec(proptest::collection::vec(0u32..3, 3), 1..25).prop_map(|steps| {
        let mut acc = [1.0f64; 3];
        steps
            .into_iter()
            .enumerate()
            .map(|(i, inc)| {
                for m in 0..3 {
                    acc[m] += inc[m] as f64;
                }
                RoundView {
                    round: i as u64,
                    ts: DateTime::<Utc>::default(),
                    points: (0..3)
                        .map(|m| {
                            (
                                MemberName(format!("m{m}")),
                                Point {
                                    counter: Some(acc[m]),
                                    start_time: Some(5.0),
                                    raft_term: Some(2),
                                    leader_id: Some(1),
                                },
                            )
                        })
                        .collect(),
                }
            })
            .collect()
    })
}

/// What the scripted cluster did: who led in each term, and each election as (term before,
/// term after; two apart after a split vote).
#[derive(Debug, Clone)]
struct Truth {
    leader_of_term: BTreeMap<u64, u64>,
    elections: Vec<(u64, u64)>,
}

/// Three members; each round the leader may change (a new term, one or two up); each
/// member reports the current (leader, term), the previous one (it has not heard yet), or
/// nothing (not observed).
fn scripted() -> impl Strategy<Value = (Vec<RoundView>, Truth)> {
    proptest::collection::vec(
        (
            proptest::option::weighted(0.25, (1u64..4, 1u64..3)),
            proptest::collection::vec(0u8..10, 3),
        ),
        1..30,
    )
    .prop_map(|steps| {
        let (mut leader, mut term) = (1u64, 2u64);
        let mut prev = (leader, term);
        let mut truth =
            Truth { leader_of_term: BTreeMap::from([(term, leader)]), elections: vec![] };
        let mut rounds = Vec::new();
        for (i, (change, reports)) in steps.into_iter().enumerate() {
            if let Some((next, up)) = change.filter(|(next, _)| *next != leader) {
                prev = (leader, term);
                truth.elections.push((term, term + up));
                for t in term + 1..=term + up {
                    // A split vote's term had no leader; the next one's leader stands for it.
                    truth.leader_of_term.insert(t, next);
                }
                (leader, term) = (next, term + up);
            }
            let points = reports
                .into_iter()
                .enumerate()
                .filter_map(|(m, r)| {
                    let (l, t) = match r {
                        0..=6 => (leader, term),
                        7 | 8 => prev,
                        _ => return None,
                    };
                    Some((
                        MemberName(format!("m{m}")),
                        Point {
                            counter: Some(1.0),
                            start_time: Some(1.0),
                            raft_term: Some(t),
                            leader_id: Some(l),
                        },
                    ))
                })
                .collect();
            rounds.push(RoundView { round: i as u64, ts: DateTime::<Utc>::default(), points });
        }
        (rounds, truth)
    })
}

/// The reference: per member, walk its observed (value, start) pairs. A read without a
/// start time (the page lacked it) keeps the last one known, so a restart across it is
/// still a restart.
fn naive_increase(rounds: &[RoundView]) -> BTreeMap<MemberName, (f64, u32)> {
    let mut series: BTreeMap<MemberName, Vec<(f64, Option<f64>)>> = BTreeMap::new();
    for r in rounds {
        for (n, p) in &r.points {
            if let Some(c) = p.counter {
                series.entry(n.clone()).or_default().push((c, p.start_time));
            }
        }
    }
    series
        .into_iter()
        .map(|(n, s)| {
            let mut inc = 0.0;
            let mut resets = 0;
            let mut known = s.first().and_then(|(_, st)| *st);
            for w in s.windows(2) {
                let ((a, _), (b, sb)) = (w[0], w[1]);
                let restarted = matches!((known, sb), (Some(x), Some(y)) if x != y);
                known = sb.or(known);
                if b < a || restarted {
                    resets += 1;
                    inc += b;
                } else {
                    inc += b - a;
                }
            }
            (n, (inc, resets))
        })
        .collect()
}

proptest! {
    #[test]
    fn matches_the_naive_reference(rs in rounds()) {
        let c = count(&rs);
        let naive = naive_increase(&rs);
        for (n, (inc, resets)) in &naive {
            let m = &c.per_member[n];
            prop_assert_eq!(m.increase, *inc, "member {}", n);
            prop_assert_eq!(m.resets, *resets, "member {}", n);
        }
        prop_assert_eq!(c.reset_aware_increase, naive.values().map(|v| v.0).sum::<f64>());
    }

    #[test]
    fn increase_is_never_negative_and_never_below_the_net_change(rs in rounds()) {
        let c = count(&rs);
        for m in c.per_member.values() {
            prop_assert!(m.increase >= 0.0);
            if let (Some(s), Some(e)) = (m.start, m.end) {
                prop_assert!(m.increase >= e - s, "increase {} < end-start {}", m.increase, e - s);
            }
        }
    }

    #[test]
    fn raw_sums_are_the_sums_of_member_first_and_last_values(rs in rounds()) {
        let c = count(&rs);
        let starts: Vec<f64> = c.per_member.values().filter_map(|m| m.start).collect();
        let ends: Vec<f64> = c.per_member.values().filter_map(|m| m.end).collect();
        prop_assert_eq!(c.raw_sum_start, (!starts.is_empty()).then(|| starts.iter().sum::<f64>()));
        prop_assert_eq!(c.raw_sum_end, (!ends.is_empty()).then(|| ends.iter().sum::<f64>()));
    }

    #[test]
    fn without_restarts_increase_equals_the_raw_sum_delta(rs in monotone_rounds()) {
        let c = count(&rs);
        prop_assert!(c.per_member.values().all(|m| m.resets == 0));
        let delta = c.raw_sum_end.unwrap_or(0.0) - c.raw_sum_start.unwrap_or(0.0);
        prop_assert_eq!(c.reset_aware_increase, delta);
        prop_assert_eq!(c.elections, Some(0));
    }

    #[test]
    fn increase_is_additive_over_adjacent_windows(rs in rounds(), cut in 0usize..25) {
        prop_assume!(!rs.is_empty());
        let k = cut % rs.len();
        let whole = count(&rs);
        let left = count(&rs[..=k]);
        let right = count(&rs[k..]);
        // Only members observed in the boundary round split cleanly there, and only if that
        // read carries what the left part knew: a start time, unless none came before (a
        // fresh count of the right part cannot know an earlier one).
        for (n, w) in &whole.per_member {
            let at = rs[k].points.get(n);
            let known_before = rs[..k].iter().any(|r| r.points.get(n).is_some_and(|p| p.counter.is_some() && p.start_time.is_some()));
            if at.and_then(|p| p.counter).is_some() && (at.and_then(|p| p.start_time).is_some() || !known_before) {
                let l = left.per_member.get(n).map_or(0.0, |m| m.increase);
                let r = right.per_member.get(n).map_or(0.0, |m| m.increase);
                prop_assert_eq!(w.increase, l + r, "member {}", n);
            }
        }
    }

    /// Against a cluster's own history, not the code's formula: the script says which
    /// member led in each term and how many terms each election took; members report the
    /// current state, a stale one (the leader of an earlier term), or nothing.
    #[test]
    fn elections_and_transitions_follow_the_scripted_cluster(script in scripted()) {
        let (rounds, truth) = script;
        let c = count(&rounds);
        // Leaders in order of the highest term anyone reported, each round: from the script.
        let mut seen: Vec<u64> = rounds.iter().filter_map(|r| r.points.values().filter_map(|p| p.raft_term).max()).map(|t| truth.leader_of_term[&t]).collect();
        seen.dedup();
        prop_assert_eq!(c.leader_transitions.len(), seen.len().saturating_sub(1), "{:?}", truth);
        let first = rounds.iter().find_map(|r| r.points.values().filter_map(|p| p.raft_term).max());
        let top = rounds.iter().filter_map(|r| r.points.values().filter_map(|p| p.raft_term).max()).max();
        // The elections the script held between the first state seen and the last one.
        let held: u64 = truth.elections.iter().filter(|(from, to)| first.is_some_and(|f| *from >= f) && top.is_some_and(|t| *to <= t)).map(|(from, to)| to - from).sum();
        prop_assert_eq!(c.elections, first.map(|_| held), "{:?}", truth);
    }

    #[test]
    fn elections_are_the_term_delta(rs in rounds()) {
        let c = count(&rs);
        let per_round: Vec<u64> = rs.iter().filter_map(|r| r.points.values().filter_map(|p| p.raft_term).max()).collect();
        let want = per_round.first().map(|f| per_round.iter().max().copied().unwrap_or(*f) - f);
        prop_assert_eq!(c.elections, want);
    }

    #[test]
    fn transitions_are_the_changes_of_the_round_leader(rs in rounds()) {
        let c = count(&rs);
        let mut seq: Vec<u64> = rs.iter().filter_map(|r| round_leader(&r.points)).collect();
        seq.dedup();
        prop_assert_eq!(c.leader_transitions.len(), seq.len().saturating_sub(1));
        prop_assert!(c.leader_transitions.len() <= rs.len().saturating_sub(1));
    }

    /// Windows tile the run: each continues from the previous one's state, so every
    /// member's increase, the resets, the elections and the transitions add up to the
    /// whole run's, for members missing from the boundary round too; so do the elections
    /// each round reveals (what the exporter is handed).
    #[test]
    fn continued_windows_add_up_to_the_whole_run(rs in rounds(), a in 0usize..25, b in 0usize..25) {
        let n = rs.len();
        let (a, b) = if n == 0 { (0, 0) } else { let (x, y) = (a % (n + 1), b % (n + 1)); (x.min(y), x.max(y)) };
        let whole = count(&rs);
        // What each round hands the exporter: its own elections, across the boundaries.
        let mut per_round = 0u64;
        let mut w1 = Window::new();
        rs[..a].iter().for_each(|r| per_round += w1.push(r));
        let mut w2 = w1.continue_from();
        rs[a..b].iter().for_each(|r| per_round += w2.push(r));
        let mut w3 = w2.continue_from();
        rs[b..].iter().for_each(|r| per_round += w3.push(r));
        prop_assert_eq!(whole.elections.unwrap_or(0), per_round);
        let parts = [w1.counts(), w2.counts(), w3.counts()];
        prop_assert_eq!(w1.rounds() + w2.rounds() + w3.rounds(), n as u64);
        for (name, w) in &whole.per_member {
            let sum: f64 = parts.iter().map(|c| c.per_member.get(name).map_or(0.0, |m| m.increase)).sum();
            prop_assert!((w.increase - sum).abs() < 1e-9, "member {}: whole {} vs windows {}", name, w.increase, sum);
            let resets: u32 = parts.iter().map(|c| c.per_member.get(name).map_or(0, |m| m.resets)).sum();
            prop_assert_eq!(w.resets, resets);
        }
        let elections: u64 = parts.iter().filter_map(|c| c.elections).sum();
        prop_assert_eq!(whole.elections.unwrap_or(0), elections);
        let transitions: usize = parts.iter().map(|c| c.leader_transitions.len()).sum();
        prop_assert_eq!(whole.leader_transitions.len(), transitions);
    }
}
