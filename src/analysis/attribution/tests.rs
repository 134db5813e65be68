//! The attribution's unit tests: each cause, its order and its evidence windows.

use super::*;
use chrono::{TimeZone, Utc};

fn stamp(s: f64) -> Stamp {
    let base = tokio::time::Instant::now();
    Stamp {
        utc: Utc.timestamp_opt(1_000_000, 0).single().expect("t")
            + chrono::Duration::milliseconds((s * 1000.0) as i64),
        mono: base,
    }
}

fn ev(t: f64, source: &str, member: &str, kind: &str, detail: &str) -> Event {
    let (source, kind) = (source.parse().expect("source"), kind.parse().expect("kind"));
    Event::new(stamp(t).utc, source, member, kind, detail)
}

#[test]
fn a_member_taken_by_the_controller_during_our_rollout_is_our_disruption() {
    // The pod watcher saw the deletion 0.1 s before the rollout's own poll did.
    let events = [
        ev(90.0, "kubernetes", "", "rollout_requested", "statefulset/dlock-etcd"),
        ev(99.8, "kubernetes", "m2", "pod_deleting", "deletionTimestamp"),
        ev(100.1, "kubernetes", "m2", "rollout_replacing", "its old pod is terminating"),
    ];
    let (cause, e) = attribute(Some("m2"), &stamp(100.0), &events, Duration::from_secs(30));
    assert_eq!((cause, e.map(|e| e.kind.as_str())), (Cause::OwnDisruption, Some("pod_deleting")));
    // After the rollout is complete, the same deletion is Kubernetes' own.
    let after = [
        ev(90.0, "kubernetes", "", "rollout_requested", ""),
        ev(95.0, "kubernetes", "", "rollout_complete", ""),
        ev(99.8, "kubernetes", "m2", "pod_deleting", ""),
    ];
    assert_eq!(
        attribute(Some("m2"), &stamp(100.0), &after, Duration::from_secs(30)).0,
        Cause::Kubernetes
    );
    // A drain: from the cordon to the uncordon.
    let drain = [
        ev(90.0, "kubernetes", "", "node_cordoned", "n1"),
        ev(99.8, "kubernetes", "m2", "k8s_event", "Normal Killing: Stopping container etcd"),
    ];
    assert_eq!(
        attribute(Some("m2"), &stamp(100.0), &drain, Duration::from_secs(30)).0,
        Cause::OwnDisruption
    );
}

#[test]
fn the_cause_goes_by_precedence_then_by_closeness() {
    let at = stamp(100.0);
    let h = DEFAULT_HORIZON;
    let evs = vec![
        ev(95.0, "leaderwatch", "etcd-0", "stress", "heartbeat send failures +3"),
        ev(97.0, "leaderwatch", "etcd-0", "unreachable", "metrics: timeout"),
        ev(60.0, "local", "etcd-0", "sigkill_sent", "too early: outside the horizon"),
        ev(99.0, "leaderwatch", "etcd-1", "unreachable", "another member"),
    ];
    let (c, e) = attribute(Some("etcd-0"), &at, &evs, h);
    assert_eq!((c, e.map(|e| e.kind.as_str())), (Cause::Unreachable, Some("unreachable")));
    let mut more = evs.clone();
    more.push(ev(
        98.0,
        "kubernetes",
        "etcd-0",
        "k8s_event",
        "Normal Killing: Stopping container etcd (cluster time x)",
    ));
    assert_eq!(attribute(Some("etcd-0"), &at, &more, h).0, Cause::Kubernetes);
    more.push(ev(90.0, "local", "etcd-0", "sigkill_sent", "SIGKILL"));
    assert_eq!(attribute(Some("etcd-0"), &at, &more, h).0, Cause::OwnDisruption);
    // The evictor's own row comes from source `kubernetes`: still our disruption.
    let evicted = [ev(99.0, "kubernetes", "etcd-0", "eviction_accepted", "")];
    assert_eq!(attribute(Some("etcd-0"), &at, &evicted, h).0, Cause::OwnDisruption);
    // After the election: not its cause.
    assert_eq!(
        attribute(Some("etcd-0"), &at, &[ev(101.0, "local", "etcd-0", "sigkill_sent", "")], h).0,
        Cause::Unexplained
    );
    assert_eq!(attribute(None, &at, &more, h).0, Cause::Unexplained);
}

