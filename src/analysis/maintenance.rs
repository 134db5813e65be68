//! A routine operation's record (a rolling restart, a drain) from the disruptor's own
//! events: which members it replaced, in which order, and what each cost. Pure: the
//! events come with their time from the request; nothing here reads a clock.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::model::baseline::{Baseline, KubeMethod, Maintenance, MemberReplacement, WindowName};
use crate::model::event::Cause;
use crate::model::event::{Event, EventKind};

/// The record of `op` from `(seconds since the request, event)` pairs in the order they
/// happened. `members` are the etcd members (a drain evicts other pods too: listed in
/// `evicted`, not replaced members); `leader` is the leader at the request.
pub fn record(
    op: KubeMethod,
    events: &[(f64, &Event)],
    members: &[String],
    leader: Option<&str>,
) -> Maintenance {
    let mut replaced: Vec<MemberReplacement> = Vec::new();
    let mut evicted = Vec::new();
    let mut node = None;
    let mut operation_s = None;
    let mut uncordoned_at = None;
    for (s, e) in events {
        let member = e.member.as_str();
        let is_member = members.iter().any(|m| m == member);
        match e.kind {
            // A member's replacement starts: the StatefulSet controller began terminating
            // its pod after our rollout restart, or our Eviction of it was accepted (a drain).
            k @ (EventKind::RolloutReplacing | EventKind::EvictionAccepted) => {
                if k == EventKind::EvictionAccepted {
                    evicted.push(member.to_owned());
                }
                if is_member && !replaced.iter().any(|r| r.member == member) {
                    replaced.push(MemberReplacement {
                        member: member.to_owned(),
                        was_leader: leader == Some(member),
                        terminating_s: Some(*s),
                        gone_s: None,
                        ready_s: None,
                        down_s: None,
                        node: None,
                    });
                }
            }
            // The old pod is gone (absent, or a new uid under its name).
            EventKind::OldPodGone => {
                if let Some(r) =
                    replaced.iter_mut().find(|r| r.member == member && r.gone_s.is_none())
                {
                    r.gone_s = Some(*s);
                }
            }
            // The replacement pod is Ready; its detail names the node (`on <node>`).
            EventKind::NewPodReady => {
                if let Some(r) =
                    replaced.iter_mut().find(|r| r.member == member && r.ready_s.is_none())
                {
                    r.ready_s = Some(*s);
                    r.down_s = r.terminating_s.map(|t| s - t);
                    r.node = e
                        .detail
                        .strip_prefix("on ")
                        .map(|n| n.split_whitespace().next().unwrap_or(n).to_owned());
                }
            }
            // A drain's node.
            EventKind::NodeCordoned => {
                node = Some(e.detail.split_whitespace().next().unwrap_or_default().to_owned())
            }
            // The operation is over: the rollout is complete, or the node is uncordoned.
            k @ (EventKind::RolloutComplete | EventKind::NodeUncordoned) => {
                operation_s = Some(*s);
                if k == EventKind::NodeUncordoned {
                    uncordoned_at = Some(e.ts);
                }
            }
            _ => {}
        }
    }
    // In all: until the operation's own end and every member it replaced Ready again (a
    // drained member may come back after the uncordon).
    let last_ready = replaced.iter().filter_map(|r| r.ready_s).reduce(f64::max);
    let operation_s = operation_s.map(|o| last_ready.map_or(o, |r| o.max(r)));
    Maintenance { operation: op, members: replaced, operation_s, node, evicted, uncordoned_at }
}

/// What one sitting's disruption cost, from the request to the end of settle: the figures
/// the maintenance table sets side by side for each method, and the alert's input.
#[derive(Debug, Clone, PartialEq)]
pub struct Cost {
    /// `None` for a method this build does not know (a local rehearsal's signal).
    pub method: Option<KubeMethod>,
    /// Raft-term delta over the disruption and settle windows (`None`: not known).
    pub elections: Option<u64>,
    /// `etcd_server_leader_changes_seen_total` summed over the members: end minus start.
    pub raw_sum: Option<f64>,
    pub reset_aware_increase: f64,
    pub causes: BTreeMap<Cause, u64>,
    /// The canary's longest write gap (and that of a client with one op in flight).
    pub write_unavailable_s: Option<f64>,
    pub write_unavailable_one_in_flight_s: Option<f64>,
    /// When each election was first seen: for the most in any alert window.
    pub election_times: Vec<DateTime<Utc>>,
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    a.into_iter().chain(b).reduce(f64::max)
}

