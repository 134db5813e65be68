//! `leaderwatch rehearse`: its arguments into a rehearsal (src/ops/rehearse.rs), run; the
//! baseline table printed at the end.

use std::future::Future;

use crate::cli::RehearseArgs;
use crate::io::local::LocalOptions;
use crate::io::probe::ProbeConfig;
use crate::model::baseline::Environment;
use crate::ops::drive::TrialConfig;
use crate::ops::rehearse::{self, RehearseOptions};
use crate::{Error, Result, render::report};

/// `leaderwatch rehearse` from its arguments.
pub async fn command(a: RehearseArgs, shutdown: impl Future<Output = ()>) -> Result<()> {
    if a.cadence.fast_interval > a.cadence.interval {
        return Err(Error::Usage("--fast-interval must not be longer than --interval".to_owned()));
    }
    rehearse::check(&a.target, a.members as usize)?;
    let o = RehearseOptions {
        local: LocalOptions {
            members: a.members as usize,
            etcd_bin: a.etcd_bin,
            ..LocalOptions::default()
        },
        out: a.out,
        method: a.method,
        down: a.down,
        trial: TrialConfig {
            members: vec![], // the local cluster's
            idle: a.idle,
            settle: a.settle,
            interval: a.cadence.interval,
            fast_interval: a.cadence.fast_interval,
            target: a.target,
            probe: ProbeConfig { timeout: a.cadence.timeout, ..ProbeConfig::default() },
            out: Default::default(), // RehearseOptions::out
            recovery_timeout: a.recovery_timeout,
            environment: Environment::default(), // the local cluster's
            cause_horizon: a.cadence.cause_horizon,
            canary: a.cadence.canary(),
            lock: a.cadence.lock(),
            metrics_addr: None,
            follow_pod_ips: false,
        },
    };
    let (out, ran) = rehearse::rehearse(o, shutdown).await?;
    if let Some(f) = &ran.written {
        report::print_result(f, false);
    }
    ran.result?;
    eprintln!("rehearsal written to {}", out.display());
    Ok(())
}
