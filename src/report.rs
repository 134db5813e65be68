//! baseline.json files -> one flat list of figures ([`measurements`]), and everything
//! rendered from that list alone: the observation-window table followed by the
//! member-health table (`report`, and `report --update` between `<!-- baseline:begin -->`
//! and `<!-- baseline:end -->`), the tidy CSV (`report --format csv`) and `compare`. Every
//! count is shown as its three figures (docs/counting.md), never as a bare "leader
//! changes". Rendering is a pure function of the baselines, so `report --update` run twice
//! changes nothing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use std::path::{Component, Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::baseline::{Baseline, Disruption, ElectionDetail, EventRef, Flag, MemberHealth, WindowRecord};
use crate::client::ClientFigures;
use crate::record::{write_atomic, RecordError};
use crate::Error;

pub const BEGIN: &str = "<!-- baseline:begin -->";
pub const END: &str = "<!-- baseline:end -->";

/// How every row that comes from a run is labelled (the task spec's wording); rows not yet
/// measured say so instead.
pub const MEASURED: &str = "**ASSUMPTION-free measurement:**";

/// The command that will fill the GKE rows, shown until a Kubernetes baseline exists.
pub const GKE_COMMAND: &str =
    "leaderwatch measure -n dlock --reach port-forward --idle 20m --target follower --out data/gke-$(date -u +%Y%m%dT%H%M%SZ)";

/// Units of [`Measurement::unit`].
pub const SECONDS: &str = "s";
pub const COUNT: &str = "count";
/// Raft-term increments: what `elections` counts (docs/counting.md).
pub const TERMS: &str = "terms";
pub const BYTES: &str = "bytes";

/// An election's possible causes (src/attribution.rs), in its order of precedence; each is
/// an `elections_<cause>` figure.
pub const CAUSES: [&str; 6] = ["own_disruption", "kubernetes", "restart", "unreachable", "stress", "unexplained"];

/// The `window` of the recovery figures (they span member loss to healthy, not a window).
pub const RECOVERY: &str = "recovery";
/// The `window` of the row "client writes unavailable during the disruption".
pub const CLIENT: &str = "client";

/// Reads and checks one baseline.json.
pub fn load(path: &Path) -> Result<Baseline, Error> {
    let text = std::fs::read(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
    let b: Baseline =
        serde_json::from_slice(&text).map_err(|e| Error::Usage(format!("{}: not a leaderwatch baseline.json: {e}", path.display())))?;
    if !(1..=crate::baseline::SCHEMA_VERSION).contains(&b.schema_version) {
        return Err(Error::Usage(format!("{}: schema_version {} is not supported", path.display(), b.schema_version)));
    }
    Ok(b)
}

// ---------------------------------------------------------------------------------------
// The one list
// ---------------------------------------------------------------------------------------

/// One figure of one baseline. [`measurements`] lists them; the window table, the health
/// table, the CSV and `compare` only format, group or match that list.
///
/// Serialized, it is one row of `report --format csv`, columns in this order:
///
/// `run_id,source,environment,window,member,figure,value,unit,threshold,threshold_source,over,label,note,window_start,window_end,window_s`
///
/// - `source`: the baseline.json path as given; `environment`: where it ran;
/// - `window`: `at_rest`, `disruption`, `settle` (baseline.json's windows) or `recovery`;
/// - `member`: empty for a cluster-wide figure, else whose health figure it is;
/// - `figure`, `value`, `unit` (`s`, `count`, `terms`, `bytes`): `value` is empty when not
///   known, never 0;
/// - `threshold`, `threshold_source`: the highest documented threshold the figure went over
///   (the member's `over` flags in baseline.json), empty when none; `over`: `true` or `false`;
/// - `label`: the row the figure belongs to in the window table; `note`: words that go with
///   the value (an election's cause, how the member was kept down);
/// - `window_start`, `window_end` (RFC 3339, ms; `window_end` empty: never recovered),
///   `window_s`: the monotonic duration.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Measurement {
    pub run_id: String,
    pub source: String,
    pub environment: String,
    pub window: String,
    pub member: String,
    pub figure: String,
    pub value: Option<f64>,
    pub unit: &'static str,
    pub threshold: Option<f64>,
    pub threshold_source: String,
    pub over: bool,
    pub label: String,
    pub note: String,
    #[serde(serialize_with = "ser_ts")]
    pub window_start: DateTime<Utc>,
    #[serde(serialize_with = "ser_opt_ts")]
    pub window_end: Option<DateTime<Utc>>,
    pub window_s: Option<f64>,
}

fn ser_ts<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::record::ts(*t))
}

fn ser_opt_ts<S: serde::Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser_ts(t, s),
        None => s.serialize_none(),
    }
}

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
    fn figure(&self, member: &str, figure: &str, value: Option<f64>, unit: &'static str) -> Measurement {
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
            ..Measurement::default()
        }
    }
}

