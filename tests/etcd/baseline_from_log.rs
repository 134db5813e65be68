//! deploy/k8s/leaderwatch/baseline-from-log.sh: `kubectl logs` alone retrieves a real run's
//! baseline.json from the block `measure` prints in a pod (a short rehearsal's run, with the
//! block `measure` would print; the real Job's log is tests/lab/in_cluster.rs's). And on a
//! terminal the table comes last: `rehearse` prints no block (regression: `make rehearse`
//! printed 500 lines of JSON after its table).

use std::process::Command;

use crate::support::{self, leaderwatch, repo};

#[test]
fn kubectl_logs_alone_retrieves_a_valid_baseline_json() {
    // A real run's log (stdout and stderr, as `kubectl logs` shows them), with the block
    // measure prints in a pod before its table.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let _one = support::one_cluster_at_a_time_blocking();
    let o = leaderwatch()
        .args([
            "rehearse", "--idle", "2s", "--settle", "1s", "--down", "1s", "--target", "follower",
            "--out",
        ])
        .arg(&out)
        .env("LEADERWATCH_LOG", "info")
        .output()
        .expect("rehearse");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        !stdout.contains(leaderwatch::model::baseline::LOG_BEGIN),
        "no JSON block on a terminal"
    );
    assert!(stdout.trim_end().ends_with('|'), "the table last: {stdout}");
    let on_disk =
        leaderwatch::io::read::baseline(&out.join("baseline.json")).expect("run's baseline.json");
    let block = leaderwatch::model::baseline::log_block(&on_disk);
    let log = dir.path().join("pod.log");
    std::fs::write(&log, [o.stderr.as_slice(), block.as_bytes(), o.stdout.as_slice()].concat())
        .expect("write log");

    let stubs = repo("tests/stubs");
    let path = format!("{}:{}", stubs.display(), std::env::var("PATH").unwrap_or_default());
    let r = Command::new("bash")
        .arg(repo("deploy/k8s/leaderwatch/baseline-from-log.sh"))
        .env("PATH", path)
        .env("KUBECTL_STUB_LOG", dir.path().join("calls"))
        .env("KUBECTL_STUB_LOGS", &log)
        .output()
        .expect("retrieval script");
    assert_eq!(r.status.code(), Some(0), "{}", String::from_utf8_lossy(&r.stderr));
    let got = dir.path().join("baseline.json");
    std::fs::write(&got, &r.stdout).expect("write");
    let b = leaderwatch::io::read::baseline(&got)
        .unwrap_or_else(|e| panic!("not a valid baseline.json: {e}"));
    assert_eq!(b, on_disk, "the log carries exactly the baseline.json of the run");
    let calls = std::fs::read_to_string(dir.path().join("calls")).expect("calls");
    assert_eq!(calls.trim(), "-n leaderwatch logs job/leaderwatch-measure", "the Job's namespace");

    // A log without the block: one clear line, exit 1.
    std::fs::write(&log, "still sampling...\n").expect("write");
    let r = Command::new("bash")
        .arg(repo("deploy/k8s/leaderwatch/baseline-from-log.sh"))
        .env("PATH", format!("{}:{}", stubs.display(), std::env::var("PATH").unwrap_or_default()))
        .env("KUBECTL_STUB_LOG", dir.path().join("calls"))
        .env("KUBECTL_STUB_LOGS", &log)
        .output()
        .expect("retrieval script");
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("no baseline.json in the log"));
}
