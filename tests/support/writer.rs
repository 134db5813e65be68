//! An etcd client independent of leaderwatch beside a sitting: lw-etcd-writer (Go's clientv3,
//! lab/go/etcd/writer, built by `make deps-etcd`), a new Put every 50 ms with a 500 ms
//! deadline on one client of every member, never waiting for the earlier ones. What it saw
//! is the reference the canary's `write_unavailable_s` is held against.
//!
//! Used by tests/etcd/canary_vs_writer.rs (local members) and tests/lab/kube.rs (pods), each
//! including this file by path.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The writer's cadence: a new op this often.
pub const EVERY: Duration = Duration::from_millis(50);

/// One op the writer finished.
#[derive(Debug, Clone)]
pub struct WriterOp {
    pub started: DateTime<Utc>,
    pub done: DateTime<Utc>,
    pub ok: bool,
}

/// The running writer; killed when dropped (a panic included) and with the test process.
pub struct Writer {
    child: Child,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

fn binary() -> PathBuf {
    std::env::var_os("LW_ETCD_WRITER").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/lw-etcd-writer"),
        PathBuf::from,
    )
}

impl Writer {
    /// Starts writing to every endpoint (client URLs).
    pub fn start(endpoints: &[String]) -> Writer {
        let bin = binary();
        assert!(bin.is_file(), "{} missing: run `make deps-etcd`", bin.display());
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("writer.csv");
        let file = std::fs::File::create(&out).expect("writer.csv");
        let mut cmd = Command::new(&bin);
        cmd.arg("-endpoints")
            .arg(endpoints.join(","))
            .arg("-every")
            .arg(format!("{}ms", EVERY.as_millis()))
            .arg("-timeout")
            .arg("500ms")
            // A file, not a pipe: nobody reads until the end, and a full pipe would stall it.
            .stdout(file)
            .stderr(Stdio::inherit());
        let child = super::spawn_tied(&mut cmd, "lw-etcd-writer");
        Writer { child, out, _dir: dir }
    }

    /// Stops it (SIGTERM: it waits for its ops in flight) and returns every op.
    pub fn stop(mut self) -> Vec<WriterOp> {
        super::terminate(&mut self.child);
        let mut r = csv::Reader::from_path(&self.out).expect("writer.csv");
        r.records()
            .map(|rec| {
                let rec = rec.expect("writer.csv row");
                let at = |i: usize| {
                    rec[i]
                        .parse::<DateTime<Utc>>()
                        .unwrap_or_else(|e| panic!("writer.csv {:?}: {e}", &rec[i]))
                };
                WriterOp { started: at(0), done: at(1), ok: &rec[2] == "true" }
            })
            .collect()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The writer's unavailability over `[after, until]`, by the canary's definition
/// (docs/counting.md), written again here rather than borrowed so the check is independent:
/// the longest gap between consecutive successful completions that overlaps the interval,
/// minus the cadence; the first gap starts at the writer's first op.
pub fn unavailable_over(
    ops: &[WriterOp],
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Option<f64> {
    let mut oks: Vec<DateTime<Utc>> = ops.iter().filter(|o| o.ok).map(|o| o.done).collect();
    oks.sort();
    let mut prev = ops.iter().map(|o| o.started).min()?;
    let mut worst: Option<f64> = None;
    for t in oks {
        if prev > until {
            break;
        }
        if t >= after {
            let gap = ((t - prev).as_seconds_f64() - EVERY.as_secs_f64()).max(0.0);
            worst = Some(worst.map_or(gap, |w: f64| w.max(gap)));
        }
        prev = t;
    }
    worst
}
