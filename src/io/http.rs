//! The probes' HTTP: a GET of one member path (`/metrics`, `/health`) over one HTTP/1.1
//! connection kept open between probes, TLS only for an https:// member. No redirects, no
//! decompression, no proxy: a member answers itself or not at all. The exchange is written
//! here (httparse reads the head; Content-Length, chunked, or until close) so the body goes
//! from one reused read buffer straight to the caller: no connection task, no body channel,
//! no copies. Through hyper's client the HTTP layers cost more than the page's parsing
//! (docs/benchmarks.md). A paced connection (every plain one a probe reads) is read only
//! when its caller says, never as bytes arrive, and the kernel stamps when each answer came;
//! the Status connection's (`PacedTcp`) PING acknowledgements go with its next request.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::os::fd::AsRawFd;

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// The client side of TLS, built once from the `--cacert`, `--cert` and `--key` PEMs.
pub type TlsConfig = Arc<rustls::ClientConfig>;

/// A TLS client configuration: the CA bundle's certificates as roots (the machine's trust
/// store without one, as the Kubernetes client does), and the client certificate when given.
pub fn tls_config(
    ca: Option<&[u8]>,
    cert_and_key: Option<(&[u8], &[u8])>,
) -> Result<TlsConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match ca {
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(pem) {
                let c = c.map_err(|e| format!("--cacert: {e}"))?;
                roots.add(c).map_err(|e| format!("--cacert: {e}"))?;
            }
            if roots.is_empty() {
                return Err("--cacert: no certificate in the file".to_owned());
            }
            versions.with_root_certificates(roots)
        }
        None => {
            use rustls_platform_verifier::BuilderVerifierExt;
            versions
                .with_platform_verifier()
                .map_err(|e| format!("the machine's TLS roots: {e}"))?
        }
    };
    let config = match cert_and_key {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("--cert: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("--key: {e}"))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| format!("--cert/--key: {e}"))?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// One member's base URL, split once.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// `host:port` as the Host header carries it.
    pub(crate) authority: String,
    /// For connecting and for TLS's server name: no brackets around an IPv6 address.
    host: String,
    port: u16,
    pub(crate) https: bool,
}

pub(crate) fn target(url: &str) -> Result<Target, String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{url} is not a URL ({e})"))?;
    let https = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(format!("{url}: only http:// and https:// members are probed")),
    };
    let host = uri.host().ok_or_else(|| format!("{url} has no host"))?;
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let authority = uri.authority().map_or_else(|| host.to_owned(), |a| a.to_string());
    let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    Ok(Target { authority, host, port, https })
}

/// One kept-alive connection to one member, used by one request at a time (a member's next
/// probe starts only once its last one ended). A request that fails or is abandoned (its
/// timeout) drops the connection; the next one opens a new one.
pub struct Conn {
    target: Target,
    tls: Option<TlsConfig>,
    kept: std::sync::Mutex<Option<Kept>>,
    /// See [`Conn::paced`].
    paced: bool,
}

/// When a paced connection's socket is read ([`Conn::paced`]): first at `first`, then
/// every `every` until the response is whole. Probes of several members given the same
/// pace read their pages in the same wakeups.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub first: Instant,
    pub every: Duration,
}

impl Pace {
    /// Read at once, then every [`MIN_PACE`].
    pub fn now() -> Pace {
        Pace { first: Instant::now(), every: MIN_PACE }
    }
}

/// The shortest time between two reads of a paced response (tokio's timer tick).
const MIN_PACE: Duration = Duration::from_millis(1);

/// How a paced response was read whole (none is returned for one that failed): whether
/// it was whole at the first read, when it was, and when its last bytes had arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paced {
    /// Reads that came too early (found nothing new) before the response was whole.
    pub early: u32,
    pub done: Instant,
    /// When the kernel received the last bytes read (`SO_TIMESTAMPNS`; `done` when it
    /// gave no stamp): a response read late is still timed to when it came.
    pub arrived: Instant,
}

impl Paced {
    /// Two responses of one probe as one: found early if either was, whole when both
    /// were, arrived when the later did.
    pub fn and(self, other: Paced) -> Paced {
        Paced {
            early: self.early + other.early,
            done: self.done.max(other.done),
            arrived: self.arrived.max(other.arrived),
        }
    }
}

/// An open connection between requests, with its read buffer (reused: a page is read
/// into the same bytes every round).
struct Kept {
    stream: Stream,
    buf: Vec<u8>,
}