/// Every figure of one baseline, in a fixed order: per window (file order) its cluster-wide
/// figures, then each member's health (members sorted); then the recovery.
///
/// - cluster-wide, every window: `duration_s`, `raw_sum_start`, `raw_sum_end`,
///   `reset_aware_increase`, `elections` (raft-term delta), `leader_transitions`;
/// - schema 3: `elections_<cause>` for each of [`CAUSES`] (the raft terms of the elections
///   with that cause, so they add up to `elections`); per election, in order,
///   `election_<n>_leaderless_s` with its cause in `note`; `leaderless_s_max`;
/// - per member (schema 3): `wal_fsyncs`, `wal_fsync_p50_s`, `wal_fsync_p99_s`,
///   `backend_commits`, `backend_commit_p99_s`, `peer_rtt_p99_s{<peer>}` per peer,
///   `heartbeat_send_failures`, `slow_applies`, `proposals_failed`, `slow_read_indexes`,
///   `db_size_bytes`, `quota_bytes`, `restarts`;
/// - per window with the canary: `client_<write|read>_<ops|failures|availability|p50_s|
///   p99_s|max_s|longest_unavailable_s>`;
/// - `client` (the disruption window's canary writes): `write_longest_unavailable_s`,
///   `write_longest_unavailable_one_in_flight_s` (runs since the canary overlaps its ops),
///   `write_ops`, `write_failures`, `write_p99_s`, and `election_<n>_write_unavailable_s`
///   (with `election_<n>_write_unavailable_one_in_flight_s`);
/// - `recovery`: `loss_to_healthy_s`, `request_to_healthy_s`, `kept_down_s`, `attempts`,
///   `blocked_s`.
pub fn measurements(path: &Path, b: &Baseline) -> Vec<Measurement> {
    let source = path.display().to_string();
    let mut out = Vec::new();
    for w in &b.windows {
        let at = Place {
            b,
            source: source.clone(),
            window: &w.name,
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
        for (member, h) in &w.health {
            out.extend(health_figures(&at, member, h));
        }
    }
    if let Some(d) = &b.disruption {
        out.extend(client_row(b, &source, d));
        out.extend(recovery_figures(b, source, d));
    }
    out
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
    let Some((w, c)) = b.windows.iter().find(|w| w.name == "disruption").and_then(|w| w.client.as_ref().map(|c| (w, c))) else {
        return Vec::new();
    };
    let role = if d.target_was_leader { "leader" } else { "follower" };
    let at = Place {
        b,
        source: source.to_owned(),
        window: CLIENT,
        label: format!("client writes unavailable during the disruption (canary, {}, target {} = {role})", d.method, d.target),
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
        out.insert(1, at.figure("", "write_longest_unavailable_one_in_flight_s", c.write.one_in_flight_longest_unavailable_s, SECONDS));
    }
    for (i, e) in w.elections_detail.iter().enumerate() {
        let mut m = at.figure("", &format!("election_{}_write_unavailable_s", i + 1), e.write_unavailable_s, SECONDS);
        m.note = cause_phrase(e);
        out.push(m);
        if e.write_unavailable_one_in_flight_s.is_some() {
            let mut m = at.figure("", &format!("election_{}_write_unavailable_one_in_flight_s", i + 1), e.write_unavailable_one_in_flight_s, SECONDS);
            m.note = cause_phrase(e);
            out.push(m);
        }
    }
    out
}

/// The client row's value cell.
fn client_cell(rows: &[&Measurement]) -> String {
    let mut v = match value(rows, "write_longest_unavailable_s") {
        Some(u) => format!("{u:.2} s longest without a successful write"),
        None => "no successful write in the window".to_owned(),
    };
    if let Some(one) = value(rows, "write_longest_unavailable_one_in_flight_s") {
        v.push_str(&format!(", {one:.2} s for a client with one write in flight"));
    }
    if let (Some(ops), Some(failed)) = (value(rows, "write_ops"), value(rows, "write_failures")) {
        v.push_str(&format!(" ({failed:.0} of {ops:.0} writes failed"));
        if let Some(p99) = value(rows, "write_p99_s") {
            v.push_str(&format!("; p99 {}", ms(p99)));
        }
        v.push(')');
    }
    v
}

fn election_figures(at: &Place, w: &WindowRecord) -> Vec<Measurement> {
    let detail = &w.elections_detail;
    let mut out = Vec::new();
    // Schema 3 attributes every election; older files know nothing of causes.
    if at.b.schema_version >= 3 {
        // No detail for a window that had elections: the causes are not known, not 0.
        let known = !detail.is_empty() || w.elections == Some(0);
        let mut causes: Vec<&str> = CAUSES.to_vec();
        for d in detail {
            if !causes.contains(&d.cause.as_str()) {
                causes.push(&d.cause);
            }
        }
        for cause in causes {
            let terms: u64 = detail.iter().filter(|d| d.cause == cause).map(|d| d.term_to.saturating_sub(d.term_from)).sum();
            out.push(at.figure("", &format!("elections_{cause}"), known.then_some(terms as f64), TERMS));
        }
    }
    for (i, d) in detail.iter().enumerate() {
        let mut m = at.figure("", &election_figure(i + 1), d.leaderless_s, SECONDS);
        m.note = cause_phrase(d);
        out.push(m);
    }
    if !detail.is_empty() {
        // One unknown election makes the maximum unknown.
        let max = detail.iter().map(|d| d.leaderless_s).try_fold(0.0_f64, |acc, v| v.map(|v| acc.max(v)));
        out.push(at.figure("", "leaderless_s_max", max, SECONDS));
    }
    out
}

fn election_figure(n: usize) -> String {
    format!("election_{n}_leaderless_s")
}

fn is_election_figure(figure: &str) -> bool {
    figure.strip_prefix("election_").and_then(|r| r.strip_suffix("_leaderless_s")).is_some_and(|n| n.parse::<usize>().is_ok())
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
    let role = if d.target_was_leader { "leader" } else { "follower" };
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
    vec![
        at.figure("", "loss_to_healthy_s", d.loss_to_healthy_s, SECONDS),
        at.figure("", "request_to_healthy_s", d.request_to_healthy_s, SECONDS),
        kept_down,
        at.figure("", "attempts", Some(f64::from(d.attempts)), COUNT),
        at.figure("", "blocked_s", Some(d.blocked_s), SECONDS),
    ]
}

/// How long a local rehearsal kept the member down on purpose (exit, or freeze, to restart
/// or thaw), from the disruptor's own instants: monotonic where recorded (schema 2).
fn kept_down_s(d: &Disruption) -> Option<(f64, &'static str)> {
    let find = |kind: &str| d.ground_truth.iter().find(|g| g.kind == kind);
    let (a, b, how) = match (find("exited"), find("restarted"), find("sigstop_sent"), find("continued")) {
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
        _ if d.cause == "unexplained" => "unexplained".to_owned(),
        Some(e) => event_phrase(&d.cause, e),
        None => d.cause.replace('_', " "),
    };
    if d.term_to > d.term_from + 1 {
        format!("{text}, term {} → {}", d.term_from, d.term_to)
    } else {
        text
    }
}

fn event_phrase(cause: &str, e: &EventRef) -> String {
    let m = &e.member;
    match (cause, e.kind.as_str()) {
        (_, "eviction_accepted") => format!("the eviction of {m}"),
        (_, k) if k.ends_with("_sent") => format!("the {} of {m}", k.trim_end_matches("_sent").to_uppercase()),
        (_, "pod_deleted" | "pod_deleting") => format!("the deletion of pod {m}"),
        (_, "disruption_target") => format!("DisruptionTarget on {m}"),
        // "<type> <reason>: <message>", as src/k8s/watch.rs writes it.
        (_, "k8s_event") => {
            let reason = e.detail.split(':').next().and_then(|h| h.split_whitespace().nth(1)).unwrap_or("event");
            format!("Kubernetes {reason} on {m}")
        }
        (_, "process_restarted") => format!("the restart of {m}"),
        ("unreachable", _) => format!("unreachable {m}"),
        ("stress", _) => format!("stress on {m}"),
        (c, k) => format!("{} ({k} of {m})", c.replace('_', " ")),
    }
}

// ---------------------------------------------------------------------------------------
// Markdown: the window table and the member-health table
// ---------------------------------------------------------------------------------------

fn num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v}"),
        None => "unknown".to_owned(),
    }
}

