//! deploy/k8s/apply.sh run against the recording kubectl stub in tests/stubs/kubectl:
//! the order of its steps, and its bounded failures.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// A copy of deploy/k8s in a temp dir, so that tests can add workloads beside it.
struct Tree {
    dir: TempDir,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s");
        copy_dir(&src, &dir.path().join("k8s"));
        Tree { dir }
    }

    fn k8s(&self) -> PathBuf {
        self.dir.path().join("k8s")
    }

    fn add(&self, rel: &str) {
        let p = self.k8s().join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n").expect("write");
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("kubectl.log")
    }

    /// Runs apply.sh with the stub first on PATH; a hang guard kills it after 60 s.
    fn run(&self, env: &[(&str, &str)]) -> Run {
        let stubs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stubs");
        let path = format!("{}:{}", stubs.display(), std::env::var("PATH").unwrap_or_default());
        let mut cmd = Command::new("bash");
        cmd.arg(self.k8s().join("apply.sh"))
            .env("PATH", path)
            .env("KUBECTL_STUB_LOG", self.log())
            .env("HEALTH_INTERVAL", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn apply.sh");
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().expect("wait").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("apply.sh hung for 60 s: an unbounded wait");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().expect("output");
        // No log at all: the stub never ran (not the same as "ran, no such call").
        let calls = match fs::read_to_string(self.log()) {
            Ok(t) => Some(t.lines().map(str::to_owned).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => panic!("{}: {e}", self.log().display()),
        };
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            calls,
        }
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// The kubectl stub's calls, `None` when it was never called.
    calls: Option<Vec<String>>,
}

impl Run {
    /// The calls; a run whose stub never ran fails here, so no count of 0 passes by it.
    fn calls(&self) -> &[String] {
        self.calls
            .as_deref()
            .unwrap_or_else(|| panic!("the kubectl stub was never called; stderr: {}", self.stderr))
    }
    /// Index of the first call containing `needle`.
    fn pos(&self, needle: &str) -> usize {
        self.calls().iter().position(|c| c.contains(needle)).unwrap_or_else(|| {
            panic!("no kubectl call contains {needle:?}; calls: {:#?}", self.calls)
        })
    }
    fn count(&self, needle: &str) -> usize {
        self.calls().iter().filter(|c| c.contains(needle)).count()
    }
}

fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).expect("mkdir");
    for e in fs::read_dir(src).expect("read_dir") {
        let e = e.expect("entry");
        let to = dst.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            fs::copy(e.path(), &to).expect("copy");
        }
    }
}

#[test]
fn apply_sh_order_is_namespace_etcd_rollout_health_then_workloads() {
    let t = Tree::new();
    t.add("lock-server/deployment.yaml");
    t.add("configmap.yaml");
    t.add("leaderwatch/job.yaml");
    let r = t.run(&[]);
    assert_eq!(r.code, Some(0), "stdout: {}\nstderr: {}", r.stdout, r.stderr);

    let ns = r.pos("namespace.yaml");
    let etcd = r.pos("apply -R -f");
    let rollout = r.pos("rollout status statefulset/dlock-etcd --timeout=11m");
    let health = r.pos("endpoint health --cluster -w json");
    let workloads = r.pos("lock-server/deployment.yaml");
    assert!(
        ns < etcd && etcd < rollout && rollout < health && health < workloads,
        "{:#?}",
        r.calls()
    );
    assert!(
        r.calls()[etcd].ends_with("/etcd/"),
        "etcd applied as a directory: {}",
        r.calls()[etcd]
    );
    assert!(r.calls()[health].contains("exec dlock-etcd-0"), "health asked inside member 0");
    assert!(r.calls()[workloads].contains("configmap.yaml"), "every other workload applied");
    assert_eq!(r.count("leaderwatch/"), 0, "leaderwatch/ is not a workload: {:#?}", r.calls());
    assert_eq!(r.count("namespace.yaml"), 1, "the namespace is applied once, first");
    assert_eq!(r.count("statefulset.yaml"), 0, "etcd files are not applied twice");
}

