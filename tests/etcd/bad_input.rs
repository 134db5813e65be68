//! Bad input from members and users: one clear error each, recorded as data where it
//! comes from a member, one line and a documented exit code where it comes from the user;
//! and a full disk, which must name the path and keep the rows already written.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use leaderwatch::io::probe::ProbeConfig;
use leaderwatch::io::round::{Sampler, probers};
use leaderwatch::model::clock::{Clock, SystemClock};
use leaderwatch::model::member::parse_members;
use support::fake_member::{Misbehaviour, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_members_are_recorded_with_one_clear_error_per_part() {
    let timeout = Duration::from_secs(1);
    let cases = [
        (Misbehaviour::Garbage, "no etcd_server_leader_changes_seen_total", "not etcd health JSON"),
        (Misbehaviour::Binary, "no etcd_server_leader_changes_seen_total", "not etcd health JSON"),
        (Misbehaviour::Huge, "larger than the 16 MiB cap", "body larger than"),
        (Misbehaviour::Slowloris, "timed out after 1s", "timed out after 1s"),
        (Misbehaviour::NotFound, "HTTP 404", "HTTP 404"),
        (Misbehaviour::ServerError, "HTTP 500", "HTTP 500"),
    ];
    for (m, metrics_err, health_err) in cases {
        let (url, _server) = start(m).await;
        let members = parse_members(&[format!("bad={url}")]).expect("member");
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let cfg = ProbeConfig { timeout, ..ProbeConfig::default() };
        let mut s = Sampler::new(probers(&members, &cfg, &clock).expect("probers"), clock.clone());
        for _ in 0..2 {
            let r = s.round().await;
            let o = &r.observations[0];
            let err = o.error_summary();
            assert!(
                err.contains(&format!("metrics: {metrics_err}")) || err.contains(metrics_err),
                "{m:?}: {err}"
            );
            assert!(err.contains(health_err), "{m:?}: {err}");
            assert!(err.contains("status: "), "{m:?}: the Status RPC fails too: {err}");
            assert!(o.probe_ms() < 5_000.0, "{m:?}: bounded by the timeout, {} ms", o.probe_ms());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_keeps_recording_a_member_that_answers_garbage() {
    let (url, _server) = start(Misbehaviour::Garbage).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let o = tokio::process::Command::from(support::leaderwatch())
        .args([
            "sample",
            "--interval",
            "200ms",
            "--duration",
            "2s",
            "--timeout",
            "1s",
            "--endpoint",
        ])
        .arg(format!("bad={url}"))
        .arg("--out")
        .arg(&out)
        .output()
        .await
        .expect("run");
    assert_eq!(
        o.status.code(),
        Some(0),
        "a member's bad answers are data, not a failure: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows = support::samples(&out);
    assert!(rows.len() >= 5);
    assert!(
        rows.iter()
            .all(|r| r["reachable"] == "false" && r["error"].contains("not etcd health JSON"))
    );
}

/// A 64 KiB tmpfs (needs root, as CI has): the run stops with exit 3 naming the file; every
/// complete row written before is intact, and a torn last line is repaired on reopening.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_names_the_path_exits_3_and_keeps_earlier_rows() {
    let f = support::cluster().await;
    let mnt = tempfile::tempdir().expect("tempdir");
    let st = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(mnt.path())
        .status()
        .expect("mount");
    assert!(st.success(), "mounting a size-limited tmpfs needs root (CI runs as root)");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Unmount(mnt.path().to_owned());
    let out = mnt.path().join("run");
    let mut args = vec![
        "sample".to_owned(),
        "--interval".into(),
        "20ms".into(),
        "--duration".into(),
        "60s".into(),
        "--out".into(),
    ];
    args.push(out.display().to_string());
    for m in f.cluster.members() {
        args.push("--endpoint".into());
        args.push(format!("{}={}", m.name, m.url));
    }
    let o = tokio::process::Command::from(support::leaderwatch())
        .args(&args)
        .output()
        .await
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let last = err.trim().lines().last().unwrap_or_default();
    assert!(
        last.contains(&out.display().to_string()) && last.contains("No space left on device"),
        "{last}"
    );

    // Copy what is on the full disk out, and reopen it there: the torn line (if any) is cut.
    let copy = tempfile::tempdir().expect("tempdir");
    for name in ["samples.csv", "events.csv"] {
        let _ = std::fs::copy(out.join(name), copy.path().join(name));
    }
    let text = std::fs::read_to_string(copy.path().join("samples.csv")).expect("samples.csv");
    let complete = text.matches('\n').count().saturating_sub(1);
    assert!(complete > 10, "rows were written before the disk filled: {complete}");
    let _reopened = leaderwatch::io::run_dir::RunDir::open(copy.path(), "check").expect("reopen");
    let rows = support::samples(copy.path()); // panics on any unparseable row
    assert_eq!(rows.len(), complete, "every complete row is intact");
}
