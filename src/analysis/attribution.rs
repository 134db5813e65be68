//! Every election and why it happened. Pure: rounds and events.csv rows in,
//! [`ElectionDetail`]s out; no I/O, no clock (the rounds bring their own time).
//!
//! An election is a rise of the highest raft term any member reports. Its cause is the
//! first of these found among the events in the horizon before it (docs/counting.md):
//!
//! 1. `own_disruption`: this sitting signalled or evicted the old leader;
//! 2. `kubernetes`: the API server reported something done to the old leader's pod or
//!    node (deletion, DisruptionTarget, a container killed, node not ready, preemption);
//! 3. `restart`: the old leader's process started again (its start time changed);
//! 4. `disk`: the old leader's fsyncs were slow (`slow_disk`, stamped with the start of
//!    the `/metrics` step that showed it), in the horizon or still so;
//! 5. `cpu`: the old leader's answers had turned slow and were still slow (or missing) at
//!    the election (`slow_answers`: a starved process answers late, then not at all);
//! 6. `unreachable`: leaderwatch could not reach the old leader (a whole probe failed);
//! 7. `network`: the old leader still answered but said it had no leader (`health_false`,
//!    RAFT NO LEADER: cut off from its peers, it stepped down), or a link to or from it
//!    went down (`peer_down`); either up to [`EVIDENCE_WAIT`] after the election, since
//!    both come after the election the cut caused;
//! 8. `unreachable` again: its probe went unanswered for a second (`unresponsive`);
//! 9. `stress`: the old leader's heartbeats failed or its applies were slow;
//! 10. otherwise `unexplained`.
//!
//! The order is that of the evidence's strength: a leader stalled on its disk also answers
//! slowly, then not at all, and says it has no leader after the election; a starved one
//! also stops answering altogether (its fsyncs look slow too, but not slow syncs alone:
//! see [`crate::analysis::events::slow_disk`]).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::model::baseline::{Cause, ElectionDetail, EventRef, WindowName};
use crate::model::clock::{Stamp, mono_secs};
use crate::model::event::{Event, EventKind, Source};
use crate::model::observation::Round;

/// How far before an election its cause is looked for, unless `--cause-horizon` says.
pub const DEFAULT_HORIZON: Duration = Duration::from_secs(30);

/// An election waits this long (in round time) for evidence that is written late but
/// happened before it: a restart is only seen once the member answers again, and a
/// probe that timed out is only written when it times out.
pub const EVIDENCE_WAIT: Duration = Duration::from_secs(10);

/// ... and, until the old leader's `/metrics` has been read again after the election, up
/// to this long: a leader stalled on its disk answers no probe while it stalls, and its
/// fsync histogram tells of the stall only at the next read.
pub const EVIDENCE_WAIT_MAX: Duration = Duration::from_secs(60);

/// The disruptor's own actions on a member.
/// (`rollout_replacing`: the StatefulSet controller replacing a member after our rollout
/// restart.)
pub const OWN: [EventKind; 6] = [
    EventKind::SigtermSent,
    EventKind::SigkillSent,
    EventKind::SigstopSent,
    EventKind::EvictionAccepted,
    EventKind::DeleteAccepted,
    EventKind::RolloutReplacing,
];
/// Pod events from the watcher that take a member away.
const KUBE_KINDS: [EventKind; 3] =
    [EventKind::PodDeleted, EventKind::PodDeleting, EventKind::DisruptionTarget];
/// Reasons of core/v1 Events (`k8s_event` rows) that take a member away.
const KUBE_REASONS: [&str; 8] = [
    "Killing",
    "Preempting",
    "Evicted",
    "NodeNotReady",
    "NodeShutdown",
    "TaintManagerEviction",
    "BackOff",
    "Rebooted",
];

/// An election seen, waiting for its new leader and for late evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The window of the round that observed it.
    pub window: WindowName,
    pub term_from: u64,
    pub term_to: u64,
    pub after: Stamp,
    pub observed: Stamp,
    pub old_leader: Option<u64>,
    pub new_leader: Option<u64>,
    pub leaderless_s: Option<f64>,
}

/// Finds elections in a run, one round at a time. O(members) state plus the elections
/// not yet attributed.
#[derive(Debug, Clone, Default)]
pub struct Elections {
    /// Member count of the cluster (the quorum is a majority of it).
    members: usize,
    /// Member id -> name, from the Status answers.
    names: BTreeMap<u64, String>,
    max_term: Option<u64>,
    /// Start of the last round that showed `max_term`.
    last_at_max: Option<Stamp>,
    /// The leader the rounds agreed on last (highest term wins, as in counting).
    leader: Option<u64>,
    /// The leader before a change that no term rise has explained yet: the Status term is
    /// that of the last applied entry, so after a hand-over the new leader can be named a
    /// round before its term shows.
    replaced: Option<u64>,
    /// Start of the first round of the current stretch without a quorum leader.
    leaderless_since: Option<Stamp>,
    /// Start of the last round in which each member's `/metrics` answered, by name.
    metrics_read: BTreeMap<String, Stamp>,
    pending: Vec<Pending>,
}

