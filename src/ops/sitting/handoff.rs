//! Where a sitting's results go and what it writes from them once fetched, so that no
//! step of the M6/M7 hand-off is by hand: the etcd README's observation-window table (every
//! run in OUT-DIR), the run's own `report.csv` (the tidy rows, `report --format csv`), one
//! `baselines.csv` over the GKE runs in OUT-DIR, and with `--ledger` the T-056 ledger's
//! baseline section (src/render/ledger.rs). Dry runs are in none of them but their own
//! `report.csv`: they evicted nothing. A rehearsal (the local control plane) gets the same
//! hand-off only in an `--out-dir` of its own, over the rehearsals there, so that the day's
//! files can be seen before GKE without ever mixing into GKE's.

use std::path::{Path, PathBuf};

use crate::Error;
use crate::io::run_dir::write_atomic;
use crate::model::baseline::BASELINE;
use crate::model::rate::BaselineFile;
use crate::ops::sitting::SittingOptions;
use crate::render::report::render_csv;

/// A run's tidy rows, beside its baseline.json.
pub const REPORT_CSV: &str = "report.csv";
/// The GKE runs' tidy rows, in OUT-DIR: what M6 and M7 take.
pub const BASELINES_CSV: &str = "baselines.csv";

/// Where the results go: the run directories and the README whose table they fill.
pub struct Paths {
    pub out_dir: PathBuf,
    /// `None`: no README (not run in a checkout, none given); said once, at the start.
    pub readme: Option<PathBuf>,
    /// `--ledger`: the T-056 ledger whose baseline section the GKE runs' notes replace.
    pub ledger: Option<PathBuf>,
    /// OUT-DIR is one of the user's own (`--out-dir`, not the checkout's data/): a
    /// rehearsal's hand-off (local control plane) may write its baselines.csv and ledger
    /// there, of its own kind of runs, and never into the GKE ones.
    pub own_out_dir: bool,
}

/// The README under a leaderwatch checkout.
const README: &str = "deploy/k8s/etcd/README.md";

/// The flags, else the leaderwatch checkout the command runs in (the working directory or
/// one above it), else the one it was built from (`cargo install --path .` keeps that),
/// else `./data` and no README. A `--readme` that is not a file is bad input.
pub fn paths(a: &SittingOptions) -> Result<Paths, Error> {
    let checkout = std::env::current_dir()
        .ok()
        .and_then(|cwd| cwd.ancestors().find(|d| d.join(README).is_file()).map(Path::to_owned))
        .or_else(|| {
            let built = Path::new(env!("CARGO_MANIFEST_DIR"));
            built.join(README).is_file().then(|| built.to_owned())
        });
    let readme = match (&a.readme, &checkout) {
        (Some(r), _) if !r.is_file() => {
            return Err(Error::Usage(format!("--readme {}: no such file", r.display())));
        }
        (Some(r), _) => Some(r.clone()),
        (None, Some(c)) => Some(c.join(README)),
        (None, None) => None,
    };
    let out_dir = match (&a.out_dir, &checkout) {
        (Some(o), _) => o.clone(),
        (None, Some(c)) => c.join("data"),
        (None, None) => PathBuf::from("data"),
    };
    let same = |x: &Path, y: &Path| {
        let norm = |p: &Path| p.canonicalize().or_else(|_| std::path::absolute(p));
        matches!((norm(x), norm(y)), (Ok(x), Ok(y)) if x == y)
    };
    let own_out_dir = a.out_dir.as_ref().is_some_and(|o| {
        !same(o, &checkout.as_ref().map_or_else(|| PathBuf::from("data"), |c| c.join("data")))
    });
    match &readme {
        Some(r) => {
            eprintln!("sitting: results into {}, the table of {}", out_dir.display(), r.display())
        }
        None => eprintln!(
            "sitting: results into {}; no README table (not in a leaderwatch checkout: --readme PATH fills one)",
            out_dir.display()
        ),
    }
    if let Some(l) = a.ledger.as_ref().filter(|l| !l.is_file()) {
        return Err(Error::Usage(format!("--ledger {}: no such file", l.display())));
    }
    Ok(Paths { out_dir, readme, ledger: a.ledger.clone(), own_out_dir })
}

