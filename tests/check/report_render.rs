//! `leaderwatch report` and `compare` rendering, without etcd: a baseline with member
//! health and elections with causes, and one without either, rendered from the one list of
//! measurements (src/analysis/flatten.rs, rendered by src/render/report.rs). Fixtures: tests/fixtures/baseline-schema3-sigstop.json (a
//! real `rehearse --method sigstop` of the leader, etcd 3.5.1) and
//! tests/fixtures/baseline-sigkill-no-causes.json (the leader sigkill rehearsal of
//! 2026-11-30, recorded before health and causes, migrated to schema 3).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use leaderwatch::analysis::flatten::{CAUSES, compare, measurements};
use leaderwatch::io::read;
use leaderwatch::model::baseline::{
    Baseline, ElectionDetail, EnvironmentKind, EventRef, Flag, WindowName,
};
use leaderwatch::model::event::Cause;
use leaderwatch::model::measurement::Measurement;
use leaderwatch::model::rate::BaselineFile;
use leaderwatch::render::report;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// A baseline at `path` as the report reads it, with the events.csv beside it if any.
fn file(path: PathBuf, b: Baseline) -> BaselineFile {
    read::with_rate(&path, b).expect("rate source")
}

fn schema3() -> Baseline {
    read::baseline(&fixture("baseline-schema3-sigstop.json")).expect("schema-3 fixture")
}

/// The schema-3 fixture with a WAL fsync p99 over etcd's 10 ms on m0 during the disruption,
/// and a few figures made unknown.
fn schema3_edited() -> Baseline {
    let mut b = schema3();
    let d = b.window_mut(WindowName::Disruption).expect("window");
    let m0 = d.health.get_mut("m0").expect("m0");
    m0.wal_fsync_p99_s = Some(0.012);
    m0.over.push(Flag {
        figure: "wal_fsync_p99_s".into(),
        value: 0.012,
        threshold: 0.010,
        source: "etcd docs".into(),
    });
    let m1 = b.window_mut(WindowName::AtRest).expect("window").health.get_mut("m1").expect("m1");
    m1.heartbeat_send_failures = None;
    m1.slow_read_indexes = None;
    m1.db_size_bytes = None;
    m1.quota_bytes = None;
    b
}

/// The health-table row of `member` in `window`, split into its cells.
fn health_row(table: &str, window: &str, member: &str) -> Vec<String> {
    table
        .lines()
        .map(|l| {
            l.split(" | ")
                .map(|c| c.trim_matches(|c| c == '|' || c == ' ').to_owned())
                .collect::<Vec<_>>()
        })
        .find(|cells| {
            cells.len() == 11
                && cells[1] == window
                && (cells[2] == member || cells[2].starts_with(&format!("{member} ")))
        })
        .unwrap_or_else(|| panic!("health row {window}/{member} in\n{table}"))
}

