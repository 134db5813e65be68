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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_loses_and_repeats_no_row_across_midnight_and_restarts() {
    let f = cluster().await;
    let dir = f.out.path().to_owned();
    // 1.5 s before the next midnight UTC.
    let midnight = (Utc::now().date_naive() + chrono::Days::new(1))
        .and_hms_opt(0, 0, 0)
        .expect("midnight")
        .and_utc();
    let clock = Arc::new(Shifted {
        offset_ms: AtomicI64::new(
            (midnight - chrono::Duration::milliseconds(1500) - Utc::now()).num_milliseconds(),
        ),
    });
    let d0: NaiveDate = clock.now().date_naive();
    let (d1, d2) = (d0 + chrono::Days::new(1), d0 + chrono::Days::new(2));
    // Files of earlier runs: one past the retention (30 days before the last run's day),
    // one inside it, and a file that is not ours.
    let old = format!("samples-{}.csv.gz", d2 - chrono::Days::new(31));
    let kept = format!("samples-{}.csv.gz", d0 - chrono::Days::new(10));
    for n in [&old, &kept, &"notes-2020-01-01.csv".to_owned()] {
        std::fs::write(dir.join(n), b"earlier").expect("write");
    }

    let run = |clock: &Arc<Shifted>| {
        let mut cfg = sample_config(&f, Duration::from_millis(200), Duration::from_secs(1));
        cfg.rotation = Some(Rotation { retain_days: 30 });
        start_sampler_with(cfg, clock.clone())
    };
    // 1: across midnight, inside one run.
    let r = run(&clock);
    sleep(3200).await;
    let s1 = r.stop().await;
    // 2: a restart on the same day resumes the live file.
    let r = run(&clock);
    sleep(1000).await;
    let s2 = r.stop().await;
    // 3: a restart a day later: the live file of the day before is closed first.
    clock.offset_ms.fetch_add(86_400_000, Ordering::SeqCst);
    let r = run(&clock);
    sleep(1000).await;
    let s3 = r.stop().await;

    let files = names(&dir);
    for want in [
        format!("samples-{d0}.csv.gz"),
        format!("samples-{d1}.csv.gz"),
        "samples.csv".to_owned(),
        kept.clone(),
        "notes-2020-01-01.csv".to_owned(),
    ] {
        assert!(files.contains(&want), "{want} in {files:?}");
    }
    assert!(!files.contains(&old), "{old} (31 days before the live day) deleted: {files:?}");
    // Regression: two days closed at one start (samples and health) once left the second
    // uncompressed, its pass dropped while the first ran.
    let closed_raw = |n: &String| {
        ["samples-", "health-", "canary-"].iter().any(|p| n.starts_with(p)) && n.ends_with(".csv")
    };
    assert!(
        !files.iter().any(|n| n.ends_with(".tmp") || closed_raw(n)),
        "no temporary or uncompressed closed file: {files:?}"
    );

    // Every row once, in the file of the day its round started.
    let mut seen: BTreeMap<(String, u64, String), String> = BTreeMap::new();
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
    for s in [&s1, &s2, &s3] {
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
    assert_eq!(seen.len() as u64, (s1.rounds + s2.rounds + s3.rounds) * 3, "no row lost");
    let across: BTreeSet<&String> =
        seen.iter().filter(|((r, _, _), _)| r == &s1.run_id).map(|(_, f)| f).collect();
    assert_eq!(across.len(), 2, "run 1 crossed midnight: its rows are in two files");

    // health.csv rotates the same way: its rows so far were written after midnight (at the
    // end of runs 1 and 2), so day 1 is closed and the live file has only the last day.
    assert!(files.contains(&format!("health-{d1}.csv.gz")), "{files:?}");
    for row in read_rows(&dir.join("health.csv")) {
        assert_eq!(
            row["ts"].get(..10),
            Some(d2.to_string().as_str()),
            "live health.csv holds the last day only"
        );
    }

    let ev = events(&dir);
    let kinds = |k: &str| {
        ev.iter().filter(|e| e["kind"] == k).map(|e| e["detail"].clone()).collect::<Vec<_>>()
    };
    assert_eq!(
        kinds("rotated").iter().filter(|d| d.starts_with("samples.csv")).count(),
        2,
        "{:?}",
        kinds("rotated")
    );
    assert!(kinds("deleted").iter().any(|d| d.starts_with(&old)), "{:?}", kinds("deleted"));
    assert!(
        kinds("compressed").iter().any(|d| d.starts_with(&format!("samples-{d0}.csv"))),
        "{:?}",
        kinds("compressed")
    );
    assert!(kinds("housekeeping_failed").is_empty());
}
