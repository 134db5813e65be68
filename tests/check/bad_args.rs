//! A bad command line: one line naming the problem and a documented exit code, before
//! anything starts (no member, no cluster, no file written).

use crate::support::{self, leaderwatch};

fn run_bad(args: &[&str]) -> (i32, String) {
    let out = leaderwatch().args(args).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), err)
}

/// `(command line, exit code, what stderr must name)`; `{out}` is the run directory the
/// command must not create, `{taken}` a port already bound, `{ep}` a member nobody answers.
const BAD: [(&str, i32, &str); 17] = [
    ("measure --idle 5m --out {out}", 2, "at least 20m"),
    // Said before any cluster is asked; a --dry-run may idle less.
    ("sitting --image r.example/p/lw@sha256:00 --idle 5m --kubeconfig {out}", 2, "at least 20m"),
    (
        "rehearse --target m1 --idle 1s --etcd-bin /nonexistent/etcd --out {out}",
        4,
        "/nonexistent/etcd",
    ),
    ("sample --endpoint m0 --out {out}", 2, "NAME=URL"),
    ("sample --endpoint m0=ftp://x:1 --out {out}", 2, "http:// or https://"),
    ("sample --endpoint {ep} --interval soon --out {out}", 2, "not a duration"),
    (
        "sample --endpoint {ep} --metrics-interval 500ms --out {out}",
        2,
        "--metrics-interval 500ms is shorter than --interval 1s",
    ),
    ("sample --endpoint {ep} --cert /nonexistent.pem --out {out}", 2, "--cert and --key"),
    (
        "sample --endpoint m0=https://127.0.0.1:1 --cacert /nonexistent.pem --out {out}",
        2,
        "/nonexistent.pem",
    ),
    ("sample --endpoint {ep} --retain 12h --out {out}", 2, "keep at least 1d"),
    ("sample --endpoint {ep} --metrics-addr localhost --out {out}", 2, "--metrics-addr"),
    ("sample --endpoint {ep} --metrics-addr {taken} --out {out}", 2, "Address already in use"),
    // Said before any cluster is asked (the kubeconfig does not exist either).
    (
        "sitting --image r.example/p/lw@sha256:00 --readme /nonexistent/README.md --kubeconfig {out}",
        2,
        "--readme /nonexistent/README.md: no such file",
    ),
    ("measure --expect-build 0.1.0 --out {out}", 2, "is not VERSION+COMMIT"),
    // Regression: clap lists a missing argument on the line after its message, and only
    // the message was said ("...were not provided:" and nothing).
    ("sample --endpoint {ep} --lock-canary --out {out}", 2, "not provided: --canary"),
    ("rehearse --lock-ttl 1500ms --out {out}", 2, "whole seconds"),
    ("recount {out}", 2, "No such file"),
];

#[test]
fn bad_input_is_one_line_and_a_documented_exit_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("o");
    let out = out.to_str().expect("utf8");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken = taken.local_addr().expect("addr").to_string();
    for (line, code, needle) in BAD {
        let line = line
            .replace("{out}", out)
            .replace("{taken}", &taken)
            .replace("{ep}", "m0=http://127.0.0.1:1");
        let args: Vec<&str> = line.split_whitespace().collect();
        let (got, err) = run_bad(&args);
        assert_eq!(got, code, "{line}: {err}");
        assert!(err.contains(needle), "{line}: {err}");
        // The log's progress lines (timestamped) aside, the error is one line.
        let said = err.lines().filter(|l| !l.starts_with("20") && !l.trim().is_empty()).count();
        assert_eq!(said, 1, "{line}: one line: {err}");
        assert!(!dir.path().join("o").exists(), "{line}: refused before anything was written");
    }
}

#[test]
fn an_out_that_cannot_be_a_directory_is_exit_3_naming_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "x").expect("write");
    let (got, err) = run_bad(&[
        "sample",
        "--endpoint",
        "m0=http://127.0.0.1:1",
        "--out",
        file.to_str().expect("utf8"),
    ]);
    assert_eq!(got, 3, "{err}");
    assert!(err.contains("plain-file") && err.lines().count() == 1, "{err}");
}

#[test]
fn an_unknown_target_or_method_is_refused_before_any_cluster_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    for args in [["--target", "m9"], ["--method", "sigint"]] {
        let o = leaderwatch()
            .arg("rehearse")
            .args(args)
            .arg("--out")
            .arg(&out)
            .output()
            .expect("rehearse");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(args[1]), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}: nothing started");
    }
}

#[test]
fn a_bad_kubeconfig_is_one_line_and_exit_6() {
    let dir = tempfile::tempdir().expect("tempdir");
    let junk = dir.path().join("kubeconfig");
    std::fs::write(&junk, "this: [is not a kubeconfig").expect("write");
    for kc in [dir.path().join("missing"), junk] {
        let o = support::leaderwatch()
            .args(["preflight", "--kubeconfig"])
            .arg(&kc)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(6), "{err}");
        assert!(
            err.trim().lines().count() == 1
                && err.contains("Kubernetes config")
                && err.contains(&kc.display().to_string()),
            "{err}"
        );
    }
}

/// The sitting's Job is given the laptop's build; an image of another commit says its own
/// build first, then refuses before it opens a run directory or reaches a cluster.
#[test]
fn a_measure_of_another_build_refuses_before_anything_and_names_both() {
    use leaderwatch::model::build::Build;
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("o");
    let this = Build::this();
    let other = format!("{}+0000000000000000000000000000000000000000", this.version);
    let (code, err) = run_bad(&["measure", "--expect-build", &other, "--out", out_str(&out)]);
    let first = err.lines().next().unwrap_or_default();
    assert_eq!(Build::from_line(first), Some(this.clone()), "the first line is the build: {err}");
    if this.commit == "unknown" {
        // Built without git: it cannot tell, and says so (then fails on the cluster).
        assert!(err.contains("may differ"), "{err}");
    } else {
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("build mismatch") && err.contains(&other), "{err}");
        assert!(err.contains(&this.to_string()), "{err}");
    }
    assert!(!out.exists(), "refused before anything was written");
}

fn out_str(p: &std::path::Path) -> &str {
    p.to_str().expect("utf8")
}
