//! The recovery after one disruption, as a pure state machine: fed one [`Round`] at a time
//! (and told when the disruptor's own part is over), it says what changed: the target lost,
//! back, a new leader elected, the healthy list, or the timeout. No I/O and no clock: the
//! time comes in with the rounds. Also the one definition of the "healthy N-member
//! endpoint list", and target resolution.

use std::str::FromStr;
use std::time::Duration;

use crate::analysis::counts::round_leader;
use crate::model::clock::Stamp;
use crate::model::member::MemberName;
use crate::model::observation::{Observation, Round};

/// How far (in raft entries) the disrupted member's applied index may trail the leader's
/// and still count as caught up: at rest the cluster applies almost nothing.
pub const CATCH_UP_BOUND: u64 = 16;

/// Which member to disrupt, resolved from live status at the moment of disruption.
/// Written and read as `leader`, `follower` or the member's name (a flag's value, the
/// Job's arguments, a run directory's name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Leader,
    Follower,
    Name(MemberName),
}

impl FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "leader" => Ok(Target::Leader),
            "follower" => Ok(Target::Follower),
            "" => Err("must be leader, follower or a member name".to_owned()),
            name => Ok(Target::Name(MemberName(name.to_owned()))),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Leader => f.write_str("leader"),
            Target::Follower => f.write_str("follower"),
            Target::Name(n) => write!(f, "{n}"),
        }
    }
}

/// The member reports itself as leader (Status RPC: its id is its leader id).
fn self_leader(o: &Observation) -> bool {
    o.status.ok().is_some_and(|s| s.leader_id != 0 && s.leader_id == s.member_id)
}

/// Picks the target from one round. Returns the member and whether it was the leader.
pub fn resolve_target(target: &Target, round: &Round) -> Result<(MemberName, bool), String> {
    let leaders: Vec<&Observation> = round.observations.iter().filter(|o| self_leader(o)).collect();
    let leader = match leaders.as_slice() {
        [one] => Some(one.member.clone()),
        _ => None,
    };
    match target {
        Target::Leader => leader
            .map(|l| (l, true))
            .ok_or_else(|| format!("no single leader in round {}", round.index)),
        Target::Follower => {
            let l = leader.ok_or_else(|| format!("no single leader in round {}", round.index))?;
            round
                .observations
                .iter()
                .find(|o| o.member != l && o.health.ok().is_some_and(|h| h.healthy))
                .map(|o| (o.member.clone(), false))
                .ok_or_else(|| format!("no healthy follower in round {}", round.index))
        }
        Target::Name(n) => {
            let o = round
                .observation(n)
                .ok_or_else(|| format!("{n}: no answer from it in round {}", round.index))?;
            Ok((n.clone(), self_leader(o)))
        }
    }
}

/// The healthy N-member endpoint list, defined once: every member answers `/health` true
/// and the Status RPC in this round (a silent member does not); all report the same,
/// non-zero leader id; exactly one says it is that leader; and `caught_up` (the disrupted
/// member) has applied within [`CATCH_UP_BOUND`] entries of the leader. `Err` says what
/// is missing.
pub fn healthy_list(
    round: &Round,
    members: usize,
    caught_up: Option<&MemberName>,
) -> Result<(), String> {
    if let Some(s) = round.silent.first() {
        return Err(format!("{} silent (no answer within the round)", s.member));
    }
    if round.observations.len() != members {
        return Err(format!("{} of {members} members answered", round.observations.len()));
    }
    for o in &round.observations {
        match (o.health.ok(), o.status.ok()) {
            (Some(h), Some(_)) if h.healthy => {}
            (Some(h), _) if !h.healthy => {
                return Err(format!("{} unhealthy: {}", o.member, h.reason));
            }
            _ => return Err(format!("{} not answering: {}", o.member, o.error_summary())),
        }
    }
    let statuses: Vec<_> =
        round.observations.iter().filter_map(|o| o.status.ok().map(|s| (o, s))).collect();
    let Some(leader_id) = statuses.first().map(|(_, s)| s.leader_id) else {
        return Err("no member to check".to_owned());
    };
    if leader_id == 0 || statuses.iter().any(|(_, s)| s.leader_id != leader_id) {
        return Err("members disagree on the leader".to_owned());
    }
    let leaders: Vec<_> = statuses.iter().filter(|(_, s)| s.member_id == leader_id).collect();
    let [(_, leader)] = leaders.as_slice() else {
        return Err(format!("{} members claim to be leader {leader_id:x}", leaders.len()));
    };
    if let Some(name) = caught_up
        && let Some((_, s)) = statuses.iter().find(|(o, _)| &o.member == name)
        && s.raft_applied_index + CATCH_UP_BOUND < leader.raft_applied_index
    {
        return Err(format!(
            "{name} applied {} of the leader's {}",
            s.raft_applied_index, leader.raft_applied_index
        ));
    }
    Ok(())
}

