//! The client side of TLS for https:// members: built once from the `--cacert`, `--cert`
//! and `--key` PEMs and shared by every connection (the HTTP/1.1 probes' and, with `h2`
//! offered by ALPN, the Status client's). Apart from the rest of the HTTP code because only
//! an https:// member runs any of it.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

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
                let c = c.map_err(|e| format!("the CA bundle: {e}"))?;
                roots.add(c).map_err(|e| format!("the CA bundle: {e}"))?;
            }
            if roots.is_empty() {
                return Err("the CA bundle: no certificate in the file".to_owned());
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
                .map_err(|e| format!("the client certificate: {e}"))?;
            let key =
                PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("the client key: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the client certificate and key: {e}"))?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        let e = tls_config(Some(b"-----BEGIN NOTHING-----\n-----END NOTHING-----\n"), None);
        assert!(e.is_err());
    }
}
