//! The Kubernetes side against the fake API server (tests/support/fake_api.rs), through
//! the real kube client stack, with the fake driving a real local etcd cluster: only the
//! faults and states a real control plane cannot be made to produce here, each test saying
//! why. Everything else runs on the real one (tests/lab/kube.rs): the eviction, the leader
//! election it causes, the PDB refusing a NotReady member, the real RBAC, 410 Gone and API
//! outages.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use leaderwatch::io::local::{LocalCluster, LocalOptions};
use leaderwatch::io::probe::ProbeConfig;
use leaderwatch::k8s::discover::Reach;
use leaderwatch::k8s::preflight::{self, PreflightOptions};
use leaderwatch::k8s::timing::{self, ElectionTiming};
use leaderwatch::k8s::{KubeError, KubeOptions};
use leaderwatch::model::baseline::Environment;
use leaderwatch::model::clock::{Clock, SystemClock};
use leaderwatch::ops::drive::TrialConfig;
use leaderwatch::ops::measure::{self, MeasureConfig};
use support::fake_api::{FakeApi, Knobs, NS};
use support::{events, leaderwatch, one_cluster_at_a_time};

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
    let cluster = LocalCluster::start(LocalOptions::default())
        .await
        .unwrap_or_else(|e| panic!("local etcd: {e}"));
    FakeApi::start(cluster, knobs, Duration::from_secs(1)).await
}

fn config(out: &std::path::Path, target: &str, dry_run: bool) -> MeasureConfig {
    MeasureConfig {
        kube: kube_opts(),
        reach: Reach::PodIp,
        trial: TrialConfig {
            members: vec![],
            idle: Duration::from_secs(3),
            settle: Duration::from_secs(2),
            interval: Duration::from_millis(500),
            fast_interval: Duration::from_millis(100),
            target: target.parse().expect("target"),
            probe: ProbeConfig { timeout: Duration::from_secs(1), ..ProbeConfig::default() },
            out: out.to_owned(),
            recovery_timeout: Duration::from_secs(60),
            environment: Environment {
                description: "fake API server + local etcd".into(),
                ..Environment::default()
            },
            cause_horizon: leaderwatch::analysis::attribution::DEFAULT_HORIZON,
            // On, as `measure` runs by default: the canary goes through the same reach.
            canary: Some(Duration::from_secs(1)),
            lock: None,
            metrics_addr: None,
            follow_pod_ips: false,
        },
        evict_timeout: Duration::from_secs(60),
        dry_run,
        method: leaderwatch::model::baseline::KubeMethod::Evict,
        down: Duration::from_secs(120),
    }
}

async fn measure(
    api: &FakeApi,
    out: &std::path::Path,
    target: &str,
    dry_run: bool,
) -> leaderwatch::Result<leaderwatch::model::baseline::Baseline> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    measure::run(api.client(), config(out, target, dry_run), clock, std::future::pending()).await
}

/// Fake because: a PDB that refuses exactly the first two attempts and then allows one; the
/// real disruption controller cannot be made to flip on a given attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdb_blocks_the_first_attempts_then_allows_and_the_blocked_time_is_recorded() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs { block_evictions: 2, ..Knobs::default() }).await;
    let out = tempfile::tempdir().expect("tempdir");
    let b = measure(&api, out.path(), "follower", false)
        .await
        .unwrap_or_else(|e| panic!("measure: {e}"));
    let d = b.disruption.as_ref().expect("disruption");
    assert_eq!(d.attempts, 3);
    assert!(d.blocked_s >= 9.0, "two 5 s waits: {}", d.blocked_s);
    let blocked: Vec<_> =
        events(out.path()).into_iter().filter(|e| e["kind"] == "eviction_blocked").collect();
    assert_eq!(blocked.len(), 2);
    assert!(
        blocked.iter().all(|e| e["detail"].contains("needs 2 healthy pods and has 2")),
        "{blocked:?}"
    );
}

