//! Everything rendered from the measurement list (src/analysis/flatten.rs) and the
//! rate: the observation-window tables followed by the member-health table (`report`, and
//! `report --update` between `<!-- baseline:begin -->` and `<!-- baseline:end -->`), the
//! tidy CSV (`report --format csv`) and `compare`'s table. Every count is shown as its
//! three figures (docs/counting.md), never as a bare "leader changes". Rendering is a pure
//! function of the files read (src/io/read.rs reads them), so `report --update` run twice
//! changes nothing.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::analysis::flatten::{Difference, is_election_figure, measurements};
use crate::model::baseline::{EnvironmentKind, KubeMethod};
use crate::model::measurement::{CLIENT, LOCK, Measurement, PER_DISRUPTION, RECOVERY};
use crate::model::rate::BaselineFile;
use crate::render::InternalError;

mod health;
mod maintenance;

pub use health::HEALTH_HEADER;
use health::{health_rows, ms};
use maintenance::{MAINTENANCE_HEADER, maintenance_rows};

pub const BEGIN: &str = "<!-- baseline:begin -->";
pub const END: &str = "<!-- baseline:end -->";

/// How every row that comes from a run is labelled (the task spec's wording); rows not yet
/// measured say so instead.
pub const MEASURED: &str = "**ASSUMPTION-free measurement:**";

