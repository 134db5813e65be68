//! The cluster's credentials, made fresh for every run: one CA, the API server's serving
//! certificate, the kubelet's serving and client certificates, the ServiceAccount signing
//! key, static bearer tokens for each component, and kubeconfigs.

use crate::error::{Error, IoContext, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub struct Pki {
    pub dir: PathBuf,
    ca_params: CertificateParams,
    ca_key: KeyPair,
    pub ca_pem: String,
    /// Bearer tokens by identity name (admin, kube-controller-manager, ...).
    pub tokens: Vec<Identity>,
}

#[derive(Clone)]
pub struct Identity {
    pub name: String,
    pub user: String,
    pub groups: Vec<String>,
    pub token: String,
}

fn rc(e: rcgen::Error) -> Error {
    Error::Command(format!("certificate: {e}"))
}

fn random_token() -> String {
    use std::io::Read;
    let mut b = [0u8; 24];
    // /dev/urandom cannot run dry; a short read is an I/O error we report.
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = f.read_exact(&mut b);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Pki {
    pub fn create(dir: &Path) -> Result<Pki> {
        std::fs::create_dir_all(dir).ctx(|| format!("create {}", dir.display()))?;
        let ca_key = KeyPair::generate().map_err(rc)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(rc)?;
        ca_params.distinguished_name.push(DnType::CommonName, "lw-lab cluster CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(rc)?;
        let ca_pem = ca_cert.pem();
        write(&dir.join("ca.crt"), &ca_pem)?;
        // The ServiceAccount token signing key (ES256); the API server verifies with its public half.
        let sa = KeyPair::generate().map_err(rc)?;
        write(&dir.join("sa.key"), &sa.serialize_pem())?;
        write(&dir.join("sa.pub"), &sa.public_key_pem())?;
        Ok(Pki { dir: dir.to_path_buf(), ca_params, ca_key, ca_pem, tokens: Vec::new() })
    }

    /// A leaf certificate signed by the CA, written as `<name>.crt` / `<name>.key`.
    pub fn leaf(
        &self,
        name: &str,
        cn: &str,
        orgs: &[&str],
        dns: &[&str],
        ips: &[IpAddr],
        server: bool,
    ) -> Result<(PathBuf, PathBuf)> {
        let key = KeyPair::generate().map_err(rc)?;
        let mut p = CertificateParams::new(dns.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .map_err(rc)?;
        p.distinguished_name.push(DnType::CommonName, cn);
        for o in orgs {
            p.distinguished_name.push(DnType::OrganizationName, *o);
        }
        for ip in ips {
            p.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        p.extended_key_usages = if server {
            vec![ExtendedKeyUsagePurpose::ServerAuth]
        } else {
            vec![ExtendedKeyUsagePurpose::ClientAuth]
        };
        let issuer = Issuer::from_params(&self.ca_params, &self.ca_key);
        let cert = p.signed_by(&key, &issuer).map_err(rc)?;
        let (c, k) = (self.dir.join(format!("{name}.crt")), self.dir.join(format!("{name}.key")));
        write(&c, &cert.pem())?;
        write(&k, &key.serialize_pem())?;
        Ok((c, k))
    }

    pub fn add_identity(&mut self, name: &str, user: &str, groups: &[&str]) -> Identity {
        let id = Identity {
            name: name.into(),
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            token: random_token(),
        };
        self.tokens.push(id.clone());
        id
    }

    /// `--token-auth-file`: token,user,uid,"group1,group2".
    pub fn write_token_file(&self) -> Result<PathBuf> {
        let mut s = String::new();
        for t in &self.tokens {
            s.push_str(&format!("{},{},{},\"{}\"\n", t.token, t.user, t.user, t.groups.join(",")));
        }
        let p = self.dir.join("tokens.csv");
        write(&p, &s)?;
        Ok(p)
    }

    pub fn write_kubeconfig(&self, path: &Path, server: &str, id: &Identity) -> Result<()> {
        use base64::Engine;
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes());
        let s = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: lw-lab\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: lw-lab\n  context:\n    cluster: lw-lab\n    user: {user}\ncurrent-context: lw-lab\n",
            user = id.name,
            token = id.token
        );
        write(path, &s)
    }
}

pub fn write(path: &Path, s: &str) -> Result<()> {
    std::fs::write(path, s).ctx(|| format!("write {}", path.display()))
}
