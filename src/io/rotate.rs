//! Daily files for a run directory that lives for months (`sample`): the live file keeps
//! its plain name (`samples.csv`), a UTC day that is over becomes `samples-YYYY-MM-DD.csv`,
//! then `samples-YYYY-MM-DD.csv.gz`, and whole files older than the retention are
//! deleted. Each step is a rename or a complete new file, so a crash at any point leaves
//! every row in exactly one file, and the next start finishes the step.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use chrono::NaiveDate;

/// How a run directory is rotated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Closed days kept, counting back from the live day: with 30, the files of the 30
    /// days before it are kept and older ones deleted.
    pub retain_days: u32,
}

/// `samples.csv` -> `samples-2026-11-30.csv` (`-2`, `-3`... if a clock step back made
/// that day's file exist already).
pub fn closed_name(live: &str, day: NaiveDate, n: u32) -> String {
    let stem = live.strip_suffix(".csv").unwrap_or(live);
    if n <= 1 { format!("{stem}-{day}.csv") } else { format!("{stem}-{day}-{n}.csv") }
}

/// The live file's name and day of a closed file's name, `.csv` or `.csv.gz`.
pub fn parse_closed(name: &str) -> Option<(String, NaiveDate, bool)> {
    let (base, gz) = match name.strip_suffix(".csv.gz") {
        Some(b) => (b, true),
        None => (name.strip_suffix(".csv")?, false),
    };
    // stem-YYYY-MM-DD, or stem-YYYY-MM-DD-N
    let split = |head: &str| -> Option<(String, NaiveDate)> {
        // A file name in the directory may be anything: cut only on a char boundary.
        let (stem, dash_day) =
            head.split_at(head.len().checked_sub(11).filter(|c| head.is_char_boundary(*c))?);
        let day = NaiveDate::parse_from_str(dash_day.strip_prefix('-')?, "%Y-%m-%d").ok()?;
        (!stem.is_empty()).then(|| (stem.to_owned(), day))
    };
    let (stem, day) = split(base).or_else(|| {
        let (head, n) = base.rsplit_once('-')?;
        n.parse::<u32>().ok().and_then(|_| split(head))
    })?;
    Some((format!("{stem}.csv"), day, gz))
}

/// The day of the rows in a live file: its first row's timestamp (rows are written in
/// time order and a file is closed when the day changes). `None`: no row yet.
pub fn first_row_day(text: &[u8]) -> Option<NaiveDate> {
    let mut lines = text.split(|b| *b == b'\n');
    lines.next()?; // header
    let row = lines.next()?;
    let day = std::str::from_utf8(row.get(..10)?).ok()?;
    NaiveDate::parse_from_str(day, "%Y-%m-%d").ok()
}

/// Renames the live file `dir/live` (rows of `day`) to its closed name; returns it.
pub fn close(dir: &Path, live: &str, day: NaiveDate) -> io::Result<PathBuf> {
    let mut n = 1;
    let target = loop {
        let name = closed_name(live, day, n);
        if !dir.join(&name).exists() && !dir.join(format!("{name}.gz")).exists() {
            break dir.join(name);
        }
        n += 1;
    };
    fs::rename(dir.join(live), &target)?;
    sync_dir(dir);
    Ok(target)
}

/// What one housekeeping pass did, for events.csv.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Done {
    /// (closed file, its size, the .gz written, its size).
    pub compressed: Vec<(PathBuf, u64, PathBuf, u64)>,
    pub deleted: Vec<PathBuf>,
    /// Steps that failed; the files stay as they were and the next pass tries again.
    pub failed: Vec<String>,
}

/// Compresses every closed `.csv` of the live files `lives` and deletes closed files
/// older than `retain_days` before `today`. Leftover temporary files of a pass that was
/// cut short are removed first.
pub fn housekeep(dir: &Path, lives: &[&str], today: NaiveDate, rot: Rotation) -> Done {
    let mut done = Done::default();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            done.failed.push(format!("{}: {e}", dir.display()));
            return done;
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let oldest_kept = today - chrono::Days::new(u64::from(rot.retain_days));
    for name in &names {
        let path = dir.join(name);
        if name.starts_with('.') && name.ends_with(".gz.tmp") {
            let _ = fs::remove_file(&path);
            continue;
        }
        let Some((live, day, gz)) = parse_closed(name) else { continue };
        if !lives.contains(&live.as_str()) {
            continue;
        }
        if day < oldest_kept {
            match fs::remove_file(&path) {
                Ok(()) => done.deleted.push(path),
                Err(e) => done.failed.push(format!("{}: {e}", path.display())),
            }
            continue;
        }
        if !gz {
            match gzip(&path) {
                Ok((from, to, to_len)) => done.compressed.push((path, from, to, to_len)),
                Err(e) => done.failed.push(format!("{}: {e}", path.display())),
            }
        }
    }
    sync_dir(dir);
    done
}

