//! Live clusters by run id (`/run/lw-lab/<id>`, holding the harness's pid), so that a
//! second cluster on the machine (a test beside `make kube-up`) does not take the first
//! one's network names for leftovers, and `down` never removes a live cluster's. Its own
//! module so that net.rs and lab.rs both use it without importing each other.

use crate::error::{IoContext, Result};
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from("/run/lw-lab")
}

pub fn register(id: &str, pid: u32) -> Result<()> {
    std::fs::create_dir_all(dir()).ctx(|| "create /run/lw-lab".into())?;
    std::fs::write(dir().join(id), pid.to_string()).ctx(|| format!("write /run/lw-lab/{id}"))
}

pub fn unregister(id: &str) {
    let _ = std::fs::remove_file(dir().join(id));
}

/// Forgets every id registered by `pid`.
pub fn unregister_pid(pid: u32) {
    for e in std::fs::read_dir(dir()).into_iter().flatten().flatten() {
        if std::fs::read_to_string(e.path()).ok().and_then(|s| s.trim().parse::<u32>().ok())
            == Some(pid)
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Forgets every id whose harness is gone (a killed run's entry), so that the directory
/// does not grow with every run a machine ever killed.
pub fn forget_dead() {
    for e in std::fs::read_dir(dir()).into_iter().flatten().flatten() {
        let pid = std::fs::read_to_string(e.path()).ok().and_then(|s| s.trim().parse::<u32>().ok());
        if !pid.is_some_and(alive) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// True when `id` belongs to a cluster whose harness is alive.
pub fn live(id: &str) -> bool {
    std::fs::read_to_string(dir().join(id))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .is_some_and(alive)
}

/// True while the process `pid` exists.
pub fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}
