//! Child processes of the harness: every one in the harness's process group, killed by the
//! kernel if the harness dies (PR_SET_PDEATHSIG), and its output in one log file.

use crate::error::{Error, IoContext, Result};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    child: Child,
}

/// Makes `cmd` die with the harness: PR_SET_PDEATHSIG fires when the thread that forked it
/// exits, and tokio's worker threads live as long as the runtime.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

impl Proc {
    pub fn spawn(name: &str, program: &Path, args: &[String], log: PathBuf) -> Result<Proc> {
        let out = std::fs::File::create(&log).ctx(|| format!("create {}", log.display()))?;
        let err = out.try_clone().ctx(|| format!("dup {}", log.display()))?;
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err).kill_on_drop(true);
        die_with_parent(&mut cmd);
        let child = cmd.spawn().ctx(|| format!("start {name} ({})", program.display()))?;
        Ok(Proc { name: name.to_string(), log, child })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Fails with the log's last line if the process has already exited.
    pub fn check_running(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(Error::Exited {
                component: self.name.clone(),
                status: status.to_string(),
                last: last_line(&self.log),
                log: self.log.clone(),
            }),
            Ok(None) => Ok(()),
            Err(e) => Err(Error::Io { context: format!("wait for {}", self.name), source: e }),
        }
    }

    /// SIGTERM, then SIGKILL after `grace`.
    pub async fn stop(&mut self, grace: Duration) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            if tokio::time::timeout(grace, self.child.wait()).await.is_err() {
                let _ = self.child.kill().await;
            }
        }
        let _ = self.child.wait().await;
    }
}

/// The last non-empty line of a log, for one-line errors.
pub fn last_line(log: &Path) -> String {
    std::fs::read_to_string(log)
        .ok()
        .and_then(|s| {
            s.lines().rev().find(|l| !l.trim().is_empty()).map(|l| l.chars().take(300).collect())
        })
        .unwrap_or_else(|| "(empty log)".into())
}

/// Runs a short command to completion; its stderr in the error.
pub async fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new(program).args(args).kill_on_drop(true).output(),
    )
    .await
    .map_err(|_| Error::Command(format!("`{program} {}` took over 60 s", args.join(" "))))?
    .ctx(|| format!("run {program}"))?;
    if !out.status.success() {
        return Err(Error::Command(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A free TCP port on `ip` (bound and released; the component binds it a moment later).
pub fn free_port(ip: std::net::IpAddr) -> Result<u16> {
    let l = std::net::TcpListener::bind((ip, 0)).ctx(|| format!("bind {ip}:0"))?;
    Ok(l.local_addr().ctx(|| "local_addr".into())?.port())
}
