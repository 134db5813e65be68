//! The member-health table under the window tables: one row per member per window of a
//! schema-3 baseline (WAL fsync and backend commit quantiles, the worst peer's round trip,
//! the failure counters, db size against quota), each figure marked when it went over its
//! threshold. Pure: rendered from the measurement list like the rest of the report.

use super::{get, groups, value};
use crate::model::measurement::{BYTES, Measurement, SECONDS};

/// A latency in milliseconds, about three significant digits.
pub(super) fn ms(s: f64) -> String {
    let v = s * 1000.0;
    match v.abs() {
        a if a >= 100.0 => format!("{v:.0} ms"),
        a if a >= 10.0 => format!("{v:.1} ms"),
        _ => format!("{v:.2} ms"),
    }
}

pub(super) fn bytes(v: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let (mut x, mut i) = (v, 0);
    while x.abs() >= 1024.0 && i + 1 < units.len() {
        x /= 1024.0;
        i += 1;
    }
    if x.fract() == 0.0 { format!("{x:.0} {}", units[i]) } else { format!("{x:.1} {}", units[i]) }
}

pub(super) fn count(v: f64) -> String {
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
pub(super) fn cell(m: Option<&Measurement>) -> String {
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
    let mut out =
        if cells.iter().all(|c| c == "—") { "—".to_owned() } else { cells.join(" / ") };
    if let Some(n) = n {
        out.push_str(&format!(" ({} {what}{})", count(n), if n == 1.0 { "" } else { "s" }));
    }
    out
}

pub const HEALTH_HEADER: &str = "| run | window | member | WAL fsync p50 / p99 | backend commit p99 | peer RTT p99 (worst peer) | heartbeat send failures | slow applies | proposals failed | slow read indexes | db size / quota |";

/// Health-table rows of one baseline's figures, one per member per window.
pub(super) fn health_rows(ms: &[Measurement], run: &str) -> Vec<String> {
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
        let peers: Vec<(&str, &Measurement)> = rows
            .iter()
            .filter_map(|m| {
                m.figure
                    .strip_prefix("peer_rtt_p99_s{")
                    .and_then(|p| p.strip_suffix('}'))
                    .map(|p| (p, *m))
            })
            .collect();
        let worst = peers
            .iter()
            .filter(|(_, m)| m.value.is_some())
            .max_by(|a, b| a.1.value.unwrap_or_default().total_cmp(&b.1.value.unwrap_or_default()));
        // The worst peer, and any other peer that went over its threshold.
        let mut rtt: Vec<String> =
            worst.iter().map(|(p, m)| format!("{p}: {}", cell(Some(m)))).collect();
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
        for m in rows.iter().filter(|m| {
            m.over
                && !COLUMNS.contains(&m.figure.as_str())
                && !m.figure.starts_with("peer_rtt_p99_s{")
        }) {
            member.push_str(&format!(" {} {}", m.figure, cell(Some(m))));
        }
        let db = match (
            f("db_size_bytes").and_then(|m| m.value),
            f("quota_bytes").and_then(|m| m.value),
        ) {
            (None, None) => "—".to_owned(),
            _ => format!("{} / {}", cell(f("db_size_bytes")), cell(f("quota_bytes"))),
        };
        out.push(format!(
            "| {run} | {} | {member} | {} | {} | {rtt} | {} | {} | {} | {} | {db} |",
            first.window,
            quantiles_cell(
                &[f("wal_fsync_p50_s"), f("wal_fsync_p99_s")],
                value(rows, "wal_fsyncs"),
                "fsync"
            ),
            quantiles_cell(&[f("backend_commit_p99_s")], value(rows, "backend_commits"), "commit"),
            cell(f("heartbeat_send_failures")),
            cell(f("slow_applies")),
            cell(f("proposals_failed")),
            cell(f("slow_read_indexes")),
        ));
    }
    out
}
