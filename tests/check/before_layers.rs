//! The layering of src/ (model, analysis, io, render) changed nothing users see: `report`,
//! `report --format csv`, `rate` (text, JSON, CSV) and `compare` (table, JSON) on copies of
//! the committed runs give byte for byte what the binary before it gave. The inputs and
//! the before outputs are in tests/fixtures/before-layers/ (recorded with the release
//! binary of commit df1211f, 2026-12-01). The inputs' events.csv files were migrated once
//! to the current header (#35); the outputs did not change.

use crate::support;

use support::{leaderwatch, repo};

const RUNS: &str = "tests/fixtures/before-layers/runs";

fn baselines() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo(RUNS))
        .expect("runs")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("baseline.json").exists())
        .map(|p| {
            format!(
                "{RUNS}/{}/baseline.json",
                p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
            )
        })
        .collect();
    v.sort(); // as the shell's glob gave them
    v
}

fn same_as_before(args: &[String], before: &str) {
    let out = leaderwatch().current_dir(repo(".")).args(args).output().expect("run leaderwatch");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let want = std::fs::read(repo(&format!("tests/fixtures/before-layers/{before}")))
        .expect("before file");
    assert!(
        out.stdout == want,
        "{args:?} differs from {before}:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn args(head: &[&str], tail: &[&str]) -> Vec<String> {
    head.iter()
        .map(|s| s.to_string())
        .chain(baselines())
        .chain(tail.iter().map(|s| s.to_string()))
        .collect()
}

#[test]
fn report_and_its_csv_are_as_before() {
    same_as_before(&args(&["report"], &[]), "report.md");
    same_as_before(&args(&["report"], &["--format", "csv"]), "report.csv");
}

#[test]
fn rate_is_as_before() {
    for (o, before) in [("text", "rate.txt"), ("json", "rate.json"), ("csv", "rate.csv")] {
        same_as_before(&["rate".into(), RUNS.into(), "-o".into(), o.into()], before);
    }
}

#[test]
fn compare_is_as_before() {
    let a = format!("{RUNS}/rehearsal-leader-sigterm-20261201T182359Z/baseline.json");
    let b = format!("{RUNS}/kube-leader-eviction-20261201T183143Z/baseline.json");
    same_as_before(&["compare".into(), a.clone(), b.clone()], "compare.md");
    same_as_before(&["compare".into(), a, b, "-o".into(), "json".into()], "compare.json");
}
