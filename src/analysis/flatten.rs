//! A baseline flattened into the tidy list of its figures ([`measurements`]), each a
//! [`Measurement`] (one row, src/model/measurement.rs): the window table, the health table,
//! the CSV and `compare` only format, group or match that list. And [`compare`]: two lists
//! side by side. Pure.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use chrono::{DateTime, Utc};

use crate::analysis::attribution::k8s_reason;
use crate::model::baseline::{
    Baseline, Disruption, ElectionDetail, EventRef, Flag, MemberHealth, WindowName, WindowRecord,
};
use crate::model::canary::ClientFigures;
use crate::model::event::Cause;
use crate::model::event::EventKind;
use crate::model::lock::{LockFigures, LockSafety, Verdict};
use crate::model::measurement::{
    BYTES, CLIENT, COUNT, LOCK, Measurement, PER_DISRUPTION, RECOVERY, SECONDS, TERMS,
};

/// An election's possible causes (src/analysis/attribution.rs), in its order of precedence; each is
/// an `elections_<cause>` figure.
pub const CAUSES: &[Cause] = Cause::ALL;

/// What the figures of one window (or of the recovery) share.
struct Place<'a> {
    b: &'a Baseline,
    source: String,
    window: &'a str,
    label: String,
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
    secs: Option<f64>,
}

impl Place<'_> {
    fn figure(
        &self,
        member: &str,
        figure: &str,
        value: Option<f64>,
        unit: &'static str,
    ) -> Measurement {
        // No threshold, no note: the callers that have one set it.
        Measurement {
            run_id: self.b.run_id.clone(),
            source: self.source.clone(),
            environment: self.b.environment.description.clone(),
            window: self.window.to_owned(),
            member: member.to_owned(),
            figure: figure.to_owned(),
            value,
            unit,
            label: self.label.clone(),
            window_start: self.start,
            window_end: self.end,
            window_s: self.secs,
            target_role: self.b.disruption.as_ref().map_or("", |d| d.role()),
            ..Measurement::default()
        }
    }
}

/// Every figure of one baseline, in a fixed order: per window (file order) its cluster-wide
/// figures, then each member's health (members sorted); then the recovery.
///
/// - cluster-wide, every window: `duration_s`, `raw_sum_start`, `raw_sum_end`,
///   `reset_aware_increase`, `elections` (raft-term delta), `leader_transitions`;
/// - `elections_<cause>` for each of [`CAUSES`] (the raft terms of the elections
///   with that cause, so they add up to `elections`); per election, in order,
///   `election_<n>_leaderless_s` with its cause in `note`; `leaderless_s_max`;
/// - per member: `wal_fsyncs`, `wal_fsync_p50_s`, `wal_fsync_p99_s`,
///   `backend_commits`, `backend_commit_p99_s`, `peer_rtt_p99_s{<peer>}` per peer,
///   `heartbeat_send_failures`, `slow_applies`, `proposals_failed`, `slow_read_indexes`,
///   `db_size_bytes`, `quota_bytes`, `restarts`;
/// - per window with the canary: `client_<write|read>_<ops|failures|availability|p50_s|
///   p99_s|max_s|longest_unavailable_s>`;
/// - `client` (the disruption window's canary writes): `write_longest_unavailable_s`,
///   `write_longest_unavailable_one_in_flight_s` (runs since the canary overlaps its ops),
///   `write_ops`, `write_failures`, `write_p99_s`, and `election_<n>_write_unavailable_s`
///   (with `election_<n>_write_unavailable_one_in_flight_s`);
/// - per window with the lock canary: `lock_<grants|acquire_failures|applied_after_error|
///   leases_lost|leases_lost_while_held|longest_unavailable_s|handover_p50_s>`;
/// - `lock` (the disruption window's lock canary, and the run's safety):
///   `lock_longest_unavailable_s`, `lock_handover_p50_s`, `lock_grants`, `leases_lost`,
///   `leases_lost_while_held`, `grants_applied_after_error`, `lock_safety_violations`
///   (its verdict in `note`), and `election_<n>_lock_unavailable_s`;
/// - `recovery`: `loss_to_healthy_s`, `request_to_healthy_s`, `kept_down_s`, `attempts`,
///   `blocked_s`; a rolling restart or drain adds `operation_s`, `members_replaced` and
///   per member `member_down_s` (terminating to Ready).
pub fn measurements(path: &Path, b: &Baseline) -> Vec<Measurement> {
    let source = path.display().to_string();
    let mut out = Vec::new();
    for w in &b.windows {
        let at = Place {
            b,
            source: source.clone(),
            window: w.name.as_str(),
            label: window_label(w, b),
            start: w.start,
            end: Some(w.end),
            secs: Some(w.duration_s),
        };
        let c = &w.leader_changes;
        for (figure, value, unit) in [
            ("duration_s", Some(w.duration_s), SECONDS),
            ("raw_sum_start", c.raw_sum_start, COUNT),
            ("raw_sum_end", c.raw_sum_end, COUNT),
            ("reset_aware_increase", Some(c.reset_aware_increase), COUNT),
            ("elections", w.elections.map(|e| e as f64), TERMS),
            ("leader_transitions", Some(w.leader_transitions.len() as f64), COUNT),
        ] {
            out.push(at.figure("", figure, value, unit));
        }
        out.extend(election_figures(&at, w));
        if let Some(c) = &w.client {
            out.extend(client_figures(&at, c));
        }
        if let Some(l) = &w.lock {
            out.extend(lock_figures(&at, l));
        }
        for (member, h) in &w.health {
            out.extend(health_figures(&at, member, h));
        }
    }
    if let Some(d) = &b.disruption {
        out.extend(client_row(b, &source, d));
        out.extend(lock_row(b, &source, d));
        out.extend(per_disruption_row(b, &source, d));
        out.extend(recovery_figures(b, source, d));
    }
    out
}

