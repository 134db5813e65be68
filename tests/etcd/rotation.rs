//! `sample`'s daily files on a real local cluster, with the wall clock injected just
//! before midnight UTC: one run crosses the day boundary, a restart resumes the live file,
//! a restart a day later closes it first. No row is lost or written twice, every closed day
//! is one gzip file, and files older than the retention are deleted whole.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use leaderwatch::io::rotate::Rotation;
use leaderwatch::model::clock::Clock;
use leaderwatch::model::summary::Summary;
use support::{cluster, events, sample_config, sleep, start_sampler_with};

/// The system clock moved by an offset the test sets (the monotonic clock is untouched).
struct Shifted {
    offset_ms: AtomicI64,
}

impl Clock for Shifted {
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::milliseconds(self.offset_ms.load(Ordering::SeqCst))
    }
}

type Row = BTreeMap<String, String>;

fn read_rows(path: &Path) -> Vec<Row> {
    let mut text = String::new();
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(f)
            .read_to_string(&mut text)
            .unwrap_or_else(|e| panic!("gunzip {}: {e}", path.display()));
    } else {
        std::io::BufReader::new(f).read_to_string(&mut text).expect("read");
    }
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let h = r.headers().expect("header").clone();
    r.records()
        .map(|rec| {
            h.iter()
                .zip(rec.expect("row").iter())
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .collect()
        })
        .collect()
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

/// The three days the runs touch: the day the clock starts on, the next (run 1 crosses into
/// it), and the day after (run 3's restart).
struct Days {
    d0: NaiveDate,
    d1: NaiveDate,
    d2: NaiveDate,
}

