//! What `leaderwatch preflight` runs: the acceptance checks against the cluster.

use std::sync::Arc;

use crate::Result;
use crate::k8s::discover::Reach;
use crate::k8s::preflight::{self, Check, PreflightOptions};
use crate::k8s::{self, KubeOptions};
use crate::model::clock::{Clock, SystemClock};

/// Every check, and the names of those that failed.
pub async fn preflight(o: &KubeOptions, reach: Reach) -> Result<(Vec<Check>, Vec<&'static str>)> {
    let client = k8s::client(o).await?;
    let po = PreflightOptions { reach, ..Default::default() };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let checks = preflight::run(&client, o, &po, clock).await?;
    let failed = checks.iter().filter(|c| !c.pass).map(|c| c.name).collect();
    Ok((checks, failed))
}