/// The command that will fill the GKE rows, shown until a Kubernetes baseline exists.
pub const GKE_COMMAND: &str =
    "leaderwatch sitting --context <GKE context> --image <the image you pushed>";

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
    let end_fmt =
        if start.date_naive() == end.date_naive() { "%H:%M:%SZ" } else { "%Y-%m-%d %H:%M:%SZ" };
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
pub(crate) fn relative(to: &Path, from: &Path) -> PathBuf {
    let abs = |p: &Path| {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(p)
        };
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

/// The rows of `ms` grouped by (window, member), groups in the order they first appear.
fn groups(ms: &[Measurement]) -> Vec<Vec<&Measurement>> {
    let mut out: Vec<Vec<&Measurement>> = Vec::new();
    for m in ms {
        match out
            .iter_mut()
            .find(|g| g.first().is_some_and(|f| f.window == m.window && f.member == m.member))
        {
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
    let causes: Vec<&str> =
        rows.iter().filter(|m| is_election_figure(&m.figure)).map(|m| m.note.as_str()).collect();
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

/// The lock row's value cell: the longest time no one could take the lock (less the
/// hold), each election's share, the leases lost and the run's safety verdict.
fn lock_cell(rows: &[&Measurement]) -> String {
    let mut v = match value(rows, "lock_longest_unavailable_s") {
        Some(u) => format!("{u:.2} s longest with no holder able to take the lock"),
        None => "fewer than two grants in the window".to_owned(),
    };
    if let Some(p50) = value(rows, "lock_handover_p50_s") {
        v.push_str(&format!(" (usual hand-over {})", ms(p50)));
    }
    let elections: Vec<String> = rows
        .iter()
        .filter(|m| m.figure.starts_with("election_") && m.figure.ends_with("_lock_unavailable_s"))
        .map(|m| match m.value {
            Some(s) => format!("{s:.2} s ({})", m.note),
            None => format!("— ({})", m.note),
        })
        .collect();
    if !elections.is_empty() {
        v.push_str(&format!("; per election {}", elections.join(", ")));
    }
    if let (Some(grants), Some(lost), Some(held)) = (
        value(rows, "lock_grants"),
        value(rows, "leases_lost"),
        value(rows, "leases_lost_while_held"),
    ) {
        v.push_str(&format!("; {grants:.0} grants, {lost:.0} leases lost ({held:.0} while held)"));
    }
    if let Some(n) = value(rows, "grants_applied_after_error").filter(|n| *n > 0.0) {
        v.push_str(&format!(", {n:.0} grants applied though answered with an error"));
    }
    if let Some(s) = get(rows, "lock_safety_violations") {
        v.push_str(&format!("; safety over the run {}", s.note));
    }
    v
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

/// A window-table row's value cell, by what its window is.
fn value_cell(rows: &[&Measurement]) -> String {
    match rows.first().map(|m| m.window.as_str()) {
        Some(RECOVERY) => recovery_cell(rows),
        Some(CLIENT) => client_cell(rows),
        Some(LOCK) => lock_cell(rows),
        Some(PER_DISRUPTION) => format!("{} (raft term)", num(value(rows, "elections"))),
        _ => counts_cell(rows),
    }
}

/// Window-table rows of one baseline's figures. `link` is how the source column names it.
fn window_rows(ms: &[Measurement], link: &str) -> Vec<String> {
    let mut out = Vec::new();
    // The spec's rows; elections per disruption is the CSV's and the ledger's (M6/M7).
    let table_row = |m: &&Measurement| m.member.is_empty() && m.window != PER_DISRUPTION;
    for rows in groups(ms).iter().filter(|g| g.first().is_some_and(table_row)) {
        let Some(first) = rows.first() else { continue };
        let value = value_cell(rows);
        out.push(format!(
            "| {} | {value} | {MEASURED_LABEL} | {} | {} | {link} |",
            first.label,
            span(first),
            first.environment
        ));
    }
    out
}

/// The T-056 note for the ledger (tasks/README.md): where and when the run was measured,
/// then each figure of the spec's table (at rest, after the eviction, the recovery, what it
/// cost a client) with its window, as the table words them.
pub fn ledger_note(f: &BaselineFile) -> String {
    let b = &f.baseline;
    let ms = measurements(&f.path, b);
    let started = b.windows.first().map(|w| w.start.format("%Y-%m-%d %H:%M UTC").to_string());
    let mut out = vec![format!(
        "T-056 baseline: measured {} on {}; run {} ({}), status {}.",
        started.as_deref().unwrap_or("(no window)"),
        b.environment.description,
        b.run_id,
        f.path.display(),
        if b.is_complete() { "complete" } else { "incomplete" },
    )];
    for rows in groups(&ms).iter().filter(|g| g.first().is_some_and(|m| m.member.is_empty())) {
        let Some(first) = rows.first() else { continue };
        let value = value_cell(rows);
        out.push(format!("- {}: {value} ({})", first.label, span(first)));
    }
    out.join("\n")
}

/// The residual rate over the baselines' quiet windows, one row per environment (a rate
/// pooled across places would describe none of them). Computed by [`crate::analysis::rate`].
/// `baselines` come in run-id order (from [`in_order`]).
fn rate_rows(baselines: &[&BaselineFile], readme_dir: Option<&Path>) -> Vec<String> {
    let mut by_env: BTreeMap<&str, Vec<&BaselineFile>> = BTreeMap::new();
    for f in baselines.iter().copied() {
        by_env.entry(f.baseline.environment.description.as_str()).or_default().push(f);
    }
    let mut out = Vec::new();
    for (env, group) in by_env {
        let sources: Vec<crate::model::rate::RateInput> =
            group.iter().map(|f| f.rate.clone()).collect();
        let r = crate::analysis::rate::pool(&sources, 0.95);
        let (Some(day), Some(from), Some(to)) = (r.per_day.as_ref(), r.from, r.to) else {
            continue;
        };
        let links: Vec<String> = group
            .iter()
            .map(|f| match readme_dir {
                Some(dir) => {
                    format!("[{}]({})", f.baseline.run_id, relative(&f.path, dir).display())
                }
                None => format!("`{}`", f.path.display()),
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

/// The baselines in time order (by run id, whatever the order of the arguments, so that
/// `report --update` gives one table for one set of files).
fn in_order(baselines: &[BaselineFile]) -> Vec<&BaselineFile> {
    let mut v: Vec<&BaselineFile> = baselines.iter().collect();
    v.sort_by(|a, b| a.baseline.run_id.cmp(&b.baseline.run_id));
    v
}

/// The label of every row that comes from a run, in a column of its own (the task spec's
/// wording); rows not yet measured say so instead.
pub const MEASURED_LABEL: &str = "ASSUMPTION-free measurement";

const TABLE_HEADER: &str = "| measurement | value | label | observation window | environment | source |\n|---|---|---|---|---|---|";

/// The spec's table first: GKE's rows (measured, or "not yet measured" with the command),
/// then the sittings on the local control plane; then, in a second table, the short local
/// rehearsals; then the routine maintenance table (when any sitting used `--method delete`,
/// `rolling-restart` or `drain`: those are in it only); then (when any baseline has member
/// health, schema 3) the health table.
/// `readme_dir` (where the tables will live) makes the source links relative; without it
/// the paths are shown as given.
pub fn render(baselines: &[BaselineFile], readme_dir: Option<&Path>) -> String {
    // GKE before the local control plane, each by run id. The spec's protocol is one
    // eviction: the routine operations (delete, rolling restart, drain) have their own table.
    let mut spec: Vec<&BaselineFile> = in_order(baselines)
        .into_iter()
        .filter(|f| f.baseline.environment.kind == EnvironmentKind::Kubernetes && !routine(f))
        .collect();
    spec.sort_by_key(|f| !f.baseline.environment.on_target_cluster());
    let short: Vec<&BaselineFile> = in_order(baselines)
        .into_iter()
        .filter(|f| f.baseline.environment.kind != EnvironmentKind::Kubernetes)
        .collect();
    let mut health = Vec::new();
    let rows = |group: &[&BaselineFile], health: &mut Vec<String>| -> Vec<String> {
        let mut out = Vec::new();
        for BaselineFile { path, baseline: b, .. } in group.iter().copied() {
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
    if !baselines.iter().any(|f| f.baseline.environment.on_target_cluster()) {
        let gke = "GKE Autopilot, dlock-gke";
        let todo = format!("run `{GKE_COMMAND}` (docs/gke-sitting.md): it fills this table");
        for m in [
            "leader changes at rest (>= 20 min idle): raw sum / reset-aware increase / elections",
            "leader changes after one drain-equivalent eviction: raw sum / reset-aware increase / elections",
            "time from member loss to a healthy 3-member endpoint list",
        ] {
            out.push(format!("| {m} | — | not yet measured | — | {gke} | {todo} |"));
        }
        out.push(format!(
            "| a lock unavailable during the eviction: longest with no holder able to take it, leases lost, safety | — | not yet measured | — | {gke} | {todo} (the lock canary is on by default) |"
        ));
        out.push(format!(
            "| residual rate of elections at rest, per day with its 95% interval | — | not yet measured | — | {gke} | after the sitting (and days of the continuous sampler), run `leaderwatch rate data/gke-*/baseline.json <sampler run directory>` |"
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
    // Routine maintenance: shown once any sitting used another method than the eviction.
    let kube: Vec<&BaselineFile> = in_order(baselines)
        .into_iter()
        .filter(|f| f.baseline.environment.kind == EnvironmentKind::Kubernetes)
        .collect();
    if kube.iter().any(|f| routine(f)) {
        out.push(String::new());
        out.push(format!(
            "{MEASURED} routine maintenance, by method: what each cost from the request to the end of settle. \
             A rolling restart replaces every member (highest ordinal first), a drain the member on the drained node; \
             per member: its old pod terminating → its new pod Ready."
        ));
        out.push(String::new());
        out.push(MAINTENANCE_HEADER.to_owned());
        out.extend(maintenance_rows(&kube, readme_dir));
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

/// A sitting measured with another method than the spec's eviction.
fn routine(f: &BaselineFile) -> bool {
    f.baseline
        .disruption
        .as_ref()
        .and_then(|d| d.method.kube_method())
        .is_some_and(|m| m != KubeMethod::Evict)
}

/// What `rehearse` and `measure` print at the end, the table last. With `log_block` (a
/// sitting in a pod, whose log may be the only way out) baseline.json between the log
/// markers comes first; in one write, so that no log line from elsewhere lands inside it.
pub fn print_result(f: &BaselineFile, log_block: bool) {
    use std::io::Write;
    let block =
        if log_block { crate::model::baseline::log_block(&f.baseline) } else { String::new() };
    let text = format!("{block}{}\n", render(std::slice::from_ref(f), None));
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// `report --update`: `readme`'s text with the tables of `baselines` between its markers,
/// links relative to `dir` (the README's directory). Idempotent.
pub fn updated(readme: &str, dir: &Path, baselines: &[BaselineFile]) -> Result<String, String> {
    splice(readme, &render(baselines, Some(dir)))
}

/// Replaces what is between the markers in `readme` with `table`. Idempotent.
pub fn splice(readme: &str, table: &str) -> Result<String, String> {
    splice_between(readme, BEGIN, END, table)
}

/// Replaces what is between the lines `begin` and `end` in `text` with `body`. Idempotent.
pub fn splice_between(text: &str, begin: &str, end: &str, body: &str) -> Result<String, String> {
    let b = text.find(begin).ok_or_else(|| format!("no {begin} marker"))?;
    let e = text.find(end).ok_or_else(|| format!("no {end} marker"))?;
    if e < b {
        return Err(format!("{end} comes before {begin}"));
    }
    Ok(format!("{}{begin}\n{body}\n{}", &text[..b], &text[e..]))
}

// ---------------------------------------------------------------------------------------
// CSV and compare
// ---------------------------------------------------------------------------------------

/// `report --format csv`: the tidy list, one row per figure ([`Measurement`] has the
/// columns), runs by run id, then the residual rate over their quiet windows
/// ([`crate::analysis::rate`], 95 %).
pub fn render_csv(baselines: &[BaselineFile]) -> Result<String, InternalError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for f in in_order(baselines) {
        for m in measurements(&f.path, &f.baseline) {
            w.serialize(m).map_err(|e| InternalError(format!("csv export: {e}")))?;
        }
    }
    // The residual rate over the same baselines' quiet windows (window `quiet`).
    let sources: Vec<crate::model::rate::RateInput> =
        baselines.iter().map(|f| f.rate.clone()).collect();
    for m in crate::analysis::rate::as_measurements(&crate::analysis::rate::pool(&sources, 0.95)) {
        w.serialize(m).map_err(|e| InternalError(format!("csv export: {e}")))?;
    }
    // Into memory: only serializing our own rows can fail here, which is a bug.
    let bytes = w.into_inner().map_err(|e| InternalError(format!("csv export: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// About three significant digits, at least three decimals.
fn sig(v: f64, sign: bool) -> String {
    let decimals = if v == 0.0 || v.abs() >= 1.0 {
        3
    } else {
        (2 - v.abs().log10().floor() as i32).clamp(3, 9) as usize
    };
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
    let mut out = vec![
        format!("| window | figure | A: {a_name} | B: {b_name} | B − A |"),
        "|---|---|---|---|---|".to_owned(),
    ];
    for d in diffs {
        let window = if d.member.is_empty() {
            d.window.clone()
        } else {
            format!("{} / {}", d.window, d.member)
        };
        let diff = d.diff.map_or("—".to_owned(), |v| sig(v, true));
        out.push(format!("| {window} | {} | {} | {} | {diff} |", d.figure, n(d.a), n(d.b)));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests;
