//! The T-056 ledger's baseline section (tasks/README.md, "T-056: the baseline"), written by
//! `leaderwatch sitting --ledger`: between its two markers, the note of every GKE run
//! (each [`report::ledger_note`], its path relative to the ledger), or "not yet measured"
//! with the command while there is none. The rest of the file is never touched.

use std::path::Path;

use crate::model::rate::BaselineFile;
use crate::render::report;

pub const BEGIN: &str = "<!-- t056-ledger:begin -->";
pub const END: &str = "<!-- t056-ledger:end -->";

/// The section's text from `runs` (the GKE runs, or a rehearsal's in a ledger of its own;
/// dry runs left out by the caller), paths relative to `dir`, the ledger's directory.
pub fn section(runs: &[BaselineFile], dir: &Path) -> String {
    if runs.is_empty() {
        return "**On GKE: not yet measured.** Nothing in this repository can reach GKE. The \
                sitting is one command, which also rewrites this section \
                ([docs/gke-sitting.md](../docs/gke-sitting.md)):\n\n\
                ```sh\n\
                leaderwatch sitting --context CONTEXT --image IMAGE@sha256:DIGEST --ledger tasks/README.md\n\
                ```"
            .to_owned();
    }
    let n = format!("{} run{}", runs.len(), if runs.len() == 1 { "" } else { "s" });
    let head = if runs.iter().all(|f| f.baseline.environment.on_target_cluster()) {
        format!("**On GKE: measured**, {n}")
    } else {
        // A rehearsal's own ledger (an --out-dir of its own): never a GKE figure.
        format!("**A rehearsal, not GKE**: {n} on the local control plane")
    };
    let mut out = vec![format!(
        "{head} (written by `leaderwatch sitting --ledger` from their baseline.json):"
    )];
    let mut runs: Vec<&BaselineFile> = runs.iter().collect();
    runs.sort_by(|a, b| a.baseline.run_id.cmp(&b.baseline.run_id));
    for f in runs {
        let rel = BaselineFile { path: report::relative(&f.path, dir), ..f.clone() };
        out.push(report::ledger_note(&rel));
    }
    out.join("\n\n")
}

/// `ledger`'s text with [`section`] between its markers. Idempotent.
pub fn updated(ledger: &str, dir: &Path, runs: &[BaselineFile]) -> Result<String, String> {
    report::splice_between(ledger, BEGIN, END, &section(runs, dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_ledger_says_not_yet_measured_in_the_words_the_sitting_writes() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tasks/README.md");
        let text = std::fs::read_to_string(path).expect("tasks/README.md");
        let dir = Path::new(path).parent().expect("dir");
        assert_eq!(updated(&text, dir, &[]).as_deref(), Ok(text.as_str()), "no GKE run yet");
        assert!(section(&[], dir).contains("not yet measured"));
        assert!(updated("no markers", dir, &[]).is_err());
    }
}
