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
//! The member of each op is picked as etcd's Go client (clientv3 on gRPC's round-robin
//! balancer) picks it, not as a plain load balancer would: round robin over the members
//! whose connection is up. A connection that fails (a transport error, not an etcd answer)
//! is left out until a Status call on it succeeds again, tried in the background with
//! gRPC's backoff; an op whose request never left (the connection was refused) is sent to
//! the next member within its deadline. Without this, a stopped member took a third of the
//! ops for as long as it was down, and a SIGTERM'd leader cost the canary 0.2-0.4 s where
//! clientv3 beside it lost nothing (tests/etcd/canary_vs_writer.rs).
//!
//! Nothing outlives the run by more than [`LEASE_TTL_S`]: every Put carries a lease of that
//! TTL, a fresh one every [`LEASE_RENEW`] (no keep-alive stream to lose), and a clean stop
//! revokes them, which deletes the key.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, PutOptions};
use tokio::sync::Semaphore;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, MissedTickBehavior};

use crate::io::probe::{ProbeConfig, etcd_options};
use crate::model::canary::{Kind, Op};
use crate::model::clock::{Clock, Stamp};
use crate::model::member::{Member, MemberName};

/// Every key the canary writes starts with this.
pub const PREFIX: &str = "__leaderwatch/canary/";
/// The lease of every canary Put: the longest the key can outlive a crashed leaderwatch.
pub const LEASE_TTL_S: i64 = 30;
/// A fresh lease this often (well inside the TTL), so no keep-alive is needed.
pub const LEASE_RENEW: Duration = Duration::from_secs(10);
/// A failed connection is tried again after this, then 1.6 times longer each time, up to
/// [`RECONNECT_MAX`]: gRPC's connection backoff (base 1 s, multiplier 1.6), capped lower so
/// a member back after a sitting's disruption takes ops again within the settle window.
pub const RECONNECT_FIRST: Duration = Duration::from_secs(1);
pub const RECONNECT_MAX: Duration = Duration::from_secs(10);

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

/// One member's connection.
struct Conn {
    /// Replaced when the member's pod comes back at a new address (`--reach pod-ip`).
    client: Mutex<Client>,
    name: MemberName,
    /// Learned from its answers, so a failed op is recorded under the member it went to
    /// (0 until the member answered once).
    id: AtomicU64,
    /// Ops go to it. False from a transport failure until a Status call succeeds again.
    up: AtomicBool,
}

impl Conn {
    fn client(&self) -> Client {
        match self.client.lock() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

/// What kind of failure an op met, for the pick of the next member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// The member (or the network) answered: an etcd error, as any client sees it.
    Answered,
    /// The connection failed after the request may have left: the member is left out.
    Transport,
    /// The connection was refused: the request never left, so another member may take it.
    NotSent,
}

fn failure(e: &etcd_client::Error) -> Failure {
    let source = match e {
        etcd_client::Error::TransportError(t) => std::error::Error::source(t),
        etcd_client::Error::GRpcStatus(s) => match std::error::Error::source(s) {
            Some(src) => Some(src),
            // A status a server sent carries no source; one the client made up does.
            None => return Failure::Answered,
        },
        _ => return Failure::Answered,
    };
    let mut at: Option<&(dyn std::error::Error + 'static)> = source;
    while let Some(err) = at {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::HostUnreachable
                    | std::io::ErrorKind::NetworkUnreachable
                    | std::io::ErrorKind::AddrNotAvailable
            )
        {
            return Failure::NotSent;
        }
        at = err.source();
    }
    Failure::Transport
}

/// Every member's connection, and the round robin over those that are up.
struct Pool {
    conns: Vec<Conn>,
    next: AtomicUsize,
    /// Deadline of each reconnect's Status call.
    timeout: Duration,
    /// The reconnect tasks, aborted with the canary.
    reconnects: Mutex<JoinSet<()>>,
}

impl Pool {
    /// The next member in turn that is up and not in `tried`; when none is up, the next
    /// not tried (an op still goes out, and fails as a client's would).
    fn pick(&self, tried: &[usize]) -> Option<usize> {
        let n = self.conns.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let order = (0..n).map(|k| (start + k) % n).filter(|i| !tried.contains(i));
        order
            .clone()
            .find(|&i| self.conns[i].up.load(Ordering::Acquire))
            .or_else(|| order.clone().next())
    }

    fn answered(&self, i: usize, member_id: u64) {
        if member_id != 0 {
            self.conns[i].id.store(member_id, Ordering::Relaxed);
        }
    }

    /// An op on member `i` failed: a connection that failed is left out until it answers.
    fn failed(self: &Arc<Self>, i: usize, f: Failure) {
        if f != Failure::Answered && self.conns[i].up.swap(false, Ordering::AcqRel) {
            let pool = self.clone();
            if let Ok(mut r) = self.reconnects.lock() {
                r.spawn(pool.reconnect(i));
            }
        }
    }