#[test]
fn schema3_shows_the_causes_and_a_health_table_with_flags_marked_and_unknowns_as_dashes() {
    let b = schema3_edited();
    let text = report::render(&[file(PathBuf::from("data/r/baseline.json"), b)], None);

    assert!(text.contains("elections (raft term) 1 (the SIGSTOP of m2) |"), "{text}");
    assert!(
        text.contains("elections (raft term) 0 |"),
        "no causes where there was no election: {text}"
    );
    assert!(text.contains(report::HEALTH_HEADER), "{text}");
    // The health table follows the window tables after a blank line, labelled as measured.
    let at = text
        .find(&format!("\n\n{}", report::MEASURED))
        .expect("a blank line before the health table");
    let (windows, health) = (&text[..at], &text[at + 2..]);
    assert!(!windows.contains("WAL fsync"));
    assert!(health.starts_with(report::MEASURED), "{health}");

    let m0 = health_row(health, "disruption", "m0");
    assert_eq!(m0[3], "1.00 ms / **12.0 ms ⚠ > 10.0 ms (etcd docs)** (2 fsyncs)");
    // The real flag of the fixture: the frozen leader's round trips while settling.
    let settle = health_row(health, "settle", "m0");
    assert_eq!(settle[5], "m2: **204 ms ⚠ > 150 ms (etcd mixin etcdMemberCommunicationSlow)**");
    // Unknown figures read "—", never 0.
    let m1 = health_row(health, "at_rest", "m1");
    assert_eq!(m1[3], "— (0 fsyncs)", "no fsync in the window: no quantile");
    assert_eq!((m1[6].as_str(), m1[9].as_str(), m1[10].as_str()), ("—", "—", "—"), "{m1:?}");
    assert_eq!((m1[7].as_str(), m1[8].as_str()), ("0", "0"), "known zeros stay 0");
    // Every member of every window, members sorted.
    let rows: Vec<(String, String)> = health
        .lines()
        .filter(|l| l.starts_with("| 2026"))
        .map(|l| l.split(" | ").collect::<Vec<_>>())
        .map(|c| (c[1].to_owned(), c[2].to_owned()))
        .collect();
    let want: Vec<(String, String)> = ["at_rest", "disruption", "settle"]
        .iter()
        .flat_map(|w| ["m0", "m1", "m2"].map(|m| (w.to_string(), m.to_owned())))
        .collect();
    assert_eq!(rows, want);
}

#[test]
fn split_votes_and_several_causes_are_listed_per_election() {
    let mut b = schema3();
    let d = b.window_mut(WindowName::Disruption).expect("window");
    let first = d.elections_detail[0].clone();
    d.elections_detail.push(ElectionDetail {
        term_from: 3,
        term_to: 5,
        old_leader: Some("m0".into()),
        leaderless_s: None,
        cause: Cause::Unreachable,
        cause_event: Some(EventRef {
            ts: first.after,
            source: leaderwatch::model::event::Source::Leaderwatch,
            member: "m0".into(),
            kind: leaderwatch::model::event::EventKind::Unreachable,
            detail: String::new(),
        }),
        ..first
    });
    d.elections = Some(3);
    let p = PathBuf::from("b.json");
    let text = report::render(&[file(p.clone(), b.clone())], None);
    assert!(
        text.contains("elections (raft term) 3 (the SIGSTOP of m2; unreachable m0, term 3 → 5) |"),
        "{text}"
    );

    let ms = measurements(&p, &b);
    let v = |f: &str| {
        ms.iter()
            .find(|m| m.window == "disruption" && m.member.is_empty() && m.figure == f)
            .unwrap_or_else(|| panic!("{f}"))
            .value
    };
    assert_eq!(v("elections_own_disruption"), Some(1.0));
    assert_eq!(v("elections_unreachable"), Some(2.0), "a split vote counts its terms");
    assert_eq!(v("elections_unexplained"), Some(0.0));
    assert_eq!(v("election_1_leaderless_s"), Some(0.0));
    assert_eq!(v("election_2_leaderless_s"), None);
    assert_eq!(v("leaderless_s_max"), None, "one unknown election makes the maximum unknown");
    let causes: f64 = CAUSES.iter().filter_map(|c| v(&format!("elections_{c}"))).sum();
    assert_eq!(Some(causes), v("elections"), "the causes add up to the raft-term delta");
}

