//! bench/order_file.py, which writes build/sampler.order from a link map and a callgrind
//! run: on a small map and profile written here, and on the committed order file's form.

use std::path::Path;
use std::process::Command;

const MAP: &str = "\
             VMA              LMA     Size Align Out     In      Symbol
          2e6040           2e6040   81b277    64 .text
          2e6040           2e6040      100     1         /t/a.o:(.text._ZN1a3hot17h0000000000000001E)
          2e6040           2e6040      100     1                 _ZN1a3hot17h0000000000000001E
          2e6140           2e6140       40     1         /t/a.o:(.text._ZN1a4cold17h0000000000000002E)
          2e6180           2e6180       80     1         /t/a.o:(.text.unlikely._ZN1a5error17h0000000000000003E)
          2e6200           2e6200       20     1         /t/a.o:(.text)
";

/// The instructions at 0x2e6050 (hot) and 0x2e6190 (error) ran; one line is a call's, one
/// address is outside every section.
const CALLGRIND: &str = "\
fn=0x00000000002e6040
0x2e6050 0 12
calls=1 0x2e6180 0
0x2e6060 0 5
fn=0x00000000002e6180
0x2e6190 0 3
0x4848000 0 9
";

fn run(dir: &Path, map: &str, cg: &str) -> (bool, String, String) {
    std::fs::write(dir.join("map"), map).expect("map");
    std::fs::write(dir.join("cg"), cg).expect("cg");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/order_file.py");
    let out = Command::new("python3")
        .arg(script)
        .args([dir.join("map"), dir.join("cg"), dir.join("order")])
        .output()
        .expect("python3");
    let order = std::fs::read_to_string(dir.join("order")).unwrap_or_default();
    (out.status.success(), order, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_order_lists_the_executed_sections_symbols_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ok, order, err) = run(dir.path(), MAP, CALLGRIND);
    assert!(ok, "{err}");
    assert_eq!(order, "_ZN1a3hot17h0000000000000001E\n_ZN1a5error17h0000000000000003E\n");
}

#[test]
fn a_map_or_profile_that_does_not_fit_is_refused_in_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ok, _, err) = run(dir.path(), "not a map\n", CALLGRIND);
    assert!(!ok && err.trim().lines().count() == 1 && err.contains("no .text sections"), "{err}");
    let (ok, _, err) = run(dir.path(), MAP, "0x4848000 0 9\n");
    assert!(!ok && err.contains("executed nothing"), "{err}");
}

#[test]
fn the_committed_order_file_is_symbol_names_sorted_once_each() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("build/sampler.order");
    let text = std::fs::read_to_string(&p).expect("build/sampler.order");
    let names: Vec<&str> = text.lines().collect();
    assert!(names.len() > 500, "a sampler runs more than {} functions", names.len());
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
    assert!(names.iter().all(|n| n.starts_with("_ZN") || n.starts_with("_R") || !n.contains(' ')));
    // The measuring path itself must be in it, or the file is from another program.
    assert!(names.iter().any(|n| n.contains("11leaderwatch2io7metrics9Extractor")), "no extractor");
}
