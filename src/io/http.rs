//! The probes' HTTP: a GET of one member path (`/metrics`, `/health`) over one HTTP/1.1
//! connection kept open between probes (hyper's connection API, no pool), TLS only for an
//! https:// member. No redirects, no decompression, no proxy: a member answers itself or
//! not at all. Built here rather than through reqwest: a full round spent most of its CPU
//! in wakeups and layers, and a sampler of http:// members never touches TLS code or
//! certificate stores (their pages counted in its resident memory). docs/benchmarks.md.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

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
struct Target {
    /// `host:port` as the Host header carries it.
    authority: String,
    /// For connecting and for TLS's server name: no brackets around an IPv6 address.
    host: String,
    port: u16,
    https: bool,
}

fn target(url: &str) -> Result<Target, String> {
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
    sender: std::sync::Mutex<Option<SendRequest<Empty<Bytes>>>>,
}

impl Conn {
    /// For the member at `url` (`http://host:port` or `https://...`; `tls` needed for https).
    pub fn new(url: &str, tls: Option<TlsConfig>) -> Result<Conn, String> {
        let target = target(url)?;
        if target.https && tls.is_none() {
            return Err(format!("{url}: an https:// member needs the TLS settings"));
        }
        Ok(Conn { target, tls, sender: std::sync::Mutex::new(None) })
    }

    async fn connect(&self) -> Result<SendRequest<Empty<Bytes>>, String> {
        let t = &self.target;
        let tcp = tokio::net::TcpStream::connect((t.host.as_str(), t.port))
            .await
            .map_err(|e| format!("connect to {}: {e}", t.authority))?;
        // Requests are small and whole: no reason to wait for more before sending.
        let _ = tcp.set_nodelay(true);
        match (&self.tls, t.https) {
            (Some(cfg), true) => {
                let name = ServerName::try_from(t.host.clone())
                    .map_err(|e| format!("{}: not a TLS server name ({e})", t.host))?;
                let tls = tokio_rustls::TlsConnector::from(cfg.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS with {}: {e}", t.authority))?;
                handshake(TokioIo::new(tls)).await
            }
            _ => handshake(TokioIo::new(tcp)).await,
        }
    }

    /// `GET path`: hands each piece of the body to `each` as it arrives and returns the
    /// status. A body over `cap` bytes is an error, not a truncation.
    pub async fn get(
        &self,
        path: &str,
        cap: usize,
        mut each: impl FnMut(&[u8]),
    ) -> Result<u16, String> {
        let kept = self.sender.lock().ok().and_then(|mut s| s.take());
        let mut sender = match kept {
            Some(mut s) => match s.ready().await {
                Ok(()) => s,
                // Closed by the member (a restart, its idle timeout): a new connection.
                Err(_) => self.connect().await?,
            },
            None => self.connect().await?,
        };
        let req = hyper::Request::get(path)
            .header(hyper::header::HOST, &self.target.authority)
            .header(hyper::header::USER_AGENT, concat!("leaderwatch/", env!("CARGO_PKG_VERSION")))
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("request: {e}"))?;
        let resp = sender.send_request(req).await.map_err(|e| error_chain(&e))?;
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut read = 0;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| error_chain(&e))?;
            if let Some(data) = frame.data_ref() {
                read += data.len();
                if read > cap {
                    return Err(too_large(cap));
                }
                each(data);
            }
        }
        // The whole body was read: the connection can carry the next request.
        if let Ok(mut s) = self.sender.lock() {
            *s = Some(sender);
        }
        Ok(status)
    }
}

async fn handshake<I>(io: I) -> Result<SendRequest<Empty<Bytes>>, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = http1::handshake(io).await.map_err(|e| error_chain(&e))?;
    // Ends when the sender is dropped or the member closes the connection.
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
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

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        let e = tls_config(Some(b"-----BEGIN NOTHING-----\n-----END NOTHING-----\n"), None);
        assert!(e.is_err());
    }
}