/// `x.csv` -> `x.csv.gz` through a hidden temporary file, fsynced, then the `.csv` is
/// removed: at every instant one complete copy exists under a name a reader knows. A
/// `.gz` already there (a pass cut between rename and remove) is rewritten from the
/// `.csv`, which is the whole file.
fn gzip(path: &Path) -> io::Result<(u64, PathBuf, u64)> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{name}.gz.tmp"));
    let out = dir.join(format!("{name}.gz"));
    let from = fs::metadata(path)?.len();
    let mut enc = flate2::write::GzEncoder::new(
        BufWriter::new(File::create(&tmp)?),
        flate2::Compression::default(),
    );
    io::copy(&mut BufReader::new(File::open(path)?), &mut enc)?;
    let mut w = enc.finish()?;
    w.flush()?;
    let f = w.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()?;
    let to_len = f.metadata()?.len();
    fs::rename(&tmp, &out)?;
    sync_dir(dir);
    fs::remove_file(path)?;
    Ok((from, out, to_len))
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all(); // best effort: not every filesystem syncs directories
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn day(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("date")
    }

    #[test]
    fn closed_names_parse_back() {
        let d = day("2026-11-30");
        for n in [1, 2, 13] {
            let name = closed_name("samples.csv", d, n);
            assert_eq!(parse_closed(&name), Some(("samples.csv".into(), d, false)), "{name}");
            assert_eq!(parse_closed(&format!("{name}.gz")), Some(("samples.csv".into(), d, true)));
        }
        assert_eq!(parse_closed("samples.csv"), None);
        assert_eq!(parse_closed("events.csv"), None);
        assert_eq!(parse_closed("samples-2026-13-01.csv"), None);
        assert_eq!(parse_closed("ééééééé.csv"), None, "not cut inside a character");
    }

    #[test]
    fn first_row_day_reads_the_first_row() {
        assert_eq!(
            first_row_day(b"ts,a\n2026-11-30T23:59:59.900Z,1\n2026-12-01T00:00:00.100Z,2\n"),
            Some(day("2026-11-30"))
        );
        assert_eq!(first_row_day(b"ts,a\n"), None);
        assert_eq!(first_row_day(b""), None);
    }

    #[test]
    fn housekeeping_compresses_keeps_and_deletes_whole_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        let body = "ts,x\n2026-11-29T00:00:00.000Z,1\n".repeat(50);
        fs::write(p.join("samples-2026-11-29.csv"), &body).expect("write");
        // A pass cut between the .gz's rename and the .csv's removal: the .csv is whole.
        fs::write(p.join("samples-2026-11-29.csv.gz"), b"stale").expect("write");
        fs::write(p.join("samples-2026-10-01.csv.gz"), b"old").expect("write");
        fs::write(p.join("health-2026-10-30.csv.gz"), b"kept: 31 days before").expect("write");
        fs::write(p.join("health-2026-10-29.csv.gz"), b"deleted: 32 days before").expect("write");
        fs::write(p.join("other-2026-01-01.csv"), b"not ours").expect("write");
        fs::write(p.join(".samples-2026-11-28.csv.gz.tmp"), b"torn").expect("write");
        fs::write(p.join("samples.csv"), b"ts,x\n").expect("write");
        let done = housekeep(
            p,
            &["samples.csv", "health.csv"],
            day("2026-11-30"),
            Rotation { retain_days: 31 },
        );
        assert!(done.failed.is_empty(), "{:?}", done.failed);
        let mut left: Vec<String> = fs::read_dir(p)
            .expect("ls")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "health-2026-10-30.csv.gz",
                "other-2026-01-01.csv",
                "samples-2026-11-29.csv.gz",
                "samples.csv"
            ]
        );
        let mut back = String::new();
        flate2::read::GzDecoder::new(
            File::open(p.join("samples-2026-11-29.csv.gz")).expect("open"),
        )
        .read_to_string(&mut back)
        .expect("gunzip");
        assert_eq!(back, body);
        assert_eq!(done.deleted.len(), 2);
        assert_eq!(done.compressed.len(), 1);
    }

    #[test]
    fn close_never_overwrites_a_closed_day() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        let d = day("2026-11-30");
        fs::write(p.join("samples-2026-11-30.csv.gz"), b"first").expect("write");
        fs::write(p.join("samples.csv"), b"second").expect("write");
        let to = close(p, "samples.csv", d).expect("close");
        assert_eq!(to, p.join("samples-2026-11-30-2.csv"));
        assert_eq!(fs::read(p.join("samples-2026-11-30.csv.gz")).expect("read"), b"first");
        assert!(!p.join("samples.csv").exists());
    }
}
