//! When a probe's plain connection is read: the one way to pace a read. Every plain
//! connection a probe reads (`/metrics`, `/health`, and the Status connection under h2) is a
//! [`PacedTcp`]: its socket's low-water mark is raised above a page, so no arriving byte
//! wakes the runtime, and it is read only when its caller's [`Pace`] says (first at one
//! instant, then on the grid `first + k * every`), straight from the socket, with the
//! kernel's receive stamp of the last bytes read. A round's answers so take one wakeup, not
//! one per answer or per 4 KiB piece etcd writes, and each is still timed to when it came
//! (docs/benchmarks.md, the fifth and sixth passes). Its own file because the exchange and
//! h2 both read through it and it is where the syscalls of a round are decided.

use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// When a paced connection's socket is read: first at `first`, then every `every` until
/// the response is whole. Probes of several members given the same pace read their
/// answers in the same wakeups.
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
pub(crate) const MIN_PACE: Duration = Duration::from_millis(1);

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

/// A paced plain connection: the socket, where the reads of its current answer stand,
/// and the timer they wait on. Its caller marks each answer's start ([`PacedTcp::start`])
/// and end ([`PacedTcp::finish`]); the HTTP/1.1 exchange reads it through
/// [`PacedTcp::read`], h2 through [`crate::io::http::h2_stream`].
pub(crate) struct PacedTcp {
    tcp: TcpStream,
    pacer: Pacer,
    /// Made at the answer's first wait and reset for the next ones; dropped when the
    /// answer ends: left in tokio's timer wheel, it would wake the runtime once more for
    /// nothing (h2 reads until a read finds nothing, which sets it).
    sleep: Option<Pin<Box<Sleep>>>,
}

impl PacedTcp {
    /// Marks `tcp` paced ([`mark_paced`]); until [`PacedTcp::start`] it is read at once,
    /// then every [`MIN_PACE`] (h2's handshake).
    pub(crate) fn new(tcp: TcpStream) -> std::io::Result<PacedTcp> {
        mark_paced(&tcp)?;
        Ok(PacedTcp { tcp, pacer: Pacer::new(Pace::now()), sleep: None })
    }

    /// The reads of a new answer, as `pace` says.
    pub(crate) fn start(&mut self, pace: Pace) {
        self.pacer = Pacer::new(pace);
        self.sleep = None;
    }

    /// How the answer was read, now that it is whole; its timer goes.
    pub(crate) fn finish(&mut self) -> Paced {
        self.sleep = None;
        self.pacer.paced()
    }

    /// The socket, for writes (never paced: a request goes when it is made).
    pub(crate) fn tcp(&mut self) -> &mut TcpStream {
        &mut self.tcp
    }

    /// Reads what has arrived once the next read time has come. An exchange that ends
    /// otherwise (an error, the probe's timeout) drops its connection, timer and all.
    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        self.pacer.poll_read(cx, &self.tcp, &mut self.sleep, buf)
    }

    pub(crate) async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_read(cx, buf)).await
    }
}

/// The reads of one paced answer: when the next may be, and when (on which point of the
/// grid, and by the kernel's stamp) its last bytes came.
struct Pacer {
    next: Instant,
    every: Duration,
    /// Points of the grid passed so far (reads there found nothing more).
    passed: u32,
    /// `passed` when bytes were last read: how many points came too early for them.
    early: u32,
    arrived: Option<Instant>,
}

impl Pacer {
    fn new(pace: Pace) -> Pacer {
        let every = pace.every.max(MIN_PACE);
        Pacer { next: pace.first, every, passed: 0, early: 0, arrived: None }
    }

    fn paced(&self) -> Paced {
        let done = Instant::now();
        Paced { early: self.early, done, arrived: self.arrived.unwrap_or(done) }
    }

    /// Reads what has arrived once the next read time has come (`sleep` waits for it,
    /// made at the first wait).
    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        tcp: &TcpStream,
        sleep: &mut Option<Pin<Box<Sleep>>>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        loop {
            if Instant::now() < self.next {
                let sleep =
                    sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(self.next)));
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
/// Once per connection, when it opens.
fn mark_paced(tcp: &TcpStream) -> std::io::Result<()> {
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
