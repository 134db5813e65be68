//! The images the nodes run, without a registry: each is an OCI archive imported into
//! every node's containerd under the reference the manifests name, unmodified, and pinned.
//! etcd's and the pause image are built here (umoci) from binaries built from their
//! sources at the pinned versions; others come from OCI layouts (`lw-lab --image
//! REF=LAYOUT:TAG`, e.g. the one `make image` writes).

use crate::error::{Error, IoContext, Result};
use crate::proc::run;
use std::path::{Path, PathBuf};

/// An image as an OCI archive (a tarred image layout) that every node's containerd imports.
#[derive(Clone, Debug)]
pub struct Archive {
    /// The reference pods name it by, unmodified (e.g. `gcr.io/etcd-development/etcd:v3.6.14`).
    pub reference: String,
    pub tar: PathBuf,
    /// The tag the layout's index gives the image (`org.opencontainers.image.ref.name`).
    pub tag: String,
    /// Its manifest's digest (`sha256:...`), when the layout's index says it: the image is
    /// also named `repo@digest`, so that a pod may name it pinned, as a pushed image's
    /// digest pins it on GKE.
    pub digest: Option<String>,
}

/// An image to serve from an OCI layout: `REF=LAYOUT[:TAG]` (tag default `latest`).
#[derive(Clone, Debug)]
pub struct OciSource {
    pub reference: String,
    pub layout: PathBuf,
    pub tag: String,
}

impl std::str::FromStr for OciSource {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (reference, rest) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected REF=LAYOUT[:TAG], e.g. europe-west1-docker.pkg.dev/lw-lab/dlock/leaderwatch:0.1.0=target/image/oci:0.1.0"))?;
        let (layout, tag) = match rest.rsplit_once(':') {
            Some((l, t)) if !t.contains('/') => (l, t),
            _ => (rest, "latest"),
        };
        if reference.is_empty() || layout.is_empty() {
            return Err(format!("{s:?}: empty image reference or layout path"));
        }
        Ok(OciSource { reference: reference.into(), layout: layout.into(), tag: tag.into() })
    }
}

