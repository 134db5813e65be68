//! What one disruption learned, and baseline.json's `disruption` made of it: the
//! recovery's marks, the disruptor's own instants against what the rounds measured (the
//! ground truth), a routine operation's record, and the waterfall of every step from the
//! request. Pure: the trial (src/analysis/trial.rs) fills the log as the phase runs.

use crate::analysis::attribution::OWN;
use crate::analysis::recovery::RecoveryTracker;
use crate::model::baseline::{Disruption, DisruptionMethod, GroundTruth, Maintenance, Step};
use crate::model::clock::{Stamp, mono_secs};
use crate::model::event::{Event, EventKind};
use crate::model::member::MemberName;

/// What the disruption phase learned; in baseline.json however it ended.
#[derive(Debug)]
pub struct DisruptionLog {
    pub target: MemberName,
    pub was_leader: bool,
    /// The leader when the disruption was requested: a routine operation replaces several
    /// members, and its record says which one led.
    pub leader: Option<MemberName>,
    pub requested: Stamp,
    pub tracker: RecoveryTracker,
    /// The disruptor's own events and the watchers' events about the target.
    pub steps: Vec<Event>,
    pub attempts: u32,
    pub blocked_s: f64,
}

/// An event's instant in seconds since the request. A Kubernetes event only has the
/// server's wall time, placed against the request's wall time (in microseconds: in
/// milliseconds a server event could land up to 1 ms before a local one it follows).
fn since_request(req: Stamp, e: &Event) -> f64 {
    e.at.map_or_else(
        || (e.ts - req.utc).num_microseconds().map_or(0.0, |us| us as f64 / 1e6),
        |a| mono_secs(req.mono, a),
    )
}

/// The disruptor's own instants, each against what the rounds measured of it.
fn ground_truth(log: &DisruptionLog) -> Vec<GroundTruth> {
    let t = &log.tracker;
    let req = log.requested;
    log.steps
        .iter()
        // The disruptor's own instants (the watchers' events have no monotonic instant).
        .filter(|e| e.at.is_some())
        .map(|e| {
            let compared = match e.kind {
                k if OWN.contains(&k) && e.member == log.target.0 => {
                    t.lost.map(|m| ("member_lost_at", m))
                }
                EventKind::Restarted | EventKind::Continued => {
                    t.back.map(|m| ("member_back_at", m))
                }
                _ => None,
            };
            let truth = since_request(req, e);
            GroundTruth {
                kind: e.kind,
                at: e.ts,
                since_request_s: Some(truth),
                compared_with: compared.map(|(n, _)| n.to_owned()),
                measured_minus_truth_s: compared.map(|(_, m)| req.secs_to(&m.at) - truth),
            }
        })
        .collect()
}

/// A routine operation's record (a rolling restart, a drain: several members replaced).
fn maintenance(
    log: &DisruptionLog,
    method: DisruptionMethod,
    members: &[MemberName],
) -> Option<Maintenance> {
    let op = method.kube_method().filter(|m| m.is_maintenance())?;
    let own: Vec<(f64, &Event)> = log
        .steps
        .iter()
        .filter(|e| e.at.is_some())
        .map(|e| (since_request(log.requested, e), e))
        .collect();
    let names: Vec<String> = members.iter().map(|m| m.0.clone()).collect();
    Some(crate::analysis::maintenance::record(
        op,
        &own,
        &names,
        log.leader.as_ref().map(|m| m.0.as_str()),
    ))
}

/// Every step of the disruption in order, from the request: the disruptor's, the
/// watchers', what the rounds measured, and the canary's first write after the loss.
fn waterfall(log: &DisruptionLog, several: bool, writes_ok: Option<Stamp>) -> Vec<Step> {
    let t = &log.tracker;
    let req = log.requested;
    let mut steps: Vec<(f64, chrono::DateTime<chrono::Utc>, String)> =
        vec![(0.0, req.utc, "requested".to_owned())];
    // A routine operation's steps name their member: several are replaced.
    steps.extend(log.steps.iter().map(|e| {
        let name = if several && !e.member.is_empty() {
            format!("{} {}", e.kind, e.member)
        } else {
            e.kind.to_string()
        };
        (since_request(req, e), e.ts, name)
    }));
    for (m, label) in [
        (t.lost, "member_lost (measured)"),
        (t.back, "member_back (measured)"),
        (t.elected, "leader_elected (measured)"),
        (t.healthy, "healthy_list (measured)"),
    ] {
        if let Some(m) = m {
            steps.push((req.secs_to(&m.at), m.at.utc, label.to_owned()));
        }
    }
    // When a lock could be granted again.
    if let Some(w) = writes_ok {
        steps.push((req.secs_to(&w), w.utc, "writes_ok (canary)".to_owned()));
    }
    steps.retain(|(s, _, _)| *s >= 0.0);
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut prev = 0.0;
    steps
        .into_iter()
        .map(|(s, at, step)| {
            let st = Step { step, at, since_previous_s: s - prev, since_request_s: s };
            prev = s;
            st
        })
        .collect()
}

/// baseline.json's `disruption`: what the disruption phase learned, however it ended.
/// `writes_ok`: the canary's first successful write after the member was lost (after the
/// request when its loss was not seen).
pub fn disruption_record(
    log: DisruptionLog,
    method: DisruptionMethod,
    members: &[MemberName],
    writes_ok: Option<Stamp>,
) -> Disruption {
    let maintenance = maintenance(&log, method, members);
    let waterfall = waterfall(&log, maintenance.is_some(), writes_ok);
    let ground_truth = ground_truth(&log);
    let t = &log.tracker;
    let req = log.requested;
    Disruption {
        target: log.target.0.clone(),
        target_was_leader: log.was_leader,
        method,
        requested_at: req.utc,
        member_lost_at: t.lost.map(|m| m.at.utc),
        member_back_at: t.back.map(|m| m.at.utc),
        leader_elected_at: t.elected.map(|m| m.at.utc),
        healthy_at: t.healthy.map(|m| m.at.utc),
        loss_to_healthy_s: t.lost.zip(t.healthy).map(|(a, b)| a.at.secs_to(&b.at)),
        request_to_healthy_s: t.healthy.map(|h| req.secs_to(&h.at)),
        ground_truth,
        attempts: log.attempts,
        blocked_s: log.blocked_s,
        waterfall,
        maintenance,
    }
}