/// `start – end (secs)`; `secs` is the monotonic duration the run measured.
fn when(start: DateTime<Utc>, end: DateTime<Utc>, secs: f64) -> String {
    let end_fmt = if start.date_naive() == end.date_naive() { "%H:%M:%SZ" } else { "%Y-%m-%d %H:%M:%SZ" };
    format!("{} – {} ({secs:.1} s)", start.format("%Y-%m-%d %H:%M:%SZ"), end.format(end_fmt))
}

/// The observation-window cell of a figure.
fn span(m: &Measurement) -> String {
    match m.window_end {
        Some(end) => when(m.window_start, end, m.window_s.unwrap_or_default()),
        None => format!("from {}", m.window_start.format("%Y-%m-%d %H:%M:%SZ")),
    }
}

/// `to` relative to directory `from` (both made absolute against the working directory).
fn relative(to: &Path, from: &Path) -> PathBuf {
    let abs = |p: &Path| {
        let p = if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir().unwrap_or_default().join(p) };
        p.components().fold(PathBuf::new(), |mut acc, c| {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    acc.pop();
                }
                other => acc.push(other),
            }
            acc
        })
    };
    let (to, from) = (abs(to), abs(from));
    let common = to.components().zip(from.components()).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in from.components().skip(common) {
        out.push("..");
    }
    for c in to.components().skip(common) {
        out.push(c);
    }
    out
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
    match w.name.as_str() {
        "at_rest" => format!("leader changes at rest ({:.0} s idle)", w.duration_s),
        "disruption" => match d {
            Some(d) => format!(
                "leader changes from one disruption until healthy ({}, target {} = {})",
                d.method,
                d.target,
                if d.target_was_leader { "leader" } else { "follower" }
            ),
            None => "leader changes during the disruption".to_owned(),
        },
        "settle" => format!("leader changes after recovery ({:.0} s settle)", w.duration_s),
        other => format!("leader changes, window {other}"),
    }
}

