//! The Maintenance `Status` RPC, the one gRPC call a probe makes, over one HTTP/2
//! connection per member that the probing task drives itself (the h2 crate, polled in
//! place): no connection task, no request buffer, no balancer between the call and the
//! socket. Through etcd-client's channel a Status crossed three tasks each way and cost
//! more than the rest of a fast round (docs/benchmarks.md). The canary and the disruptors
//! keep etcd-client: they run a few calls a second, not one per member per round. A plain
//! connection is paced (src/io/http/pace.rs `PacedTcp`): the answer is read when the round
//! says, and timed to when the kernel received it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use ::http as http_types;
use bytes::{Buf, Bytes, BytesMut};
use h2::client::{Connection, SendRequest};

use crate::io::http::connect::Endpoint;
use crate::io::http::h2_stream::H2Stream;
use crate::io::http::pace::{Pace, Paced, PacedTcp};
use crate::io::http::response::too_large;
use crate::io::http::tls::TlsConfig;
use crate::model::observation::Status;

/// The method's path, as etcd's `rpc.proto` names it.
const STATUS_PATH: &str = "/etcdserverpb.Maintenance/Status";
/// A gRPC message is framed by one flag byte (compressed or not) and a 4-byte length; an
/// empty `StatusRequest` is that frame alone.
const EMPTY_REQUEST: &[u8] = &[0, 0, 0, 0, 0];
/// A `StatusResponse` is ~100 bytes; more than this is not an answer to Status.
const RESPONSE_CAP: usize = 64 * 1024;
/// Windows wide enough that no answer of this size ever waits for a window update; what
/// is received is handed back to the member as it is read.
const WINDOW: u32 = 1 << 20;

/// One member's Status client: its address, TLS settings (offering `h2` by ALPN, as gRPC
/// over TLS requires) and the connection kept between calls. One call at a time: a
/// member's next probe starts only once its last one ended.
pub struct StatusClient {
    endpoint: Endpoint,
    uri: http_types::Uri,
    tls: Option<TlsConfig>,
    /// Boxed: the connection is large and would be moved with every probe's future.
    kept: std::sync::Mutex<Option<Box<H2>>>,
}

/// An HTTP/2 connection between calls: the handle requests are sent on and the
/// connection itself, which only the call in progress polls.
struct H2 {
    send: SendRequest<Bytes>,
    conn: Connection<H2Stream, Bytes>,
    /// The paced socket under h2 (a plain connection's): its pace is set before each call.
    paced: Option<Arc<Mutex<PacedTcp>>>,
}

impl StatusClient {
    /// For the member at `url` (`tls` needed for an https:// member).
    pub fn new(url: &str, tls: Option<&TlsConfig>) -> Result<StatusClient, String> {
        let endpoint = Endpoint::parse(url)?;
        if endpoint.https && tls.is_none() {
            return Err(format!("{url}: an https:// member needs the TLS settings"));
        }
        let scheme = if endpoint.https { "https" } else { "http" };
        let uri = format!("{scheme}://{}{STATUS_PATH}", endpoint.authority)
            .parse()
            .map_err(|e| format!("{url}: {e}"))?;
        let tls = tls.map(|c| {
            let mut c = (**c).clone();
            c.alpn_protocols = vec![b"h2".to_vec()];
            Arc::new(c)
        });
        Ok(StatusClient { endpoint, uri, tls, kept: std::sync::Mutex::new(None) })
    }

    /// One Status call. A connection that fails is dropped (the next call opens a new
    /// one); a kept one that fails before the answer began (the member restarted or said
    /// GOAWAY) is replaced once at once: Status changes nothing, so asking again is safe.
    /// The answer is read as `pace` says on a plain connection (as it comes over TLS); how
    /// it was read comes with it (`None` over TLS, or when no answer came).
    pub async fn status(&self, pace: Pace) -> (Result<Status, String>, Option<Paced>) {
        // Boxed for the same reason: the probe's future stays small.
        Box::pin(self.call(pace)).await
    }

