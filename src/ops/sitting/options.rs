//! What a sitting is started, attached or fetched with: `leaderwatch sitting`'s flags as
//! plain values (src/commands/sitting.rs makes them from the command line).

use std::path::PathBuf;
use std::time::Duration;

use crate::analysis::recovery::Target;
use crate::model::baseline::KubeMethod;

/// Whether this command starts the Job, follows one that runs, or takes the results of one
/// that ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The checks, the apply, then follow, fetch and hand off.
    Start,
    /// `--attach`: follow the Job that runs, then fetch and hand off.
    Attach,
    /// `--fetch`: the Job ended; fetch (unless fetched already) and hand off.
    Fetch,
}

/// A sitting's options. `label`, `out_dir`, `readme`, `ledger`, `cleanup_pvc` and `keep`
/// are remembered from the start when `--attach` and `--fetch` leave them out.
#[derive(Debug, Clone)]
pub struct SittingOptions {
    pub mode: Mode,
    /// The image the Job runs (`Mode::Start` only).
    pub image: Option<String>,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// The bound on each API request.
    pub request_timeout: Duration,
    pub target: Target,
    pub method: KubeMethod,
    /// `None`: the default windows (the spec's, or a dry run's shorter ones).
    pub idle: Option<Duration>,
    pub settle: Option<Duration>,
    pub evict_timeout: Duration,
    pub recovery_timeout: Duration,
    pub environment: String,
    pub label: Option<String>,
    pub out_dir: Option<PathBuf>,
    pub readme: Option<PathBuf>,
    pub ledger: Option<PathBuf>,
    pub dry_run: bool,
    pub keep: bool,
    pub cleanup_pvc: bool,
    pub pod_monitoring: bool,
    /// How long the follow keeps reconnecting to an API that went away before it detaches.
    pub reconnect_for: Duration,
}

impl SittingOptions {
    /// `--label`, or its default.
    pub fn label(&self) -> String {
        self.label.clone().unwrap_or_else(|| "gke".into())
    }

    pub fn attach(&self) -> bool {
        self.mode == Mode::Attach
    }

    pub fn fetch(&self) -> bool {
        self.mode == Mode::Fetch
    }
}