/// The rows of `ms` grouped by (window, member), groups in the order they first appear.
fn groups(ms: &[Measurement]) -> Vec<Vec<&Measurement>> {
    let mut out: Vec<Vec<&Measurement>> = Vec::new();
    for m in ms {
        match out.iter_mut().find(|g| g.first().is_some_and(|f| f.window == m.window && f.member == m.member)) {
            Some(g) => g.push(m),
            None => out.push(vec![m]),
        }
    }
    out
}

fn get<'a>(rows: &[&'a Measurement], figure: &str) -> Option<&'a Measurement> {
    rows.iter().find(|m| m.figure == figure).copied()
}

fn value(rows: &[&Measurement], figure: &str) -> Option<f64> {
    get(rows, figure).and_then(|m| m.value)
}

/// "raw sum 3 → 5; reset-aware increase 3; elections (raft term) 1 (the SIGKILL of m1)":
/// the causes only where baseline.json has them (schema 3).
fn counts_cell(rows: &[&Measurement]) -> String {
    let causes: Vec<&str> = rows.iter().filter(|m| is_election_figure(&m.figure)).map(|m| m.note.as_str()).collect();
    let mut elections = num(value(rows, "elections"));
    if !causes.is_empty() {
        elections.push_str(&format!(" ({})", causes.join("; ")));
    }
    format!(
        "raw sum {} → {}; reset-aware increase {}; elections (raft term) {elections}",
        num(value(rows, "raw_sum_start")),
        num(value(rows, "raw_sum_end")),
        num(value(rows, "reset_aware_increase")),
    )
}

/// The recovery's value cell.
fn recovery_cell(rows: &[&Measurement]) -> String {
    let mut v = match (value(rows, "loss_to_healthy_s"), value(rows, "request_to_healthy_s")) {
        (Some(l), Some(r)) => format!("{l:.2} s (request → healthy {r:.2} s)"),
        (None, Some(r)) => format!("member loss not observed; request → healthy {r:.2} s"),
        _ => "did not recover within the sitting's timeout".to_owned(),
    };
    // A local rehearsal keeps the member down on purpose (standing in for the
    // reschedule): say how much of the figure that is.
    if let Some((down, k)) = get(rows, "kept_down_s").and_then(|k| k.value.map(|d| (d, k))) {
        v.push_str(&format!("; of which the member was kept down {down:.2} s ({})", k.note));
    }
    v
}

/// Window-table rows of one baseline's figures. `link` is how the source column names it.
fn window_rows(ms: &[Measurement], link: &str) -> Vec<String> {
    let mut out = Vec::new();
    for rows in groups(ms).iter().filter(|g| g.first().is_some_and(|m| m.member.is_empty())) {
        let Some(first) = rows.first() else { continue };
        let value = match first.window.as_str() {
            RECOVERY => recovery_cell(rows),
            CLIENT => client_cell(rows),
            _ => counts_cell(rows),
        };
        out.push(format!("| {} | {value} | {MEASURED_LABEL} | {} | {} | {link} |", first.label, span(first), first.environment));
    }
    out
}

