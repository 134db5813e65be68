//! Pure counting over a window of rounds: no I/O, no clock. Three counts, because the
//! summed counter counts *observations*, not elections (docs/counting.md):
//!
//! - **raw sum**: Σ over members of `etcd_server_leader_changes_seen_total`, at the start
//!   (each member's first value in the window) and at the end (each member's last value);
//! - **reset-aware increase**: per member, Prometheus `increase()` without extrapolation;
//!   a drop, or a changed `process_start_time_seconds`, is a reset and the new value
//!   counts from zero;
//! - **elections**: highest raft term seen in the window minus the highest term of the
//!   first round that reported one;
//!
//! plus the **leader transitions** seen by polling.
//!
//! [`Window`] is a fold: it keeps O(members) state plus the transitions, so a multi-day
//! run does not grow with the number of rounds.

use std::collections::BTreeMap;

use crate::model::counts::{Counts, LeaderTransition, MemberCount, Point, RoundView};
use crate::model::member::MemberName;

#[derive(Debug, Clone, Default)]
struct MemberState {
    count: MemberCount,
    last_counter: Option<f64>,
    last_start_time: Option<f64>,
}

/// A window of rounds, folded one round at a time.
#[derive(Debug, Clone, Default)]
pub struct Window {
    members: BTreeMap<MemberName, MemberState>,
    first_term: Option<u64>,
    max_term: Option<u64>,
    last_leader: Option<u64>,
    transitions: Vec<LeaderTransition>,
    rounds: u64,
}

/// Start times closer than this are the same process (they are printed to 10 ms).
const SAME_START_EPSILON: f64 = 1e-3;

/// Why a member's counter is known to have restarted between two observations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reset {
    /// `process_start_time_seconds` changed: caught even when the value came back the same.
    Restarted,
    /// The counter went down.
    Dropped,
}

/// Did the process restart between two reads of `process_start_time_seconds`?
pub fn restarted(prev_start: Option<f64>, now_start: Option<f64>) -> bool {
    matches!((prev_start, now_start), (Some(a), Some(b)) if (a - b).abs() > SAME_START_EPSILON)
}

/// Did the counter reset between `(prev, prev_start)` and `(now, now_start)`?
pub fn reset_between(
    prev: f64,
    prev_start: Option<f64>,
    now: f64,
    now_start: Option<f64>,
) -> Option<Reset> {
    if restarted(prev_start, now_start) {
        Some(Reset::Restarted)
    } else if now < prev {
        Some(Reset::Dropped)
    } else {
        None
    }
}

/// The leader this round agrees on: the one reported with the highest raft term; ties
/// go to the id reported by more members, then to the smaller id (deterministic).
pub fn round_leader(points: &BTreeMap<MemberName, Point>) -> Option<u64> {
    let mut votes: BTreeMap<u64, (u64, usize)> = BTreeMap::new(); // leader -> (max term, count)
    for p in points.values() {
        if let Some(l) = p.leader_id.filter(|l| *l != 0) {
            let e = votes.entry(l).or_insert((0, 0));
            e.0 = e.0.max(p.raft_term.unwrap_or(0));
            e.1 += 1;
        }
    }
    votes
        .into_iter()
        .max_by(|(la, (ta, ca)), (lb, (tb, cb))| ta.cmp(tb).then(ca.cmp(cb)).then(lb.cmp(la)))
        .map(|(l, _)| l)
}

impl Window {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one round. Members may appear or vanish between rounds. Returns the elections
    /// it revealed: how far it raised the highest term seen (none for the first term).
    pub fn push(&mut self, r: &RoundView) -> u64 {
        self.rounds += 1;
        for (name, p) in &r.points {
            let st = self.members.entry(name.clone()).or_default();
            if let Some(v) = p.counter {
                match st.last_counter {
                    None => st.count.start = Some(v),
                    Some(prev) => {
                        if reset_between(prev, st.last_start_time, v, p.start_time).is_some() {
                            st.count.resets += 1;
                            st.count.increase += v;
                        } else {
                            st.count.increase += v - prev;
                        }
                    }
                }
                st.count.end = Some(v);
                st.last_counter = Some(v);
                if p.start_time.is_some() {
                    st.last_start_time = p.start_time;
                }
            }
        }
        let round_max = r.points.values().filter_map(|p| p.raft_term).max();
        let before = self.max_term;
        if let Some(t) = round_max {
            self.first_term.get_or_insert(t);
            self.max_term = Some(self.max_term.map_or(t, |m| m.max(t)));
        }
        if let Some(l) = round_leader(&r.points) {
            if let Some(prev) = self.last_leader.filter(|p| *p != l) {
                self.transitions.push(LeaderTransition {
                    round: r.round,
                    ts: r.ts,
                    from: format!("{prev:x}"),
                    to: format!("{l:x}"),
                });
            }
            self.last_leader = Some(l);
        }
        match (before, self.max_term) {
            (Some(a), Some(b)) => b - a,
            _ => 0,
        }
    }

    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// The next window, starting from where this one ends: each member's last value is
    /// its start, the highest term is the term baseline, the last leader is known. So
    /// adjacent windows add up to the whole run, even for a member that was not observed
    /// in the boundary round.
    pub fn continue_from(&self) -> Window {
        let members = self
            .members
            .iter()
            .filter(|(_, st)| st.last_counter.is_some())
            .map(|(n, st)| {
                let count = MemberCount {
                    start: st.last_counter,
                    end: st.last_counter,
                    increase: 0.0,
                    resets: 0,
                };
                (
                    n.clone(),
                    MemberState {
                        count,
                        last_counter: st.last_counter,
                        last_start_time: st.last_start_time,
                    },
                )
            })
            .collect();
        Window {
            members,
            first_term: self.max_term,
            max_term: self.max_term,
            last_leader: self.last_leader,
            transitions: Vec::new(),
            rounds: 0,
        }
    }

