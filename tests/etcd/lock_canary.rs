//! What an election does to a lock, on real local etcd members: the lock canary beside an
//! independent lock client (lw-etcd-locker: Go's clientv3 `concurrency.NewSession` +
//! `concurrency.NewMutex`, every unary call with the canary's 1 s deadline), both taking
//! turns on a lock of their own through a sitting. For a leader crash (SIGKILL) and a
//! leader's graceful stop (SIGTERM) the canary's `lock_unavailable_s` agrees with the Go
//! client's within 0.2 s and one hold (or up to one retry apart, the slower one's failure shown),
//! no lease is lost and every fencing token rises. A leader frozen (SIGSTOP) longer than
//! the lease TTL is the one case where leases *are* lost: every holder whose keep-alive
//! stream was on the frozen member loses its lease, a whole TTL after its last answer (a
//! holder on a follower may lose too: the follower forwards the renewal to the frozen
//! leader), and the lock stays safe. The evictions and the rolling restart on the lab's real nodes are in
//! tests/lab/kube.rs.

use crate::support;
use crate::support::locker::{self, Locker, LockerEvent};

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use leaderwatch::analysis::recovery::Target;
use leaderwatch::io::disrupt::LocalDisruptor;
use leaderwatch::io::lock::LockConfig;
use leaderwatch::io::probe::ProbeConfig;
use leaderwatch::model::baseline::{
    Baseline, Completion, ElectionDetail, Environment, EnvironmentKind, LocalMethod, WindowName,
};
use leaderwatch::model::clock::{Clock, SystemClock};
use leaderwatch::ops::drive::{self, TrialConfig};

type Row = HashMap<String, String>;

/// What one sitting left: the baseline, locks.csv, the Go client's events.
struct Sat {
    b: Baseline,
    locks: Vec<Row>,
    go: Vec<LockerEvent>,
    /// The same Go client on clientv3's defaults (no deadline of its own per call).
    go_defaults: Vec<LockerEvent>,
}

/// A sitting on the leader in which both lock clients held the lock before the disruption
/// began: what an election costs them is measured from a grant before it. The sitting
/// waits for the canary's first grant (at most 5 s, `canary_not_ready`), and the Go client
/// starts before the sitting; on a machine loaded enough for either to miss it, the
/// sitting measures nothing about the election and is run again, twice at most.
async fn leader_sitting(method: LocalMethod, down: Duration, ttl_s: u32, holders: u16) -> Sat {
    for attempt in 1..=3 {
        let s = one_leader_sitting(method, down, ttl_s, holders).await;
        let began = s.b.disruption.as_ref().expect("the disruption").requested_at;
        let canary_first = s.locks.iter().filter(|r| r["event"] == "granted").map(|r| {
            r["at"].parse::<chrono::DateTime<chrono::Utc>>().expect("a time in locks.csv")
        });
        let (canary_before, go_before) = (
            canary_first.min().is_some_and(|t| t < began),
            locker::grants(&s.go).into_iter().min().is_some_and(|t| t < began),
        );
        if (canary_before && go_before) || attempt == 3 {
            return s;
        }
        eprintln!(
            "{method:?} (attempt {attempt}): no grant before the disruption at {began} \
             (canary {canary_before}, Go {go_before}): the sitting is run again"
        );
    }
    unreachable!("the third attempt returns")
}

async fn one_leader_sitting(method: LocalMethod, down: Duration, ttl_s: u32, holders: u16) -> Sat {
    let f = support::cluster().await;
    let members = f.cluster.members();
    let urls: Vec<String> = members.iter().map(|m| m.url.clone()).collect();
    let go =
        Locker::start(&urls, "__leaderwatch/independent-lock", Some(Duration::from_secs(1)), ttl_s);
    let go_defaults = Locker::start(&urls, "__leaderwatch/independent-lock-defaults", None, ttl_s);
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
        lock: Some(LockConfig {
            holders,
            ttl_s: i64::from(ttl_s),
            hold: locker::HOLD,
            timeout: Duration::from_secs(1),
        }),
        metrics_addr: None,
        follow_pod_ips: false,
    };
    let cluster = Arc::new(tokio::sync::Mutex::new(f.cluster));
    let d =
        LocalDisruptor { cluster: cluster.clone(), method, down, grace: Duration::from_secs(30) };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let b = drive::run_trial(cfg, d, clock, None, std::future::pending())
        .await
        .unwrap_or_else(|e| panic!("sitting: {e}"));
    let (go, go_defaults) = tokio::task::spawn_blocking(move || {
        let within = Duration::from_secs(30);
        (go.stop_after_its_next_grant(within), go_defaults.stop_after_its_next_grant(within))
    })
    .await
    .expect("locker");
    drop(cluster);
    let locks = support::locks(f.out.path());
    Sat { b, locks, go, go_defaults }
}

/// The disruption window's election (a crash may take two terms to settle: one detail
/// spanning both).
fn election(b: &Baseline) -> ElectionDetail {
    assert_eq!(b.status, Completion::Complete, "{:?}", b.incomplete_reason);
    let dis = b.window(WindowName::Disruption).expect("disruption window");
    assert_eq!(dis.elections_detail.len(), 1, "{:?}", dis.elections_detail);
    dis.elections_detail[0].clone()
}