const NO_CAUSES_BEFORE: &str = r#"| measurement | value | label | observation window | environment | source |
|---|---|---|---|---|---|
| leader changes at rest (>= 20 min idle): raw sum / reset-aware increase / elections | — | not yet measured | — | GKE Autopilot, dlock-gke | run `leaderwatch sitting --context <GKE context> --image <the image you pushed>` (docs/gke-sitting.md): it fills this table |
| leader changes after one drain-equivalent eviction: raw sum / reset-aware increase / elections | — | not yet measured | — | GKE Autopilot, dlock-gke | run `leaderwatch sitting --context <GKE context> --image <the image you pushed>` (docs/gke-sitting.md): it fills this table |
| time from member loss to a healthy 3-member endpoint list | — | not yet measured | — | GKE Autopilot, dlock-gke | run `leaderwatch sitting --context <GKE context> --image <the image you pushed>` (docs/gke-sitting.md): it fills this table |
| a lock unavailable during the eviction: longest with no holder able to take it, leases lost, safety | — | not yet measured | — | GKE Autopilot, dlock-gke | run `leaderwatch sitting --context <GKE context> --image <the image you pushed>` (docs/gke-sitting.md): it fills this table (the lock canary is on by default) |
| residual rate of elections at rest, per day with its 95% interval | — | not yet measured | — | GKE Autopilot, dlock-gke | after the sitting (and days of the continuous sampler), run `leaderwatch rate data/gke-*/baseline.json <sampler run directory>` |