/// Every run directory's baseline in `out_dir` but the dry runs', in path order.
fn runs(out_dir: &Path) -> Result<Vec<BaselineFile>, Error> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(out_dir)
        .map_err(|e| Error::input(out_dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path().join(BASELINE)))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    let mut runs =
        paths.iter().map(|p| crate::io::read::baseline_file(p)).collect::<Result<Vec<_>, _>>()?;
    runs.retain(|f| !f.baseline.is_dry_run());
    Ok(runs)
}

/// Step 5's files, from the fetched run `f` and the runs beside it.
pub fn write(paths: &Paths, f: &BaselineFile) -> Result<(), Error> {
    let run_dir = f.path.parent().unwrap_or(Path::new("."));
    let report = run_dir.join(REPORT_CSV);
    write_atomic(&report, render_csv(std::slice::from_ref(f))?.as_bytes())?;
    eprintln!("sitting: {} written", report.display());
    if f.baseline.is_dry_run() {
        eprintln!("sitting: a dry run: no table, baselines.csv or ledger takes it");
        return Ok(());
    }
    let all = runs(&paths.out_dir)?;
    if let Some(readme) = &paths.readme {
        let changed = crate::io::readme::rewrite(readme, |text, dir| {
            crate::render::report::updated(text, dir, &all)
        })?;
        say(readme, changed, "table", all.len(), &paths.out_dir);
    }
    // The runs of this run's kind: GKE's, or (in an OUT-DIR of its own) a rehearsal's.
    let gke = f.baseline.environment.on_target_cluster();
    if !gke && !paths.own_out_dir {
        eprintln!(
            "sitting: {BASELINES_CSV} and the ledger hold GKE runs only; this run ({}) is not one (a rehearsal's go into an --out-dir of its own)",
            f.baseline.environment.description
        );
        return Ok(());
    }
    let kind = if gke { "GKE" } else { "rehearsal" };
    let same: Vec<BaselineFile> =
        all.into_iter().filter(|r| r.baseline.environment.on_target_cluster() == gke).collect();
    let csv = paths.out_dir.join(BASELINES_CSV);
    write_atomic(&csv, render_csv(&same)?.as_bytes())?;
    eprintln!("sitting: {} written ({} {kind} runs)", csv.display(), same.len());
    if let Some(ledger) = &paths.ledger {
        let changed = crate::io::readme::rewrite(ledger, |text, dir| {
            crate::render::ledger::updated(text, dir, &same)
        })?;
        say(ledger, changed, "T-056 baseline section", same.len(), &paths.out_dir);
    }
    Ok(())
}

