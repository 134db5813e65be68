//! Dry runs are in no derived figure (issue 61): a `sitting --dry-run` evicts nothing, so
//! `report`'s table, its CSV, `--update` and `--alert-rule` leave one out by its own flag
//! (`disruption.method` ends in `-dry-run`) and say so, whatever its directory is called.
//! Before, only the sitting's hand-off filtered them: a leader dry run passed the alert's
//! "a leader was lost" gate with nothing evicted.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{self, leaderwatch};

/// A committed run's baseline.json copied into `dir` under a plain name, as measured on
/// Kubernetes, its disruption turned into a dry run when `dry`.
fn copy(run: &str, dir: &Path, name: &str, dry: bool) -> PathBuf {
    let src =
        support::committed_runs_named(run).into_iter().next().expect(run).join("baseline.json");
    let mut b: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&src).expect("read")).expect("json");
    b["environment"]["kind"] = "kubernetes".into();
    b["environment"]["description"] = format!("test copy of {run}").into();
    if dry {
        let m = b["disruption"]["method"].as_str().expect("a method").to_owned();
        b["disruption"]["method"] = format!("{m}-dry-run").into();
        b["run_id"] = format!("{}-dry", b["run_id"].as_str().expect("run_id")).into();
    }
    let to = dir.join(name);
    std::fs::create_dir_all(&to).expect("mkdir");
    let p = to.join("baseline.json");
    std::fs::write(&p, serde_json::to_vec(&b).expect("json")).expect("write");
    p
}

fn report(args: &[&str], files: &[&PathBuf]) -> Output {
    leaderwatch().arg("report").args(args).args(files).output().expect("report")
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_leader_dry_run_does_not_pass_the_alerts_leader_gate() {
    let d = tempfile::tempdir().expect("tempdir");
    let follower = copy("kube-follower-eviction-", d.path(), "a", false);
    let leader_dry = copy("kube-leader-eviction-", d.path(), "b", true);
    let o = report(&["--alert-rule"], &[&follower, &leader_dry]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("disrupted a leader"), "{}", err(&o));
    // The same leader run, not a dry run, passes it.
    let leader = copy("kube-leader-eviction-", d.path(), "c", false);
    let o = report(&["--alert-rule"], &[&follower, &leader]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    // Only dry runs: nothing to derive from.
    let o = report(&["--alert-rule"], &[&leader_dry]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(o.stdout.is_empty());
}

#[test]
fn the_table_the_csv_and_update_leave_a_dry_run_out_and_say_so() {
    let d = tempfile::tempdir().expect("tempdir");
    let real = copy("kube-leader-eviction-", d.path(), "real", false);
    let dry = copy("kube-leader-eviction-", d.path(), "dry", true);
    let dry_id = {
        let b: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&dry).expect("read")).expect("json");
        b["run_id"].as_str().expect("run_id").to_owned()
    };
    for args in [&[][..], &["--format", "csv"][..]] {
        let o = report(args, &[&real, &dry]);
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(!out.contains(&dry_id), "{args:?}: the dry run is in it:\n{out}");
        assert!(err(&o).contains("left out") && err(&o).contains("a dry run"), "{}", err(&o));
    }
    let o = report(&[], &[&dry]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("is a dry run"), "{}", err(&o));
    // --update: the README's table.
    let readme = d.path().join("README.md");
    std::fs::copy(support::repo("deploy/k8s/etcd/README.md"), &readme).expect("copy");
    let o = leaderwatch()
        .arg("report")
        .arg(&real)
        .arg(&dry)
        .arg("--update")
        .arg(&readme)
        .output()
        .expect("report --update");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let table = std::fs::read_to_string(&readme).expect("README");
    assert!(!table.contains(&dry_id), "the dry run is in the README's table");
}
