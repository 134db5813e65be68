//! The sitting on a real Kubernetes cluster (lw-lab: kube-apiserver, controller-manager and
//! scheduler v1.35.4 built from k8s.io/kubernetes, three nodes of the real kubelet and
//! containerd, dlock's etcd 3.6.14 from the unmodified StatefulSet), under leaderwatch's own
//! ServiceAccount and the RBAC of deploy/k8s/leaderwatch/rbac.yaml. Short windows, through
//! the library or the CLI with the test-only idle floor; `make measure-kube` runs the full
//! length.
//!
//! Ignored in plain `cargo test` (they need root, runc and `make kube-tools`); `make test`
//! runs them (`make test-kube`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leaderwatch::io::lock::LockConfig;
use leaderwatch::io::probe::ProbeConfig;
use leaderwatch::k8s::KubeOptions;
use leaderwatch::k8s::discover::Reach;
use leaderwatch::model::baseline::{Baseline, Environment, KubeMethod};
use leaderwatch::model::baseline::{Completion, WindowName};
use leaderwatch::model::clock::{Clock, SystemClock};
use leaderwatch::ops::drive::TrialConfig;
use leaderwatch::ops::measure::{self, MeasureConfig};
use serde_json::Value;

use crate::support::lab;
use crate::support::locker::{self, Locker};
use crate::support::promtool;
use crate::support::writer;
use lab::{Lab, repo};

fn config(kubeconfig: &Path, out: &Path, target: &str, method: KubeMethod) -> MeasureConfig {
    MeasureConfig {
        kube: KubeOptions {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            context: None,
            namespace: "dlock".into(),
            selector: "app.kubernetes.io/name=dlock-etcd".into(),
            request_timeout: Duration::from_secs(10),
        },
        reach: Reach::PodIp,
        trial: TrialConfig {
            members: vec![],
            // Short windows: the assertions are on the disruption; each second here is
            // paid by every sitting of make test-lab.
            idle: Duration::from_secs(10),
            settle: Duration::from_secs(5),
            interval: Duration::from_millis(500),
            fast_interval: Duration::from_millis(100),
            target: target.parse().expect("target"),
            probe: ProbeConfig { timeout: Duration::from_secs(1), ..ProbeConfig::default() },
            out: out.to_owned(),
            recovery_timeout: Duration::from_secs(180),
            environment: Environment {
                description: "local control plane, Kubernetes v1.35.4, etcd {etcd}".into(),
                ..Environment::default()
            },
            cause_horizon: leaderwatch::analysis::attribution::DEFAULT_HORIZON,
            canary: Some(Duration::from_secs(1)),
            // As `measure` defaults it (the hold is the Go locker's, so the two compare).
            lock: Some(LockConfig {
                holders: 3,
                ttl_s: 10,
                hold: locker::HOLD,
                timeout: Duration::from_secs(1),
            }),
            metrics_addr: None,
            // measure sets it from `reach`.
            follow_pod_ips: false,
        },
        evict_timeout: Duration::from_secs(60),
        dry_run: false,
        method,
        down: Duration::from_secs(10),
    }
}

/// `leaderwatch measure` as a user runs it, with the tests' short windows (through the
/// test-only idle floor) and the test's environment label; `args` pick the target and method.
fn measure_cli(kubeconfig: &Path, out: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_leaderwatch"));
    c.arg("measure")
        .args(args)
        .args(["--idle", "10s", "--settle", "5s"])
        .args(["--environment", "local cluster, real kubelet (test)"])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--out")
        .arg(out)
        .env(leaderwatch::io::test_hooks::MIN_IDLE, "10s")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    c
}

async fn measure(kubeconfig: &Path, out: &Path, target: &str) -> leaderwatch::Result<Baseline> {
    measure_with(kubeconfig, out, target, KubeMethod::Evict).await
}

async fn measure_with(
    kubeconfig: &Path,
    out: &Path,
    target: &str,
    method: KubeMethod,
) -> leaderwatch::Result<Baseline> {
    measure_cfg(config(kubeconfig, out, target, method)).await
}

async fn measure_cfg(cfg: MeasureConfig) -> leaderwatch::Result<Baseline> {
    let client = leaderwatch::k8s::client(&cfg.kube).await.expect("client");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    measure::run(client, cfg, clock, std::future::pending()).await
}

/// A routine operation's sitting: a longer --evict-timeout (a rollout or drain replaces
/// every member) and a shorter --down.
fn maintenance_config(
    kubeconfig: &Path,
    out: &Path,
    target: &str,
    method: KubeMethod,
) -> MeasureConfig {
    let mut cfg = config(kubeconfig, out, target, method);
    cfg.evict_timeout = Duration::from_secs(300);
    cfg.down = Duration::from_secs(8);
    cfg
}

/// The lock canary ran through `what` on the real nodes: no lease lost (each lives 10 s,
/// and no member was frozen), it was granted in every window it ran in, and the lock
/// stayed safe over the run (tokens rising, no two holds overlapping in revision order).
fn lock_kept(b: &Baseline, what: &str) {
    assert_eq!(locker::leases_lost(b), 0, "{what}: a lease was lost");
    for w in b.windows.iter().filter(|w| w.name != WindowName::AtRest) {
        let l = w.lock.as_ref().unwrap_or_else(|| panic!("{what}: no lock figures in {}", w.name));
        assert!(l.grants > 0, "{what}: no grant in {}: {l:?}", w.name);
    }
    assert!(
        b.window(WindowName::AtRest).is_none_or(|w| w.lock.is_none()),
        "{what}: the lock canary ran at rest"
    );
    locker::assert_safe(b, &[]);
}

/// Every election after the request is ours: inside our own rollout or drain the pod
/// watcher often sees the controller take a member before the operation's poll does
/// (regression: the rollout's second election was put down to `kubernetes`).
fn all_ours(b: &Baseline, what: &str) {
    let causes: Vec<_> = b
        .windows
        .iter()
        .filter(|w| w.name != WindowName::AtRest)
        .flat_map(|w| &w.elections_detail)
        .map(|e| (e.term_to, e.cause, e.cause_event.as_ref().map(|c| c.kind)))
        .collect();
    assert!(
        causes.iter().all(|c| c.1 == leaderwatch::model::event::Cause::OwnDisruption),
        "{what}: every election caused by our own operation: {causes:?}"
    );
}

/// promtool's verdict on the rule `report --alert-rule --allow-local` derives from
/// `baselines`, over elections at `at` (seconds) for `minutes`: true when it never fires.
fn alert_silent(baselines: &[PathBuf], at: &[f64], minutes: u64) -> bool {
    let o = Command::new(env!("CARGO_BIN_EXE_leaderwatch"))
        .args(["report", "--alert-rule", "--allow-local", "--format", "prometheus"])
        .args(baselines)
        .output()
        .expect("report");
    assert!(o.status.success(), "report --alert-rule: {}", String::from_utf8_lossy(&o.stderr));
    eprintln!("{}", String::from_utf8_lossy(&o.stderr));
    promtool::alert_silent(&o.stdout, at, minutes)
}