fn umoci(args: &[&str]) -> Result<()> {
    let out = std::process::Command::new("umoci")
        .args(args)
        .output()
        .ctx(|| "run umoci (Debian's umoci; make kube-tools installs it)".into())?;
    if !out.status.success() {
        return Err(Error::Command(format!(
            "umoci {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The tag part of a reference (`repo:tag`; a digest reference has none).
fn split_ref(reference: &str) -> (&str, &str) {
    match reference.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo, tag),
        _ => (reference, "latest"),
    }
}

/// A one-layer image of `rootfs` as an OCI layout, with the config's entrypoint, cmd,
/// env and user (as upstream's image has them), tarred for `ctr images import`.
fn build(dir: &Path, reference: &str, rootfs: &Path, config: &[&str]) -> Result<Archive> {
    let (_, tag) = split_ref(reference);
    let safe: String = reference
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() || ch == '.' || ch == '-' { ch } else { '_' })
        .collect();
    let layout = dir.join(format!("{safe}.oci"));
    let _ = std::fs::remove_dir_all(&layout);
    let image = format!("{}:{tag}", layout.display());
    umoci(&["init", "--layout", &layout.display().to_string()])?;
    umoci(&["new", "--image", &image])?;
    umoci(&["insert", "--image", &image, &rootfs.display().to_string(), "/"])?;
    let mut args = vec!["config", "--image", &image, "--os", "linux", "--architecture", "amd64"];
    args.extend_from_slice(config);
    umoci(&args)?;
    umoci(&["gc", "--layout", &layout.display().to_string()])?;
    tar(&layout, &dir.join(format!("{safe}.tar")), reference, tag)
}

fn tar(layout: &Path, tar: &Path, reference: &str, tag: &str) -> Result<Archive> {
    let out = std::process::Command::new("tar")
        .arg("-C")
        .arg(layout)
        .arg("-cf")
        .arg(tar)
        .arg(".")
        .output()
        .ctx(|| "run tar".into())?;
    if !out.status.success() {
        return Err(Error::Command(format!(
            "tar {}: {}",
            layout.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let digest = manifest_digest(layout, tag);
    Ok(Archive { reference: reference.into(), tar: tar.to_path_buf(), tag: tag.into(), digest })
}

/// The digest of the manifest the layout's index names `tag` (or its only one).
fn manifest_digest(layout: &Path, tag: &str) -> Option<String> {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).ok()?).ok()?;
    let manifests = index["manifests"].as_array()?;
    let named = manifests
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"].as_str() == Some(tag));
    let m = named.or(if manifests.len() == 1 { manifests.first() } else { None })?;
    m["digest"].as_str().map(str::to_owned)
}

pub const ETCD_IMAGE: &str = "gcr.io/etcd-development/etcd:v3.6.14";

const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
const GROUP: &str = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n";

/// The images the nodes hold, as archives under `dir`: etcd's (from the etcd binaries
/// built here, under the upstream reference: distroless static upstream, so no shell
/// here either), the pause image (Kubernetes' pause.c, built by make kube-tools, under
/// the reference the kubelet and containerd of this version name), and any OCI layouts
/// given (`--image`, e.g. the one `make image` writes).
pub fn prepare(
    dir: &Path,
    tools_bin: &Path,
    node_bin: &Path,
    oci: &[OciSource],
) -> Result<Vec<Archive>> {
    std::fs::create_dir_all(dir).ctx(|| format!("create {}", dir.display()))?;
    let root = dir.join("etcd-rootfs");
    for d in ["usr/local/bin", "etc", "tmp", "var", "home/nonroot", "root"] {
        std::fs::create_dir_all(root.join(d)).ctx(|| format!("create image dir {d}"))?;
    }
    for b in ["etcd", "etcdctl"] {
        let dst = root.join("usr/local/bin").join(b);
        std::fs::copy(tools_bin.join(b), &dst).ctx(|| format!("copy {b} into the etcd image"))?;
    }
    std::fs::write(root.join("etc/passwd"), PASSWD).ctx(|| "write image passwd".into())?;
    std::fs::write(root.join("etc/group"), GROUP).ctx(|| "write image group".into())?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777))
        .ctx(|| "chmod image tmp".into())?;
    // Upstream: CMD ["/usr/local/bin/etcd"], no ENTRYPOINT, no USER (root unless the pod
    // says otherwise).
    let mut images = vec![build(
        dir,
        ETCD_IMAGE,
        &root,
        &[
            "--config.cmd",
            "/usr/local/bin/etcd",
            "--config.env",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ],
    )?];
    let pause = node_bin.join("pause");
    let version = std::process::Command::new(&pause)
        .arg("-v")
        .output()
        .ctx(|| format!("run {} -v", pause.display()))?;
    // "pause.c v3.10.1"
    let version = String::from_utf8_lossy(&version.stdout)
        .split_whitespace()
        .nth(1)
        .map(|v| v.trim_start_matches('v').to_string())
        .ok_or_else(|| Error::Command(format!("{} -v: no version", pause.display())))?;
    let proot = dir.join("pause-rootfs");
    std::fs::create_dir_all(&proot).ctx(|| format!("create {}", proot.display()))?;
    std::fs::copy(&pause, proot.join("pause")).ctx(|| "copy pause into its image".into())?;
    // As build/pause/Dockerfile: ENTRYPOINT ["/pause"], USER 65535:65535.
    images.push(build(
        dir,
        &format!("registry.k8s.io/pause:{version}"),
        &proot,
        &["--config.entrypoint", "/pause", "--config.user", "65535:65535"],
    )?);
    for src in oci {
        let safe: String = src
            .reference
            .chars()
            .map(|ch| if ch.is_ascii_alphanumeric() || ch == '.' || ch == '-' { ch } else { '_' })
            .collect();
        images.push(tar(&src.layout, &dir.join(format!("{safe}.tar")), &src.reference, &src.tag)?);
    }
    Ok(images)
}

/// Imports an archive into a node's containerd (namespace k8s.io, the kubelet's), names
/// it by its reference, and pins it so that image GC keeps it: no registry is reachable,
/// a collected image could not come back.
pub async fn import(ctr: &Path, sock: &Path, a: &Archive) -> Result<()> {
    let ctr = ctr.display().to_string();
    let sock = sock.display().to_string();
    let (repo, _) = split_ref(&a.reference);
    let tar = a.tar.display().to_string();
    run(&ctr, &["-a", &sock, "-n", "k8s.io", "images", "import", "--base-name", repo, &tar])
        .await?;
    let imported = format!("{repo}:{}", a.tag);
    if imported != a.reference {
        run(
            &ctr,
            &["-a", &sock, "-n", "k8s.io", "images", "tag", "--force", &imported, &a.reference],
        )
        .await?;
    }
    let mut names = vec![a.reference.clone()];
    if let Some(d) = &a.digest {
        let pinned = format!("{repo}@{d}");
        run(&ctr, &["-a", &sock, "-n", "k8s.io", "images", "tag", "--force", &imported, &pinned])
            .await?;
        names.push(pinned);
    }
    for name in &names {
        run(
            &ctr,
            &[
                "-a",
                &sock,
                "-n",
                "k8s.io",
                "images",
                "label",
                name,
                "io.cri-containerd.pinned=pinned",
            ],
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::OciSource;

    #[test]
    fn image_arguments_name_a_reference_a_layout_and_a_tag() {
        let s: OciSource =
            "europe-west1-docker.pkg.dev/lw-lab/dlock/leaderwatch:0.1.0=target/image/oci:0.1.0"
                .parse()
                .expect("parse");
        assert_eq!(
            (s.reference.as_str(), s.layout.to_str(), s.tag.as_str()),
            (
                "europe-west1-docker.pkg.dev/lw-lab/dlock/leaderwatch:0.1.0",
                Some("target/image/oci"),
                "0.1.0"
            )
        );
        let s: OciSource = "x:1=/tmp/oci".parse().expect("parse");
        assert_eq!((s.layout.to_str(), s.tag.as_str()), (Some("/tmp/oci"), "latest"));
        // A colon in a directory name is not a tag.
        let s: OciSource = "x:1=/tmp/a:b/oci".parse().expect("parse");
        assert_eq!((s.layout.to_str(), s.tag.as_str()), (Some("/tmp/a:b/oci"), "latest"));
        assert!("target/image/oci:0.1.0".parse::<OciSource>().is_err(), "no REF=");
        assert!("=target/image/oci".parse::<OciSource>().is_err(), "empty REF");
    }
}
