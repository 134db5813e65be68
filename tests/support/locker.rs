//! A lock client independent of leaderwatch beside the lock canary: lw-etcd-locker (Go's
//! clientv3 with `concurrency.NewSession` and `concurrency.NewMutex`, lab/go/etcd/locker,
//! built by `make deps-etcd`), three sessions taking turns on one mutex, each holding
//! [`HOLD`]. What it saw is the reference the lock canary's `lock_unavailable_s` is held
//! against.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// One line the locker wrote.
#[derive(Debug, Clone)]
pub struct LockerEvent {
    pub holder: u32,
    /// granted, released, lock_failed, unlock_failed, session, session_lost.
    pub kind: String,
    pub at: DateTime<Utc>,
    pub revision: i64,
    pub token: i64,
    pub error: String,
}

/// The running locker; killed when dropped (a panic included) and with the test process.
pub struct Locker {
    child: Child,
    out: PathBuf,
    _dir: tempfile::TempDir,
    /// While set, a thread writes the members' current addresses for `-endpoints-file`.
    following: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

fn binary() -> PathBuf {
    std::env::var_os("LW_ETCD_LOCKER").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/lw-etcd-locker"),
        PathBuf::from,
    )
}

/// lw-etcd-locker writing into `dir`/locker.csv.
fn spawn(
    endpoints: &[String],
    endpoints_file: Option<&Path>,
    prefix: &str,
    op_timeout: Option<Duration>,
    ttl_s: u32,
    dir: &tempfile::TempDir,
) -> Child {
    let bin = binary();
    assert!(bin.is_file(), "{} missing: run `make deps-etcd`", bin.display());
    let file = std::fs::File::create(dir.path().join("locker.csv")).expect("locker.csv");
    let mut cmd = Command::new(&bin);
    cmd.arg("-endpoints").arg(endpoints.join(","));
    if let Some(f) = endpoints_file {
        cmd.arg("-endpoints-file").arg(f);
    }
    cmd.arg("-prefix")
        .arg(prefix)
        .arg("-ttl")
        .arg(ttl_s.to_string())
        .arg("-hold")
        .arg(format!("{}ms", HOLD.as_millis()))
        .arg("-op-timeout")
        .arg(format!("{}ms", op_timeout.map_or(0, |t| t.as_millis())))
        .stdout(file)
        .stderr(Stdio::inherit());
    super::spawn_tied(&mut cmd, "lw-etcd-locker")
}

impl Locker {
    /// Starts contending for `prefix` on every endpoint (client URLs), each unary call with
    /// `op_timeout` (`None`: clientv3's defaults), leases of `ttl_s`.
    pub fn start(
        endpoints: &[String],
        prefix: &str,
        op_timeout: Option<Duration>,
        ttl_s: u32,
    ) -> Locker {
        let dir = tempfile::tempdir().expect("tempdir");
        let child = spawn(endpoints, None, prefix, op_timeout, ttl_s, &dir);
        Locker { child, out: dir.path().join("locker.csv"), _dir: dir, following: None }
    }

