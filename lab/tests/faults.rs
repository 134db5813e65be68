//! Faults `lw-lab` must name in one line with its exit code, on the real binary.
//! (The cluster itself is exercised end to end by `lw-lab acceptance` in `make test`.)

use std::path::PathBuf;
use std::process::Command;

fn lw_lab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lw-lab"))
}

/// The tests that create or clean `lw`-named objects run one at a time: `up` refuses to
/// start beside another test's planted leftover, and `down` removes every leftover.
static LEFTOVERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
    let _one = LEFTOVERS.lock().unwrap_or_else(|p| p.into_inner());
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

/// A cluster killed outright (SIGKILL to `lw-lab up`, as a CI runner's timeout does): the
/// kernel kills its kubelets, containerds and control plane with it (PR_SET_PDEATHSIG), but
/// the pods' containers and their containerd shims live on. `lw-lab down` kills them and
/// removes their mounts, cgroups and network namespaces, and says so; nothing of the run is
/// left running afterwards.
#[test]
fn a_killed_cluster_leaves_containers_that_down_removes() {
    let _one = LEFTOVERS.lock().unwrap_or_else(|p| p.into_inner());
    let tools = repo().join(".tools");
    if !tools.join("node/bin/containerd").is_file() {
        panic!("{} missing: run `make kube-tools`", tools.join("node/bin/containerd").display());
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let lab = dir.path().join("lab");
    let up = lw_lab()
        .arg("--dir")
        .arg(&lab)
        .arg("--tools")
        .arg(&tools)
        .args(["up", "--detach"])
        .output()
        .expect("run lw-lab up --detach");
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(lab.join("state.json")).expect("state.json"))
            .expect("state json");
    let kubectl = |args: &[&str]| {
        Command::new(state["kubectl"].as_str().expect("kubectl"))
            .args(args)
            .env("KUBECONFIG", state["kubeconfig"].as_str().expect("kubeconfig"))
            .output()
            .expect("kubectl")
    };
    let run = kubectl(&[
        "run",
        "sleeper",
        "--image=registry.k8s.io/pause:3.10.1",
        "--restart=Never",
        "--overrides={\"spec\":{\"terminationGracePeriodSeconds\":1}}",
    ]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let ready = kubectl(&["wait", "--for=condition=Ready", "pod/sleeper", "--timeout=90s"]);
    assert!(ready.status.success(), "{}", String::from_utf8_lossy(&ready.stderr));
    let needle = lab.display().to_string();
    let ours = || -> Vec<String> {
        let mut found = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().parse::<u32>().is_err() {
                continue;
            }
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(&needle) {
                found.push(cmd);
            }
        }
        found
    };
    let pid = state["pid"].as_i64().expect("pid") as i32;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL)
        .expect("SIGKILL lw-lab up");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let survivors = ours();
    assert!(
        survivors.iter().any(|c| c.contains("containerd-shim-runc-v2")),
        "the pod's shim outlives the killed cluster (else this test proves nothing): {survivors:?}"
    );
    assert!(
        !survivors.iter().any(|c| c.contains("kubelet") && !c.contains("shim")),
        "the kubelets die with the harness: {survivors:?}"
    );
    let down = lw_lab()
        .arg("--dir")
        .arg(&lab)
        .arg("--tools")
        .arg(&tools)
        .arg("down")
        .output()
        .expect("run lw-lab down");
    let said = String::from_utf8_lossy(&down.stdout);
    assert!(down.status.success(), "{said}{}", String::from_utf8_lossy(&down.stderr));
    for what in ["container ", "containerd shim ", "cgroup ", "network namespace "] {
        assert!(said.contains(what), "down names the {what}it removed: {said}");
    }
    assert_eq!(ours(), Vec::<String>::new(), "nothing of the run is left running");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    assert!(!mounts.contains(&needle), "no mount under {needle} is left");
    let id = state["id"].as_str().expect("id");
    for h in std::fs::read_dir("/sys/fs/cgroup").expect("cgroup").flatten() {
        for c in std::fs::read_dir(h.path()).into_iter().flatten().flatten() {
            let n = c.file_name().to_string_lossy().to_string();
            assert!(!n.starts_with(&format!("lw{id}")), "cgroup {} left", c.path().display());
        }
    }
}

/// Regression (2026-12-07): a run killed during a freeze fault left an etcd member frozen
/// in its node's freezer cgroup, where SIGKILL waits (D state) and the cgroup cannot be
/// removed; `down` now thaws what it kills. Here a process of our own stands in for it.
#[test]
fn a_frozen_process_left_by_a_killed_run_is_thawed_and_removed_by_down() {
    let _one = LEFTOVERS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let freezer = PathBuf::from("/sys/fs/cgroup/freezer/lwf0f0-n0");
    let child = freezer.join("pod");
    std::fs::create_dir_all(&child).expect("freezer cgroup (cgroup v1, root)");
    let mut sleep = Command::new("sleep").arg("600").spawn().expect("sleep");
    std::fs::write(child.join("cgroup.procs"), sleep.id().to_string()).expect("join the cgroup");
    std::fs::write(freezer.join("freezer.state"), "FROZEN").expect("freeze");
    let down = lw_lab().arg("--dir").arg(dir.path().join("lab")).arg("down").output();
    let gone = (0..50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        sleep.try_wait().ok().flatten().is_some()
    });
    if !gone {
        let _ = std::fs::write(freezer.join("freezer.state"), "THAWED");
        let _ = sleep.kill();
        let _ = sleep.wait();
    }
    let said = down.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    assert!(gone, "the frozen process outlived down: {said}");
    assert!(!freezer.exists(), "its cgroup removed: {said}");
    assert!(said.contains("lwf0f0-n0"), "said: {said}");
}