impl Elections {
    pub fn new(members: usize) -> Self {
        Elections { members, ..Self::default() }
    }

    /// A member's name from its id, if a Status answer told it.
    pub fn name(&self, id: u64) -> Option<&str> {
        self.names.get(&id).map(String::as_str)
    }

    /// A member's name from its hex id (the `To` label of the peer metrics).
    pub fn peer_name(&self, hex: &str) -> Option<String> {
        u64::from_str_radix(hex, 16).ok().and_then(|id| self.name(id)).map(str::to_owned)
    }

    /// The leader id that a majority of all members report (`None`: no majority agrees).
    fn quorum_leader(&self, r: &Round) -> Option<(u64, u64)> {
        let mut votes: BTreeMap<u64, (usize, u64)> = BTreeMap::new(); // leader -> (count, max term)
        for s in r.observations.iter().filter_map(|o| o.status.ok()) {
            if s.leader_id != 0 {
                let v = votes.entry(s.leader_id).or_default();
                v.0 += 1;
                v.1 = v.1.max(s.raft_term);
            }
        }
        let quorum = self.members / 2 + 1;
        votes.into_iter().find(|(_, (n, _))| *n >= quorum).map(|(l, (_, t))| (l, t))
    }

    /// One round, in window `window`.
    pub fn push(&mut self, r: &Round, window: WindowName) {
        for o in &r.observations {
            if let Some(s) = o.status.ok().filter(|s| s.member_id != 0) {
                self.names.entry(s.member_id).or_insert_with(|| o.member.0.clone());
            }
            if o.metrics.answered().is_some() {
                self.metrics_read.insert(o.member.0.clone(), r.started);
            }
        }
        let mut rose = false;
        if let Some(t) = crate::analysis::recovery::max_term(r) {
            match self.max_term {
                Some(m) if t > m => {
                    rose = true;
                    self.pending.push(Pending {
                        window,
                        term_from: m,
                        term_to: t,
                        after: self.last_at_max.unwrap_or(r.started),
                        observed: r.started,
                        old_leader: self.replaced.take().or(self.leader),
                        new_leader: None,
                        leaderless_s: None,
                    })
                }
                _ => {}
            }
            if self.max_term.is_none_or(|m| t >= m) {
                self.max_term = Some(t);
                self.last_at_max = Some(r.started);
            }
        }
        if let Some(l) = crate::analysis::counts::round_leader(&r.view().points) {
            if !rose && self.replaced.is_none() && self.leader.is_some_and(|old| old != l) {
                self.replaced = self.leader;
            } else if self.replaced == Some(l) {
                self.replaced = None; // back to the old leader: nothing to explain
            }
            self.leader = Some(l);
        }
        match self.quorum_leader(r) {
            None => {
                self.leaderless_since.get_or_insert(r.started);
            }
            Some((l, term)) => {
                for p in
                    self.pending.iter_mut().filter(|p| p.new_leader.is_none() && term >= p.term_to)
                {
                    p.new_leader = Some(l);
                    p.leaderless_s =
                        Some(self.leaderless_since.map_or(0.0, |s| s.secs_to(&r.started).max(0.0)));
                }
                self.leaderless_since = None;
            }
        }
    }

    /// The elections ready for their cause: a quorum agreed on the new leader,
    /// [`EVIDENCE_WAIT`] has passed since and the old leader's `/metrics` was read after
    /// it (or [`EVIDENCE_WAIT_MAX`] passed); or `force` (the run is ending).
    pub fn ready(&mut self, now: &Stamp, force: bool) -> Vec<Pending> {
        let read_since = |p: &Pending| {
            let old = p.old_leader.and_then(|l| self.name(l));
            old.and_then(|n| self.metrics_read.get(n)).is_some_and(|t| p.observed.secs_to(t) > 0.0)
        };
        let ready: Vec<bool> = self
            .pending
            .iter()
            .map(|p| {
                let waited = p.observed.secs_to(now);
                force
                    || (p.new_leader.is_some()
                        && waited >= EVIDENCE_WAIT.as_secs_f64()
                        && (read_since(p) || waited >= EVIDENCE_WAIT_MAX.as_secs_f64()))
            })
            .collect();
        let mut done = Vec::new();
        for (p, r) in std::mem::take(&mut self.pending).into_iter().zip(ready) {
            if r { done.push(p) } else { self.pending.push(p) }
        }
        done
    }