    async fn call(&self, pace: Pace) -> (Result<Status, String>, Option<Paced>) {
        let kept = self.kept.lock().ok().and_then(|mut k| k.take());
        let (mut h2, reused) = match kept {
            Some(h2) => (h2, true),
            None => match self.connect().await {
                Ok(h2) => (h2, false),
                Err(e) => return (Err(e), None),
            },
        };
        let answer = match h2.call(&self.uri, pace).await {
            Err(CallFailure::BeforeAnswer(_)) if reused => match self.connect().await {
                Ok(new) => {
                    h2 = new;
                    h2.call(&self.uri, pace).await
                }
                Err(e) => return (Err(e), None),
            },
            other => other,
        };
        let paced = h2.paced();
        match answer {
            Ok(status) => {
                if let Ok(mut k) = self.kept.lock() {
                    *k = Some(h2);
                }
                (Ok(status), paced)
            }
            Err(CallFailure::Rpc(message)) => {
                // An answer, not a broken connection: keep it.
                if let Ok(mut k) = self.kept.lock() {
                    *k = Some(h2);
                }
                (Err(message), paced)
            }
            Err(CallFailure::BeforeAnswer(e) | CallFailure::Broken(e)) => (Err(e), None),
        }
    }

    async fn connect(&self) -> Result<Box<H2>, String> {
        let (stream, paced) = H2Stream::open(&self.endpoint, self.tls.as_ref()).await?;
        let (send, conn) = h2::client::Builder::new()
            .enable_push(false)
            .initial_window_size(WINDOW)
            .initial_connection_window_size(WINDOW)
            .handshake::<_, Bytes>(stream)
            .await
            .map_err(|e| format!("HTTP/2 with {}: {e}", self.endpoint.authority))?;
        Ok(Box::new(H2 { send, conn, paced }))
    }
}

/// Why a call failed, which decides what becomes of its connection.
#[derive(Debug)]
enum CallFailure {
    /// The connection failed before any of the answer came: worth one more try.
    BeforeAnswer(String),
    /// The connection failed or broke the protocol mid-answer: dropped.
    Broken(String),
    /// The member answered with a gRPC error: the connection is fine.
    Rpc(String),
}

impl H2 {
    /// How the last call's answer was read (a paced connection's).
    fn paced(&self) -> Option<Paced> {
        self.paced.as_ref()?.lock().ok().map(|mut p| p.finish())
    }

    /// Sends the request and reads the answer while polling the connection in this task.
    async fn call(&mut self, uri: &http_types::Uri, pace: Pace) -> Result<Status, CallFailure> {
        if let Some(Ok(mut p)) = self.paced.as_ref().map(|p| p.lock()) {
            p.start(pace);
        }
        let H2 { send, conn, .. } = self;
        let exchange = async {
            let before = |e: h2::Error| CallFailure::BeforeAnswer(format!("HTTP/2: {e}"));
            std::future::poll_fn(|cx| send.poll_ready(cx)).await.map_err(before)?;
            let request = http_types::Request::post(uri.clone())
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .header("user-agent", concat!("leaderwatch/", env!("CARGO_PKG_VERSION")))
                .body(())
                .map_err(|e| CallFailure::Broken(format!("request: {e}")))?;
            let (response, mut body) = send.send_request(request, false).map_err(before)?;
            body.send_data(Bytes::from_static(EMPTY_REQUEST), true).map_err(before)?;
            let response = response.await.map_err(before)?;
            read_answer(response).await
        };
        let drive = PolledCall { exchange: std::pin::pin!(exchange), conn };
        match drive.await {
            Some(answer) => answer,
            None => {
                Err(CallFailure::BeforeAnswer("HTTP/2: the member closed the connection".into()))
            }
        }
    }
}

/// The call, with the connection polled beside it: frames are written and read, pings
/// and settings acknowledged, while the call waits. `None`: the connection ended first.
struct PolledCall<'a, F> {
    exchange: Pin<&'a mut F>,
    conn: &'a mut Connection<H2Stream, Bytes>,
}

