//! The Kubernetes side against the fake API server (tests/support/fake_api.rs), through
//! the real kube client stack, with the fake driving a real local etcd cluster.

mod support;

use std::sync::Arc;
use std::time::Duration;

use leaderwatch::baseline::Environment;
use leaderwatch::clock::{Clock, SystemClock};
use leaderwatch::sitting::SittingConfig;
use leaderwatch::k8s::discover::Reach;
use leaderwatch::k8s::preflight::{self, PreflightOptions};
use leaderwatch::k8s::timing::{self, ElectionTiming};
use leaderwatch::k8s::{KubeError, KubeOptions};
use leaderwatch::local::{LocalCluster, LocalOptions};
use leaderwatch::measure::{self, MeasureConfig};
use leaderwatch::probe::ProbeConfig;
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
    let cluster = LocalCluster::start(LocalOptions::default()).await.unwrap_or_else(|e| panic!("local etcd: {e}"));
    FakeApi::start(cluster, knobs, Duration::from_secs(1)).await
}

fn config(out: &std::path::Path, target: &str, dry_run: bool) -> MeasureConfig {
    MeasureConfig {
        kube: kube_opts(),
        reach: Reach::PodIp,
        sitting: SittingConfig {
            members: vec![],
            idle: Duration::from_secs(3),
            settle: Duration::from_secs(2),
            interval: Duration::from_millis(500),
            fast_interval: Duration::from_millis(100),
            target: target.parse().expect("target"),
            probe: ProbeConfig { timeout: Duration::from_secs(1), ..ProbeConfig::default() },
            out: out.to_owned(),
            recovery_timeout: Duration::from_secs(60),
            environment: Environment { description: "fake API server + local etcd".into(), ..Environment::default() },
            cause_horizon: leaderwatch::attribution::DEFAULT_HORIZON,
            // On, as `measure` runs by default: the canary goes through the same reach.
            canary: Some(Duration::from_secs(1)),
            metrics_addr: None,
        },
        evict_timeout: Duration::from_secs(60),
        dry_run,
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
    // The election timing comes from the StatefulSet that owns the pods.
    assert_eq!((b.environment.heartbeat_ms, b.environment.election_ms), (Some(100), Some(1000)));
    assert_eq!(b.environment.timing_source, "StatefulSet dlock/dlock-etcd container etcd args");
    let ev = events(out.path());
    assert!(ev.iter().any(|e| e["kind"] == "eviction_accepted" && e["source"] == "kubernetes"));
    assert!(ev.iter().any(|e| e["kind"] == "old_pod_gone"));
    // core/v1 Events about the target, once each, with the cluster's own timestamp.
    let k8s: Vec<_> = ev.iter().filter(|e| e["kind"] == "k8s_event" && e["member"] == d.target).collect();
    assert_eq!(k8s.iter().filter(|e| e["detail"].contains("Killing")).count(), 1, "{k8s:?}");
    assert_eq!(k8s.iter().filter(|e| e["detail"].contains("Scheduled")).count(), 1, "{k8s:?}");
    assert!(k8s.iter().all(|e| e["detail"].contains("cluster time 20")), "{k8s:?}");
    // The recovery waterfall: every phase of it, in time order.
    let steps: Vec<&str> = d.waterfall.iter().map(|s| s.step.as_str()).collect();
    for want in ["requested", "eviction_accepted", "disruption_target", "pod_deleting", "old_pod_gone", "pod_created", "pod_ready", "member_back (measured)", "healthy_list (measured)"] {
        assert!(steps.contains(&want), "waterfall lacks {want}: {steps:?}");
    }
    assert!(d.waterfall.windows(2).all(|w| w[0].at <= w[1].at && w[1].since_previous_s >= 0.0));
    let pos = |s: &str| steps.iter().position(|x| *x == s).unwrap_or(usize::MAX);
    assert!(pos("eviction_accepted") < pos("pod_created") && pos("pod_created") < pos("pod_ready"), "{steps:?}");
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
    // The eviction is the cause (regression: the evictor's rows come from source
    // `kubernetes`, and were once taken for a bystander's Kubernetes event).
    assert_eq!(dis.elections_detail.len(), 1, "{:?}", dis.elections_detail);
    let e = &dis.elections_detail[0];
    let cause = e.cause_event.as_ref().expect("cause_event");
    assert_eq!((e.cause.as_str(), cause.kind.as_str(), cause.member.as_str()), ("own_disruption", "eviction_accepted", d.target.as_str()), "{e:?}");
    let c = dis.client.as_ref().expect("the canary ran through the disruption");
    assert!(c.write.ops > 0 && e.write_unavailable_s.is_some(), "{c:?} {e:?}");
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
    assert!(blocked.iter().all(|e| e["detail"].contains("needs 2 healthy pods and has 2")), "{blocked:?}");
}

/// Regression: a blocked eviction used to end the sitting before baseline.json was written,
/// losing the at_rest window and every blocked attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_blocked_past_the_evict_timeout_keeps_the_baseline_and_the_attempts() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs { block_evictions: 1000, ..Knobs::default() }).await;
    let out = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(out.path(), "follower", false);
    cfg.evict_timeout = Duration::from_secs(7);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let err = measure::run(api.client(), cfg, clock, std::future::pending()).await.expect_err("blocked");
    assert!(matches!(err, leaderwatch::Error::Incomplete(_)), "{err}");
    assert!(api.evictions().await.is_empty(), "nothing evicted");
    let b = leaderwatch::report::load(&out.path().join("baseline.json")).expect("baseline.json written");
    assert_eq!(b.status, "incomplete");
    assert!(b.incomplete_reason.as_deref().unwrap_or_default().contains("still blocked"), "{:?}", b.incomplete_reason);
    let d = b.disruption.as_ref().expect("disruption");
    assert_eq!(d.attempts, 2, "attempts kept");
    assert!(d.blocked_s >= 4.0, "blocked time kept: {}", d.blocked_s);
    let rest = b.windows.iter().find(|w| w.name == "at_rest").expect("at_rest kept");
    assert!(rest.full_length && rest.rounds >= 6);
    let blocked = events(out.path()).into_iter().filter(|e| e["kind"] == "eviction_blocked").count();
    assert_eq!(blocked, 2, "each blocked attempt in events.csv");
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

/// Collects watcher events until `until` holds for them or 40 s pass.
async fn collect_until(rx: &mut tokio::sync::mpsc::UnboundedReceiver<leaderwatch::events::Event>, mut until: impl FnMut(&[leaderwatch::events::Event]) -> bool) -> Vec<leaderwatch::events::Event> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    while !until(&got) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) => got.push(e),
            _ => panic!("watcher events so far: {:#?}", got.iter().map(|e| format!("{} {} {}", e.member, e.kind, e.detail)).collect::<Vec<_>>()),
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_dropped_and_resumed_with_410_gone_loses_and_doubles_nothing() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs { drop_watch_on_evict: true, ..Knobs::default() }).await;
    let client = api.client();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let task = leaderwatch::k8s::watch::spawn_pod_watcher(client.clone(), &kube_opts(), clock, tx);
    let initial = collect_until(&mut rx, |g| g.iter().filter(|e| e.kind == "pod_ready").count() == 3).await;
    assert_eq!(initial.iter().filter(|e| e.kind == "pod_seen").count(), 3);
    assert!(initial.iter().filter(|e| e.kind == "pod_scheduled").all(|e| e.detail.contains("zone europe-west1-")), "zone from the node");

    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, NS);
    let ev = k8s_openapi::api::policy::v1::Eviction {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta { name: Some("dlock-etcd-1".into()), namespace: Some(NS.into()), ..Default::default() },
        delete_options: None,
    };
    let _: kube::core::Status = pods.create_subresource("eviction", "dlock-etcd-1", &kube::api::PostParams::default(), &ev).await.expect("evict");

    // Until the replacement is Ready again.
    let after = collect_until(&mut rx, |g| {
        let created = g.iter().position(|e| e.member == "dlock-etcd-1" && e.kind == "pod_created");
        created.is_some_and(|c| g[c..].iter().any(|e| e.member == "dlock-etcd-1" && e.kind == "pod_ready"))
    })
    .await;
    task.abort();
    assert!(api.gone_sent().await >= 1, "the resumed watch got 410 Gone and relisted");
    let count = |kind: &str| after.iter().filter(|e| e.member == "dlock-etcd-1" && e.kind == kind).count();
    let all = after.iter().map(|e| format!("{} {} {}", e.member, e.kind, e.detail)).collect::<Vec<_>>();
    // The net changes come back through the relist, exactly once each.
    for kind in ["pod_deleted", "pod_created", "pod_ready"] {
        assert_eq!(count(kind), 1, "{kind} exactly once: {all:#?}");
    }
    // States that came and went while the watch was down cannot be recovered; if seen, once.
    for kind in ["pod_deleting", "disruption_target"] {
        assert!(count(kind) <= 1, "{kind} at most once: {all:#?}");
    }
    assert!(after.iter().any(|e| e.kind == "watch_error" && e.detail.contains("too old resource version")), "the 410 is recorded: {all:#?}");
    let others: Vec<_> = after.iter().filter(|e| e.member != "dlock-etcd-1" && e.kind.starts_with("pod_")).collect();
    assert!(others.is_empty(), "the relist reported nothing twice for untouched pods: {others:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measure_through_the_built_in_port_forward_follows_the_recreated_pod() {
    let _one = one_cluster_at_a_time().await;
    // Laptop mode: the user's own credentials, not the in-cluster Role.
    let api = fake(Knobs { no_rbac: true, ..Knobs::default() }).await;
    let out = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(out.path(), "follower", false);
    cfg.reach = Reach::PortForward;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let b = measure::run(api.client(), cfg, clock, std::future::pending()).await.unwrap_or_else(|e| panic!("measure: {e}"));
    let d = b.disruption.as_ref().expect("disruption");
    assert!(d.member_lost_at.is_some() && d.member_back_at.is_some(), "lost and back through the forward: {d:?}");
    assert!(d.healthy_at.is_some(), "the forward reached the replacement pod without a restart");
    assert!(api.forwards().await >= 6, "every member through a port-forward stream: {}", api.forwards().await);
    let rows = support::samples(out.path());
    assert!(rows.iter().all(|r| r["endpoint"].starts_with("http://127.0.0.1:")));
    let last_target = rows.iter().rev().find(|r| r["member"] == d.target).expect("target rows");
    assert_eq!((last_target["reachable"].as_str(), last_target["health"].as_str()), ("true", "true"));
    // HTTP and gRPC alike went through the forwards: the last round is complete.
    for r in rows.iter().rev().take(3) {
        assert!(r["error"].is_empty() && !r["raft_term"].is_empty(), "{r:?}");
    }
    // So did the canary's client of all members.
    let settle = b.windows.iter().find(|w| w.name == "settle").and_then(|w| w.client.clone()).expect("canary in settle");
    assert!(settle.write.ops > 0 && settle.write.availability.is_some_and(|a| a > 0.9), "{settle:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_while_a_member_is_not_ready_is_refused_with_the_pdb_cause() {
    use leaderwatch::disrupt::Disruptor;
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs::default()).await;
    api.freeze(2).await;
    // Wait until the fake's kubelet has seen dlock-etcd-2 go unready and the two others
    // ready: if the frozen member led, both survivors are unready during the election that
    // follows, and an eviction then reads "has 0" (seen once in a fresh-clone make test).
    let client = api.client();
    let pdbs: kube::Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> = kube::Api::namespaced(client.clone(), NS);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let p = pdbs.get("dlock-etcd-pdb").await.expect("pdb");
        if p.status.is_some_and(|s| s.disruptions_allowed == 0 && s.current_healthy == 2) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the frozen member never went unready");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, NS);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mut evictor = leaderwatch::k8s::evict::KubeEvictor::new(pods, NS, Duration::from_secs(5), Duration::from_secs(1), false, clock.clone());
    evictor.retry_every = Duration::from_millis(300);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let reporter = leaderwatch::disrupt::Reporter::new(tx, clock, "kubernetes");
    let err = evictor.disrupt(leaderwatch::member::MemberName("dlock-etcd-1".into()), reporter).await.expect_err("blocked");
    let msg = err.to_string();
    assert!(matches!(err, leaderwatch::Error::Incomplete(_)), "{msg}");
    // "has 2" as a rule; "has 1" when the frozen member was the leader and a survivor was
    // briefly unready during the election that followed (seen under load).
    let healthy_named = ["has 2 currently", "has 1 currently"].iter().any(|h| msg.contains(h));
    assert!(msg.contains("needs 2 healthy pods and has ") && healthy_named && msg.contains("attempts"), "{msg}");
    // Every blocked attempt was reported as it happened, not kept until a success.
    let mut blocked = 0;
    while let Ok(r) = rx.try_recv() {
        if let leaderwatch::disrupt::Report::Event(e) = r {
            blocked += usize::from(e.kind == "eviction_blocked");
        }
    }
    assert!(blocked >= 2, "each blocked attempt is reported: {blocked}");
    assert!(api.evictions().await.is_empty());
    api.thaw(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_role_is_exactly_what_measure_uses() {
    let _one = one_cluster_at_a_time().await;
    let api = fake(Knobs::default()).await; // RBAC from deploy/k8s/leaderwatch/rbac.yaml enforced
    let out = tempfile::tempdir().expect("tempdir");
    measure(&api, out.path(), "follower", false).await.unwrap_or_else(|e| panic!("measure under the Role: {e}"));
    let granted = support::fake_api::leaderwatch_rules();
    let used = api.used().await;
    let unused: Vec<_> = granted.difference(&used).collect();
    assert!(unused.is_empty(), "the Role grants what no code path used: {unused:?}");
    assert_eq!(used, granted);

    drop(api);

    // The rules are enforced: without `create pods/eviction` the sitting stops with a 403.
    let revoke = ("".to_owned(), "pods/eviction".to_owned(), "create".to_owned());
    let api = fake(Knobs { revoke: Some(revoke), ..Knobs::default() }).await;
    let out = tempfile::tempdir().expect("tempdir");
    let err = measure(&api, out.path(), "follower", false).await.err().expect("refused");
    assert!(matches!(err, leaderwatch::Error::Kube(leaderwatch::k8s::KubeError::Forbidden { .. })), "{err}");
    assert!(api.evictions().await.is_empty());
    // A 403 in the middle of the sitting still leaves what was measured.
    let b = leaderwatch::report::load(&out.path().join("baseline.json")).expect("baseline.json written");
    assert_eq!(b.status, "incomplete");
    assert!(b.windows.iter().any(|w| w.name == "at_rest" && w.rounds > 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_timing_is_read_from_the_statefulset_that_owns_the_pods() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    let _one = one_cluster_at_a_time().await;
    let mut cluster = Some(LocalCluster::start(LocalOptions::default()).await.unwrap_or_else(|e| panic!("local etcd: {e}")));
    let sts_api = |api: &FakeApi| kube::Api::<StatefulSet>::namespaced(api.client(), NS);
    let list = kube::api::ListParams::default().labels("app.kubernetes.io/name=dlock-etcd");

    // The repository's manifest, served as it is: both values from its args.
    let api = FakeApi::start(cluster.take().expect("cluster"), Knobs::default(), Duration::from_secs(1)).await;
    let t = timing::read(&api.client(), &kube_opts()).await.unwrap_or_else(|e| panic!("timing: {e}"));
    assert_eq!(t, ElectionTiming { heartbeat_ms: 100, election_ms: 1000, source: "StatefulSet dlock/dlock-etcd container etcd args".into() });
    let used = api.used().await;
    for rule in [("", "pods", "list"), ("apps", "statefulsets", "get")] {
        assert!(used.contains(&(rule.0.into(), rule.1.into(), rule.2.into())), "{rule:?} used: {used:?}");
    }
    // The Role grants get, not list: a list of StatefulSets is refused.
    let err = sts_api(&api).list(&list).await.expect_err("list statefulsets is not in the Role");
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 403), "{err}");
    cluster = Some(api.into_cluster().await);

    // No flags in the container: etcd's defaults, said so.
    let api = FakeApi::start(cluster.take().expect("cluster"), Knobs { etcd_no_flags: true, ..Knobs::default() }, Duration::from_secs(1)).await;
    let t = timing::read(&api.client(), &kube_opts()).await.unwrap_or_else(|e| panic!("timing: {e}"));
    assert_eq!(t, ElectionTiming { heartbeat_ms: 100, election_ms: 1000, source: "etcd default".into() });
    cluster = Some(api.into_cluster().await);

    // Without the Role's statefulsets rule: a 403, named.
    let revoke = ("apps".to_owned(), "statefulsets".to_owned(), "get".to_owned());
    let api = FakeApi::start(cluster.take().expect("cluster"), Knobs { revoke: Some(revoke), ..Knobs::default() }, Duration::from_secs(1)).await;
    let err = timing::read(&api.client(), &kube_opts()).await.expect_err("forbidden");
    assert!(matches!(&err, KubeError::Forbidden { what, .. } if what == "get statefulset"), "{err}");
    assert!(err.to_string().contains("statefulsets"), "{err}");
    cluster = Some(api.into_cluster().await);

    // As a cluster admin the list route serves the same manifest, filtered by the selector.
    let api = FakeApi::start(cluster.take().expect("cluster"), Knobs { no_rbac: true, ..Knobs::default() }, Duration::from_secs(1)).await;
    let items = sts_api(&api).list(&list).await.expect("list statefulsets").items;
    assert_eq!(items.len(), 1);
    assert_eq!(timing::from_statefulset(&items[0], None).map(|t| t.source), Ok("StatefulSet dlock/dlock-etcd container etcd args".to_owned()));
    let none = sts_api(&api).list(&kube::api::ListParams::default().labels("app.kubernetes.io/name=other")).await.expect("list").items;
    assert!(none.is_empty(), "the selector filters");
    drop(api);
}