/// Elections from the disruption request to the end of settle: the disruption and settle
/// windows' raft-term deltas added. `None` without both windows or with either unknown
/// (a run cut short): never a partial sum. `report --alert-rule` derives its threshold
/// from this figure.
pub fn elections_per_disruption(b: &Baseline) -> Option<u64> {
    let d = b.window(WindowName::Disruption)?.elections?;
    let s = b.window(WindowName::Settle)?.elections?;
    Some(d + s)
}

/// The one `per_disruption` row: [`elections_per_disruption`], spanning both windows.
fn per_disruption_row(b: &Baseline, source: &str, d: &Disruption) -> Option<Measurement> {
    let first = b.window(WindowName::Disruption)?;
    let end = b.window(WindowName::Settle).map(|s| s.end).unwrap_or(first.end);
    let at = Place {
        b,
        source: source.to_owned(),
        window: PER_DISRUPTION,
        label: format!(
            "elections per disruption, request to the end of settle ({}, target {} = {})",
            d.method,
            d.target,
            d.role()
        ),
        start: first.start,
        end: Some(end),
        secs: Some(
            b.windows.iter().filter(|w| w.name != WindowName::AtRest).map(|w| w.duration_s).sum(),
        ),
    };
    Some(at.figure("", "elections", elections_per_disruption(b).map(|e| e as f64), TERMS))
}

/// Per window, what the canary saw: `client_<kind>_<figure>` for write and read.
fn client_figures(at: &Place, c: &ClientFigures) -> Vec<Measurement> {
    let mut out = Vec::new();
    for (kind, k) in [("write", &c.write), ("read", &c.read)] {
        for (figure, value, unit) in [
            ("ops", Some(k.ops as f64), COUNT),
            ("failures", Some(k.failures as f64), COUNT),
            ("availability", k.availability, ""),
            ("p50_s", k.p50_ms.map(|v| v / 1000.0), SECONDS),
            ("p99_s", k.p99_ms.map(|v| v / 1000.0), SECONDS),
            ("max_s", k.max_ms.map(|v| v / 1000.0), SECONDS),
            ("longest_unavailable_s", k.longest_unavailable_s, SECONDS),
        ] {
            out.push(at.figure("", &format!("client_{kind}_{figure}"), value, unit));
        }
    }
    out
}