/// The lock canary and the Go client agree on the election's cost, and the lock was safe.
fn assert_agree(method: &str, s: &Sat) -> (f64, f64) {
    let e = election(&s.b);
    let agreed = locker::assert_agree(method, &e, &s.locks, &s.go, Some(&s.go_defaults));
    locker::assert_safe(&s.b, &s.go);
    agreed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_crash_costs_the_lock_canary_what_it_costs_go_concurrency_mutex() {
    let s = leader_sitting(LocalMethod::Sigkill, Duration::from_secs(2), 10, 3).await;
    let (canary, _) = assert_agree("sigkill", &s);
    // A crash leaves a real gap (the election timeout, 1 s here) in the grants.
    assert!(canary > 0.8, "the lock canary saw {canary:.3} s: no crash gap?");
    assert_eq!(locker::leases_lost(&s.b), 0, "a 2 s crash cost a lease of 10 s");
    assert!(!s.go.iter().any(|e| e.kind == "session_lost"), "the Go client lost a session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stop_costs_the_lock_canary_what_it_costs_go_concurrency_mutex() {
    let s = leader_sitting(LocalMethod::Sigterm, Duration::from_secs(2), 10, 3).await;
    assert_agree("sigterm", &s);
    assert_eq!(locker::leases_lost(&s.b), 0);
}

/// The member whose keep-alive answered each holder last before `t`, and when.
fn streams_before(locks: &[Row], t: &str) -> HashMap<String, (String, String)> {
    let mut last = HashMap::new();
    for r in locks.iter().filter(|r| r["event"] == "keepalive_ok" && r["at"].as_str() < t) {
        last.insert(r["holder"].clone(), (r["member"].clone(), r["at"].clone()));
    }
    last
}

/// When each holder's lease was last renewed before `t`: its last keep-alive answer, or
/// the grant of the lease when none came after it. Regression (make test, 2026-12-07): a
/// lease granted just before the freeze had no answered keep-alive yet, and its loss was
/// looked up among the keep-alives only.
fn renewed_before(locks: &[Row], t: &str) -> HashMap<String, String> {
    let mut last = HashMap::new();
    let renewals = ["keepalive_ok", "lease_granted"];
    for r in
        locks.iter().filter(|r| renewals.contains(&r["event"].as_str()) && r["at"].as_str() < t)
    {
        last.insert(r["holder"].clone(), r["at"].clone());
    }
    last
}

fn secs(a: &str, b: &str) -> f64 {
    let p = |s: &str| s.parse::<chrono::DateTime<chrono::Utc>>().expect("a time in locks.csv");
    (p(b) - p(a)).as_seconds_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_frozen_past_the_ttl_takes_every_lease_kept_alive_on_it() {
    // TTL 10 s, frozen 12 s. A keep-alive stream on the frozen member gets silence, not an
    // error, so its holder gives the lease up after the TTL (and the new leader expires it
    // before the thaw). A holder on a follower may lose its lease too: the follower
    // forwards a renewal to the frozen leader it still knows and waits for it (up to the
    // server's request timeout, 7 s), so a keep-alive sent just after the freeze can be
    // answered past the TTL. Each loss comes a full TTL after its last answer. Streams go to members in
    // turn, as clientv3's do: with 6 holders one is on the leader in all but about 9% of
    // sittings, so a sitting where none was is run again (twice at most) rather than
    // passing on nothing.
    for attempt in 1..=3 {
        let s = leader_sitting(LocalMethod::Sigstop, Duration::from_secs(12), 10, 6).await;
        let e = election(&s.b);
        let frozen = e.old_leader.clone().expect("the old leader");
        let after = leaderwatch::model::clock::ts(e.after);
        let before = streams_before(&s.locks, &after);
        let renewed = renewed_before(&s.locks, &after);
        let on_frozen: BTreeSet<&String> =
            before.iter().filter(|(_, (m, _))| *m == frozen).map(|(h, _)| h).collect();
        let lost: Vec<&Row> = s.locks.iter().filter(|r| r["event"] == "lease_lost").collect();
        let lost_holders: BTreeSet<&String> = lost.iter().map(|r| &r["holder"]).collect();
        let go_lost = s.go.iter().filter(|e| e.kind == "session_lost").count();
        eprintln!(
            "sigstop {frozen} (attempt {attempt}): keep-alive streams on it {on_frozen:?}, \
             leases lost {lost_holders:?}; the Go client lost {go_lost} session(s)"
        );
        if on_frozen.is_empty() && attempt < 3 {
            continue;
        }
        assert!(!on_frozen.is_empty(), "no holder kept its lease alive on {frozen} in 3 sittings");
        assert!(
            lost_holders.is_superset(&on_frozen),
            "every lease kept alive on {frozen} is lost: {lost_holders:?}"
        );
        for r in &lost {
            // A lease kept alive on the frozen member is given up during the freeze; one on
            // a follower learns "expired" from its next answer, which may come after the
            // recovery (CI, 2026-12-06: holder 5 on m0, lost in the settle window).
            let windows: &[&str] = if on_frozen.contains(&&r["holder"]) {
                &["disruption"]
            } else {
                &["disruption", "settle"]
            };
            assert!(windows.contains(&r["window"].as_str()), "{r:?}");
            let last_ok = renewed.get(&r["holder"]).unwrap_or_else(|| {
                panic!("holder {} lost a lease never granted before the election", r["holder"])
            });
            let waited = secs(last_ok, &r["at"]);
            assert!(waited >= 10.0 - 0.05, "given up {waited:.3} s after its last answer: {r:?}");
        }
        assert_eq!(locker::leases_lost(&s.b), lost.len() as u64);
        let settle = s.b.window(WindowName::Settle).and_then(|w| w.lock.clone()).expect("settle");
        assert!(settle.grants > 0, "no grant after the thaw: {settle:?}");
        locker::assert_safe(&s.b, &s.go);
        return;
    }
}
