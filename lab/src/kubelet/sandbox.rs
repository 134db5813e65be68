//! A pod's sandbox: its network namespace and address, the kubelet-managed /etc/hosts,
//! resolv.conf and hostname, and its volumes resolved to host directories (a PVC's PV
//! directory, emptyDir, ConfigMap/Secret/projected files with the ServiceAccount token),
//! with fsGroup applied as the kubelet applies it.

use super::Shared;
use crate::error::{Error, IoContext, KubeContext, Result};
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, Secret, ServiceAccount,
};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub struct Sandbox {
    pub netns: String,
    pub ip: Ipv4Addr,
    pub dir: PathBuf,
    pub hosts: PathBuf,
    pub resolv: PathBuf,
    pub hostname: String,
    pub hostname_file: PathBuf,
    pub volumes: BTreeMap<String, PathBuf>,
}

pub async fn create(sh: &Shared, client: &Client, pod: &Pod) -> Result<Sandbox> {
    let ns = pod.namespace().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let spec = pod.spec.as_ref().ok_or_else(|| Error::Command("pod has no spec".into()))?;
    let dir = sh.dir.join(format!("{ns}_{}_{uid}", pod.name_any()));
    std::fs::create_dir_all(&dir).ctx(|| format!("create {}", dir.display()))?;
    let volumes = volumes(sh, client, pod, &dir).await?;
    let (netns, ip) = sh.net.add_pod().await?;
    let hostname = spec.hostname.clone().unwrap_or_else(|| pod.name_any());
    let mut hosts = String::from(
        "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n",
    );
    match &spec.subdomain {
        Some(sub) => hosts.push_str(&format!(
            "{ip}\t{hostname}.{sub}.{ns}.svc.{}\t{hostname}\n",
            crate::dns::DOMAIN
        )),
        None => hosts.push_str(&format!("{ip}\t{hostname}\n")),
    }
    let d = crate::dns::DOMAIN;
    let resolv_s =
        format!("search {ns}.svc.{d} svc.{d} {d}\nnameserver {}\noptions ndots:5\n", sh.dns_ip);
    let (h, r, hn) = (dir.join("etc-hosts"), dir.join("resolv.conf"), dir.join("hostname"));
    crate::pki::write(&h, &hosts)?;
    crate::pki::write(&r, &resolv_s)?;
    crate::pki::write(&hn, &format!("{hostname}\n"))?;
    Ok(Sandbox { netns, ip, dir, hosts: h, resolv: r, hostname, hostname_file: hn, volumes })
}

async fn volumes(
    sh: &Shared,
    client: &Client,
    pod: &Pod,
    dir: &Path,
) -> Result<BTreeMap<String, PathBuf>> {
    let ns = pod.namespace().unwrap_or_default();
    let spec = pod.spec.as_ref().ok_or_else(|| Error::Command("pod has no spec".into()))?;
    let fs_group = spec.security_context.as_ref().and_then(|s| s.fs_group).map(|g| g as u32);
    let mut out = BTreeMap::new();
    for v in spec.volumes.iter().flatten() {
        let path = if let Some(pvc) = &v.persistent_volume_claim {
            let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
            let c =
                claims.get(&pvc.claim_name).await.kctx(|| format!("get PVC {}", pvc.claim_name))?;
            let pv_name = c
                .spec
                .and_then(|s| s.volume_name)
                .ok_or_else(|| Error::Command(format!("PVC {} is not bound", pvc.claim_name)))?;
            let pvs: Api<PersistentVolume> = Api::all(client.clone());
            let pv = pvs.get(&pv_name).await.kctx(|| format!("get PV {pv_name}"))?;
            let p = PathBuf::from(pv.spec.and_then(|s| s.host_path).map(|h| h.path).ok_or_else(
                || Error::Command(format!("PV {pv_name} is not a directory-backed volume")),
            )?);
            apply_fs_group(&p, fs_group)?;
            p
        } else if v.empty_dir.is_some() {
            let p = dir.join("volumes").join(&v.name);
            std::fs::create_dir_all(&p).ctx(|| format!("create {}", p.display()))?;
            apply_fs_group(&p, fs_group)?;
            p
        } else if let Some(hp) = &v.host_path {
            PathBuf::from(&hp.path)
        } else {
            let p = dir.join("volumes").join(&v.name);
            std::fs::create_dir_all(&p).ctx(|| format!("create {}", p.display()))?;
            let mut files: Vec<(String, Vec<u8>, Option<i32>)> = Vec::new();
            let default_mode;
            if let Some(cm) = &v.config_map {
                default_mode = cm.default_mode;
                files.extend(
                    config_map(client, &ns, &cm.name, cm.items.as_deref(), cm.optional).await?,
                );
            } else if let Some(s) = &v.secret {
                default_mode = s.default_mode;
                let name = s.secret_name.clone().unwrap_or_default();
                files.extend(secret(client, &ns, &name, s.items.as_deref(), s.optional).await?);
            } else if let Some(pr) = &v.projected {
                default_mode = pr.default_mode;
                for src in pr.sources.iter().flatten() {
                    if let Some(t) = &src.service_account_token {
                        let sa =
                            spec.service_account_name.clone().unwrap_or_else(|| "default".into());
                        let token = token(
                            client,
                            &ns,
                            &sa,
                            pod,
                            t.audience.clone(),
                            t.expiration_seconds.unwrap_or(3607),
                        )
                        .await?;
                        files.push((t.path.clone(), token.into_bytes(), None));
                    }
                    if let Some(cm) = &src.config_map {
                        files.extend(
                            config_map(client, &ns, &cm.name, cm.items.as_deref(), cm.optional)
                                .await?,
                        );
                    }
                    if let Some(s) = &src.secret {
                        files.extend(
                            secret(client, &ns, &s.name, s.items.as_deref(), s.optional).await?,
                        );
                    }
                    if let Some(d) = &src.downward_api {
                        for it in d.items.iter().flatten() {
                            if let Some(f) = &it.field_ref {
                                let val = super::env::field(pod, &f.field_path, "", "")
                                    .unwrap_or_default();
                                files.push((it.path.clone(), val.into_bytes(), it.mode));
                            }
                        }
                    }
                }
            } else if let Some(d) = &v.downward_api {
                default_mode = d.default_mode;
                for it in d.items.iter().flatten() {
                    if let Some(f) = &it.field_ref {
                        let val = super::env::field(pod, &f.field_path, "", "").unwrap_or_default();
                        files.push((it.path.clone(), val.into_bytes(), it.mode));
                    }
                }
            } else {
                return Err(Error::Command(format!(
                    "volume {}: a type the process kubelet does not mount",
                    v.name
                )));
            }
            for (rel, data, mode) in files {
                let f = p.join(&rel);
                if let Some(parent) = f.parent() {
                    std::fs::create_dir_all(parent)
                        .ctx(|| format!("create {}", parent.display()))?;
                }
                std::fs::write(&f, &data).ctx(|| format!("write {}", f.display()))?;
                let m = mode.or(default_mode).unwrap_or(0o644) as u32;
                std::fs::set_permissions(&f, std::fs::Permissions::from_mode(m))
                    .ctx(|| format!("chmod {}", f.display()))?;
                if let Some(g) = fs_group {
                    let _ = nix::unistd::chown(
                        &f,
                        Some(nix::unistd::Uid::from_raw(0)),
                        Some(nix::unistd::Gid::from_raw(g)),
                    );
                }
            }
            p
        };
        out.insert(v.name.clone(), path);
    }
    let _ = sh;
    Ok(out)
}