    async fn reconnect(self: Arc<Self>, i: usize) {
        let mut wait = RECONNECT_FIRST;
        loop {
            tokio::time::sleep(wait).await;
            let mut m = self.conns[i].client().maintenance_client();
            if let Ok(Ok(_)) = tokio::time::timeout(self.timeout, m.status()).await {
                self.conns[i].up.store(true, Ordering::Release);
                return;
            }
            wait = wait.mul_f64(1.6).min(RECONNECT_MAX);
        }
    }

    /// Runs `op` on the next member, and on the next again while the request never left,
    /// each member once: `(member id, result)`.
    async fn run<T, F, Fut>(self: &Arc<Self>, op: F) -> (u64, Result<T, String>)
    where
        F: Fn(Client) -> Fut,
        Fut: std::future::Future<Output = Result<(u64, T), etcd_client::Error>>,
    {
        let mut tried = Vec::with_capacity(self.conns.len());
        let mut last = (0, Err("the canary has no member".to_owned()));
        while let Some(i) = self.pick(&tried) {
            tried.push(i);
            match op(self.conns[i].client()).await {
                Ok((id, v)) => {
                    self.answered(i, id);
                    return (id, Ok(v));
                }
                Err(e) => {
                    let f = failure(&e);
                    self.failed(i, f);
                    last = (self.conns[i].id.load(Ordering::Relaxed), Err(one_line(&e)));
                    if f != Failure::NotSent {
                        break;
                    }
                }
            }
        }
        last
    }

