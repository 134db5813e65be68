//! The Kubernetes side against the fake API server (tests/support/fake_api.rs), through
//! the real kube client stack, with the fake driving a real local etcd cluster.

mod support;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use leaderwatch::clock::{Clock, SystemClock};
use leaderwatch::k8s::discover::Reach;
use leaderwatch::k8s::preflight::{self, PreflightOptions};
use leaderwatch::k8s::KubeOptions;
use leaderwatch::local::{LocalCluster, LocalOptions};
use leaderwatch::measure::{self, MeasureConfig};
use leaderwatch::probe::ProbeConfig;
use support::fake_api::{FakeApi, Knobs, NS};
use support::{events, one_cluster_at_a_time};

fn kube_opts() -> KubeOptions {
    KubeOptions {
        kubeconfig: None,
        context: None,
        namespace: NS.into(),
        selector: "app.kubernetes.io/name=dlock-etcd".into(),
        request_timeout: Duration::from_secs(5),
    }
}

async fn fake(knobs: Knobs) -> FakeApi {
    let cluster = LocalCluster::start(LocalOptions::default()).await.unwrap_or_else(|e| panic!("local etcd: {e}"));
    FakeApi::start(cluster, knobs, Duration::from_secs(1)).await
}

fn config(out: &std::path::Path, target: &str, dry_run: bool) -> MeasureConfig {
    MeasureConfig {
        kube: kube_opts(),
        reach: Reach::PodIp,
        idle: Duration::from_secs(3),
        settle: Duration::from_secs(2),
        interval: Duration::from_millis(500),
        fast_interval: Duration::from_millis(100),
        target: target.parse().expect("target"),
        probe: ProbeConfig { timeout: Duration::from_secs(1), ..ProbeConfig::default() },
        out: out.to_owned(),
        evict_timeout: Duration::from_secs(60),
        recovery_timeout: Duration::from_secs(60),
        dry_run,
        environment: "fake API server + local etcd".into(),
    }
}