Short rehearsals on local loopback (`leaderwatch rehearse`: minutes at rest, not the spec's 20, and a local signal instead of an eviction), for comparison:

| measurement | value | label | observation window | environment | source |
|---|---|---|---|---|---|
| leader changes at rest (60 s idle) | raw sum 3 → 3; reset-aware increase 0; elections (raft term) 0 | ASSUMPTION-free measurement | 2026-11-30 09:43:38Z – 09:44:38Z (60.0 s) | local loopback, etcd 3.5.1, 3 members | `data/rehearsal-leader-sigkill-20261130T094337Z/baseline.json` |
| leader changes from one disruption until healthy (local-sigkill, target m2 = leader) | raw sum 3 → 5; reset-aware increase 3; elections (raft term) 1 | ASSUMPTION-free measurement | 2026-11-30 09:44:38Z – 09:44:43Z (5.1 s) | local loopback, etcd 3.5.1, 3 members | `data/rehearsal-leader-sigkill-20261130T094337Z/baseline.json` |
| leader changes after recovery (30 s settle) | raw sum 5 → 5; reset-aware increase 0; elections (raft term) 0 | ASSUMPTION-free measurement | 2026-11-30 09:44:43Z – 09:45:13Z (30.0 s) | local loopback, etcd 3.5.1, 3 members | `data/rehearsal-leader-sigkill-20261130T094337Z/baseline.json` |
| time from member loss to a healthy 3-member endpoint list (local-sigkill, target m2 = leader) | 5.12 s (request → healthy 5.12 s); of which the member was kept down 5.01 s (exit → restart) | ASSUMPTION-free measurement | 2026-11-30 09:44:38Z – 09:44:43Z (5.1 s) | local loopback, etcd 3.5.1, 3 members | `data/rehearsal-leader-sigkill-20261130T094337Z/baseline.json` |
| residual rate of elections at rest (at_rest + settle windows of 1 sitting(s); `leaderwatch rate`) | 0 election(s) in 1m 30s of quiet exposure: 0 per day, 95% exact Poisson interval 0 – 3540.420 per day | ASSUMPTION-free measurement | 2026-11-30 09:43:38Z – 09:45:13Z (90 s quiet) | local loopback, etcd 3.5.1, 3 members | `data/rehearsal-leader-sigkill-20261130T094337Z/baseline.json` |"#;

/// As before, plus the residual-rate rows every report has had since (and GKE's lock row,
/// not yet measured, since #50) (its quiet windows,
/// 0 elections there: the one election is in the disruption window), in today's layout:
/// the spec's table first (GKE not yet measured), the label in its own column, the short
/// rehearsal in the second table. The sitting was recorded before member health and
/// causes (schema 2; migrated to 3 with them empty, #35): no health figures, and its
/// one election's cause is unknown, not 0.
#[test]
fn a_sitting_without_causes_or_health_renders_exactly_as_before() {
    let b = read::baseline(&fixture("baseline-sigkill-no-causes.json")).expect("fixture");
    let path = PathBuf::from("data/rehearsal-leader-sigkill-20261130T094337Z/baseline.json");
    let text = report::render(&[file(path.clone(), b.clone())], None);
    assert_eq!(text, NO_CAUSES_BEFORE);
    let ms = measurements(&path, &b);
    assert!(ms.iter().all(|m| m.member.is_empty()), "no member health");
    assert!(!ms.iter().any(|m| m.figure.starts_with("election_")), "no election details");
    for m in ms.iter().filter(|m| m.figure.starts_with("elections_")) {
        let want = if m.window == "disruption" { None } else { Some(0.0) };
        assert_eq!(m.value, want, "{} {}", m.window, m.figure);
    }
}

#[test]
fn rendering_is_deterministic_and_update_twice_changes_nothing() {
    let a = file(fixture("baseline-schema3-sigstop.json"), schema3_edited());
    let b = file(
        fixture("baseline-sigkill-no-causes.json"),
        read::baseline(&fixture("baseline-sigkill-no-causes.json")).expect("fixture"),
    );
    let one = report::render(&[a.clone(), b.clone()], None);
    assert_eq!(
        one,
        report::render(&[b.clone(), a.clone()], None),
        "runs by run id, whatever the argument order"
    );
    assert_eq!(
        report::render_csv(&[a.clone(), b.clone()]).expect("csv"),
        report::render_csv(&[b.clone(), a.clone()]).expect("csv")
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let readme = dir.path().join("README.md");
    std::fs::write(&readme, format!("# x\n{}\nold\n{}\ntail\n", report::BEGIN, report::END))
        .expect("write");
    assert!(update(&readme, &[a.clone(), b.clone()]), "first run writes");
    let once = std::fs::read_to_string(&readme).expect("read");
    assert!(!update(&readme, &[b, a]), "second run changes nothing");
    assert_eq!(std::fs::read_to_string(&readme).expect("read"), once);
    let inside =
        &once[once.find(report::BEGIN).expect("begin")..once.find(report::END).expect("end")];
    assert!(
        inside.contains(report::HEALTH_HEADER) && inside.contains("**12.0 ms ⚠"),
        "both tables between the markers"
    );
    assert!(once.ends_with(&format!("{}\ntail\n", report::END)));
}

fn csv_rows(text: &str) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let headers: Vec<String> = r.headers().expect("header").iter().map(str::to_owned).collect();
    let rows = r
        .records()
        .map(|rec| {
            headers.iter().cloned().zip(rec.expect("row").iter().map(str::to_owned)).collect()
        })
        .collect();
    (headers, rows)
}

type Key = (String, String, String);

fn key(window: &str, member: &str, figure: &str) -> Key {
    (window.to_owned(), member.to_owned(), figure.to_owned())
}

#[test]
fn csv_and_compare_carry_the_health_figures_from_the_same_list() {
    let path = fixture("baseline-schema3-sigstop.json");
    let b = schema3_edited();
    let ms: Vec<Measurement> = measurements(&path, &b);
    let (headers, mut rows) =
        csv_rows(&report::render_csv(&[file(path.clone(), b.clone())]).expect("csv"));
    // The residual rate's rows come last (window `quiet`, from rate.rs, tests/check/rate_cli.rs).
    let rate_rows = rows.iter().filter(|r| r["window"] == "quiet").count();
    assert!(
        rate_rows >= 5 && rows.iter().rev().take(rate_rows).all(|r| r["label"] == "residual rate")
    );
    rows.retain(|r| r["window"] != "quiet");
    assert_eq!(
        headers.join(","),
        "run_id,source,environment,window,member,figure,value,unit,threshold,threshold_source,over,label,note,window_start,window_end,window_s,target_role",
        "the columns documented on report::Measurement"
    );
    assert_eq!(rows.len(), ms.len(), "one CSV row per measurement");

    let flagged = rows
        .iter()
        .find(|r| {
            r["window"] == "disruption" && r["member"] == "m0" && r["figure"] == "wal_fsync_p99_s"
        })
        .expect("m0's WAL fsync p99 in the CSV");
    assert_eq!(
        (flagged["value"].as_str(), flagged["threshold"].as_str(), flagged["over"].as_str()),
        ("0.012", "0.01", "true")
    );
    let unknown = rows
        .iter()
        .find(|r| {
            r["window"] == "at_rest"
                && r["member"] == "m1"
                && r["figure"] == "heartbeat_send_failures"
        })
        .expect("row");
    assert_eq!(unknown["value"], "", "unknown is empty, not 0");
    let cause = rows
        .iter()
        .find(|r| r["window"] == "disruption" && r["figure"] == "election_1_leaderless_s")
        .expect("election row");
    assert_eq!(cause["note"], "the SIGSTOP of m2");
    assert!(rows.iter().any(|r| r["figure"] == "peer_rtt_p99_s{m2}"
        && r["member"] == "m0"
        && r["over"] == "true"));
    assert!(rows.iter().any(|r| r["figure"] == "elections_own_disruption"
        && r["window"] == "disruption"
        && r["value"] == "1.0"));

    // compare of a file with itself: every (window, member, figure) of the CSV, difference 0.
    let diffs = compare(&ms, &ms);
    let csv_keys: BTreeSet<Key> =
        rows.iter().map(|r| key(&r["window"], &r["member"], &r["figure"])).collect();
    let cmp_keys: BTreeSet<Key> =
        diffs.iter().map(|d| key(&d.window, &d.member, &d.figure)).collect();
    assert_eq!(csv_keys, cmp_keys);
    assert_eq!(csv_keys.len(), rows.len(), "each key once");
    for d in &diffs {
        assert_eq!(d.a, d.b, "{d:?}");
        assert_eq!(d.diff, d.a.map(|_| 0.0), "{d:?}");
    }
    assert!(cmp_keys.contains(&key("settle", "m2", "restarts")));
}

#[test]
fn the_cli_compare_and_csv_agree_on_the_figures() {
    let bin = env!("CARGO_BIN_EXE_leaderwatch");
    let f = fixture("baseline-schema3-sigstop.json");
    let o = std::process::Command::new(bin)
        .arg("compare")
        .arg(&f)
        .arg(&f)
        .args(["-o", "json"])
        .output()
        .expect("compare");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let diffs: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).expect("json");
    let o = std::process::Command::new(bin)
        .arg("report")
        .arg(&f)
        .args(["--format", "csv"])
        .output()
        .expect("report");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let (_, rows) = csv_rows(&String::from_utf8_lossy(&o.stdout));
    let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let cmp: BTreeSet<Key> =
        diffs.iter().map(|d| (s(&d["window"]), s(&d["member"]), s(&d["figure"]))).collect();
    // compare matches one run's figures; the residual rate (window `quiet`) pools runs.
    let csv: BTreeSet<Key> = rows
        .iter()
        .filter(|r| r["window"] != "quiet")
        .map(|r| key(&r["window"], &r["member"], &r["figure"]))
        .collect();
    assert_eq!(cmp, csv);
    assert!(diffs.iter().all(|d| d["diff"].is_null() || d["diff"].as_f64() == Some(0.0)));
    assert!(cmp.contains(&key("disruption", "m2", "heartbeat_send_failures")));

    // The text table puts a member's figure under `window / member`.
    let o =
        std::process::Command::new(bin).arg("compare").arg(&f).arg(&f).output().expect("compare");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("| disruption / m2 | heartbeat_send_failures | 2 | 2 | +0 |"), "{text}");
    assert!(text.contains("| disruption | elections_own_disruption | 1 | 1 | +0 |"), "{text}");
}

