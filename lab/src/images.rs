//! The images the process kubelet can "pull": each maps an image reference from a manifest,
//! unmodified, to a root filesystem assembled here from locally built binaries of the same
//! version. The etcd image is distroless static upstream (no shell): so is this one.

use crate::error::{IoContext, Result};
use std::path::{Path, PathBuf};

pub struct Image {
    pub reference: &'static str,
    pub rootfs: PathBuf,
    /// The image's ENTRYPOINT and CMD, used when a container gives no command/args.
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
}

pub const ETCD_IMAGE: &str = "gcr.io/etcd-development/etcd:v3.6.14";

const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
const GROUP: &str = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n";

/// Builds the known images' root filesystems under `dir` from the binaries in `tools/bin`.
pub fn prepare(dir: &Path, tools_bin: &Path) -> Result<Vec<Image>> {
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
    std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777)).ctx(|| "chmod image tmp".into())?;
    Ok(vec![Image {
        reference: ETCD_IMAGE,
        rootfs: root,
        // Upstream: ENTRYPOINT unset, CMD ["/usr/local/bin/etcd"].
        entrypoint: vec![],
        cmd: vec!["/usr/local/bin/etcd".into()],
        env: vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()],
    }])
}
