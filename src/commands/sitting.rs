//! `leaderwatch sitting`: its arguments into a sitting's options and the sitting run
//! (src/ops/sitting.rs), which says on stderr what it does.

use std::future::Future;

use crate::Result;
use crate::cli::SittingArgs;
use crate::ops::sitting::{self, Mode, SittingOptions};

/// `leaderwatch sitting` from its arguments.
pub async fn command(a: SittingArgs, shutdown: impl Future<Output = ()>) -> Result<()> {
    sitting::sitting(options(a), shutdown).await
}

/// The options of a sitting from its arguments.
pub fn options(a: SittingArgs) -> SittingOptions {
    let mode = match (a.attach, a.fetch) {
        (true, _) => Mode::Attach,
        (_, true) => Mode::Fetch,
        _ => Mode::Start,
    };
    SittingOptions {
        mode,
        image: a.image,
        kubeconfig: a.conn.kubeconfig,
        context: a.conn.context,
        request_timeout: a.conn.request_timeout,
        target: a.target,
        method: a.method,
        idle: a.idle,
        settle: a.settle,
        evict_timeout: a.timeouts.evict_timeout,
        recovery_timeout: a.timeouts.recovery_timeout,
        environment: a.environment,
        label: a.label,
        out_dir: a.out_dir,
        readme: a.readme,
        ledger: a.ledger,
        dry_run: a.dry_run,
        keep: a.keep,
        cleanup_pvc: a.cleanup_pvc,
        pod_monitoring: a.pod_monitoring,
        reconnect_for: a.reconnect_for,
    }
}