/// Regression: a leader frozen by hand under `sample` at 1 s answered `/health` just
/// before the freeze, so its only rows before the election were `unresponsive` (its
/// probe timed out after the election): the election was once `unexplained`.
#[test]
fn a_leader_frozen_mid_probe_is_unreachable_not_unexplained() {
    let at = stamp(33.0);
    let evs = [
        ev(31.0, "leaderwatch", "a", "unresponsive", "no answer for 1001 ms"),
        ev(34.0, "leaderwatch", "a", "unreachable", "timed out"),
    ];
    let (cause, row) = attribute(Some("a"), &at, &evs, DEFAULT_HORIZON);
    assert_eq!((cause, row.map(|e| e.kind.as_str())), (Cause::Unreachable, Some("unresponsive")));
}

#[test]
fn a_state_still_on_at_the_horizon_counts() {
    let at = stamp(100.0);
    let evs = vec![ev(10.0, "leaderwatch", "etcd-0", "stress", "heartbeat send failures +2")];
    assert_eq!(attribute(Some("etcd-0"), &at, &evs, DEFAULT_HORIZON).0, Cause::Stress);
    let over = vec![evs[0].clone(), ev(20.0, "leaderwatch", "etcd-0", "stress_over", "")];
    assert_eq!(attribute(Some("etcd-0"), &at, &over, DEFAULT_HORIZON).0, Cause::Unexplained);
}

/// A slow disk under the leader (`lw-lab fault disk`): its loop waits on each fsync, so
/// its `/health` hangs (`unresponsive`) and, after the election, it says it has no
/// leader; before `slow_disk` was a row of its own, that was `network`.
#[test]
fn a_slow_disk_under_the_old_leader_is_the_disk_not_the_network() {
    let at = stamp(100.0);
    let evs = [
        ev(96.0, "leaderwatch", "etcd-0", "slow_disk", "WAL fsync p99 1.900 s > 0.01 s"),
        ev(99.5, "leaderwatch", "etcd-0", "unresponsive", "no answer for 1013 ms"),
        ev(101.5, "leaderwatch", "etcd-0", "health_false", "RAFT NO LEADER"),
    ];
    let (cause, row) = attribute(Some("etcd-0"), &at, &evs, DEFAULT_HORIZON);
    assert_eq!((cause, row.map(|e| e.kind.as_str())), (Cause::Disk, Some("slow_disk")));
    assert_eq!(attribute(Some("etcd-0"), &at, &evs[1..], DEFAULT_HORIZON).0, Cause::Network);
    // Stalled 2 s per fsync (2026-12-06): its Status slow, then no answer at all; the
    // slow fsyncs were read after the stall, stamped with the start of their step.
    let stalled = [
        ev(99.2, "leaderwatch", "etcd-0", "slow_disk", "WAL fsync p99 2.031 s >= 0.1 s"),
        ev(99.9, "leaderwatch", "etcd-0", "unreachable", "status: timed out after 2s"),
        ev(101.9, "leaderwatch", "etcd-0", "slow_answers", "Status answered in 1891 ms"),
    ];
    assert_eq!(attribute(Some("etcd-0"), &at, &stalled, DEFAULT_HORIZON).0, Cause::Disk);
    assert_eq!(
        attribute(Some("etcd-0"), &at, &stalled[1..], DEFAULT_HORIZON).0,
        Cause::Unreachable
    );
    // A spell that began before the horizon and was still on counts; one that ended not.
    let long = [ev(10.0, "leaderwatch", "etcd-0", "slow_disk", "WAL fsync p99 0.2 s")];
    assert_eq!(attribute(Some("etcd-0"), &at, &long, DEFAULT_HORIZON).0, Cause::Disk);
    let ended = [long[0].clone(), ev(20.0, "leaderwatch", "etcd-0", "disk_ok", "")];
    assert_eq!(attribute(Some("etcd-0"), &at, &ended, DEFAULT_HORIZON).0, Cause::Unexplained);
    // Another member's slow disk is not the old leader's.
    let other = [ev(96.0, "leaderwatch", "etcd-1", "slow_disk", "WAL fsync p99 1.9 s")];
    assert_eq!(attribute(Some("etcd-0"), &at, &other, DEFAULT_HORIZON).0, Cause::Unexplained);
}