/// The row "client writes unavailable during the disruption": the disruption window's
/// canary writes (absent without the canary).
fn client_row(b: &Baseline, source: &str, d: &Disruption) -> Vec<Measurement> {
    let Some((w, c)) =
        b.window(WindowName::Disruption).and_then(|w| w.client.as_ref().map(|c| (w, c)))
    else {
        return Vec::new();
    };
    let role = d.role();
    let at = Place {
        b,
        source: source.to_owned(),
        window: CLIENT,
        label: format!(
            "client writes unavailable during the disruption (canary, {}, target {} = {role})",
            d.method, d.target
        ),
        start: w.start,
        end: Some(w.end),
        secs: Some(w.duration_s),
    };
    let mut out = vec![
        at.figure("", "write_longest_unavailable_s", c.write.longest_unavailable_s, SECONDS),
        at.figure("", "write_ops", Some(c.write.ops as f64), COUNT),
        at.figure("", "write_failures", Some(c.write.failures as f64), COUNT),
        at.figure("", "write_p99_s", c.write.p99_ms.map(|v| v / 1000.0), SECONDS),
    ];
    // Runs before the canary overlapped its ops have no one-in-flight figure: no row.
    if c.write.one_in_flight_longest_unavailable_s.is_some() {
        out.insert(
            1,
            at.figure(
                "",
                "write_longest_unavailable_one_in_flight_s",
                c.write.one_in_flight_longest_unavailable_s,
                SECONDS,
            ),
        );
    }
    for (i, e) in w.elections_detail.iter().enumerate() {
        out.push(per_election(&at, i, "write_unavailable_s", e.write_unavailable_s, e));
        if e.write_unavailable_one_in_flight_s.is_some() {
            let v = e.write_unavailable_one_in_flight_s;
            out.push(per_election(&at, i, "write_unavailable_one_in_flight_s", v, e));
        }
    }
    out
}

/// `election_<i+1>_<figure>` in seconds, its cause in `note`.
fn per_election(
    at: &Place,
    i: usize,
    figure: &str,
    value: Option<f64>,
    e: &ElectionDetail,
) -> Measurement {
    let mut m = at.figure("", &format!("election_{}_{figure}", i + 1), value, SECONDS);
    m.note = cause_phrase(e);
    m
}

/// Per window, what the lock canary saw: `lock_<figure>`.
fn lock_figures(at: &Place, l: &LockFigures) -> Vec<Measurement> {
    [
        ("grants", Some(l.grants as f64), COUNT),
        ("acquire_failures", Some(l.acquire_failures as f64), COUNT),
        ("applied_after_error", Some(l.applied_after_error as f64), COUNT),
        ("leases_lost", Some(l.leases_lost as f64), COUNT),
        ("leases_lost_while_held", Some(l.leases_lost_while_held as f64), COUNT),
        ("longest_unavailable_s", l.longest_unavailable_s, SECONDS),
        ("handover_p50_s", l.handover_p50_s, SECONDS),
    ]
    .into_iter()
    .map(|(figure, value, unit)| at.figure("", &format!("lock_{figure}"), value, unit))
    .collect()
}