/// The bytes to a member: TCP, or TLS over it for an https:// member.
pub(crate) enum Stream {
    Plain(TcpStream),
    /// Only through h2 ([`open_paced`]).
    Paced(Box<PacedTcp>),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// How much of a response the read buffer takes at once; a `/metrics` page arrives in a
/// few reads of this size (etcd writes it 4 KiB at a time).
const READ_BUF: usize = 32 * 1024;
/// A response's status line and headers must fit in this (etcd's are ~150 bytes).
const HEAD_CAP: usize = 16 * 1024;

impl Conn {
    /// For the member at `url` (`http://host:port` or `https://...`; `tls` needed for https).
    pub fn new(url: &str, tls: Option<TlsConfig>) -> Result<Conn, String> {
        let target = target(url)?;
        if target.https && tls.is_none() {
            return Err(format!("{url}: an https:// member needs the TLS settings"));
        }
        Ok(Conn { target, tls, kept: std::sync::Mutex::new(None), paced: false })
    }

    /// Reads responses on a plain connection when [`Conn::get_paced`] says, never when
    /// bytes arrive ([`mark_paced`]). etcd writes its ~160 KB page 4 KiB at a time over
    /// 5-20 ms: woken for each piece, the sampler slept and woke ~50 times a full round,
    /// and each wakeup costs more than the bytes it reads (docs/benchmarks.md).
    pub fn paced(mut self) -> Conn {
        self.paced = true;
        self
    }

    async fn connect(&self) -> Result<Kept, String> {
        let stream = open(&self.target, self.tls.as_ref()).await?;
        if let (true, Stream::Plain(tcp)) = (self.paced, &stream) {
            mark_paced(tcp).map_err(|e| format!("{}: {e}", self.target.authority))?;
        }
        Ok(Kept { stream, buf: Vec::new() })
    }

    /// `GET path`: hands each piece of the body to `each` as it arrives and returns the
    /// status. A body over `cap` bytes is an error, not a truncation.
    pub async fn get(
        &self,
        path: &str,
        cap: usize,
        each: impl FnMut(&[u8]),
    ) -> Result<u16, String> {
        self.request(path, cap, None, each).await.map(|(status, _)| status)
    }

    /// [`Conn::get`] on a [`Conn::paced`] connection, read as `pace` says; also returns how
    /// the response was read (`None` on a TLS connection, read as its bytes arrive).
    pub async fn get_paced(
        &self,
        path: &str,
        cap: usize,
        pace: Pace,
        each: impl FnMut(&[u8]),
    ) -> Result<(u16, Option<Paced>), String> {
        self.request(path, cap, Some(pace), each).await
    }

    async fn request(
        &self,
        path: &str,
        cap: usize,
        pace: Option<Pace>,
        mut each: impl FnMut(&[u8]),
    ) -> Result<(u16, Option<Paced>), String> {
        // A paced connection is never read as bytes arrive: its mark holds them back.
        let pace = match (self.paced, pace) {
            (false, _) => None,
            (true, Some(p)) => Some(p),
            (true, None) => Some(Pace::now()),
        };
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: leaderwatch/{}\r\n\r\n",
            self.target.authority,
            env!("CARGO_PKG_VERSION")
        );
        let kept = self.kept.lock().ok().and_then(|mut k| k.take());
        let (mut conn, reused) = match kept {
            Some(k) => (k, true),
            None => (self.connect().await?, false),
        };
        let mut exchange = Exchange { cap, each: &mut each, body_seen: 0 };
        let (status, keep, paced) =
            match conn.exchange(request.as_bytes(), &mut exchange, pace).await {
                Ok(done) => done,
                // The member closed a kept connection between requests (a restart, its idle
                // timeout) before answering: a GET is safe to send again, once, on a new one.
                Err(Failure::ClosedBeforeAnswer) if reused => {
                    conn = self.connect().await?;
                    conn.exchange(request.as_bytes(), &mut exchange, pace)
                        .await
                        .map_err(Failure::into_message)?
                }
                Err(e) => return Err(e.into_message()),
            };
        if keep && let Ok(mut k) = self.kept.lock() {
            *k = Some(conn);
        }
        Ok((status, paced))
    }
}

/// A new connection to `t`: TLS over TCP for an https:// member (`tls` then given).
pub(crate) async fn open(t: &Target, tls: Option<&TlsConfig>) -> Result<Stream, String> {
    let tcp = TcpStream::connect((t.host.as_str(), t.port))
        .await
        .map_err(|e| format!("connect to {}: {e}", t.authority))?;
    // Requests are small and whole: no reason to wait for more before sending.
    let _ = tcp.set_nodelay(true);
    Ok(match (tls, t.https) {
        (Some(cfg), true) => {
            let name = ServerName::try_from(t.host.clone())
                .map_err(|e| format!("{}: not a TLS server name ({e})", t.host))?;
            let tls = tokio_rustls::TlsConnector::from(cfg.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS with {}: {e}", t.authority))?;
            Stream::Tls(Box::new(tls))
        }
        _ => Stream::Plain(tcp),
    })
}

/// [`open`], a plain connection made a [`PacedTcp`]: for the Status client, which reads
/// through h2 and sets the pace through [`PacedTcp::pacing`].
pub(crate) async fn open_paced(t: &Target, tls: Option<&TlsConfig>) -> Result<Stream, String> {
    Ok(match open(t, tls).await? {
        Stream::Plain(tcp) => Stream::Paced(Box::new(
            PacedTcp::new(tcp).map_err(|e| format!("{}: {e}", t.authority))?,
        )),
        other => other,
    })
}

/// One request's caller side: where its body goes and how much may come.
struct Exchange<'a, F> {
    cap: usize,
    each: &'a mut F,
    body_seen: usize,
}

