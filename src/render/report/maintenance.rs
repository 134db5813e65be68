//! The routine-maintenance table: one row per Kubernetes sitting measured with another
//! method than the spec's eviction (delete, rolling restart, drain), from the request to the
//! end of settle ([`crate::analysis::maintenance::cost`]); GKE's rows stay "not yet
//! measured" with the command that fills them.

use std::path::Path;

use super::{GKE_COMMAND, relative};
use crate::model::baseline::{EnvironmentKind, KubeMethod};
use crate::model::rate::BaselineFile;

pub(super) const MAINTENANCE_HEADER: &str = "| operation | first disrupted | elections (raft-term delta) | leader changes: raw sum / reset-aware increase | causes | client writes unavailable, longest: canary / one in flight | per member, terminating → Ready | operation in all | request → healthy list | environment | source |\n|---|---|---|---|---|---|---|---|---|---|---|";

/// What a method's GKE row says to do, until one is measured there.
fn gke_method_todo(m: KubeMethod) -> String {
    // The method by its one name (KubeMethod's, which clap takes too).
    let flags = match m {
        KubeMethod::Evict => String::new(),
        m => format!(" --method {}", m.as_str()),
    };
    match m {
        // Autopilot manages its nodes: a cordon of ours may be refused, and its own node
        // upgrades are the drains there.
        KubeMethod::Drain => format!(
            "on Autopilot, its own node upgrades are the drains (the continuous sampler records them; a cordon of ours may be refused); on GKE Standard run `{GKE_COMMAND}{flags}`"
        ),
        _ => format!("run `{GKE_COMMAND}{flags}`"),
    }
}

fn secs(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_owned(), |s| format!("{s:.2} s"))
}

/// One row per Kubernetes sitting, by method, from the request to the end of settle
/// ([`crate::analysis::maintenance::cost`]): what a routine operation costs next to one
/// eviction. GKE's rows stay "not yet measured" with the command until one is.
pub(super) fn maintenance_rows(
    baselines: &[&BaselineFile],
    readme_dir: Option<&Path>,
) -> Vec<String> {
    let mut out = Vec::new();
    for &m in KubeMethod::ALL {
        let of_method = |f: &&&BaselineFile| {
            f.baseline.disruption.as_ref().and_then(|d| d.method.kube_method()) == Some(m)
        };
        if !baselines.iter().filter(of_method).any(|f| f.baseline.environment.on_target_cluster()) {
            out.push(format!("| {} | — | — | — | — | — | — | — | not yet measured | GKE Autopilot, dlock-gke | {} |", m.as_str(), gke_method_todo(m)));
        }
    }
    let mut rows: Vec<&&BaselineFile> = baselines
        .iter()
        .filter(|f| f.baseline.environment.kind == EnvironmentKind::Kubernetes)
        .collect();
    rows.sort_by_key(|f| {
        (
            !f.baseline.environment.on_target_cluster(),
            f.baseline.disruption.as_ref().and_then(|d| d.method.kube_method()).map(|m| m as u8),
            f.baseline.run_id.clone(),
        )
    });
    for f in rows {
        let (b, path) = (&f.baseline, &f.path);
        let (Some(d), Some(c)) = (b.disruption.as_ref(), crate::analysis::maintenance::cost(b))
        else {
            continue;
        };
        let op = c.method.map_or_else(|| d.method.to_string(), |m| m.as_str().to_owned());
        let first = format!("{} ({})", d.target, d.role());
        let elections = c.elections.map_or_else(|| "—".to_owned(), |e| e.to_string());
        let changes = format!(
            "{} / {:.0}",
            c.raw_sum.map_or_else(|| "—".to_owned(), |r| format!("{r:.0}")),
            c.reset_aware_increase
        );
        let causes = if c.causes.is_empty() {
            "none".to_owned()
        } else {
            c.causes.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")
        };
        let writes = format!(
            "{} / {}",
            secs(c.write_unavailable_s),
            secs(c.write_unavailable_one_in_flight_s)
        );
        let (members, total) = match &d.maintenance {
            Some(mt) => (
                mt.members
                    .iter()
                    .map(|r| {
                        format!(
                            "{}{} {}{}",
                            r.member,
                            if r.was_leader { " (leader)" } else { "" },
                            secs(r.down_s),
                            r.node.as_deref().map(|n| format!(" on {n}")).unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                secs(mt.operation_s),
            ),
            None => ("—".to_owned(), "—".to_owned()),
        };
        let source = match readme_dir {
            Some(dir) => format!("[{}]({})", b.run_id, relative(path, dir).display()),
            None => format!("`{}`", path.display()),
        };
        let status = if b.is_complete() { String::new() } else { " (incomplete)".to_owned() };
        out.push(format!(
            "| {op}{status} | {first} | {elections} | {changes} | {causes} | {writes} | {members} | {total} | {} | {} | {source} |",
            secs(d.request_to_healthy_s),
            b.environment.description
        ));
    }
    out
}