fn say(file: &Path, changed: bool, what: &str, runs: usize, out_dir: &Path) {
    eprintln!(
        "sitting: {} {what} {} ({runs} runs in {})",
        file.display(),
        if changed { "updated" } else { "already up to date" },
        out_dir.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/before-layers/runs");

    /// A committed run copied into `out` as `name`, its baseline.json edited by `edit`.
    fn run(out: &Path, from: &str, name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
        let (src, dst) = (Path::new(RUNS).join(from), out.join(name));
        std::fs::create_dir_all(&dst).expect("mkdir");
        for e in std::fs::read_dir(&src).expect("ls").flatten() {
            std::fs::copy(e.path(), dst.join(e.file_name())).expect("copy");
        }
        let path = dst.join(BASELINE);
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        edit(&mut v);
        std::fs::write(&path, serde_json::to_string_pretty(&v).expect("json")).expect("write");
        path
    }

    fn as_gke(v: &mut serde_json::Value) {
        v["environment"]["description"] = "GKE Autopilot, dlock-gke (a test copy)".into();
    }

    #[test]
    fn the_sitting_writes_report_csv_baselines_csv_and_the_ledger_from_the_gke_runs_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data = tmp.path().join("data");
        let leader = "kube-leader-eviction-20261201T183143Z";
        let gke = run(&data, leader, "gke-leader-evict-1", as_gke);
        let dry = run(&data, leader, "gke-leader-evict-dry-run-2", |v| {
            as_gke(v);
            v["run_id"] = "dry".into();
            v["disruption"]["method"] = "kubernetes-eviction-dry-run".into();
        });
        run(&data, "rehearsal-leader-sigterm-20261201T182359Z", "rehearsal", |_| {});
        let ledger = tmp.path().join("tasks/README.md");
        std::fs::create_dir_all(ledger.parent().expect("dir")).expect("mkdir");
        let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/tasks/README.md");
        std::fs::copy(committed, &ledger).expect("copy");
        let paths = Paths {
            out_dir: data.clone(),
            readme: None,
            ledger: Some(ledger.clone()),
            own_out_dir: false,
        };

        let f = crate::io::read::baseline_file(&gke).expect("baseline");
        write(&paths, &f).expect("hand-off");
        let report = std::fs::read_to_string(gke.with_file_name(REPORT_CSV)).expect("report.csv");
        assert!(report.starts_with("run_id,") && report.contains(",leader\n"), "{report}");
        let all = std::fs::read_to_string(data.join(BASELINES_CSV)).expect("baselines.csv");
        let run_id = &f.baseline.run_id;
        assert!(all.contains(run_id.as_str()), "the GKE run is in baselines.csv");
        assert!(!all.contains("dry,") && !all.contains("local loopback"), "no dry or local run");
        let text = std::fs::read_to_string(&ledger).expect("ledger");
        assert!(text.contains("**On GKE: measured**, 1 run") && text.contains(run_id.as_str()));
        assert!(text.contains("../data/gke-leader-evict-1/baseline.json"), "{text}");
        assert!(text.contains("elections per disruption"), "the M6/M7 figure is in the note");
        // Idempotent; the rest of the ledger is as committed.
        write(&paths, &f).expect("again");
        assert_eq!(std::fs::read_to_string(&ledger).expect("ledger"), text);
        let tail = |t: &str| t[t.find(crate::render::ledger::END).expect("end")..].to_owned();
        assert_eq!(tail(&text), tail(&std::fs::read_to_string(committed).expect("committed")));

        // A dry run writes its own report.csv and nothing else.
        let before = std::fs::read_to_string(data.join(BASELINES_CSV)).expect("csv");
        let d = crate::io::read::baseline_file(&dry).expect("baseline");
        write(&paths, &d).expect("dry hand-off");
        assert!(dry.with_file_name(REPORT_CSV).is_file());
        assert_eq!(std::fs::read_to_string(data.join(BASELINES_CSV)).expect("csv"), before);

        // A local run into the checkout's data/: no baselines.csv row, no ledger line.
        let local = run(&data, leader, "lab-leader-evict-3", |v| v["run_id"] = "lab".into());
        let l = crate::io::read::baseline_file(&local).expect("baseline");
        write(&paths, &l).expect("local hand-off");
        assert_eq!(std::fs::read_to_string(data.join(BASELINES_CSV)).expect("csv"), before);
        assert_eq!(std::fs::read_to_string(&ledger).expect("ledger"), text);
    }

    /// A rehearsal in an --out-dir of its own gets the whole hand-off, over the rehearsals
    /// there, its ledger section saying it is not GKE; a GKE run beside it stays out.
    #[test]
    fn a_rehearsal_in_an_out_dir_of_its_own_hands_off_its_own_kind_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let day = tmp.path().join("lab-day");
        let leader = "kube-leader-eviction-20261201T183143Z";
        let lab = run(&day, leader, "lab-leader-evict-1", |_| {});
        run(&day, leader, "gke-leader-evict-2", |v| {
            as_gke(v);
            v["run_id"] = "a-gke-run".into();
        });
        let ledger = day.join("ledger.md");
        let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/tasks/README.md");
        std::fs::copy(committed, &ledger).expect("copy");
        let paths = Paths {
            out_dir: day.clone(),
            readme: None,
            ledger: Some(ledger.clone()),
            own_out_dir: true,
        };
        let f = crate::io::read::baseline_file(&lab).expect("baseline");
        write(&paths, &f).expect("hand-off");
        let csv = std::fs::read_to_string(day.join(BASELINES_CSV)).expect("baselines.csv");
        assert!(csv.contains(f.baseline.run_id.as_str()) && !csv.contains("a-gke-run"), "{csv}");
        let text = std::fs::read_to_string(&ledger).expect("ledger");
        assert!(text.contains("**A rehearsal, not GKE**: 1 run"), "{text}");
        assert!(!text.contains("On GKE: measured"), "{text}");
        assert!(text.contains("lab-leader-evict-1/baseline.json"), "{text}");
    }
}