/// Regression (make test, 2026-12-08, the lab's fault test): a leader starved at 0.5 % of
/// a core was called `disk` on a `slow_disk` row stamped 22 s before the election (the
/// start of its `/metrics` step), the leader slow and silent since. The rows cannot tell a
/// disk that stayed slow from a CPU starved after it: both names, never one wrong one.
#[test]
fn a_slow_step_long_before_a_starved_leaders_election_is_cpu_or_disk() {
    let at = stamp(100.0);
    let evs = [
        ev(78.0, "leaderwatch", "etcd-0", "slow_disk", "WAL fsync p99 0.412 s >= 0.1 s"),
        ev(98.5, "leaderwatch", "etcd-0", "slow_answers", "Status answered in 1338 ms"),
        ev(99.5, "leaderwatch", "etcd-0", "unreachable", "status: timed out after 2s"),
    ];
    let (cause, row) = attribute(Some("etcd-0"), &at, &evs, DEFAULT_HORIZON);
    assert_eq!((cause, row.map(|e| e.kind)), (Cause::CpuOrDisk, Some(EventKind::SlowDisk)));
    // The same step, the leader prompt since: the disk.
    assert_eq!(attribute(Some("etcd-0"), &at, &evs[..1], DEFAULT_HORIZON).0, Cause::Disk);
    // A fresh slow step (within the evidence wait): the disk, whatever the answers did.
    let fresh = [
        ev(95.0, "leaderwatch", "etcd-0", "slow_disk", "WAL fsync p99 2.0 s >= 0.1 s"),
        evs[1].clone(),
        evs[2].clone(),
    ];
    assert_eq!(attribute(Some("etcd-0"), &at, &fresh, DEFAULT_HORIZON).0, Cause::Disk);
}

/// A lost node's lease goes stale 20 s after the loss and the row is stamped with its last
/// renewal: it names the node, where the member's probes alone say `unreachable`.
#[test]
fn a_lost_nodes_stale_lease_names_the_node_not_the_unreachable_member() {
    let at = stamp(100.0);
    let evs = [
        ev(91.0, "kubernetes", "etcd-0", "node_lease_stale", "node n1: lease last renewed ..."),
        ev(98.0, "leaderwatch", "etcd-0", "unreachable", "status: timed out after 2s"),
    ];
    let (cause, row) = attribute(Some("etcd-0"), &at, &evs, DEFAULT_HORIZON);
    assert_eq!((cause, row.map(|e| e.kind)), (Cause::Node, Some(EventKind::NodeLeaseStale)));
    let other =
        [ev(91.0, "kubernetes", "etcd-1", "node_lease_stale", "node n2: ..."), evs[1].clone()];
    assert_eq!(attribute(Some("etcd-0"), &at, &other, DEFAULT_HORIZON).0, Cause::Unreachable);
    // Our own eviction still comes first.
    let ours = [ev(97.0, "kubernetes", "etcd-0", "eviction_accepted", "")];
    let both: Vec<Event> = ours.iter().chain(evs.iter()).cloned().collect();
    assert_eq!(attribute(Some("etcd-0"), &at, &both, DEFAULT_HORIZON).0, Cause::OwnDisruption);
}

/// A starved leader (`lw-lab fault cpu`) answers late, then its probes time out: while
/// its answers were still slow at the election, the CPU, not the freeze-like silence.
#[test]
fn a_leader_whose_answers_stayed_slow_is_cpu_starved_not_unreachable() {
    let at = stamp(100.0);
    let evs = [
        ev(91.0, "leaderwatch", "etcd-0", "slow_answers", "Status answered in 900 ms"),
        ev(97.0, "leaderwatch", "etcd-0", "unreachable", "status: timed out after 2s"),
    ];
    let (cause, row) = attribute(Some("etcd-0"), &at, &evs, DEFAULT_HORIZON);
    assert_eq!((cause, row.map(|e| e.kind.as_str())), (Cause::Cpu, Some("slow_answers")));
    assert_eq!(attribute(Some("etcd-0"), &at, &evs[1..], DEFAULT_HORIZON).0, Cause::Unreachable);
    // Prompt again before the freeze: a freeze.
    let prompt =
        [evs[0].clone(), ev(93.0, "leaderwatch", "etcd-0", "answers_prompt", ""), evs[1].clone()];
    assert_eq!(attribute(Some("etcd-0"), &at, &prompt, DEFAULT_HORIZON).0, Cause::Unreachable);
}

