//! What the commands run (cargo's `ops`): each command's work as one library call, from
//! plain options to its result, below the commands, which turn arguments into these
//! options and print what comes back. [`drive`] is the one loop every run that samples goes
//! through; [`measure`], [`rehearse`] and [`sample`] set up its runs; [`sitting`] is the
//! Kubernetes Job's day from a laptop (checks, apply, follow, fetch, hand-off, clean-up);
//! [`report`] reads runs into tables, comparisons, the rate and the alert rule;
//! [`preflight`] checks the cluster.

use std::time::Duration;

pub mod drive;
pub mod measure;
pub mod preflight;
pub mod recount;
pub mod rehearse;
pub mod report;
pub mod sample;
pub mod sitting;

/// `--idle` for a real sitting: at least the spec's 20 minutes, unless the test hook
/// [`crate::io::test_hooks::MIN_IDLE`] lowers the floor (the harness's short sittings).
/// A dry run's windows when none is given: it proves the image, the rights and the fetch,
/// and measures nothing, so the spec's 20 minutes do not bind it.
pub const DRY_RUN_IDLE: Duration = Duration::from_secs(120);
pub const DRY_RUN_SETTLE: Duration = Duration::from_secs(60);

/// `--idle` and `--settle` of a sitting: the spec's 20 and 5 minutes by default (2 and 1
/// for a dry run), and at rest at least 20 minutes unless it is a dry run.
pub fn trial_windows(
    idle: Option<Duration>,
    settle: Option<Duration>,
    dry_run: bool,
) -> Result<(Duration, Duration), String> {
    let (di, ds) = if dry_run {
        (DRY_RUN_IDLE, DRY_RUN_SETTLE)
    } else {
        (crate::analysis::trial::MIN_IDLE, Duration::from_secs(300))
    };
    let idle = idle.unwrap_or(di);
    let floor = crate::io::test_hooks::min_idle(crate::analysis::trial::MIN_IDLE)?;
    if !dry_run && idle < floor {
        return Err(format!(
            "--idle {}: a real trial idles at least {} (the spec's window); a --dry-run may idle less, `rehearse` is for short runs",
            humantime::format_duration(idle),
            humantime::format_duration(floor)
        ));
    }
    Ok((idle, settle.unwrap_or(ds)))
}
