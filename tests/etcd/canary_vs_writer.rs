//! The canary measures the cluster, not its own queue: on real local etcd members, its
//! `write_unavailable_s` for an election agrees within 0.2 s with an independent writer run
//! beside it (Go's clientv3, a new Put every 50 ms with a 500 ms deadline, every member),
//! for a leader crash (SIGKILL) and a leader's graceful stop (SIGTERM). The one-in-flight
//! figure is never below it. The leader eviction on the real control plane is in
//! tests/lab/kube.rs.
//!
//! Regressions: the canary's one balanced channel kept sending a third of its ops to the
//! stopped member (each refused, none retried), and a SIGTERM'd leader cost it 0.2-0.4 s
//! where the writer lost nothing: no canary op may fail on a refused connection now, its
//! ops go to the members that are up, as clientv3's do. And with one op of each kind in
//! flight and a 1 s deadline, the canary said 2.20 s on a leader SIGKILL where the
//! independent writer saw 1.72 s, and 0.20 s on a SIGTERM where the writer saw 0.01 s.

use crate::support;
use crate::support::writer;

use std::sync::Arc;
use std::time::Duration;

use leaderwatch::analysis::recovery::Target;
use leaderwatch::io::disrupt::LocalDisruptor;
use leaderwatch::io::probe::ProbeConfig;
use leaderwatch::model::baseline::LocalMethod;
use leaderwatch::model::baseline::{
    Baseline, Completion, ElectionDetail, Environment, EnvironmentKind, WindowName,
};
use leaderwatch::model::clock::{Clock, SystemClock};
use leaderwatch::ops::drive::{self, TrialConfig};

/// How far the canary may be from the independent writer (the bound).
const AGREE_S: f64 = 0.2;

/// The baseline, the writer's ops, and the canary's ops that failed on a refused
/// connection (canary.csv rows).
async fn leader_sitting(method: LocalMethod) -> (Baseline, Vec<writer::WriterOp>, Vec<String>) {
    let f = support::cluster().await;
    let members = f.cluster.members();
    let w = writer::Writer::start(&members.iter().map(|m| m.url.clone()).collect::<Vec<_>>());
    let cfg = TrialConfig {
        members,
        idle: Duration::from_secs(3),
        settle: Duration::from_secs(3),
        interval: Duration::from_millis(500),
        fast_interval: Duration::from_millis(100),
        target: Target::Leader,
        probe: ProbeConfig { timeout: Duration::from_secs(1), ..ProbeConfig::default() },
        out: f.out.path().to_owned(),
        recovery_timeout: Duration::from_secs(30),
        environment: Environment {
            kind: EnvironmentKind::Local,
            description: "test".into(),
            ..Environment::default()
        },
        cause_horizon: leaderwatch::analysis::attribution::DEFAULT_HORIZON,
        canary: Some(Duration::from_secs(1)),
        lock: None,
        metrics_addr: None,
        follow_pod_ips: false,
    };
    let cluster = Arc::new(tokio::sync::Mutex::new(f.cluster));
    let d = LocalDisruptor {
        cluster: cluster.clone(),
        method,
        down: Duration::from_secs(2),
        grace: Duration::from_secs(30),
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let b = drive::run_trial(cfg, d, clock, None, std::future::pending())
        .await
        .unwrap_or_else(|e| panic!("sitting: {e}"));
    let ops = tokio::task::spawn_blocking(move || w.stop()).await.expect("writer");
    drop(cluster);
    let canary = std::fs::read_to_string(f.out.path().join("canary.csv")).expect("canary.csv");
    let refused = canary.lines().filter(|l| l.contains("Connection refused")).map(str::to_owned);
    (b, ops, refused.collect())
}

/// The election of the disruption window, and both figures beside the writer's.
fn compare(b: &Baseline, ops: &[writer::WriterOp]) -> (f64, f64, f64, ElectionDetail) {
    assert_eq!(b.status, Completion::Complete, "{:?}", b.incomplete_reason);
    let dis = b.window(WindowName::Disruption).expect("disruption window");
    assert_eq!(dis.elections, Some(1), "{:?}", dis.elections_detail);
    let e = dis.elections_detail.first().expect("election detail").clone();
    let canary = e.write_unavailable_s.expect("the canary ran through the election");
    let one = e.write_unavailable_one_in_flight_s.expect("and its one-in-flight figure");
    let independent = writer::unavailable_over(ops, e.after, e.observed_at)
        .expect("the writer wrote again after the election");
    (canary, one, independent, e)
}

fn assert_agree(method: &str, (canary, one, independent, e): (f64, f64, f64, ElectionDetail)) {
    eprintln!(
        "{method}: canary {canary:.3} s, one in flight {one:.3} s, independent writer {independent:.3} s ({e:?})"
    );
    assert!(
        (canary - independent).abs() <= AGREE_S,
        "{method}: canary {canary:.3} s vs independent writer {independent:.3} s"
    );
    // Its ops are a subset of the canary's: every gap of theirs holds one of the canary's.
    assert!(one >= canary - 1e-9, "{method}: one in flight {one:.3} s < {canary:.3} s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_crash_costs_the_canary_what_it_costs_an_independent_writer() {
    let (b, ops, refused) = leader_sitting(LocalMethod::Sigkill).await;
    assert_eq!(refused, Vec::<String>::new(), "ops sent to the killed member");
    let r = compare(&b, &ops);
    // A crash leaves a real gap (the election timeout, 1 s here) for both to see.
    assert!(r.2 > 0.3, "the independent writer saw {:.3} s: no crash gap?", r.2);
    assert_agree("sigkill", r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stop_costs_the_canary_what_it_costs_an_independent_writer() {
    let (b, ops, refused) = leader_sitting(LocalMethod::Sigterm).await;
    assert_eq!(refused, Vec::<String>::new(), "ops sent to the stopped member");
    assert_agree("sigterm", compare(&b, &ops));
}
