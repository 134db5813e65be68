//! `leaderwatch report --update`, `report --format csv` and `compare` as a user runs them,
//! on the committed runs and on small hand-made baselines.

use std::path::Path;

use crate::support::{self, leaderwatch};

fn baseline_json() -> String {
    r#"{"schema_version":3,"tool_version":"0.1.0","run_id":"20261129T000000Z-0001","status":"complete",
    "windows":[{"name":"at_rest","start":"2026-11-29T00:00:00Z","end":"2026-11-29T00:01:00Z","duration_s":60.0,"rounds":61,"full_length":true,
      "leader_changes":{"raw_sum_start":3.0,"raw_sum_end":3.0,"reset_aware_increase":0.0,"per_member":{}},"elections":0,"leader_transitions":[],
      "elections_detail":[],"health":{}}],
    "disruption":null,
    "environment":{"kind":"local","description":"local loopback, etcd 3.6.14, 3 members","members":["m0","m1","m2"],"etcd_versions":["3.6.14"],"heartbeat_ms":100,"election_ms":1000,"timing_source":"rehearse flags (--heartbeat-interval, --election-timeout)"},
    "cause_horizon_s":30.0}"#
        .to_owned()
}

#[test]
fn report_update_is_idempotent_and_touches_only_the_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let readme = dir.path().join("docs/README.md");
    std::fs::create_dir_all(readme.parent().expect("parent")).expect("mkdir");
    let original =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/k8s/etcd/README.md"))
            .expect("etcd README");
    std::fs::write(&readme, &original).expect("copy");
    let baseline = dir.path().join("data/run/baseline.json");
    std::fs::create_dir_all(baseline.parent().expect("parent")).expect("mkdir");
    std::fs::write(&baseline, baseline_json()).expect("baseline");

    let run = || {
        let o = leaderwatch()
            .arg("report")
            .arg(&baseline)
            .arg("--update")
            .arg(&readme)
            .output()
            .expect("report");
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        (
            std::fs::read_to_string(&readme).expect("read"),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (once, msg1) = run();
    let (twice, msg2) = run();
    assert!(msg1.contains("updated"), "{msg1}");
    assert!(msg2.contains("already up to date"), "{msg2}");
    assert_eq!(once, twice, "a second run changes nothing");
    assert!(once.contains("raw sum 3 → 3; reset-aware increase 0; elections (raft term) 0"));
    assert!(
        once.contains("[20261129T000000Z-0001](../data/run/baseline.json)"),
        "links relative to the README"
    );
    assert!(once.contains("not yet measured"), "GKE rows stay until a Kubernetes baseline exists");
    // Each measured row carries the spec's label; the unmeasured rows never do.
    let table = &once[once.find("<!-- baseline:begin -->").expect("begin")
        ..once.find("<!-- baseline:end -->").expect("end")];
    for row in table.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| measurement")) {
        assert_eq!(
            row.contains("ASSUMPTION-free measurement"),
            !row.contains("not yet measured"),
            "{row}"
        );
    }
    // Outside the markers nothing moved.
    let outside = |t: &str| {
        let b = t.find("<!-- baseline:begin -->").expect("begin");
        let e = t.find("<!-- baseline:end -->").expect("end");
        (t[..b].to_owned(), t[e..].to_owned())
    };
    assert_eq!(outside(&once), outside(&original));
}

#[test]
fn report_bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"not\": \"a baseline\"}").expect("write");
    let o = leaderwatch().arg("report").arg(&junk).output().expect("report");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("junk.json")
            && err.contains("not a leaderwatch baseline.json")
            && err.lines().count() == 1,
        "{err}"
    );
    let readme = dir.path().join("README.md");
    std::fs::write(&readme, "no markers here\n").expect("write");
    std::fs::write(dir.path().join("b.json"), baseline_json()).expect("write");
    let o = leaderwatch()
        .arg("report")
        .arg(dir.path().join("b.json"))
        .arg("--update")
        .arg(&readme)
        .output()
        .expect("report");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no <!-- baseline:begin --> marker"));
    assert_eq!(
        std::fs::read_to_string(&readme).expect("read"),
        "no markers here\n",
        "nothing written"
    );
}

