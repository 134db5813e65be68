//! `leaderwatch recount` on the committed runs: every run's recorded election figures are
//! what its own samples.csv and events.csv give with this version's rules, and a recount
//! of a run as it was first recorded writes exactly the committed files.

use std::path::{Path, PathBuf};

use leaderwatch::ops::recount::recount;

use crate::support;

const NODE_LOSS: &str = "data/fault-node-20261207T001728Z/node-loss-toleration";

/// Regression: the survivors of a lost node said RAFT NO LEADER for about 15.8 s (samples.csv,
/// 00:26:44.46 to 00:27:00.24), yet the run recorded the election as leaderless 0.0 s: the
/// new leader was named a round before its term showed.
#[test]
fn the_node_loss_election_was_leaderless_for_the_15_s_its_samples_show() {
    let dir = support::repo(NODE_LOSS);
    let base = tokio::time::Instant::now();
    let rounds = leaderwatch::io::samples::rounds(&dir.join("samples.csv"), base).expect("rounds");
    let found = leaderwatch::analysis::recount::elections(
        &rounds,
        &[],
        3,
        std::time::Duration::from_secs(30),
    );
    let (_, d) = found.iter().find(|(_, d)| (d.term_from, d.term_to) == (7, 9)).expect("7 -> 9");
    let s = d.leaderless_s.expect("known");
    assert!((15.7..15.85).contains(&s), "leaderless {s} s");
}

/// Every committed run recounts to what it records: a rule changed without `recount
/// --write` over data/ fails here, naming the figure.
#[test]
fn every_committed_run_recounts_to_what_it_records() {
    let runs = recount(&[support::repo("data")], false).expect("recount data/");
    assert!(runs.len() >= 50, "{} runs", runs.len());
    let said: Vec<String> = runs
        .iter()
        .flat_map(|r| {
            let f = r.file.display().to_string();
            let changes = r.outcome.changes.iter().map(move |c| {
                format!("{f}: terms {:?}: {} {} -> {}", c.terms, c.field, c.recorded, c.recounted)
            });
            changes.chain(r.outcome.unmatched.clone())
        })
        .collect();
    assert!(said.is_empty(), "recount data/ --write would change:\n{}", said.join("\n"));
}

/// The committed node-loss run taken back to what the run itself wrote (no revision row,
/// leaderless 0.0) and recounted with --write: its summary.json and events.csv come out
/// byte for byte as committed, and a second recount changes nothing.
#[test]
fn a_recount_of_the_run_as_recorded_writes_the_committed_files() {
    let committed = support::repo(NODE_LOSS);
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = tmp.path().join("run");
    copy_dir(&committed, &run);
    let events = std::fs::read_to_string(committed.join("events.csv")).expect("events.csv");
    let original: String = events
        .lines()
        .filter(|l| !l.contains(",election_revised,"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(original, events, "the committed run has its revision row");
    std::fs::write(run.join("events.csv"), &original).expect("write");
    let summary = std::fs::read_to_string(committed.join("summary.json")).expect("summary");
    let recorded = summary.replace("\"leaderless_s\": 15.775", "\"leaderless_s\": 0.0");
    assert_ne!(recorded, summary);
    std::fs::write(run.join("summary.json"), &recorded).expect("write");

    let out = recount(std::slice::from_ref(&run), true).expect("recount");
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].outcome.changes.len(), 1, "{:?}", out[0].outcome);
    assert!(out[0].written);
    let read = |n: &str| std::fs::read_to_string(run.join(n)).expect("read");
    assert_eq!(read("summary.json"), summary);
    assert_eq!(read("events.csv"), events);
    let again = recount(&[run], true).expect("again");
    assert!(again[0].outcome.changes.is_empty() && !again[0].written);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let target: PathBuf = to.join(e.file_name());
        if e.path().is_file() {
            std::fs::copy(e.path(), target).expect("copy");
        }
    }
}