/// The cost of `b`'s disruption; `None` when it had none.
pub fn cost(b: &Baseline) -> Option<Cost> {
    let d = b.disruption.as_ref()?;
    let after: Vec<_> = b
        .windows
        .iter()
        .filter(|w| matches!(w.name, WindowName::Disruption | WindowName::Settle))
        .collect();
    let elections = after.iter().map(|w| w.elections).sum::<Option<u64>>();
    let raw_sum = after
        .iter()
        .map(|w| {
            w.leader_changes.raw_sum_end.zip(w.leader_changes.raw_sum_start).map(|(e, s)| e - s)
        })
        .sum::<Option<f64>>();
    let mut causes = BTreeMap::new();
    for e in after.iter().flat_map(|w| &w.elections_detail) {
        *causes.entry(e.cause).or_insert(0) += 1;
    }
    let client = after.iter().filter_map(|w| w.client.as_ref());
    let (mut wu, mut wu1) = (None, None);
    for c in client {
        wu = max_opt(wu, c.write.longest_unavailable_s);
        wu1 = max_opt(wu1, c.write.one_in_flight_longest_unavailable_s);
    }
    Some(Cost {
        method: d.method.kube_method(),
        elections,
        raw_sum,
        reset_aware_increase: after.iter().map(|w| w.leader_changes.reset_aware_increase).sum(),
        causes,
        write_unavailable_s: wu,
        write_unavailable_one_in_flight_s: wu1,
        election_times: after
            .iter()
            .flat_map(|w| &w.elections_detail)
            .map(|e| e.observed_at)
            .collect(),
    })
}

