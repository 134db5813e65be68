//! The lock canary: what an election does to a lock dlock holds. `holders` simulated
//! clients contend for one lock under `__leaderwatch/lock/<run_id>/` the way etcd's Go
//! `concurrency.Mutex` takes it, each on a session (a lease with a keep-alive stream):
//!
//! 1. **acquire**: a Txn that creates `<prefix>/<lease hex>` under the lease if it does not
//!    exist and reads the key with the lowest create revision under the prefix; if that is
//!    ours, granted; else wait for every key created before ours to be deleted (a Get of the
//!    newest such key, a watch until it is deleted, again), then a Get of our key confirms
//!    the lease still holds it. The key's create revision is the **fencing token**.
//! 2. **hold** for `hold`, then **release** (a Delete of the key), and ask again at once.
//!
//! Unlike `concurrency.Mutex` with the default context, every unary op has its own deadline
//! (the canary's `--canary-timeout`) and a failed one is tried again on the next member
//! (src/io/pool.rs): an acquire retried with the same key finds the key an errored attempt
//! created (counted: `applied_after_error`). The independent Go client the tests run beside
//! it (lab/go/etcd/locker) sets the same deadline on each unary call, so the two agree; with
//! clientv3's defaults a leader crash costs a lock client the server's 7 s request timeout
//! instead (docs/counting.md).
//!
//! The keep-alive follows clientv3's lessor: one stream per lease, a keep-alive every TTL/3
//! after an answer and every 500 ms while none comes, the stream opened again on the next
//! member 500 ms after it fails, and the lease given up (`lease_lost`) when no answer came
//! within the TTL or etcd says it has expired. A stream on a frozen member gets no error,
//! only silence: holders whose stream is there lose their lease after the TTL, as Go's do.
//!
//! An observer watches the prefix from the canary's start and records every key created
//! and deleted with its revision: the server's own record, which the safety check reads
//! (src/analysis/lock.rs). Nothing outlives the run by more than the TTL: a clean stop
//! revokes every lease (which deletes the keys) and deletes the prefix.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, LeaseKeepAliveStream, LeaseKeeper,
    PutOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::io::pool::{Pool, answered_by, failure, one_line};
use crate::io::probe::ProbeConfig;
use crate::model::clock::Clock;
use crate::model::lock::{LockEvent, LockEventKind as K};
use crate::model::member::Member;

/// Every key the lock canary writes starts with this.
pub const PREFIX: &str = "__leaderwatch/lock/";
/// clientv3's wait before opening a failed stream again, and its keep-alive resend while
/// no answer comes.
const RETRY: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
pub struct LockConfig {
    /// Clients contending for the lock; with two or more a waiter is always asking.
    pub holders: u16,
    /// Each session's lease TTL, in seconds.
    pub ttl_s: i64,
    /// How long a holder keeps the lock before it releases it.
    pub hold: Duration,
    /// Deadline of each unary op.
    pub timeout: Duration,
}

impl LockConfig {
    /// What `measure` and `rehearse` default to (their flags say why), each op with
    /// `timeout`.
    pub fn defaults(timeout: Duration) -> Self {
        LockConfig { holders: 3, ttl_s: 10, hold: Duration::from_millis(100), timeout }
    }
}

/// The running lock canary.
pub struct LockCanary {
    prefix: String,
    pool: Arc<Pool>,
    cfg: LockConfig,
    tasks: JoinSet<()>,
    /// Every lease granted, for the revoke at stop.
    leases: Arc<Mutex<Vec<i64>>>,
    rx: UnboundedReceiver<LockEvent>,
}

/// What a holder's tasks share.
#[derive(Clone)]
struct HolderShared {
    pool: Arc<Pool>,
    cfg: LockConfig,
    prefix: String,
    clock: Arc<dyn Clock>,
    tx: UnboundedSender<LockEvent>,
    leases: Arc<Mutex<Vec<i64>>>,
}

impl HolderShared {
    fn send(&self, e: LockEvent) {
        let _ = self.tx.send(e);
    }