/// The residual rate over the baselines' quiet windows, one row per environment (a rate
/// pooled across places would describe none of them). Computed by [`crate::rate`].
/// `baselines` come in run-id order (from [`in_order`]).
fn rate_rows(baselines: &[&(PathBuf, Baseline)], readme_dir: Option<&Path>) -> Vec<String> {
    let mut by_env: BTreeMap<&str, Vec<(&PathBuf, &Baseline)>> = BTreeMap::new();
    for (p, b) in baselines.iter().copied() {
        by_env.entry(b.environment.description.as_str()).or_default().push((p, b));
    }
    let mut out = Vec::new();
    for (env, group) in by_env {
        let Ok(sources) = group.iter().map(|(p, b)| crate::rate::from_sitting(p, b)).collect::<Result<Vec<_>, _>>() else { continue };
        let r = crate::rate::pool(&sources, 0.95);
        let (Some(day), Some(from), Some(to)) = (r.per_day.as_ref(), r.from, r.to) else { continue };
        let links: Vec<String> = group
            .iter()
            .map(|(p, b)| match readme_dir {
                Some(dir) => format!("[{}]({})", b.run_id, relative(p, dir).display()),
                None => format!("`{}`", p.display()),
            })
            .collect();
        let exposure = humantime::format_duration(Duration::from_secs(r.exposure_s.round() as u64));
        out.push(format!(
            "| residual rate of elections at rest (at_rest + settle windows of {} sitting(s); `leaderwatch rate`) | {} election(s) in {exposure} of quiet exposure: {} per day, 95% exact Poisson interval {} – {} per day | {MEASURED_LABEL} | {} – {} ({:.0} s quiet) | {env} | {} |",
            group.len(),
            r.residual,
            sig(day.rate, false),
            sig(day.lower, false),
            sig(day.upper, false),
            from.format("%Y-%m-%d %H:%M:%SZ"),
            to.format("%H:%M:%SZ"),
            r.exposure_s,
            links.join(", ")
        ));
    }
    out
}

/// A latency in milliseconds, about three significant digits.
fn ms(s: f64) -> String {
    let v = s * 1000.0;
    match v.abs() {
        a if a >= 100.0 => format!("{v:.0} ms"),
        a if a >= 10.0 => format!("{v:.1} ms"),
        _ => format!("{v:.2} ms"),
    }
}

fn bytes(v: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let (mut x, mut i) = (v, 0);
    while x.abs() >= 1024.0 && i + 1 < units.len() {
        x /= 1024.0;
        i += 1;
    }
    if x.fract() == 0.0 { format!("{x:.0} {}", units[i]) } else { format!("{x:.1} {}", units[i]) }
}

fn count(v: f64) -> String {
    if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v}") }
}

fn by_unit(unit: &str) -> fn(f64) -> String {
    match unit {
        SECONDS => ms,
        BYTES => bytes,
        _ => count,
    }
}

/// A health figure: "—" when not known, and marked when it went over a threshold.
fn cell(m: Option<&Measurement>) -> String {
    let Some(m) = m else { return "—".to_owned() };
    let f = by_unit(m.unit);
    let Some(v) = m.value else { return "—".to_owned() };
    match (m.over, m.threshold) {
        (true, Some(t)) => format!("**{} ⚠ > {} ({})**", f(v), f(t), m.threshold_source),
        (true, None) => format!("**{} ⚠**", f(v)),
        _ => f(v),
    }
}

/// "1.25 ms / 1.99 ms (3 fsyncs)"; the count says what the quantiles rest on.
fn quantiles_cell(qs: &[Option<&Measurement>], n: Option<f64>, what: &str) -> String {
    let cells: Vec<String> = qs.iter().map(|q| cell(*q)).collect();
    let mut out = if cells.iter().all(|c| c == "—") { "—".to_owned() } else { cells.join(" / ") };
    if let Some(n) = n {
        out.push_str(&format!(" ({} {what}{})", count(n), if n == 1.0 { "" } else { "s" }));
    }
    out
}

pub const HEALTH_HEADER: &str = "| run | window | member | WAL fsync p50 / p99 | backend commit p99 | peer RTT p99 (worst peer) | heartbeat send failures | slow applies | proposals failed | slow read indexes | db size / quota |";