/// A leader starved at 0.5 % of a core (fault-repeat 2026-12-06): the `/metrics` read that
/// ended its long step came after the fault, promptly, and showed fsyncs timed as slow as a
/// slow disk's; its peers' round trips to it had turned slow. Read as `disk` then.
#[test]
fn slow_syncs_with_slow_round_trips_to_the_member_are_not_the_disk() {
    let at = stamp(100.0);
    let disk = ev(92.0, "leaderwatch", "etcd-2", "slow_disk", "WAL fsync p99 1.638 s >= 0.1 s");
    let answers = ev(92.2, "leaderwatch", "etcd-2", "slow_answers", "Status answered in 1234 ms");
    let rtt = |member: &str, t: f64| {
        ev(t, "leaderwatch", member, "slow_round_trips", "to etcd-2 (c3): p99 0.408 s > 0.15 s")
    };
    let starved = [disk.clone(), answers.clone(), rtt("etcd-0", 103.0)];
    let (cause, row) = attribute(Some("etcd-2"), &at, &starved, DEFAULT_HORIZON);
    assert_eq!((cause, row.map(|e| e.kind.as_str())), (Cause::Cpu, Some("slow_answers")));
    // Its own round trips to others say nothing of it (a starved member measures late too,
    // but so may any member behind a cut); nor do others' round trips to someone else.
    let own = [disk.clone(), answers.clone(), rtt("etcd-2", 103.0)];
    assert_eq!(attribute(Some("etcd-2"), &at, &own, DEFAULT_HORIZON).0, Cause::Disk);
    let mut other = rtt("etcd-0", 103.0);
    other.detail = "to etcd-1 (b2): p99 0.408 s > 0.15 s".to_owned();
    let others = [disk.clone(), answers.clone(), other];
    assert_eq!(attribute(Some("etcd-2"), &at, &others, DEFAULT_HORIZON).0, Cause::Disk);
    // A spell begun long before and still on counts (etcd exports the smoothed round trip
    // every 30 s); one that ended does not.
    let on = [rtt("etcd-0", 20.0), disk.clone(), answers.clone()];
    assert_eq!(attribute(Some("etcd-2"), &at, &on, DEFAULT_HORIZON).0, Cause::Cpu);
    let ok = ev(60.0, "leaderwatch", "etcd-0", "round_trips_ok", "to etcd-2 (c3)");
    let ended = [rtt("etcd-0", 20.0), ok, disk, answers];
    assert_eq!(attribute(Some("etcd-2"), &at, &ended, DEFAULT_HORIZON).0, Cause::Disk);
}

/// A leader waiting 2 s on each fsync lost its leadership before any stalled sync had
/// returned: the `/metrics` step that showed the slow syncs began 0.4 s after the election
/// (fault-repeat 2026-12-06), and the election was read as `unreachable`.
#[test]
fn slow_syncs_shown_just_after_the_election_are_its_cause() {
    let at = stamp(100.0);
    let evs = [
        ev(98.4, "leaderwatch", "etcd-1", "unresponsive", "no answer for 1017 ms"),
        ev(100.4, "leaderwatch", "etcd-1", "slow_disk", "WAL fsync p99 2.038 s >= 0.1 s"),
    ];
    let (cause, row) = attribute(Some("etcd-1"), &at, &evs, DEFAULT_HORIZON);
    assert_eq!((cause, row.map(|e| e.kind.as_str())), (Cause::Disk, Some("slow_disk")));
    let late =
        [evs[0].clone(), ev(111.0, "leaderwatch", "etcd-1", "slow_disk", "WAL fsync p99 2 s")];
    assert_eq!(attribute(Some("etcd-1"), &at, &late, DEFAULT_HORIZON).0, Cause::Unreachable);
}