/// The row "a lock during the disruption": the disruption window's lock canary (absent
/// without it) and the run's safety verdict over every grant.
fn lock_row(b: &Baseline, source: &str, d: &Disruption) -> Vec<Measurement> {
    let Some((w, l)) =
        b.window(WindowName::Disruption).and_then(|w| w.lock.as_ref().map(|l| (w, l)))
    else {
        return Vec::new();
    };
    let at = Place {
        b,
        source: source.to_owned(),
        window: LOCK,
        label: format!(
            "a lock unavailable during the disruption (lock canary, {}, target {} = {})",
            d.method,
            d.target,
            d.role()
        ),
        start: w.start,
        end: Some(w.end),
        secs: Some(w.duration_s),
    };
    let mut out = vec![
        at.figure("", "lock_longest_unavailable_s", l.longest_unavailable_s, SECONDS),
        at.figure("", "lock_handover_p50_s", l.handover_p50_s, SECONDS),
        at.figure("", "lock_grants", Some(l.grants as f64), COUNT),
        at.figure("", "leases_lost", Some(l.leases_lost as f64), COUNT),
        at.figure("", "leases_lost_while_held", Some(l.leases_lost_while_held as f64), COUNT),
        at.figure("", "grants_applied_after_error", Some(l.applied_after_error as f64), COUNT),
    ];
    out.push(safety_figure(&at, b.lock_safety.as_ref()));
    for (i, e) in w.elections_detail.iter().enumerate() {
        out.push(per_election(&at, i, "lock_unavailable_s", e.lock_unavailable_s, e));
    }
    out
}

/// `lock_safety_violations`: overlapping holds plus tokens that did not rise, over the
/// whole run; the verdict in `note`. Not known (empty) when nothing was checked.
fn safety_figure(at: &Place, s: Option<&LockSafety>) -> Measurement {
    let verdict = s.map_or(Verdict::NotChecked, |s| s.verdict);
    let value = s
        .filter(|s| s.verdict != Verdict::NotChecked)
        .map(|s| (s.overlaps.len() + s.tokens_not_increasing.len()) as f64);
    let mut m = at.figure("", "lock_safety_violations", value, COUNT);
    m.note = match s {
        Some(s) if s.verdict != Verdict::NotChecked => format!(
            "{verdict}: {} grants checked, {} without a recorded end",
            s.grants_checked, s.grants_without_end
        ),
        _ => verdict.to_string(),
    };
    m
}

fn election_figures(at: &Place, w: &WindowRecord) -> Vec<Measurement> {
    let detail = &w.elections_detail;
    let mut out = Vec::new();
    // No detail for a window that had elections: the causes are not known, not 0.
    let known = !detail.is_empty() || w.elections == Some(0);
    for &cause in CAUSES {
        let terms: u64 = detail
            .iter()
            .filter(|d| d.cause == cause)
            .map(|d| d.term_to.saturating_sub(d.term_from))
            .sum();
        out.push(at.figure(
            "",
            &format!("elections_{cause}"),
            known.then_some(terms as f64),
            TERMS,
        ));
    }
    for (i, d) in detail.iter().enumerate() {
        let mut m = at.figure("", &election_figure(i + 1), d.leaderless_s, SECONDS);
        m.note = cause_phrase(d);
        out.push(m);
    }
    if !detail.is_empty() {
        // One unknown election makes the maximum unknown.
        let max =
            detail.iter().map(|d| d.leaderless_s).try_fold(0.0_f64, |acc, v| v.map(|v| acc.max(v)));
        out.push(at.figure("", "leaderless_s_max", max, SECONDS));
    }
    out
}

fn election_figure(n: usize) -> String {
    format!("election_{n}_leaderless_s")
}

pub fn is_election_figure(figure: &str) -> bool {
    figure
        .strip_prefix("election_")
        .and_then(|r| r.strip_suffix("_leaderless_s"))
        .is_some_and(|n| n.parse::<usize>().is_ok())
}

/// The highest threshold `figure` went over, if any.
fn worst_flag<'a>(over: &'a [Flag], figure: &str) -> Option<&'a Flag> {
    over.iter().filter(|f| f.figure == figure).max_by(|a, b| a.threshold.total_cmp(&b.threshold))
}

fn peer_figure(peer: &str) -> String {
    format!("peer_rtt_p99_s{{{peer}}}")
}