/// Health-table rows of one baseline's figures, one per member per window.
fn health_rows(ms: &[Measurement], run: &str) -> Vec<String> {
    const COLUMNS: [&str; 11] = [
        "wal_fsyncs",
        "wal_fsync_p50_s",
        "wal_fsync_p99_s",
        "backend_commits",
        "backend_commit_p99_s",
        "heartbeat_send_failures",
        "slow_applies",
        "proposals_failed",
        "slow_read_indexes",
        "db_size_bytes",
        "quota_bytes",
    ];
    let mut out = Vec::new();
    for rows in groups(ms).iter().filter(|g| g.first().is_some_and(|m| !m.member.is_empty())) {
        let Some(first) = rows.first() else { continue };
        let f = |name: &str| get(rows, name);
        let peers: Vec<(&str, &Measurement)> =
            rows.iter().filter_map(|m| m.figure.strip_prefix("peer_rtt_p99_s{").and_then(|p| p.strip_suffix('}')).map(|p| (p, *m))).collect();
        let worst = peers.iter().filter(|(_, m)| m.value.is_some()).max_by(|a, b| a.1.value.unwrap_or_default().total_cmp(&b.1.value.unwrap_or_default()));
        // The worst peer, and any other peer that went over its threshold.
        let mut rtt: Vec<String> = worst.iter().map(|(p, m)| format!("{p}: {}", cell(Some(m)))).collect();
        for (p, m) in &peers {
            if m.over && worst.is_none_or(|w| w.0 != *p) {
                rtt.push(format!("{p}: {}", cell(Some(m))));
            }
        }
        let rtt = if rtt.is_empty() { "—".to_owned() } else { rtt.join("; ") };
        let mut member = first.member.clone();
        if let Some(r) = value(rows, "restarts").filter(|r| *r > 0.0) {
            member.push_str(&format!(" ({} restart{})", count(r), if r == 1.0 { "" } else { "s" }));
        }
        // Flags on figures without a column of their own.
        for m in rows.iter().filter(|m| m.over && !COLUMNS.contains(&m.figure.as_str()) && !m.figure.starts_with("peer_rtt_p99_s{")) {
            member.push_str(&format!(" {} {}", m.figure, cell(Some(m))));
        }
        let db = match (f("db_size_bytes").and_then(|m| m.value), f("quota_bytes").and_then(|m| m.value)) {
            (None, None) => "—".to_owned(),
            _ => format!("{} / {}", cell(f("db_size_bytes")), cell(f("quota_bytes"))),
        };
        out.push(format!(
            "| {run} | {} | {member} | {} | {} | {rtt} | {} | {} | {} | {} | {db} |",
            first.window,
            quantiles_cell(&[f("wal_fsync_p50_s"), f("wal_fsync_p99_s")], value(rows, "wal_fsyncs"), "fsync"),
            quantiles_cell(&[f("backend_commit_p99_s")], value(rows, "backend_commits"), "commit"),
            cell(f("heartbeat_send_failures")),
            cell(f("slow_applies")),
            cell(f("proposals_failed")),
            cell(f("slow_read_indexes")),
        ));
    }
    out
}

/// The baselines in time order (by run id, whatever the order of the arguments, so that
/// `report --update` gives one table for one set of files).
fn in_order(baselines: &[(PathBuf, Baseline)]) -> Vec<&(PathBuf, Baseline)> {
    let mut v: Vec<&(PathBuf, Baseline)> = baselines.iter().collect();
    v.sort_by(|a, b| a.1.run_id.cmp(&b.1.run_id));
    v
}

/// The label of every row that comes from a run, in a column of its own (the task spec's
/// wording); rows not yet measured say so instead.
pub const MEASURED_LABEL: &str = "ASSUMPTION-free measurement";

const TABLE_HEADER: &str = "| measurement | value | label | observation window | environment | source |\n|---|---|---|---|---|---|";

/// The spec's table first: GKE's rows (measured, or "not yet measured" with the command),
/// then the sittings on the local control plane; then, in a second table, the short local
/// rehearsals; then (when any baseline has member health, schema 3) the health table.
/// `readme_dir` (where the tables will live) makes the source links relative; without it
/// the paths are shown as given.
pub fn render(baselines: &[(PathBuf, Baseline)], readme_dir: Option<&Path>) -> String {
    // GKE before the local control plane, each by run id.
    let mut spec: Vec<&(PathBuf, Baseline)> = in_order(baselines).into_iter().filter(|(_, b)| b.environment.kind == "kubernetes").collect();
    spec.sort_by_key(|(_, b)| !b.environment.on_target_cluster());
    let short: Vec<&(PathBuf, Baseline)> = in_order(baselines).into_iter().filter(|(_, b)| b.environment.kind != "kubernetes").collect();
    let mut health = Vec::new();
    let rows = |group: &[&(PathBuf, Baseline)], health: &mut Vec<String>| -> Vec<String> {
        let mut out = Vec::new();
        for (path, b) in group {
            let ms = measurements(path, b);
            let (link, run) = match readme_dir {
                Some(dir) => {
                    let l = format!("[{}]({})", b.run_id, relative(path, dir).display());
                    (l.clone(), l)
                }
                None => (format!("`{}`", path.display()), b.run_id.clone()),
            };
            out.extend(window_rows(&ms, &link));
            health.extend(health_rows(&ms, &run));
        }
        out.extend(rate_rows(group, readme_dir));
        out
    };
    let mut out = vec![TABLE_HEADER.to_owned()];
    // A sitting on the local control plane is Kubernetes but not GKE: the GKE rows stay.
    if !baselines.iter().any(|(_, b)| b.environment.on_target_cluster()) {
        let gke = "GKE Autopilot, dlock-gke";
        let todo = format!("run `{GKE_COMMAND}`, then `leaderwatch report ... --update`");
        for m in [
            "leader changes at rest (>= 20 min idle): raw sum / reset-aware increase / elections",
            "leader changes after one drain-equivalent eviction: raw sum / reset-aware increase / elections",
            "time from member loss to a healthy 3-member endpoint list",
        ] {
            out.push(format!("| {m} | — | not yet measured | — | {gke} | {todo} |"));
        }
        out.push(format!(
            "| residual rate of elections at rest, per day with its 95% interval | — | not yet measured | — | {gke} | after the sitting (and days of the continuous sampler), run `leaderwatch rate data/gke-*/*/baseline.json <sampler run directory>` |"
        ));
    }
    out.extend(rows(&spec, &mut health));
    if !short.is_empty() {
        out.push(String::new());
        out.push("Short rehearsals on local loopback (`leaderwatch rehearse`: minutes at rest, not the spec's 20, and a local signal instead of an eviction), for comparison:".to_owned());
        out.push(String::new());
        out.push(TABLE_HEADER.to_owned());
        out.extend(rows(&short, &mut health));
    }
    if !health.is_empty() {
        out.push(String::new());
        out.push(format!(
            "{MEASURED} each member's health over each window, from the deltas of its `/metrics` between the window's \
             boundary rounds. Latencies in ms; — = not known (no observation), never 0; ⚠ = above the threshold named."
        ));
        out.push(String::new());
        out.push(HEALTH_HEADER.to_owned());
        out.push("|---|---|---|---|---|---|---|---|---|---|---|".to_owned());
        out.extend(health);
    }
    out.join("\n")
}

