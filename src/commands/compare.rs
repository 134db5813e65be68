//! `leaderwatch compare`: two baselines' measurements side by side (table or JSON).

use crate::Error;
use crate::commands::cli::{CompareArgs, Output};
use crate::commands::out;
use crate::io::read;

pub fn command(a: CompareArgs) -> Result<(), Error> {
    let (ba, bb) = (read::baseline(&a.a)?, read::baseline(&a.b)?);
    let (ma, mb) = (
        crate::analysis::flatten::measurements(&a.a, &ba),
        crate::analysis::flatten::measurements(&a.b, &bb),
    );
    let diffs = crate::analysis::flatten::compare(&ma, &mb);
    if a.output == Output::Json {
        out(&format!("{}\n", serde_json::to_string_pretty(&diffs).unwrap_or_default()))?;
    } else {
        out(&format!(
            "{}\n",
            crate::render::report::render_compare(&ba.run_id, &bb.run_id, &diffs)
        ))?;
    }
    Ok(())
}
