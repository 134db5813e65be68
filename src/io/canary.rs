//! The canary: what an election costs a client of the lock service. One connection to
//! every member (as dlock's client keeps), and two loops on them: each tick one
//! linearizable write (a Put of `__leaderwatch/canary/<run_id>` under a lease) and one
//! linearizable read (a Get of that key), each op with its own deadline.
//!
//! Each tick starts its op even while earlier ones are still in flight (at most
//! [`in_flight_limit`] per kind), so the first success after an election comes within one
//! tick of the cluster accepting writes again: the figures measure the cluster, not the
//! canary's own queue. Beside that, each op says whether a client that keeps **one op in
//! flight** (waits for each answer before the next tick) would have sent it: the op of the
//! first tick after that client's previous op finished. Those ops give the second figure,
//! what such a client sees (up to one tick later than it would have retried).
//!
//! The member of each op is picked as etcd's Go client picks it (src/io/pool.rs): a
//! stopped member takes no ops, and a SIGTERM'd leader costs the canary what it costs
//! clientv3 beside it (tests/etcd/canary_vs_writer.rs).
//!
//! Nothing outlives the run by more than [`LEASE_TTL_S`]: every Put carries a lease of that
//! TTL, a fresh one every [`LEASE_RENEW`] (no keep-alive stream to lose), and a clean stop
//! revokes them, which deletes the key.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::PutOptions;
use tokio::sync::Semaphore;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, MissedTickBehavior};

use crate::io::pool::{Pool, answered_by};
use crate::io::probe::ProbeConfig;
use crate::model::canary::{Kind, Op};
use crate::model::clock::{Clock, Stamp};
use crate::model::member::Member;

/// Every key the canary writes starts with this.
pub const PREFIX: &str = "__leaderwatch/canary/";
/// The lease of every canary Put: the longest the key can outlive a crashed leaderwatch.
pub const LEASE_TTL_S: i64 = 30;
/// A fresh lease this often (well inside the TTL), so no keep-alive is needed.
pub const LEASE_RENEW: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct CanaryConfig {
    /// One write and one read per tick.
    pub every: Duration,
    /// Deadline of each op.
    pub timeout: Duration,
}

/// Ops of one kind in flight at once: one deadline's worth of ticks and one more, so the
/// limit only bites when the runtime itself falls behind; capped so a tiny cadence cannot
/// pile up connections.
pub fn in_flight_limit(cfg: &CanaryConfig) -> usize {
    let per_deadline = cfg.timeout.as_nanos().div_ceil(cfg.every.as_nanos().max(1));
    usize::try_from(per_deadline).unwrap_or(usize::MAX).saturating_add(1).clamp(2, 64)
}

/// The leases granted so far (newest last) and when the newest was granted.
#[derive(Default)]
struct Leases {
    ids: Vec<i64>,
    newest: Option<Instant>,
}

/// The running canary: its two loops and the ops they report.
pub struct Canary {
    key: String,
    pool: Arc<Pool>,
    timeout: Duration,
    leases: Arc<Mutex<Leases>>,
    loops: Vec<JoinHandle<()>>,
    rx: UnboundedReceiver<Op>,
}

impl Canary {
    /// Opens a connection to every member and starts the two loops. The key is
    /// `__leaderwatch/canary/<run_id>`.
    pub async fn start(
        members: &[Member],
        probe: &ProbeConfig,
        cfg: CanaryConfig,
        run_id: &str,
        clock: Arc<dyn Clock>,
    ) -> Result<Canary, String> {
        let pool = Pool::connect(members, probe, cfg.timeout, "canary").await?;
        let key = format!("{PREFIX}{run_id}");
        let leases = Arc::new(Mutex::new(Leases::default()));
        let (tx, rx) = mpsc::unbounded_channel();
        let write = Writer {
            pool: pool.clone(),
            key: key.clone(),
            leases: leases.clone(),
            granting: Arc::new(tokio::sync::Mutex::new(())),
        };
        let read = Reader { pool: pool.clone(), key: key.clone() };
        let loops = vec![
            tokio::spawn(run(Kind::Write, write, cfg.clone(), clock.clone(), tx.clone())),
            tokio::spawn(run(Kind::Read, read, cfg.clone(), clock, tx)),
        ];
        Ok(Canary { key, pool, timeout: cfg.timeout, leases, loops, rx })
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Points the member of the same name at its new address (its pod was recreated): a
    /// new lazy connection replaces the old one, up, so the next pick may use it. Made in
    /// a task; a failure is logged (the old connection stays, failing as before).
    pub fn repoint(&self, m: Member, probe: &ProbeConfig) {
        self.pool.repoint(m, probe, "canary");
    }

    /// The ops finished since the last call.
    pub fn drain(&mut self) -> Vec<Op> {
        std::iter::from_fn(|| self.rx.try_recv().ok()).collect()
    }

    /// Stops both loops, revokes every lease it granted (which deletes the key) and deletes
    /// the key in case a Put landed without one; returns the last ops. A failure to clean
    /// up is logged: the leases expire within [`LEASE_TTL_S`] anyway.
    pub async fn stop(mut self) -> Vec<Op> {
        for l in &self.loops {
            l.abort();
        }
        for l in std::mem::take(&mut self.loops) {
            let _ = l.await;
        }
        self.pool.abort();
        let ops = self.drain();
        let ids = self.leases.lock().map(|l| l.ids.clone()).unwrap_or_default();
        let t = self.timeout.max(Duration::from_secs(2));
        self.pool.clean_up("canary", ids, LEASE_TTL_S, &self.key, false, t).await;
        ops
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        for l in &self.loops {
            l.abort();
        }
        self.pool.abort();
    }
}

/// One op of one kind: the member it went to (its id; 0 = not known yet) and `Ok` or a
/// one-line error. Each op runs on its own clone.
trait DoOp: Clone + Send + Sync + 'static {
    fn op(self, at: Stamp) -> impl std::future::Future<Output = (u64, Result<(), String>)> + Send;
}

