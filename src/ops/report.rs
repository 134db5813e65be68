//! What `leaderwatch report`, `compare` and `rate` run: the baselines and run directories
//! read, dry runs left out of every table, and the text made from them (the table, its
//! CSV, the README's table rewritten, the alert rule, a comparison, the rate).

use std::path::{Path, PathBuf};

use crate::Result;
use crate::analysis::flatten;
use crate::analysis::flatten::Difference;
use crate::io::read;
use crate::model::rate::BaselineFile;
use crate::render::alert::{self, AlertFormat, Params};

/// Where the table goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableTo {
    /// Markdown on stdout.
    Markdown,
    /// The tidy rows as CSV on stdout.
    Csv,
    /// Spliced into a README between its markers.
    Readme(PathBuf),
}

/// What a report did: the dry runs it left out (nothing was evicted in them), and the text
/// for stdout, or whether the README changed.
#[derive(Debug)]
pub struct Reported {
    pub left_out: Vec<PathBuf>,
    pub given: usize,
    pub text: Option<String>,
    pub readme_changed: Option<bool>,
}

/// The table of the baselines at `paths` (each with the events.csv beside it), dry runs
/// left out; one unreadable file is the error, for the table as for the CSV.
pub fn report(paths: &[PathBuf], to: &TableTo) -> Result<Reported> {
    let all = paths.iter().map(|p| read::baseline_file(p)).collect::<Result<Vec<_>, _>>()?;
    let given = all.len();
    let (dry, baselines): (Vec<BaselineFile>, Vec<BaselineFile>) =
        all.into_iter().partition(|f| f.baseline.is_dry_run());
    let left_out = dry.into_iter().map(|f| f.path).collect();
    let (text, readme_changed) = match to {
        TableTo::Readme(readme) => (None, Some(update(readme, &baselines)?)),
        TableTo::Csv => (Some(crate::render::report::render_csv(&baselines)?), None),
        TableTo::Markdown => {
            (Some(format!("{}\n", crate::render::report::render(&baselines, None))), None)
        }
    };
    Ok(Reported { left_out, given, text, readme_changed })
}

/// The README's table from `baselines`; whether the file changed.
fn update(readme: &Path, baselines: &[BaselineFile]) -> Result<bool> {
    Ok(crate::io::readme::rewrite(readme, |text, dir| {
        crate::render::report::updated(text, dir, baselines)
    })?)
}

/// The alert rule derived from the baselines at `paths`: the derivation's lines (for
/// stderr) and the rule file or manifest.
pub fn alert_rule(
    paths: &[PathBuf],
    p: &Params,
    format: AlertFormat,
    namespace: &str,
) -> Result<(Vec<String>, String)> {
    let baselines = paths
        .iter()
        .map(|p| read::baseline(p).map(|b| (p.clone(), b)))
        .collect::<Result<Vec<_>, _>>()?;
    let d = alert::derive(&baselines, p)?;
    let rule = alert::render(&d, p, format, namespace)?;
    Ok((d.lines, rule))
}

/// Two baselines' figures side by side: their run ids and the differences.
pub fn compare(a: &Path, b: &Path) -> Result<(String, String, Vec<Difference>)> {
    let (ba, bb) = (read::baseline(a)?, read::baseline(b)?);
    let diffs = flatten::compare(&flatten::measurements(a, &ba), &flatten::measurements(b, &bb));
    Ok((ba.run_id, bb.run_id, diffs))
}

/// The residual rate pooled over the runs at `paths`.
pub fn rate(paths: &[PathBuf], confidence: f64) -> Result<crate::analysis::rate::Rate> {
    Ok(crate::analysis::rate::pool(&read::sources(paths)?, confidence))
}
