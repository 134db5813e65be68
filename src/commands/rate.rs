//! `leaderwatch rate`: the residual election rate pooled over runs (text, JSON, CSV).

use crate::Error;
use crate::commands::cli::{RateArgs, RateOutput};
use crate::commands::{csv_export, out};
use crate::io::read;

pub fn command(a: RateArgs) -> Result<(), Error> {
    let sources = read::sources(&a.paths)?;
    let r = crate::analysis::rate::pool(&sources, a.confidence);
    match a.output {
        RateOutput::Json => out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&r).map_err(|e| Error::Internal(format!("json: {e}")))?
        ))?,
        RateOutput::Csv => {
            let mut w = csv::Writer::from_writer(std::io::stdout());
            for m in crate::analysis::rate::measurements(&r) {
                w.serialize(m).map_err(csv_export)?;
            }
            w.flush().map_err(Error::Stdout)?;
        }
        RateOutput::Text => out(&crate::render::rate::render(&r))?,
    }
    Ok(())
}
