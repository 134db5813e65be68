//! The Status connection's bytes as h2 reads and writes them (src/io/grpc.rs): a plain
//! connection is the same [`PacedTcp`] the HTTP/1.1 exchange reads, with the two things only
//! h2 needs on top ([`H2PacedTcp`]): the acknowledgement of the PING etcd sends after every
//! request is held back and goes with the next request, in one `writev`, and reads land in
//! a buffer of their own, because h2 offers its read buffer uninitialized. Over TLS, rustls
//! reads as bytes arrive. Apart because it exists only for h2's `AsyncRead`/`AsyncWrite`.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::io::http::connect::{Endpoint, TcpOrTls, open};
use crate::io::http::pace::PacedTcp;
use crate::io::http::tls::TlsConfig;

/// The Status connection, as h2 drives it.
pub(crate) enum H2Stream {
    /// A plain connection, read when its pace says.
    Paced(H2PacedTcp),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl H2Stream {
    /// A new connection to `e` (`tls` needed for an https:// member), and the paced socket
    /// the caller sets the pace of before each call and learns from after it (`None` over TLS).
    pub(crate) async fn open(
        e: &Endpoint,
        tls: Option<&TlsConfig>,
    ) -> Result<(H2Stream, Option<Arc<Mutex<PacedTcp>>>), String> {
        Ok(match open(e, tls).await? {
            TcpOrTls::Tcp(tcp) => {
                let paced = PacedTcp::new(tcp).map_err(|err| format!("{}: {err}", e.authority))?;
                let paced = Arc::new(Mutex::new(paced));
                (H2Stream::Paced(H2PacedTcp::new(paced.clone())), Some(paced))
            }
            TcpOrTls::Tls(tls) => (H2Stream::Tls(tls), None),
        })
    }
}

/// A [`PacedTcp`] as h2 reads and writes it. The socket is shared with the Status client,
/// which starts and finishes each call's pacing while h2 owns this end.
pub(crate) struct H2PacedTcp {
    paced: Arc<Mutex<PacedTcp>>,
    /// PING acknowledgements h2 wrote, sent with the next request ([`H2PacedTcp::poll_write`]).
    acks: Vec<u8>,
    /// What a read lands in before it is handed to h2: h2 offers its buffer uninitialized,
    /// and zeroing it for every read (8 KiB or more, for a ~200-byte answer) had cost more
    /// instructions than the rest of a fast round's new reads (docs/benchmarks.md).
    landing: Box<[u8]>,
}

/// How much one read of an [`H2PacedTcp`] takes: a Status answer, its PING and window update
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

fn poisoned() -> std::io::Error {
    std::io::Error::other("paced connection poisoned")
}

impl H2PacedTcp {
    fn new(paced: Arc<Mutex<PacedTcp>>) -> H2PacedTcp {
        H2PacedTcp { paced, acks: Vec::new(), landing: vec![0; LANDING].into_boxed_slice() }
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
        let Ok(mut paced) = self.paced.lock() else { return Poll::Ready(Err(poisoned())) };
        let tcp = paced.tcp();
        while !self.acks.is_empty() {
            let both = [std::io::IoSlice::new(&self.acks), std::io::IoSlice::new(buf)];
            let n = std::task::ready!(Pin::new(&mut *tcp).poll_write_vectored(cx, &both))?;
            if n == 0 {
                return Poll::Ready(Ok(0));
            }
            let kept = self.acks.len();
            self.acks.drain(..n.min(kept));
            if n > kept {
                return Poll::Ready(Ok(n - kept));
            }
        }
        Pin::new(tcp).poll_write(cx, buf)
    }

    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let Ok(mut paced) = self.paced.lock() else { return Poll::Ready(Err(poisoned())) };
        let room = buf.remaining().min(self.landing.len());
        let landing = &mut self.landing[..room];
        let n = std::task::ready!(paced.poll_read(cx, landing))?;
        buf.put_slice(&landing[..n]);
        Poll::Ready(Ok(()))
    }

    /// The socket's own flush or shutdown (acks still kept wait for the next request).
    fn poll_tcp(
        &mut self,
        cx: &mut Context<'_>,
        op: fn(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<std::io::Result<()>>,
    ) -> Poll<std::io::Result<()>> {
        let Ok(mut paced) = self.paced.lock() else { return Poll::Ready(Err(poisoned())) };
        op(Pin::new(paced.tcp()), cx)
    }
}

impl AsyncRead for H2Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            H2Stream::Paced(s) => s.poll_read(cx, buf),
            H2Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for H2Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            H2Stream::Paced(s) => s.poll_write(cx, buf),
            H2Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            H2Stream::Paced(s) => s.poll_tcp(cx, AsyncWrite::poll_flush),
            H2Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            H2Stream::Paced(s) => s.poll_tcp(cx, AsyncWrite::poll_shutdown),
            H2Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
