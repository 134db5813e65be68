//! A routine operation's record (a rolling restart, a drain) from the disruptor's own
//! events: which members it replaced, in which order, and what each cost. Pure: the
//! events come with their time from the request; nothing here reads a clock.

use crate::model::baseline::{KubeMethod, Maintenance, MemberReplacement};
use crate::model::event::Event;

/// The disruptor's events that start a member's replacement: the StatefulSet controller
/// began terminating its pod after our rollout restart (`rollout_replacing`), or our
/// Eviction of it was accepted (`eviction_accepted`, a drain).
pub const REPLACING: [&str; 2] = ["rollout_replacing", "eviction_accepted"];
/// The old pod is gone (absent, or a new uid under its name).
pub const GONE: &str = "old_pod_gone";
/// The replacement pod is Ready; its detail names the node (`on <node>`).
pub const READY: &str = "new_pod_ready";
/// The operation is over: the rollout is complete, or the node is uncordoned.
pub const DONE: [&str; 2] = ["rollout_complete", "node_uncordoned"];
/// A drain's node.
pub const CORDONED: &str = "node_cordoned";

/// The record of `op` from `(seconds since the request, event)` pairs in the order they
/// happened. `members` are the etcd members (a drain evicts other pods too: listed in
/// `evicted`, not replaced members); `leader` is the leader at the request.
pub fn record(op: KubeMethod, events: &[(f64, &Event)], members: &[String], leader: Option<&str>) -> Maintenance {
    let mut replaced: Vec<MemberReplacement> = Vec::new();
    let mut evicted = Vec::new();
    let mut node = None;
    let mut operation_s = None;
    let mut uncordoned_at = None;
    for (s, e) in events {
        let member = e.member.as_str();
        let is_member = members.iter().any(|m| m == member);
        match e.kind.as_str() {
            k if REPLACING.contains(&k) => {
                if k == "eviction_accepted" {
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
            GONE => {
                if let Some(r) = replaced.iter_mut().find(|r| r.member == member && r.gone_s.is_none()) {
                    r.gone_s = Some(*s);
                }
            }
            READY => {
                if let Some(r) = replaced.iter_mut().find(|r| r.member == member && r.ready_s.is_none()) {
                    r.ready_s = Some(*s);
                    r.down_s = r.terminating_s.map(|t| s - t);
                    r.node = e.detail.strip_prefix("on ").map(|n| n.split_whitespace().next().unwrap_or(n).to_owned());
                }
            }
            CORDONED => node = Some(e.detail.split_whitespace().next().unwrap_or_default().to_owned()),
            k if DONE.contains(&k) => {
                operation_s = Some(*s);
                if k == "node_uncordoned" {
                    uncordoned_at = Some(e.ts);
                }
            }
            _ => {}
        }
    }
    Maintenance { operation: op, members: replaced, operation_s, node, evicted, uncordoned_at }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn ev(member: &str, kind: &str, detail: &str) -> Event {
        Event::new(Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).single().expect("time"), "kubernetes", member, kind, detail)
    }

    #[test]
    fn a_rolling_restart_lists_the_members_in_the_order_they_were_replaced() {
        let members: Vec<String> = (0..3).map(|i| format!("dlock-etcd-{i}")).collect();
        let evs = [
            ev("", "rollout_requested", "sts/dlock-etcd"),
            ev("dlock-etcd-2", "rollout_replacing", ""),
            ev("dlock-etcd-2", GONE, "replaced (new uid)"),
            ev("dlock-etcd-2", READY, "on lw-node-d"),
            ev("dlock-etcd-1", "rollout_replacing", ""),
            ev("dlock-etcd-1", GONE, "deleted"),
            ev("dlock-etcd-1", READY, "on lw-node-c"),
            ev("dlock-etcd-0", "rollout_replacing", ""),
            ev("dlock-etcd-0", READY, "on lw-node-b"),
            ev("", "rollout_complete", "revision r2"),
        ];
        let timed: Vec<(f64, &Event)> = evs.iter().enumerate().map(|(i, e)| (i as f64, e)).collect();
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
            ev("", CORDONED, "lw-node-c (unschedulable)"),
            ev("leaderwatch-sampler-1", "eviction_accepted", "attempt 1"),
            ev("dlock-etcd-1", "eviction_accepted", "attempt 1"),
            ev("dlock-etcd-1", GONE, "replaced (new uid)"),
            ev("dlock-etcd-1", READY, "on lw-node-c-surge"),
            ev("", "node_uncordoned", "lw-node-c"),
        ];
        let timed: Vec<(f64, &Event)> = evs.iter().enumerate().map(|(i, e)| (i as f64 * 0.5, e)).collect();
        let m = record(KubeMethod::Drain, &timed, &members, None);
        assert_eq!(m.members.len(), 1);
        assert_eq!(m.evicted, ["leaderwatch-sampler-1", "dlock-etcd-1"]);
        assert_eq!(m.node.as_deref(), Some("lw-node-c"));
        assert_eq!(m.members[0].node.as_deref(), Some("lw-node-c-surge"));
        assert_eq!(m.members[0].down_s, Some(1.0));
        assert_eq!(m.operation_s, Some(2.5));
        assert!(m.uncordoned_at.is_some());
    }
}
