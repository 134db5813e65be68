//! `--cacert/--cert/--key` on both sides (HTTP and gRPC) against a real etcd cluster
//! serving clients over TLS with client-certificate auth.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use leaderwatch::io::local::{LocalCluster, LocalOptions};
use leaderwatch::io::probe::{ProbeConfig, TlsFiles};
use leaderwatch::io::round::{Sampler, probers};
use leaderwatch::model::clock::{Clock, SystemClock};
use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, SanType,
};

struct Pki {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    other_ca: PathBuf,
}

fn ca(dir: &Path, name: &str) -> (Issuer<'static, KeyPair>, PathBuf) {
    let key = KeyPair::generate().expect("key");
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = p.self_signed(&key).expect("ca");
    let path = dir.join(format!("{name}.pem"));
    std::fs::write(&path, cert.pem()).expect("write ca");
    (Issuer::new(p, key), path)
}

/// A CA, and one certificate for 127.0.0.1 usable as server and as client.
fn pki(dir: &Path) -> Pki {
    let (issuer, ca_path) = ca(dir, "ca");
    let (_, other_ca) = ca(dir, "other-ca");
    let key = KeyPair::generate().expect("key");
    let mut p = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    p.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
    p.extended_key_usages =
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let cert = p.signed_by(&key, &issuer).expect("sign");
    let (cert_path, key_path) = (dir.join("member.pem"), dir.join("member-key.pem"));
    std::fs::write(&cert_path, cert.pem()).expect("write cert");
    std::fs::write(&key_path, key.serialize_pem()).expect("write key");
    Pki { ca: ca_path, cert: cert_path, key: key_path, other_ca }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_members_are_probed_over_https_and_grpc_with_client_certs() {
    let _one = support::one_cluster_at_a_time().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = pki(dir.path());
    let files = TlsFiles {
        cacert: Some(pki.ca.clone()),
        cert: Some(pki.cert.clone()),
        key: Some(pki.key.clone()),
    };
    let cluster =
        LocalCluster::start(LocalOptions { tls: Some(files.clone()), ..LocalOptions::default() })
            .await
            .unwrap_or_else(|e| panic!("TLS cluster: {e}"));
    assert!(cluster.members().iter().all(|m| m.url.starts_with("https://")));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let timeout = Duration::from_secs(2);

    // With CA, cert and key: every part of every probe succeeds.
    let cfg = ProbeConfig { timeout, tls: files, with_metrics: true };
    let mut s =
        Sampler::new(probers(&cluster.members(), &cfg, &clock).expect("probers"), clock.clone());
    let r = s.round().await;
    for o in &r.observations {
        assert_eq!(o.error_summary(), "", "{}", o.member);
        assert!(o.status.ok().is_some_and(|st| st.leader_id != 0), "status over gRPC+TLS");
        assert!(o.health.ok().is_some_and(|h| h.healthy), "health over HTTPS");
        assert_eq!(o.metrics.ok().and_then(|m| m.leader_changes_seen_total), Some(1.0));
    }

    // Without a client certificate the members refuse: recorded as errors, no panic.
    let cfg = ProbeConfig {
        timeout,
        tls: TlsFiles { cacert: Some(pki.ca.clone()), cert: None, key: None },
        with_metrics: true,
    };
    let mut s =
        Sampler::new(probers(&cluster.members(), &cfg, &clock).expect("probers"), clock.clone());
    let r = s.round().await;
    assert!(r.observations.iter().all(|o| !o.reachable() && !o.error_summary().is_empty()));

    // A CA that did not sign the members: the server certificate is rejected.
    let cfg = ProbeConfig {
        timeout,
        tls: TlsFiles {
            cacert: Some(pki.other_ca.clone()),
            cert: Some(pki.cert.clone()),
            key: Some(pki.key.clone()),
        },
        with_metrics: true,
    };
    let mut s =
        Sampler::new(probers(&cluster.members(), &cfg, &clock).expect("probers"), clock.clone());
    let r = s.round().await;
    assert!(r.observations.iter().all(|o| !o.reachable()), "untrusted server certificate accepted");
}

#[test]
fn bad_tls_files_are_rejected_before_any_round() {
    let dir = tempfile::tempdir().expect("tempdir");
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").expect("write");
    let cfg = ProbeConfig {
        tls: TlsFiles { cacert: Some(junk), cert: None, key: None },
        ..ProbeConfig::default()
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let members = leaderwatch::model::member::parse_members(&["m0=https://127.0.0.1:1".to_owned()])
        .expect("member");
    let err = probers(&members, &cfg, &clock).err().expect("junk CA must be refused").to_string();
    assert!(err.contains("junk.pem") && err.contains("not a PEM"), "{err}");
}
