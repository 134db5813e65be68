//! baseline.json files -> the observation-window table, and the README update between
//! `<!-- baseline:begin -->` and `<!-- baseline:end -->`. Every count is shown as the three
//! figures DOMAIN.md asks for, never as a bare "leader changes". Rendering is a pure
//! function of the baselines, so `report --update` run twice changes nothing.

use std::path::{Component, Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::baseline::{Baseline, WindowRecord};
use crate::record::{write_atomic, RecordError};
use crate::Error;

pub const BEGIN: &str = "<!-- baseline:begin -->";
pub const END: &str = "<!-- baseline:end -->";

/// The command that will fill the GKE rows, shown until a Kubernetes baseline exists.
pub const GKE_COMMAND: &str =
    "leaderwatch measure -n dlock --reach port-forward --idle 20m --target follower --out data/gke-$(date -u +%Y%m%dT%H%M%SZ)";

/// Reads and checks one baseline.json.
pub fn load(path: &Path) -> Result<Baseline, Error> {
    let text = std::fs::read(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
    let b: Baseline =
        serde_json::from_slice(&text).map_err(|e| Error::Usage(format!("{}: not a leaderwatch baseline.json: {e}", path.display())))?;
    if b.schema_version != crate::baseline::SCHEMA_VERSION {
        return Err(Error::Usage(format!("{}: schema_version {} is not supported", path.display(), b.schema_version)));
    }
    Ok(b)
}

fn num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v}"),
        None => "unknown".to_owned(),
    }
}

/// "raw sum 3 → 5; reset-aware increase 2; elections 1"
pub fn counts_cell(w: &WindowRecord) -> String {
    let c = &w.leader_changes;
    format!(
        "raw sum {} → {}; reset-aware increase {}; elections (raft term) {}",
        num(c.raw_sum_start),
        num(c.raw_sum_end),
        num(Some(c.reset_aware_increase)),
        w.elections.map_or("unknown".to_owned(), |e| e.to_string())
    )
}

fn when(start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    let secs = (end - start).num_milliseconds() as f64 / 1000.0;
    let end_fmt = if start.date_naive() == end.date_naive() { "%H:%M:%SZ" } else { "%Y-%m-%d %H:%M:%SZ" };
    format!("{} – {} ({secs:.1} s)", start.format("%Y-%m-%d %H:%M:%SZ"), end.format(end_fmt))
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

/// Markdown rows for one baseline. `link` is how the source column names the file.
fn rows(b: &Baseline, link: &str) -> Vec<String> {
    let env = &b.environment.description;
    let mut out: Vec<String> = b
        .windows
        .iter()
        .map(|w| format!("| {} | {} | {} | {env} | {link} |", window_label(w, b), counts_cell(w), when(w.start, w.end)))
        .collect();
    if let Some(d) = &b.disruption {
        let n = b.environment.members.len();
        let mut value = match (d.loss_to_healthy_s, d.request_to_healthy_s) {
            (Some(l), Some(r)) => format!("{l:.2} s (request → healthy {r:.2} s)"),
            (None, Some(r)) => format!("member loss not observed; request → healthy {r:.2} s"),
            _ => "did not recover within the sitting's timeout".to_owned(),
        };
        // A local rehearsal keeps the member down on purpose (standing in for the
        // reschedule): say how much of the figure that is.
        let at = |k: &str| d.ground_truth.iter().find(|g| g.kind == k).map(|g| g.at);
        if let (Some(exit), Some(restart)) = (at("exited"), at("restarted")) {
            value.push_str(&format!("; of which the member was kept down {:.2} s (exit → restart)", crate::baseline::seconds_between(exit, restart)));
        }
        let window = match (d.member_lost_at, d.healthy_at) {
            (Some(a), Some(h)) => when(a, h),
            (_, Some(h)) => when(d.requested_at, h),
            _ => format!("from {}", d.requested_at.format("%Y-%m-%d %H:%M:%SZ")),
        };
        out.push(format!("| time from member loss to a healthy {n}-member endpoint list | {value} | {window} | {env} | {link} |"));
    }
    out
}

/// The whole table. `readme_dir` (where the table will live) makes the source links
/// relative; without it the paths are shown as given.
pub fn render(baselines: &[(PathBuf, Baseline)], readme_dir: Option<&Path>) -> String {
    let mut out = vec![
        "| measurement | value | observation window | environment | source |".to_owned(),
        "|---|---|---|---|---|".to_owned(),
    ];
    for (path, b) in baselines {
        let link = match readme_dir {
            Some(dir) => format!("[{}]({})", b.run_id, relative(path, dir).display()),
            None => format!("`{}`", path.display()),
        };
        out.extend(rows(b, &link));
    }
    if !baselines.iter().any(|(_, b)| b.environment.kind == "kubernetes") {
        let gke = "GKE Autopilot, dlock-gke";
        let todo = format!("not yet measured: run `{GKE_COMMAND}`, then `leaderwatch report ... --update`");
        for m in [
            "leader changes at rest (>= 20 min idle): raw sum / reset-aware increase / elections",
            "leader changes after one drain-equivalent eviction: raw sum / reset-aware increase / elections",
            "time from member loss to a healthy 3-member endpoint list",
        ] {
            out.push(format!("| {m} | not yet measured | — | {gke} | {todo} |"));
        }
    }
    out.join("\n")
}

/// What `rehearse` and `measure` print at the end: the table, then baseline.json between
/// the log markers, in one write so that no log line from elsewhere lands inside it.
pub fn print_result(path: &Path, b: &Baseline) {
    use std::io::Write;
    let text = format!("{}\n{}", render(&[(path.to_path_buf(), b.clone())], None), crate::baseline::log_block(b));
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
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

/// `report --update README.md`: splices the table in, atomically. Returns whether the
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
}