/// What `rehearse` and `measure` print at the end: the tables, then baseline.json between
/// the log markers, in one write so that no log line from elsewhere lands inside it.
pub fn print_result(path: &Path, b: &Baseline) {
    use std::io::Write;
    let text = format!("{}\n{}", render(&[(path.to_path_buf(), b.clone())], None), crate::baseline::log_block(b));
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// After a sitting that ended with an error: prints the baseline.json it wrote (written
/// at or after `since`, so never an older run's), so that the log holds it too.
pub fn print_written_since(path: &Path, since: std::time::SystemTime) {
    let fresh = std::fs::metadata(path).and_then(|m| m.modified()).is_ok_and(|t| t >= since);
    if let (true, Ok(b)) = (fresh, load(path)) {
        print_result(path, &b);
    }
}

/// Replaces what is between the markers in `readme` with `table`. Idempotent.
pub fn splice(readme: &str, table: &str) -> Result<String, String> {
    let b = readme.find(BEGIN).ok_or_else(|| format!("no {BEGIN} marker"))?;
    let e = readme.find(END).ok_or_else(|| format!("no {END} marker"))?;
    if e < b {
        return Err(format!("{END} comes before {BEGIN}"));
    }
    Ok(format!("{}{BEGIN}\n{table}\n{}", &readme[..b], &readme[e..]))
}

/// `report --update README.md`: splices the tables in, atomically. Returns whether the
/// file changed.
pub fn update(readme: &Path, baselines: &[(PathBuf, Baseline)]) -> Result<bool, Error> {
    let text = std::fs::read_to_string(readme).map_err(|e| Error::Usage(format!("{}: {e}", readme.display())))?;
    let dir = readme.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let table = render(baselines, Some(dir));
    let new = splice(&text, &table).map_err(|e| Error::Usage(format!("{}: {e}", readme.display())))?;
    if new == text {
        return Ok(false);
    }
    write_atomic(readme, new.as_bytes()).map_err(|e: RecordError| Error::Record(e))?;
    Ok(true)
}

// ---------------------------------------------------------------------------------------
// CSV and compare
// ---------------------------------------------------------------------------------------

/// `report --format csv`: the tidy list, one row per figure ([`Measurement`] has the
/// columns), runs by run id, then the residual rate over their quiet windows
/// ([`crate::rate`], 95 %).
pub fn render_csv(baselines: &[(PathBuf, Baseline)]) -> Result<String, Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for (p, b) in in_order(baselines) {
        for m in measurements(p, b) {
            w.serialize(m).map_err(|e| Error::Usage(format!("csv export: {e}")))?;
        }
    }
    // The residual rate over the same baselines' quiet windows (window `quiet`).
    let sources = baselines.iter().map(|(p, b)| crate::rate::from_sitting(p, b)).collect::<Result<Vec<_>, _>>()?;
    for m in crate::rate::measurements(&crate::rate::pool(&sources, 0.95)) {
        w.serialize(m).map_err(|e| Error::Usage(format!("csv export: {e}")))?;
    }
    let bytes = w.into_inner().map_err(|e| Error::Usage(format!("csv export: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
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

/// About three significant digits, at least three decimals.
fn sig(v: f64, sign: bool) -> String {
    let decimals = if v == 0.0 || v.abs() >= 1.0 { 3 } else { (2 - v.abs().log10().floor() as i32).clamp(3, 9) as usize };
    match (v.fract() == 0.0, sign) {
        (true, true) => format!("{v:+.0}"),
        (true, false) => format!("{v:.0}"),
        (false, true) => format!("{v:+.decimals$}"),
        (false, false) => format!("{v:.decimals$}"),
    }
}

/// `compare` as a markdown table; a member's figure is in the window column as
/// `window / member`.
pub fn render_compare(a_name: &str, b_name: &str, diffs: &[Difference]) -> String {
    let n = |v: Option<f64>| v.map_or("—".to_owned(), |v| sig(v, false));
    let mut out = vec![format!("| window | figure | A: {a_name} | B: {b_name} | B − A |"), "|---|---|---|---|---|".to_owned()];
    for d in diffs {
        let window = if d.member.is_empty() { d.window.clone() } else { format!("{} / {}", d.window, d.member) };
        let diff = d.diff.map_or("—".to_owned(), |v| sig(v, true));
        out.push(format!("| {window} | {} | {} | {} | {diff} |", d.figure, n(d.a), n(d.b)));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_only_between_markers_and_is_idempotent() {
        let doc = format!("# T\nbefore\n{BEGIN}\nold\n{END}\nafter\n");
        let once = splice(&doc, "| new |").expect("markers");
        assert_eq!(once, format!("# T\nbefore\n{BEGIN}\n| new |\n{END}\nafter\n"));
        assert_eq!(splice(&once, "| new |").expect("markers"), once);
        assert!(splice("no markers", "x").is_err());
    }

    #[test]
    fn relative_links_walk_up_from_the_readme() {
        let p = relative(Path::new("/r/data/x/baseline.json"), Path::new("/r/deploy/k8s/etcd"));
        assert_eq!(p, PathBuf::from("../../../data/x/baseline.json"));
    }

    fn detail(cause: &str, kind: Option<&str>, member: &str, terms: (u64, u64)) -> ElectionDetail {
        let t = DateTime::<Utc>::default();
        ElectionDetail {
            term_from: terms.0,
            term_to: terms.1,
            after: t,
            observed_at: t,
            old_leader: Some(member.to_owned()),
            new_leader: None,
            leaderless_s: Some(0.0),
            cause: cause.to_owned(),
            cause_event: kind.map(|k| EventRef {
                ts: t,
                source: "local".to_owned(),
                member: member.to_owned(),
                kind: k.to_owned(),
                detail: if k == "k8s_event" { "Normal Killing: Stopping container etcd".to_owned() } else { String::new() },
            }),
            write_unavailable_s: None,
            write_unavailable_one_in_flight_s: None,
        }
    }

    #[test]
    fn causes_read_as_a_few_words() {
        let cases = [
            (detail("own_disruption", Some("sigkill_sent"), "m1", (2, 3)), "the SIGKILL of m1"),
            (detail("own_disruption", Some("sigterm_sent"), "m0", (2, 3)), "the SIGTERM of m0"),
            (detail("own_disruption", Some("eviction_accepted"), "dlock-etcd-0", (2, 3)), "the eviction of dlock-etcd-0"),
            (detail("kubernetes", Some("k8s_event"), "dlock-etcd-1", (2, 3)), "Kubernetes Killing on dlock-etcd-1"),
            (detail("restart", Some("process_restarted"), "m2", (2, 3)), "the restart of m2"),
            (detail("unreachable", Some("unreachable"), "m2", (2, 3)), "unreachable m2"),
            (detail("stress", Some("stress"), "m1", (2, 3)), "stress on m1"),
            (detail("unexplained", None, "m1", (2, 3)), "unexplained"),
            (detail("own_disruption", Some("sigstop_sent"), "m2", (2, 4)), "the SIGSTOP of m2, term 2 → 4"),
        ];
        for (d, want) in cases {
            assert_eq!(cause_phrase(&d), want);
        }
    }

    #[test]
    fn compare_numbers_keep_small_latencies() {
        assert_eq!(sig(0.00199, false), "0.00199");
        assert_eq!(sig(0.203776, false), "0.204");
        assert_eq!(sig(60.000365, false), "60.000");
        assert_eq!(sig(-1.0, true), "-1");
        assert_eq!(sig(-0.000365, true), "-0.000365");
    }

    #[test]
    fn health_cells_mark_flags_and_never_print_unknown_as_zero() {
        assert_eq!(ms(0.012), "12.0 ms");
        assert_eq!(ms(0.00125), "1.25 ms");
        assert_eq!(ms(0.203776), "204 ms");
        assert_eq!(bytes(20480.0), "20 KiB");
        assert_eq!(bytes(2147483648.0), "2 GiB");
        assert_eq!(cell(None), "—");
    }
}
