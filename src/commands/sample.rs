//! `leaderwatch sample`: its arguments into the sampler's configuration, checked, and the
//! run (src/ops/sample.rs).

use std::future::Future;
use std::sync::Arc;

use crate::cli::{MetricsInterval, SampleArgs};
use crate::io::probe::{ProbeConfig, TlsFile, TlsFiles, TlsFilesError};
use crate::model::clock::{Clock, SystemClock};
use crate::model::member::parse_members;
use crate::ops::sample::{self, SampleConfig};
use crate::{Error, Result};

/// `leaderwatch sample` from its arguments.
pub async fn command(a: SampleArgs, shutdown: impl Future<Output = ()>) -> Result<()> {
    let members = parse_members(&a.endpoints).map_err(Error::Usage)?;
    let metrics_every = match a.metrics_interval {
        None => Some(1),
        Some(MetricsInterval::OnChange) => None,
        Some(MetricsInterval::Every(m)) if m < a.interval => {
            return Err(Error::Usage(format!(
                "--metrics-interval {} is shorter than --interval {}",
                humantime::format_duration(m),
                humantime::format_duration(a.interval)
            )));
        }
        Some(MetricsInterval::Every(m)) => Some(crate::io::round::rounds_per_page(m, a.interval)),
    };
    let cfg = SampleConfig {
        members,
        interval: a.interval,
        metrics_every,
        duration: a.duration,
        out: a.out,
        probe: ProbeConfig {
            timeout: a.timeout,
            tls: TlsFiles { cacert: a.cacert, cert: a.cert, key: a.key },
            with_metrics: true,
        },
        cause_horizon: a.cause_horizon,
        canary: a.canary.then_some(a.canary_timeout),
        lock: (a.canary && a.lock_canary)
            .then(|| crate::io::lock::LockConfig::defaults(a.canary_timeout)),
        metrics_addr: a.metrics_addr,
        rotation: Some(crate::io::rotate::Rotation { retain_days: a.retain }),
    };
    cfg.probe.tls.check().map_err(tls_files)?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    sample::run(cfg, clock, shutdown).await.map(|_| ())
}

/// What is wrong with the TLS files, in the words of `--cacert`, `--cert` and `--key`.
fn tls_files(e: TlsFilesError) -> Error {
    let flag = |f: TlsFile| match f {
        TlsFile::Ca => "--cacert",
        TlsFile::Cert => "--cert",
        TlsFile::Key => "--key",
    };
    Error::Probe(match e {
        TlsFilesError::Unreadable { file, path, problem } => {
            format!("{} {}: {problem}", flag(file), path.display())
        }
        TlsFilesError::NotPem { file, path } => {
            format!("{} {}: not a PEM file", flag(file), path.display())
        }
        TlsFilesError::Unpaired => "--cert and --key must be given together".to_owned(),
    })
}