/// A leader starved at 0.5 % of a core went silent without a slow answer first (its last,
/// 184 ms, was under the bound), came back 9 s after the election answering in 1402 ms and
/// missed the next probes (fault-repeat 2026-12-06): read as `unreachable` then, `cpu` now.
/// A leader frozen 4 s came back answering in 1999 ms (a probe sent while frozen), then
/// promptly: it stays `unreachable`.
#[test]
fn a_silent_leader_that_comes_back_slow_and_stays_so_was_starved_not_frozen() {
    let at = stamp(100.0);
    let silent = ev(96.6, "leaderwatch", "etcd-0", "unreachable", "status: timed out after 2s");
    let row = |t: f64, kind: &str| ev(t, "leaderwatch", "etcd-0", kind, "");
    let slow =
        |t: f64| ev(t, "leaderwatch", "etcd-0", "slow_answers", "Status answered in 1402 ms");
    let starved = [silent.clone(), row(108.8, "back"), slow(108.8), row(110.8, "unresponsive")];
    let (cause, e) = attribute(Some("etcd-0"), &at, &starved, DEFAULT_HORIZON);
    assert_eq!((cause, e.map(|e| e.ts)), (Cause::Cpu, Some(slow(108.8).ts)));
    let thawed = [silent.clone(), row(103.0, "back"), slow(103.0), row(105.0, "answers_prompt")];
    assert_eq!(attribute(Some("etcd-0"), &at, &thawed, DEFAULT_HORIZON).0, Cause::Unreachable);
    let prompt = [silent.clone(), row(104.0, "back"), row(106.0, "unresponsive")];
    assert_eq!(attribute(Some("etcd-0"), &at, &prompt, DEFAULT_HORIZON).0, Cause::Unreachable);
    // Only its first answer back counts.
    let later = [silent.clone(), row(104.0, "back"), row(120.0, "back"), slow(120.0)];
    assert_eq!(attribute(Some("etcd-0"), &at, &later, DEFAULT_HORIZON).0, Cause::Unreachable);
    // Back after the longest wait: not this election's evidence.
    let late = [silent, row(170.0, "back"), slow(170.0), row(172.0, "unresponsive")];
    assert_eq!(attribute(Some("etcd-0"), &at, &late, DEFAULT_HORIZON).0, Cause::Unreachable);
}

/// A leader cut off one way (fault-repeat 2026-12-06): its `/health` went unanswered for a
/// second, then its Status said leader 0, and its `/health` never said "no leader". Read as
/// `unreachable` (on `unresponsive`) then.
#[test]
fn a_leader_whose_status_says_no_leader_is_cut_off() {
    let at = stamp(100.0);
    let evs = [
        ev(98.4, "leaderwatch", "etcd-2", "unresponsive", "no answer for 1015 ms"),
        ev(102.0, "leaderwatch", "etcd-2", "leader_changed", "f4e02c65b397be26 -> 0 (term 18)"),
    ];
    let (cause, row) = attribute(Some("etcd-2"), &at, &evs, DEFAULT_HORIZON);
    assert_eq!((cause, row.map(|e| e.kind.as_str())), (Cause::Network, Some("leader_changed")));
    // A new leader named is no such word.
    let other =
        [evs[0].clone(), ev(102.0, "leaderwatch", "etcd-2", "leader_changed", "a -> b0 (term 19)")];
    assert_eq!(attribute(Some("etcd-2"), &at, &other, DEFAULT_HORIZON).0, Cause::Unreachable);
}

/// A leader cut from its peers while leaderwatch still reaches it (`lw-lab fault
/// partition`, 2026-12-06): its `/health` hung for a second (`unresponsive`), then it
/// answered with no leader. The attribution of that day called it `unreachable`.
#[test]
fn a_leader_cut_off_but_answering_is_the_network_not_unreachable() {
    let at = stamp(100.0);
    let evs = [
        ev(99.5, "leaderwatch", "etcd-0", "unresponsive", "no answer for 1013 ms"),
        ev(101.5, "leaderwatch", "etcd-0", "health_false", "RAFT NO LEADER"),
    ];
    let (cause, row) = attribute(Some("etcd-0"), &at, &evs, DEFAULT_HORIZON);
    assert_eq!((cause, row.map(|e| e.kind.as_str())), (Cause::Network, Some("health_false")));
    // Frozen: a whole probe failed; its "no leader" after the thaw does not make it a cut.
    let frozen = [
        ev(99.4, "leaderwatch", "etcd-0", "unreachable", "status: timed out after 2s"),
        ev(104.0, "leaderwatch", "etcd-0", "health_false", "RAFT NO LEADER"),
    ];
    assert_eq!(attribute(Some("etcd-0"), &at, &frozen, DEFAULT_HORIZON).0, Cause::Unreachable);
    // Slow and nothing else: still unreachable.
    assert_eq!(attribute(Some("etcd-0"), &at, &evs[..1], DEFAULT_HORIZON).0, Cause::Unreachable);
    // Another reason for an unhealthy member is not a cut.
    let alarm = [ev(101.0, "leaderwatch", "etcd-0", "health_false", "NOSPACE alarm")];
    assert_eq!(attribute(Some("etcd-0"), &at, &alarm, DEFAULT_HORIZON).0, Cause::Unexplained);
}