    fn abort(&self) {
        if let Ok(mut r) = self.reconnects.lock() {
            r.abort_all();
        }
    }
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

/// One line from an etcd client error (as every field on disk is: src/io/columns.rs).
fn one_line(e: &etcd_client::Error) -> String {
    crate::io::columns::one_line(&e.to_string())
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
        if members.is_empty() {
            return Err("the canary needs at least one member".into());
        }
        let probe = ProbeConfig { timeout: cfg.timeout, ..probe.clone() };
        let mut conns = Vec::with_capacity(members.len());
        for m in members {
            let opts = etcd_options(&probe, m)?;
            // Lazy: nothing is dialled yet, so a member down now is no error.
            let client = tokio::time::timeout(cfg.timeout, Client::connect([&m.url], Some(opts)))
                .await
                .map_err(|_| {
                    format!(
                        "canary: no client for {} within {}",
                        m.name,
                        humantime::format_duration(cfg.timeout)
                    )
                })?
                .map_err(|e| format!("canary: {}: {}", m.name, one_line(&e)))?;
            conns.push(Conn {
                client: Mutex::new(client),
                name: m.name.clone(),
                id: AtomicU64::new(0),
                up: AtomicBool::new(true),
            });
        }
        let pool = Arc::new(Pool {
            conns,
            next: AtomicUsize::new(0),
            timeout: cfg.timeout,
            reconnects: Mutex::new(JoinSet::new()),
        });
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
        let Some(i) = self.pool.conns.iter().position(|c| c.name == m.name) else { return };
        let probe = ProbeConfig { timeout: self.timeout, ..probe.clone() };
        let (pool, timeout) = (self.pool.clone(), self.timeout);
        tokio::spawn(async move {
            let made = match etcd_options(&probe, &m) {
                Ok(opts) => {
                    match tokio::time::timeout(timeout, Client::connect([&m.url], Some(opts))).await
                    {
                        Ok(Ok(c)) => Ok(c),
                        Ok(Err(e)) => Err(one_line(&e)),
                        Err(_) => Err("no client within the canary's timeout".into()),
                    }
                }
                Err(e) => Err(e),
            };
            match made {
                Ok(client) => {
                    let conn = &pool.conns[i];
                    match conn.client.lock() {
                        Ok(mut c) => *c = client,
                        Err(p) => *p.into_inner() = client,
                    }
                    conn.up.store(true, Ordering::Release);
                }
                Err(e) => tracing::warn!("canary: {} at {}: {e}", m.name, m.url),
            }
        });
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
        for id in ids {
            let revoke = self.pool.run(|c| async move {
                c.lease_client()
                    .revoke(id)
                    .await
                    .map(|r| (r.header().map_or(0, |h| h.member_id()), ()))
            });
            match tokio::time::timeout(t, revoke).await {
                Ok((_, Ok(()))) => {}
                // Already expired, or revoked with an earlier one: nothing left to delete.
                Ok((_, Err(e))) if e.contains("not found") => {}
                Ok((_, Err(e))) => tracing::warn!(
                    "canary: revoking lease {id:x}: {e} (it expires within {LEASE_TTL_S} s)"
                ),
                Err(_) => tracing::warn!(
                    "canary: revoking lease {id:x} timed out (it expires within {LEASE_TTL_S} s)"
                ),
            }
        }
        let key = self.key.clone();
        let delete = self.pool.run(|c| {
            let key = key.clone();
            async move {
                c.kv_client()
                    .delete(key, None)
                    .await
                    .map(|r| (r.header().map_or(0, |h| h.member_id()), ()))
            }
        });
        if let Err(e) = tokio::time::timeout(t, delete)
            .await
            .map_err(|_| "timed out".to_owned())
            .and_then(|(_, r)| r)
        {
            tracing::warn!("canary: deleting {}: {e}", self.key);
        }
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

/// The member id in an answer's header (0 = none).
fn answered_by(h: Option<&etcd_client::ResponseHeader>) -> u64 {
    h.map_or(0, |h| h.member_id())
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
                            Err(e) => return (member, Err(format!("lease grant: {e}"))),
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
        self.pool
            .run(|c| {
                let value = value.clone();
                async move {
                    let opts = PutOptions::new().with_lease(lease);
                    let r = c.kv_client().put(key.clone(), value, Some(opts)).await?;
                    Ok((answered_by(r.header()), ()))
                }
            })
            .await
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
        self.pool
            .run(|c| async move {
                // Linearizable (the default): it needs a leader, as a lock check does.
                let r = c.kv_client().get(key.clone(), None).await?;
                Ok((answered_by(r.header()), ()))
            })
            .await
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

    /// A pool on `urls` (lazy clients: nothing listens on them).
    async fn pool(urls: &[String]) -> Arc<Pool> {
        let mut conns = Vec::new();
        for u in urls {
            let client = Client::connect([u], None).await.expect("a lazy client");
            conns.push(Conn {
                client: Mutex::new(client),
                name: MemberName(u.clone()),
                id: AtomicU64::new(0),
                up: AtomicBool::new(true),
            });
        }
        Arc::new(Pool {
            conns,
            next: AtomicUsize::new(0),
            timeout: Duration::from_secs(1),
            reconnects: Mutex::new(JoinSet::new()),
        })
    }

    /// A port on 127.0.0.1 nothing listens on.
    fn closed_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    }

    async fn get(c: &Client) -> etcd_client::Error {
        let mut kv = c.kv_client();
        let t = tokio::time::timeout(Duration::from_secs(5), kv.get("k", None));
        t.await.expect("an answer within 5 s").expect_err("nothing serves etcd there")
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_request_that_never_left() {
        let p = pool(&[format!("http://127.0.0.1:{}", closed_port())]).await;
        let e = get(&p.conns[0].client()).await;
        assert_eq!(failure(&e), Failure::NotSent, "{e}");
    }

    #[tokio::test]
    async fn a_connection_closed_after_accepting_is_a_transport_failure() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", l.local_addr().expect("addr"));
        let closer = tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                drop(s);
            }
        });
        let p = pool(&[url]).await;
        let e = get(&p.conns[0].client()).await;
        closer.abort();
        assert_eq!(failure(&e), Failure::Transport, "{e}");
    }

    #[test]
    fn a_status_a_server_sent_is_an_answer() {
        let e = etcd_client::Error::GRpcStatus(tonic::Status::unavailable(
            "etcdserver: leader changed",
        ));
        assert_eq!(failure(&e), Failure::Answered);
    }

    /// Regression: a balanced channel kept sending a third of the ops to a stopped member.
    #[tokio::test]
    async fn a_member_that_refuses_is_left_out_and_its_ops_go_to_the_next() {
        let urls: Vec<String> =
            (0..3).map(|_| format!("http://127.0.0.1:{}", closed_port())).collect();
        let p = pool(&urls).await;
        assert_eq!(
            (p.pick(&[]), p.pick(&[]), p.pick(&[]), p.pick(&[])),
            (Some(0), Some(1), Some(2), Some(0))
        );
        // Every member refuses: one op tries each once, and takes them all out.
        let (_, r) =
            p.run(|c| async move { c.kv_client().get("k", None).await.map(|_| (0, ())) }).await;
        assert!(r.is_err());
        assert!(p.conns.iter().all(|c| !c.up.load(Ordering::Acquire)));
        // With none up an op still goes out (and fails as a client's would) ...
        assert!(p.pick(&[]).is_some());
        // ... and with one up again, every op goes to it.
        p.conns[1].up.store(true, Ordering::Release);
        assert_eq!((p.pick(&[]), p.pick(&[]), p.pick(&[])), (Some(1), Some(1), Some(1)));
        // Tried already, it is not picked again for the same op.
        assert!(matches!(p.pick(&[1]), Some(0 | 2)));
        assert_eq!(p.pick(&[0, 1, 2]), None);
        p.abort();
    }
}
