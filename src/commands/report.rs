//! `leaderwatch report`: its arguments into a table's destination or the alert rule's
//! parameters, the report made (src/ops/report.rs), its text printed.

use clap::ValueEnum;

use crate::Error;
use crate::cli::{ReportArgs, ReportFormat};
use crate::commands::out;
use crate::ops::report::{self, TableTo};
use crate::render::alert::{AlertFormat, Params};

pub fn command(a: ReportArgs) -> Result<(), Error> {
    if a.alert_rule {
        let format = match a.format {
            None | Some(ReportFormat::Rules) => AlertFormat::Rules,
            Some(ReportFormat::Prometheus) => AlertFormat::Prometheus,
            Some(f @ (ReportFormat::Markdown | ReportFormat::Csv)) => {
                return Err(Error::Usage(format!(
                    "--alert-rule writes --format rules or prometheus, not {}",
                    format_name(f)
                )));
            }
        };
        let p = Params {
            window: a.window,
            disruptions: a.disruptions,
            allow_local: a.allow_local,
            scrape_interval: a.scrape_interval,
            force: a.force,
        };
        let (lines, rule) = report::alert_rule(&a.baselines, &p, format, &a.namespace)?;
        if !lines.is_empty() {
            eprintln!("{}", lines.join("\n"));
        }
        return out(&rule);
    }
    let to = match (a.update, a.format) {
        (_, Some(f @ (ReportFormat::Rules | ReportFormat::Prometheus))) => {
            return Err(Error::Usage(format!("--format {} is for --alert-rule", format_name(f))));
        }
        (Some(readme), _) => TableTo::Readme(readme),
        (None, Some(ReportFormat::Csv)) => TableTo::Csv,
        (None, _) => TableTo::Markdown,
    };
    let r = report::report(&a.baselines, &to)?;
    let said: Vec<String> = r
        .left_out
        .iter()
        .map(|p| format!("report: left out {}: a dry run (nothing was evicted)", p.display()))
        .collect();
    if !said.is_empty() {
        eprintln!("{}", said.join("\n"));
    }
    match (&to, r.readme_changed, r.text) {
        (TableTo::Readme(readme), Some(changed), _) => eprintln!(
            "{}: {}",
            readme.display(),
            if changed { "baseline table updated" } else { "already up to date" }
        ),
        _ if r.given > 0 && r.given == r.left_out.len() => {
            return Err(Error::Usage(format!(
                "each of the {} baseline(s) given is a dry run: nothing was evicted, so there is no figure to report",
                r.given
            )));
        }
        (_, _, Some(text)) => out(&text)?,
        _ => {}
    }
    Ok(())
}

/// A `--format` value as the user typed it.
fn format_name(f: ReportFormat) -> String {
    f.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default()
}
