//! `leaderwatch preflight`: the acceptance checks against the cluster (src/ops/preflight.rs),
//! as a table or JSON; exit 7 when one fails.

use crate::Error;
use crate::cli::{Output, PreflightArgs};
use crate::commands::out;

pub async fn command(a: PreflightArgs) -> Result<(), Error> {
    let (checks, failed) =
        crate::ops::preflight::preflight(&a.kube.options(), a.kube.reach()).await?;
    if a.output == Output::Json {
        out(&format!("{}\n", serde_json::to_string_pretty(&checks).unwrap_or_default()))?;
    } else {
        out(&format!("{}\n", crate::k8s::preflight::render(&checks)))?;
    }
    if failed.is_empty() { Ok(()) } else { Err(Error::Preflight(failed.join(", "))) }
}