fn health_figures(at: &Place, member: &str, h: &MemberHealth) -> Vec<Measurement> {
    let mut figures: Vec<(String, Option<f64>, &'static str)> = vec![
        ("wal_fsyncs".into(), h.wal_fsyncs, COUNT),
        ("wal_fsync_p50_s".into(), h.wal_fsync_p50_s, SECONDS),
        ("wal_fsync_p99_s".into(), h.wal_fsync_p99_s, SECONDS),
        ("backend_commits".into(), h.backend_commits, COUNT),
        ("backend_commit_p99_s".into(), h.backend_commit_p99_s, SECONDS),
    ];
    figures.extend(h.peer_rtt_p99_s.iter().map(|(peer, v)| (peer_figure(peer), *v, SECONDS)));
    figures.extend([
        ("heartbeat_send_failures".into(), h.heartbeat_send_failures, COUNT),
        ("slow_applies".into(), h.slow_applies, COUNT),
        ("proposals_failed".into(), h.proposals_failed, COUNT),
        ("slow_read_indexes".into(), h.slow_read_indexes, COUNT),
        ("db_size_bytes".into(), h.db_size_bytes, BYTES),
        ("quota_bytes".into(), h.quota_bytes, BYTES),
        ("restarts".into(), Some(f64::from(h.restarts)), COUNT),
    ]);
    // A flag on a figure this version does not list (a newer leaderwatch) still shows.
    for f in &h.over {
        if !figures.iter().any(|(name, _, _)| *name == f.figure) {
            figures.push((f.figure.clone(), Some(f.value), ""));
        }
    }
    figures
        .into_iter()
        .map(|(figure, value, unit)| {
            let mut m = at.figure(member, &figure, value, unit);
            if let Some(f) = worst_flag(&h.over, &figure) {
                m.over = true;
                m.threshold = Some(f.threshold);
                m.threshold_source = f.source.clone();
            }
            m
        })
        .collect()
}

fn recovery_figures(b: &Baseline, source: String, d: &Disruption) -> Vec<Measurement> {
    let role = d.role();
    // The span the table shows: member loss (else the request) to healthy; no end when the
    // cluster never got there.
    let (start, end, secs) = match (d.member_lost_at, d.healthy_at) {
        (Some(a), Some(h)) => (a, Some(h), Some(d.loss_to_healthy_s.unwrap_or_default())),
        (_, Some(h)) => (d.requested_at, Some(h), Some(d.request_to_healthy_s.unwrap_or_default())),
        _ => (d.requested_at, None, None),
    };
    let at = Place {
        b,
        source,
        window: RECOVERY,
        label: format!(
            "time from member loss to a healthy {}-member endpoint list ({}, target {} = {role})",
            b.environment.members.len(),
            d.method,
            d.target
        ),
        start,
        end,
        secs,
    };
    let kept = kept_down_s(d);
    let mut kept_down = at.figure("", "kept_down_s", kept.map(|k| k.0), SECONDS);
    kept_down.note = kept.map(|k| k.1.to_owned()).unwrap_or_default();
    let mut out = vec![
        at.figure("", "loss_to_healthy_s", d.loss_to_healthy_s, SECONDS),
        at.figure("", "request_to_healthy_s", d.request_to_healthy_s, SECONDS),
        kept_down,
        at.figure("", "attempts", Some(f64::from(d.attempts)), COUNT),
        at.figure("", "blocked_s", Some(d.blocked_s), SECONDS),
    ];
    // A rolling restart or a drain: the operation in all, and each member it replaced
    // (`note`: its place in the order and its node).
    if let Some(m) = &d.maintenance {
        out.push(at.figure("", "operation_s", m.operation_s, SECONDS));
        out.push(at.figure("", "members_replaced", Some(m.members.len() as f64), COUNT));
        for (i, r) in m.members.iter().enumerate() {
            let mut f = at.figure(&r.member, "member_down_s", r.down_s, SECONDS);
            f.note = format!(
                "replaced {} of {}{}{}",
                i + 1,
                m.members.len(),
                if r.was_leader { ", the leader" } else { "" },
                r.node.as_deref().map(|n| format!(", back on {n}")).unwrap_or_default()
            );
            out.push(f);
        }
    }
    out
}