/// Regression: a sitting on the local control plane is environment.kind "kubernetes", and
/// its rows made the GKE rows ("not yet measured" with the command) disappear as if GKE
/// had been measured. They stay until a GKE baseline is given.
/// A baseline with the lock canary: the report's lock row and the CSV's `lock` figures
/// come from its `windows[].lock`, each election's `lock_unavailable_s` and the run's
/// `lock_safety`; a broken verdict is said as broken.
#[test]
fn the_lock_row_says_what_an_election_cost_a_lock_and_the_safety_verdict() {
    let path = fixture("baseline-lock-sigkill.json");
    let b = read::baseline(&path).expect("lock fixture");
    let table = report::render(&[file(path.clone(), b.clone())], None);
    let row = table
        .lines()
        .find(|l| l.starts_with("| a lock unavailable during the disruption"))
        .unwrap_or_else(|| panic!("a lock row in\n{table}"));
    for part in [
        "(lock canary, local-sigkill, target m1 = leader)",
        "2.01 s longest with no holder able to take the lock (usual hand-over 9.56 ms)",
        "per election 2.01 s (the SIGKILL of m1)",
        "29 grants, 0 leases lost (0 while held)",
        "safety over the run held: 165 grants checked, 1 without a recorded end",
    ] {
        assert!(row.contains(part), "{part:?} in {row}");
    }
    let (_, rows) = csv_rows(&report::render_csv(&[file(path.clone(), b.clone())]).expect("csv"));
    let get = |window: &str, figure: &str| -> String {
        rows.iter()
            .find(|r| r["window"] == window && r["figure"] == figure)
            .map(|r| r["value"].clone())
            .unwrap_or_else(|| panic!("{window}/{figure} in the CSV"))
    };
    assert_eq!(get("lock", "election_1_lock_unavailable_s"), "2.011518079");
    assert_eq!(get("lock", "lock_safety_violations"), "0.0");
    assert_eq!(get("lock", "leases_lost"), "0.0");
    assert_eq!(get("disruption", "lock_acquire_failures"), "5.0");
    assert_eq!(get("settle", "lock_grants"), "136.0");
    assert!(
        !rows.iter().any(|r| r["window"] == "at_rest" && r["figure"].starts_with("lock_")),
        "no lock canary at rest: no lock figures there"
    );

    let mut broken = b.clone();
    let s = broken.lock_safety.as_mut().expect("lock_safety");
    s.verdict = leaderwatch::model::lock::Verdict::Broken;
    s.overlaps.push("planted".to_owned());
    let table = report::render(&[file(path.clone(), broken.clone())], None);
    assert!(table.contains("safety over the run broken: 165 grants checked"), "{table}");
    let (_, rows) = csv_rows(&report::render_csv(&[file(path, broken)]).expect("csv"));
    assert!(rows.iter().any(|r| r["figure"] == "lock_safety_violations"
        && r["value"] == "1.0"
        && r["note"].starts_with("broken")));
}

#[test]
fn a_local_control_plane_sitting_leaves_the_gke_rows_not_yet_measured() {
    let mut b = schema3();
    b.environment.kind = EnvironmentKind::Kubernetes;
    b.environment.description =
        "local control plane, Kubernetes v1.35.4, etcd 3.6.14, 3 members".into();
    let table = report::render(&[file(fixture("baseline-schema3-sigstop.json"), b.clone())], None);
    assert!(
        table.contains("| GKE Autopilot, dlock-gke |") && table.contains("not yet measured"),
        "{table}"
    );
    b.environment.description = "GKE Autopilot, dlock-gke, 3 members".into();
    let table = report::render(&[file(fixture("baseline-schema3-sigstop.json"), b)], None);
    assert!(!table.contains("not yet measured"), "a GKE baseline replaces them: {table}");
}

/// `report --update` as main.rs does it: the file's I/O, the text from render.
fn update(readme: &Path, baselines: &[BaselineFile]) -> bool {
    leaderwatch::io::readme::rewrite(readme, |text, dir| report::updated(text, dir, baselines))
        .expect("update")
}