async fn measure(api: &FakeApi, out: &std::path::Path, target: &str, dry_run: bool) -> leaderwatch::Result<leaderwatch::baseline::Baseline> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    measure::run(api.client(), config(out, target, dry_run), clock, std::future::pending()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measure_follower_target_evicts_once_and_times_the_recovery() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs::default()).await;
    let out = tempfile::tempdir().expect("tempdir");
    let b = measure(&api, out.path(), "follower", false).await.unwrap_or_else(|e| panic!("measure: {e}"));
    let d = b.disruption.as_ref().expect("disruption");
    assert_eq!(d.method, "kubernetes-eviction");
    assert!(!d.target_was_leader);
    assert_eq!(api.evictions().await, vec![(d.target.clone(), false)], "exactly one real eviction");
    assert_eq!(d.attempts, 1);
    assert!(d.member_lost_at.is_some() && d.healthy_at.is_some());
    assert!(d.loss_to_healthy_s.is_some_and(|s| s > 0.0));
    assert!(b.windows.iter().all(|w| w.elections == Some(0)), "a follower eviction is no election");
    assert_eq!(b.environment.kind, "kubernetes");
    let ev = events(out.path());
    assert!(ev.iter().any(|e| e["kind"] == "eviction_accepted" && e["source"] == "kubernetes"));
    assert!(ev.iter().any(|e| e["kind"] == "old_pod_gone"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measure_leader_target_is_one_election() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs::default()).await;
    let out = tempfile::tempdir().expect("tempdir");
    let b = measure(&api, out.path(), "leader", false).await.unwrap_or_else(|e| panic!("measure: {e}"));
    let d = b.disruption.as_ref().expect("disruption");
    assert!(d.target_was_leader);
    let dis = b.windows.iter().find(|w| w.name == "disruption").expect("window");
    assert_eq!(dis.elections, Some(1));
    assert_eq!(dis.leader_changes.raw_sum_end, Some(5.0), "{:?}", dis.leader_changes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdb_blocks_the_first_attempts_then_allows_and_the_blocked_time_is_recorded() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs { block_evictions: 2, ..Knobs::default() }).await;
    let out = tempfile::tempdir().expect("tempdir");
    let b = measure(&api, out.path(), "follower", false).await.unwrap_or_else(|e| panic!("measure: {e}"));
    let d = b.disruption.as_ref().expect("disruption");
    assert_eq!(d.attempts, 3);
    assert!(d.blocked_s >= 9.0, "two 5 s waits: {}", d.blocked_s);
    let blocked: Vec<_> = events(out.path()).into_iter().filter(|e| e["kind"] == "eviction_blocked").collect();
    assert_eq!(blocked.len(), 2);
    assert!(blocked.iter().all(|e| e["detail"].contains("needs 3 healthy pods and has 2")), "{blocked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_evicts_nothing() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs::default()).await;
    let out = tempfile::tempdir().expect("tempdir");
    let b = measure(&api, out.path(), "leader", true).await.unwrap_or_else(|e| panic!("measure: {e}"));
    assert_eq!(api.evictions().await.iter().filter(|(_, dry)| !dry).count(), 0, "no real eviction");
    assert_eq!(api.evictions().await.len(), 1, "one server-side dry-run eviction");
    let d = b.disruption.as_ref().expect("disruption");
    assert_eq!(d.method, "kubernetes-eviction-dry-run");
    assert_eq!(d.member_lost_at, None);
    assert!(b.environment.description.contains("DRY RUN"));
    assert!(b.windows.iter().all(|w| w.elections == Some(0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_passes_and_each_criterion_fails_on_its_own() {
    let _one = one_cluster_at_a_time().await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let po = PreflightOptions { reach: Reach::PodIp, probe: ProbeConfig { timeout: Duration::from_secs(1), with_metrics: false, ..ProbeConfig::default() }, ..PreflightOptions::default() };
    // One node is necessarily one zone, so that case fails both lines of criterion 2.
    let cases: Vec<(Knobs, Vec<&str>)> = vec![
        (Knobs::default(), vec![]),
        (Knobs { same_node: true, ..Knobs::default() }, vec!["distinct-nodes", "distinct-zones"]),
        (Knobs { same_zone: true, ..Knobs::default() }, vec!["distinct-zones"]),
        (Knobs { storage_class: Some("standard".into()), ..Knobs::default() }, vec!["pvcs"]),
        (Knobs { pdb_allowed: Some(0), ..Knobs::default() }, vec!["pdb"]),
        (Knobs { wrong_port: true, ..Knobs::default() }, vec!["endpoints"]),
    ];
    let cluster = LocalCluster::start(LocalOptions::default()).await.unwrap_or_else(|e| panic!("local etcd: {e}"));
    let mut cluster = Some(cluster);
    for (knobs, failing) in cases {
        // One cluster serves every case: the fake takes it and gives it back on drop.
        let api = FakeApi::start(cluster.take().expect("cluster"), knobs.clone(), Duration::from_secs(1)).await;
        let checks = preflight::run(&api.client(), &kube_opts(), &po, clock.clone()).await.expect("preflight ran");
        let failed: Vec<&str> = checks.iter().filter(|c| !c.pass).map(|c| c.name).collect();
        assert_eq!(failed, failing, "{knobs:?}: {}", preflight::render(&checks));
        assert!(checks.iter().all(|c| !c.evidence.is_empty()), "every line has its evidence");
        cluster = Some(api.into_cluster().await);
    }
}

fn leaderwatch() -> Command {
    Command::new(env!("CARGO_BIN_EXE_leaderwatch"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_and_unreachable_api_are_one_clear_line_and_exit_6() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs { forbidden: true, ..Knobs::default() }).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = api.kubeconfig(dir.path());
    let out = dir.path().join("out");
    let out_s = out.to_str().expect("utf8").to_owned();
    for args in [vec!["preflight".to_owned()], vec!["measure".to_owned(), "--out".to_owned(), out_s.clone()]] {
        let o = tokio::task::spawn_blocking({
            let kc = kc.clone();
            move || leaderwatch().args(&args).arg("--kubeconfig").arg(&kc).output().expect("run")
        })
        .await
        .expect("join");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(6), "{err}");
        assert!(err.contains("forbidden") && err.trim().lines().count() == 1, "{err}");
    }
    assert!(!out.exists(), "measure stopped before recording anything");

    // Nothing listening: the connection error is named, same exit code.
    let dead = dir.path().join("dead-kubeconfig");
    let text = std::fs::read_to_string(&kc).expect("read").replace(&api.url, "http://127.0.0.1:1");
    std::fs::write(&dead, text).expect("write");
    let o = tokio::task::spawn_blocking(move || leaderwatch().args(["preflight", "--kubeconfig"]).arg(&dead).output().expect("run"))
        .await
        .expect("join");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(err.contains("list pods") && err.to_lowercase().contains("connect"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_cli_prints_pass_fail_lines_and_measure_refuses_to_evict_on_a_fail() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs { pdb_allowed: Some(0), ..Knobs::default() }).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = api.kubeconfig(dir.path());
    let o = tokio::task::spawn_blocking({
        let kc = kc.clone();
        move || leaderwatch().args(["preflight", "--reach", "pod-ip", "-o", "json", "--kubeconfig"]).arg(&kc).output().expect("run")
    })
    .await
    .expect("join");
    assert_eq!(o.status.code(), Some(7), "{}", String::from_utf8_lossy(&o.stderr));
    let checks: serde_json::Value = serde_json::from_slice(&o.stdout).expect("-o json");
    let pdb = checks.as_array().and_then(|c| c.iter().find(|c| c["name"] == "pdb")).expect("pdb line");
    assert_eq!(pdb["pass"], false);
    assert!(pdb["evidence"].as_str().is_some_and(|e| e.contains("allowed disruptions 0")));

    let out = tempfile::tempdir().expect("tempdir");
    let err = measure(&api, out.path(), "follower", false).await.err().expect("preflight must stop measure");
    assert!(matches!(err, leaderwatch::Error::Preflight(_)), "{err}");
    assert!(api.evictions().await.is_empty(), "nothing evicted");
}
