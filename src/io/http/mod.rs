//! The probes' HTTP: a GET of one member path (`/metrics`, `/health`) over one HTTP/1.1
//! connection kept open between probes, and the bytes under the Status RPC's HTTP/2
//! connection (src/io/grpc.rs). No redirects, no decompression, no proxy: a member answers
//! itself or not at all. Split by what each part owns:
//!
//! - [`exchange`]: one GET over a kept-alive HTTP/1.1 connection ([`exchange::Http1Conn`]),
//!   its body handed to the caller from one reused read buffer: no connection task, no body
//!   channel, no copies (through hyper's client the HTTP layers cost more than the page's
//!   parsing: docs/benchmarks.md);
//! - [`response`]: a response's head (httparse) and its body's framing (Content-Length,
//!   chunked, or until close), decoded as the bytes arrive;
//! - [`pace`]: when a probe's plain connection is read ([`pace::PacedTcp`], the one paced
//!   socket of both the HTTP/1.1 exchange and h2): at its caller's instants, never as bytes
//!   arrive, each answer timed by the kernel's receive stamp;
//! - [`h2_stream`]: the Status connection as h2 reads and writes it: a paced socket whose
//!   PING acknowledgements go with the next request, or TLS;
//! - [`connect`]: a member's address ([`connect::Endpoint`]) and a new connection to it,
//!   TCP or TLS over it;
//! - [`tls`]: the client side of TLS, built once, for https:// members.

pub mod connect;
pub mod exchange;
pub mod h2_stream;
pub mod pace;
pub mod response;
pub mod tls;
