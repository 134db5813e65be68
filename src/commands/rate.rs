//! `leaderwatch rate`: the residual election rate pooled over runs (src/ops/report.rs),
//! as text, JSON or CSV.

use crate::Error;
use crate::cli::{RateArgs, RateOutput};
use crate::commands::out;

pub fn command(a: RateArgs) -> Result<(), Error> {
    let r = crate::ops::report::rate(&a.paths, a.confidence)?;
    match a.output {
        RateOutput::Json => out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&r).map_err(|e| Error::Internal(format!("json: {e}")))?
        )),
        RateOutput::Csv => out(&crate::render::rate::render_csv(&r)?),
        RateOutput::Text => out(&crate::render::rate::render(&r)),
    }
}