/// Fake because: it counts the Eviction requests the API saw with and without dryRun, which
/// the fake records per request (the real audit log shows them too: kube_lab does not yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_evicts_nothing() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs::default()).await;
    let out = tempfile::tempdir().expect("tempdir");
    let b =
        measure(&api, out.path(), "leader", true).await.unwrap_or_else(|e| panic!("measure: {e}"));
    assert_eq!(api.evictions().await.iter().filter(|(_, dry)| !dry).count(), 0, "no real eviction");
    assert_eq!(api.evictions().await.len(), 1, "one server-side dry-run eviction");
    let d = b.disruption.as_ref().expect("disruption");
    assert_eq!(d.method.to_string(), "kubernetes-eviction-dry-run");
    assert_eq!(d.member_lost_at, None);
    assert!(b.environment.description.contains("DRY RUN"));
    assert!(b.windows.iter().all(|w| w.elections == Some(0)));
}
/// Fake because: each criterion fails alone (two members in one zone, the wrong
/// StorageClass, a PDB allowing 0), states the real scheduler and these manifests refuse to produce.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_passes_and_each_criterion_fails_on_its_own() {
    let _one = one_cluster_at_a_time().await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let po = PreflightOptions {
        reach: Reach::PodIp,
        probe: ProbeConfig {
            timeout: Duration::from_secs(1),
            with_metrics: false,
            ..ProbeConfig::default()
        },
        ..PreflightOptions::default()
    };
    // One node is necessarily one zone, so that case fails both lines of criterion 2.
    let cases: Vec<(Knobs, Vec<&str>)> = vec![
        (Knobs::default(), vec![]),
        (Knobs { same_node: true, ..Knobs::default() }, vec!["distinct-nodes", "distinct-zones"]),
        (Knobs { same_zone: true, ..Knobs::default() }, vec!["distinct-zones"]),
        (Knobs { storage_class: Some("standard".into()), ..Knobs::default() }, vec!["pvcs"]),
        (Knobs { pdb_allowed: Some(0), ..Knobs::default() }, vec!["pdb"]),
        (Knobs { wrong_port: true, ..Knobs::default() }, vec!["endpoints"]),
    ];
    let cluster = LocalCluster::start(LocalOptions::default())
        .await
        .unwrap_or_else(|e| panic!("local etcd: {e}"));
    let mut cluster = Some(cluster);
    for (knobs, failing) in cases {
        // One cluster serves every case: the fake takes it and gives it back on drop.
        let api =
            FakeApi::start(cluster.take().expect("cluster"), knobs.clone(), Duration::from_secs(1))
                .await;
        let checks = preflight::run(&api.client(), &kube_opts(), &po, clock.clone())
            .await
            .expect("preflight ran");
        let failed: Vec<&str> = checks.iter().filter(|c| !c.pass).map(|c| c.name).collect();
        assert_eq!(failed, failing, "{knobs:?}: {}", preflight::render(&checks));
        assert!(checks.iter().all(|c| !c.evidence.is_empty()), "every line has its evidence");
        cluster = Some(api.into_cluster().await);
    }
}
/// Fake because: an API server that answers 403 to every request and one that closes its port
/// mid-run; the real 403 of a missing Role verb is tested in tests/lab/kube.rs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_and_unreachable_api_are_one_clear_line_and_exit_6() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs { forbidden: true, ..Knobs::default() }).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = api.kubeconfig(dir.path());
    let out = dir.path().join("out");
    let out_s = out.to_str().expect("utf8").to_owned();
    for args in [
        vec!["preflight".to_owned()],
        vec!["measure".to_owned(), "--out".to_owned(), out_s.clone()],
    ] {
        let o = tokio::task::spawn_blocking({
            let kc = kc.clone();
            move || leaderwatch().args(&args).arg("--kubeconfig").arg(&kc).output().expect("run")
        })
        .await
        .expect("join");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(6), "{err}");
        // `measure` says its build first (the sitting's Job's first log line); the error
        // is then one line.
        let said = err
            .lines()
            .filter(|l| leaderwatch::model::build::Build::from_line(l).is_none())
            .filter(|l| !l.trim().is_empty())
            .count();
        assert!(err.contains("forbidden") && said == 1, "{err}");
    }
    assert!(!out.exists(), "measure stopped before recording anything");

    // Nothing listening: the connection error is named, same exit code.
    let dead = dir.path().join("dead-kubeconfig");
    let text = std::fs::read_to_string(&kc).expect("read").replace(&api.url, "http://127.0.0.1:1");
    std::fs::write(&dead, text).expect("write");
    let o = tokio::task::spawn_blocking(move || {
        leaderwatch().args(["preflight", "--kubeconfig"]).arg(&dead).output().expect("run")
    })
    .await
    .expect("join");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(err.contains("list pods") && err.to_lowercase().contains("connect"), "{err}");
}
/// Fake because: a failing criterion on demand (a member in the wrong zone), which the real
/// scheduler would never place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_cli_prints_pass_fail_lines_and_measure_refuses_to_evict_on_a_fail() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs { pdb_allowed: Some(0), ..Knobs::default() }).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = api.kubeconfig(dir.path());
    let o = tokio::task::spawn_blocking({
        let kc = kc.clone();
        move || {
            leaderwatch()
                .args(["preflight", "--reach", "pod-ip", "-o", "json", "--kubeconfig"])
                .arg(&kc)
                .output()
                .expect("run")
        }
    })
    .await
    .expect("join");
    assert_eq!(o.status.code(), Some(7), "{}", String::from_utf8_lossy(&o.stderr));
    let checks: serde_json::Value = serde_json::from_slice(&o.stdout).expect("-o json");
    let pdb =
        checks.as_array().and_then(|c| c.iter().find(|c| c["name"] == "pdb")).expect("pdb line");
    assert_eq!(pdb["pass"], false);
    assert!(pdb["evidence"].as_str().is_some_and(|e| e.contains("allowed disruptions 0")));

    let out = tempfile::tempdir().expect("tempdir");
    let err = measure(&api, out.path(), "follower", false)
        .await
        .expect_err("preflight must stop measure");
    assert!(matches!(err, leaderwatch::Error::Preflight(_)), "{err}");
    assert!(api.evictions().await.is_empty(), "nothing evicted");
}

