//! The container runtime: Debian's runc. Each container gets an OCI bundle (a copy of its
//! image's root filesystem and a config.json) and runs in the pod's network namespace with
//! its own pid, ipc, uts and mount namespaces, as the pod's securityContext says.

use crate::error::{Error, IoContext, Result};
use crate::proc::die_with_parent;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::{Child, Command};

#[derive(Clone)]
pub struct Runc {
    /// runc's state directory, private to this run.
    pub root: PathBuf,
}

pub struct Mount {
    pub source: PathBuf,
    pub destination: String,
    pub read_only: bool,
}

pub struct Spec<'a> {
    pub bundle: &'a Path,
    pub image_rootfs: &'a Path,
    pub args: Vec<String>,
    pub env: Vec<String>,
    pub cwd: String,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub hostname: String,
    pub netns: &'a str,
    pub read_only_root: bool,
    pub no_new_privileges: bool,
    pub capabilities: Vec<String>,
    pub mounts: Vec<Mount>,
}

/// containerd's default capability set, which GKE's runtime gives a container.
pub const DEFAULT_CAPS: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = e.file_type()?;
        if ft.is_dir() {
            copy_tree(&src, &dst)?;
            std::fs::set_permissions(&dst, std::fs::metadata(&src)?.permissions())?;
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

impl Runc {
    /// Writes the bundle: the rootfs (hard links of the image) and config.json.
    pub fn create_bundle(&self, s: &Spec) -> Result<()> {
        let rootfs = s.bundle.join("rootfs");
        copy_tree(s.image_rootfs, &rootfs)
            .ctx(|| format!("copy image into {}", rootfs.display()))?;
        let caps: Vec<&str> = s.capabilities.iter().map(String::as_str).collect();
        let mut mounts = vec![
            json!({"destination": "/proc", "type": "proc", "source": "proc"}),
            json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
            json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]}),
            json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}),
            json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]}),
            json!({"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]}),
        ];
        for m in &s.mounts {
            let mut opts = vec!["rbind", "rprivate"];
            if m.read_only {
                opts.push("ro");
            }
            mounts.push(json!({"destination": m.destination, "type": "bind", "source": m.source, "options": opts}));
        }
        let cfg = json!({
            "ociVersion": "1.0.2",
            "process": {
                "terminal": false,
                "user": {"uid": s.uid, "gid": s.gid, "additionalGids": s.groups},
                "args": s.args, "env": s.env, "cwd": s.cwd,
                "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
                "noNewPrivileges": s.no_new_privileges,
            },
            "root": {"path": "rootfs", "readonly": s.read_only_root},
            "hostname": s.hostname,
            "mounts": mounts,
            "linux": {
                "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"},
                               {"type": "network", "path": format!("/var/run/netns/{}", s.netns)}],
                "maskedPaths": ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"],
                "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
            },
        });
        let path = s.bundle.join("config.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&cfg).unwrap_or_default())
            .ctx(|| format!("write {}", path.display()))
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("runc");
        c.arg("--root").arg(&self.root);
        c
    }

    /// `runc run` in the foreground: the child's exit is the container's exit.
    pub fn run(&self, id: &str, bundle: &Path, log: &Path) -> Result<Child> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .ctx(|| format!("open {}", log.display()))?;
        let err = out.try_clone().ctx(|| "dup log".into())?;
        let mut c = self.cmd();
        c.args(["run", "--no-new-keyring", "--bundle"]).arg(bundle).arg(id);
        c.stdin(Stdio::null()).stdout(out).stderr(err).kill_on_drop(false);
        die_with_parent(&mut c);
        c.spawn()
            .ctx(|| "start runc (is Debian's runc installed? make kube-tools installs it)".into())
    }

    pub async fn kill(&self, id: &str, signal: &str) {
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            self.cmd().args(["kill", id, signal]).output(),
        )
        .await;
    }

    pub async fn delete(&self, id: &str) {
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            self.cmd().args(["delete", "--force", id]).output(),
        )
        .await;
    }

    /// The container's init pid on the host (for SIGSTOP by a test, and its /proc).
    pub async fn pid(&self, id: &str) -> Option<i32> {
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            self.cmd().args(["state", id]).output(),
        )
        .await
        .ok()?
        .ok()?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        v["pid"].as_i64().map(|p| p as i32).filter(|p| *p > 0)
    }

    /// `runc exec` as the container's user, stdio piped.
    pub fn exec(
        &self,
        id: &str,
        uid: u32,
        gid: u32,
        groups: &[u32],
        cmd: &[String],
        stdin: bool,
    ) -> Result<Child> {
        let mut c = self.cmd();
        c.args(["exec", "--user", &format!("{uid}:{gid}")]);
        for g in groups {
            c.args(["--additional-gids", &g.to_string()]);
        }
        c.arg(id).args(cmd);
        c.stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        die_with_parent(&mut c);
        c.spawn().map_err(|e| Error::Command(format!("runc exec: {e}")))
    }

    /// Every container this run's runc root knows (for a cleanup after a killed run).
    pub async fn list(&self) -> Vec<String> {
        let Ok(Ok(out)) = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            self.cmd().args(["list", "-q"]).output(),
        )
        .await
        else {
            return vec![];
        };
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .filter(|l| !l.is_empty())
            .collect()
    }
}