    /// The detail of a ready election, its cause found among `events`.
    pub fn detail(&self, p: &Pending, events: &[Event], horizon: Duration) -> ElectionDetail {
        let name = |id: Option<u64>| {
            id.map(|l| self.name(l).map_or_else(|| format!("{l:x}"), str::to_owned))
        };
        let old = name(p.old_leader);
        let (cause, event) = attribute(old.as_deref(), &p.observed, events, horizon);
        ElectionDetail {
            term_from: p.term_from,
            term_to: p.term_to,
            after: p.after.utc,
            observed_at: p.observed.utc,
            old_leader: old,
            new_leader: name(p.new_leader),
            leaderless_s: p.leaderless_s,
            cause,
            cause_event: event.map(|e| EventRef {
                ts: e.ts,
                source: e.source,
                member: e.member.clone(),
                kind: e.kind,
                detail: e.detail.clone(),
            }),
            write_unavailable_s: None,
            lock_unavailable_s: None,
            write_unavailable_one_in_flight_s: None,
        }
    }
}

/// Seconds from event `e` to the election at `at`: monotonic when both have it, else by
/// the wall clock (Kubernetes events and process start times only have that).
fn before(e: &Event, at: &Stamp) -> f64 {
    match e.at {
        Some(m) => mono_secs(m, at.mono),
        None => (at.utc - e.ts).num_microseconds().map_or(f64::NAN, |us| us as f64 / 1e6),
    }
}

/// The reason of a `k8s_event` row (`"<type> <reason>: <message> ..."`, as src/k8s/watch.rs
/// writes it).
pub fn k8s_reason(detail: &str) -> &str {
    detail.split(':').next().and_then(|head| head.split_whitespace().nth(1)).unwrap_or("")
}

/// The run-wide rows that open and close our routine operation: evidence although they name
/// no member (src/io/recorder.rs keeps them).
pub const OPEN: [EventKind; 2] = [EventKind::RolloutRequested, EventKind::NodeCordoned];
pub const CLOSE: [EventKind; 2] = [EventKind::RolloutComplete, EventKind::NodeUncordoned];

/// Our routine operation (a rollout restart, a drain) was under way at `at`: its start is
/// the latest of those rows before `at`, not its end.
fn operation_open(events: &[Event], at: &Stamp) -> bool {
    events
        .iter()
        .filter(|e| OPEN.contains(&e.kind) || CLOSE.contains(&e.kind))
        .map(|e| (before(e, at), e))
        .filter(|(d, _)| *d >= 0.0)
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .is_some_and(|(_, e)| OPEN.contains(&e.kind))
}

/// Kubernetes took a pod or node away: a watcher row of those kinds, or a core/v1 Event
/// with one of those reasons.
pub fn is_kubernetes_disruption(source: Source, kind: EventKind, detail: &str) -> bool {
    source == Source::Kubernetes
        && (KUBE_KINDS.contains(&kind)
            || (kind == EventKind::K8sEvent && KUBE_REASONS.contains(&k8s_reason(detail))))
}

/// The cause of an election observed at `at` whose old leader was `old`, and the
/// events.csv row it rests on. Pure; `events` in any order.
pub fn attribute<'a>(
    old: Option<&str>,
    at: &Stamp,
    events: &'a [Event],
    horizon: Duration,
) -> (Cause, Option<&'a Event>) {
    let Some(old) = old else { return (Cause::Unexplained, None) };
    let h = horizon.as_secs_f64();
    let mut mine: Vec<(f64, &Event)> = events
        .iter()
        .filter(|e| e.member == old)
        .map(|e| (before(e, at), e))
        .filter(|(d, _)| *d >= 0.0)
        .collect();
    // Latest first: the closest evidence names the cause.
    mine.sort_by(|a, b| a.0.total_cmp(&b.0));
    let within = |d: f64| d <= h;
    let point = |pred: &dyn Fn(&Event) -> bool| {
        mine.iter().find(|(d, e)| within(*d) && pred(e)).map(|(_, e)| *e)
    };
    // A state that began before the horizon and was still on counts too.
    let episode = |start: EventKind, end: EventKind| -> Option<&'a Event> {
        mine.iter()
            .find(|(_, e)| e.kind == start || e.kind == end)
            .filter(|(_, e)| e.kind == start)
            .map(|(_, e)| *e)
    };
    if let Some(e) = point(&|e| OWN.contains(&e.kind)) {
        return (Cause::OwnDisruption, Some(e));
    }
    if let Some(e) = point(&|e| is_kubernetes_disruption(e.source, e.kind, &e.detail)) {
        // Inside a routine operation we started, what the controllers and the kubelet do to
        // the members is ours: the pod watcher often sees it before our own poll does.
        let ours = operation_open(events, at);
        return (if ours { Cause::OwnDisruption } else { Cause::Kubernetes }, Some(e));
    }
    if let Some(e) = point(&|e| e.kind == EventKind::ProcessRestarted) {
        return (Cause::Restart, Some(e));
    }
    if let Some(e) = point(&|e| e.kind == EventKind::SlowDisk)
        .or_else(|| episode(EventKind::SlowDisk, EventKind::DiskOk))
    {
        return (Cause::Disk, Some(e));
    }
    // Only while still on: one slow answer long before a freeze is no starvation.
    if let Some(e) = episode(EventKind::SlowAnswers, EventKind::AnswersPrompt) {
        return (Cause::Cpu, Some(e));
    }
    if let Some(e) = point(&|e| e.kind == EventKind::Unreachable)
        .or_else(|| episode(EventKind::Unreachable, EventKind::Back))
    {
        return (Cause::Unreachable, Some(e));
    }
    // Cut off from its peers, but answering: no whole probe failed, and the old leader
    // said it had no leader (a partitioned leader steps down; a slow `/health` first makes
    // it `unresponsive`, which therefore comes after this).
    if let Some(e) = without_leader(old, at, events, h).or_else(|| link_down(old, at, events, h)) {
        return (Cause::Network, Some(e));
    }
    if let Some(e) = point(&|e| e.kind == EventKind::Unresponsive) {
        return (Cause::Unreachable, Some(e));
    }
    if let Some(e) = point(&|e| e.kind == EventKind::Stress)
        .or_else(|| episode(EventKind::Stress, EventKind::StressOver))
    {
        return (Cause::Stress, Some(e));
    }
    (Cause::Unexplained, None)
}

