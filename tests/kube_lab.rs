//! The sitting on a real Kubernetes control plane (lw-lab: kube-apiserver, controller-manager
//! and scheduler v1.35.4 built from k8s.io/kubernetes, the process kubelet, dlock's etcd
//! 3.6.14 from the unmodified StatefulSet), under leaderwatch's own ServiceAccount and the
//! RBAC of deploy/k8s/leaderwatch/rbac.yaml. Short windows through the library (the CLI
//! refuses `--idle` under 20 minutes); `make rehearse-kube` runs the full length.
//!
//! Ignored in plain `cargo test` (they need root, runc and `make kube-tools`); `make test`
//! runs them (`make test-kube`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leaderwatch::baseline::{Baseline, Environment};
use leaderwatch::clock::{Clock, SystemClock};
use leaderwatch::k8s::discover::Reach;
use leaderwatch::k8s::KubeOptions;
use leaderwatch::measure::{self, MeasureConfig};
use leaderwatch::probe::ProbeConfig;
use leaderwatch::sitting::SittingConfig;
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A running lw-lab cluster, stopped (SIGTERM, then SIGKILL) when dropped, a panic included.
struct Lab {
    child: Child,
    dir: PathBuf,
    state: Value,
}

impl Lab {
    fn up() -> Lab {
        let bin = repo().join("lab/target/debug/lw-lab");
        assert!(bin.is_file(), "{} missing: run `make kube-tools`", bin.display());
        let dir = repo().join(".tools/lab-test");
        let child = Command::new(&bin)
            .arg("--dir")
            .arg(&dir)
            .arg("--tools")
            .arg(repo().join(".tools"))
            .arg("up")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start lw-lab up");
        let mut lab = Lab { child, dir: dir.clone(), state: Value::Null };
        let t = Instant::now();
        while !dir.join("ready").is_file() {
            if let Ok(Some(st)) = lab.child.try_wait() {
                panic!("lw-lab up exited {st} before the cluster was ready");
            }
            assert!(t.elapsed() < Duration::from_secs(180), "cluster not ready within 180 s");
            std::thread::sleep(Duration::from_millis(300));
        }
        lab.state = serde_json::from_slice(&std::fs::read(dir.join("state.json")).expect("state.json")).expect("state json");
        lab
    }

    fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let o = Command::new(self.state["kubectl"].as_str().expect("kubectl"))
            .args(args)
            .env("KUBECONFIG", self.state["kubeconfig"].as_str().expect("kubeconfig"))
            .current_dir(repo())
            .output()
            .expect("run kubectl");
        (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.kubectl(args);
        assert!(ok, "kubectl {}: {err}", args.join(" "));
        out
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).expect("kubectl json")
    }

    /// What a user does first: namespace, apply.sh, leaderwatch's RBAC.
    fn deploy(&self) {
        self.ok(&["apply", "-f", "deploy/k8s/namespace.yaml"]);
        let st = Command::new(repo().join("deploy/k8s/apply.sh"))
            .env("KUBECONFIG", self.state["kubeconfig"].as_str().expect("kubeconfig"))
            .env("KUBECTL", self.state["kubectl"].as_str().expect("kubectl"))
            .current_dir(repo())
            .stdout(Stdio::null())
            .status()
            .expect("apply.sh");
        assert!(st.success(), "apply.sh: {st}");
        self.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac.yaml"]);
    }

    /// A kubeconfig for the `leaderwatch` ServiceAccount (TokenRequest), never the admin's.
    fn service_account_kubeconfig(&self) -> PathBuf {
        let token = self.ok(&["-n", "dlock", "create", "token", "leaderwatch", "--duration=1h"]);
        let admin = std::fs::read_to_string(self.state["kubeconfig"].as_str().expect("kubeconfig")).expect("admin kubeconfig");
        let ca = admin.lines().find_map(|l| l.trim().strip_prefix("certificate-authority-data: ")).expect("CA");
        let path = self.dir.join("leaderwatch.kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: sa\n  user:\n    token: {}\ncontexts:\n- name: sa\n  context:\n    cluster: lab\n    user: sa\n    namespace: dlock\ncurrent-context: sa\n",
                self.state["server"].as_str().expect("server"),
                token.trim()
            ),
        )
        .expect("write kubeconfig");
        path
    }

    fn etcdctl(&self, args: &[&str]) -> String {
        let mut a = vec!["-n", "dlock", "exec", "dlock-etcd-0", "--", "etcdctl"];
        a.extend(args);
        self.ok(&a)
    }

    fn raft_term(&self) -> u64 {
        let v: Value = serde_json::from_str(&self.etcdctl(&["endpoint", "status", "--cluster", "-w", "json"])).expect("status json");
        v.as_array().expect("array").iter().filter_map(|e| e["Status"]["raftTerm"].as_u64()).max().expect("a term")
    }

    /// The audit log's events for leaderwatch's ServiceAccount, and every Eviction.
    fn audit(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.state["audit_log"].as_str().expect("audit_log")).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    fn accepted_evictions(&self) -> Vec<String> {
        self.audit()
            .iter()
            .filter(|e| e["stage"] == "ResponseComplete" && e["objectRef"]["subresource"] == "eviction" && e["verb"] == "create" && e["responseStatus"]["code"] == 201)
            .map(|e| e["objectRef"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), nix::sys::signal::Signal::SIGTERM);
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(90) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(kubeconfig: &Path, out: &Path, target: &str) -> MeasureConfig {
    MeasureConfig {
        kube: KubeOptions {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            context: None,
            namespace: "dlock".into(),
            selector: "app.kubernetes.io/name=dlock-etcd".into(),
            request_timeout: Duration::from_secs(10),
        },
        reach: Reach::PodIp,
        sitting: SittingConfig {
            members: vec![],
            idle: Duration::from_secs(20),
            settle: Duration::from_secs(10),
            interval: Duration::from_millis(500),
            fast_interval: Duration::from_millis(100),
            target: target.parse().expect("target"),
            probe: ProbeConfig { timeout: Duration::from_secs(1), ..ProbeConfig::default() },
            out: out.to_owned(),
            recovery_timeout: Duration::from_secs(180),
            environment: Environment { description: "local control plane, Kubernetes v1.35.4, etcd {etcd}".into(), ..Environment::default() },
            cause_horizon: leaderwatch::attribution::DEFAULT_HORIZON,
            canary: Some(Duration::from_secs(1)),
            metrics_addr: None,
        },
        evict_timeout: Duration::from_secs(60),
        dry_run: false,
    }
}

async fn measure(kubeconfig: &Path, out: &Path, target: &str) -> leaderwatch::Result<Baseline> {
    let client = leaderwatch::k8s::client(&config(kubeconfig, out, target).kube).await.expect("client");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    measure::run(client, config(kubeconfig, out, target), clock, std::future::pending()).await
}

/// The Role and ClusterRole of rbac.yaml as (apiGroup, resource, verb).
fn granted() -> BTreeSet<(String, String, String)> {
    let text = std::fs::read_to_string(repo().join("deploy/k8s/leaderwatch/rbac.yaml")).expect("rbac.yaml");
    let mut out = BTreeSet::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let v = <serde_yaml_ng::Value as serde::Deserialize>::deserialize(doc).expect("yaml");
        for rule in v["rules"].as_sequence().into_iter().flatten() {
            for g in rule["apiGroups"].as_sequence().into_iter().flatten() {
                for r in rule["resources"].as_sequence().into_iter().flatten() {
                    for verb in rule["verbs"].as_sequence().into_iter().flatten() {
                        out.insert((g.as_str().unwrap_or("").into(), r.as_str().unwrap_or("").into(), verb.as_str().unwrap_or("").into()));
                    }
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, runc and make kube-tools; make test runs it"]
async fn the_sitting_on_the_real_control_plane_under_the_real_rbac() {
    let lab = Lab::up();
    lab.deploy();
    let kc = lab.service_account_kubeconfig();
    let out = tempfile::tempdir().expect("tempdir");

    // 1. A follower eviction through the real Eviction API, the PDB computed by the real
    //    disruption controller, the pod recreated by the real StatefulSet controller.
    let before_uid = |name: &str| lab.json(&["-n", "dlock", "get", "pod", name, "-o", "json"])["metadata"]["uid"].as_str().unwrap_or("").to_string();
    let uids: Vec<String> = (0..3).map(|i| before_uid(&format!("dlock-etcd-{i}"))).collect();
    let term_before = lab.raft_term();
    let b = measure(&kc, &out.path().join("follower"), "follower").await.unwrap_or_else(|e| panic!("measure: {e}"));
    let term_after = lab.raft_term();
    assert_eq!(b.status, "complete", "{:?}", b.incomplete_reason);
    let d = b.disruption.as_ref().expect("disruption");
    assert_eq!(d.method, "kubernetes-eviction");
    assert_eq!(d.attempts, 1, "the PDB allowed the first eviction");
    assert_eq!(lab.accepted_evictions(), vec![d.target.clone()], "exactly one accepted Eviction, of the target (audit log)");
    let elections: u64 = b.windows.iter().filter_map(|w| w.elections).sum();
    assert_eq!(elections, term_after - term_before, "elections equal the raft-term delta across the sitting");
    let pod = lab.json(&["-n", "dlock", "get", "pod", &d.target, "-o", "json"]);
    let idx: usize = d.target.rsplit('-').next().and_then(|i| i.parse().ok()).expect("ordinal");
    assert_ne!(pod["metadata"]["uid"].as_str().unwrap_or(""), uids[idx], "the StatefulSet recreated the evicted pod");
    let node = lab.json(&["get", "node", pod["spec"]["nodeName"].as_str().expect("node"), "-o", "json"]);
    let pvc = lab.json(&["-n", "dlock", "get", "pvc", &format!("data-{}", d.target), "-o", "json"]);
    let pv = lab.json(&["get", "pv", pvc["spec"]["volumeName"].as_str().expect("bound"), "-o", "json"]);
    assert_eq!(
        node["metadata"]["labels"]["topology.kubernetes.io/zone"], pv["metadata"]["labels"]["topology.kubernetes.io/zone"],
        "back in its PV's zone"
    );
    // The waterfall's Kubernetes steps, in the order the real controllers produced them.
    let steps: Vec<&str> = d.waterfall.iter().map(|s| s.step.as_str()).collect();
    eprintln!("waterfall: {steps:?}");
    let pos = |name: &str| steps.iter().position(|s| *s == name).unwrap_or_else(|| panic!("no step {name:?} in {steps:?}"));
    // The Eviction API sets DisruptionTarget, then deletes; the kubelet kills, the pod goes,
    // the StatefulSet controller creates the replacement, the scheduler places it.
    for (a, b) in [
        ("requested", "eviction_accepted"),
        ("disruption_target", "pod_deleting"),
        ("pod_deleting", "pod_deleted"),
        ("pod_deleted", "pod_created"),
        ("pod_created", "pod_scheduled"),
        ("pod_scheduled", "member_back (measured)"),
        ("member_back (measured)", "healthy_list (measured)"),
    ] {
        assert!(pos(a) < pos(b), "{a} before {b}: {steps:?}");
    }
    assert!(d.waterfall.windows(2).all(|w| w[0].at <= w[1].at), "steps in time order: {steps:?}");
    assert_eq!(lab.etcdctl(&["get", "--prefix", "__leaderwatch/", "--keys-only"]).trim(), "", "the canary key is gone");

    // 2. Every verb rbac.yaml grants was used by that sitting (or the rule goes).
    let used: BTreeSet<(String, String, String)> = lab
        .audit()
        .iter()
        .filter(|e| e["user"]["username"] == "system:serviceaccount:dlock:leaderwatch")
        .map(|e| {
            let r = &e["objectRef"];
            let res = match r["subresource"].as_str() {
                Some(s) => format!("{}/{s}", r["resource"].as_str().unwrap_or("")),
                None => r["resource"].as_str().unwrap_or("").to_string(),
            };
            (r["apiGroup"].as_str().unwrap_or("").to_string(), res, e["verb"].as_str().unwrap_or("").to_string())
        })
        .collect();
    let unused: Vec<_> = granted().difference(&used).cloned().collect();
    assert!(unused.is_empty(), "granted but never used by a sitting: {unused:?} (used: {used:?})");

    // 3. One verb removed from a copy of the Role: the real authorizer's 403, in one line, exit 6.
    let role = std::fs::read_to_string(repo().join("deploy/k8s/leaderwatch/rbac.yaml")).expect("rbac.yaml");
    let no_pvc = role.replace("    resources: [\"persistentvolumeclaims\"]\n    verbs: [\"get\"]", "    resources: [\"persistentvolumeclaims\"]\n    verbs: [\"list\"]");
    assert_ne!(no_pvc, role, "the PVC rule is where the test expects it");
    let copy = out.path().join("rbac-no-pvc-get.yaml");
    std::fs::write(&copy, &no_pvc).expect("write copy");
    lab.ok(&["apply", "-f", copy.to_str().expect("path")]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pre = Command::new(env!("CARGO_BIN_EXE_leaderwatch")).args(["preflight", "--reach", "pod-ip", "--kubeconfig"]).arg(&kc).output().expect("preflight");
    let err = String::from_utf8_lossy(&pre.stderr);
    assert_eq!(pre.status.code(), Some(6), "stdout: {}\nstderr: {err}", String::from_utf8_lossy(&pre.stdout));
    let line = err.lines().find(|l| l.contains("403") || l.contains("forbidden")).unwrap_or_else(|| panic!("no 403 line in: {err}"));
    assert!(line.contains("persistentvolumeclaims"), "the line names what was refused: {line}");

    // 4. The eviction verb removed: the at_rest window is kept in an incomplete baseline.json.
    let no_evict = role.replace("    resources: [\"pods/eviction\"]\n    verbs: [\"create\"]", "    resources: [\"pods/eviction\"]\n    verbs: [\"get\"]");
    assert_ne!(no_evict, role, "the eviction rule is where the test expects it");
    std::fs::write(&copy, &no_evict).expect("write copy");
    lab.ok(&["apply", "-f", copy.to_str().expect("path")]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let run = out.path().join("forbidden");
    let r = measure(&kc, &run, "follower").await;
    let e = r.expect_err("a sitting whose eviction is forbidden fails");
    assert_eq!(e.exit_code(), 6, "{e}");
    let saved: Baseline = serde_json::from_slice(&std::fs::read(run.join("baseline.json")).expect("baseline.json written")).expect("baseline json");
    assert_eq!(saved.status, "incomplete");
    assert!(saved.windows.iter().any(|w| w.name == "at_rest" && w.duration_s > 15.0), "at_rest kept: {:?}", saved.windows);
    assert_eq!(lab.accepted_evictions().len(), 1, "still exactly one accepted Eviction in the whole run");
    lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac.yaml"]);
}