    /// How many leader transitions so far (a mark for [`Window::transitions_since`]).
    pub fn counts_transitions(&self) -> usize {
        self.transitions.len()
    }

    /// Transitions added after the mark.
    pub fn transitions_since(&self, mark: usize) -> &[LeaderTransition] {
        &self.transitions[mark.min(self.transitions.len())..]
    }

    /// The highest raft term seen (carried over by [`Window::continue_from`]).
    pub fn max_term(&self) -> Option<u64> {
        self.max_term
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        let per_member: BTreeMap<MemberName, MemberCount> =
            self.members.iter().map(|(n, s)| (n.clone(), s.count)).collect();
        let sum = |f: fn(&MemberCount) -> Option<f64>| {
            let vals: Vec<f64> = per_member.values().filter_map(f).collect();
            (!vals.is_empty()).then(|| vals.iter().sum())
        };
        Counts {
            raw_sum_start: sum(|c| c.start),
            raw_sum_end: sum(|c| c.end),
            reset_aware_increase: per_member.values().map(|c| c.increase).sum(),
            per_member,
            elections: match (self.first_term, self.max_term) {
                (Some(a), Some(b)) => Some(b - a),
                _ => None,
            },
            leader_transitions: self.transitions.clone(),
        }
    }
}

/// Counts over a slice of rounds (the fold, for callers that hold the rounds).
pub fn count(rounds: &[RoundView]) -> Counts {
    let mut w = Window::new();
    for r in rounds {
        let _ = w.push(r);
    }
    w.counts()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(round: u64, pts: &[(&str, Point)]) -> RoundView {
        RoundView {
            round,
            ts: chrono::DateTime::<chrono::Utc>::default(),
            points: pts.iter().map(|(n, p)| (MemberName((*n).to_owned()), *p)).collect(),
        }
    }

    fn pt(counter: f64, start: f64, term: u64, leader: u64) -> Point {
        Point {
            counter: Some(counter),
            start_time: Some(start),
            raft_term: Some(term),
            leader_id: Some(leader),
        }
    }

    /// Regression: a loopback measurement (docs/counting.md). Leader SIGKILLed, survivors
    /// 1 -> 2, term 2 -> 3, the killed member restarted at 1: raw sum 3 -> 5, ONE election.
    #[test]
    fn one_election_moves_the_raw_sum_by_two() {
        let rounds = vec![
            view(
                0,
                &[
                    ("a", pt(1.0, 10.0, 2, 0xa)),
                    ("b", pt(1.0, 10.0, 2, 0xa)),
                    ("c", pt(1.0, 10.0, 2, 0xa)),
                ],
            ),
            view(1, &[("b", pt(2.0, 10.0, 3, 0xb)), ("c", pt(2.0, 10.0, 3, 0xb))]),
            view(
                2,
                &[
                    ("a", pt(1.0, 20.0, 3, 0xb)),
                    ("b", pt(2.0, 10.0, 3, 0xb)),
                    ("c", pt(2.0, 10.0, 3, 0xb)),
                ],
            ),
        ];
        let c = count(&rounds);
        assert_eq!(c.raw_sum_start, Some(3.0));
        assert_eq!(c.raw_sum_end, Some(5.0));
        assert_eq!(c.elections, Some(1));
        // a restarted (start time changed, same value 1): counted from zero.
        assert_eq!(c.per_member[&MemberName("a".into())].resets, 1);
        assert_eq!(c.reset_aware_increase, 3.0);
        assert_eq!(c.leader_transitions.len(), 1);
        assert_eq!(
            (c.leader_transitions[0].from.as_str(), c.leader_transitions[0].to.as_str()),
            ("a", "b")
        );
    }

    #[test]
    fn leaderless_rounds_are_not_transitions() {
        let rounds = vec![
            view(0, &[("a", pt(1.0, 1.0, 2, 7))]),
            view(1, &[("a", pt(1.0, 1.0, 2, 0))]),
            view(2, &[("a", pt(2.0, 1.0, 2, 7))]),
        ];
        let c = count(&rounds);
        assert!(c.leader_transitions.is_empty());
        // A pre-vote that lost the leader and re-learned it: +1 without any term change.
        assert_eq!(c.reset_aware_increase, 1.0);
        assert_eq!(c.elections, Some(0));
    }

    #[test]
    fn empty_window_has_no_sums() {
        let c = count(&[]);
        assert_eq!((c.raw_sum_start, c.raw_sum_end, c.elections), (None, None, None));
    }
}