/// The Roles and ClusterRoles of the three RBAC files as (apiGroup, resource, verb).
fn granted() -> BTreeSet<(String, String, String)> {
    let text = ["rbac.yaml", "rbac-maintenance.yaml", "rbac-drain.yaml"]
        .map(|f| std::fs::read_to_string(repo().join("deploy/k8s/leaderwatch").join(f)).expect(f))
        .join("\n---\n");
    let mut out = BTreeSet::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let v = <serde_yaml_ng::Value as serde::Deserialize>::deserialize(doc).expect("yaml");
        for rule in v["rules"].as_sequence().into_iter().flatten() {
            for g in rule["apiGroups"].as_sequence().into_iter().flatten() {
                for r in rule["resources"].as_sequence().into_iter().flatten() {
                    for verb in rule["verbs"].as_sequence().into_iter().flatten() {
                        out.insert((
                            g.as_str().unwrap_or("").into(),
                            r.as_str().unwrap_or("").into(),
                            verb.as_str().unwrap_or("").into(),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// The sitting on the real control plane with surge nodes, every method leaderwatch has,
/// under the real RBAC: the steps run in this order on one cluster, because the last ones
/// read the whole audit log the first ones wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and make kube-tools; make test runs it"]
async fn the_sitting_on_the_real_control_plane_under_the_real_rbac() {
    let (lab, kc, out) = Lab::deployed_with(&[], &["--surge-nodes"]);
    let (kc, out) = (kc.as_path(), out.path());
    a_follower_eviction_goes_through_the_real_eviction_api(&lab, kc, out).await;
    rbac_yaml_grants_evictions_only_and_rbac_maintenance_adds_delete_and_patch(&lab);
    a_follower_delete_bypasses_the_eviction_api(&lab, kc, out).await;
    let rolling =
        a_rolling_restart_replaces_every_member_highest_ordinal_first(&lab, kc, out).await;
    lab.ok(&["delete", "-f", "deploy/k8s/leaderwatch/rbac-maintenance.yaml"]);

    lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac-drain.yaml"]);
    let drained = a_drain_with_a_surge_node_brings_the_member_back_on_it(&lab, kc, out).await;
    let pending = a_drain_without_a_surge_node_waits_for_the_uncordon(&lab, kc, out).await;
    a_sigterm_mid_drain_uncordons_and_keeps_what_was_measured(&lab, kc, out).await;
    the_alert_rule_is_silent_on_these_runs_and_fires_on_a_storm(&[
        &out.join("delete"),
        &rolling,
        &drained,
        &pending,
    ]);
    lab.ok(&["delete", "-f", "deploy/k8s/leaderwatch/rbac-drain.yaml"]);

    every_verb_rbac_yaml_grants_was_used(&lab);
    a_role_without_pvc_get_fails_preflight_with_one_403_line(&lab, kc, out).await;
    a_role_without_eviction_keeps_at_rest_in_an_incomplete_baseline(&lab, kc, out).await;
    lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac.yaml"]);
}

/// A pod's UID now ("" when it has none).
fn pod_uid(lab: &Lab, name: &str) -> String {
    lab.json(&["-n", "dlock", "get", "pod", name, "-o", "json"])["metadata"]["uid"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Whether leaderwatch's ServiceAccount may do `verb` on `what` (`kubectl auth can-i --as`).
fn sa_can(lab: &Lab, verb: &str, what: &[&str]) -> bool {
    let sa = "system:serviceaccount:dlock:leaderwatch";
    let mut args = vec!["-n", "dlock", "auth", "can-i", verb];
    args.extend_from_slice(what);
    args.extend_from_slice(&["--as", sa]);
    lab.kubectl(&args).1.trim() == "yes"
}

/// deploy/k8s/leaderwatch/rbac.yaml as committed, for the copies that drop one verb.
fn rbac_yaml() -> String {
    std::fs::read_to_string(repo().join("deploy/k8s/leaderwatch/rbac.yaml")).expect("rbac.yaml")
}

/// Step 1: a follower eviction through the real Eviction API, the PDB computed by the real
/// disruption controller, the pod recreated by the real StatefulSet controller, back in its
/// PV's zone; the waterfall's Kubernetes steps in the order the real controllers made them.
async fn a_follower_eviction_goes_through_the_real_eviction_api(lab: &Lab, kc: &Path, out: &Path) {
    let uids: Vec<String> = (0..3).map(|i| pod_uid(lab, &format!("dlock-etcd-{i}"))).collect();
    let term_before = lab.raft_term();
    let go = Locker::start_following(
        lab.client_urls_fn(),
        "__leaderwatch/independent-lock",
        Some(Duration::from_secs(1)),
        10,
    );
    let b = measure(kc, &out.join("follower"), "follower")
        .await
        .unwrap_or_else(|e| panic!("measure: {e}"));
    let go = tokio::task::spawn_blocking(move || go.stop()).await.expect("locker");
    let term_after = lab.raft_term();
    assert_eq!(b.status, Completion::Complete, "{:?}", b.incomplete_reason);
    let d = b.disruption.as_ref().expect("disruption");
    assert_eq!(d.method.to_string(), "kubernetes-eviction");
    // No election, so no hand-over to compare: the longest time nobody could take the lock
    // in the disruption window, the lock canary's against Go's concurrency.Mutex's.
    let dis = b.window(WindowName::Disruption).expect("window");
    let canary = dis.lock.as_ref().and_then(|l| l.longest_unavailable_s).expect("lock canary");
    let go_s = locker::unavailable_over(&go, dis.start, dis.end).expect("Go granted in it");
    eprintln!("follower eviction: lock unavailable: canary {canary:.3} s, Go {go_s:.3} s");
    assert!(
        (canary - go_s).abs() <= locker::AGREE_S,
        "follower eviction: canary {canary:.3} s vs Go {go_s:.3} s"
    );
    assert!(!go.iter().any(|e| e.kind == "session_lost"), "the Go client lost a session");
    assert_eq!(d.attempts, 1, "the PDB allowed the first eviction");
    assert_eq!(
        lab.accepted_evictions(),
        vec![d.target.clone()],
        "exactly one accepted Eviction, of the target (audit log)"
    );
    let elections: u64 = b.windows.iter().filter_map(|w| w.elections).sum();
    assert_eq!(
        elections,
        term_after - term_before,
        "elections equal the raft-term delta across the sitting"
    );
    let pod = lab.json(&["-n", "dlock", "get", "pod", &d.target, "-o", "json"]);
    let idx: usize = d.target.rsplit('-').next().and_then(|i| i.parse().ok()).expect("ordinal");
    assert_ne!(
        pod["metadata"]["uid"].as_str().unwrap_or(""),
        uids[idx],
        "the StatefulSet recreated the evicted pod"
    );
    let node =
        lab.json(&["get", "node", pod["spec"]["nodeName"].as_str().expect("node"), "-o", "json"]);
    let pvc = lab.json(&["-n", "dlock", "get", "pvc", &format!("data-{}", d.target), "-o", "json"]);
    let pv =
        lab.json(&["get", "pv", pvc["spec"]["volumeName"].as_str().expect("bound"), "-o", "json"]);
    assert_eq!(
        node["metadata"]["labels"]["topology.kubernetes.io/zone"],
        pv["metadata"]["labels"]["topology.kubernetes.io/zone"],
        "back in its PV's zone"
    );
    // The waterfall's Kubernetes steps, in the order the real controllers produced them.
    let steps: Vec<&str> = d.waterfall.iter().map(|s| s.step.as_str()).collect();
    eprintln!("waterfall: {steps:?}");
    let pos = |name: &str| {
        steps
            .iter()
            .position(|s| *s == name)
            .unwrap_or_else(|| panic!("no step {name:?} in {steps:?}"))
    };
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
    lock_kept(&b, "a follower eviction");
    assert_eq!(
        lab.etcdctl(&["get", "--prefix", "__leaderwatch/", "--keys-only"]).trim(),
        "",
        "the canary's key and the lock canary's keys are gone"
    );
}

/// Step 1b, first half: rbac.yaml alone (which ran step 1) grants nothing that bypasses the
/// PDB; the delete and the rolling restart run with rbac-maintenance.yaml beside it.
fn rbac_yaml_grants_evictions_only_and_rbac_maintenance_adds_delete_and_patch(lab: &Lab) {
    let can = |verb: &str, what: &[&str]| sa_can(lab, verb, what);
    let evict = ["pods", "--subresource=eviction"];
    assert_eq!(
        (can("delete", &["pods"]), can("patch", &["statefulsets.apps"]), can("create", &evict)),
        (false, false, true),
        "rbac.yaml: evictions only"
    );
    lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac-maintenance.yaml"]);
    assert!(
        can("delete", &["pods"]) && can("patch", &["statefulsets.apps"]),
        "rbac-maintenance.yaml"
    );
}

/// Step 1b: `--method delete` of a follower: a DELETE with the pod's grace period, no
/// Eviction, the same recovery. Once the replacement is Ready the PDB allows one again.
async fn a_follower_delete_bypasses_the_eviction_api(lab: &Lab, kc: &Path, out: &Path) {
    lab.wait_pdb_allows_one();
    let pods_before: Vec<String> =
        (0..3).map(|i| pod_uid(lab, &format!("dlock-etcd-{i}"))).collect();
    let term_before = lab.raft_term();
    let b = measure_with(kc, &out.join("delete"), "follower", KubeMethod::Delete)
        .await
        .unwrap_or_else(|e| panic!("measure --method delete: {e}"));
    let term_after = lab.raft_term();
    assert_eq!(b.status, Completion::Complete, "{:?}", b.incomplete_reason);
    let d = b.disruption.as_ref().expect("disruption");
    assert_eq!((d.method.to_string().as_str(), d.attempts), ("kubernetes-delete", 1));
    assert_eq!(
        lab.accepted_evictions().len(),
        1,
        "a delete is no Eviction: still the one of step 1"
    );
    assert_eq!(
        lab.sa_requests("delete", "pods"),
        vec![d.target.clone()],
        "exactly one DELETE by leaderwatch, of the target (audit log)"
    );
    let idx: usize = d.target.rsplit('-').next().and_then(|i| i.parse().ok()).expect("ordinal");
    assert_ne!(
        pod_uid(lab, &d.target),
        pods_before[idx],
        "the StatefulSet recreated the deleted pod"
    );
    assert_eq!(
        b.windows.iter().filter_map(|w| w.elections).sum::<u64>(),
        term_after - term_before,
        "elections equal the raft-term delta"
    );
    let steps: Vec<&str> = d.waterfall.iter().map(|s| s.step.as_str()).collect();
    let pos = |name: &str| {
        steps
            .iter()
            .position(|s| *s == name)
            .unwrap_or_else(|| panic!("no step {name:?} in {steps:?}"))
    };
    for (a, b) in [
        ("requested", "delete_accepted"),
        ("pod_deleting", "pod_deleted"),
        ("pod_deleted", "pod_created"),
        ("pod_created", "member_back (measured)"),
        ("member_back (measured)", "healthy_list (measured)"),
    ] {
        assert!(pos(a) < pos(b), "{a} before {b}: {steps:?}");
    }
    assert!(
        !steps.contains(&"disruption_target"),
        "no DisruptionTarget without an Eviction: {steps:?}"
    );
}

/// Step 1c: `--method rolling-restart`: one patch of the template (kubectl rollout
/// restart); the real StatefulSet controller replaces every member, highest ordinal first,
/// one at a time; the sitting lasts until the rollout is complete and the list healthy.
/// Returns the run's directory (step 1g reads it).
async fn a_rolling_restart_replaces_every_member_highest_ordinal_first(
    lab: &Lab,
    kc: &Path,
    out: &Path,
) -> PathBuf {
    lab.wait_pdb_allows_one();
    let pods_before: Vec<String> =
        (0..3).map(|i| pod_uid(lab, &format!("dlock-etcd-{i}"))).collect();
    let term_before = lab.raft_term();
    let rolling = out.join("rolling-restart");
    // Go's concurrency.Mutex beside it, told each replaced member's new address as the pods
    // come back (every member gets one): the lock canary's reference for each hand-over.
    let go = Locker::start_following(
        lab.client_urls_fn(),
        "__leaderwatch/independent-lock",
        Some(Duration::from_secs(1)),
        10,
    );
    let b = measure_cfg(maintenance_config(kc, &rolling, "follower", KubeMethod::RollingRestart))
        .await
        .unwrap_or_else(|e| panic!("measure --method rolling-restart: {e}"));
    let go = tokio::task::spawn_blocking(move || go.stop()).await.expect("locker");
    let term_after = lab.raft_term();
    assert_eq!(b.status, Completion::Complete, "{:?}", b.incomplete_reason);
    let d = b.disruption.as_ref().expect("disruption");
    assert_eq!(
        (d.method.to_string().as_str(), d.target.as_str()),
        ("kubernetes-rolling-restart", "dlock-etcd-2"),
        "the first replaced is the target"
    );
    let m = d.maintenance.as_ref().expect("a maintenance record");
    eprintln!("rolling restart: {m:#?}");
    let order: Vec<&str> = m.members.iter().map(|r| r.member.as_str()).collect();
    assert_eq!(
        order,
        ["dlock-etcd-2", "dlock-etcd-1", "dlock-etcd-0"],
        "highest ordinal first, each once"
    );
    for (i, before) in pods_before.iter().enumerate() {
        assert_ne!(&pod_uid(lab, &format!("dlock-etcd-{i}")), before, "dlock-etcd-{i} replaced");
    }
    let ready: Vec<f64> = m.members.iter().map(|r| r.ready_s.expect("each Ready again")).collect();
    assert!(
        m.members.windows(2).all(|w| w[0].ready_s <= w[1].terminating_s),
        "one at a time: each Ready before the next terminates: {m:?}"
    );
    assert!(
        m.operation_s.is_some_and(|t| ready.iter().all(|r| *r <= t)),
        "the rollout completes after the last Ready: {m:?}"
    );
    assert!(d.request_to_healthy_s >= m.operation_s, "healthy only once the rollout is complete");
    assert_eq!(
        b.windows.iter().filter_map(|w| w.elections).sum::<u64>(),
        term_after - term_before,
        "elections equal the raft-term delta"
    );
    let sts = lab.json(&["-n", "dlock", "get", "sts", "dlock-etcd", "-o", "json"]);
    assert!(
        sts["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_string(),
        "the template annotation kubectl rollout restart sets"
    );
    assert_eq!(
        sts["status"]["updateRevision"], sts["status"]["currentRevision"],
        "rollout complete"
    );
    assert_eq!(
        lab.sa_requests("patch", "statefulsets").len(),
        1,
        "one patch of the StatefulSet by leaderwatch"
    );
    all_ours(&b, "the rolling restart");
    // What each hand-over cost a lock, the lock canary as Go's concurrency.Mutex saw it.
    let locks = crate::support::locks(&rolling);
    for e in b.windows.iter().flat_map(|w| &w.elections_detail) {
        locker::assert_agree("rolling restart", e, &locks, &go, None);
    }
    assert!(locker::tokens_increase(&go), "the Go client's tokens went down");
    assert!(!go.iter().any(|e| e.kind == "session_lost"), "the Go client lost a session");
    // Every member replaced, each with a new address: the lock canary's streams and ops
    // followed them (repointed as the pods came back) and no lease was lost.
    lock_kept(&b, "the rolling restart");
    rolling
}

/// Step 1d: `--method drain` of a follower's node with a surge node: cordon, every pod
/// evicted through the Eviction API, the member back on the zone's new node, uncordoned.
/// Returns the run's directory (step 1g reads it).
async fn a_drain_with_a_surge_node_brings_the_member_back_on_it(
    lab: &Lab,
    kc: &Path,
    out: &Path,
) -> PathBuf {
    lab.wait_pdb_allows_one();
    let term_before = lab.raft_term();
    let drained = out.join("drain-surge");
    let b = measure_cfg(maintenance_config(kc, &drained, "follower", KubeMethod::Drain))
        .await
        .unwrap_or_else(|e| panic!("measure --method drain: {e}"));
    let term_after = lab.raft_term();
    assert_eq!(b.status, Completion::Complete, "{:?}", b.incomplete_reason);
    let d = b.disruption.as_ref().expect("disruption");
    let m = d.maintenance.as_ref().expect("a maintenance record");
    eprintln!("drain with a surge node: {m:#?}");
    let node = m.node.clone().expect("the drained node");
    assert_eq!(
        m.members.iter().map(|r| r.member.as_str()).collect::<Vec<_>>(),
        [d.target.as_str()],
        "one member replaced: the target"
    );
    assert!(m.evicted.contains(&d.target), "the target was evicted: {m:?}");
    assert_eq!(
        m.members[0].node.as_deref(),
        Some(format!("{node}-surge").as_str()),
        "back on the surge node"
    );
    assert_eq!(lab.zone(&format!("{node}-surge")), lab.zone(&node), "in the drained node's zone");
    assert!(!lab.unschedulable(&node), "{node} uncordoned afterwards");
    assert!(m.uncordoned_at.is_some());
    assert_eq!(
        b.windows.iter().filter_map(|w| w.elections).sum::<u64>(),
        term_after - term_before,
        "elections equal the raft-term delta"
    );
    all_ours(&b, "the drain with a surge node");
    drained
}

/// Step 1e: a drain of the leader's node with no surge node: the member stays Pending
/// until its node is uncordoned after --down, then comes back there. Returns the run's
/// directory (step 1g reads it).
async fn a_drain_without_a_surge_node_waits_for_the_uncordon(
    lab: &Lab,
    kc: &Path,
    out: &Path,
) -> PathBuf {
    lab.wait_pdb_allows_one();
    let leader = lab.leader();
    let leader_node =
        lab.json(&["-n", "dlock", "get", "pod", &leader, "-o", "json"])["spec"]["nodeName"]
            .as_str()
            .expect("node")
            .to_string();
    lab.ok(&["annotate", "node", &leader_node, "lw-lab/no-surge=true"]);
    let term_before = lab.raft_term();
    let pending = out.join("drain-no-surge");
    let b = measure_cfg(maintenance_config(kc, &pending, "leader", KubeMethod::Drain))
        .await
        .unwrap_or_else(|e| panic!("measure --method drain (no surge): {e}"));
    let term_after = lab.raft_term();
    assert_eq!(b.status, Completion::Complete, "{:?}", b.incomplete_reason);
    let d = b.disruption.as_ref().expect("disruption");
    assert!(d.target_was_leader && d.target == leader);
    let m = d.maintenance.as_ref().expect("a maintenance record");
    eprintln!("drain without a surge node: {m:#?}");
    assert_eq!(m.members[0].node.as_deref(), Some(leader_node.as_str()), "back on its own node");
    let uncordoned_s = m
        .uncordoned_at
        .map(|u| (u - d.requested_at).num_milliseconds() as f64 / 1e3)
        .expect("uncordoned");
    assert!(
        m.members[0].ready_s.is_some_and(|r| r > uncordoned_s),
        "Ready only after the uncordon: {m:?}"
    );
    assert!(!lab.unschedulable(&leader_node), "{leader_node} uncordoned afterwards");
    assert!(
        events(&pending).iter().any(|e| e.2 == "node_uncordoned" && e.3.contains("--down")),
        "uncordoned after --down"
    );
    assert_eq!(
        b.windows.iter().filter_map(|w| w.elections).sum::<u64>(),
        term_after - term_before,
        "elections equal the raft-term delta"
    );
    all_ours(&b, "the drain of the leader's node");
    pending
}

/// Step 1f: SIGTERM mid-drain (the CLI, as a Job's pod gets it): the node is uncordoned
/// before leaderwatch exits, and what was measured is kept (exit 5).
async fn a_sigterm_mid_drain_uncordons_and_keeps_what_was_measured(
    lab: &Lab,
    kc: &Path,
    out: &Path,
) {
    lab.wait_pdb_allows_one();
    let cut = out.join("drain-sigterm");
    let mut child = measure_cli(kc, &cut, &["--method", "drain", "--target", "follower"])
        .args(["--reach", "pod-ip"])
        .spawn()
        .expect("leaderwatch measure");
    wait_for_event(&cut, "node_cordoned", Duration::from_secs(120)).await;
    signal(child.id() as i32, nix::sys::signal::Signal::SIGTERM);
    let st = child.wait().expect("wait");
    assert_eq!(st.code(), Some(5), "a sitting cut by SIGTERM is incomplete");
    let cut_node = events(&cut)
        .iter()
        .find(|e| e.2 == "node_cordoned")
        .map(|e| e.3.split_whitespace().next().unwrap_or("").to_string())
        .expect("cordoned row");
    assert!(!lab.unschedulable(&cut_node), "{cut_node} uncordoned after the SIGTERM");
    assert!(events(&cut).iter().any(|e| e.2 == "node_uncordoned"), "the uncordon is in events.csv");
    let saved: Baseline =
        serde_json::from_slice(&std::fs::read(cut.join("baseline.json")).expect("baseline.json"))
            .expect("json");
    assert_eq!(saved.status, Completion::Incomplete);
}

/// Step 1g: the alert rule derived from these runs (the delete, the rolling restart, the
/// two complete drains) stays silent on the elections each recorded, and fires on a storm
/// (its negative control).
fn the_alert_rule_is_silent_on_these_runs_and_fires_on_a_storm(runs: &[&Path]) {
    let runs: Vec<PathBuf> = runs.iter().map(|r| r.join("baseline.json")).collect();
    for r in &runs {
        let b: Value = serde_json::from_slice(&std::fs::read(r).expect("baseline")).expect("json");
        let at = promtool::election_times(&b, 120.0);
        assert!(
            alert_silent(&runs, &at, 30),
            "the alert fired on the routine operation of {}: {at:?}",
            r.display()
        );
    }
    let storm: Vec<f64> = (0..12).map(|i| 120.0 + f64::from(i) * 20.0).collect();
    assert!(!alert_silent(&runs, &storm, 30), "twelve elections in four minutes must fire");
}

/// Step 2: every verb rbac.yaml grants was used by those sittings (or the rule goes).
fn every_verb_rbac_yaml_grants_was_used(lab: &Lab) {
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
            (
                r["apiGroup"].as_str().unwrap_or("").to_string(),
                res,
                e["verb"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let unused: Vec<_> = granted().difference(&used).cloned().collect();
    assert!(unused.is_empty(), "granted but never used by a sitting: {unused:?} (used: {used:?})");
}

/// Step 3: one verb removed from a copy of the Role: the real authorizer's 403, in one
/// line, exit 6.
async fn a_role_without_pvc_get_fails_preflight_with_one_403_line(
    lab: &Lab,
    kc: &Path,
    out: &Path,
) {
    let role = rbac_yaml();
    let no_pvc = role.replace(
        "    resources: [\"persistentvolumeclaims\"]\n    verbs: [\"get\"]",
        "    resources: [\"persistentvolumeclaims\"]\n    verbs: [\"list\"]",
    );
    assert_ne!(no_pvc, role, "the PVC rule is where the test expects it");
    let copy = out.join("rbac-no-pvc-get.yaml");
    std::fs::write(&copy, &no_pvc).expect("write copy");
    lab.ok(&["apply", "-f", copy.to_str().expect("path")]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pre = Command::new(env!("CARGO_BIN_EXE_leaderwatch"))
        .args(["preflight", "--reach", "pod-ip", "--kubeconfig"])
        .arg(kc)
        .output()
        .expect("preflight");
    let err = String::from_utf8_lossy(&pre.stderr);
    assert_eq!(
        pre.status.code(),
        Some(6),
        "stdout: {}\nstderr: {err}",
        String::from_utf8_lossy(&pre.stdout)
    );
    let line = err
        .lines()
        .find(|l| l.contains("403") || l.contains("forbidden"))
        .unwrap_or_else(|| panic!("no 403 line in: {err}"));
    assert!(line.contains("persistentvolumeclaims"), "the line names what was refused: {line}");
}

/// Step 4: the eviction verb removed: the at_rest window is kept in an incomplete
/// baseline.json.
async fn a_role_without_eviction_keeps_at_rest_in_an_incomplete_baseline(
    lab: &Lab,
    kc: &Path,
    out: &Path,
) {
    let role = rbac_yaml();
    let copy = out.join("rbac-no-pvc-get.yaml");
    let no_evict = role.replace(
        "    resources: [\"pods/eviction\"]\n    verbs: [\"create\"]",
        "    resources: [\"pods/eviction\"]\n    verbs: [\"get\"]",
    );
    assert_ne!(no_evict, role, "the eviction rule is where the test expects it");
    std::fs::write(&copy, &no_evict).expect("write copy");
    lab.ok(&["apply", "-f", copy.to_str().expect("path")]);
    lab.wait_pdb_allows_one();
    let evictions_before = lab.accepted_evictions().len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let run = out.join("forbidden");
    let r = measure(kc, &run, "follower").await;
    let e = r.expect_err("a sitting whose eviction is forbidden fails");
    assert!(matches!(e, leaderwatch::Error::Kube(_)), "exit 6, the Kubernetes API: {e}");
    let saved: Baseline = serde_json::from_slice(
        &std::fs::read(run.join("baseline.json")).expect("baseline.json written"),
    )
    .expect("baseline json");
    assert_eq!(saved.status, Completion::Incomplete);
    assert!(
        saved.windows.iter().any(|w| w.name == WindowName::AtRest && w.duration_s > 8.0),
        "at_rest kept: {:?}",
        saved.windows
    );
    assert_eq!(
        lab.accepted_evictions().len(),
        evictions_before,
        "no Eviction accepted by the forbidden sitting"
    );
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig)
        .unwrap_or_else(|e| panic!("signal {sig} to {pid}: {e}"));
}

/// events.csv rows as (ts, member, kind, detail), read with the csv crate.
fn events(run: &Path) -> Vec<(String, String, String, String)> {
    let Ok(mut r) = csv::Reader::from_path(run.join("events.csv")) else { return vec![] };
    r.records()
        .filter_map(|x| x.ok())
        .map(|x| (x[0].to_string(), x[3].to_string(), x[4].to_string(), x[5].to_string()))
        .collect()
}

async fn wait_for_event(run: &Path, kind: &str, within: Duration) {
    let t = Instant::now();
    while !events(run).iter().any(|e| e.2 == kind) {
        assert!(
            t.elapsed() < within,
            "no {kind} row in events.csv within {} s: {:#?}",
            within.as_secs(),
            events(run)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The real control plane's faults mid-sitting: kube-apiserver restarted during at_rest
/// (the watchers reconnect; with the control-plane etcd compacting every 10 s a resumed
/// watch meets a real 410 Gone and relists), then unreachable (SIGSTOP) for 30 s right
/// after the eviction was accepted. The members are measured all along, the outage is a
/// pair of rows with its length, no Kubernetes event is lost or recorded twice, and the
/// eviction is not repeated.
async fn api_server_restart_and_outage_mid_sitting_lose_and_repeat_nothing(
    lab: &Lab,
    kc: &Path,
    out: &Path,
) {
    let evicted = lab.accepted_evictions().len();
    let run = out.join("faults");
    let mut cfg = config(kc, &run, "follower", KubeMethod::Evict);
    // Long enough that the restart (up to 30 s of graceful shutdown, then the new one) is
    // over before the eviction.
    cfg.trial.idle = Duration::from_secs(90);
    // Long enough that the replacement's Ready is watched after the 30 s freeze: with 5 s
    // its pod_ready came after the sitting had ended (seen once on a fresh clone).
    cfg.trial.settle = Duration::from_secs(15);
    let client = leaderwatch::k8s::client(&cfg.kube).await.expect("client");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    // The faults, beside the sitting (its future is not Send: both run in this task).
    let (result, frozen_at) = tokio::join!(
        measure::run(client, cfg, clock, std::future::pending()),
        restart_then_freeze_the_api_server(lab, &run)
    );

    let b = result.unwrap_or_else(|e| panic!("measure: {e}"));
    assert_eq!(b.status, Completion::Complete, "{:?}", b.incomplete_reason);
    let d = b.disruption.as_ref().expect("disruption");
    assert_eq!(
        lab.evictions_since(evicted),
        vec![d.target.clone()],
        "one accepted Eviction, not repeated"
    );
    let ev = events(&run);
    let accepted = both_outages_are_rows_with_their_length(&ev);
    no_kubernetes_event_is_lost_or_recorded_twice(&ev, &d.target, &accepted);
    the_members_were_measured_through_the_outage(&run, frozen_at);
}

/// The faults: at rest, kube-apiserver restarted (lw-lab does it on SIGUSR1) and the new
/// one waited for; once the eviction is accepted, the API server silent (SIGSTOP) for
/// 30 s. Returns when the freeze began.
async fn restart_then_freeze_the_api_server(
    lab: &Lab,
    run: &Path,
) -> chrono::DateTime<chrono::Utc> {
    // At rest: restart kube-apiserver (lw-lab does it on SIGUSR1) and wait for the new one.
    wait_for_event(run, "sitting_started", Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    let old = lab.apiserver_pid();
    signal(lab.child.id() as i32, nix::sys::signal::Signal::SIGUSR1);
    let t = Instant::now();
    while lab.apiserver_pid() == old {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "kube-apiserver not restarted within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The disruption: once the eviction is accepted, the API server goes silent for 30 s.
    wait_for_event(run, "eviction_accepted", Duration::from_secs(120)).await;
    let pid = lab.apiserver_pid();
    signal(pid, nix::sys::signal::Signal::SIGSTOP);
    let frozen_at = chrono::Utc::now();
    tokio::time::sleep(Duration::from_secs(30)).await;
    signal(pid, nix::sys::signal::Signal::SIGCONT);
    frozen_at
}

/// Both outages, as events.csv rows with their length: the restart (connection refused)
/// and the freeze (no answer). The heartbeat asks every 5 s with a 10 s timeout, so a row
/// can start up to 15 s late: a 30 s freeze reads as 15 s or more. Returns the time of
/// the eviction_accepted row, which separates the two.
fn both_outages_are_rows_with_their_length(ev: &[(String, String, String, String)]) -> String {
    let accepted = ev
        .iter()
        .find(|e| e.2 == "eviction_accepted")
        .map(|e| e.0.clone())
        .expect("eviction_accepted row");
    let gaps: Vec<(String, f64)> = ev
        .iter()
        .filter(|e| e.2 == "api_reachable")
        .map(|e| {
            (
                e.0.clone(),
                e.3.split_whitespace()
                    .nth(3)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("gap in {:?}", e.3)),
            )
        })
        .collect();
    assert!(
        gaps.iter().any(|(t, g)| *t < accepted && *g >= 10.0),
        "the restart's outage recorded: {gaps:?}"
    );
    assert!(
        gaps.iter().any(|(t, g)| *t > accepted && *g >= 10.0),
        "the freeze after the eviction recorded: {gaps:?}"
    );
    accepted
}

/// A real 410 Gone met and relisted; no Kubernetes event recorded twice through a restart,
/// a relist and an outage; and none lost: the target's whole replacement is there.
fn no_kubernetes_event_is_lost_or_recorded_twice(
    ev: &[(String, String, String, String)],
    target: &str,
    accepted: &str,
) {
    assert!(
        ev.iter().any(|e| e.2 == "watch_error" && e.3.contains("too old resource version")),
        "a real 410 Gone was met and relisted: {ev:#?}"
    );
    // No Kubernetes event recorded twice, through a restart, a relist and an outage.
    let k8s: Vec<_> =
        ev.iter().filter(|e| e.2 == "k8s_event").map(|e| (e.1.clone(), e.3.clone())).collect();
    let unique: BTreeSet<_> = k8s.iter().cloned().collect();
    assert_eq!(k8s.len(), unique.len(), "a k8s_event row twice");
    // Nothing lost: the target's whole replacement is there, once each, after the eviction
    // (the first list reported the old pod's state once too, as `pod_seen` and its figures).
    for kind in ["pod_deleted", "pod_created", "pod_scheduled", "pod_ready"] {
        let n =
            ev.iter().filter(|e| e.1 == target && e.2 == kind && e.0.as_str() > accepted).count();
        assert_eq!(n, 1, "{kind} of {target} recorded {n} times: {ev:#?}");
    }
}

/// The members were measured through the outage: no gap between rounds over 3 s.
fn the_members_were_measured_through_the_outage(
    run: &Path,
    frozen_at: chrono::DateTime<chrono::Utc>,
) {
    let mut r = csv::Reader::from_path(run.join("samples.csv")).expect("samples.csv");
    let mut ts: Vec<chrono::DateTime<chrono::Utc>> =
        r.records().filter_map(|x| x.ok()).filter_map(|x| x[0].parse().ok()).collect();
    ts.dedup();
    let during: Vec<_> = ts
        .iter()
        .filter(|t| **t >= frozen_at && **t <= frozen_at + chrono::Duration::seconds(30))
        .collect();
    assert!(during.len() >= 20, "rounds while the API server was frozen: {}", during.len());
    let worst = ts.windows(2).map(|w| (w[1] - w[0]).num_milliseconds()).max().unwrap_or(0);
    assert!(worst <= 3_000, "a {worst} ms gap between rounds");
}

/// Four checks on one cluster with dlock deployed as a user deploys it, one after the
/// other, each starting from three Ready members and a PDB that allows one disruption
/// (a cluster each cost 55 s of bring-up and deploy, most of a short test). Its
/// control-plane etcd compacts every 10 s, for the API server's faults, which come last:
/// the others watch through the same 410s as any long sitting would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and make kube-tools; make test runs it"]
async fn the_pdb_a_leader_eviction_the_port_forward_and_the_api_server_s_faults() {
    let (lab, kc, out) = Lab::deployed(&["--etcd-compaction-interval=10s"]);
    let (kc, out) = (kc.as_path(), out.path());
    a_not_ready_member_makes_the_real_pdb_refuse_until_it_is_ready_again(&lab, kc, out).await;
    lab.wait_settled();
    a_leader_eviction_is_one_election_caused_by_our_eviction(&lab, kc, out).await;
    lab.wait_settled();
    measure_through_the_real_port_forward_follows_the_recreated_member(&lab, kc, out);
    lab.wait_settled();
    api_server_restart_and_outage_mid_sitting_lose_and_repeat_nothing(&lab, kc, out).await;
}

/// The PDB for real: a sitting whose preflight passed, then one member NotReady (its etcd
/// frozen by SIGSTOP during at_rest, so the real readiness probe fails and the real
/// disruption controller counts 2 healthy of 3): the real API refuses the eviction with the
/// disruption budget's cause; leaderwatch retries every 5 s, records each refusal, and
/// after --evict-timeout ends incomplete with at_rest kept. Thawed and Ready again, the
/// next sitting's eviction goes through: one in all.
async fn a_not_ready_member_makes_the_real_pdb_refuse_until_it_is_ready_again(
    lab: &Lab,
    kc: &Path,
    out: &Path,
) {
    let evicted = lab.accepted_evictions().len();
    let frozen = "dlock-etcd-2";
    let pod = lab.json(&["-n", "dlock", "get", "pod", frozen, "-o", "json"]);
    let pid = lab.container_pid(&pod);

    let run = out.join("blocked");
    let mut cfg = config(kc, &run, "dlock-etcd-0", KubeMethod::Evict);
    // At rest long enough for the readiness probe (3 x 5 s) and the disruption controller.
    cfg.trial.idle = Duration::from_secs(40);
    cfg.evict_timeout = Duration::from_secs(16);
    let client = leaderwatch::k8s::client(&cfg.kube).await.expect("client");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let freeze = async {
        wait_for_event(&run, "sitting_started", Duration::from_secs(60)).await;
        signal(pid, nix::sys::signal::Signal::SIGSTOP);
    };
    let (r, ()) = tokio::join!(measure::run(client, cfg, clock, std::future::pending()), freeze);
    signal(pid, nix::sys::signal::Signal::SIGCONT);
    let e = r.expect_err("blocked past --evict-timeout");
    assert!(matches!(e, leaderwatch::Error::Incomplete(_)), "exit 5, incomplete: {e}");
    assert!(e.to_string().contains("still blocked"), "{e}");
    let saved: Baseline = serde_json::from_slice(
        &std::fs::read(run.join("baseline.json")).expect("baseline.json written"),
    )
    .expect("baseline json");
    assert_eq!(saved.status, Completion::Incomplete);
    assert!(
        saved.windows.iter().any(|w| w.name == WindowName::AtRest && w.full_length),
        "at_rest kept whole: {:?}",
        saved.windows
    );
    let refusals: Vec<_> = events(&run).into_iter().filter(|e| e.2 == "eviction_blocked").collect();
    assert!(refusals.len() >= 3, "retried every 5 s for 16 s: {refusals:#?}");
    assert!(
        refusals.iter().all(|e| e.3.contains("disruption budget")),
        "the real PDB's cause: {refusals:#?}"
    );
    assert!(lab.evictions_since(evicted).is_empty(), "nothing evicted while the PDB refused");

    // Ready again: the next sitting's eviction goes through, the only one accepted.
    let t = Instant::now();
    while lab.json(&["-n", "dlock", "get", "pdb", "dlock-etcd-pdb", "-o", "json"])["status"]["disruptionsAllowed"]
        != 1
    {
        assert!(t.elapsed() < Duration::from_secs(120), "PDB back to 1 after {frozen} thawed");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let b = measure(kc, &out.join("after"), "follower")
        .await
        .unwrap_or_else(|e| panic!("measure: {e}"));
    assert_eq!(b.status, Completion::Complete);
    assert_eq!(lab.evictions_since(evicted).len(), 1, "exactly one member evicted in all");
}

/// A leader evicted through the real API: the kubelet's SIGTERM makes etcd hand leadership
/// over first, so the disruption window holds exactly one election, caused by our own
/// eviction (regression, from the fake API server's days: the evictor's rows come from
/// source `kubernetes` and were once taken for a bystander's Kubernetes event).
async fn a_leader_eviction_is_one_election_caused_by_our_eviction(
    lab: &Lab,
    kc: &Path,
    out: &Path,
) {
    let evicted = lab.accepted_evictions().len();
    // An independent writer beside it (tests/support/writer.rs), at the pods' IPs as the
    // sitting's canary is: its figure for the election is the canary's reference.
    let urls = lab.client_urls();
    assert_eq!(urls.len(), 3, "every member's pod has its address: {urls:?}");
    let w = writer::Writer::start(&urls);
    // And Go's concurrency.Mutex (tests/support/locker.rs), each call under the lock
    // canary's 1 s deadline: its grant gap is the lock canary's reference.
    let go =
        Locker::start(&urls, "__leaderwatch/independent-lock", Some(Duration::from_secs(1)), 10);
    let out = out.join("leader");
    let b = measure(kc, &out, "leader").await.unwrap_or_else(|e| panic!("measure: {e}"));
    let (ops, go) =
        tokio::task::spawn_blocking(move || (w.stop(), go.stop())).await.expect("writer, locker");
    assert_eq!(b.status, Completion::Complete, "{:?}", b.incomplete_reason);
    let d = b.disruption.as_ref().expect("disruption");
    assert!(d.target_was_leader);
    assert!(
        b.environment.timing_source.contains("StatefulSet dlock/dlock-etcd"),
        "timing read from the real StatefulSet: {}",
        b.environment.timing_source
    );
    assert_eq!((b.environment.heartbeat_ms, b.environment.election_ms), (Some(100), Some(1000)));
    let dis = b.window(WindowName::Disruption).expect("window");
    assert_eq!(
        dis.elections,
        Some(1),
        "a graceful transfer is one election: {:?}",
        dis.elections_detail
    );
    let e = dis.elections_detail.first().expect("its detail");
    let cause = e.cause_event.as_ref().expect("cause_event");
    assert_eq!(
        (e.cause.as_str(), cause.kind.as_str(), cause.member.as_str()),
        ("own_disruption", "eviction_accepted", d.target.as_str()),
        "{e:?}"
    );
    assert_eq!(lab.evictions_since(evicted), vec![d.target.clone()]);
    // The canary measures the cluster, not its own queue: within 0.2 s of the writer.
    let canary = e.write_unavailable_s.expect("the canary ran through the election");
    let one = e.write_unavailable_one_in_flight_s.expect("its one-in-flight figure");
    let independent = writer::unavailable_over(&ops, e.after, e.observed_at)
        .expect("the writer wrote again after the election");
    eprintln!(
        "leader eviction: canary {canary:.3} s, one in flight {one:.3} s, independent writer {independent:.3} s"
    );
    assert!(
        (canary - independent).abs() <= 0.2,
        "canary {canary:.3} s vs independent writer {independent:.3} s"
    );
    assert!(one >= canary - 1e-9, "one in flight {one:.3} s < {canary:.3} s");
    // What the eviction cost a lock: the lock canary as Go's concurrency.Mutex saw it.
    let locks = crate::support::locks(&out);
    locker::assert_agree("leader eviction", e, &locks, &go, None);
    assert!(locker::tokens_increase(&go), "the Go client's tokens went down");
    assert!(!go.iter().any(|e| e.kind == "session_lost"), "the Go client lost a session");
    lock_kept(&b, "a leader eviction");
}

/// The laptop path on real nodes: kubectl's port-forward, exec and logs through an API
/// server that verifies the kubelets' serving certificates (and refuses a foreign CA's),
/// then `preflight` and `measure --reach port-forward` from the host under the leaderwatch
/// ServiceAccount's token (rbac.yaml and rbac-port-forward.yaml), every member reached
/// through the kubelet's port-forward. The evicted follower comes back as a new pod (a new
/// UID, a new address) and the forward follows it by name: the recovery is timed through it.
fn measure_through_the_real_port_forward_follows_the_recreated_member(
    lab: &Lab,
    kc: &Path,
    out: &Path,
) {
    let evicted = lab.accepted_evictions().len();
    kubectl_port_forward_exec_and_logs_reach_the_kubelets(lab);
    the_api_server_verifies_the_kubelets_serving_certificates(lab);
    without_rbac_port_forward_yaml_preflight_names_the_file(kc);
    lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac-port-forward.yaml"]);
    let before = member_uids(lab);
    let (run, b) = measure_a_follower_eviction_through_the_forward(kc, out);
    the_forward_followed_the_recreated_member(lab, &run, &b, &before, evicted);
    lab.ok(&["delete", "-f", "deploy/k8s/leaderwatch/rbac-port-forward.yaml"]);
}

/// kubectl's own port-forward, exec and logs, with its defaults, through the API server to
/// the kubelets (the stand-in kubelet of old served neither port-forward nor SPDY exec), with
/// the API server verifying each kubelet's serving certificate.
fn kubectl_port_forward_exec_and_logs_reach_the_kubelets(lab: &Lab) {
    let mut pf = Command::new(lab.state["kubectl"].as_str().expect("kubectl"))
        .args(["-n", "dlock", "port-forward", "pod/dlock-etcd-1", ":2379"])
        .env("KUBECONFIG", lab.state["kubeconfig"].as_str().expect("kubeconfig"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl port-forward");
    // Kept open until the forward is done: kubectl writes a line per connection, and a
    // closed pipe would end it.
    let mut pf_out = std::io::BufReader::new(pf.stdout.take().expect("stdout"));
    let mut first = String::new();
    std::io::BufRead::read_line(&mut pf_out, &mut first)
        .expect("kubectl port-forward's first line");
    // "Forwarding from 127.0.0.1:40125 -> 2379"
    let port: u16 = first
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no local port in {first:?}"));
    let health = {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        c.write_all(b"GET /health HTTP/1.0\r\n\r\n").expect("request");
        let mut body = String::new();
        let _ = c.read_to_string(&mut body);
        body
    };
    let _ = pf.kill();
    let _ = pf.wait();
    drop(pf_out);
    assert!(health.contains("\"health\":\"true\""), "through kubectl port-forward: {health}");
    let version = lab.ok(&["-n", "dlock", "exec", "dlock-etcd-0", "--", "etcdctl", "version"]);
    assert!(version.contains("3.6.14"), "kubectl exec: {version}");
    let logs = lab.ok(&["-n", "dlock", "logs", "dlock-etcd-2", "--tail=5"]);
    assert_eq!(logs.lines().count(), 5, "kubectl logs --tail=5: {logs}");
}

/// The API server verifies the kubelets' serving certificates (docs/local-cluster.md): it
/// runs with --kubelet-certificate-authority, a real kubelet answers through the node
/// proxy, and a "kubelet" whose certificate has the right address but a foreign CA's
/// signature is refused. Without the flag the API server skips verification and that
/// request would get the impostor's page: the negative control.
fn the_api_server_verifies_the_kubelets_serving_certificates(lab: &Lab) {
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", lab.apiserver_pid()))
        .expect("kube-apiserver's command line");
    let flags: Vec<String> =
        cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let ca = flags
        .iter()
        .rev()
        .find_map(|f| f.strip_prefix("--kubelet-certificate-authority="))
        .unwrap_or_else(|| panic!("kube-apiserver without --kubelet-certificate-authority"));
    assert_eq!(Path::new(ca), lab.dir.join("pki/ca.crt"), "the cluster CA: {flags:?}");
    let node = lab.state["nodes"][0][0].as_str().expect("a node");
    let (code, body) = api_get(lab, &format!("/api/v1/nodes/{node}/proxy/healthz"));
    assert_eq!((code, body.trim()), (200, "ok"), "{node}'s kubelet through the node proxy");

    // The impostor listens on the host's bridge address, which the API server is bound to
    // and reaches; a Node object (cordoned, never Ready) points the node proxy at it.
    let server = lab.state["server"].as_str().expect("server");
    let host = server.trim_start_matches("https://").rsplit_once(':').expect("host:port").0;
    let impostor = ForeignKubelet::start(host);
    let name = "lw-foreign-kubelet";
    let spec = serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {"lw-lab/no-surge": "true"}},
        "spec": {"unschedulable": true},
    });
    let status = serde_json::json!({"status": {
        "addresses": [{"type": "InternalIP", "address": host}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": impostor.port}},
    }});
    let file = impostor.dir.path().join("node.json");
    std::fs::write(&file, spec.to_string()).expect("node.json");
    lab.ok(&["create", "-f", file.to_str().expect("path")]);
    lab.ok(&[
        "patch",
        "node",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    let (code, body) = api_get(lab, &format!("/api/v1/nodes/{name}/proxy/healthz"));
    lab.ok(&["delete", "node", name]);
    drop(impostor);
    assert!(
        code >= 500 && body.contains("x509") && body.contains("unknown authority"),
        "the foreign CA's certificate must be refused: HTTP {code}: {body}"
    );
}

/// GET `path` from the API server as the admin, with curl (kubectl hides a proxy error's
/// body): the status code and the body.
fn api_get(lab: &Lab, path: &str) -> (u16, String) {
    let kubeconfig = std::fs::read_to_string(lab.state["kubeconfig"].as_str().expect("kubeconfig"))
        .expect("admin kubeconfig");
    let token = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("the admin's token");
    let o = Command::new("curl")
        .args(["-sS", "-m", "20", "-w", "\n%{http_code}", "--cacert"])
        .arg(lab.dir.join("pki/ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .arg(format!("{}{path}", lab.state["server"].as_str().expect("server")))
        .output()
        .expect("curl");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let (body, code) = out.rsplit_once('\n').unwrap_or(("", &out));
    let code = code
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("curl {path}: {out}{}", String::from_utf8_lossy(&o.stderr)));
    (code, body.to_string())
}

/// An HTTPS server posing as a kubelet (`openssl s_server -www`): a certificate for the
/// right address, signed by a CA of its own rather than the cluster's. Killed when dropped.
struct ForeignKubelet {
    child: std::process::Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl ForeignKubelet {
    fn start(host: &str) -> ForeignKubelet {
        let dir = tempfile::tempdir().expect("tempdir");
        let (crt, key) = (dir.path().join("crt.pem"), dir.path().join("key.pem"));
        let made = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
            .args(["-nodes", "-days", "1", "-subj", "/CN=system:node:lw-foreign-kubelet"])
            .args(["-addext", &format!("subjectAltName=IP:{host}"), "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&crt)
            .output()
            .expect("openssl req");
        assert!(made.status.success(), "openssl req: {}", String::from_utf8_lossy(&made.stderr));
        let port = std::net::TcpListener::bind((host, 0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let child = Command::new("openssl")
            .args(["s_server", "-quiet", "-www", "-accept", &format!("{host}:{port}"), "-cert"])
            .arg(&crt)
            .arg("-key")
            .arg(&key)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl s_server");
        let mut k = ForeignKubelet { child, port, dir };
        let t = Instant::now();
        while std::net::TcpStream::connect((host, port)).is_err() {
            assert!(k.child.try_wait().expect("wait").is_none(), "openssl s_server exited");
            assert!(t.elapsed() < Duration::from_secs(10), "openssl s_server not listening");
            std::thread::sleep(Duration::from_millis(100));
        }
        k
    }
}

impl Drop for ForeignKubelet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Without rbac-port-forward.yaml the ServiceAccount may not forward: one line naming the
/// file, exit 7 (regression: it was a connection reset on every probe).
fn without_rbac_port_forward_yaml_preflight_names_the_file(kc: &Path) {
    let refused = Command::new(env!("CARGO_BIN_EXE_leaderwatch"))
        .args(["preflight", "--reach", "port-forward", "--kubeconfig"])
        .arg(kc)
        .output()
        .expect("preflight");
    let said = String::from_utf8_lossy(&refused.stdout);
    assert_eq!(refused.status.code(), Some(7), "{said}");
    assert!(said.contains("forbidden") && said.contains("rbac-port-forward.yaml"), "{said}");
}

/// The etcd members' pod UIDs by name: a recreated member has a new one.
fn member_uids(lab: &Lab) -> BTreeMap<String, String> {
    lab.member_pods()
        .iter()
        .map(|p| {
            (
                p["metadata"]["name"].as_str().expect("name").to_string(),
                p["metadata"]["uid"].as_str().expect("uid").to_string(),
            )
        })
        .collect()
}

/// preflight, then `leaderwatch measure --reach port-forward` of a follower's eviction, as
/// from a laptop; returns the run's directory and its complete baseline.
fn measure_a_follower_eviction_through_the_forward(kc: &Path, out: &Path) -> (PathBuf, Baseline) {
    let pre = Command::new(env!("CARGO_BIN_EXE_leaderwatch"))
        .args(["preflight", "--reach", "port-forward", "--kubeconfig"])
        .arg(kc)
        .output()
        .expect("preflight");
    assert!(
        pre.status.success(),
        "preflight --reach port-forward: {}{}",
        String::from_utf8_lossy(&pre.stdout),
        String::from_utf8_lossy(&pre.stderr)
    );
    let run = out.join("port-forward");
    let st = measure_cli(kc, &run, &["--target", "follower"])
        .args(["--reach", "port-forward"])
        .status()
        .expect("leaderwatch measure");
    assert_eq!(st.code(), Some(0), "measure --reach port-forward");
    let b: Baseline =
        serde_json::from_slice(&std::fs::read(run.join("baseline.json")).expect("baseline.json"))
            .expect("json");
    assert_eq!(b.status, Completion::Complete, "{:?}", b.incomplete_reason);
    (run, b)
}

/// The evicted follower came back as a new pod and the forward followed it by name: its
/// recovery was timed through the forward, the ServiceAccount opened forwards to the
/// replacement, and every round and canary connection went through local forwards.
fn the_forward_followed_the_recreated_member(
    lab: &Lab,
    run: &Path,
    b: &Baseline,
    before: &BTreeMap<String, String>,
    evicted: usize,
) {
    let d = b.disruption.as_ref().expect("disruption");
    assert!(
        d.member_lost_at.is_some() && d.member_back_at.is_some() && d.healthy_at.is_some(),
        "lost, back and healthy, all seen through the forward: {d:?}"
    );
    let after = member_uids(lab);
    assert_ne!(before.get(&d.target), after.get(&d.target), "{} was recreated", d.target);
    assert_eq!(lab.evictions_since(evicted), vec![d.target.clone()]);
    // The forward reached the replacement: the ServiceAccount opened port-forwards to the
    // target after its eviction was accepted.
    let audit = lab.audit();
    let evicted_at = audit
        .iter()
        .rev()
        .find(|e| e["objectRef"]["subresource"] == "eviction" && e["responseStatus"]["code"] == 201)
        .and_then(|e| e["stageTimestamp"].as_str())
        .expect("the eviction in the audit log")
        .to_string();
    let forwards_after = audit
        .iter()
        .filter(|e| {
            e["objectRef"]["subresource"] == "portforward"
                && e["objectRef"]["name"] == d.target.as_str()
                && e["user"]["username"] == "system:serviceaccount:dlock:leaderwatch"
                && e["stageTimestamp"].as_str().is_some_and(|t| t > evicted_at.as_str())
        })
        .count();
    assert!(forwards_after > 0, "no port-forward to {} after its eviction", d.target);
    // Every round went through local forwards, HTTP and gRPC alike; the last is complete
    // and the replacement healthy.
    let rows = crate::support::samples(run);
    assert!(rows.iter().all(|r| r["endpoint"].starts_with("http://127.0.0.1:")));
    let last_target = rows.iter().rev().find(|r| r["member"] == d.target).expect("target rows");
    assert_eq!(
        (last_target["reachable"].as_str(), last_target["health"].as_str()),
        ("true", "true")
    );
    for r in rows.iter().rev().take(3) {
        assert!(r["error"].is_empty() && !r["raft_term"].is_empty(), "{r:?}");
    }
    // So did the canary's connections to every member.
    let settle =
        b.window(WindowName::Settle).and_then(|w| w.client.clone()).expect("canary in settle");
    assert!(
        settle.write.ops > 0 && settle.write.availability.is_some_and(|a| a > 0.9),
        "{settle:?}"
    );
}