    /// The same, following the members as they move: `urls` is asked every 500 ms (e.g.
    /// the pods' addresses from the API) and the locker re-reads them (`-endpoints-file`),
    /// as a client that learns a replaced member's new address would.
    pub fn start_following(
        urls: impl Fn() -> Vec<String> + Send + 'static,
        prefix: &str,
        op_timeout: Option<Duration>,
        ttl_s: u32,
    ) -> Locker {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("endpoints");
        let first = urls();
        std::fs::write(&file, first.join(",")).expect("endpoints file");
        let on = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (still, path) = (on.clone(), file.clone());
        std::thread::spawn(move || {
            while still.load(std::sync::atomic::Ordering::Relaxed) {
                let now = urls();
                if !now.is_empty() {
                    let _ = std::fs::write(&path, now.join(","));
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        let child = spawn(&first, Some(&file), prefix, op_timeout, ttl_s, &dir);
        Locker { child, out: dir.path().join("locker.csv"), _dir: dir, following: Some(on) }
    }

    /// Stops it (SIGTERM) and returns every event.
    pub fn stop(mut self) -> Vec<LockerEvent> {
        super::terminate(&mut self.child);
        if let Some(on) = &self.following {
            on.store(false, std::sync::atomic::Ordering::Relaxed);
        }
        let mut r = csv::Reader::from_path(&self.out).expect("locker.csv");
        r.records()
            .map(|rec| {
                let rec = rec.expect("locker.csv row");
                parse(&rec).unwrap_or_else(|e| panic!("locker.csv {rec:?}: {e}"))
            })
            .collect()
    }

    /// Stops it once it was granted the lock again after now (or `within` has passed), so
    /// that its gap over an election that just ended is closed. Regression (make test,
    /// 2026-12-07): a sitting ends on the canary's recovery, and a Go client still retrying
    /// on a loaded machine was stopped with no grant after a leader's SIGKILL.
    pub fn stop_after_its_next_grant(self, within: Duration) -> Vec<LockerEvent> {
        let (now, began) = (Utc::now(), std::time::Instant::now());
        while began.elapsed() < within && !self.granted_since(now) {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.stop()
    }

    /// Whether locker.csv, read while it is written, has a grant after `t` (a torn last
    /// line is skipped).
    fn granted_since(&self, t: DateTime<Utc>) -> bool {
        let Ok(mut r) = csv::Reader::from_path(&self.out) else { return false };
        r.records()
            .flatten()
            .filter_map(|rec| parse(&rec).ok())
            .any(|e| e.kind == "granted" && e.at > t)
    }
}

/// One row of locker.csv: holder, event, at, revision, token, error.
fn parse(rec: &csv::StringRecord) -> Result<LockerEvent, String> {
    let field = |i: usize| rec.get(i).ok_or_else(|| format!("no column {i}"));
    let num = |i: usize| field(i)?.parse::<i64>().map_err(|e| format!("column {i}: {e}"));
    Ok(LockerEvent {
        holder: field(0)?.parse().map_err(|e| format!("holder: {e}"))?,
        kind: field(1)?.to_owned(),
        at: field(2)?.parse().map_err(|e| format!("at: {e}"))?,
        revision: num(3)?,
        token: num(4)?,
        error: field(5)?.to_owned(),
    })
}

impl Drop for Locker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The locker's hold, as [`Locker::start`] gives it.
pub const HOLD: Duration = Duration::from_millis(100);

/// The longest interval between consecutive `grants` that overlaps `[after, until]`.
pub fn longest_gap(
    mut grants: Vec<DateTime<Utc>>,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    grants.sort();
    grants
        .windows(2)
        .filter(|w| w[0] <= until && w[1] >= after)
        .map(|w| (w[0], w[1]))
        .max_by_key(|(a, b)| *b - *a)
}

/// The longest time from one grant to the next that overlaps `[after, until]`, minus the
/// hold, by the lock canary's definition (docs/counting.md), written again here so the
/// check is independent. `None` when no grant came after `after`.
pub fn unavailable_over(
    events: &[LockerEvent],
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Option<f64> {
    let (a, b) = longest_gap(grants(events), after, until)?;
    Some(((b - a).as_seconds_f64() - HOLD.as_secs_f64()).max(0.0))
}

/// When the locker was granted the lock.
pub fn grants(events: &[LockerEvent]) -> Vec<DateTime<Utc>> {
    events.iter().filter(|e| e.kind == "granted").map(|e| e.at).collect()
}

/// Its Lock and Unlock calls that ran out of their deadline within `[a, b]`.
pub fn expired_within(events: &[LockerEvent], (a, b): (DateTime<Utc>, DateTime<Utc>)) -> usize {
    events
        .iter()
        .filter(|e| e.at >= a && e.at <= b && e.kind.ends_with("_failed"))
        .filter(|e| e.error.contains("deadline exceeded"))
        .count()
}

/// Tokens in grant order never go down (each grant's key was created after the last's).
pub fn tokens_increase(events: &[LockerEvent]) -> bool {
    let mut grants: Vec<&LockerEvent> = events.iter().filter(|e| e.kind == "granted").collect();
    grants.sort_by_key(|e| (e.revision, e.token));
    grants.windows(2).all(|w| w[1].token > w[0].token)
}

/// A locks.csv row (`super::locks`).
pub type Row = std::collections::HashMap<String, String>;

/// How far the lock canary may be from the Go client: the 0.2 s, and one hold.
/// The two clients' holders are at different points of their hold when the leader dies,
/// and each gap holds what was left of it (0 to one hold): that much they cannot share.
/// Beyond it, a difference must be paid for by a failed op or stream ([`assert_agree`]).
pub const AGREE_S: f64 = 0.2 + 0.1;

/// The most one retry costs: each op's deadline (the canary's and the Go client's), and
/// gRPC's first reconnect backoff. A failed op costs anywhere from nothing to that, by when
/// it was sent against the leader's death (make test, 2026-12-07: the canary 0.57 s slower
/// over a SIGKILL, with 10 failed ops in its gap, the Go client with none).
pub const RETRY_S: f64 = 1.0;

fn at(r: &Row) -> DateTime<Utc> {
    r["at"].parse().unwrap_or_else(|e| panic!("locks.csv at {:?}: {e}", r["at"]))
}

/// The lock canary's failed ops and streams within `[a, b]` (locks.csv).
pub fn canary_failures_within(locks: &[Row], (a, b): (DateTime<Utc>, DateTime<Utc>)) -> usize {
    locks
        .iter()
        .filter(|r| r["event"].ends_with("_failed"))
        .filter(|r| (a..=b).contains(&at(r)))
        .count()
}

/// Leases the lock canary lost over the run.
pub fn leases_lost(b: &leaderwatch::model::baseline::Baseline) -> u64 {
    b.windows.iter().filter_map(|w| w.lock.as_ref()).map(|l| l.leases_lost).sum()
}

/// Every fencing token the Go client was granted rose, and the canary's safety held.
pub fn assert_safe(b: &leaderwatch::model::baseline::Baseline, go: &[LockerEvent]) {
    let safety = b.lock_safety.as_ref().expect("lock_safety in baseline.json");
    assert_eq!(safety.verdict, leaderwatch::model::lock::Verdict::Held, "{safety:?}");
    assert!(safety.grants_checked > 10, "{safety:?}");
    assert!(tokens_increase(go), "the Go client's tokens went down");
}

/// The lock canary (its `lock_unavailable_s` for election `e`, its `locks` rows) and the
/// Go client `go` agree on what the election cost the lock: within [`AGREE_S`], or up to
/// one retry apart. Each client draws where its ops and streams were when the leader went: an
/// op sent to a follower that forwards to the dead leader waits out its 1 s deadline
/// before it goes to the next member, and clientv3 resumes a broken watch after gRPC's 1 s
/// reconnect backoff, so one client may pay a second the other did not. When the canary is
/// the slower, its gap must show the failure that cost it (locks.csv); the Go client's
/// watch resumes inside clientv3, where the program cannot see it. `defaults` (the Go
/// client on clientv3's defaults) is only printed. Returns (canary, Go).
pub fn assert_agree(
    what: &str,
    e: &leaderwatch::model::baseline::ElectionDetail,
    locks: &[Row],
    go: &[LockerEvent],
    defaults: Option<&[LockerEvent]>,
) -> (f64, f64) {
    let canary = e.lock_unavailable_s.expect("the lock canary ran through the election");
    let go_s = unavailable_over(go, e.after, e.observed_at)
        .expect("the Go client was granted the lock again after the election");
    let defaults = defaults.map(|d| unavailable_over(d, e.after, e.observed_at));
    let canary_grants: Vec<DateTime<Utc>> =
        locks.iter().filter(|r| r["event"] == "granted").map(at).collect();
    let canary_gap = longest_gap(canary_grants, e.after, e.observed_at)
        .expect("the lock canary granted before and after the election");
    let go_gap = longest_gap(grants(go), e.after, e.observed_at)
        .expect("the Go client granted before and after the election");
    let (canary_failed, go_expired) =
        (canary_failures_within(locks, canary_gap), expired_within(go, go_gap));
    eprintln!(
        "{what}: lock unavailable: canary {canary:.3} s ({canary_failed} failed op(s) or \
         stream(s)), Go concurrency.Mutex {go_s:.3} s ({go_expired} deadline(s) ran out), on \
         clientv3's defaults {defaults:?} s; writes unavailable {:?} s",
        e.write_unavailable_s
    );
    assert_eq!(HOLD.as_secs_f64(), 0.1, "AGREE_S counts one hold of 100 ms");
    let diff = canary - go_s;
    assert!(
        diff.abs() <= AGREE_S + RETRY_S,
        "{what}: canary {canary:.3} s vs Go {go_s:.3} s: more than one retry apart"
    );
    if diff > AGREE_S {
        assert!(
            canary_failed > 0,
            "{what}: the canary paid {diff:.3} s more than the Go client, but shows no failure"
        );
    }
    (canary, go_s)
}
