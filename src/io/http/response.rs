//! A response as it arrives: its head (httparse; a 1xx interim answer skipped) and its
//! body's framing (Content-Length, chunked, or until the connection closes), decoded read by
//! read, so the body can go to the caller straight from the read buffer, a piece at a time
//! ([`Exchange`]: where it goes, and the cap it must stay under). Pure: no socket here, so
//! every way a response can be split across reads is tested byte by byte.

/// One request's caller side: where its body goes and how much may come.
pub(super) struct Exchange<'a, F> {
    cap: usize,
    each: &'a mut F,
    body_seen: usize,
}

impl<'a, F: FnMut(&[u8])> Exchange<'a, F> {
    /// The body goes to `each`, and may be up to `cap` bytes.
    pub(super) fn new(cap: usize, each: &'a mut F) -> Self {
        Exchange { cap, each, body_seen: 0 }
    }

    fn body(&mut self, bytes: &[u8]) -> Result<(), ExchangeFailure> {
        self.body_seen += bytes.len();
        if self.body_seen > self.cap {
            return Err(ExchangeFailure::Other(too_large(self.cap)));
        }
        if !bytes.is_empty() {
            (self.each)(bytes);
        }
        Ok(())
    }
}

/// Why an exchange failed; only the first kind is worth a second try.
#[derive(Debug)]
pub(super) enum ExchangeFailure {
    /// The connection ended before a byte of the response came.
    ClosedBeforeAnswer,
    Other(String),
}

impl ExchangeFailure {
    pub(super) fn into_message(self) -> String {
        match self {
            ExchangeFailure::ClosedBeforeAnswer => {
                "connection closed before the response".to_owned()
            }
            ExchangeFailure::Other(s) => s,
        }
    }
}

/// A response head, parsed.
#[derive(Debug, PartialEq)]
pub(super) enum Head {
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
pub(super) fn head(bytes: &[u8]) -> Result<Option<Head>, ExchangeFailure> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut r = httparse::Response::new(&mut headers);
    let len = match r.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(ExchangeFailure::Other(format!("not an HTTP response ({e})"))),
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
            let n: usize = value
                .parse()
                .map_err(|_| ExchangeFailure::Other(format!("Content-Length {value:?}")))?;
            if length.is_some_and(|l| l != n) {
                return Err(ExchangeFailure::Other(
                    "two different Content-Length headers".to_owned(),
                ));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // Chunked is the only coding asked for or understood (no decompression).
            if !value.eq_ignore_ascii_case("chunked") {
                return Err(ExchangeFailure::Other(format!(
                    "Transfer-Encoding {value:?} not understood"
                )));
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
pub(super) enum Body {
    /// Content-Length: this many bytes left.
    Length(usize),
    Chunked(Chunk),
    /// Neither: the body ends with the connection.
    UntilClose,
}

/// Where a chunked body stands between reads (RFC 9112 section 7.1).
#[derive(Debug, PartialEq)]
pub(super) enum Chunk {
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
    pub(super) fn done(&self) -> bool {
        matches!(self, Body::Length(0) | Body::Chunked(Chunk::Done))
    }

    /// Takes the body's bytes from `input` (what was read), passing them on; returns how
    /// many bytes of `input` belong to the response. A chunked body's framing is decoded
    /// byte by byte, its data passed on a slice at a time.
    pub(super) fn take<F: FnMut(&[u8])>(
        &mut self,
        input: &[u8],
        out: &mut Exchange<'_, F>,
    ) -> Result<usize, ExchangeFailure> {
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
        let bad = |what: &str| ExchangeFailure::Other(format!("bad chunked body: {what}"));
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

#[cfg(test)]
mod tests {
    use super::*;

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
            used += body.take(r, &mut out).map_err(ExchangeFailure::into_message)?;
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
        let e = Body::Length(5).take(b"hello", &mut out).map_err(ExchangeFailure::into_message);
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
}
