//! `leaderwatch sample` as a user runs it: the binary against a real local cluster, its
//! files, clean ends on SIGTERM, reopening a run directory after a crash, bad input.

use crate::support;

use std::path::Path;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use leaderwatch::io::columns::SAMPLES_HEADER;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use support::{cluster, events, leaderwatch, samples, sleep};

fn endpoint_args(f: &support::Fixture) -> Vec<String> {
    f.cluster
        .members()
        .iter()
        .flat_map(|m| ["--endpoint".to_owned(), format!("{}={}", m.name, m.url)])
        .collect()
}

/// `leaderwatch sample --interval 200ms --out <fixture out> <endpoints> <extra>`.
fn spawn_sample(f: &support::Fixture, extra: &[&str]) -> Child {
    leaderwatch()
        .args(["sample", "--interval", "200ms", "--out"])
        .arg(f.out.path())
        .args(endpoint_args(f))
        .args(extra)
        .spawn()
        .expect("spawn leaderwatch sample")
}

/// Waits for the child, killing it (and failing) after `limit`.
fn wait_within(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("leaderwatch did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).expect("summary.json"))
        .expect("summary is JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_writes_the_three_files() {
    let f = cluster().await;
    let child = spawn_sample(&f, &["--duration", "3s"]);
    let out = wait_within(child, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));

    let header = std::fs::read_to_string(f.out.path().join("samples.csv")).expect("samples.csv");
    assert_eq!(header.lines().next(), Some(SAMPLES_HEADER.join(",").as_str()));
    let rows = samples(f.out.path());
    assert!(rows.len() >= 3 * 5, "rows: {}", rows.len());
    let ts = &rows[0]["ts"];
    assert!(
        chrono::DateTime::parse_from_rfc3339(ts).is_ok() && ts.ends_with('Z') && ts.len() == 24,
        "RFC 3339 UTC ms: {ts}"
    );
    let s = summary(f.out.path());
    assert_eq!(s["ended_by"], "duration");
    assert_eq!(s["leader_changes"]["raw_sum_end"], 3.0);
    assert_eq!(s["members"].as_array().map(Vec::len), Some(3));
    let ev = events(f.out.path());
    assert!(
        ev.iter().any(|e| e["kind"] == "run_started")
            && ev.iter().any(|e| e["kind"] == "run_ended")
    );
}

/// `--metrics-interval`: /metrics only every third round of 200 ms, health and Status in
/// every round, and the summary still counts from the last pages read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_interval_reads_the_page_only_in_its_rounds() {
    let f = cluster().await;
    let child = leaderwatch()
        .args([
            "sample",
            "--interval",
            "200ms",
            "--metrics-interval",
            "600ms",
            "--duration",
            "4s",
            "--out",
        ])
        .arg(f.out.path())
        .args(endpoint_args(&f))
        .spawn()
        .expect("spawn leaderwatch sample");
    let out = wait_within(child, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let rows = samples(f.out.path());
    assert!(rows.len() >= 3 * 12, "rows: {}", rows.len());
    let (mut with, mut without) = (0, 0);
    for r in &rows {
        let round: u64 = r["round"].parse().expect("round");
        // A probe that outlived its round (a loaded machine) lands in a later one: skip it.
        let late = r["age_ms"].parse::<f64>().map_or(true, |a| a >= 100.0);
        if r["reachable"] != "true" || late {
            continue;
        }
        let has_page = !r["leader_changes_seen_total"].is_empty();
        assert_eq!(has_page, round.is_multiple_of(3), "round {round}: {r:?}");
        assert!(
            !r["health"].is_empty() && !r["raft_term"].is_empty(),
            "health and Status every round: {r:?}"
        );
        if has_page { with += 1 } else { without += 1 }
    }
    assert!(with > 0 && without > with, "with the page {with}, without {without}");
    assert_eq!(summary(f.out.path())["leader_changes"]["raw_sum_end"], 3.0);
}

/// `--metrics-interval on-change` on a quiet cluster (src/analysis/cadence.rs): each
/// member's page is read in the first round and then not again (its Status never changes),
/// Status in every round, and `/health` read about once a second, kept in between (its
/// value written, `health_ms` empty). The summary still counts from the pages read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_change_reads_a_quiet_members_page_once_and_its_health_once_a_second() {
    let f = cluster().await;
    let child = leaderwatch()
        .args(["sample", "--interval", "100ms", "--metrics-interval", "on-change"])
        .args(["--duration", "4s", "--out"])
        .arg(f.out.path())
        .args(endpoint_args(&f))
        .spawn()
        .expect("spawn leaderwatch sample");
    let out = wait_within(child, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let rows = samples(f.out.path());
    assert!(rows.len() >= 3 * 30, "rows: {}", rows.len());
    let (mut pages, mut read, mut kept) = (0, 0, 0);
    for r in &rows {
        assert!(!r["raft_term"].is_empty(), "Status every round: {r:?}");
        assert_eq!(r["health"], "true", "{r:?}");
        if !r["leader_changes_seen_total"].is_empty() {
            pages += 1;
        }
        if r["health_ms"].is_empty() { kept += 1 } else { read += 1 }
    }
    assert_eq!(pages, 3, "one page per member");
    // About 4 s at 100 ms: each member read about once a second (5), kept otherwise (35).
    assert!((3 * 3..=3 * 8).contains(&read), "read {read}, kept {kept}");
    assert!(kept > 3 * read, "read {read}, kept {kept}");
    assert_eq!(summary(f.out.path())["leader_changes"]["raw_sum_end"], 3.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_run_and_writes_the_summary_within_5s() {
    let f = cluster().await;
    let child = spawn_sample(&f, &[]);
    sleep(2_000).await;
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
    let out = wait_within(child, Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(summary(f.out.path())["ended_by"], "signal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_after_a_crash_repairs_the_torn_line_and_appends_a_new_run() {
    let f = cluster().await;
    let child = spawn_sample(&f, &[]);
    sleep(1_500).await;
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).expect("SIGKILL");
    let _ = wait_within(child, Duration::from_secs(5));
    // What a crash in the middle of a write leaves: a partial last line.
    let p = f.out.path().join("samples.csv");
    let mut text = std::fs::read(&p).expect("samples.csv");
    let before = samples(f.out.path()).len();
    text.extend_from_slice(b"2026-11-29T19:00:00.123Z,torn-run,7,sample,m0,http://127.0.0.1:1,tr");
    std::fs::write(&p, &text).expect("write torn line");

    let child = spawn_sample(&f, &["--duration", "2s"]);
    let out = wait_within(child, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));

    let rows = samples(f.out.path()); // panics on any unparseable row
    assert!(rows.iter().all(|r| r["run_id"] != "torn-run"), "the torn line is gone");
    let runs: std::collections::BTreeSet<_> = rows.iter().map(|r| r["run_id"].clone()).collect();
    assert_eq!(runs.len(), 2, "the new run appends with a new run_id: {runs:?}");
    assert!(rows.len() > before, "earlier rows kept, new rows added");
    assert!(
        events(f.out.path())
            .iter()
            .any(|e| e["kind"] == "repaired" && e["detail"].contains("samples.csv"))
    );
    // The summary's residual rate pools both runs of the directory; the killed one counts
    // to its last event.
    let r = &summary(f.out.path())["residual"];
    assert_eq!(r["runs"], 2, "{r}");
    let exposure = r["exposure_s"].as_f64().expect("exposure");
    // Run 2 lasted 2 s; the killed run 1 about 1.5 s, to its last samples row (its last
    // event was at its start).
    assert!((3.0..60.0).contains(&exposure), "both runs' time: {exposure}");
    assert_eq!(r["residual"], 0);
    assert!(
        r["per_day"]["upper"].as_f64().expect("upper") > 0.0,
        "zero elections still have an upper bound"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_canary_key_never_outlives_leaderwatch_by_more_than_its_ttl() {
    let f = cluster().await;
    let out =
        wait_within(spawn_sample(&f, &["--canary", "--duration", "3s"]), Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(f.out.path().join("canary.csv")).expect("canary.csv");
    let ok = |kind: &str| {
        text.lines().filter(|l| l.contains(&format!(",{kind},")) && l.contains(",true,")).count()
    };
    assert!(ok("write") >= 5 && ok("read") >= 5, "{text}");
    let s = summary(f.out.path());
    assert!(s["client"]["write"]["ops"].as_u64().is_some_and(|n| n >= 5), "{}", s["client"]);
    assert_eq!(
        support::canary_keys(&f.cluster.members()).await,
        0,
        "a clean exit revokes the lease"
    );

    let mut child = spawn_sample(&f, &["--canary"]);
    let t0 = Instant::now();
    while support::canary_keys(&f.cluster.members()).await == 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "the canary never wrote its key");
        sleep(100).await;
    }
    child.kill().expect("SIGKILL");
    let killed = Instant::now();
    let _ = child.wait();
    while support::canary_keys(&f.cluster.members()).await > 0 {
        let ttl = Duration::from_secs(leaderwatch::io::canary::LEASE_TTL_S as u64);
        // etcd expires leases on the leader's clock, checked every 500 ms.
        assert!(
            killed.elapsed() < ttl + Duration::from_secs(3),
            "the key outlived leaderwatch by more than the TTL"
        );
        sleep(500).await;
    }
}

/// `sample --canary --lock-canary`: locks.csv has grants by every holder, summary.json the
/// run's lock figures and a held safety verdict, and a clean exit revokes every lease (no
/// key left under `__leaderwatch/`). `--lock-canary` alone is bad input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_with_the_lock_canary_writes_locks_csv_and_leaves_no_key() {
    let f = cluster().await;
    let out = wait_within(
        spawn_sample(&f, &["--canary", "--lock-canary", "--duration", "4s"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let locks = support::locks(f.out.path());
    let holders: std::collections::BTreeSet<&str> =
        locks.iter().filter(|r| r["event"] == "granted").map(|r| r["holder"].as_str()).collect();
    assert_eq!(holders.len(), 3, "every holder was granted the lock: {holders:?}");
    assert!(locks.iter().all(|r| r["window"] == "sample"), "one window");
    let s = summary(f.out.path());
    assert!(s["lock"]["grants"].as_u64().is_some_and(|n| n >= 6), "{}", s["lock"]);
    assert_eq!(s["lock"]["leases_lost"], 0, "{}", s["lock"]);
    assert_eq!(s["lock_safety"]["verdict"], "held", "{}", s["lock_safety"]);
    assert_eq!(support::canary_keys(&f.cluster.members()).await, 0, "a clean exit revokes");

    let o = leaderwatch()
        .args(["sample", "--endpoint", "m0=http://127.0.0.1:1", "--out"])
        .arg(f.out.path())
        .arg("--lock-canary")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not provided: --canary"), "{err}");
}