/// The old leader's `health_false` row saying it has no leader (etcd's `RAFT NO LEADER`):
/// answering leaderwatch while it hears no quorum is a member cut off from its peers.
fn without_leader<'a>(
    old: &str,
    at: &Stamp,
    events: &'a [Event],
    horizon: f64,
) -> Option<&'a Event> {
    closest_around(at, events, horizon, |e| {
        e.member == old
            && e.kind == EventKind::HealthFalse
            && e.detail.to_ascii_uppercase().contains("NO LEADER")
    })
}

/// The `peer_down` row that involves `old` (on it, or on a peer whose link to it went
/// down: the engine names the peer, `to <name> (<id>)`).
fn link_down<'a>(old: &str, at: &Stamp, events: &'a [Event], horizon: f64) -> Option<&'a Event> {
    let to_old = format!("to {old} (");
    closest_around(at, events, horizon, |e| {
        e.kind == EventKind::PeerDown && (e.member == old || e.detail.starts_with(&to_old))
    })
}

/// The row matching `pred` closest to the election at `at`, from `horizon` seconds before
/// to [`EVIDENCE_WAIT`] after: evidence of a cut comes after the election it caused.
fn closest_around<'a>(
    at: &Stamp,
    events: &'a [Event],
    horizon: f64,
    pred: impl Fn(&Event) -> bool,
) -> Option<&'a Event> {
    events
        .iter()
        .filter(|e| pred(e))
        .map(|e| (before(e, at), e))
        .filter(|(d, _)| (-EVIDENCE_WAIT.as_secs_f64()..=horizon).contains(d))
        .min_by(|a, b| a.0.abs().total_cmp(&b.0.abs()))
        .map(|(_, e)| e)
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            (cause, e.map(|e| e.kind.as_str())),
            (Cause::OwnDisruption, Some("pod_deleting"))
        );
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
            attribute(Some("etcd-0"), &at, &[ev(101.0, "local", "etcd-0", "sigkill_sent", "")], h)
                .0,
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
        assert_eq!(
            (cause, row.map(|e| e.kind.as_str())),
            (Cause::Unreachable, Some("unresponsive"))
        );
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
        assert_eq!(
            attribute(Some("etcd-0"), &at, &evs[1..], DEFAULT_HORIZON).0,
            Cause::Unreachable
        );
        // Prompt again before the freeze: a freeze.
        let prompt = [
            evs[0].clone(),
            ev(93.0, "leaderwatch", "etcd-0", "answers_prompt", ""),
            evs[1].clone(),
        ];
        assert_eq!(attribute(Some("etcd-0"), &at, &prompt, DEFAULT_HORIZON).0, Cause::Unreachable);
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
        assert_eq!(
            attribute(Some("etcd-0"), &at, &evs[..1], DEFAULT_HORIZON).0,
            Cause::Unreachable
        );
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
        let late =
            [ev(111.0, "leaderwatch", "etcd-1", "peer_down", "to etcd-0 (a1): stream inactive")];
        assert_eq!(attribute(Some("etcd-0"), &at, &late, DEFAULT_HORIZON).0, Cause::Unexplained);
        // An unreachable leader stays unreachable: the links drop because it is gone.
        let gone =
            [on_peer[0].clone(), ev(99.0, "leaderwatch", "etcd-0", "unreachable", "refused")];
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
}
