//! `leaderwatch compare`: two baselines' measurements side by side (table or JSON), made by
//! src/ops/report.rs.

use crate::Error;
use crate::cli::{CompareArgs, Output};
use crate::commands::out;

pub fn command(a: CompareArgs) -> Result<(), Error> {
    let (run_a, run_b, diffs) = crate::ops::report::compare(&a.a, &a.b)?;
    if a.output == Output::Json {
        out(&format!("{}\n", serde_json::to_string_pretty(&diffs).unwrap_or_default()))
    } else {
        out(&format!("{}\n", crate::render::report::render_compare(&run_a, &run_b, &diffs)))
    }
}