#[derive(Clone)]
struct Writer {
    pool: Arc<Pool>,
    key: String,
    leases: Arc<Mutex<Leases>>,
    /// One grant at a time: ops in flight together wait for it rather than each granting.
    granting: Arc<tokio::sync::Mutex<()>>,
}

impl Writer {
    /// The newest lease if it is fresh.
    fn fresh(&self) -> Option<i64> {
        self.leases.lock().ok().and_then(|l| {
            l.newest
                .is_some_and(|t| t.elapsed() < LEASE_RENEW)
                .then(|| l.ids.last().copied())
                .flatten()
        })
    }
}

impl DoOp for Writer {
    async fn op(self, at: Stamp) -> (u64, Result<(), String>) {
        let lease = match self.fresh() {
            Some(id) => id,
            None => {
                let _one = self.granting.lock().await;
                match self.fresh() {
                    Some(id) => id,
                    None => {
                        let (member, g) = self
                            .pool
                            .run(|c| async move {
                                let g = c.lease_client().grant(LEASE_TTL_S, None).await?;
                                Ok((answered_by(g.header()), g.id()))
                            })
                            .await;
                        let id = match g {
                            Ok(id) => id,
                            Err(e) => return (member, Err(format!("lease grant: {}", e.text))),
                        };
                        if let Ok(mut l) = self.leases.lock() {
                            l.ids.push(id);
                            l.newest = Some(Instant::now());
                            // Older leases carry no key any more (each Put moves it to the newest).
                            let keep = l.ids.len().saturating_sub(8);
                            l.ids.drain(..keep);
                        }
                        id
                    }
                }
            }
        };
        let value = crate::model::clock::ts(at.utc);
        let key = &self.key;
        let (member, r) = self
            .pool
            .run(|c| {
                let value = value.clone();
                async move {
                    let opts = PutOptions::new().with_lease(lease);
                    let r = c.kv_client().put(key.clone(), value, Some(opts)).await?;
                    Ok((answered_by(r.header()), ()))
                }
            })
            .await;
        (member, r.map_err(String::from))
    }
}

#[derive(Clone)]
struct Reader {
    pool: Arc<Pool>,
    key: String,
}

impl DoOp for Reader {
    async fn op(self, _at: Stamp) -> (u64, Result<(), String>) {
        let key = &self.key;
        let (member, r) = self
            .pool
            .run(|c| async move {
                // Linearizable (the default): it needs a leader, as a lock check does.
                let r = c.kv_client().get(key.clone(), None).await?;
                Ok((answered_by(r.header()), ()))
            })
            .await;
        (member, r.map_err(String::from))
    }
}

/// The loop of one kind: an op per tick, each bounded by the deadline, overlapping the
/// ones still in flight up to [`in_flight_limit`]. Aborting the loop drops its `JoinSet`,
/// which aborts the ops in flight.
async fn run<D: DoOp>(
    kind: Kind,
    d: D,
    cfg: CanaryConfig,
    clock: Arc<dyn Clock>,
    tx: UnboundedSender<Op>,
) {
    let mut tick = tokio::time::interval(cfg.every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let limit = Arc::new(Semaphore::new(in_flight_limit(&cfg)));
    // The one-in-flight client's op is still running.
    let busy = Arc::new(AtomicBool::new(false));
    let mut ops = JoinSet::new();
    loop {
        let due_at = tick.tick().await;
        while ops.try_join_next().is_some() {}
        let Ok(permit) = limit.clone().acquire_owned().await else { return };
        let started = clock.stamp();
        let lag = started.mono.saturating_duration_since(due_at);
        let due = Stamp {
            utc: started.utc - chrono::Duration::from_std(lag).unwrap_or_default(),
            mono: due_at,
        };
        let one_in_flight =
            busy.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok();
        let (d, clock, sent, busy, timeout) =
            (d.clone(), clock.clone(), tx.clone(), busy.clone(), cfg.timeout);
        ops.spawn(async move {
            let (member_id, result) = match tokio::time::timeout(timeout, d.op(started)).await {
                Ok(r) => r,
                Err(_) => {
                    (0, Err(format!("timed out after {}", humantime::format_duration(timeout))))
                }
            };
            let done = clock.stamp();
            if one_in_flight {
                busy.store(false, Ordering::Release);
            }
            drop(permit);
            let (ok, error) = match result {
                Ok(()) => (true, String::new()),
                Err(e) => (false, e),
            };
            let _ = sent.send(Op { kind, due, started, done, ok, error, member_id, one_in_flight });
        });
        if tx.is_closed() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_flight_limit_covers_one_deadline_of_ticks() {
        let c = |every: u64, timeout: u64| CanaryConfig {
            every: Duration::from_millis(every),
            timeout: Duration::from_millis(timeout),
        };
        assert_eq!(in_flight_limit(&c(100, 1000)), 11);
        assert_eq!(in_flight_limit(&c(1000, 1000)), 2);
        assert_eq!(in_flight_limit(&c(300, 1000)), 5);
        assert_eq!(in_flight_limit(&c(1, 1000)), 64);
        assert_eq!(in_flight_limit(&c(0, 1000)), 64);
    }
}
