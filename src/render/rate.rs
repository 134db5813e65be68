//! `leaderwatch rate`'s table and the one-line residual of `sample`'s log.

use crate::analysis::rate::Rate;
use crate::model::rate::{Bound, Residual};

fn fmt_s(s: f64) -> String {
    let d = std::time::Duration::from_secs(s.max(0.0).round() as u64);
    format!("{} ({s:.0} s)", humantime::format_duration(d))
}

fn fmt_bound(b: &Option<Bound>, unit: &str) -> String {
    match b {
        Some(b) => format!("{:.3} per {unit} ({:.3} - {:.3})", b.rate, b.lower, b.upper),
        None => "no quiet exposure".to_owned(),
    }
}

/// The table.
pub fn render(r: &Rate) -> String {
    let mut out = String::from(
        "| source | kind | where | quiet exposure | cut | residual elections |\n|---|---|---|---|---|---|\n",
    );
    for s in &r.sources {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} s | {} |\n",
            s.path.display(),
            s.kind,
            s.environment,
            fmt_s(s.exposure_s),
            s.cut_s,
            s.residual
        ));
    }
    let split: Vec<String> = r.elections.iter().map(|(c, n)| format!("{c} {n}")).collect();
    out.push_str(&format!(
        "\nquiet exposure: {} (cut: {:.0} s while a disruption was in progress)\n",
        fmt_s(r.exposure_s),
        r.cut_s
    ));
    out.push_str(&format!("residual elections: {} ({})\n", r.residual, split.join(", ")));
    if !r.excluded.is_empty() {
        let ex: Vec<String> = r.excluded.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        out.push_str(&format!("not counted: {}\n", ex.join("; ")));
    }
    let pct = r.confidence * 100.0;
    out.push_str(&format!(
        "rate, exact Poisson {pct:.0}% interval: {}; {}\n",
        fmt_bound(&r.per_hour, "hour"),
        fmt_bound(&r.per_day, "day")
    ));
    for s in &r.sources {
        for n in &s.notes {
            out.push_str(&format!("note: {}: {n}\n", s.path.display()));
        }
    }
    out
}

/// `sample`'s one log line about the residual rate of its directory.
pub fn residual_line(r: &Residual) -> String {
    format!(
        "residual rate over {} run(s) in this directory, {} of quiet exposure: {} election(s), {}",
        r.runs,
        fmt_s(r.exposure_s),
        r.residual,
        fmt_bound(&r.per_day, "day")
    ) + &format!(" ({:.0}% exact Poisson interval)", r.confidence * 100.0)
}

/// The rate as the tidy rows of `rate --format csv` (`analysis::rate::as_measurements`).
pub fn render_csv(r: &Rate) -> Result<String, crate::render::InternalError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for m in crate::analysis::rate::as_measurements(r) {
        w.serialize(m).map_err(|e| crate::render::InternalError(format!("csv export: {e}")))?;
    }
    let bytes =
        w.into_inner().map_err(|e| crate::render::InternalError(format!("csv export: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