/// Files of the formats before the current ones (baseline.json schema 1-2, events.csv
/// without the election columns) are no longer read: each is one line naming the file.
#[test]
fn files_of_an_older_format_are_refused_with_one_line_and_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = dir.path().join("old/baseline.json");
    std::fs::create_dir_all(old.parent().expect("parent")).expect("mkdir");
    std::fs::write(
        &old,
        baseline_json().replacen(r#""schema_version":3"#, r#""schema_version":2"#, 1),
    )
    .expect("write");
    for cmd in [&["report"][..], &["rate"], &["compare", "--"]] {
        let mut c = leaderwatch();
        c.args(cmd).arg(&old);
        if cmd[0] == "compare" {
            c.arg(&old);
        }
        let o = c.output().expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {err}");
        assert!(
            err.contains("old/baseline.json: schema_version 2 is not supported")
                && err.lines().count() == 1,
            "{cmd:?}: {err}"
        );
    }

    let run = dir.path().join("sample-run");
    std::fs::create_dir_all(&run).expect("mkdir");
    std::fs::write(
        run.join("events.csv"),
        "ts,run_id,source,member,kind,detail\n2026-11-30T10:00:00.000Z,r,leaderwatch,,run_started,\n",
    )
    .expect("write");
    let o = leaderwatch().arg("rate").arg(&run).output().expect("rate");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("events.csv: not this version's events.csv header")
            && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn etcd_readme_table_is_rendered_from_the_committed_baselines() {
    // Regression guard: the figures in the README must come from files in data/, unedited.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Relative, as the README links them (the test runs in the crate root).
    let baselines: Vec<_> = support::committed_baselines()
        .iter()
        .map(|p| p.strip_prefix(root).expect("under the crate").to_path_buf())
        .map(|rel| leaderwatch::io::read::baseline_file(&rel).expect("baseline"))
        .collect();
    let readme = std::fs::read_to_string(root.join("deploy/k8s/etcd/README.md")).expect("README");
    let table = leaderwatch::render::report::render(&baselines, Some(Path::new("deploy/k8s/etcd")));
    let want = leaderwatch::render::report::splice(&readme, &table).expect("markers");
    assert!(
        want == readme,
        "deploy/k8s/etcd/README.md differs from `leaderwatch report data/*/baseline.json --update` on the committed runs (run it)"
    );
}

/// The committed rehearsal `data/rehearsal-<kind>-<UTC time>` (e.g. kind `leader-sigterm`).
fn committed(kind: &str) -> std::path::PathBuf {
    let mut found = support::committed_runs_named(&format!("rehearsal-{kind}-2"));
    assert_eq!(found.len(), 1, "one committed {kind} rehearsal: {found:?}");
    found.remove(0).join("baseline.json")
}

#[test]
fn compare_puts_every_figure_side_by_side_with_the_difference() {
    let (a, b) = (committed("leader-sigterm"), committed("follower-sigterm"));
    let o = leaderwatch()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .args(["-o", "json"])
        .output()
        .expect("compare");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let diffs: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let find = |w: &str, f: &str| {
        diffs
            .as_array()
            .and_then(|d| d.iter().find(|x| x["window"] == w && x["figure"] == f))
            .cloned()
            .unwrap_or_else(|| panic!("{w}/{f}"))
    };
    // Leader rehearsal: one election in the disruption window; follower: none.
    let e = find("disruption", "elections");
    assert_eq!(
        (e["a"].as_f64(), e["b"].as_f64(), e["diff"].as_f64()),
        (Some(1.0), Some(0.0), Some(-1.0))
    );
    let r = find("disruption", "raw_sum_end");
    assert_eq!((r["a"].as_f64(), r["b"].as_f64()), (Some(5.0), Some(3.0)));
    assert!(find("recovery", "loss_to_healthy_s")["diff"].is_number());

    let o = leaderwatch().arg("compare").arg(&a).arg(&b).output().expect("compare");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("| disruption | elections | 1 | 0 | -1 |"), "{text}");
}