/// How long a local rehearsal kept the member down on purpose (exit, or freeze, to restart
/// or thaw), from the disruptor's own instants: monotonic where recorded.
fn kept_down_s(d: &Disruption) -> Option<(f64, &'static str)> {
    let find = |kind: EventKind| d.ground_truth.iter().find(|g| g.kind == kind);
    let (a, b, how) = match (
        find(EventKind::Exited),
        find(EventKind::Restarted),
        find(EventKind::SigstopSent),
        find(EventKind::Continued),
    ) {
        (Some(a), Some(b), _, _) => (a, b, "exit → restart"),
        (_, _, Some(a), Some(b)) => (a, b, "frozen: SIGSTOP → SIGCONT"),
        _ => return None,
    };
    let secs = match (a.since_request_s, b.since_request_s) {
        (Some(x), Some(y)) => y - x,
        _ => (b.at - a.at).num_milliseconds() as f64 / 1000.0,
    };
    Some((secs, how))
}

/// An election's cause in a few words, e.g. "the SIGKILL of m1", "the eviction of
/// dlock-etcd-0", "unreachable m2", "unexplained"; with its terms when it took more than
/// one (a split vote).
pub fn cause_phrase(d: &ElectionDetail) -> String {
    let text = match &d.cause_event {
        _ if d.cause == Cause::Unexplained => "unexplained".to_owned(),
        Some(e) => event_phrase(d.cause, e),
        None => d.cause.as_str().replace('_', " "),
    };
    if d.term_to > d.term_from + 1 {
        format!("{text}, term {} → {}", d.term_from, d.term_to)
    } else {
        text
    }
}

fn event_phrase(cause: Cause, e: &EventRef) -> String {
    let m = &e.member;
    match (cause, e.kind) {
        (_, EventKind::EvictionAccepted) => format!("the eviction of {m}"),
        (_, EventKind::DeleteAccepted) => format!("the deletion of {m}"),
        (_, EventKind::RolloutReplacing) => format!("the rolling restart replacing {m}"),
        (_, k @ (EventKind::SigtermSent | EventKind::SigkillSent | EventKind::SigstopSent)) => {
            format!("the {} of {m}", k.as_str().trim_end_matches("_sent").to_uppercase())
        }
        (_, EventKind::PodDeleted | EventKind::PodDeleting) => {
            format!("the deletion of pod {m}")
        }
        (_, EventKind::DisruptionTarget) => format!("DisruptionTarget on {m}"),
        // "<type> <reason>: <message>", as src/k8s/watch.rs writes it.
        (_, EventKind::K8sEvent) => {
            let reason = Some(k8s_reason(&e.detail)).filter(|r| !r.is_empty()).unwrap_or("event");
            format!("Kubernetes {reason} on {m}")
        }
        (_, EventKind::ProcessRestarted) => format!("the restart of {m}"),
        (Cause::Unreachable, _) => format!("unreachable {m}"),
        (Cause::Stress, _) => format!("stress on {m}"),
        (Cause::Network, _) => format!("a link of {m} down ({})", e.detail),
        (Cause::Disk, _) => format!("a slow disk on {m} ({})", e.detail),
        (Cause::Cpu, _) => format!("slow answers from {m} ({})", e.detail),
        (Cause::Node, _) => format!("the loss of {m}'s node ({})", e.detail),
        (Cause::CpuOrDisk, _) => {
            format!("a slow disk or a starved CPU on {m}, not told apart ({})", e.detail)
        }
        (c, k) => format!("{} ({k} of {m})", c.as_str().replace('_', " ")),
    }
}

fn window_label(w: &WindowRecord, b: &Baseline) -> String {
    let mut label = window_name(w, b);
    if !w.full_length {
        label.push_str(" (cut short");
        if let Some(r) = &b.incomplete_reason {
            label.push_str(": ");
            label.push_str(r);
        }
        label.push(')');
    }
    label
}

fn window_name(w: &WindowRecord, b: &Baseline) -> String {
    let d = b.disruption.as_ref();
    match w.name {
        WindowName::AtRest => format!("leader changes at rest ({:.0} s idle)", w.duration_s),
        WindowName::Disruption => match d {
            Some(d) => format!(
                "leader changes from one disruption until healthy ({}, target {} = {})",
                d.method,
                d.target,
                d.role()
            ),
            None => "leader changes during the disruption".to_owned(),
        },
        WindowName::Settle => {
            format!("leader changes after recovery ({:.0} s settle)", w.duration_s)
        }
        other => format!("leader changes, window {other}"),
    }
}