impl<F: FnMut(&[u8])> Exchange<'_, F> {
    fn body(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.body_seen += bytes.len();
        if self.body_seen > self.cap {
            return Err(Failure::Other(too_large(self.cap)));
        }
        if !bytes.is_empty() {
            (self.each)(bytes);
        }
        Ok(())
    }
}

/// Why an exchange failed; only the first kind is worth a second try.
#[derive(Debug)]
enum Failure {
    /// The connection ended before a byte of the response came.
    ClosedBeforeAnswer,
    Other(String),
}

impl Failure {
    fn into_message(self) -> String {
        match self {
            Failure::ClosedBeforeAnswer => "connection closed before the response".to_owned(),
            Failure::Other(s) => s,
        }
    }
}

impl Kept {
    /// Sends `request` and reads its response: the status, whether the connection can
    /// carry the next request, and how a paced response was read.
    async fn exchange<F: FnMut(&[u8])>(
        &mut self,
        request: &[u8],
        out: &mut Exchange<'_, F>,
        pace: Option<Pace>,
    ) -> Result<(u16, bool, Option<Paced>), Failure> {
        let closed = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::ConnectionAborted => Failure::ClosedBeforeAnswer,
            _ => Failure::Other(format!("send: {e}")),
        };
        self.stream.write_all(request).await.map_err(closed)?;
        if self.buf.len() < READ_BUF {
            self.buf.resize(READ_BUF, 0);
        }
        let Kept { stream, buf } = self;
        // Paced only on a plain connection: its low-water mark was raised when it opened.
        let mut pacer = match (pace, &*stream) {
            (Some(p), Stream::Plain(_)) => Some(Pacer::new(p)),
            _ => None,
        };
        // The status line and headers (a 1xx interim answer is skipped).
        let mut filled = 0;
        let (status, mut body, mut keep, head_len) = loop {
            match head(&buf[..filled])? {
                Some(Head::Interim(n)) => {
                    buf.copy_within(n..filled, 0);
                    filled -= n;
                    continue;
                }
                Some(Head::Final { status, body, keep, len }) => break (status, body, keep, len),
                None if filled >= HEAD_CAP => {
                    return Err(Failure::Other(format!(
                        "response head over {} KiB",
                        HEAD_CAP / 1024
                    )));
                }
                None => {}
            }
            let n = match read(stream, &mut buf[filled..], pacer.as_mut()).await {
                Ok(n) => n,
                Err(e) if filled == 0 => return Err(closed(e)),
                Err(e) => return Err(Failure::Other(format!("read: {e}"))),
            };
            if n == 0 {
                return Err(if filled == 0 {
                    Failure::ClosedBeforeAnswer
                } else {
                    Failure::Other("connection closed inside the response head".to_owned())
                });
            }
            filled += n;
        };
        // The body: what came with the head, then read by read, straight from the buffer.
        let mut at = head_len;
        loop {
            let used = body.take(&buf[at..filled], out)?;
            if body.done() {
                // Bytes past the response: not an answer to anything we asked.
                keep &= at + used == filled;
                let paced = pacer.map(|p| p.paced());
                return Ok((status, keep, paced));
            }
            let n = read(stream, &mut buf[..], pacer.as_mut())
                .await
                .map_err(|e| Failure::Other(format!("read: {e}")))?;
            if n == 0 {
                return match body {
                    Body::UntilClose => Ok((status, false, None)),
                    _ => Err(Failure::Other("connection closed before the body's end".to_owned())),
                };
            }
            (at, filled) = (0, n);
        }
    }
}

/// One read: as bytes arrive, or as the pacer says on a paced connection.
async fn read(
    stream: &mut Stream,
    buf: &mut [u8],
    pacer: Option<&mut Pacer>,
) -> std::io::Result<usize> {
    match (pacer, &*stream) {
        (Some(p), Stream::Plain(tcp)) => p.read(tcp, buf).await,
        _ => stream.read(buf).await,
    }
}

/// The reads of one paced response: when the next may be, and when (on which point of
/// the grid, and by the kernel's stamp) its last bytes came.
pub(crate) struct Pacer {
    next: Instant,
    every: Duration,
    /// Points of the grid passed so far (reads there found nothing more).
    passed: u32,
    /// `passed` when bytes were last read: how many points came too early for them.
    early: u32,
    arrived: Option<Instant>,
}

impl Pacer {
    pub(crate) fn new(pace: Pace) -> Pacer {
        let every = pace.every.max(MIN_PACE);
        Pacer { next: pace.first, every, passed: 0, early: 0, arrived: None }
    }

