//! The members' connections as etcd's Go client uses them: one connection to every member
//! and, per op, the next member in turn whose connection is up (clientv3 on gRPC's
//! round-robin balancer), not a plain load balancer's pick. A connection that fails (a
//! transport error, not an etcd answer) is left out until a Status call on it succeeds
//! again, tried in the background with gRPC's backoff; an op whose request never left (the
//! connection was refused) goes to the next member within its deadline. The write canary
//! (src/io/canary.rs) and the lock canary (src/io/lock.rs) each keep one pool, as two
//! clients would.
//!
//! Without this, a stopped member took a third of the ops for as long as it was down, and a
//! SIGTERM'd leader cost the canary 0.2-0.4 s where clientv3 beside it lost nothing
//! (tests/etcd/canary_vs_writer.rs).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::Client;
use tokio::task::JoinSet;

use crate::io::probe::{ProbeConfig, etcd_options};
use crate::model::member::{Member, MemberName};

/// A failed connection is tried again after this, then 1.6 times longer each time, up to
/// [`RECONNECT_MAX`]: gRPC's connection backoff (base 1 s, multiplier 1.6), capped lower so
/// a member back after a sitting's disruption takes ops again within the settle window.
pub const RECONNECT_FIRST: Duration = Duration::from_secs(1);
pub const RECONNECT_MAX: Duration = Duration::from_secs(10);

/// One member's connection.
pub(crate) struct Conn {
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
    pub(crate) fn client(&self) -> Client {
        match self.client.lock() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

/// What kind of failure an op met, for the pick of the next member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The member (or the network) answered: an etcd error, as any client sees it.
    Answered,
    /// The connection failed after the request may have left: the member is left out.
    Transport,
    /// The connection was refused: the request never left, so another member may take it.
    NotSent,
}

/// Why an op on the pool failed: its words in one line (what the files record) and the
/// gRPC code a member answered with, if one did (what a caller acts on, never the words).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OpError {
    pub text: String,
    pub code: Option<tonic::Code>,
}

impl OpError {
    fn of(e: &etcd_client::Error) -> Self {
        let code = match e {
            etcd_client::Error::GRpcStatus(s) => Some(s.code()),
            _ => None,
        };
        OpError { text: one_line(e), code }
    }
}

impl From<OpError> for String {
    fn from(e: OpError) -> String {
        e.text
    }
}

pub(crate) fn failure(e: &etcd_client::Error) -> Failure {
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
pub(crate) struct Pool {
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
    pub(crate) fn pick(&self, tried: &[usize]) -> Option<usize> {
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
    pub(crate) fn failed(self: &Arc<Self>, i: usize, f: Failure) {
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
    pub(crate) async fn run<T, F, Fut>(self: &Arc<Self>, op: F) -> (u64, Result<T, OpError>)
    where
        F: Fn(Client) -> Fut,
        Fut: std::future::Future<Output = Result<(u64, T), etcd_client::Error>>,
    {
        let mut tried = Vec::with_capacity(self.conns.len());
        let none = OpError { text: "the canary has no member".to_owned(), code: None };
        let mut last = (0, Err(none));
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
                    last = (self.conns[i].id.load(Ordering::Relaxed), Err(OpError::of(&e)));
                    if f != Failure::NotSent {
                        break;
                    }
                }
            }
        }
        last
    }

    pub(crate) fn abort(&self) {
        if let Ok(mut r) = self.reconnects.lock() {
            r.abort_all();
        }
    }

    /// What a canary leaves behind when it stops: each of its `leases` revoked (which
    /// deletes their keys), then `key` (with `prefix`: every key under it) deleted for what
    /// no lease carried; each call bounded by `within`. A failure is a warning naming
    /// `who` and when the lease expires anyway (`ttl_s`): the run's data is already safe.
    pub(crate) async fn clean_up(
        self: &Arc<Self>,
        who: &str,
        leases: Vec<i64>,
        ttl_s: i64,
        key: &str,
        prefix: bool,
        within: Duration,
    ) {
        for id in leases {
            let revoke = self.run(|c| async move {
                c.lease_client().revoke(id).await.map(|r| (answered_by(r.header()), ()))
            });
            match tokio::time::timeout(within, revoke).await {
                Ok((_, Ok(()))) => {}
                // Already expired, or revoked with an earlier one: nothing left to delete.
                Ok((_, Err(e))) if e.code == Some(tonic::Code::NotFound) => {}
                Ok((_, Err(e))) => {
                    let e = e.text;
                    tracing::warn!(
                        "{who}: revoking lease {id:x}: {e} (it expires within {ttl_s} s)"
                    )
                }
                Err(_) => tracing::warn!(
                    "{who}: revoking lease {id:x} timed out (it expires within {ttl_s} s)"
                ),
            }
        }
        let delete = self.run(|c| async move {
            let opts = prefix.then(|| etcd_client::DeleteOptions::new().with_prefix());
            c.kv_client().delete(key, opts).await.map(|r| (answered_by(r.header()), ()))
        });
        if let Err(e) = tokio::time::timeout(within, delete)
            .await
            .map_err(|_| "timed out".to_owned())
            .and_then(|(_, r)| r.map_err(String::from))
        {
            tracing::warn!("{who}: deleting {key}: {e}");
        }
    }
}