/// Fake because: StatefulSets with unusual flags and pods owned by two StatefulSets, which
/// dlock's manifests never produce.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_timing_is_read_from_the_statefulset_that_owns_the_pods() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    let _one = one_cluster_at_a_time().await;
    let mut cluster = Some(
        LocalCluster::start(LocalOptions::default())
            .await
            .unwrap_or_else(|e| panic!("local etcd: {e}")),
    );
    let sts_api = |api: &FakeApi| kube::Api::<StatefulSet>::namespaced(api.client(), NS);
    let list = kube::api::ListParams::default().labels("app.kubernetes.io/name=dlock-etcd");

    // The repository's manifest, served as it is: both values from its args.
    let api =
        FakeApi::start(cluster.take().expect("cluster"), Knobs::default(), Duration::from_secs(1))
            .await;
    let t =
        timing::read(&api.client(), &kube_opts()).await.unwrap_or_else(|e| panic!("timing: {e}"));
    assert_eq!(
        t,
        ElectionTiming {
            heartbeat_ms: 100,
            election_ms: 1000,
            source: "StatefulSet dlock/dlock-etcd container etcd args".into()
        }
    );
    let used = api.used().await;
    for rule in [("", "pods", "list"), ("apps", "statefulsets", "get")] {
        assert!(
            used.contains(&(rule.0.into(), rule.1.into(), rule.2.into())),
            "{rule:?} used: {used:?}"
        );
    }
    // The Role grants get, not list: a list of StatefulSets is refused.
    let err = sts_api(&api).list(&list).await.expect_err("list statefulsets is not in the Role");
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 403), "{err}");
    cluster = Some(api.into_cluster().await);

    // No flags in the container: etcd's defaults, said so.
    let api = FakeApi::start(
        cluster.take().expect("cluster"),
        Knobs { etcd_no_flags: true, ..Knobs::default() },
        Duration::from_secs(1),
    )
    .await;
    let t =
        timing::read(&api.client(), &kube_opts()).await.unwrap_or_else(|e| panic!("timing: {e}"));
    assert_eq!(
        t,
        ElectionTiming { heartbeat_ms: 100, election_ms: 1000, source: "etcd default".into() }
    );
    cluster = Some(api.into_cluster().await);

    // Without the Role's statefulsets rule: a 403, named.
    let revoke = ("apps".to_owned(), "statefulsets".to_owned(), "get".to_owned());
    let api = FakeApi::start(
        cluster.take().expect("cluster"),
        Knobs { revoke: Some(revoke), ..Knobs::default() },
        Duration::from_secs(1),
    )
    .await;
    let err = timing::read(&api.client(), &kube_opts()).await.expect_err("forbidden");
    assert!(
        matches!(&err, KubeError::Forbidden { what, .. } if what == "get statefulset"),
        "{err}"
    );
    assert!(err.to_string().contains("statefulsets"), "{err}");
    cluster = Some(api.into_cluster().await);

    // As a cluster admin the list route serves the same manifest, filtered by the selector.
    let api = FakeApi::start(
        cluster.take().expect("cluster"),
        Knobs { no_rbac: true, ..Knobs::default() },
        Duration::from_secs(1),
    )
    .await;
    let items = sts_api(&api).list(&list).await.expect("list statefulsets").items;
    assert_eq!(items.len(), 1);
    assert_eq!(
        timing::from_statefulset(&items[0], None).map(|t| t.source),
        Ok("StatefulSet dlock/dlock-etcd container etcd args".to_owned())
    );
    let none = sts_api(&api)
        .list(&kube::api::ListParams::default().labels("app.kubernetes.io/name=other"))
        .await
        .expect("list")
        .items;
    assert!(none.is_empty(), "the selector filters");
    drop(api);
}