/// One line of `compare`: a figure in A and in B, and B − A.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Difference {
    pub window: String,
    /// Empty for a cluster-wide figure.
    pub member: String,
    pub figure: String,
    pub unit: &'static str,
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub diff: Option<f64>,
}

/// Every figure of A next to B's, matched by window, member and figure: A's in A's order,
/// then those only B has.
pub fn compare(a: &[Measurement], b: &[Measurement]) -> Vec<Difference> {
    let (ia, ib) = (index(a), index(b));
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for m in a.iter().chain(b) {
        if !seen.insert(key(m)) {
            continue;
        }
        let va = ia.get(&key(m)).and_then(|x| x.value);
        let vb = ib.get(&key(m)).and_then(|x| x.value);
        out.push(Difference {
            window: m.window.clone(),
            member: m.member.clone(),
            figure: m.figure.clone(),
            unit: m.unit,
            a: va,
            b: vb,
            diff: va.zip(vb).map(|(x, y)| y - x),
        });
    }
    out
}

type Key<'a> = (&'a str, &'a str, &'a str);

fn key(m: &Measurement) -> Key<'_> {
    (&m.window, &m.member, &m.figure)
}

/// The first figure of each key (a baseline has each once).
fn index(ms: &[Measurement]) -> HashMap<Key<'_>, &Measurement> {
    let mut h = HashMap::new();
    for m in ms {
        h.entry(key(m)).or_insert(m);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::Source;

    fn detail(cause: Cause, kind: Option<&str>, member: &str, terms: (u64, u64)) -> ElectionDetail {
        let t = DateTime::<Utc>::default();
        ElectionDetail {
            term_from: terms.0,
            term_to: terms.1,
            after: t,
            observed_at: t,
            old_leader: Some(member.to_owned()),
            new_leader: None,
            leaderless_s: Some(0.0),
            cause,
            cause_event: kind.map(|k| EventRef {
                ts: t,
                source: Source::Local,
                member: member.to_owned(),
                kind: k.parse().expect("kind"),
                detail: if k == "k8s_event" {
                    "Normal Killing: Stopping container etcd".to_owned()
                } else {
                    String::new()
                },
            }),
            write_unavailable_s: None,
            write_unavailable_one_in_flight_s: None,
            lock_unavailable_s: None,
        }
    }

    #[test]
    fn causes_read_as_a_few_words() {
        let cases = [
            (detail(Cause::OwnDisruption, Some("sigkill_sent"), "m1", (2, 3)), "the SIGKILL of m1"),
            (detail(Cause::OwnDisruption, Some("sigterm_sent"), "m0", (2, 3)), "the SIGTERM of m0"),
            (
                detail(Cause::OwnDisruption, Some("eviction_accepted"), "dlock-etcd-0", (2, 3)),
                "the eviction of dlock-etcd-0",
            ),
            (
                detail(Cause::Kubernetes, Some("k8s_event"), "dlock-etcd-1", (2, 3)),
                "Kubernetes Killing on dlock-etcd-1",
            ),
            (detail(Cause::Restart, Some("process_restarted"), "m2", (2, 3)), "the restart of m2"),
            (detail(Cause::Unreachable, Some("unreachable"), "m2", (2, 3)), "unreachable m2"),
            (detail(Cause::Stress, Some("stress"), "m1", (2, 3)), "stress on m1"),
            (detail(Cause::Unexplained, None, "m1", (2, 3)), "unexplained"),
            (
                detail(Cause::OwnDisruption, Some("sigstop_sent"), "m2", (2, 4)),
                "the SIGSTOP of m2, term 2 → 4",
            ),
        ];
        for (d, want) in cases {
            assert_eq!(cause_phrase(&d), want);
        }
    }
}
