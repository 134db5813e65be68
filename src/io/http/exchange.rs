//! One GET of a member path over one HTTP/1.1 connection kept open between probes
//! ([`Http1Conn`]): the request written whole, the response read into one reused buffer
//! and its body handed to the caller from there ([`crate::io::http::response`] decodes it),
//! a kept connection the member closed before answering replaced once. Written here, not
//! through hyper's client: no connection task, no body channel, no copies, and a probe's
//! plain connection read only when its pace says ([`PacedTcp`]).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::io::http::connect::{Endpoint, TcpOrTls, open};
use crate::io::http::pace::{Pace, Paced, PacedTcp};
use crate::io::http::response::{Body, Exchange, ExchangeFailure, Head, head};
use crate::io::http::tls::TlsConfig;

/// One kept-alive connection to one member, used by one request at a time (a member's next
/// probe starts only once its last one ended). A request that fails or is abandoned (its
/// timeout) drops the connection; the next one opens a new one.
pub struct Http1Conn {
    endpoint: Endpoint,
    tls: Option<TlsConfig>,
    kept: std::sync::Mutex<Option<Kept>>,
    /// See [`Http1Conn::paced`].
    paced: bool,
}

/// An open connection between requests, with its read buffer (reused: a page is read
/// into the same bytes every round).
struct Kept {
    stream: Http1Stream,
    buf: Vec<u8>,
}

/// The bytes of one HTTP/1.1 connection.
enum Http1Stream {
    /// Read as bytes arrive: a connection no probe reads (the local cluster's checks).
    Plain(TcpStream),
    /// Read when its pace says: every plain connection a probe reads.
    Paced(PacedTcp),
    /// Read as bytes arrive: rustls decrypts what it reads.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// How much of a response the read buffer takes at once; a `/metrics` page arrives in a
/// few reads of this size (etcd writes it 4 KiB at a time).
const READ_BUF: usize = 32 * 1024;
/// A response's status line and headers must fit in this (etcd's are ~150 bytes).
const HEAD_CAP: usize = 16 * 1024;

impl Http1Conn {
    /// For the member at `url` (`http://host:port` or `https://...`; `tls` needed for https).
    pub fn new(url: &str, tls: Option<TlsConfig>) -> Result<Http1Conn, String> {
        let endpoint = Endpoint::parse(url)?;
        if endpoint.https && tls.is_none() {
            return Err(format!("{url}: an https:// member needs the TLS settings"));
        }
        Ok(Http1Conn { endpoint, tls, kept: std::sync::Mutex::new(None), paced: false })
    }

    /// Reads responses on a plain connection when [`Http1Conn::get_paced`] says, never when
    /// bytes arrive ([`PacedTcp`]). etcd writes its ~160 KB page 4 KiB at a time over
    /// 5-20 ms: woken for each piece, the sampler slept and woke ~50 times a full round,
    /// and each wakeup costs more than the bytes it reads (docs/benchmarks.md).
    pub fn paced(mut self) -> Http1Conn {
        self.paced = true;
        self
    }

    async fn connect(&self) -> Result<Kept, String> {
        let stream = match open(&self.endpoint, self.tls.as_ref()).await? {
            TcpOrTls::Tcp(tcp) if self.paced => Http1Stream::Paced(
                PacedTcp::new(tcp).map_err(|e| format!("{}: {e}", self.endpoint.authority))?,
            ),
            TcpOrTls::Tcp(tcp) => Http1Stream::Plain(tcp),
            TcpOrTls::Tls(tls) => Http1Stream::Tls(tls),
        };
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

    /// [`Http1Conn::get`] on a [`Http1Conn::paced`] connection, read as `pace` says; also
    /// returns how the response was read (`None` on a TLS connection, read as its bytes
    /// arrive).
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
            self.endpoint.authority,
            env!("CARGO_PKG_VERSION")
        );
        let kept = self.kept.lock().ok().and_then(|mut k| k.take());
        let (mut conn, reused) = match kept {
            Some(k) => (k, true),
            None => (self.connect().await?, false),
        };
        let mut exchange = Exchange::new(cap, &mut each);
        let (status, keep, paced) =
            match conn.exchange(request.as_bytes(), &mut exchange, pace).await {
                Ok(done) => done,
                // The member closed a kept connection between requests (a restart, its idle
                // timeout) before answering: a GET is safe to send again, once, on a new one.
                Err(ExchangeFailure::ClosedBeforeAnswer) if reused => {
                    conn = self.connect().await?;
                    conn.exchange(request.as_bytes(), &mut exchange, pace)
                        .await
                        .map_err(ExchangeFailure::into_message)?
                }
                Err(e) => return Err(e.into_message()),
            };
        if keep && let Ok(mut k) = self.kept.lock() {
            *k = Some(conn);
        }
        Ok((status, paced))
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
    ) -> Result<(u16, bool, Option<Paced>), ExchangeFailure> {
        let closed = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::ConnectionAborted => ExchangeFailure::ClosedBeforeAnswer,
            _ => ExchangeFailure::Other(format!("send: {e}")),
        };
        self.stream.write_all(request).await.map_err(closed)?;
        if self.buf.len() < READ_BUF {
            self.buf.resize(READ_BUF, 0);
        }
        let Kept { stream, buf } = self;
        stream.start(pace);
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
                    return Err(ExchangeFailure::Other(format!(
                        "response head over {} KiB",
                        HEAD_CAP / 1024
                    )));
                }
                None => {}
            }
            let n = match stream.read(&mut buf[filled..]).await {
                Ok(n) => n,
                Err(e) if filled == 0 => return Err(closed(e)),
                Err(e) => return Err(ExchangeFailure::Other(format!("read: {e}"))),
            };
            if n == 0 {
                return Err(if filled == 0 {
                    ExchangeFailure::ClosedBeforeAnswer
                } else {
                    ExchangeFailure::Other("connection closed inside the response head".to_owned())
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
                let paced = stream.finish();
                return Ok((status, keep, paced));
            }
            let n = stream
                .read(&mut buf[..])
                .await
                .map_err(|e| ExchangeFailure::Other(format!("read: {e}")))?;
            if n == 0 {
                return match body {
                    Body::UntilClose => Ok((status, false, None)),
                    _ => Err(ExchangeFailure::Other(
                        "connection closed before the body's end".to_owned(),
                    )),
                };
            }
            (at, filled) = (0, n);
        }
    }
}

impl Http1Stream {
    /// Paces the reads of the next answer (on a paced connection, `pace` then given).
    fn start(&mut self, pace: Option<Pace>) {
        if let (Http1Stream::Paced(s), Some(pace)) = (self, pace) {
            s.start(pace);
        }
    }

    /// How the answer was read, now that it is whole (on a paced connection).
    fn finish(&mut self) -> Option<Paced> {
        match self {
            Http1Stream::Paced(s) => Some(s.finish()),
            _ => None,
        }
    }

    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Http1Stream::Plain(s) => s.write_all(bytes).await,
            Http1Stream::Paced(s) => s.tcp().write_all(bytes).await,
            Http1Stream::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }

    /// One read: as bytes arrive, or as the pace says on a paced connection.
    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Http1Stream::Plain(s) => s.read(buf).await,
            Http1Stream::Paced(s) => s.read(buf).await,
            Http1Stream::Tls(s) => s.read(buf).await,
        }
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
    use crate::io::http::pace::MIN_PACE;

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
        let conn = Http1Conn::new(&url, None).expect("conn").paced();
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
        let conn = Http1Conn::new(&url, None).expect("conn").paced();
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
