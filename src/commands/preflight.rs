//! `leaderwatch preflight`: the acceptance checks against the cluster, as a table or
//! JSON; exit 7 when one fails.

use std::sync::Arc;

use crate::Error;
use crate::commands::cli::{Output, PreflightArgs};
use crate::commands::out;
use crate::k8s;
use crate::model::clock::{Clock, SystemClock};

pub async fn command(a: PreflightArgs) -> Result<(), Error> {
    let o = a.kube.options();
    let reach = a.kube.reach();
    let client = k8s::client(&o).await?;
    let po = k8s::preflight::PreflightOptions { reach, ..Default::default() };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let checks = k8s::preflight::run(&client, &o, &po, clock).await?;
    if a.output == Output::Json {
        out(&format!("{}\n", serde_json::to_string_pretty(&checks).unwrap_or_default()))?;
    } else {
        out(&format!("{}\n", k8s::preflight::render(&checks)))?;
    }
    let failed: Vec<&str> = checks.iter().filter(|c| !c.pass).map(|c| c.name).collect();
    if failed.is_empty() { Ok(()) } else { Err(Error::Preflight(failed.join(", "))) }
}
