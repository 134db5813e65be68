//! A run directory carried whole through a pod's log: what `leaderwatch sitting` uses to
//! bring a sitting's files back from its volume with nothing but the Kubernetes API.
//!
//! The sitting Job writes [`SUMS`] (sha256sum's format) beside its files as its last act
//! (`measure --checksums`). `leaderwatch pack DIR`, run in a pod that mounts the volume,
//! prints the directory as a gzipped tar, base64 in lines between [`BEGIN`] and [`END`]
//! (the end line carries the archive's own SHA-256). [`unpack`] finds that block in the
//! log, checks the archive, extracts it into a new directory and checks every file against
//! the Job's [`SUMS`]: a copy that is not byte for byte the volume's is an error, never a
//! result. A run directory is flat (the files of one sitting); anything else is refused.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

use crate::io::InputError;

/// The checksums of a run directory's files, written by the Job.
pub const SUMS: &str = "SHA256SUMS";
/// The lines around the archive in the log.
pub const BEGIN: &str = "-----BEGIN LEADERWATCH RUN-----";
pub const END: &str = "-----END LEADERWATCH RUN-----";
/// Base64 characters per log line: far below any log line limit.
const LINE: usize = 76;

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_file(p: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(p)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(hex(&h.finalize()));
        }
        h.update(&buf[..n]);
    }
}

/// The regular files of a run directory (not [`SUMS`]), by name; a subdirectory or a
/// special file is an error (a run directory holds neither).
fn files(dir: &Path) -> Result<Vec<String>, InputError> {
    let rd = std::fs::read_dir(dir).map_err(|e| InputError::new(dir, e))?;
    let mut names = Vec::new();
    for e in rd {
        let e = e.map_err(|e| InputError::new(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let t = e.file_type().map_err(|err| InputError::new(&dir.join(&name), err))?;
        if !t.is_file() {
            return Err(InputError::new(
                &dir.join(&name),
                "not a regular file (a run directory is flat)",
            ));
        }
        if name != SUMS {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Writes [`SUMS`] for every file of `dir` (atomically: a temporary file renamed).
pub fn write_sums(dir: &Path) -> Result<(), String> {
    let mut text = String::new();
    for name in files(dir).map_err(|e| e.to_string())? {
        let sum = sha256_file(&dir.join(&name))
            .map_err(|e| format!("{}: {e}", dir.join(&name).display()))?;
        text.push_str(&format!("{sum}  {name}\n"));
    }
    let tmp = dir.join(format!(".{SUMS}.tmp"));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, dir.join(SUMS)))
        .map_err(|e| format!("{}: {e}", dir.join(SUMS).display()))
}

/// The sums a [`SUMS`] file lists, by file name.
fn parse_sums(text: &str) -> Result<Vec<(String, String)>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (sum, name) =
                l.split_once("  ").ok_or_else(|| format!("{SUMS}: bad line {l:?}"))?;
            if sum.len() != 64 || !sum.bytes().all(|b| b.is_ascii_hexdigit()) || name.contains('/')
            {
                return Err(format!("{SUMS}: bad line {l:?}"));
            }
            Ok((name.to_owned(), sum.to_ascii_lowercase()))
        })
        .collect()
}

/// Why a run directory could not be packed: a file of it unreadable, or the output
/// (stdout) unwritable.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("stdout: {0}")]
    Output(std::io::Error),
}

/// Prints `dir` as the archive block: [`BEGIN`], base64 lines of a gzipped tar of its
/// files ([`SUMS`] included when the Job wrote it), `END <sha256 of the archive>`.
pub fn pack(dir: &Path, out: &mut impl Write) -> Result<(), PackError> {
    let mut names = files(dir)?;
    if dir.join(SUMS).is_file() {
        names.push(SUMS.to_owned());
    }
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for name in &names {
        tar.append_path_with_name(dir.join(name), name)
            .map_err(|e| InputError::new(&dir.join(name), e))?;
    }
    let bytes = tar.into_inner().and_then(|gz| gz.finish()).map_err(|e| InputError::new(dir, e))?;
    let b64 = STANDARD.encode(&bytes);
    let mut text = String::with_capacity(b64.len() + b64.len() / LINE + 200);
    text.push_str(BEGIN);
    text.push('\n');
    for chunk in b64.as_bytes().chunks(LINE) {
        text.push_str(&String::from_utf8_lossy(chunk));
        text.push('\n');
    }
    text.push_str(&format!("{END} {}\n", hex(&Sha256::digest(&bytes))));
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(PackError::Output)
}

