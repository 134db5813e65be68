//! Every election and why it happened. Pure: rounds and events.csv rows in,
//! [`ElectionDetail`]s out; no I/O, no clock (the rounds bring their own time).
//!
//! An election is a rise of the highest raft term any member reports. Its cause is the
//! first of these found among the events in the horizon before it (docs/counting.md):
//!
//! 1. `own_disruption`: this sitting signalled or evicted the old leader;
//! 2. `kubernetes`: the API server reported something done to the old leader's pod or
//!    node (deletion, DisruptionTarget, a container killed, node not ready, preemption);
//! 3. `node`: the old leader's node went away (`node_lease_stale`, `node_not_ready`, from
//!    src/k8s/nodes.rs, stamped with the node's last lease renewal);
//! 4. `restart`: the old leader's process started again (its start time changed);
//! 5. `disk`: the old leader's fsyncs were slow (`slow_disk`, stamped with the start of
//!    the `/metrics` step that showed it), in the horizon (or up to [`EVIDENCE_WAIT`]
//!    after) or still so, while its peers' round trips to it were prompt (no
//!    `slow_round_trips` spell to it on); `cpu|disk` when that step began more than
//!    [`EVIDENCE_WAIT`] before the election and the leader answered slowly or not at all
//!    since (the rows cannot tell the two apart);
//! 6. `cpu`: the old leader's answers had turned slow and were still slow (or missing) at
//!    the election (`slow_answers`: a starved process answers late, then not at all);
//! 7. `unreachable`: leaderwatch could not reach the old leader (a whole probe failed),
//!    unless its first answer after the election was slow (`slow_answers` with its
//!    `back`) and it stayed so: then `cpu`, as a starved leader often goes silent before
//!    it answers late;
//! 8. `network`: the old leader still answered but said it had no leader (`health_false`,
//!    RAFT NO LEADER, or its Status's leader 0: cut off from its peers, it stepped down), or a link to or from it
//!    went down (`peer_down`); either up to [`EVIDENCE_WAIT`] after the election, since
//!    both come after the election the cut caused;
//! 9. `unreachable` again: its probe went unanswered for a second (`unresponsive`);
//! 10. `stress`: the old leader's heartbeats failed or its applies were slow;
//! 11. otherwise `unexplained`.
//!
//! The order is that of the evidence's strength: a leader stalled on its disk also answers
//! slowly, then not at all, and says it has no leader after the election; a starved one
//! also stops answering altogether (its fsyncs look slow too, but so does its `/metrics`:
//! see [`crate::analysis::member_changes::slow_disk`]).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::model::baseline::{ElectionDetail, EventRef, WindowName};
use crate::model::clock::{Stamp, mono_secs};
use crate::model::event::Cause;
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
/// The node watcher's rows that say a member's node went away (src/k8s/nodes.rs).
pub const NODE_GONE: [EventKind; 2] = [EventKind::NodeLeaseStale, EventKind::NodeNotReady];
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

/// A stretch of rounds in which no majority of the members named a leader.
#[derive(Debug, Clone, PartialEq)]
struct Leaderless {
    since: Stamp,
    until: Stamp,
    /// Who a majority named in the round that ended it.
    ended_by: u64,
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
    /// The last stretch without a quorum leader that no election has taken yet, and the
    /// leader that ended it: the new leader can be named a round before its term shows,
    /// so the stretch ends before the election it belongs to is seen.
    unclaimed: Option<Leaderless>,
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
                if let Some(since) = self.leaderless_since.take() {
                    self.unclaimed = Some(Leaderless { since, until: r.started, ended_by: l });
                }
                for p in
                    self.pending.iter_mut().filter(|p| p.new_leader.is_none() && term >= p.term_to)
                {
                    p.new_leader = Some(l);
                    // The stretch this leader ended, if it ended no earlier than the last
                    // round at the old term (an older one belongs to an older election).
                    let s = self
                        .unclaimed
                        .take_if(|s| s.ended_by == l && p.after.secs_to(&s.until) >= 0.0);
                    p.leaderless_s = Some(s.map_or(0.0, |s| s.since.secs_to(&s.until).max(0.0)));
                }
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
    // The node went away: its lease stopped, or NotReady. The rows come late (20-50 s
    // after the loss) stamped with the node's last renewal, so they stand before the
    // election; the engine revises the cause it gave before they came.
    if let Some(e) = point(&|e| NODE_GONE.contains(&e.kind)) {
        return (Cause::Node, Some(e));
    }
    if let Some(e) = point(&|e| e.kind == EventKind::ProcessRestarted) {
        return (Cause::Restart, Some(e));
    }
    // A sync that stalled the leader is timed when it returns, often after the election:
    // the step that shows it may begin just after (fault-repeat 2026-12-06).
    let slow_syncs = |e: &Event| e.member == old && e.kind == EventKind::SlowDisk;
    if let Some(e) = closest_around(at, events, h, slow_syncs)
        .or_else(|| episode(EventKind::SlowDisk, EventKind::DiskOk))
        .filter(|_| !round_trips_slow_to(old, at, events))
    {
        // A slow step that began long before the election, the leader slow or silent
        // since: a disk that stayed slow and a CPU starved after it look the same here.
        if before(e, at) > EVIDENCE_WAIT.as_secs_f64() && starved_since(old, e, at, events) {
            return (Cause::CpuOrDisk, Some(e));
        }
        return (Cause::Disk, Some(e));
    }
    // Only while still on: one slow answer long before a freeze is no starvation.
    if let Some(e) = episode(EventKind::SlowAnswers, EventKind::AnswersPrompt) {
        return (Cause::Cpu, Some(e));
    }
    if let Some(e) = point(&|e| e.kind == EventKind::Unreachable)
        .or_else(|| episode(EventKind::Unreachable, EventKind::Back))
    {
        if let Some(slow) = back_slow(old, at, events) {
            return (Cause::Cpu, Some(slow));
        }
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

/// The `slow_answers` row with which the old leader, silent at the election at `at`, came
/// back (its first `back` after the election, up to [`EVIDENCE_WAIT_MAX`] later), if it
/// then stayed slow: its next word on answering is a missed one (`unresponsive`,
/// `unreachable`), not `answers_prompt`. A starved process answers again slowly and keeps
/// on so; a thawed one's first answer is slow only because it was asked while frozen, and
/// the next is prompt (fault-repeat 2026-12-06: a leader starved at 0.5 % went silent at
/// once and came back 9 s after the election answering in 1402 ms, then missed three
/// probes; a leader frozen 4 s came back answering in 1999 ms, then promptly).
fn back_slow<'a>(old: &str, at: &Stamp, events: &'a [Event]) -> Option<&'a Event> {
    let after = |e: &Event| -before(e, at);
    let mut later: Vec<(f64, &Event)> = events
        .iter()
        .filter(|e| e.member == old)
        .map(|e| (after(e), e))
        .filter(|(d, _)| *d >= 0.0)
        .collect();
    later.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (t, back) = later.iter().find(|(_, e)| e.kind == EventKind::Back)?;
    if *t > EVIDENCE_WAIT_MAX.as_secs_f64() {
        return None;
    }
    let slow = later.iter().find(|(_, e)| e.kind == EventKind::SlowAnswers && e.ts == back.ts)?;
    let next = later.iter().filter(|(d, _)| d > t).find(|(_, e)| {
        matches!(
            e.kind,
            EventKind::AnswersPrompt | EventKind::Unresponsive | EventKind::Unreachable
        )
    });
    next.filter(|(_, e)| e.kind != EventKind::AnswersPrompt).map(|_| slow.1)
}