impl<F: Future<Output = Result<Status, CallFailure>>> Future for PolledCall<'_, F> {
    type Output = Option<Result<Status, CallFailure>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The connection first: what it reads this time is what the call then sees.
        let ended = match Pin::new(&mut *self.conn).poll(cx) {
            Poll::Ready(Ok(())) => Some(None),
            Poll::Ready(Err(e)) => Some(Some(e)),
            Poll::Pending => None,
        };
        if let Poll::Ready(answer) = self.exchange.as_mut().poll(cx) {
            return Poll::Ready(Some(answer));
        }
        match ended {
            None => Poll::Pending,
            Some(None) => Poll::Ready(None),
            Some(Some(e)) => {
                Poll::Ready(Some(Err(CallFailure::BeforeAnswer(format!("HTTP/2: {e}")))))
            }
        }
    }
}

/// The answer's head, its one message and its trailers (or a trailers-only error).
async fn read_answer(
    response: http_types::Response<h2::RecvStream>,
) -> Result<Status, CallFailure> {
    let broken = |e: h2::Error| CallFailure::Broken(format!("HTTP/2: {e}"));
    if response.status() != http_types::StatusCode::OK {
        return Err(CallFailure::Broken(format!(
            "HTTP {} to a gRPC call",
            response.status().as_u16()
        )));
    }
    // A trailers-only answer: an error, with no message.
    grpc_status(response.headers())?;
    let mut body = response.into_body();
    let mut message = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(broken)?;
        let _ = body.flow_control().release_capacity(chunk.len());
        if message.len() + chunk.len() > RESPONSE_CAP {
            return Err(CallFailure::Broken(too_large(RESPONSE_CAP)));
        }
        message.extend_from_slice(&chunk);
    }
    match body.trailers().await.map_err(broken)? {
        Some(trailers) => grpc_status(&trailers)?,
        None => return Err(CallFailure::Broken("gRPC answer without grpc-status".to_owned())),
    }
    decode(&message).map_err(CallFailure::Broken)
}

/// `grpc-status` (and `grpc-message`) of a header block: absent or 0 is fine, else the
/// error as etcd-client wrote it (`Unavailable: etcdserver: ...`).
fn grpc_status(headers: &http_types::HeaderMap) -> Result<(), CallFailure> {
    let Some(code) = headers.get("grpc-status") else { return Ok(()) };
    let code = code
        .to_str()
        .ok()
        .and_then(|c| c.parse::<i32>().ok())
        .ok_or_else(|| CallFailure::Broken(format!("grpc-status {code:?} is not a number")))?;
    if code == 0 {
        return Ok(());
    }
    let message = headers.get("grpc-message").map(|m| percent_decode(m.as_bytes()));
    Err(CallFailure::Rpc(format!(
        "{:?}: {}",
        tonic::Code::from_i32(code),
        message.unwrap_or_default()
    )))
}