/// The member answered this round, reachable and healthy.
pub fn member_ok(round: &Round, name: &MemberName) -> bool {
    round
        .observation(name)
        .is_some_and(|o| o.reachable() && o.health.ok().is_some_and(|h| h.healthy))
}

/// The highest raft term any member reported in this round.
pub fn max_term(round: &Round) -> Option<u64> {
    round.observations.iter().filter_map(|o| o.status.ok().map(|s| s.raft_term)).max()
}

/// A round that marked a step of the recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub round: u64,
    pub at: Stamp,
}

impl Mark {
    fn of(r: &Round) -> Self {
        Mark { round: r.index, at: r.started }
    }
}

/// What one round changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    MemberLost(Mark),
    MemberBack(Mark),
    /// The agreed leader of this round has a higher term than before the request.
    LeaderElected {
        at: Mark,
        leader: u64,
        term: u64,
    },
    HealthyList(Mark),
    TimedOut(Mark),
}

/// How the recovery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Healthy,
    TimedOut,
}

/// The recovery state machine for one disruption of `target`.
#[derive(Debug, Clone)]
pub struct RecoveryTracker {
    target: MemberName,
    members: usize,
    requested: Stamp,
    timeout: Duration,
    /// Highest term seen before the request: a higher one means an election.
    term_before: Option<u64>,
    disruptor_done: bool,
    pub lost: Option<Mark>,
    pub back: Option<Mark>,
    pub elected: Option<Mark>,
    pub healthy: Option<Mark>,
    pub timed_out: Option<Mark>,
    /// Why the last round was not the healthy list (for progress).
    waiting_for: String,
}

impl RecoveryTracker {
    pub fn new(
        target: MemberName,
        members: usize,
        requested: Stamp,
        term_before: Option<u64>,
        timeout: Duration,
    ) -> Self {
        RecoveryTracker {
            target,
            members,
            requested,
            timeout,
            term_before,
            disruptor_done: false,
            lost: None,
            back: None,
            elected: None,
            healthy: None,
            timed_out: None,
            waiting_for: "the disruptor".to_owned(),
        }
    }

    /// The disruptor's own part is over (restarted, thawed, old pod gone): from now on
    /// the healthy list ends the recovery.
    pub fn disruptor_done(&mut self) {
        self.disruptor_done = true;
    }

    pub fn outcome(&self) -> Option<Outcome> {
        if self.healthy.is_some() {
            Some(Outcome::Healthy)
        } else if self.timed_out.is_some() {
            Some(Outcome::TimedOut)
        } else {
            None
        }
    }

    /// What the recovery still waits for.
    pub fn waiting_for(&self) -> &str {
        if self.healthy.is_some() { "healthy" } else { &self.waiting_for }
    }

    /// Feeds one round; returns what it changed. After the outcome, nothing changes.
    pub fn observe(&mut self, r: &Round) -> Vec<Change> {
        let mut out = Vec::new();
        if self.outcome().is_some() || r.started.mono < self.requested.mono {
            return out;
        }
        let ok = member_ok(r, &self.target);
        if self.lost.is_none() && !ok {
            self.lost = Some(Mark::of(r));
            out.push(Change::MemberLost(Mark::of(r)));
        } else if self.lost.is_some() && self.back.is_none() && ok {
            self.back = Some(Mark::of(r));
            out.push(Change::MemberBack(Mark::of(r)));
        }
        if self.elected.is_none() {
            let view = r.view();
            if let (Some(leader), Some(before)) = (round_leader(&view.points), self.term_before) {
                let term = view
                    .points
                    .values()
                    .filter(|p| p.leader_id == Some(leader))
                    .filter_map(|p| p.raft_term)
                    .max();
                if let Some(term) = term.filter(|t| *t > before) {
                    self.elected = Some(Mark::of(r));
                    out.push(Change::LeaderElected { at: Mark::of(r), leader, term });
                }
            }
        }
        let status = if !self.disruptor_done {
            Err("the disruptor".to_owned())
        } else if self.lost.is_some() && self.back.is_none() {
            Err(format!("{} to come back", self.target))
        } else {
            healthy_list(r, self.members, Some(&self.target))
        };
        match status {
            Ok(()) => {
                self.healthy = Some(Mark::of(r));
                out.push(Change::HealthyList(Mark::of(r)));
            }
            Err(why) => {
                self.waiting_for = why;
                if self.requested.secs_to(&r.started) > self.timeout.as_secs_f64() {
                    self.timed_out = Some(Mark::of(r));
                    out.push(Change::TimedOut(Mark::of(r)));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_reads_back_as_it_is_written() {
        for s in ["leader", "follower", "dlock-etcd-1", "m0"] {
            let t: Target = s.parse().expect("a target");
            assert_eq!(t.to_string(), s);
        }
        assert_eq!("m2".parse(), Ok(Target::Name(MemberName("m2".into()))));
        assert!("".parse::<Target>().is_err());
    }
}