    /// How the response was read, now that it is whole.
    pub(crate) fn paced(&self) -> Paced {
        let done = Instant::now();
        Paced { early: self.early, done, arrived: self.arrived.unwrap_or(done) }
    }

    /// Reads what has arrived once the next read time has come (`sleep` waits for it).
    /// An exchange that ends otherwise (an error, the probe's timeout) drops its connection.
    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        tcp: &TcpStream,
        mut sleep: Pin<&mut Sleep>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        loop {
            if Instant::now() < self.next {
                if sleep.deadline() != self.next {
                    sleep.as_mut().reset(self.next);
                }
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
            // Straight from the socket (non-blocking, as tokio keeps it): tokio's own read
            // would wait for a readiness event the raised mark holds back.
            match recv_stamped(tcp, buf) {
                Ok((n, stamp)) => {
                    self.early = self.passed;
                    if let Some(at) = stamp {
                        self.arrived = Some(arrival(at));
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.passed += 1;
                    // On the shared grid (first + k * every), the next point still ahead.
                    let now = Instant::now();
                    while self.next <= now {
                        self.next += self.every;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    async fn read(&mut self, tcp: &TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut sleep = std::pin::pin!(tokio::time::sleep_until(self.next));
        std::future::poll_fn(|cx| self.poll_read(cx, tcp, sleep.as_mut(), buf)).await
    }
}

/// One read straight from the socket, with the kernel's receive time of the last bytes
/// read when it gives one ([`mark_paced`] asks for it).
fn recv_stamped(tcp: &TcpStream, buf: &mut [u8]) -> std::io::Result<(usize, Option<SystemTime>)> {
    /// Room for one `SCM_TIMESTAMPNS` message, aligned as a `cmsghdr` must be.
    #[repr(align(8))]
    struct Control([u8; 64]);
    let mut control = Control([0; 64]);
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let got = recvmsg::<()>(tcp.as_raw_fd(), &mut iov, Some(&mut control.0), MsgFlags::empty())
        .map_err(std::io::Error::from)?;
    let stamp = got.cmsgs().ok().and_then(|mut all| {
        all.find_map(|c| match c {
            ControlMessageOwned::ScmTimestampns(t) => Some(
                SystemTime::UNIX_EPOCH
                    + Duration::new(
                        u64::try_from(t.tv_sec()).ok()?,
                        u32::try_from(t.tv_nsec()).ok()?,
                    ),
            ),
            _ => None,
        })
    });
    Ok((got.bytes, stamp))
}

/// The monotonic instant of a kernel receive time (wall clock): as long ago as it was. A
/// wall-clock step between the two skews that one answer's time (to now, when stepped back).
fn arrival(at: SystemTime) -> Instant {
    let now = Instant::now();
    let ago = SystemTime::now().duration_since(at).unwrap_or(Duration::ZERO);
    now.checked_sub(ago).unwrap_or(now)
}

/// The low-water mark of a paced connection: more than a page, so only a full receive
/// buffer would wake the runtime (the kernel grows the buffer to fit it).
const RCVLOWAT: libc::c_int = 512 * 1024;

/// Makes `tcp` a paced connection's: epoll reports it readable only once more than a page
/// waits (`SO_RCVLOWAT`), so no answer or piece of one wakes the runtime, and the kernel
/// stamps when each piece came (`SO_TIMESTAMPNS`), so an answer read late is still timed.
pub(crate) fn mark_paced(tcp: &TcpStream) -> std::io::Result<()> {
    set_rcvlowat(tcp, RCVLOWAT)?;
    setsockopt(tcp, sockopt::ReceiveTimestampns, &true).map_err(std::io::Error::from)
}

/// `SO_RCVLOWAT`. No safe binding offers it (nix 0.32, socket2 0.6, rustix 1.1).
fn set_rcvlowat(tcp: &TcpStream, bytes: libc::c_int) -> std::io::Result<()> {
    // SAFETY: the descriptor is the live socket `tcp` borrows for the call; the value is
    // a c_int on this stack frame and its exact size is passed with it.
    let r = unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// A paced plain connection read through h2 (the Status client's): read when the pacing
/// it shares with its client says, as [`Conn::paced`] connections are.
pub(crate) struct PacedTcp {
    tcp: TcpStream,
    /// Set by the client before each call, read by it after.
    pub(crate) pacing: Arc<Mutex<Pacing>>,
    /// PING acknowledgements h2 wrote, sent with the next request ([`PacedTcp::poll_write`]).
    acks: Vec<u8>,
    /// What a read lands in before it is handed to h2: h2 offers its buffer uninitialized,
    /// and zeroing it for every read (8 KiB or more, for a ~200-byte answer) had cost more
    /// instructions than the rest of a fast round's new reads (docs/benchmarks.md).
    landing: Box<[u8]>,
}

/// How much one read of a [`PacedTcp`] takes: a Status answer, its PING and window update
/// are ~200 bytes; more simply takes more reads at the same instant.
const LANDING: usize = 4 * 1024;

/// The most acknowledgement bytes kept back (a few frames of 17 bytes; more is not
/// something a member does, so they go).
const ACKS_CAP: usize = 1024;

/// Whether `bytes` are whole HTTP/2 frames that are all PING acknowledgements.
fn only_ping_acks(mut bytes: &[u8]) -> bool {
    const PING: u8 = 0x6;
    const ACK: u8 = 0x1;
    if bytes.is_empty() {
        return false;
    }
    while let Some(head) = bytes.get(..9) {
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        if head[3] != PING || head[4] & ACK == 0 {
            return false;
        }
        bytes = match bytes.get(9 + len..) {
            Some(rest) => rest,
            None => return false,
        };
    }
    bytes.is_empty()
}

/// The reads of one call on a [`PacedTcp`], and the timer they wait on.
pub(crate) struct Pacing {
    pacer: Pacer,
    /// Dropped when the call ends: left in tokio's timer wheel, it would wake the runtime
    /// once more for nothing (h2 reads until a read finds nothing, which sets it).
    sleep: Option<Pin<Box<Sleep>>>,
}

impl Pacing {
    pub(crate) fn new(pace: Pace) -> Pacing {
        Pacing { pacer: Pacer::new(pace), sleep: None }
    }

    /// How the call's answer was read; its timer goes.
    pub(crate) fn finish(&mut self) -> Paced {
        self.sleep = None;
        self.pacer.paced()
    }
}

impl PacedTcp {
    pub(crate) fn new(tcp: TcpStream) -> std::io::Result<PacedTcp> {
        mark_paced(&tcp)?;
        let pacing = Arc::new(Mutex::new(Pacing::new(Pace::now())));
        Ok(PacedTcp { tcp, pacing, acks: Vec::new(), landing: vec![0; LANDING].into() })
    }

    /// A write that only acknowledges PINGs is kept and sent with the next request, in
    /// one segment. etcd's gRPC server pings after every request it receives (grpc-go's
    /// window estimator): sent alone, each ack cost a send, and a wakeup of the member,
    /// every call (docs/benchmarks.md). An ack then waits at most one round; the
    /// estimator has no deadline, and a keepalive ping is only sent to an idle connection.
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if only_ping_acks(buf) && self.acks.len() < ACKS_CAP {
            self.acks.extend_from_slice(buf);
            return Poll::Ready(Ok(buf.len()));
        }
        while !self.acks.is_empty() {
            let both = [std::io::IoSlice::new(&self.acks), std::io::IoSlice::new(buf)];
            let n = std::task::ready!(Pin::new(&mut self.tcp).poll_write_vectored(cx, &both))?;
            if n == 0 {
                return Poll::Ready(Ok(0));
            }
            let kept = self.acks.len();
            self.acks.drain(..n.min(kept));
            if n > kept {
                return Poll::Ready(Ok(n - kept));
            }
        }
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut read = tokio::io::ReadBuf::new(buf);
        std::future::poll_fn(|cx| self.poll_read(cx, &mut read)).await?;
        Ok(read.filled().len())
    }

    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let Ok(mut pacing) = self.pacing.lock() else {
            return Poll::Ready(Err(std::io::Error::other("pacing poisoned")));
        };
        let Pacing { pacer, sleep } = &mut *pacing;
        let sleep = sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(pacer.next)));
        let room = buf.remaining().min(self.landing.len());
        let landing = &mut self.landing[..room];
        let n = std::task::ready!(pacer.poll_read(cx, &self.tcp, sleep.as_mut(), landing))?;
        buf.put_slice(&landing[..n]);
        Poll::Ready(Ok(()))
    }
}

impl Stream {
    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.write_all(bytes).await,
            Stream::Paced(s) => s.tcp.write_all(bytes).await,
            Stream::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }

    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf).await,
            Stream::Paced(s) => s.read(buf).await,
            Stream::Tls(s) => s.read(buf).await,
        }
    }
}