    /// A unary op with the deadline, on the next member: `(member id, result)`.
    async fn run<T, F, Fut>(&self, op: F) -> (u64, Result<T, String>)
    where
        F: Fn(Client) -> Fut,
        Fut: std::future::Future<Output = Result<(u64, T), etcd_client::Error>>,
    {
        match tokio::time::timeout(self.cfg.timeout, self.pool.run(op)).await {
            Ok((member, r)) => (member, r.map_err(String::from)),
            Err(_) => (
                0,
                Err(format!("timed out after {}", humantime::format_duration(self.cfg.timeout))),
            ),
        }
    }
}

impl LockCanary {
    /// Connects to every member and starts the observer and the holders under
    /// `__leaderwatch/lock/<run_id>/`.
    pub async fn start(
        members: &[Member],
        probe: &ProbeConfig,
        cfg: LockConfig,
        run_id: &str,
        clock: Arc<dyn Clock>,
    ) -> Result<LockCanary, String> {
        if cfg.holders == 0 || cfg.ttl_s <= 0 {
            return Err("the lock canary needs at least one holder and a TTL above 0".into());
        }
        let pool = Pool::connect(members, probe, cfg.timeout, "lock canary").await?;
        let prefix = format!("{PREFIX}{run_id}/");
        let (tx, rx) = mpsc::unbounded_channel();
        let leases = Arc::new(Mutex::new(Vec::new()));
        let s = HolderShared {
            pool: pool.clone(),
            cfg: cfg.clone(),
            prefix: prefix.clone(),
            clock,
            tx,
            leases: leases.clone(),
        };
        // The observer starts from the prefix's current revision, so it sees every key.
        let (_, start) = s
            .run(|c| {
                let p = s.prefix.clone();
                async move {
                    let r = c.kv_client().get(p, Some(GetOptions::new().with_prefix())).await?;
                    Ok((answered_by(r.header()), r.header().map_or(0, |h| h.revision())))
                }
            })
            .await;
        let start = start.map_err(|e| format!("lock canary: reading {prefix}: {e}"))?;
        let mut tasks = JoinSet::new();
        tasks.spawn(observe(s.clone(), start + 1));
        for h in 0..cfg.holders {
            tasks.spawn(holder(s.clone(), h));
        }
        Ok(LockCanary { prefix, pool, cfg, tasks, leases, rx })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Points the member of the same name at its new address (its pod was recreated).
    pub fn repoint(&self, m: Member, probe: &ProbeConfig) {
        self.pool.repoint(m, probe, "lock canary");
    }

    /// The events since the last call.
    pub fn drain(&mut self) -> Vec<LockEvent> {
        std::iter::from_fn(|| self.rx.try_recv().ok()).collect()
    }

    /// Stops the holders and the observer, revokes every lease (deleting the keys) and
    /// deletes the prefix; returns the last events. A failure to clean up is logged: the
    /// leases expire within the TTL anyway.
    pub async fn stop(mut self) -> Vec<LockEvent> {
        self.tasks.shutdown().await;
        self.pool.abort();
        let events = self.drain();
        let ids = self.leases.lock().map(|l| l.clone()).unwrap_or_default();
        let t = self.cfg.timeout.max(Duration::from_secs(2));
        self.pool.clean_up("lock canary", ids, self.cfg.ttl_s, &self.prefix, true, t).await;
        events
    }
}

impl Drop for LockCanary {
    fn drop(&mut self) {
        self.tasks.abort_all();
        self.pool.abort();
    }
}

/// One holder's session: its lease, and whether the lease is lost (sent by its keep-alive).
struct Session {
    lease: i64,
    key: String,
    lost: watch::Receiver<bool>,
    /// Whether the holder holds the lock now, for `lease_lost`'s `held`.
    holding: Arc<AtomicBool>,
    keepalive: tokio::task::JoinHandle<()>,
}

impl Session {
    fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Resolves when the lease is lost.
    fn lost(&self) -> impl std::future::Future<Output = ()> + use<> {
        let mut rx = self.lost.clone();
        async move {
            let _ = rx.wait_for(|l| *l).await;
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

/// An event of holder `h` on session `s`.
fn event(sh: &HolderShared, kind: K, h: u16, s: &Session) -> LockEvent {
    LockEvent {
        lease: s.lease,
        key: s.key.clone(),
        ..LockEvent::new(kind, sh.clock.stamp(), Some(h))
    }
}

/// One holder: a session, then acquire, hold, release, again, until the lease is lost;
/// then the lost lease revoked (once, as clientv3's `Session.Close` does: a lease the
/// client gave up may still live at the server, and its key would block the lock until it
/// expires) and a new session.
async fn holder(sh: HolderShared, h: u16) {
    loop {
        let Some(s) = session(&sh, h).await else { continue };
        while !s.is_lost() {
            let Some(token) = acquire(&sh, h, &s).await else { break };
            s.holding.store(true, Ordering::Release);
            tokio::select! {
                () = tokio::time::sleep(sh.cfg.hold) => {}
                () = s.lost() => break,
            }
            release(&sh, h, &s, token).await;
            s.holding.store(false, Ordering::Release);
        }
        let lease = s.lease;
        let _ = sh
            .run(|c| async move {
                c.lease_client().revoke(lease).await.map(|r| (answered_by(r.header()), ()))
            })
            .await;
    }
}

/// A new lease and its keep-alive; `None` (after a pause) when the grant failed.
async fn session(sh: &HolderShared, h: u16) -> Option<Session> {
    let ttl = sh.cfg.ttl_s;
    let started = sh.clock.stamp();
    let (member, granted) = sh
        .run(|c| async move {
            let g = c.lease_client().grant(ttl, None).await?;
            Ok((answered_by(g.header()), g.id()))
        })
        .await;
    let mut e = LockEvent::new(K::LeaseGranted, sh.clock.stamp(), Some(h));
    e.member_id = member;
    e.latency_ms = started.secs_to(&e.at) * 1000.0;
    let lease = match granted {
        Ok(id) => id,
        Err(err) => {
            e.kind = K::AcquireFailed;
            e.error = format!("lease grant: {err}");
            sh.send(e);
            tokio::time::sleep(RETRY).await;
            return None;
        }
    };
    if let Ok(mut l) = sh.leases.lock() {
        l.push(lease);
    }
    e.lease = lease;
    e.key = format!("{}{lease:x}", sh.prefix);
    let key = e.key.clone();
    sh.send(e);
    let (lost_tx, lost) = watch::channel(false);
    let holding = Arc::new(AtomicBool::new(false));
    let keepalive =
        tokio::spawn(keep_alive(sh.clone(), h, lease, key.clone(), holding.clone(), lost_tx));
    Some(Session { lease, key, lost, holding, keepalive })
}

/// Keeps the lease alive until it is lost (see the module header); then says so on `lost`.
async fn keep_alive(
    sh: HolderShared,
    h: u16,
    lease: i64,
    key: String,
    holding: Arc<AtomicBool>,
    lost: watch::Sender<bool>,
) {
    let k = Kept { sh: &sh, h, lease, key: &key };
    let ttl = Duration::from_secs(sh.cfg.ttl_s.unsigned_abs());
    let mut deadline = Instant::now() + ttl;
    // The member of the last stream: where the lease was kept alive when it was lost.
    let mut on = 0;
    let why = loop {
        if Instant::now() >= deadline {
            break format!("no keep-alive answer within the TTL ({} s)", sh.cfg.ttl_s);
        }
        let Some((i, c)) = sh.pool.for_stream() else { break "no member".to_owned() };
        let member = sh.pool.member_of(i).await;
        on = member;
        let opening = Instant::now();
        let opened = tokio::time::timeout_at(
            deadline.min(Instant::now() + sh.cfg.timeout),
            c.lease_client().keep_alive(lease),
        )
        .await;
        let (mut keeper, mut stream) = match opened {
            Ok(Ok(ks)) => ks,
            // The first answer said the lease is gone.
            Ok(Err(etcd_client::Error::LeaseKeepAliveError(e))) if e.contains("not found") => {
                break "the lease has expired at the server".to_owned();
            }
            Ok(Err(e)) => {
                sh.pool.failed(i, failure(&e));
                let error = format!("opening: {}", one_line(&e));
                sh.send(LockEvent { error, ..k.event(K::KeepAliveFailed, member) });
                tokio::time::sleep(RETRY).await;
                continue;
            }
            Err(_) => continue,
        };
        // Opening sent a keep-alive and read its answer.
        let sent = Instant::now();
        deadline = sent + ttl;
        let latency_ms = (sent - opening).as_secs_f64() * 1000.0;
        sh.send(LockEvent { latency_ms, ..k.event(K::KeepAliveOk, member) });
        let stream = kept_on_stream(&k, i, sent, &mut deadline, &mut keeper, &mut stream).await;
        match stream {
            Err(expired) => break expired,
            Ok(e) if e.is_empty() => {}
            Ok(error) => {
                sh.send(LockEvent { error, ..k.event(K::KeepAliveFailed, member) });
                tokio::time::sleep(RETRY.min(deadline.saturating_duration_since(Instant::now())))
                    .await;
            }
        }
    };
    let _ = lost.send(true);
    let held = holding.load(Ordering::Acquire);
    sh.send(LockEvent { held, error: why, ..k.event(K::LeaseLost, on) });
}

/// Whose lease a keep-alive event is about.
struct Kept<'a> {
    sh: &'a HolderShared,
    h: u16,
    lease: i64,
    key: &'a str,
}

impl Kept<'_> {
    fn event(&self, kind: K, member_id: u64) -> LockEvent {
        LockEvent {
            lease: self.lease,
            key: self.key.to_owned(),
            member_id,
            ..LockEvent::new(kind, self.sh.clock.stamp(), Some(self.h))
        }
    }
}

/// Keeps the lease alive on one open stream (of pool member `i`), a keep-alive every third
/// of the TTL, until the stream fails: `Ok(why)` to open another (`why` empty when the TTL
/// ran out with no answer), `Err(why)` when the server says the lease has expired.
async fn kept_on_stream(
    k: &Kept<'_>,
    i: usize,
    mut sent: Instant,
    deadline: &mut Instant,
    keeper: &mut LeaseKeeper,
    stream: &mut LeaseKeepAliveStream,
) -> Result<String, String> {
    let ttl = Duration::from_secs(k.sh.cfg.ttl_s.unsigned_abs());
    let mut next = sent + ttl / 3;
    loop {
        tokio::select! {
            m = stream.message() => match m {
                Ok(Some(r)) if r.ttl() <= 0 => {
                    return Err("the lease has expired at the server".to_owned());
                }
                Ok(Some(r)) => {
                    let now = Instant::now();
                    *deadline = now + Duration::from_secs(r.ttl().unsigned_abs());
                    next = now + ttl / 3;
                    let latency_ms = (now - sent).as_secs_f64() * 1000.0;
                    let ok = k.event(K::KeepAliveOk, answered_by(r.header()));
                    k.sh.send(LockEvent { latency_ms, ..ok });
                }
                Ok(None) => return Ok("the stream ended".to_owned()),
                Err(e) => {
                    k.sh.pool.failed(i, failure(&e));
                    return Ok(one_line(&e));
                }
            },
            () = tokio::time::sleep_until(next) => {
                if let Err(e) = keeper.keep_alive().await {
                    return Ok(one_line(&e));
                }
                sent = Instant::now();
                next = sent + RETRY;
            }
            () = tokio::time::sleep_until(*deadline) => return Ok(String::new()),
        }
    }
}

/// GetOptions for the key with the lowest create revision under the prefix.
fn first_created() -> GetOptions {
    GetOptions::new().with_prefix().with_sort(SortTarget::Create, SortOrder::Ascend).with_limit(1)
}

/// What the grant Txn said: our key's create revision, and whether it is the owner (with
/// the answer's revision).
struct Tried {
    my_rev: i64,
    owner: bool,
    revision: i64,
    /// The key was there already: an earlier attempt was applied.
    existed: bool,
}

/// Acquires the lock for session `s`: its fencing token, or `None` when the lease was lost
/// first.
async fn acquire(sh: &HolderShared, h: u16, s: &Session) -> Option<i64> {
    let requested = sh.clock.stamp();
    sh.send(event(sh, K::Requested, h, s));
    let mut errored = false;
    let tried = loop {
        if s.is_lost() {
            return None;
        }
        match try_acquire(sh, s).await {
            (_, Ok(t)) => break t,
            (member, Err(e)) => {
                errored = true;
                sh.send(LockEvent {
                    member_id: member,
                    error: format!("grant txn: {e}"),
                    ..event(sh, K::AcquireFailed, h, s)
                });
            }
        }
    };
    if tried.existed && errored {
        sh.send(LockEvent {
            create_revision: tried.my_rev,
            ..event(sh, K::AppliedAfterError, h, s)
        });
    }
    let (member, revision) = if tried.owner {
        (0, tried.revision)
    } else {
        tokio::select! {
            r = wait_turn(sh, h, s, tried.my_rev) => r?,
            () = s.lost() => return None,
        }
    };
    let mut e = event(sh, K::Granted, h, s);
    e.create_revision = tried.my_rev;
    e.revision = revision;
    e.member_id = member;
    e.latency_ms = requested.secs_to(&e.at) * 1000.0;
    sh.send(e);
    Some(tried.my_rev)
}

/// The Txn of `concurrency.Mutex`'s tryAcquire.
async fn try_acquire(sh: &HolderShared, s: &Session) -> (u64, Result<Tried, String>) {
    let (key, pfx, lease) = (s.key.clone(), sh.prefix.clone(), s.lease);
    sh.run(|c| {
        let (key, pfx) = (key.clone(), pfx.clone());
        async move {
            let txn = Txn::new()
                .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                .and_then([
                    TxnOp::put(key.clone(), "", Some(PutOptions::new().with_lease(lease))),
                    TxnOp::get(pfx.clone(), Some(first_created())),
                ])
                .or_else([TxnOp::get(key, None), TxnOp::get(pfx, Some(first_created()))]);
            let r = c.kv_client().txn(txn).await?;
            let revision = r.header().map_or(0, |h| h.revision());
            let ops = r.op_responses();
            let range = |i: usize| match ops.get(i) {
                Some(TxnOpResponse::Get(g)) => g.kvs().first().map(|kv| kv.create_revision()),
                _ => None,
            };
            let my_rev = if r.succeeded() { revision } else { range(0).unwrap_or(0) };
            let owner = range(1).is_none_or(|first| first == my_rev);
            Ok((
                answered_by(r.header()),
                Tried { my_rev, owner, revision, existed: !r.succeeded() },
            ))
        }
    })
    .await
}

/// `concurrency.Mutex`'s waitDeletes and the Get after it: waits until no key created
/// before ours is left, then confirms ours is still there. `(member, revision)` of that
/// Get; `None` when our key is gone (the lease expired at the server).
async fn wait_turn(sh: &HolderShared, h: u16, s: &Session, my_rev: i64) -> Option<(u64, i64)> {
    let failed = |member: u64, what: &str, e: String| LockEvent {
        member_id: member,
        error: format!("{what}: {e}"),
        ..event(sh, K::AcquireFailed, h, s)
    };
    loop {
        let pfx = sh.prefix.clone();
        let (member, newest) = sh
            .run(|c| {
                let pfx = pfx.clone();
                async move {
                    let opts = GetOptions::new()
                        .with_prefix()
                        .with_sort(SortTarget::Create, SortOrder::Descend)
                        .with_limit(1)
                        .with_max_create_revision(my_rev - 1);
                    let r = c.kv_client().get(pfx, Some(opts)).await?;
                    let rev = r.header().map_or(0, |h| h.revision());
                    let key = r.kvs().first().map(|kv| kv.key().to_vec());
                    Ok((answered_by(r.header()), (key, rev)))
                }
            })
            .await;
        match newest {
            Err(e) => sh.send(failed(member, "waiting", e)),
            Ok((None, _)) => break,
            Ok((Some(key), rev)) => {
                if let Err(e) = wait_delete(sh, key, rev).await {
                    sh.send(failed(0, "watching", e));
                }
            }
        }
    }
    loop {
        let key = s.key.clone();
        let (member, got) = sh
            .run(|c| {
                let key = key.clone();
                async move {
                    let r = c.kv_client().get(key, None).await?;
                    let rev = r.header().map_or(0, |h| h.revision());
                    Ok((answered_by(r.header()), (!r.kvs().is_empty(), rev)))
                }
            })
            .await;
        match got {
            Ok((true, rev)) => return Some((member, rev)),
            Ok((false, _)) => return None,
            Err(e) => sh.send(failed(member, "confirming", e)),
        }
    }
}

/// Watches `key` from `rev` until it is deleted; an error when the stream fails first.
async fn wait_delete(sh: &HolderShared, key: Vec<u8>, rev: i64) -> Result<(), String> {
    let Some((i, c)) = sh.pool.for_stream() else { return Err("no member".into()) };
    let opened = tokio::time::timeout(
        sh.cfg.timeout,
        c.watch_client().watch(key, Some(WatchOptions::new().with_start_revision(rev))),
    )
    .await
    .map_err(|_| "opening the watch timed out".to_owned())?;
    let mut stream = opened.map_err(|e| {
        sh.pool.failed(i, failure(&e));
        one_line(&e)
    })?;
    loop {
        match stream.message().await {
            Ok(Some(r)) if r.events().iter().any(|e| e.event_type() == EventType::Delete) => {
                return Ok(());
            }
            Ok(Some(r)) if r.canceled() => {
                return Err(format!("watch canceled: {}", r.cancel_reason()));
            }
            Ok(Some(_)) => {}
            Ok(None) => return Err("the watch ended".into()),
            Err(e) => {
                sh.pool.failed(i, failure(&e));
                return Err(one_line(&e));
            }
        }
    }
}

/// Deletes our key, tried again until answered or the lease is lost.
async fn release(sh: &HolderShared, h: u16, s: &Session, token: i64) {
    loop {
        if s.is_lost() {
            return;
        }
        let started = sh.clock.stamp();
        let key = s.key.clone();
        let (member, r) = sh
            .run(|c| {
                let key = key.clone();
                async move {
                    let r = c.kv_client().delete(key, None).await?;
                    Ok((answered_by(r.header()), r.header().map_or(0, |h| h.revision())))
                }
            })
            .await;
        let mut e = event(sh, K::Released, h, s);
        e.member_id = member;
        e.create_revision = token;
        e.latency_ms = started.secs_to(&e.at) * 1000.0;
        match r {
            Ok(rev) => {
                e.revision = rev;
                sh.send(e);
                return;
            }
            Err(err) => sh.send(LockEvent { kind: K::ReleaseFailed, error: err, ..e }),
        }
    }
}

/// The server's record: every key created and deleted under the prefix from `from`, the
/// watch opened again from where it stopped when its stream fails.
async fn observe(sh: HolderShared, mut from: i64) {
    loop {
        let Some((i, c)) = sh.pool.for_stream() else { return };
        let opts = WatchOptions::new().with_prefix().with_prev_key().with_start_revision(from);
        let opened = tokio::time::timeout(
            sh.cfg.timeout,
            c.watch_client().watch(sh.prefix.clone(), Some(opts)),
        )
        .await;
        let mut stream = match opened {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                sh.pool.failed(i, failure(&e));
                tokio::time::sleep(RETRY).await;
                continue;
            }
            Err(_) => continue,
        };
        loop {
            match stream.message().await {
                Ok(Some(r)) => {
                    let member = answered_by(r.header());
                    for ev in r.events() {
                        let Some(kv) = ev.kv() else { continue };
                        let mut e = LockEvent::new(K::Created, sh.clock.stamp(), None);
                        e.key = String::from_utf8_lossy(kv.key()).into_owned();
                        e.revision = kv.mod_revision();
                        e.member_id = member;
                        match ev.event_type() {
                            EventType::Put if kv.version() == 1 => {
                                e.create_revision = kv.create_revision()
                            }
                            EventType::Put => continue,
                            EventType::Delete => {
                                e.kind = K::Deleted;
                                e.create_revision = ev.prev_kv().map_or(0, |p| p.create_revision());
                            }
                        }
                        from = from.max(e.revision + 1);
                        sh.send(e);
                    }
                    if r.canceled() {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    sh.pool.failed(i, failure(&e));
                    break;
                }
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}
