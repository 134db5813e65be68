//! `leaderwatch rehearse` end to end (real local etcd, short windows). `report` and
//! `compare` on the committed runs are tests/check/report_cli.rs.

use crate::support;

use std::path::Path;

use support::{leaderwatch, one_cluster_at_a_time_blocking, pinned_etcd_version};

/// The label of a rehearsal on the local members, which run the pinned etcd.
fn local_label() -> String {
    format!("local loopback, etcd {}, 3 members", pinned_etcd_version())
}

fn rehearse(target: &str, out: &Path) -> (serde_json::Value, String) {
    let _one = one_cluster_at_a_time_blocking();
    let o = leaderwatch()
        .args([
            "rehearse", "--idle", "5s", "--settle", "3s", "--down", "2s", "--target", target,
            "--out",
        ])
        .arg(out)
        .output()
        .expect("run rehearse");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    let b =
        serde_json::from_slice(&std::fs::read(out.join("baseline.json")).expect("baseline.json"))
            .expect("json");
    (b, stdout)
}

fn window<'a>(b: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    b["windows"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == name))
        .unwrap_or_else(|| panic!("window {name}"))
}

#[test]
fn rehearse_leader_target_one_election_in_the_disruption_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, stdout) = rehearse("leader", dir.path());
    assert_eq!(window(&b, "at_rest")["elections"], 0);
    assert_eq!(window(&b, "disruption")["elections"], 1, "{b:#}");
    assert_eq!(window(&b, "settle")["elections"], 0);
    let d = &b["disruption"];
    assert_eq!(d["target_was_leader"], true);
    assert!(d["loss_to_healthy_s"].as_f64().is_some_and(|s| s > 0.0), "{d:#}");
    assert_eq!(b["environment"]["kind"], "local");
    // The printed table: three counts per window, labelled as a local loopback run.
    assert!(
        stdout.contains(
            "| measurement | value | label | observation window | environment | source |"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("raw sum 3 → 5") && stdout.contains("elections (raft term) 1"),
        "{stdout}"
    );
    assert!(stdout.contains(&local_label()), "{stdout}");
    assert_eq!(b["environment"]["etcd_versions"], serde_json::json!([pinned_etcd_version()]));
    assert!(stdout.contains("time from member loss to a healthy 3-member endpoint list"));
    // The ground truth it knows, and how far the measured instants are from it.
    let truth = d["ground_truth"].as_array().expect("ground truth");
    assert!(
        truth.iter().any(|t| t["kind"] == "sigterm_sent" && t["compared_with"] == "member_lost_at")
    );
    assert!(
        truth.iter().any(|t| t["kind"] == "restarted" && t["measured_minus_truth_s"].is_number())
    );
}

/// Regression: an interrupted rehearsal (exit 5) used to lose its "local loopback" label,
/// which was added only after a complete sitting.
#[test]
fn an_interrupted_rehearsal_exits_5_with_a_labelled_incomplete_baseline() {
    let _one = one_cluster_at_a_time_blocking();
    let dir = tempfile::tempdir().expect("tempdir");
    let child = leaderwatch()
        .args(["rehearse", "--idle", "60s", "--out"])
        .arg(dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn rehearse");
    // Wait for a few at_rest rounds, then SIGTERM (what `kubectl delete` or Ctrl-C sends).
    let samples = dir.path().join("samples.csv");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read_to_string(&samples).map_or(0, |t| t.lines().count()) < 10 {
        assert!(std::time::Instant::now() < deadline, "no rounds written");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let o = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(
        err.lines().last().is_some_and(|l| l.contains("interrupted by a signal during at_rest")),
        "{err}"
    );
    let b: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("baseline.json")).expect("baseline.json"),
    )
    .expect("json");
    assert_eq!(b["status"], "incomplete");
    assert_eq!(b["environment"]["description"], local_label().as_str());
    assert_eq!(
        b["environment"]["timing_source"].as_str().map(|s| s.starts_with("rehearse flags")),
        Some(true)
    );
    assert_eq!(window(&b, "at_rest")["full_length"], false);
}

#[test]
fn rehearse_follower_target_no_election_and_the_restart_is_a_reset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, _) = rehearse("follower", dir.path());
    for w in b["windows"].as_array().expect("windows") {
        assert_eq!(w["elections"], 0, "window {}", w["name"]);
    }
    let target = b["disruption"]["target"].as_str().expect("target").to_owned();
    let m = &window(&b, "disruption")["leader_changes"]["per_member"][&target];
    assert_eq!(m["resets"], 1, "{m}");
    assert_eq!(m["increase"], 1.0, "the restarted member's new 1 counts from zero");
}