/// The old leader's row saying it has no leader (`health_false` with etcd's `RAFT NO
/// LEADER`, or `leader_changed` to 0 from its Status): answering leaderwatch while it hears
/// no quorum is a member cut off from its peers.
fn without_leader<'a>(
    old: &str,
    at: &Stamp,
    events: &'a [Event],
    horizon: f64,
) -> Option<&'a Event> {
    closest_around(at, events, horizon, |e| {
        e.member == old
            && ((e.kind == EventKind::HealthFalse
                && e.detail.to_ascii_uppercase().contains("NO LEADER"))
                // Its Status saying the same: leader 0 (fault-repeat 2026-12-06, a leader
                // cut off one way whose `/health` never answered "no leader").
                || (e.kind == EventKind::LeaderChanged && e.detail.contains(" -> 0 (")))
    })
}

/// A peer's round trips to `old` were slow at the election (its latest `slow_round_trips`
/// / `round_trips_ok` row about `old`, up to [`EVIDENCE_WAIT`] after, is the former): a
/// member whose disk is slow still answers rafthttp's prober at once (fault-repeat
/// 2026-12-06: peers' round trips to a leader waiting 2 s on each fsync stayed under
/// 26 ms), a starved one late (0.41 s at 0.5 % of a core, while its fsyncs, timed by a
/// starved process, looked as slow as a slow disk's). etcd exports the prober's smoothed
/// round trip only every 30 s (5 s while a probe fails), so a spell still on counts, not
/// only one that began near the election.
fn round_trips_slow_to(old: &str, at: &Stamp, events: &[Event]) -> bool {
    let to_old = format!("to {old} (");
    let wait = EVIDENCE_WAIT.as_secs_f64();
    let mut latest: BTreeMap<&str, (f64, EventKind)> = BTreeMap::new();
    for e in events.iter().filter(|e| {
        matches!(e.kind, EventKind::SlowRoundTrips | EventKind::RoundTripsOk)
            && e.member != old
            && e.detail.starts_with(&to_old)
    }) {
        let d = before(e, at);
        if d < -wait {
            continue;
        }
        let entry = latest.entry(e.member.as_str()).or_insert((f64::INFINITY, e.kind));
        if d < entry.0 {
            *entry = (d, e.kind);
        }
    }
    latest.values().any(|(_, k)| *k == EventKind::SlowRoundTrips)
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
/// The old leader answered slowly or not at all from the step of `disk` on, up to
/// [`EVIDENCE_WAIT`] after the election (a starved leader goes silent after it).
fn starved_since(old: &str, disk: &Event, at: &Stamp, events: &[Event]) -> bool {
    let from = before(disk, at);
    events.iter().filter(|e| e.member == old).any(|e| {
        let d = before(e, at);
        matches!(e.kind, EventKind::SlowAnswers | EventKind::Unresponsive | EventKind::Unreachable)
            && d < from
            && d >= -EVIDENCE_WAIT.as_secs_f64()
    })
}

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
mod tests;
