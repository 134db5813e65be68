//! What a sitting remembers of itself on the machine that started it: the flags that say
//! where its results go (`--label`, `--out-dir`, `--readme`, `--ledger`, `--cleanup-pvc`,
//! `--keep`), kept under the Job's UID from the apply until its hand-off is done, so that
//! `--attach` and `--fetch` need only the context. A flag given again wins; a machine that
//! did not start it remembers nothing and uses the flags as given.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::io::run_dir::write_atomic;
use crate::ops::sitting::SittingOptions;

/// The flags kept for one sitting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    pub label: String,
    pub out_dir: Option<PathBuf>,
    pub readme: Option<PathBuf>,
    pub ledger: Option<PathBuf>,
    pub cleanup_pvc: bool,
    pub keep: bool,
}

/// Where a sitting's memory lives: `$XDG_STATE_HOME/leaderwatch/sittings` (else
/// `~/.local/state/...`); `None` without either (nothing is remembered).
fn dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/state")))?;
    Some(base.join("leaderwatch/sittings"))
}

fn file(uid: &str) -> Option<PathBuf> {
    dir().map(|d| d.join(format!("{uid}.json")))
}

/// Absolute, so that `--attach` from another directory finds the same places.
fn absolute(p: &Option<PathBuf>) -> Option<PathBuf> {
    p.as_ref().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
}

impl Remembered {
    pub fn of(a: &SittingOptions) -> Remembered {
        Remembered {
            label: a.label(),
            out_dir: absolute(&a.out_dir),
            readme: absolute(&a.readme),
            ledger: absolute(&a.ledger),
            cleanup_pvc: a.cleanup_pvc,
            keep: a.keep,
        }
    }

    /// The flags not given again, from memory.
    pub fn fill(&self, a: &mut SittingOptions) {
        a.label.get_or_insert_with(|| self.label.clone());
        for (mine, given) in [
            (&self.out_dir, &mut a.out_dir),
            (&self.readme, &mut a.readme),
            (&self.ledger, &mut a.ledger),
        ] {
            if given.is_none() {
                given.clone_from(mine);
            }
        }
        a.cleanup_pvc |= self.cleanup_pvc;
        a.keep |= self.keep;
    }

    /// The flags as a command line would give them, for the line that says what was used.
    pub fn flags(&self) -> String {
        let mut s = format!("--label {}", self.label);
        for (name, v) in
            [("--out-dir", &self.out_dir), ("--readme", &self.readme), ("--ledger", &self.ledger)]
        {
            if let Some(p) = v {
                s.push_str(&format!(" {name} {}", p.display()));
            }
        }
        if self.cleanup_pvc {
            s.push_str(" --cleanup-pvc");
        }
        if self.keep {
            s.push_str(" --keep");
        }
        s
    }
}

/// Keeps `r` for the Job `uid`. A machine without a state directory, or one that cannot be
/// written, is said and does not stop the sitting (the flags can be given again).
pub fn save(uid: &str, r: &Remembered) {
    let Some(path) = file(uid) else {
        eprintln!(
            "sitting: no HOME or XDG_STATE_HOME: --attach and --fetch will need the flags again"
        );
        return;
    };
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .map_err(|e| e.to_string())
        .and_then(|()| serde_json::to_vec_pretty(r).map_err(|e| e.to_string()))
        .and_then(|b| write_atomic(&path, &b).map_err(|e| e.to_string()));
    if let Err(e) = written {
        eprintln!(
            "sitting: {}: {e}: --attach and --fetch will need the flags again",
            path.display()
        );
    }
}

/// What was kept for the Job `uid`, if this machine started it.
pub fn load(uid: &str) -> Result<Option<(PathBuf, Remembered)>, Error> {
    let Some(path) = file(uid) else { return Ok(None) };
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(|r| Some((path.clone(), r)))
            .map_err(|e| Error::input(&path, format!("not a sitting's memory: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::input(&path, e)),
    }
}

/// The hand-off is done: nothing is left to remember.
pub fn forget(uid: &str) {
    if let Some(path) = file(uid) {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::sitting::Mode;
    use std::time::Duration;

    /// A sitting's options as the flags make them: `started` (`--label lab --out-dir
    /// /tmp/out --ledger /tmp/ledger.md --cleanup-pvc`) or, given `mode`, bare.
    fn opts(mode: Mode, started: bool) -> SittingOptions {
        let p = |s: &str| started.then(|| PathBuf::from(s));
        SittingOptions {
            mode,
            image: Some("r/p/i@sha256:0".into()),
            kubeconfig: None,
            context: None,
            request_timeout: Duration::from_secs(10),
            target: crate::analysis::recovery::Target::Follower,
            method: crate::model::baseline::KubeMethod::Evict,
            idle: None,
            settle: None,
            evict_timeout: Duration::from_secs(600),
            recovery_timeout: Duration::from_secs(900),
            environment: "GKE Autopilot, dlock-gke".into(),
            label: started.then(|| "lab".into()),
            out_dir: p("/tmp/out"),
            readme: None,
            ledger: p("/tmp/ledger.md"),
            dry_run: false,
            keep: false,
            cleanup_pvc: started,
            pod_monitoring: false,
            reconnect_for: Duration::from_secs(300),
        }
    }

    #[test]
    fn what_attach_is_not_given_again_comes_from_the_sitting_that_started_it() {
        let started = opts(Mode::Start, true);
        let r = Remembered::of(&started);
        let mut attach =
            SittingOptions { readme: Some("/tmp/other.md".into()), ..opts(Mode::Attach, false) };
        r.fill(&mut attach);
        assert_eq!(attach.label(), "lab");
        assert_eq!(attach.out_dir.as_deref(), Some(Path::new("/tmp/out")));
        assert_eq!(attach.ledger.as_deref(), Some(Path::new("/tmp/ledger.md")));
        assert_eq!(attach.readme.as_deref(), Some(Path::new("/tmp/other.md")), "given wins");
        assert!(attach.cleanup_pvc && !attach.keep);
        assert_eq!(
            r.flags(),
            "--label lab --out-dir /tmp/out --ledger /tmp/ledger.md --cleanup-pvc"
        );
        // Nothing remembered: the flags as given, the label's default.
        assert_eq!(opts(Mode::Fetch, false).label(), "gke");
    }
}
