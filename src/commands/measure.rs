//! `leaderwatch measure`: its arguments into the sitting's configuration, the run
//! (src/ops/measure.rs), the table printed (also on the log, in a pod).

use std::future::Future;

use crate::cli::MeasureArgs;
use crate::io::probe::ProbeConfig;
use crate::model::baseline::Environment;
use crate::model::build::Build;
use crate::ops::drive::TrialConfig;
use crate::ops::measure::{self, MeasureConfig};
use crate::{Error, Result};

/// `leaderwatch measure` from its arguments: the sitting, then its table (also on the log).
pub async fn command(a: MeasureArgs, shutdown: impl Future<Output = ()>) -> Result<()> {
    // Bad windows are bad input, said alone.
    let (idle, settle) =
        crate::ops::trial_windows(a.idle, a.settle, a.dry_run).map_err(Error::Usage)?;
    // The first line of a sitting Job's log: `leaderwatch sitting` reads the image's build there.
    eprintln!("{}", Build::this().line());
    let (idle, settle) = crate::io::test_hooks::windows(idle, settle).map_err(Error::Usage)?;
    let cfg = MeasureConfig {
        reach: a.kube.reach(),
        kube: a.kube.options(),
        trial: TrialConfig {
            members: vec![], // discovered from the pods
            idle,
            settle,
            interval: a.cadence.interval,
            fast_interval: a.cadence.fast_interval,
            target: a.target,
            probe: ProbeConfig { timeout: a.cadence.timeout, ..ProbeConfig::default() },
            out: a.out,
            recovery_timeout: a.timeouts.recovery_timeout,
            environment: Environment { description: a.environment, ..Environment::default() },
            cause_horizon: a.cadence.cause_horizon,
            canary: a.cadence.canary(),
            lock: a.cadence.lock(),
            metrics_addr: a.metrics_addr,
            follow_pod_ips: false,
        },
        evict_timeout: a.timeouts.evict_timeout,
        dry_run: a.dry_run,
        method: a.method,
        down: a.down,
    };
    // In a pod the log may be the only way out (baseline-from-log.sh reads it there).
    let in_pod = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let ran = measure::measure(cfg, a.expect_build.as_ref(), a.checksums, shutdown).await;
    // An incomplete sitting still wrote what it measured: the Job's log gets it too.
    if let Some(f) = &ran.written {
        crate::render::report::print_result(f, in_pod);
    }
    ran.result
}