/// fsGroup with fsGroupChangePolicy OnRootMismatch: nothing to do when the volume's root
/// already has the group and the setgid bit; otherwise every file gets the group and g+rw.
fn apply_fs_group(root: &Path, fs_group: Option<u32>) -> Result<()> {
    let Some(g) = fs_group else { return Ok(()) };
    let md = std::fs::metadata(root).ctx(|| format!("stat {}", root.display()))?;
    if md.gid() == g && md.mode() & 0o2070 == 0o2070 {
        return Ok(());
    }
    fn walk(p: &Path, g: u32) -> std::io::Result<()> {
        let md = std::fs::symlink_metadata(p)?;
        if md.file_type().is_symlink() {
            return Ok(());
        }
        nix::unistd::chown(p, None, Some(nix::unistd::Gid::from_raw(g)))
            .map_err(std::io::Error::from)?;
        let mut mode = md.mode() & 0o7777 | 0o060;
        if md.is_dir() {
            mode |= 0o2010;
            for e in std::fs::read_dir(p)? {
                walk(&e?.path(), g)?;
            }
        }
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
    }
    walk(root, g).ctx(|| format!("apply fsGroup {g} to {}", root.display()))
}

type Items<'a> = Option<&'a [k8s_openapi::api::core::v1::KeyToPath]>;

fn pick(data: BTreeMap<String, Vec<u8>>, items: Items) -> Vec<(String, Vec<u8>, Option<i32>)> {
    match items {
        Some(items) => items
            .iter()
            .filter_map(|it| data.get(&it.key).map(|d| (it.path.clone(), d.clone(), it.mode)))
            .collect(),
        None => data.into_iter().map(|(k, v)| (k, v, None)).collect(),
    }
}

async fn config_map(
    client: &Client,
    ns: &str,
    name: &str,
    items: Items<'_>,
    optional: Option<bool>,
) -> Result<Vec<(String, Vec<u8>, Option<i32>)>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    match api.get_opt(name).await.kctx(|| format!("get configmap {name}"))? {
        Some(cm) => {
            let mut data: BTreeMap<String, Vec<u8>> =
                cm.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_bytes())).collect();
            data.extend(cm.binary_data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)));
            Ok(pick(data, items))
        }
        None if optional == Some(true) => Ok(vec![]),
        None => Err(Error::Command(format!("configmap \"{name}\" not found"))),
    }
}

async fn secret(
    client: &Client,
    ns: &str,
    name: &str,
    items: Items<'_>,
    optional: Option<bool>,
) -> Result<Vec<(String, Vec<u8>, Option<i32>)>> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    match api.get_opt(name).await.kctx(|| format!("get secret {name}"))? {
        Some(s) => {
            Ok(pick(s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect(), items))
        }
        None if optional == Some(true) => Ok(vec![]),
        None => Err(Error::Command(format!("secret \"{name}\" not found"))),
    }
}

/// A bound ServiceAccount token through TokenRequest, as the kubelet gets one. The API
/// server extends kubelet-requested 3607 s tokens to a year, so no refresh is needed here.
async fn token(
    client: &Client,
    ns: &str,
    sa: &str,
    pod: &Pod,
    audience: Option<String>,
    expiration: i64,
) -> Result<String> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let body = json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": audience.map(|a| vec![a]), "expirationSeconds": expiration,
                 "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.name_any(), "uid": pod.metadata.uid}},
    });
    let tr: k8s_openapi::api::authentication::v1::TokenRequest = api
        .create_subresource("token", sa, &PostParams::default(), &body)
        .await
        .kctx(|| format!("TokenRequest for serviceaccount {ns}/{sa}"))?;
    tr.status
        .map(|s| s.token)
        .ok_or_else(|| Error::Command("TokenRequest returned no token".into()))
}
