//! `leaderwatch rate` as a user runs it on the committed runs: the exposure, the count by
//! cause, the rate with its exact interval (text, JSON, CSV); the etcd README's residual
//! row is what `report` renders from the same files; bad input is one line and exit 2, a
//! closed stdout exit 3.

use crate::support;

use std::path::PathBuf;

use support::{leaderwatch, repo};

/// The committed rehearsals and the sample frozen by hand.
fn committed() -> Vec<PathBuf> {
    let mut v = support::committed_runs_named("rehearsal-");
    v.extend(support::committed_runs_named("sample-"));
    v.sort();
    v
}

fn rate(args: &[&str], paths: &[PathBuf]) -> (i32, String, String) {
    let o = leaderwatch()
        .current_dir(repo(""))
        .arg("rate")
        .args(args)
        .args(paths)
        .output()
        .expect("rate");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn on_the_committed_runs_it_prints_exposure_count_and_interval() {
    let runs = committed();
    let (code, out, err) = rate(&[], &runs);
    assert_eq!(code, 0, "{err}");
    // Four rehearsals (60 s at rest + 30 s settle each; the sigstop one's at_rest ran 61 s)
    // and the 40 s sample frozen by hand (etcd 3.6.14, recorded 2026-12-01).
    assert!(out.contains("quiet exposure: 6m 41s (401 s)"), "{out}");
    // The hand-made SIGSTOP of the sample's leader: unannounced, so residual, cause unreachable.
    assert!(
        out.contains("residual elections: 1 (CPU starvation 0, CPU starvation or slow disk 0, network between members 0, node or pod events 1, slow disk 0, stress 0, unexplained 0)"),
        "{out}"
    );
    assert!(
        out.contains("not counted: outside the quiet windows (a sitting's disruption window): 3"),
        "{out}"
    );
    assert!(
        out.contains("rate, exact Poisson 95% interval: 8.976 per hour (0.227 - 50.012)"),
        "{out}"
    );
    // `rate data/` stands for the runs inside it, and a run named twice counts once (data/
    // also holds the sittings on the local control plane: compare with data/ alone). A copy
    // of the committed runs, so that a run a user recorded into data/ changes nothing here.
    let copy = support::committed_data_dir();
    let data = copy.path().join("data");
    let first = data.join(runs[0].file_name().expect("run name"));
    let (code, whole, err) = rate(&[], &[data.clone(), first]);
    assert_eq!(code, 0, "{err}");
    let (_, data_only, _) = rate(&[], &[data]);
    let exposure = |t: &str| t.lines().find(|l| l.contains("quiet exposure:")).map(str::to_owned);
    assert!(
        exposure(&whole).is_some() && exposure(&whole) == exposure(&data_only),
        "a run named twice counts once: {whole}"
    );

    let (_, json, _) = rate(&["-o", "json", "--confidence", "90%"], &runs);
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["residual"], 1);
    assert_eq!(v["confidence"], 0.9);
    assert_eq!(v["sources"].as_array().map(Vec::len), Some(5));
    let (lo, hi) = (
        v["per_day"]["lower"].as_f64().expect("lower"),
        v["per_day"]["upper"].as_f64().expect("upper"),
    );
    // 1 event, 90 % two-sided: 0.0513 .. 4.744 expected events, over 401 s.
    let days = v["exposure_s"].as_f64().expect("exposure") / 86_400.0;
    assert!((lo * days - 0.05129).abs() < 1e-3 && (hi * days - 4.7439).abs() < 1e-3, "{lo} {hi}");

    // The rehearsals alone: nothing at rest, so the rule-of-three kind of bound.
    let rehearsals: Vec<PathBuf> =
        runs.iter().filter(|p| p.to_string_lossy().contains("rehearsal-")).cloned().collect();
    let (_, csv_out, _) = rate(&["-o", "csv"], &rehearsals);
    let mut r = csv::Reader::from_reader(csv_out.as_bytes());
    let headers = r.headers().expect("header").clone();
    assert_eq!(
        headers.iter().collect::<Vec<_>>().join(","),
        "run_id,source,environment,window,member,figure,value,unit,threshold,threshold_source,over,label,note,window_start,window_end,window_s,target_role",
        "the columns of report --format csv"
    );
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.expect("row")).collect();
    let fig = |f: &str| {
        rows.iter().find(|x| &x[5] == f).map(|x| x[6].parse::<f64>().expect("value")).expect(f)
    };
    assert_eq!(fig("residual_elections"), 0.0);
    assert!(
        (fig("residual_rate_per_day_upper")
            - (0.025f64.ln().abs()) / (fig("quiet_exposure_s") / 86_400.0))
            .abs()
            < 1e-6
    );
}

#[test]
fn the_etcd_readme_row_is_what_report_renders_from_the_committed_rehearsals() {
    let rehearsals: Vec<PathBuf> = committed()
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("rehearsal-"))
        .map(|p| p.join("baseline.json"))
        .collect();
    let o = leaderwatch().arg("report").args(&rehearsals).output().expect("report");
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    let row = table
        .lines()
        .find(|l| l.starts_with("| residual rate of elections at rest ("))
        .expect("a residual row");
    assert!(row.contains("0 election(s) in 6m 1s of quiet exposure: 0 per day, 95% exact Poisson interval 0 – 882"), "{row}");
    let readme = std::fs::read_to_string(repo("deploy/k8s/etcd/README.md")).expect("README");
    let cell = |l: &str| l.split(" | ").nth(1).map(str::to_owned);
    assert!(
        readme.lines().any(
            |l| l.starts_with("| residual rate of elections at rest (") && cell(l) == cell(row)
        ),
        "the README's row is current: run leaderwatch report data/*/baseline.json --update deploy/k8s/etcd/README.md"
    );
    assert!(readme.contains("| residual rate of elections at rest, per day with its 95% interval | — | not yet measured |"), "the GKE row stays unmeasured");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (args, path, needle) in [
        (vec![], dir.path().to_owned(), "neither a sitting"),
        (vec![], dir.path().join("missing.json"), "missing.json"),
        (vec!["--confidence", "1.5"], repo("data"), "between 0 and 1"),
        (vec!["--confidence", "high"], repo("data"), "not a number"),
    ] {
        let (code, _, err) = rate(&args.to_vec(), &[path]);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
}

#[test]
fn a_closed_stdout_is_exit_3_and_one_line_not_a_usage_error_or_a_panic() {
    // A pipe whose reader is gone: every write is EPIPE (Rust ignores SIGPIPE).
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    for output in ["text", "json", "csv"] {
        let o = leaderwatch()
            .current_dir(repo(""))
            .stdout(writer.try_clone().expect("pipe writer"))
            .args(["rate", "-o", output])
            .args(committed())
            .output()
            .expect("rate");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "-o {output}: {err}");
        assert_eq!(err.lines().count(), 1, "-o {output}: {err}");
        assert!(err.starts_with("leaderwatch: stdout: "), "-o {output}: {err}");
    }
}