/// What [`unpack`] brought back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    pub dir: PathBuf,
    pub files: usize,
    pub bytes: u64,
    /// Every file matched the Job's [`SUMS`]; false when the Job wrote none (it ended
    /// before its last act): then only the archive's own checksum vouches for the copy.
    pub job_sums: bool,
}

/// Finds the archive block in `log`, checks it, and extracts it into `dest`, which must not
/// exist (it is created; on any error it is removed again, and nothing else is touched).
pub fn unpack(log: &str, dest: &Path) -> Result<Unpacked, String> {
    let start = log.find(BEGIN).ok_or("no archive in the log (the pack did not start)")?;
    let rest = &log[start + BEGIN.len()..];
    let end = rest.find(END).ok_or("the archive in the log is cut short (no end line)")?;
    let want = rest[end + END.len()..].lines().next().unwrap_or("").trim().to_ascii_lowercase();
    let b64: String = rest[..end].lines().map(str::trim).collect();
    let bytes = STANDARD
        .decode(b64.as_bytes())
        .map_err(|e| format!("the archive in the log is damaged: {e}"))?;
    let got = hex(&Sha256::digest(&bytes));
    if got != want {
        return Err(format!(
            "the archive's checksum is {got}, its end line says {want:?}: the log lost or changed bytes"
        ));
    }
    if dest.exists() {
        return Err(format!("{}: exists already; nothing was written", dest.display()));
    }
    std::fs::create_dir_all(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    let r = extract(&bytes, dest);
    if r.is_err() {
        let _ = std::fs::remove_dir_all(dest);
    }
    r
}

fn extract(bytes: &[u8], dest: &Path) -> Result<Unpacked, String> {
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut files = 0;
    let mut total = 0;
    for entry in ar.entries().map_err(|e| format!("archive: {e}"))? {
        let mut entry = entry.map_err(|e| format!("archive: {e}"))?;
        let name =
            entry.path().map_err(|e| format!("archive: {e}"))?.to_string_lossy().into_owned();
        if !entry.header().entry_type().is_file() || name.contains('/') || name.starts_with('.') {
            return Err(format!("archive: {name:?} is not a file of a run directory"));
        }
        let mut data = Vec::new();
        entry.read_to_end(&mut data).map_err(|e| format!("archive: {name}: {e}"))?;
        std::fs::write(dest.join(&name), &data)
            .map_err(|e| format!("{}: {e}", dest.join(&name).display()))?;
        files += 1;
        total += data.len() as u64;
    }
    let job_sums = dest.join(SUMS).is_file();
    if job_sums {
        verify(dest)?;
    }
    Ok(Unpacked { dir: dest.to_path_buf(), files, bytes: total, job_sums })
}

/// Every file of `dir` matches its line in `dir`/[`SUMS`], and every file has one.
pub fn verify(dir: &Path) -> Result<(), String> {
    let sums = verify_listed(dir)?;
    let listed: Vec<&str> = sums.iter().map(|(n, _)| n.as_str()).collect();
    for name in files(dir).map_err(|e| e.to_string())? {
        if !listed.contains(&name.as_str()) {
            return Err(format!("{name}: not in the Job's {SUMS}"));
        }
    }
    Ok(())
}

/// Every file `dir`/[`SUMS`] lists is there and matches it (files added beside them, as the
/// hand-off's report.csv, are not asked about): a run fetched whole before. Returns the
/// list.
pub fn verify_listed(dir: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(dir.join(SUMS))
        .map_err(|e| format!("{}: {e}", dir.join(SUMS).display()))?;
    let sums = parse_sums(&text)?;
    for (name, want) in &sums {
        let got = sha256_file(&dir.join(name))
            .map_err(|e| format!("{name}: {e} (listed in the Job's {SUMS})"))?;
        if &got != want {
            return Err(format!("{name}: sha256 {got}, the Job's {SUMS} says {want}"));
        }
    }
    Ok(sums)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(d.path().join("baseline.json"), b"{\"a\": 1}\n").expect("write");
        std::fs::write(d.path().join("samples.csv"), "t,v\n".repeat(5000)).expect("write");
        d
    }

    fn packed(dir: &Path) -> String {
        let mut out = Vec::new();
        pack(dir, &mut out).expect("pack");
        String::from_utf8(out).expect("text")
    }

    #[test]
    fn a_packed_run_comes_back_byte_for_byte_and_checked_against_the_jobs_sums() {
        let d = run_dir();
        write_sums(d.path()).expect("sums");
        // Log lines around it, as kubectl logs gives them.
        let log = format!("starting\n{}done\n", packed(d.path()));
        let to = tempfile::tempdir().expect("tempdir");
        let dest = to.path().join("run");
        let u = unpack(&log, &dest).expect("unpack");
        assert_eq!((u.files, u.job_sums), (3, true));
        for f in ["baseline.json", "samples.csv", SUMS] {
            assert_eq!(
                std::fs::read(dest.join(f)).ok(),
                std::fs::read(d.path().join(f)).ok(),
                "{f}"
            );
        }
    }

    #[test]
    fn a_run_without_the_jobs_sums_comes_back_marked_so() {
        let d = run_dir();
        let to = tempfile::tempdir().expect("tempdir");
        let u = unpack(&packed(d.path()), &to.path().join("run")).expect("unpack");
        assert_eq!((u.files, u.job_sums), (2, false));
    }

    #[test]
    fn a_cut_or_changed_log_is_refused_and_leaves_nothing() {
        let d = run_dir();
        write_sums(d.path()).expect("sums");
        let log = packed(d.path());
        let to = tempfile::tempdir().expect("tempdir");
        let dest = to.path().join("run");
        // Cut: the last lines lost (a rotated or truncated log).
        let cut: String = log.lines().take(3).map(|l| format!("{l}\n")).collect();
        assert!(unpack(&cut, &dest).expect_err("cut").contains("cut short"));
        // One line lost in the middle.
        let mut lines: Vec<&str> = log.lines().collect();
        lines.remove(2);
        let e = unpack(&lines.join("\n"), &dest).expect_err("a lost line");
        assert!(e.contains("checksum") || e.contains("damaged"), "{e}");
        assert!(!dest.exists(), "nothing written");
        assert!(unpack("no archive here", &dest).expect_err("none").contains("no archive"));
    }

    #[test]
    fn a_file_that_differs_from_the_jobs_sums_is_refused() {
        let d = run_dir();
        write_sums(d.path()).expect("sums");
        // Changed after the Job summed it.
        std::fs::write(d.path().join("baseline.json"), b"{\"a\": 2}\n").expect("write");
        let to = tempfile::tempdir().expect("tempdir");
        let dest = to.path().join("run");
        let e = unpack(&packed(d.path()), &dest).expect_err("mismatch");
        assert!(e.contains("baseline.json") && e.contains(SUMS), "{e}");
        assert!(!dest.exists());
    }

    #[test]
    fn an_existing_destination_is_never_overwritten() {
        let d = run_dir();
        let to = tempfile::tempdir().expect("tempdir");
        std::fs::write(to.path().join("keep"), b"mine").expect("write");
        assert!(unpack(&packed(d.path()), to.path()).expect_err("exists").contains("exists"));
        assert_eq!(std::fs::read(to.path().join("keep")).ok(), Some(b"mine".to_vec()));
    }

    #[test]
    fn a_run_fetched_before_is_known_by_its_sums_whatever_the_hand_off_added() {
        let d = run_dir();
        write_sums(d.path()).expect("sums");
        let to = tempfile::tempdir().expect("tempdir");
        let dest = to.path().join("run");
        unpack(&packed(d.path()), &dest).expect("unpack");
        std::fs::write(dest.join("report.csv"), b"window,figure\n").expect("write");
        assert_eq!(verify_listed(&dest).expect("fetched whole").len(), 2);
        assert!(verify(&dest).is_err(), "report.csv is not the Job's");
        std::fs::write(dest.join("samples.csv"), b"cut").expect("write");
        assert!(verify_listed(&dest).expect_err("changed").contains("samples.csv"));
        std::fs::remove_file(dest.join(SUMS)).expect("rm");
        assert!(verify_listed(&dest).is_err(), "no sums: not a fetched run");
    }
}
