//! The test hooks: every environment variable through which a test changes what the
//! product does, in one place, each with who sets it and why. No product manifest sets
//! any of them; a run that used one says so (stderr, and baseline.json holds the windows'
//! real lengths whatever they say).
//!
//! - [`MIN_IDLE`] (`LEADERWATCH_TEST_MIN_IDLE`): lowers `measure --idle`'s 20-minute floor
//!   ([`crate::analysis::trial::MIN_IDLE`]), so a sitting on the local cluster can idle for
//!   seconds or minutes. Set by tests/lab/kube.rs and tests/lab/in_cluster.rs, and by hand
//!   before `lw-lab measure` for the short maintenance sittings (docs/local-cluster.md).
//!   `leaderwatch sitting` passes it on into the Job's environment ([`forwarded`],
//!   src/k8s/job.rs), so the in-cluster Job test can use `--idle 30s`.
//! - [`IDLE`] and [`SETTLE`] (`LEADERWATCH_TEST_IDLE`, `LEADERWATCH_TEST_SETTLE`): replace
//!   `measure`'s `--idle` and `--settle` outright, whatever the command line says. Set by
//!   tests/lab/in_cluster.rs in the environment of a Job applied from
//!   deploy/k8s/leaderwatch/job-measure.yaml, whose arguments say 20 and 5 minutes.
//! - [`PAUSE_AFTER_FETCH`] (`LEADERWATCH_TEST_PAUSE_AFTER_FETCH`): `leaderwatch sitting`
//!   waits this long once the run is fetched, before the hand-off and the clean-up, so that
//!   tests/lab/sitting_day.rs can kill it there and show the next command finishing the day
//!   without fetching again.
//!
//! The etcd binary of the build tree (`.tools/bin/etcd`) is not a hook: the Makefile
//! exports `ETCD_BIN`, and the tests run in the repository, where
//! [`crate::io::local::find_etcd`] looks for `.tools/bin/etcd` as it does for a user.

use std::time::Duration;

use crate::model::clock::parse_duration;

/// Lowers `measure --idle`'s floor (see the module header).
pub const MIN_IDLE: &str = "LEADERWATCH_TEST_MIN_IDLE";
/// Replaces `measure --idle` (see the module header).
pub const IDLE: &str = "LEADERWATCH_TEST_IDLE";
/// Replaces `measure --settle` (see the module header).
pub const SETTLE: &str = "LEADERWATCH_TEST_SETTLE";

/// Makes `sitting` wait after its fetch (see the module header).
pub const PAUSE_AFTER_FETCH: &str = "LEADERWATCH_TEST_PAUSE_AFTER_FETCH";

/// [`PAUSE_AFTER_FETCH`]'s wait, when set (said on stderr).
pub fn pause_after_fetch() -> Result<Option<Duration>, String> {
    match std::env::var(PAUSE_AFTER_FETCH) {
        Ok(v) => {
            let d = duration(PAUSE_AFTER_FETCH, &v)?;
            eprintln!("sitting: {PAUSE_AFTER_FETCH}={v}: a test hook; waiting before the hand-off");
            Ok(Some(d))
        }
        Err(_) => Ok(None),
    }
}

/// A hook's duration, as the command line writes one (`30s`, `3m`); not zero.
fn duration(name: &str, v: &str) -> Result<Duration, String> {
    parse_duration(v).map_err(|e| format!("{name}={v:?}: {e}"))
}

/// The floor `measure --idle` is held to: [`MIN_IDLE`] when set, else `default`.
pub fn min_idle(default: Duration) -> Result<Duration, String> {
    match std::env::var(MIN_IDLE) {
        Ok(v) => duration(MIN_IDLE, &v),
        Err(_) => Ok(default),
    }
}

/// `measure`'s idle and settle after [`IDLE`] and [`SETTLE`]; one that is used is
/// a warning on stderr.
pub fn windows(idle: Duration, settle: Duration) -> Result<(Duration, Duration), String> {
    let pick = |name: &str, given: Duration| -> Result<Duration, String> {
        match std::env::var(name) {
            Ok(v) => {
                let d = duration(name, &v)?;
                tracing::warn!(
                    "{name}={v}: a test override replaces {} (no product manifest sets it)",
                    humantime::format_duration(given)
                );
                Ok(d)
            }
            Err(_) => Ok(given),
        }
    };
    Ok((pick(IDLE, idle)?, pick(SETTLE, settle)?))
}

/// The hooks `leaderwatch sitting` passes on into the Job's environment: [`MIN_IDLE`],
/// when set here.
pub fn forwarded() -> Vec<(String, String)> {
    std::env::var(MIN_IDLE).map(|v| vec![(MIN_IDLE.to_owned(), v)]).unwrap_or_default()
}