/// A link reported down by rafthttp, on the old leader or naming it. (At etcd 3.6.14 a
/// silent cut does not show there for minutes: docs/counting.md.)
#[test]
fn a_leader_cut_from_its_peers_is_the_network_between_members() {
    let at = stamp(100.0);
    // On a peer, naming the old leader, 3.5 s after the election.
    let on_peer =
        [ev(103.5, "leaderwatch", "etcd-1", "peer_down", "to etcd-0 (a1): stream inactive")];
    let (cause, row) = attribute(Some("etcd-0"), &at, &on_peer, DEFAULT_HORIZON);
    assert_eq!((cause, row.map(|e| e.member.as_str())), (Cause::Network, Some("etcd-1")));
    // On the old leader itself.
    let on_old =
        [ev(104.0, "leaderwatch", "etcd-0", "peer_down", "to etcd-2 (c3): disconnected +1")];
    assert_eq!(attribute(Some("etcd-0"), &at, &on_old, DEFAULT_HORIZON).0, Cause::Network);
    // A link between two other members says nothing about this leader.
    let others =
        [ev(103.0, "leaderwatch", "etcd-1", "peer_down", "to etcd-2 (c3): stream inactive")];
    assert_eq!(attribute(Some("etcd-0"), &at, &others, DEFAULT_HORIZON).0, Cause::Unexplained);
    // Nor does a link that went down after the evidence wait.
    let late = [ev(111.0, "leaderwatch", "etcd-1", "peer_down", "to etcd-0 (a1): stream inactive")];
    assert_eq!(attribute(Some("etcd-0"), &at, &late, DEFAULT_HORIZON).0, Cause::Unexplained);
    // An unreachable leader stays unreachable: the links drop because it is gone.
    let gone = [on_peer[0].clone(), ev(99.0, "leaderwatch", "etcd-0", "unreachable", "refused")];
    assert_eq!(attribute(Some("etcd-0"), &at, &gone, DEFAULT_HORIZON).0, Cause::Unreachable);
}

/// A round at `t` s in which member i reports (leader id, term), or is silent (None).
fn round(index: u64, base: &Stamp, t: f64, views: &[Option<(u64, u64)>]) -> Round {
    use crate::model::member::MemberName;
    use crate::model::observation::{Observation, Part, Status};
    let at = Stamp {
        utc: base.utc + chrono::Duration::milliseconds((t * 1000.0) as i64),
        mono: base.mono + Duration::from_secs_f64(t),
    };
    let observations = views
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|(leader, term)| (i, leader, term)))
        .map(|(i, leader, term)| {
            Observation::new(
                MemberName(format!("m{i}")),
                String::new(),
                at,
                Part::Skipped,
                Part::Skipped,
                Part::Ok { value: Status::of(i as u64 + 1, leader, term), ms: 1.0 },
            )
        })
        .collect();
    Round { index, started: at, observations, silent: vec![] }
}

#[test]
fn an_election_has_its_terms_leaders_and_leaderless_time() {
    let base = stamp(0.0);
    let mut el = Elections::new(3);
    // m0 (id 1) leads in term 2; it goes silent; m1 and m2 lose the leader at 1.2 s,
    // and agree on m1 (id 2) in term 3 at 1.5 s.
    let rounds = [
        round(0, &base, 0.0, &[Some((1, 2)), Some((1, 2)), Some((1, 2))]),
        round(1, &base, 1.0, &[None, Some((1, 2)), Some((1, 2))]),
        round(2, &base, 1.2, &[None, Some((0, 2)), Some((1, 2))]),
        round(3, &base, 1.3, &[None, Some((2, 3)), Some((0, 2))]),
        round(4, &base, 1.5, &[None, Some((2, 3)), Some((2, 3))]),
    ];
    for r in &rounds {
        el.push(r, WindowName::Disruption);
    }
    assert!(el.ready(&rounds[4].started, false).is_empty(), "waits for late evidence");
    // The old leader's /metrics has not been read since: it waits on, up to a minute.
    let later = Stamp { utc: base.utc, mono: base.mono + Duration::from_secs(12) };
    assert!(el.ready(&later, false).is_empty(), "waits for the old leader's /metrics");
    let much_later = Stamp { utc: base.utc, mono: base.mono + Duration::from_secs(62) };
    let ready = el.ready(&much_later, false);
    assert_eq!(ready.len(), 1);
    let d = el.detail(&ready[0], &[], DEFAULT_HORIZON);
    assert_eq!((d.term_from, d.term_to), (2, 3));
    assert_eq!((d.old_leader.as_deref(), d.new_leader.as_deref()), (Some("m0"), Some("m1")));
    assert_eq!((d.after, d.observed_at), (rounds[2].started.utc, rounds[3].started.utc));
    // No majority agreed from 1.2 s (round 2) to 1.5 s (round 4).
    assert!((d.leaderless_s.expect("leaderless") - 0.3).abs() < 1e-9, "{d:?}");
    assert_eq!(d.cause, Cause::Unexplained);
}