/// Files of earlier runs the housekeeping must sort: one past the retention (30 days before
/// the last run's day), one inside it, and a file that is not ours.
struct Earlier {
    old: String,
    kept: String,
    foreign: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_loses_and_repeats_no_row_across_midnight_and_restarts() {
    let f = cluster().await;
    let dir = f.out.path().to_owned();
    let clock = clock_before_midnight(Duration::from_millis(1500));
    let d0: NaiveDate = clock.now().date_naive();
    let days = Days { d0, d1: d0 + chrono::Days::new(1), d2: d0 + chrono::Days::new(2) };
    let earlier = Earlier {
        old: format!("samples-{}.csv.gz", days.d2 - chrono::Days::new(31)),
        kept: format!("samples-{}.csv.gz", days.d0 - chrono::Days::new(10)),
        foreign: "notes-2020-01-01.csv".to_owned(),
    };
    for n in [&earlier.old, &earlier.kept, &earlier.foreign] {
        std::fs::write(dir.join(n), b"earlier").expect("write");
    }

    let runs = three_runs(&f, &clock).await;

    let files = names(&dir);
    files_are_the_days_and_the_kept(&files, &days, &earlier);
    let seen = every_row_once_in_its_day(&dir, &days);
    every_round_of_every_run_once(&f, &runs, &seen);
    health_rotates_the_same_way(&dir, &files, &days);
    events_say_what_housekeeping_did(&dir, &days, &earlier);
}

/// A system clock that reads `before` short of the next midnight UTC now.
fn clock_before_midnight(before: Duration) -> Arc<Shifted> {
    let midnight = (Utc::now().date_naive() + chrono::Days::new(1))
        .and_hms_opt(0, 0, 0)
        .expect("midnight")
        .and_utc();
    let before = chrono::Duration::from_std(before).expect("duration");
    Arc::new(Shifted {
        offset_ms: AtomicI64::new((midnight - before - Utc::now()).num_milliseconds()),
    })
}

/// 1: across midnight, inside one run; 2: a restart on the same day resumes the live file;
/// 3: a restart a day later, which closes the live file of the day before first.
async fn three_runs(f: &support::Fixture, clock: &Arc<Shifted>) -> [Summary; 3] {
    let run = |clock: &Arc<Shifted>| {
        let mut cfg = sample_config(f, Duration::from_millis(200), Duration::from_secs(1));
        cfg.rotation = Some(Rotation { retain_days: 30 });
        start_sampler_with(cfg, clock.clone())
    };
    let r = run(clock);
    sleep(3200).await;
    let s1 = r.stop().await;
    let r = run(clock);
    sleep(1000).await;
    let s2 = r.stop().await;
    clock.offset_ms.fetch_add(86_400_000, Ordering::SeqCst);
    let r = run(clock);
    sleep(1000).await;
    let s3 = r.stop().await;
    [s1, s2, s3]
}

fn files_are_the_days_and_the_kept(files: &BTreeSet<String>, days: &Days, earlier: &Earlier) {
    let Days { d0, d1, .. } = days;
    for want in [
        format!("samples-{d0}.csv.gz"),
        format!("samples-{d1}.csv.gz"),
        "samples.csv".to_owned(),
        earlier.kept.clone(),
        earlier.foreign.clone(),
    ] {
        assert!(files.contains(&want), "{want} in {files:?}");
    }
    let old = &earlier.old;
    assert!(!files.contains(old), "{old} (31 days before the live day) deleted: {files:?}");
    // Regression: two days closed at one start (samples and health) once left the second
    // uncompressed, its pass dropped while the first ran.
    let closed_raw = |n: &String| {
        ["samples-", "health-", "canary-"].iter().any(|p| n.starts_with(p)) && n.ends_with(".csv")
    };
    assert!(
        !files.iter().any(|n| n.ends_with(".tmp") || closed_raw(n)),
        "no temporary or uncompressed closed file: {files:?}"
    );
}

/// (run id, round, member) → the file the row is in.
type Seen = BTreeMap<(String, u64, String), String>;

/// Every row once, in the file of the day its round started.
fn every_row_once_in_its_day(dir: &Path, days: &Days) -> Seen {
    let Days { d0, d1, d2 } = *days;
    let mut seen = Seen::new();
    for (file, day) in [
        (format!("samples-{d0}.csv.gz"), d0),
        (format!("samples-{d1}.csv.gz"), d1),
        ("samples.csv".to_owned(), d2),
    ] {
        let rows = read_rows(&dir.join(&file));
        assert!(!rows.is_empty(), "{file} has rows");
        for row in rows {
            let ts: DateTime<Utc> = row["ts"].parse().expect("ts");
            // A row's ts is its answer's time: the last round of a day may answer just after midnight.
            assert!(
                ts.date_naive() == day
                    || (ts.date_naive() == day + chrono::Days::new(1)
                        && ts.time() < chrono::NaiveTime::from_hms_opt(0, 0, 2).expect("time")),
                "{file}: row at {ts}"
            );
            let key = (
                row["run_id"].clone(),
                row["round"].parse().expect("round"),
                row["member"].clone(),
            );
            if let Some(other) = seen.insert(key.clone(), file.clone()) {
                panic!("{key:?} written twice: {other} and {file}");
            }
        }
    }
    seen
}

fn every_round_of_every_run_once(f: &support::Fixture, runs: &[Summary; 3], seen: &Seen) {
    for s in runs {
        for m in f.cluster.members() {
            let rounds: Vec<u64> = seen
                .keys()
                .filter(|(r, _, mm)| r == &s.run_id && mm == &m.name.0)
                .map(|(_, i, _)| *i)
                .collect();
            assert_eq!(
                rounds,
                (0..s.rounds).collect::<Vec<_>>(),
                "run {} member {}: every round once",
                s.run_id,
                m.name
            );
        }
    }
    let total: u64 = runs.iter().map(|s| s.rounds).sum();
    assert_eq!(seen.len() as u64, total * 3, "no row lost");
    let across: BTreeSet<&String> =
        seen.iter().filter(|((r, _, _), _)| r == &runs[0].run_id).map(|(_, f)| f).collect();
    assert_eq!(across.len(), 2, "run 1 crossed midnight: its rows are in two files");
}

/// health.csv's rows so far were written after midnight (at the end of runs 1 and 2), so
/// day 1 is closed and the live file has only the last day.
fn health_rotates_the_same_way(dir: &Path, files: &BTreeSet<String>, days: &Days) {
    assert!(files.contains(&format!("health-{}.csv.gz", days.d1)), "{files:?}");
    for row in read_rows(&dir.join("health.csv")) {
        assert_eq!(
            row["ts"].get(..10),
            Some(days.d2.to_string().as_str()),
            "live health.csv holds the last day only"
        );
    }
}

fn events_say_what_housekeeping_did(dir: &Path, days: &Days, earlier: &Earlier) {
    let ev = events(dir);
    let kinds = |k: &str| {
        ev.iter().filter(|e| e["kind"] == k).map(|e| e["detail"].clone()).collect::<Vec<_>>()
    };
    assert_eq!(
        kinds("rotated").iter().filter(|d| d.starts_with("samples.csv")).count(),
        2,
        "{:?}",
        kinds("rotated")
    );
    assert!(kinds("deleted").iter().any(|d| d.starts_with(&earlier.old)), "{:?}", kinds("deleted"));
    assert!(
        kinds("compressed").iter().any(|d| d.starts_with(&format!("samples-{}.csv", days.d0))),
        "{:?}",
        kinds("compressed")
    );
    assert!(kinds("housekeeping_failed").is_empty());
}