/// For the HTTP/2 connection of src/io/grpc.rs, which reads and writes through h2.
impl tokio::io::AsyncRead for Stream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            Stream::Paced(s) => s.poll_read(cx, buf),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for Stream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            Stream::Paced(s) => s.poll_write(cx, buf),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_flush(cx),
            Stream::Paced(s) => std::pin::Pin::new(&mut s.tcp).poll_flush(cx),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            Stream::Paced(s) => std::pin::Pin::new(&mut s.tcp).poll_shutdown(cx),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A response head, parsed.
#[derive(Debug, PartialEq)]
enum Head {
    /// A 1xx answer of this many bytes; the real one follows.
    Interim(usize),
    Final {
        status: u16,
        body: Body,
        keep: bool,
        len: usize,
    },
}

/// The head at the start of `bytes`; `None` until it is whole.
fn head(bytes: &[u8]) -> Result<Option<Head>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut r = httparse::Response::new(&mut headers);
    let len = match r.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(Failure::Other(format!("not an HTTP response ({e})"))),
    };
    let status = r.code.unwrap_or(0);
    if (100..200).contains(&status) && status != 101 {
        return Ok(Some(Head::Interim(len)));
    }
    let mut keep = r.version == Some(1);
    let (mut length, mut chunked) = (None, false);
    for h in r.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            let n: usize =
                value.parse().map_err(|_| Failure::Other(format!("Content-Length {value:?}")))?;
            if length.is_some_and(|l| l != n) {
                return Err(Failure::Other("two different Content-Length headers".to_owned()));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // Chunked is the only coding asked for or understood (no decompression).
            if !value.eq_ignore_ascii_case("chunked") {
                return Err(Failure::Other(format!("Transfer-Encoding {value:?} not understood")));
            }
            chunked = true;
        } else if h.name.eq_ignore_ascii_case("connection")
            && value.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"))
        {
            keep = false;
        }
    }
    let body = if status == 204 || status == 304 {
        Body::Length(0)
    } else if chunked {
        Body::Chunked(Chunk::Size { value: 0, digits: 0 })
    } else if let Some(n) = length {
        Body::Length(n)
    } else {
        keep = false;
        Body::UntilClose
    };
    Ok(Some(Head::Final { status, body, keep, len }))
}

