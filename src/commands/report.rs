//! `leaderwatch report`: the baseline table (markdown, CSV, or the README's table
//! rewritten in place) and, with `--alert-rule`, the alert rule derived from baselines.

use clap::ValueEnum;

use crate::Error;
use crate::commands::cli::{ReportArgs, ReportFormat};
use crate::commands::out;
use crate::io::read;
use crate::render::alert::{self, AlertFormat, NoThreshold};

pub fn command(a: ReportArgs) -> Result<(), Error> {
    if a.alert_rule {
        let baselines = a
            .baselines
            .iter()
            .map(|p| read::baseline(p).map(|b| (p.clone(), b)))
            .collect::<Result<Vec<_>, _>>()?;
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
        let p = alert::Params {
            window: a.window,
            disruptions: a.disruptions,
            allow_local: a.allow_local,
            scrape_interval: a.scrape_interval,
            force: a.force,
        };
        let d = alert::derive(&baselines, &p).map_err(no_threshold)?;
        for l in &d.lines {
            eprintln!("{l}");
        }
        out(&alert::render(&d, &p, format, &a.namespace)?)?;
        return Ok(());
    }
    if let Some(f @ (ReportFormat::Rules | ReportFormat::Prometheus)) = a.format {
        return Err(Error::Usage(format!("--format {} is for --alert-rule", format_name(f))));
    }
    // Each baseline with the events.csv beside it (the rate rows): one unreadable file is
    // one line and exit 2, for the table as for the CSV.
    let mut baselines =
        a.baselines.iter().map(|p| read::baseline_file(p)).collect::<Result<Vec<_>, _>>()?;
    let given = baselines.len();
    baselines.retain(|f| {
        let dry = f.baseline.is_dry_run();
        if dry {
            eprintln!("report: left out {}: a dry run (nothing was evicted)", f.path.display());
        }
        !dry
    });
    if baselines.is_empty() && given > 0 && a.update.is_none() {
        return Err(Error::Usage(format!(
            "each of the {given} baseline(s) given is a dry run: nothing was evicted, so there is no figure to report"
        )));
    }
    match (a.update, a.format) {
        (Some(readme), _) => {
            let changed = crate::io::readme::rewrite(&readme, |text, dir| {
                crate::render::report::updated(text, dir, &baselines)
            })?;
            eprintln!(
                "{}: {}",
                readme.display(),
                if changed { "baseline table updated" } else { "already up to date" }
            );
        }
        (None, Some(ReportFormat::Csv)) => out(&crate::render::report::render_csv(&baselines)?)?,
        (None, _) => out(&format!("{}\n", crate::render::report::render(&baselines, None)))?,
    }
    Ok(())
}

/// A `--format` value as the user typed it.
fn format_name(f: ReportFormat) -> String {
    f.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default()
}

/// Why no alert can be derived, in the words of `--alert-rule`'s flags.
fn no_threshold(e: NoThreshold) -> Error {
    Error::NoThreshold(match e {
        NoThreshold::OnlyLocal { given } => format!(
            "no baseline measured on a Kubernetes cluster (GKE) among the {given} given (environment.kind; the local control plane counts as local); an alert for GKE from local runs would be a guess: pass --allow-local to derive one anyway"
        ),
        NoThreshold::NoneComplete => "no complete baseline to derive the alert from".to_owned(),
        NoThreshold::NoLeaderLost { used } => format!(
            "none of the {used} baseline(s) used disrupted a leader, so a threshold from them says nothing about a leader loss (one election or more each): add a leader sitting (--target leader) or a rolling restart, or pass --force"
        ),
    })
}