/// The most of `times` inside any interval of length `window`: what `increase()` over that
/// range can see of them at once.
pub fn most_in_window(times: &[DateTime<Utc>], window: Duration) -> u64 {
    let mut t: Vec<DateTime<Utc>> = times.to_vec();
    t.sort();
    let w = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::MAX);
    let mut best = 0usize;
    let mut lo = 0usize;
    for hi in 0..t.len() {
        while t[hi] - t[lo] >= w {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    #[test]
    fn most_in_window_slides_over_the_elections() {
        let t0 = Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).single().expect("time");
        let at = |s: i64| t0 + chrono::Duration::seconds(s);
        let times = [at(0), at(300), at(600), at(899), at(1500)];
        assert_eq!(most_in_window(&times, Duration::from_secs(900)), 4);
        assert_eq!(
            most_in_window(&times, Duration::from_secs(600)),
            3,
            "300, 600 and 899 fit one 600 s range; 0 and 600 do not"
        );
        assert_eq!(
            most_in_window(&[at(0), at(600)], Duration::from_secs(600)),
            1,
            "600 s apart is not inside one 600 s range"
        );
        assert_eq!(most_in_window(&[], Duration::from_secs(900)), 0);
        assert_eq!(
            most_in_window(&[at(5), at(1), at(3)], Duration::from_secs(10)),
            3,
            "unsorted input"
        );
    }

    fn ev(member: &str, kind: EventKind, detail: &str) -> Event {
        Event::new(
            Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).single().expect("time"),
            crate::model::event::Source::Kubernetes,
            member,
            kind,
            detail,
        )
    }

    #[test]
    fn a_rolling_restart_lists_the_members_in_the_order_they_were_replaced() {
        let members: Vec<String> = (0..3).map(|i| format!("dlock-etcd-{i}")).collect();
        let evs = [
            ev("", EventKind::RolloutRequested, "sts/dlock-etcd"),
            ev("dlock-etcd-2", EventKind::RolloutReplacing, ""),
            ev("dlock-etcd-2", EventKind::OldPodGone, "replaced (new uid)"),
            ev("dlock-etcd-2", EventKind::NewPodReady, "on lw-node-d"),
            ev("dlock-etcd-1", EventKind::RolloutReplacing, ""),
            ev("dlock-etcd-1", EventKind::OldPodGone, "deleted"),
            ev("dlock-etcd-1", EventKind::NewPodReady, "on lw-node-c"),
            ev("dlock-etcd-0", EventKind::RolloutReplacing, ""),
            ev("dlock-etcd-0", EventKind::NewPodReady, "on lw-node-b"),
            ev("", EventKind::RolloutComplete, "revision r2"),
        ];
        let timed: Vec<(f64, &Event)> =
            evs.iter().enumerate().map(|(i, e)| (i as f64, e)).collect();
        let m = record(KubeMethod::RollingRestart, &timed, &members, Some("dlock-etcd-1"));
        let order: Vec<&str> = m.members.iter().map(|r| r.member.as_str()).collect();
        assert_eq!(order, ["dlock-etcd-2", "dlock-etcd-1", "dlock-etcd-0"]);
        assert_eq!(m.members[0].down_s, Some(2.0));
        assert_eq!(m.members[1].node.as_deref(), Some("lw-node-c"));
        assert!(m.members[1].was_leader && !m.members[0].was_leader);
        assert_eq!(m.members[2].gone_s, None, "a gone the disruptor did not see stays unknown");
        assert_eq!(m.operation_s, Some(9.0));
        assert!(m.evicted.is_empty() && m.node.is_none() && m.uncordoned_at.is_none());
    }

    #[test]
    fn a_drain_keeps_other_pods_out_of_the_members() {
        let members: Vec<String> = (0..3).map(|i| format!("dlock-etcd-{i}")).collect();
        let evs = [
            ev("", EventKind::NodeCordoned, "lw-node-c (unschedulable)"),
            ev("leaderwatch-sampler-1", EventKind::EvictionAccepted, "attempt 1"),
            ev("dlock-etcd-1", EventKind::EvictionAccepted, "attempt 1"),
            ev("dlock-etcd-1", EventKind::OldPodGone, "replaced (new uid)"),
            ev("dlock-etcd-1", EventKind::NewPodReady, "on lw-node-c-surge"),
            ev("", EventKind::NodeUncordoned, "lw-node-c"),
        ];
        let timed: Vec<(f64, &Event)> =
            evs.iter().enumerate().map(|(i, e)| (i as f64 * 0.5, e)).collect();
        let m = record(KubeMethod::Drain, &timed, &members, None);
        assert_eq!(m.members.len(), 1);
        assert_eq!(m.evicted, ["leaderwatch-sampler-1", "dlock-etcd-1"]);
        assert_eq!(m.node.as_deref(), Some("lw-node-c"));
        assert_eq!(m.members[0].node.as_deref(), Some("lw-node-c-surge"));
        assert_eq!(m.members[0].down_s, Some(1.0));
        assert_eq!(m.operation_s, Some(2.5));
        assert!(m.uncordoned_at.is_some());
    }

    #[test]
    fn a_member_back_after_the_uncordon_extends_the_operation() {
        let members = vec!["dlock-etcd-2".to_owned()];
        let evs = [
            ev("", EventKind::NodeCordoned, "lw-node-c (unschedulable)"),
            ev("dlock-etcd-2", EventKind::EvictionAccepted, "attempt 1"),
            ev("dlock-etcd-2", EventKind::OldPodGone, "deleted"),
            ev("", EventKind::NodeUncordoned, "lw-node-c: after --down 8s"),
            ev("dlock-etcd-2", EventKind::NewPodReady, "on lw-node-c"),
        ];
        let timed: Vec<(f64, &Event)> =
            evs.iter().zip([0.0, 0.1, 1.4, 9.5, 19.7]).map(|(e, s)| (s, e)).collect();
        let m = record(KubeMethod::Drain, &timed, &members, Some("dlock-etcd-2"));
        assert_eq!(m.operation_s, Some(19.7), "until the member is Ready, not only the uncordon");
    }
}