/// How much body is still to come, and how its end is known.
#[derive(Debug, PartialEq)]
enum Body {
    /// Content-Length: this many bytes left.
    Length(usize),
    Chunked(Chunk),
    /// Neither: the body ends with the connection.
    UntilClose,
}

/// Where a chunked body stands between reads (RFC 9112 section 7.1).
#[derive(Debug, PartialEq)]
enum Chunk {
    /// Reading a chunk's size in hex.
    Size {
        value: usize,
        digits: usize,
    },
    /// After the size: an extension or whitespace, up to the line's end.
    SizeLine {
        value: usize,
    },
    /// This many bytes of chunk data left.
    Data(usize),
    /// The CRLF after a chunk's data.
    DataEnd {
        cr: bool,
    },
    /// The trailer section: at a line's start, or inside a line.
    Trailer {
        in_line: bool,
    },
    Done,
}

impl Body {
    fn done(&self) -> bool {
        matches!(self, Body::Length(0) | Body::Chunked(Chunk::Done))
    }

    /// Takes the body's bytes from `input` (what was read), passing them on; returns how
    /// many bytes of `input` belong to the response. A chunked body's framing is decoded
    /// byte by byte, its data passed on a slice at a time.
    fn take<F: FnMut(&[u8])>(
        &mut self,
        input: &[u8],
        out: &mut Exchange<'_, F>,
    ) -> Result<usize, Failure> {
        let chunked = match self {
            Body::Length(left) => {
                let n = (*left).min(input.len());
                out.body(&input[..n])?;
                *left -= n;
                return Ok(n);
            }
            Body::UntilClose => {
                out.body(input)?;
                return Ok(input.len());
            }
            Body::Chunked(c) => c,
        };
        let bad = |what: &str| Failure::Other(format!("bad chunked body: {what}"));
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match chunked {
                Chunk::Size { value, digits } => match (b as char).to_digit(16) {
                    Some(d) => {
                        if *digits == 15 {
                            return Err(bad("chunk size too large"));
                        }
                        *value = *value * 16 + d as usize;
                        *digits += 1;
                    }
                    None if *digits == 0 => return Err(bad("no chunk size")),
                    None => {
                        *chunked = Chunk::SizeLine { value: *value };
                        continue; // this byte belongs to the rest of the line
                    }
                },
                Chunk::SizeLine { value } => {
                    if b == b'\n' {
                        *chunked = if *value == 0 {
                            Chunk::Trailer { in_line: false }
                        } else {
                            Chunk::Data(*value)
                        };
                    }
                }
                Chunk::Data(left) => {
                    let n = (*left).min(input.len() - i);
                    out.body(&input[i..i + n])?;
                    *left -= n;
                    if *left == 0 {
                        *chunked = Chunk::DataEnd { cr: false };
                    }
                    i += n;
                    continue;
                }
                Chunk::DataEnd { cr } => match b {
                    b'\r' if !*cr => *cr = true,
                    b'\n' => *chunked = Chunk::Size { value: 0, digits: 0 },
                    _ => return Err(bad("no line end after a chunk")),
                },
                Chunk::Trailer { in_line } => match b {
                    b'\n' if !*in_line => {
                        *chunked = Chunk::Done;
                        return Ok(i + 1);
                    }
                    b'\n' => *in_line = false,
                    b'\r' if !*in_line => {}
                    _ => *in_line = true,
                },
                Chunk::Done => return Ok(i),
            }
            i += 1;
        }
        Ok(i)
    }
}

/// The error for a body over `cap` bytes, with the cap in MiB or KiB (the /health cap is 64 KiB).
pub fn too_large(cap: usize) -> String {
    if cap >= 1024 * 1024 {
        format!("body larger than the {} MiB cap", cap / (1024 * 1024))
    } else {
        format!("body larger than the {} KiB cap", cap / 1024)
    }
}