/// gRPC percent-encodes `grpc-message`.
fn percent_decode(raw: &[u8]) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match (raw[i], raw.get(i + 1).copied().and_then(hex), raw.get(i + 2).copied().and_then(hex))
        {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The body: one uncompressed gRPC message holding a `StatusResponse`.
fn decode(body: &[u8]) -> Result<Status, String> {
    let mut b = body;
    if b.len() < 5 {
        return Err(format!("gRPC answer of {} bytes has no message", b.len()));
    }
    if b[0] != 0 {
        return Err("gRPC answer compressed, though no compression was offered".to_owned());
    }
    b.advance(1);
    let len = b.get_u32() as usize;
    if b.len() != len {
        return Err(format!("gRPC message says {len} bytes, {} came", b.len()));
    }
    let r = <StatusResponse as prost::Message>::decode(b)
        .map_err(|e| format!("StatusResponse: {e}"))?;
    Ok(Status {
        member_id: r.header.map(|h| h.member_id).unwrap_or_default(),
        leader_id: r.leader,
        raft_term: r.raft_term,
        raft_index: r.raft_index,
        raft_applied_index: r.raft_applied_index,
        db_size_bytes: r.db_size,
        version: r.version,
        errors: r.errors,
    })
}

/// The fields of etcd's `StatusResponse` (api/etcdserverpb/rpc.proto, 3.6) a probe
/// records; the others are skipped as unknown fields.
#[derive(Clone, PartialEq, prost::Message)]
struct StatusResponse {
    #[prost(message, optional, tag = "1")]
    header: Option<ResponseHeader>,
    #[prost(string, tag = "2")]
    version: String,
    #[prost(int64, tag = "3")]
    db_size: i64,
    #[prost(uint64, tag = "4")]
    leader: u64,
    #[prost(uint64, tag = "5")]
    raft_index: u64,
    #[prost(uint64, tag = "6")]
    raft_term: u64,
    #[prost(uint64, tag = "7")]
    raft_applied_index: u64,
    #[prost(string, repeated, tag = "8")]
    errors: Vec<String>,
}

/// etcd's `ResponseHeader`: only who answered.
#[derive(Clone, PartialEq, prost::Message)]
struct ResponseHeader {
    #[prost(uint64, tag = "2")]
    member_id: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut b = vec![0];
        b.extend_from_slice(&(message.len() as u32).to_be_bytes());
        b.extend_from_slice(message);
        b
    }

    #[test]
    fn a_status_response_decodes_and_unknown_fields_are_skipped() {
        // etcd-client's own type encodes it, with the 3.6 fields this module skips.
        let full = etcd_client::proto::PbStatusResponse {
            header: Some(etcd_client::proto::PbResponseHeader {
                cluster_id: 7,
                member_id: 0x8e9e05c52164694d,
                revision: 3,
                raft_term: 4,
            }),
            version: "3.6.14".to_owned(),
            db_size: 20480,
            leader: 0x8e9e05c52164694d,
            raft_index: 12,
            raft_term: 4,
            raft_applied_index: 12,
            errors: vec!["memberID:1 alarm:NOSPACE ".to_owned()],
            db_size_in_use: 16384,
            is_learner: false,
            ..Default::default()
        };
        let s = decode(&framed(&prost::Message::encode_to_vec(&full))).unwrap();
        assert_eq!(s.member_id, 0x8e9e05c52164694d);
        assert_eq!(
            (s.leader_id, s.raft_term, s.raft_index, s.raft_applied_index),
            (0x8e9e05c52164694d, 4, 12, 12)
        );
        assert_eq!((s.db_size_bytes, s.version.as_str()), (20480, "3.6.14"));
        assert_eq!(s.errors, vec!["memberID:1 alarm:NOSPACE ".to_owned()]);
    }

    #[test]
    fn a_body_that_is_not_one_message_is_refused() {
        assert!(decode(&[]).unwrap_err().contains("no message"));
        assert!(decode(&[1, 0, 0, 0, 0]).unwrap_err().contains("compressed"));
        assert!(decode(&[0, 0, 0, 0, 9, 1]).unwrap_err().contains("says 9 bytes, 1 came"));
        assert!(decode(&framed(&[0xff])).unwrap_err().contains("StatusResponse"));
    }

    #[test]
    fn grpc_errors_read_as_etcd_client_wrote_them() {
        let mut h = http_types::HeaderMap::new();
        assert!(grpc_status(&h).is_ok());
        h.insert("grpc-status", "0".parse().unwrap());
        assert!(grpc_status(&h).is_ok());
        h.insert("grpc-status", "14".parse().unwrap());
        h.insert("grpc-message", "etcdserver%3A no leader".parse().unwrap());
        match grpc_status(&h) {
            Err(CallFailure::Rpc(m)) => assert_eq!(m, "Unavailable: etcdserver: no leader"),
            other => panic!("{other:?}"),
        }
        h.insert("grpc-status", "x".parse().unwrap());
        assert!(matches!(grpc_status(&h), Err(CallFailure::Broken(_))));
    }

    #[test]
    fn percent_decoding_leaves_a_stray_percent_alone() {
        assert_eq!(percent_decode(b"a%20b%zz%4"), "a b%zz%4");
    }
}
