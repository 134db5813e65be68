//! The images the process kubelet can "pull": each maps an image reference from a manifest,
//! unmodified, to a root filesystem assembled here from locally built binaries of the same
//! version. The etcd image is distroless static upstream (no shell): so is this one.
//! Other images come from OCI image layouts (`lw-lab --image REF=LAYOUT:TAG`, e.g. the one
//! `make image` writes): their root filesystem is unpacked by umoci, as a node's runtime
//! unpacks a pulled image, and their config gives the entrypoint, cmd, env and user.

use crate::error::{Error, IoContext, Result};
use std::path::{Path, PathBuf};

pub struct Image {
    pub reference: String,
    pub rootfs: PathBuf,
    /// The image's ENTRYPOINT and CMD, used when a container gives no command/args.
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    /// The image's USER as uid and gid (numeric only), used when the pod sets none.
    pub user: Option<(u32, u32)>,
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

fn read_json(p: &Path) -> Result<serde_json::Value> {
    let b = std::fs::read(p).ctx(|| format!("read {}", p.display()))?;
    serde_json::from_slice(&b)
        .map_err(|e| Error::Command(format!("{}: not JSON: {e}", p.display())))
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    let (alg, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
    layout.join("blobs").join(alg).join(hex)
}

/// Unpacks one OCI image into `dir` and reads its config (index.json -> the manifest tagged
/// `tag` -> config blob).
fn from_layout(src: &OciSource, dir: &Path) -> Result<Image> {
    let index = read_json(&src.layout.join("index.json"))?;
    let manifest = index["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == src.tag.as_str())
        .and_then(|m| m["digest"].as_str())
        .ok_or_else(|| {
            Error::Command(format!(
                "{}: no image tagged {:?} (make image writes it)",
                src.layout.display(),
                src.tag
            ))
        })?;
    let manifest = read_json(&blob(&src.layout, manifest))?;
    let config =
        read_json(&blob(&src.layout, manifest["config"]["digest"].as_str().unwrap_or_default()))?;
    let c = &config["config"];
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().into_iter().flatten().filter_map(|x| x.as_str().map(str::to_string)).collect()
    };
    let user = c["User"].as_str().and_then(|u| {
        let (uid, gid) = u.split_once(':').unwrap_or((u, u));
        Some((uid.parse().ok()?, gid.parse().ok()?))
    });
    let safe: String = src
        .reference
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() || ch == '.' || ch == '-' { ch } else { '_' })
        .collect();
    let rootfs = dir.join(safe);
    let _ = std::fs::remove_dir_all(&rootfs);
    let out = std::process::Command::new("umoci")
        .args(["raw", "unpack", "--image"])
        .arg(format!("{}:{}", src.layout.display(), src.tag))
        .arg(&rootfs)
        .output()
        .ctx(|| "run umoci (Debian's umoci; make image installs it)".into())?;
    if !out.status.success() {
        return Err(Error::Command(format!(
            "umoci raw unpack {}: {}",
            src.layout.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(Image {
        reference: src.reference.clone(),
        rootfs,
        entrypoint: strings(&c["Entrypoint"]),
        cmd: strings(&c["Cmd"]),
        env: strings(&c["Env"]),
        user,
    })
}

pub const ETCD_IMAGE: &str = "gcr.io/etcd-development/etcd:v3.6.14";

const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
const GROUP: &str = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n";

/// Builds the known images' root filesystems under `dir` from the binaries in `tools/bin`.
pub fn prepare(dir: &Path, tools_bin: &Path, oci: &[OciSource]) -> Result<Vec<Image>> {
    let root = dir.join("etcd-v3.6.14");
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
    let mut images = vec![Image {
        reference: ETCD_IMAGE.into(),
        rootfs: root,
        // Upstream: ENTRYPOINT unset, CMD ["/usr/local/bin/etcd"].
        entrypoint: vec![],
        cmd: vec!["/usr/local/bin/etcd".into()],
        env: vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()],
        // Upstream sets no USER: root unless the pod says otherwise.
        user: None,
    }];
    for src in oci {
        images.push(from_layout(src, dir)?);
    }
    Ok(images)
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