#[test]
fn report_csv_is_one_row_per_figure_with_its_window() {
    let (a, b) = (committed("leader-sigterm"), committed("follower-sigterm"));
    let o = leaderwatch()
        .arg("report")
        .arg(&a)
        .arg(&b)
        .args(["--format", "csv"])
        .output()
        .expect("report");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let mut r = csv::Reader::from_reader(o.stdout.as_slice());
    let headers: Vec<String> = r.headers().expect("header").iter().map(str::to_owned).collect();
    assert_eq!(
        headers.join(","),
        "run_id,source,environment,window,member,figure,value,unit,threshold,threshold_source,over,label,note,window_start,window_end,window_s,target_role"
    );
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.expect("row")).collect();
    let col = |name: &str| headers.iter().position(|h| h == name).expect("col");
    let fig = |w: &str, f: &str| {
        rows.iter()
            .filter(|x| {
                &x[col("window")] == w && &x[col("figure")] == f && x[col("member")].is_empty()
            })
            .map(|x| x[col("value")].to_owned())
            .collect::<Vec<_>>()
    };
    // Each baseline: the three windows' counts and the recovery time.
    for w in ["at_rest", "disruption", "settle"] {
        for f in [
            "raw_sum_start",
            "raw_sum_end",
            "reset_aware_increase",
            "elections",
            "leader_transitions",
            "duration_s",
        ] {
            assert_eq!(fig(w, f).len(), 2, "{w} {f}");
        }
    }
    assert_eq!(fig("recovery", "loss_to_healthy_s").len(), 2);
    let mut elections = fig("disruption", "elections");
    elections.sort();
    assert_eq!(elections, ["0.0", "1.0"], "the follower and the leader rehearsal");
    assert!(fig("disruption", "raw_sum_end").contains(&"5.0".to_owned()));
    assert!(
        rows.iter().all(|x| x[col("environment")].starts_with("local loopback")),
        "labelled where they ran"
    );
    assert!(
        rows.iter().all(|x| chrono::DateTime::parse_from_rfc3339(&x[col("window_start")]).is_ok())
    );
    // The M6/M7 hand-off: each run's target role on every row of it, and elections per
    // disruption (the disruption and settle windows together), as the alert rule derives it.
    for run in [&a, &b] {
        let id = serde_json::from_str::<serde_json::Value>(
            &std::fs::read_to_string(run).expect("baseline"),
        )
        .expect("json")["run_id"]
            .as_str()
            .expect("run_id")
            .to_owned();
        let of_run: Vec<&csv::StringRecord> =
            rows.iter().filter(|x| x[col("run_id")] == id).collect();
        let role = if run == &a { "leader" } else { "follower" };
        assert!(of_run.iter().all(|x| &x[col("target_role")] == role), "{id}: all {role}");
        let per: Vec<&&csv::StringRecord> =
            of_run.iter().filter(|x| &x[col("window")] == "per_disruption").collect();
        let sum = |w: &str| -> f64 {
            of_run
                .iter()
                .filter(|x| &x[col("window")] == w && &x[col("figure")] == "elections")
                .map(|x| x[col("value")].parse::<f64>().expect("number"))
                .sum()
        };
        assert_eq!(per.len(), 1, "{id}: one per_disruption row");
        assert_eq!(&per[0][col("figure")], "elections");
        let value: f64 = per[0][col("value")].parse().expect("number");
        assert_eq!(value, sum("disruption") + sum("settle"), "{id}");
    }
}
