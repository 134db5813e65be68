//! A member's address, split once from its URL ([`Endpoint`]), and a new connection to it:
//! TCP, or TLS over it for an https:// member ([`open`]). What is then done with the bytes
//! (an HTTP/1.1 exchange, h2, pacing) is the other files' business; this one only connects.

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use crate::io::http::tls::TlsConfig;

/// One member's base URL, split once.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// `host:port` as the Host header carries it.
    pub(crate) authority: String,
    /// For connecting and for TLS's server name: no brackets around an IPv6 address.
    host: String,
    port: u16,
    pub(crate) https: bool,
}

impl Endpoint {
    /// A member's `http://host:port` or `https://...`.
    pub(crate) fn parse(url: &str) -> Result<Endpoint, String> {
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
        Ok(Endpoint { authority, host, port, https })
    }
}

/// A connection just opened.
pub(crate) enum TcpOrTls {
    Tcp(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// A new connection to `e`: TLS over TCP for an https:// member (`tls` then given).
pub(crate) async fn open(e: &Endpoint, tls: Option<&TlsConfig>) -> Result<TcpOrTls, String> {
    let tcp = TcpStream::connect((e.host.as_str(), e.port))
        .await
        .map_err(|err| format!("connect to {}: {err}", e.authority))?;
    // Requests are small and whole: no reason to wait for more before sending.
    let _ = tcp.set_nodelay(true);
    Ok(match (tls, e.https) {
        (Some(cfg), true) => {
            let name = ServerName::try_from(e.host.clone())
                .map_err(|err| format!("{}: not a TLS server name ({err})", e.host))?;
            let tls = tokio_rustls::TlsConnector::from(cfg.clone())
                .connect(name, tcp)
                .await
                .map_err(|err| format!("TLS with {}: {err}", e.authority))?;
            TcpOrTls::Tls(Box::new(tls))
        }
        _ => TcpOrTls::Tcp(tcp),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_url_splits_into_what_connecting_needs() {
        let e = Endpoint::parse("http://127.0.0.1:2379").expect("url");
        assert_eq!(
            (e.authority.as_str(), e.host.as_str(), e.port, e.https),
            ("127.0.0.1:2379", "127.0.0.1", 2379, false)
        );
        let e = Endpoint::parse("https://[::1]:2379").expect("v6");
        assert_eq!((e.authority.as_str(), e.host.as_str(), e.https), ("[::1]:2379", "::1", true));
        let e = Endpoint::parse("https://dlock-etcd-0.dlock-etcd-headless").expect("name");
        assert_eq!(e.port, 443);
        assert!(Endpoint::parse("ftp://x:1").is_err() && Endpoint::parse("not a url").is_err());
    }
}
