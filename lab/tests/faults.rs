//! Faults `lw-lab` must name in one line with its exit code, on the real binary.
//! (The cluster itself is exercised end to end by `lw-lab acceptance` in `make test`.)

use std::path::PathBuf;
use std::process::Command;

fn lw_lab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lw-lab"))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn up_without_the_built_binaries_names_the_missing_one_exit_3() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = lw_lab()
        .arg("--dir")
        .arg(dir.path().join("lab"))
        .arg("--tools")
        .arg(dir.path().join("no-tools"))
        .arg("up")
        .output()
        .expect("run lw-lab");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("etcd not found at") && err.contains("make kube-tools"), "{err}");
}

/// A killed run leaves its network namespaces behind: `up` refuses by name (nothing is
/// silently reused), and `down` removes them and says what it removed.
#[test]
fn a_namespace_left_by_a_killed_run_is_refused_by_name_then_removed_by_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = "lwbeef-1";
    let made = Command::new("ip").args(["netns", "add", ns]).status().expect("ip netns add");
    assert!(made.success(), "ip netns add {ns} (needs root)");
    let tools = repo().join(".tools");
    let up = lw_lab()
        .arg("--dir")
        .arg(dir.path().join("lab"))
        .arg("--tools")
        .arg(&tools)
        .arg("up")
        .output()
        .expect("run lw-lab up");
    let down = lw_lab()
        .arg("--dir")
        .arg(dir.path().join("lab"))
        .arg("down")
        .output()
        .expect("run lw-lab down");
    let still = String::from_utf8_lossy(
        &Command::new("ip").args(["netns", "list"]).output().expect("ip netns list").stdout,
    )
    .contains(ns);
    if still {
        let _ = Command::new("ip").args(["netns", "delete", ns]).status();
    }
    let err = String::from_utf8_lossy(&up.stderr);
    if tools.join("bin/etcd").is_file()
        && tools.join(format!("kube-{}/bin/kube-apiserver", kube_version())).is_file()
    {
        assert_eq!(up.status.code(), Some(4), "{err}");
        assert!(
            err.contains(&format!("network namespace {ns}")) && err.contains("lw-lab down"),
            "{err}"
        );
    } else {
        // Without the binaries `up` stops earlier, at the missing tool.
        assert_eq!(up.status.code(), Some(3), "{err}");
    }
    let said = String::from_utf8_lossy(&down.stdout);
    assert!(down.status.success() && said.contains(&format!("network namespace {ns}")), "{said}");
    assert!(!still, "lw-lab down left {ns} behind");
}

fn kube_version() -> String {
    let m = std::fs::read_to_string(repo().join("lab/go/kube/go.mod")).expect("go.mod");
    m.lines()
        .find_map(|l| l.strip_prefix("\tk8s.io/kubernetes "))
        .and_then(|r| r.split_whitespace().next())
        .expect("version")
        .to_string()
}
