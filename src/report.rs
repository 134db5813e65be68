//! baseline.json files -> the observation-window table, and the README update between
//! `<!-- baseline:begin -->` and `<!-- baseline:end -->`. Every count is shown as its three
//! figures (docs/counting.md), never as a bare "leader changes". Rendering is a pure
//! function of the baselines, so `report --update` run twice changes nothing.

use std::path::{Component, Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::baseline::{Baseline, WindowRecord};
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

/// `start – end (secs)`; `secs` is the monotonic duration the run measured.
fn when(start: DateTime<Utc>, end: DateTime<Utc>, secs: f64) -> String {
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

/// Markdown rows for one baseline. `link` is how the source column names the file.
fn rows(b: &Baseline, link: &str) -> Vec<String> {
    let env = &b.environment.description;
    let mut out: Vec<String> = b
        .windows
        .iter()
        .map(|w| format!("| {} | {MEASURED} {} | {} | {env} | {link} |", window_label(w, b), counts_cell(w), when(w.start, w.end, w.duration_s)))
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
        if let Some((down, how)) = kept_down_s(d) {
            value.push_str(&format!("; of which the member was kept down {down:.2} s ({how})"));
        }
        let window = match (d.member_lost_at, d.healthy_at) {
            (Some(a), Some(h)) => when(a, h, d.loss_to_healthy_s.unwrap_or_default()),
            (_, Some(h)) => when(d.requested_at, h, d.request_to_healthy_s.unwrap_or_default()),
            _ => format!("from {}", d.requested_at.format("%Y-%m-%d %H:%M:%SZ")),
        };
        let role = if d.target_was_leader { "leader" } else { "follower" };
        out.push(format!(
            "| time from member loss to a healthy {n}-member endpoint list ({}, target {} = {role}) | {MEASURED} {value} | {window} | {env} | {link} |",
            d.method, d.target
        ));
    }
    out
}

/// How long a local rehearsal kept the member down on purpose (exit, or freeze, to restart
/// or thaw), from the disruptor's own instants: monotonic where recorded (schema 2).
fn kept_down_s(d: &crate::baseline::Disruption) -> Option<(f64, &'static str)> {
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

/// The whole table, runs in time order (by run id, whatever the order of the arguments, so
/// that `report --update` gives one table for one set of files). `readme_dir` (where the
/// table will live) makes the source links relative; without it the paths are shown as given.
pub fn render(baselines: &[(PathBuf, Baseline)], readme_dir: Option<&Path>) -> String {
    let mut out = vec![
        "| measurement | value | observation window | environment | source |".to_owned(),
        "|---|---|---|---|---|".to_owned(),
    ];
    let mut in_order: Vec<&(PathBuf, Baseline)> = baselines.iter().collect();
    in_order.sort_by(|a, b| a.1.run_id.cmp(&b.1.run_id));
    for (path, b) in in_order {
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

/// One measurement of one baseline, flattened: the CSV export and `compare` use it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Measurement {
    pub measurement: String,
    pub raw_sum_start: Option<f64>,
    pub raw_sum_end: Option<f64>,
    pub reset_aware_increase: Option<f64>,
    pub elections: Option<u64>,
    /// Seconds, for timings (loss to healthy).
    pub value_s: Option<f64>,
    pub window_start: String,
    pub window_end: String,
    pub window_s: f64,
    pub environment: String,
    pub source: String,
}

/// Every window and the recovery timing of a baseline, one row each.
pub fn measurements(path: &Path, b: &Baseline) -> Vec<Measurement> {
    let ts = |t: DateTime<Utc>| crate::record::ts(t);
    let mut out: Vec<Measurement> = b
        .windows
        .iter()
        .map(|w| Measurement {
            measurement: window_label(w, b),
            raw_sum_start: w.leader_changes.raw_sum_start,
            raw_sum_end: w.leader_changes.raw_sum_end,
            reset_aware_increase: Some(w.leader_changes.reset_aware_increase),
            elections: w.elections,
            value_s: None,
            window_start: ts(w.start),
            window_end: ts(w.end),
            window_s: w.duration_s,
            environment: b.environment.description.clone(),
            source: path.display().to_string(),
        })
        .collect();
    if let Some(d) = &b.disruption {
        let start = d.member_lost_at.unwrap_or(d.requested_at);
        let end = d.healthy_at.unwrap_or(start);
        out.push(Measurement {
            measurement: format!("time from member loss to a healthy {}-member endpoint list", b.environment.members.len()),
            raw_sum_start: None,
            raw_sum_end: None,
            reset_aware_increase: None,
            elections: None,
            value_s: d.loss_to_healthy_s,
            window_start: ts(start),
            window_end: ts(end),
            window_s: d.loss_to_healthy_s.or(d.request_to_healthy_s).unwrap_or_default(),
            environment: b.environment.description.clone(),
            source: path.display().to_string(),
        });
    }
    out
}

/// `report --format csv`: one row per measurement, for the M6/M7 documents.
pub fn render_csv(baselines: &[(PathBuf, Baseline)]) -> Result<String, Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for (p, b) in baselines {
        for m in measurements(p, b) {
            w.serialize(m).map_err(|e| Error::Usage(format!("csv export: {e}")))?;
        }
    }
    let bytes = w.into_inner().map_err(|e| Error::Usage(format!("csv export: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// One line of `compare`: a figure in A and in B, and B − A.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Difference {
    pub window: String,
    pub figure: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub diff: Option<f64>,
}

fn figures(b: &Baseline) -> Vec<(String, String, Option<f64>)> {
    let mut out = Vec::new();
    for w in &b.windows {
        let c = &w.leader_changes;
        for (f, v) in [
            ("duration_s", Some(w.duration_s)),
            ("raw_sum_start", c.raw_sum_start),
            ("raw_sum_end", c.raw_sum_end),
            ("reset_aware_increase", Some(c.reset_aware_increase)),
            ("elections", w.elections.map(|e| e as f64)),
            ("leader_transitions", Some(w.leader_transitions.len() as f64)),
        ] {
            out.push((w.name.clone(), f.to_owned(), v));
        }
    }
    if let Some(d) = &b.disruption {
        for (f, v) in [
            ("loss_to_healthy_s", d.loss_to_healthy_s),
            ("request_to_healthy_s", d.request_to_healthy_s),
            ("attempts", Some(d.attempts as f64)),
            ("blocked_s", Some(d.blocked_s)),
        ] {
            out.push(("recovery".to_owned(), f.to_owned(), v));
        }
    }
    out
}

/// Every figure of A next to B's, matched by window and figure name.
pub fn compare(a: &Baseline, b: &Baseline) -> Vec<Difference> {
    let fb = figures(b);
    let mut out: Vec<Difference> = figures(a)
        .into_iter()
        .map(|(window, figure, va)| {
            let vb = fb.iter().find(|(w, f, _)| *w == window && *f == figure).and_then(|x| x.2);
            Difference { diff: va.zip(vb).map(|(x, y)| y - x), window, figure, a: va, b: vb }
        })
        .collect();
    for (window, figure, vb) in fb {
        if !out.iter().any(|d| d.window == window && d.figure == figure) {
            out.push(Difference { window, figure, a: None, b: vb, diff: None });
        }
    }
    out
}

/// `compare` as a markdown table.
pub fn render_compare(a_name: &str, b_name: &str, diffs: &[Difference]) -> String {
    let n = |v: Option<f64>| v.map_or("—".to_owned(), |v| if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.3}") });
    let mut out = vec![format!("| window | figure | A: {a_name} | B: {b_name} | B − A |"), "|---|---|---|---|---|".to_owned()];
    for d in diffs {
        let diff = d.diff.map_or("—".to_owned(), |v| if v.fract() == 0.0 { format!("{v:+.0}") } else { format!("{v:+.3}") });
        out.push(format!("| {} | {} | {} | {} | {diff} |", d.window, d.figure, n(d.a), n(d.b)));
    }
    out.join("\n")
}