#[test]
fn apply_sh_with_no_other_workloads_says_so() {
    let t = Tree::new();
    let r = t.run(&[]);
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    assert!(r.stdout.contains("no other workloads"), "{}", r.stdout);
    assert_eq!(r.calls().len(), 4, "namespace, etcd, rollout, health: {:#?}", r.calls());
}

#[test]
fn apply_sh_rollout_that_never_finishes_fails_bounded_with_the_step_named() {
    let t = Tree::new();
    t.add("lock-server/deployment.yaml");
    let r = t.run(&[("KUBECTL_STUB_ROLLOUT", "never"), ("ROLLOUT_TIMEOUT", "2s")]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("FAILED at step 'etcd-rollout'"), "{}", r.stderr);
    assert!(r.stderr.contains("within 2s"), "names the bound: {}", r.stderr);
    assert_eq!(r.count("endpoint health"), 0, "no health check after a failed rollout");
    assert_eq!(r.count("lock-server"), 0, "no workloads before etcd is up");
}

#[test]
fn apply_sh_unhealthy_endpoint_list_fails_after_bounded_attempts() {
    let t = Tree::new();
    t.add("lock-server/deployment.yaml");
    let r = t.run(&[("KUBECTL_STUB_HEALTH", "unhealthy"), ("HEALTH_ATTEMPTS", "3")]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("FAILED at step 'etcd-health'"), "{}", r.stderr);
    assert!(r.stderr.contains("after 3 attempts"), "{}", r.stderr);
    assert!(r.stderr.contains("context deadline exceeded"), "shows the last output: {}", r.stderr);
    assert_eq!(r.count("endpoint health"), 3);
    assert_eq!(r.count("lock-server"), 0, "no workloads on an unhealthy etcd");
}

#[test]
fn apply_sh_two_healthy_endpoints_are_not_a_three_member_list() {
    let t = Tree::new();
    let r = t.run(&[("KUBECTL_STUB_HEALTH", "two-members"), ("HEALTH_ATTEMPTS", "2")]);
    assert_eq!(r.code, Some(1), "stdout: {}", r.stdout);
    assert!(r.stderr.contains("FAILED at step 'etcd-health'"), "{}", r.stderr);
}

#[test]
fn apply_sh_waits_until_the_endpoint_list_becomes_healthy() {
    let t = Tree::new();
    t.add("lock-server/deployment.yaml");
    let r = t.run(&[("KUBECTL_STUB_HEALTH", "ok-after-2"), ("HEALTH_ATTEMPTS", "5")]);
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    assert_eq!(r.count("endpoint health"), 3, "two unhealthy answers, then healthy");
    assert_eq!(r.count("lock-server"), 1);
}

/// Regression: apply.sh waited 5 minutes for the rollout while the members' startupProbe
/// allows 10 (60 x 10 s), so a slow first start failed while the pods were still
/// legitimately coming up. The default wait must outlast the probe's window plus one
/// readiness period.
#[test]
fn apply_sh_rollout_wait_outlasts_the_startup_probe() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = fs::read_to_string(root.join("deploy/k8s/apply.sh")).expect("apply.sh");
    let default = script
        .lines()
        .find_map(|l| {
            l.strip_prefix("ROLLOUT_TIMEOUT=${ROLLOUT_TIMEOUT:-").and_then(|r| r.strip_suffix('}'))
        })
        .expect("ROLLOUT_TIMEOUT default in apply.sh");
    let wait =
        humantime::parse_duration(default).expect("a duration kubectl and humantime both read");
    let sts: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &fs::read_to_string(root.join("deploy/k8s/etcd/statefulset.yaml"))
            .expect("statefulset.yaml"),
    )
    .expect("yaml");
    let c = &sts["spec"]["template"]["spec"]["containers"][0];
    let secs =
        |p: &serde_yaml_ng::Value, k: &str| p[k].as_u64().unwrap_or_else(|| panic!("{k} set"));
    let startup =
        secs(&c["startupProbe"], "periodSeconds") * secs(&c["startupProbe"], "failureThreshold");
    let readiness = secs(&c["readinessProbe"], "periodSeconds");
    assert!(
        wait.as_secs() > startup + readiness,
        "rollout wait {default} ({} s) must outlast the startupProbe ({startup} s) plus a readiness period ({readiness} s)",
        wait.as_secs()
    );
}