/// An error and its causes, one line ("connection closed before message completed").
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_url_splits_into_what_connecting_needs() {
        let t = target("http://127.0.0.1:2379").expect("url");
        assert_eq!(
            (t.authority.as_str(), t.host.as_str(), t.port, t.https),
            ("127.0.0.1:2379", "127.0.0.1", 2379, false)
        );
        let t = target("https://[::1]:2379").expect("v6");
        assert_eq!((t.authority.as_str(), t.host.as_str(), t.https), ("[::1]:2379", "::1", true));
        let t = target("https://dlock-etcd-0.dlock-etcd-headless").expect("name");
        assert_eq!(t.port, 443);
        assert!(target("ftp://x:1").is_err() && target("not a url").is_err());
    }

    #[test]
    fn the_cap_is_named_in_the_unit_it_was_set_in() {
        assert_eq!(too_large(16 * 1024 * 1024), "body larger than the 16 MiB cap");
        assert_eq!(too_large(64 * 1024), "body larger than the 64 KiB cap");
    }

    /// Feeds `wire` (a response after its head) to `body` split at every pair of points;
    /// each time the body passed on and the bytes the response used must be the same.
    fn decode_every_split(
        body: impl Fn() -> Body,
        wire: &[u8],
    ) -> Result<(Vec<u8>, usize), String> {
        let whole = decode(body(), &[wire])?;
        for i in 0..=wire.len() {
            for j in i..=wire.len() {
                let split = decode(body(), &[&wire[..i], &wire[i..j], &wire[j..]])?;
                assert_eq!(split, whole, "split at {i} and {j}");
            }
        }
        Ok(whole)
    }

    fn decode(mut body: Body, reads: &[&[u8]]) -> Result<(Vec<u8>, usize), String> {
        let (mut got, mut used) = (Vec::new(), 0);
        let mut each = |b: &[u8]| got.extend_from_slice(b);
        let mut out = Exchange { cap: 1 << 20, each: &mut each, body_seen: 0 };
        for r in reads {
            if body.done() {
                break;
            }
            used += body.take(r, &mut out).map_err(Failure::into_message)?;
        }
        if !body.done() {
            return Err("unfinished".to_owned());
        }
        Ok((got, used))
    }

    fn chunked() -> Body {
        Body::Chunked(Chunk::Size { value: 0, digits: 0 })
    }

    #[test]
    fn a_chunked_body_decodes_the_same_however_it_arrives() {
        let wire = b"4\r\netcd\r\nA;ext=1\r\n_server_h\n\r\n0\r\nX-Trailer: y\r\n\r\nNEXT";
        let (body, used) = decode_every_split(chunked, wire).expect("valid");
        assert_eq!(body, b"etcd_server_h\n");
        assert_eq!(&wire[used..], b"NEXT", "the response ends after its trailers");
        let (body, used) = decode_every_split(chunked, b"0\r\n\r\n").expect("empty");
        assert!(body.is_empty() && used == 5);
    }

    #[test]
    fn a_broken_chunked_body_is_an_error_not_a_hang() {
        for bad in [&b"x\r\n"[..], b"\r\n", b"2\r\nabc\r\n0\r\n\r\n", b"ffffffffffffffff\r\n"] {
            assert!(decode(chunked(), &[bad]).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        // Cut short: not done, and the caller reports the closed connection.
        assert_eq!(decode(chunked(), &[b"5\r\nab"]), Err("unfinished".to_owned()));
    }

    #[test]
    fn a_length_body_takes_its_length_and_no_more() {
        let (body, used) = decode_every_split(|| Body::Length(5), b"hello, next").expect("valid");
        assert_eq!((body.as_slice(), used), (&b"hello"[..], 5));
    }

    #[test]
    fn a_body_over_the_cap_is_an_error() {
        let mut got = 0;
        let mut each = |b: &[u8]| got += b.len();
        let mut out = Exchange { cap: 3, each: &mut each, body_seen: 0 };
        let e = Body::Length(5).take(b"hello", &mut out).map_err(Failure::into_message);
        assert_eq!(e, Err(too_large(3)));
    }

    #[test]
    fn heads_as_members_and_proxies_write_them() {
        let final_head = |bytes: &[u8]| match head(bytes) {
            Ok(Some(Head::Final { status, body, keep, len })) => (status, body, keep, len),
            other => panic!("{other:?}"),
        };
        let h =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(final_head(h), (200, chunked(), true, h.len()));
        let h =
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 17\r\nConnection: close\r\n\r\n";
        assert_eq!(final_head(h), (503, Body::Length(17), false, h.len()));
        // HTTP/1.0, or no length at all: the body ends with the connection, not kept.
        assert!(!final_head(b"HTTP/1.0 200 OK\r\n\r\n").2);
        assert_eq!(final_head(b"HTTP/1.1 200 OK\r\n\r\n").1, Body::UntilClose);
        assert_eq!(final_head(b"HTTP/1.1 204 No Content\r\n\r\n").1, Body::Length(0));
        assert!(matches!(head(b"HTTP/1.1 100 Continue\r\n\r\n"), Ok(Some(Head::Interim(25)))));
        assert!(matches!(head(b"HTTP/1.1 200 OK\r\nContent-Le"), Ok(None)));
        for bad in [
            &b"SSH-2.0-OpenSSH_9.2\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        ] {
            assert!(head(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        let e = tls_config(Some(b"-----BEGIN NOTHING-----\n-----END NOTHING-----\n"), None);
        assert!(e.is_err());
    }

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = (payload.len() as u32).to_be_bytes();
        [&len[1..], &[kind, flags, 0, 0, 0, 0], payload].concat()
    }

    #[test]
    fn only_whole_ping_acknowledgements_wait_for_the_next_request() {
        let ack = frame(0x6, 0x1, &[7; 8]);
        assert!(only_ping_acks(&ack));
        assert!(only_ping_acks(&[ack.clone(), ack.clone()].concat()), "two acks");
        assert!(!only_ping_acks(&frame(0x6, 0x0, &[7; 8])), "a PING of ours is sent at once");
        let headers = frame(0x1, 0x4, &[0x83, 0x86]);
        assert!(!only_ping_acks(&[ack.clone(), headers].concat()), "with a request: sent");
        assert!(!only_ping_acks(&frame(0x4, 0x1, &[])), "a SETTINGS ack is sent at once");
        assert!(!only_ping_acks(&ack[..12]), "a piece of a frame is not held back");
        assert!(!only_ping_acks(&[]));
    }

    /// A member stand-in on 127.0.0.1:0 that answers every GET on one connection with a
    /// chunked body of `pieces`, writing each `gap` after the last (etcd writes its page
    /// 4 KiB at a time); returns its URL.
    async fn slow_member(pieces: Vec<Vec<u8>>, gap: std::time::Duration) -> String {
        use tokio::io::AsyncBufReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move {
            let (socket, _) = listener.accept().await.expect("accept");
            let (read, mut write) = socket.into_split();
            let mut lines = tokio::io::BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if !line.is_empty() {
                    continue; // the request line and headers, up to the blank line
                }
                let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
                write.write_all(head.as_bytes()).await.expect("head");
                for p in &pieces {
                    tokio::time::sleep(gap).await;
                    let chunk = [format!("{:x}\r\n", p.len()).as_bytes(), p, b"\r\n"].concat();
                    write.write_all(&chunk).await.expect("chunk");
                }
                write.write_all(b"0\r\n\r\n").await.expect("end");
            }
        });
        url
    }

    fn pieces() -> Vec<Vec<u8>> {
        (0..8u8).map(|i| vec![b'a' + i; 4096]).collect()
    }

    #[tokio::test]
    async fn a_paced_read_gets_the_whole_body_however_early_it_starts() {
        let url = slow_member(pieces(), std::time::Duration::from_millis(2)).await;
        let conn = Conn::new(&url, None).expect("conn").paced();
        let want: Vec<u8> = pieces().concat();
        for round in 0..3 {
            let mut body = Vec::new();
            let pace = Pace { first: tokio::time::Instant::now(), every: MIN_PACE };
            let (status, paced) = conn
                .get_paced("/metrics", 1 << 20, pace, |b| body.extend_from_slice(b))
                .await
                .expect("answer on the kept connection");
            assert_eq!(status, 200);
            assert!(
                body == want,
                "round {round}: {} bytes, not the {} written",
                body.len(),
                want.len()
            );
            let paced = paced.expect("a plain connection is paced");
            assert!(paced.early > 0, "round {round}: read at once, the body was not whole yet");
        }
        // A plain GET on the paced connection is paced too: its raised mark would hold
        // back the readiness an unpaced read waits for.
        let mut body = Vec::new();
        let got = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            conn.get("/metrics", 1 << 20, |b| body.extend_from_slice(b)),
        )
        .await
        .expect("no hang");
        assert_eq!(got, Ok(200));
        assert!(body == want);
    }

    #[tokio::test]
    async fn a_paced_read_first_read_late_enough_finds_the_body_whole() {
        let url = slow_member(pieces(), std::time::Duration::ZERO).await;
        let conn = Conn::new(&url, None).expect("conn").paced();
        let start = tokio::time::Instant::now();
        let first = start + std::time::Duration::from_millis(200);
        let mut seen = 0;
        let pace = Pace { first, every: MIN_PACE };
        let (status, paced) =
            conn.get_paced("/metrics", 1 << 20, pace, |b| seen += b.len()).await.expect("answer");
        assert_eq!((status, seen), (200, 8 * 4096));
        let paced = paced.expect("paced");
        assert_eq!(paced.early, 0, "whole at its first read: no read found nothing");
        assert!(paced.done >= first, "not read before its first read time");
    }
}