impl Pool {
    /// A lazy connection to every member (nothing is dialled yet, so a member down now is
    /// no error), each call bounded by `timeout`; `who` names the client in errors.
    pub(crate) async fn connect(
        members: &[Member],
        probe: &ProbeConfig,
        timeout: Duration,
        who: &str,
    ) -> Result<Arc<Pool>, String> {
        if members.is_empty() {
            return Err(format!("the {who} needs at least one member"));
        }
        let probe = ProbeConfig { timeout, ..probe.clone() };
        let mut conns = Vec::with_capacity(members.len());
        for m in members {
            let opts = etcd_options(&probe, m)?;
            let client = tokio::time::timeout(timeout, Client::connect([&m.url], Some(opts)))
                .await
                .map_err(|_| {
                    format!(
                        "{who}: no client for {} within {}",
                        m.name,
                        humantime::format_duration(timeout)
                    )
                })?
                .map_err(|e| format!("{who}: {}: {}", m.name, one_line(&e)))?;
            conns.push(Conn {
                client: Mutex::new(client),
                name: m.name.clone(),
                id: AtomicU64::new(0),
                up: AtomicBool::new(true),
            });
        }
        Ok(Arc::new(Pool {
            conns,
            next: AtomicUsize::new(0),
            timeout,
            reconnects: Mutex::new(JoinSet::new()),
        }))
    }

    /// Points the member of the same name at its new address (its pod was recreated): a
    /// new lazy connection replaces the old one, up, so the next pick may use it. Made in
    /// a task; a failure is logged (the old connection stays, failing as before).
    pub(crate) fn repoint(self: &Arc<Self>, m: Member, probe: &ProbeConfig, who: &'static str) {
        let Some(i) = self.conns.iter().position(|c| c.name == m.name) else { return };
        let probe = ProbeConfig { timeout: self.timeout, ..probe.clone() };
        let pool = self.clone();
        tokio::spawn(async move {
            let timeout = pool.timeout;
            let made = match etcd_options(&probe, &m) {
                Ok(opts) => {
                    match tokio::time::timeout(timeout, Client::connect([&m.url], Some(opts))).await
                    {
                        Ok(Ok(c)) => Ok(c),
                        Ok(Err(e)) => Err(one_line(&e)),
                        Err(_) => Err(format!("no client within the {who}'s timeout")),
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
                Err(e) => tracing::warn!("{who}: {} at {}: {e}", m.name, m.url),
            }
        });
    }

    /// The next member in turn for a stream (a watch, a keep-alive), as clientv3's
    /// balancer places a new stream: its index (for [`Pool::failed`]) and its client.
    pub(crate) fn for_stream(&self) -> Option<(usize, Client)> {
        self.pick(&[]).map(|i| (i, self.conns[i].client()))
    }

    /// The id of the member behind connection `i`: learned from its answers, or asked
    /// with a Status call (within the pool's timeout) the first time a stream needs it,
    /// since a stream's first answer may not reach the caller. 0 when it did not answer.
    pub(crate) async fn member_of(&self, i: usize) -> u64 {
        let known = self.conns[i].id.load(Ordering::Relaxed);
        if known != 0 {
            return known;
        }
        let mut m = self.conns[i].client().maintenance_client();
        match tokio::time::timeout(self.timeout, m.status()).await {
            Ok(Ok(s)) => {
                let id = answered_by(s.header());
                self.answered(i, id);
                id
            }
            _ => 0,
        }
    }
}

/// One line from an etcd client error (as every field on disk is: src/io/columns.rs).
pub(crate) fn one_line(e: &etcd_client::Error) -> String {
    crate::io::columns::one_line(&e.to_string())
}

/// The member id in an answer's header (0 = none).
pub(crate) fn answered_by(h: Option<&etcd_client::ResponseHeader>) -> u64 {
    h.map_or(0, |h| h.member_id())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lease clean-up acts on etcd's code (a lease already gone is not worth a warning),
    /// never on the words, which etcd may change.
    #[test]
    fn an_answered_not_found_keeps_its_code() {
        let gone = etcd_client::Error::GRpcStatus(tonic::Status::not_found(
            "etcdserver: requested lease not found",
        ));
        let e = OpError::of(&gone);
        assert_eq!(e.code, Some(tonic::Code::NotFound));
        assert!(e.text.contains("requested lease not found"), "{e:?}");
        let other = OpError::of(&etcd_client::Error::InvalidArgs("no".into()));
        assert_eq!(other.code, None);
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
