//! All members probed at once -> one [`Round`]. A round costs about the slowest member,
//! not the sum: a frozen member costs one timeout, never a hang.

use chrono::{DateTime, Utc};
use futures::future::join_all;

use crate::counts::{Point, RoundView};
use crate::probe::{Observation, Prober};

/// One probe of every member, started together.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// 0-based, per run.
    pub index: u64,
    pub started: DateTime<Utc>,
    pub observations: Vec<Observation>,
}

impl Round {
    /// What counting needs from this round.
    pub fn view(&self) -> RoundView {
        RoundView {
            round: self.index,
            ts: self.started,
            points: self.observations.iter().map(|o| (o.member.clone(), point(o))).collect(),
        }
    }
}

/// The counting view of one observation.
pub fn point(o: &Observation) -> Point {
    let m = o.metrics.ok();
    let s = o.status.ok();
    Point {
        counter: m.and_then(|m| m.leader_changes_seen_total),
        start_time: m.and_then(|m| m.process_start_time),
        raft_term: s.map(|s| s.raft_term),
        leader_id: s.map(|s| s.leader_id),
    }
}

/// The probers of every member, and the round counter.
pub struct Sampler {
    probers: Vec<Prober>,
    next: u64,
}

impl Sampler {
    pub fn new(probers: Vec<Prober>) -> Self {
        Sampler { probers, next: 0 }
    }

    /// `/metrics` on or off for the following rounds (off during fast sampling: the
    /// counter is cumulative and the full page is the expensive part for etcd).
    pub fn set_with_metrics(&mut self, on: bool) {
        for p in &mut self.probers {
            p.set_with_metrics(on);
        }
    }

    /// Probes every member concurrently.
    pub async fn round(&mut self, started: DateTime<Utc>) -> Round {
        let observations = join_all(self.probers.iter_mut().map(|p| p.probe())).await;
        let index = self.next;
        self.next += 1;
        Round { index, started, observations }
    }

}