/// Regression (a committed sigterm rehearsal): the new leader was named a round before
/// its term showed (the Status term is the last applied entry's), and the election was
/// once given the new leader as its old one, and so no cause.
#[test]
fn a_hand_over_seen_before_its_term_keeps_the_old_leader() {
    let base = stamp(0.0);
    let mut el = Elections::new(3);
    let rounds = [
        round(0, &base, 0.0, &[Some((1, 2)), Some((1, 2)), Some((1, 2))]),
        round(1, &base, 0.1, &[Some((0, 2)), None, Some((3, 2))]),
        round(2, &base, 0.2, &[Some((3, 3)), None, Some((3, 3))]),
    ];
    for r in &rounds {
        el.push(r, WindowName::Disruption);
    }
    let ready = el.ready(&rounds[2].started, true);
    let d = el.detail(&ready[0], &[], DEFAULT_HORIZON);
    assert_eq!(
        (d.old_leader.as_deref(), d.new_leader.as_deref()),
        (Some("m0"), Some("m2")),
        "{d:?}"
    );
}

/// Regression (data/fault-node-20261207T001728Z/node-loss-toleration): the survivors said
/// RAFT NO LEADER for 15.8 s, then named their new leader a round before its term showed;
/// the stretch without a leader ended before the election existed, and the election was
/// recorded as leaderless 0.0 s.
#[test]
fn a_leaderless_stretch_ended_a_round_before_the_term_shows_is_the_elections() {
    let base = stamp(0.0);
    let mut el = Elections::new(3);
    let rounds = [
        round(0, &base, 0.0, &[Some((1, 7)), Some((1, 7)), Some((1, 7))]),
        round(1, &base, 1.0, &[None, Some((0, 7)), Some((0, 7))]),
        round(2, &base, 9.0, &[None, Some((0, 7)), Some((0, 7))]),
        // m1 (id 2) named by both survivors, the Status term still the old one ...
        round(3, &base, 16.0, &[None, Some((2, 7)), Some((2, 7))]),
        // ... which shows a round later.
        round(4, &base, 16.1, &[None, Some((2, 9)), Some((2, 9))]),
    ];
    for r in &rounds {
        el.push(r, WindowName::Sample);
    }
    let ready = el.ready(&rounds[4].started, true);
    let d = el.detail(&ready[0], &[], DEFAULT_HORIZON);
    assert_eq!((d.term_from, d.term_to, d.new_leader.as_deref()), (7, 9, Some("m1")));
    assert!((d.leaderless_s.expect("leaderless") - 15.0).abs() < 1e-9, "{d:?}");
    // A later election with no stretch of its own does not take an old one.
    let later = [
        round(5, &base, 30.0, &[None, Some((3, 10)), Some((3, 10))]),
        round(6, &base, 30.1, &[None, Some((3, 10)), Some((3, 10))]),
    ];
    for r in &later {
        el.push(r, WindowName::Sample);
    }
    let ready = el.ready(&later[1].started, true);
    let d = el.detail(&ready[0], &[], DEFAULT_HORIZON);
    assert_eq!((d.term_from, d.term_to, d.leaderless_s), (9, 10, Some(0.0)), "{d:?}");
}

#[test]
fn only_reasons_that_take_a_member_away_are_kubernetes_causes() {
    assert_eq!(
        k8s_reason("Warning NodeNotReady: Node is not ready (cluster time t)"),
        "NodeNotReady"
    );
    let at = stamp(100.0);
    let pulled = [ev(
        99.0,
        "kubernetes",
        "etcd-0",
        "k8s_event",
        "Normal Pulled: image present (cluster time t)",
    )];
    assert_eq!(attribute(Some("etcd-0"), &at, &pulled, DEFAULT_HORIZON).0, Cause::Unexplained);
}
