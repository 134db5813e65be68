//! The trial on a real local cluster with the real local disruptor: the three methods,
//! windows that tile the run, and every way a trial can end early (a signal in each
//! phase, a restart that cannot start, a wall-clock step). Each must leave a baseline.json
//! with every round measured up to that point.

use crate::support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use leaderwatch::analysis::counts::count;
use leaderwatch::analysis::recovery::Target;
use leaderwatch::io::disrupt::LocalDisruptor;
use leaderwatch::io::local::{LocalCluster, LocalOptions};
use leaderwatch::io::probe::ProbeConfig;
use leaderwatch::model::baseline::LocalMethod;
use leaderwatch::model::baseline::{Baseline, Environment};
use leaderwatch::model::baseline::{Completion, EnvironmentKind, WindowName};
use leaderwatch::model::clock::{Clock, SystemClock};
use leaderwatch::model::counts::{Point, RoundView};
use leaderwatch::model::member::MemberName;
use leaderwatch::ops::drive::{self, TrialConfig};
use support::{canary_keys, events, one_cluster_at_a_time, samples};
use tokio::sync::Mutex;

type Row = HashMap<String, String>;

struct Sit {
    method: LocalMethod,
    down: Duration,
    idle: Duration,
    settle: Duration,
    timeout: Duration,
}

impl Default for Sit {
    fn default() -> Self {
        Sit {
            method: LocalMethod::Sigkill,
            down: Duration::from_secs(2),
            idle: Duration::from_secs(3),
            settle: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
        }
    }
}

fn config(members: Vec<leaderwatch::model::member::Member>, out: &Path, s: &Sit) -> TrialConfig {
    TrialConfig {
        members,
        idle: s.idle,
        settle: s.settle,
        interval: Duration::from_millis(500),
        fast_interval: Duration::from_millis(100),
        target: Target::Leader,
        probe: ProbeConfig { timeout: s.timeout, ..ProbeConfig::default() },
        out: out.to_owned(),
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
    }
}

/// Starts a cluster (one at a time), runs one trial against it with `shutdown`.
async fn sit_with(
    s: Sit,
    opts: LocalOptions,
    clock: Arc<dyn Clock>,
    shutdown: impl std::future::Future<Output = ()>,
    during: impl FnOnce(std::path::PathBuf) -> tokio::task::JoinHandle<()>,
) -> (leaderwatch::Result<Baseline>, tempfile::TempDir) {
    let _one = one_cluster_at_a_time().await;
    let cluster =
        LocalCluster::start(opts).await.unwrap_or_else(|e| panic!("local etcd cluster: {e}"));
    let out = tempfile::tempdir().expect("tempdir");
    let cfg = config(cluster.members(), out.path(), &s);
    let cluster = Arc::new(Mutex::new(cluster));
    let d = LocalDisruptor {
        cluster: cluster.clone(),
        method: s.method,
        down: s.down,
        grace: Duration::from_secs(10),
    };
    let side = during(out.path().to_owned());
    let r = drive::run_trial(cfg, d, clock, None, shutdown).await;
    side.abort();
    if r.is_ok() {
        // A clean exit leaves nothing of the canary behind.
        let members = cluster.lock().await.members();
        assert_eq!(canary_keys(&members).await, 0, "a key under __leaderwatch/ outlived the trial");
    }
    (r, out)
}

async fn sit(s: Sit) -> (leaderwatch::Result<Baseline>, tempfile::TempDir) {
    sit_with(s, LocalOptions::default(), Arc::new(SystemClock), std::future::pending(), |_| {
        tokio::spawn(async {})
    })
    .await
}

fn baseline(dir: &Path) -> Baseline {
    leaderwatch::io::read::baseline(&dir.join("baseline.json"))
        .unwrap_or_else(|e| panic!("baseline.json: {e}"))
}

/// Waits until events.csv has a row of `kind`.
async fn wait_event(dir: &Path, kind: &str) {
    loop {
        if dir.join("events.csv").exists() && events(dir).iter().any(|e| e["kind"] == kind) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until samples.csv has a row of `phase`.
async fn wait_phase(dir: &Path, phase: &str) {
    loop {
        if dir.join("samples.csv").exists() && samples(dir).iter().any(|r| r["phase"] == phase) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn opt_f64(r: &Row, k: &str) -> Option<f64> {
    r[k].parse().ok()
}

/// samples.csv back into the rounds counting saw.
fn rounds_from_csv(rows: &[Row]) -> Vec<RoundView> {
    let mut by_round: BTreeMap<u64, RoundView> = BTreeMap::new();
    for r in rows {
        let n: u64 = r["round"].parse().expect("round");
        let v = by_round.entry(n).or_insert_with(|| RoundView {
            round: n,
            ts: DateTime::<Utc>::default(),
            points: BTreeMap::new(),
        });
        if r["error"].starts_with("silent:") {
            continue;
        }
        v.points.insert(
            MemberName(r["member"].clone()),
            Point {
                counter: opt_f64(r, "leader_changes_seen_total"),
                start_time: opt_f64(r, "process_start_time"),
                raft_term: r["raft_term"].parse().ok(),
                leader_id: u64::from_str_radix(&r["leader_id"], 16).ok(),
            },
        );
    }
    by_round.into_values().collect()
}

/// The tiling rule, checked from the files alone: each round is in exactly one window, the
/// per-window increases add up to the whole run's per member, and the window elections
/// to the run's term delta.
fn assert_windows_tile_the_run(dir: &Path, b: &Baseline) {
    let rows = samples(dir);
    let mut phase_of: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for r in &rows {
        phase_of.entry(r["round"].parse().expect("round")).or_default().insert(r["phase"].clone());
    }
    assert!(phase_of.values().all(|p| p.len() == 1), "a round with two phases");
    for w in &b.windows {
        let n = phase_of.values().filter(|p| p.contains(w.name.as_str())).count() as u64;
        assert_eq!(w.rounds, n, "window {} owns the rounds of its phase", w.name);
    }
    assert_eq!(
        b.windows.iter().map(|w| w.rounds).sum::<u64>(),
        phase_of.len() as u64,
        "every round is in a window"
    );
    let whole = count(&rounds_from_csv(&rows));
    for (m, c) in &whole.per_member {
        let sum: f64 = b
            .windows
            .iter()
            .map(|w| w.leader_changes.per_member.get(m).map_or(0.0, |x| x.increase))
            .sum();
        assert!(
            (sum - c.increase).abs() < 1e-9,
            "member {m}: windows add up to {sum}, the run to {}",
            c.increase
        );
    }
    let elections: u64 = b.windows.iter().filter_map(|w| w.elections).sum();
    assert_eq!(Some(elections), whole.elections, "window elections add up to the run's term delta");
}

/// One election, in the disruption window, caused by the disruptor's own `signal` on the
/// old leader (the events.csv row it points to exists); none at rest. Every window has
/// each member's health, and health.csv has rows in every window.
fn assert_causes_and_health(dir: &Path, b: &Baseline, signal: &str) {
    let d = b.disruption.as_ref().expect("disruption");
    assert!(
        b.window(WindowName::AtRest).expect("at_rest").elections_detail.is_empty(),
        "{signal}: nothing at rest"
    );
    let dis = b.window(WindowName::Disruption).expect("disruption");
    assert_eq!(dis.elections_detail.len(), 1, "{signal}: {:?}", dis.elections_detail);
    let e = &dis.elections_detail[0];
    assert_eq!(
        (e.cause.as_str(), e.old_leader.as_deref()),
        ("own_disruption", Some(d.target.as_str())),
        "{e:?}"
    );
    assert!(e.new_leader.is_some() && e.new_leader != e.old_leader, "{e:?}");
    // Leaderless time is measured inside the disruption: never longer than the window.
    assert!(
        e.leaderless_s.is_some_and(|s| s <= dis.duration_s) && e.after < e.observed_at,
        "{e:?} in {} s",
        dis.duration_s
    );
    let cause = e.cause_event.as_ref().expect("cause_event");
    assert_eq!((cause.kind.as_str(), cause.member.as_str()), (signal, d.target.as_str()));
    let rows = events(dir);
    assert!(
        rows.iter()
            .any(|r| r["kind"] == signal && r["ts"] == leaderwatch::model::clock::ts(cause.ts)),
        "cause_event names an events.csv row"
    );
    assert_eq!(rows.iter().filter(|r| r["kind"] == "election").count(), 1, "one election row");
    for w in &b.windows {
        assert_eq!(w.health.len(), 3, "{}: health of every member", w.name);
        for (m, h) in &w.health {
            assert!(
                h.quota_bytes.is_some_and(|q| q > 0.0) && h.db_size_bytes.is_some_and(|s| s > 0.0),
                "{}/{m}: {h:?}",
                w.name
            );
            // A quantile is null without observations, never 0.
            assert!(
                h.wal_fsyncs.is_none_or(|n| n > 0.0) || h.wal_fsync_p99_s.is_none(),
                "{}/{m}: {h:?}",
                w.name
            );
        }
    }
    let restarts = dis.health[&d.target].restarts;
    assert_eq!(
        restarts,
        u32::from(signal != "sigstop_sent"),
        "{signal}: restarts of the target in the window"
    );
    let health = std::fs::read_to_string(dir.join("health.csv")).expect("health.csv");
    for name in ["at_rest", "disruption", "settle"] {
        assert!(
            health.lines().any(|l| l.split(',').nth(2) == Some(name)),
            "health.csv has {name} rows"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_method_on_the_leader_is_one_election_and_the_windows_tile_the_run() {
    let mut cost = BTreeMap::new();
    for (method, down) in
        [(LocalMethod::Sigterm, 2), (LocalMethod::Sigkill, 2), (LocalMethod::Sigstop, 3)]
    {
        let (r, out) = sit(Sit {
            method,
            down: Duration::from_secs(down),
            timeout: Duration::from_secs(3),
            ..Sit::default()
        })
        .await;
        let b = r.unwrap_or_else(|e| panic!("{method:?}: {e}"));
        assert!(b.is_complete(), "{method:?}");
        let d = b.disruption.as_ref().expect("disruption");
        assert_eq!(d.method.to_string(), format!("local-{}", method.as_str()));
        assert!(d.target_was_leader);
        assert_eq!(
            b.window(WindowName::AtRest).expect("at_rest").elections,
            Some(0),
            "{method:?}: nothing at rest"
        );
        let dis = b.window(WindowName::Disruption).expect("disruption");
        // One leader change. A hand-over (sigterm) takes exactly one term; a timeout election
        // (sigkill, sigstop) can take two when both survivors campaign at once and split
        // the vote (seen once in CI on 2 busy cores): the term delta counts both.
        assert_eq!(dis.leader_transitions.len(), 1, "{method:?}: one leader change");
        let terms = if method == LocalMethod::Sigterm { 1..=1 } else { 1..=2 };
        assert!(
            dis.elections.is_some_and(|e| terms.contains(&e)),
            "{method:?}: elections {:?}",
            dis.elections
        );
        assert!(
            d.member_lost_at.is_some() && d.member_back_at.is_some() && d.healthy_at.is_some(),
            "{method:?}: {d:?}"
        );
        assert!(d.leader_elected_at.is_some(), "{method:?}: a new term's leader was seen");
        assert!(b.windows.iter().all(|w| w.full_length));
        assert_windows_tile_the_run(out.path(), &b);
        let all_events = events(out.path());
        let kinds: Vec<String> = all_events.iter().map(|e| e["kind"].clone()).collect();
        let signal = format!("{}_sent", method.as_str());
        assert!(kinds.contains(&signal), "{method:?}: {kinds:?}");
        assert_causes_and_health(out.path(), &b, &signal);
        cost.insert(method.as_str(), assert_the_canary(out.path(), &b));
        if method == LocalMethod::Sigstop {
            // Frozen, not restarted: thawed, and its counter did not reset.
            assert!(
                kinds.contains(&"continued".to_owned()) && !kinds.contains(&"restarted".to_owned())
            );
            let target = MemberName(d.target.clone());
            assert_eq!(
                b.window(WindowName::Disruption).expect("disruption").leader_changes.per_member
                    [&target]
                    .resets,
                0
            );
            let rows = samples(out.path());
            assert_survivors_kept_their_cadence(&rows, &all_events, &d.target, &signal);
            let silent = rows
                .iter()
                .filter(|r| r["member"] == d.target && r["error"].starts_with("silent:"))
                .count();
            assert!(silent > 0, "the frozen member was recorded as silent");
        }
    }
    // What the election cost a client: a crash or a freeze waits for an election timeout,
    // a graceful hand-over does not.
    assert!(cost["sigkill"] > 0.0, "{cost:?}");
    assert!(cost["sigterm"] < cost["sigkill"], "{cost:?}");
}

/// While the target was frozen, the survivors kept their own cadence: each of their probes
/// started one fast interval after their previous answer (the target's probe timeout is
/// 3 s: had it held the rounds, they would wait 3 s), through the whole freeze: the first
/// answer came on cadence after the stop, the last after the thaw (a fixed count of answers
/// failed in CI: a loaded machine's slow /health leaves fewer). Their own /health can be
/// slow meanwhile (a linearizable read that waits for the frozen leader), which is theirs
/// to pay.
fn assert_survivors_kept_their_cadence(
    rows: &[HashMap<String, String>],
    events: &[HashMap<String, String>],
    target: &str,
    signal: &str,
) {
    let at = |kind: &str| -> DateTime<Utc> {
        let e = events.iter().find(|e| e["kind"] == kind);
        e.unwrap_or_else(|| panic!("no {kind} event"))["ts"].parse().expect("ts")
    };
    let (stopped, thawed) = (at(signal), at("continued"));
    for m in ["m0", "m1", "m2"].into_iter().filter(|m| *m != target) {
        let answers: Vec<(DateTime<Utc>, f64)> = rows
            .iter()
            .filter(|r| {
                r["member"] == m && r["phase"] == "disruption" && !r["error"].starts_with("silent:")
            })
            .map(|r| (r["ts"].parse().expect("ts"), r["probe_ms"].parse().expect("probe_ms")))
            .collect();
        let (first, last) = match (answers.first(), answers.last()) {
            (Some(f), Some(l)) if answers.len() >= 2 => (*f, *l),
            _ => panic!("{m}: {} answers during the disruption", answers.len()),
        };
        assert!(
            (first.0 - stopped).num_milliseconds() as f64 <= first.1 + 100.0 + 500.0,
            "{m}: first answer at {} for a stop at {stopped}",
            first.0
        );
        assert!(last.0 >= thawed, "{m}: last answer at {} before the thaw at {thawed}", last.0);
        for w in answers.windows(2) {
            let (gap, own) = ((w[1].0 - w[0].0).num_milliseconds() as f64, w[0].1);
            assert!(
                gap < own + 100.0 + 500.0,
                "{m}: next probe {gap} ms after one that took {own} ms"
            );
        }
    }
}

/// The canary ran from the request to the end: a canary.csv row for every op the
/// disruption and settle windows count, none at rest; returns the election's write cost.
fn assert_the_canary(dir: &Path, b: &Baseline) -> f64 {
    assert!(
        b.window(WindowName::AtRest).expect("at_rest").client.is_none(),
        "the canary does not run at rest"
    );
    let text = std::fs::read_to_string(dir.join("canary.csv")).expect("canary.csv");
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let windows: Vec<String> = rows.records().map(|r| r.expect("row")[2].to_owned()).collect();
    for window in [WindowName::Disruption, WindowName::Settle] {
        let name = window.as_str();
        let c = b
            .window(window)
            .and_then(|w| w.client.as_ref())
            .unwrap_or_else(|| panic!("{name}: client figures"));
        let ops = c.write.ops + c.read.ops;
        assert_eq!(
            windows.iter().filter(|w| *w == name).count() as u64,
            ops,
            "{name}: one row per op"
        );
        assert!(
            c.write.ops > 0 && c.read.ops > 0 && c.write.availability.is_some(),
            "{name}: {c:?}"
        );
    }
    assert_eq!(
        windows.len(),
        windows.iter().filter(|w| *w == "disruption" || *w == "settle").count()
    );
    let e = &b.window(WindowName::Disruption).expect("disruption").elections_detail[0];
    let cost = e.write_unavailable_s.unwrap_or_else(|| panic!("write_unavailable_s: {e:?}"));
    // The gap around the election lies within the canary's run: from the request (where
    // it starts) to the end of settle.
    let span: f64 = [WindowName::Disruption, WindowName::Settle]
        .iter()
        .filter_map(|w| b.window(*w))
        .map(|w| w.duration_s)
        .sum();
    assert!(cost <= span, "write cost {cost} s beyond the canary's {span} s");
    assert!(e.write_unavailable_one_in_flight_s.is_some_and(|one| one >= cost), "{e:?}");
    let d = b.disruption.as_ref().expect("disruption");
    assert!(d.waterfall.iter().any(|s| s.step == "writes_ok (canary)"), "{:?}", d.waterfall);
    cost
}

/// The shutdown future and the task that fires it when `phase` has begun.
fn signal_when(
    phase: &'static str,
) -> (
    impl std::future::Future<Output = ()>,
    impl FnOnce(std::path::PathBuf) -> tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = rx.await;
    };
    let during = move |dir: std::path::PathBuf| {
        tokio::spawn(async move {
            wait_phase(&dir, phase).await;
            let _ = tx.send(());
        })
    };
    (shutdown, during)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_in_each_phase_ends_the_trial_at_once_with_every_round_written() {
    for phase in ["at_rest", "disruption", "settle"] {
        let (shutdown, during) = signal_when(phase);
        // sigstop with a 20 s probe timeout: a round waiting on the frozen member, or the
        // target-retry loop, would hold the signal for seconds.
        let s = Sit {
            method: LocalMethod::Sigstop,
            down: Duration::from_secs(4),
            timeout: Duration::from_secs(20),
            settle: Duration::from_secs(30),
            ..Sit::default()
        };
        let t0 = std::time::Instant::now();
        let (r, out) =
            sit_with(s, LocalOptions::default(), Arc::new(SystemClock), shutdown, during).await;
        let took = t0.elapsed();
        let err =
            r.err().unwrap_or_else(|| panic!("{phase}: a signal must make the trial incomplete"));
        assert!(matches!(err, leaderwatch::Error::Incomplete(_)), "{phase}: {err}");
        assert!(
            took < Duration::from_secs(3 + 4 + 15),
            "{phase}: the signal was not honoured promptly ({took:?})"
        );
        let b = baseline(out.path());
        assert_eq!(b.status, Completion::Incomplete, "{phase}");
        let reason = b.incomplete_reason.clone().unwrap_or_default();
        assert!(
            reason.contains("signal")
                && reason.contains(if phase == "disruption" { "the disruption" } else { phase }),
            "{phase}: {reason}"
        );
        let last = b.windows.last().expect("a window");
        assert_eq!(last.name.as_str(), phase);
        assert!(!last.full_length, "{phase}: the last window is cut short");
        assert_windows_tile_the_run(out.path(), &b);
        let ended = events(out.path())
            .into_iter()
            .rfind(|e| e["kind"] == "sitting_ended")
            .expect("sitting_ended");
        assert!(ended["detail"].contains("signal"), "{ended:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_that_cannot_start_leaves_an_incomplete_baseline() {
    let bin = leaderwatch::io::local::find_etcd(None).expect("etcd (make deps)");
    let tools = tempfile::tempdir().expect("tempdir");
    let copy = tools.path().join("etcd");
    std::fs::copy(&bin, &copy).expect("copy etcd");
    let during = {
        let copy = copy.clone();
        move |dir: std::path::PathBuf| {
            tokio::spawn(async move {
                wait_event(&dir, "exited").await;
                // During the down time the binary becomes unrunnable.
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o644))
                    .expect("chmod");
            })
        }
    };
    let opts = LocalOptions { etcd_bin: Some(copy), ..LocalOptions::default() };
    let (r, out) =
        sit_with(Sit::default(), opts, Arc::new(SystemClock), std::future::pending(), during).await;
    let err = r.expect_err("the restart must fail");
    assert!(matches!(err, leaderwatch::Error::Incomplete(_)), "{err}");
    let b = baseline(out.path());
    assert_eq!(b.status, Completion::Incomplete);
    assert!(
        b.incomplete_reason.as_deref().unwrap_or_default().contains("the disruption failed"),
        "{:?}",
        b.incomplete_reason
    );
    let d = b.disruption.as_ref().expect("disruption");
    assert!(d.member_lost_at.is_some() && d.healthy_at.is_none());
    assert!(
        b.window(WindowName::AtRest).expect("at_rest").full_length
            && b.window(WindowName::AtRest).expect("at_rest").rounds >= 6
    );
    assert!(!b.window(WindowName::Disruption).expect("disruption").full_length);
    assert_windows_tile_the_run(out.path(), &b);
    assert!(events(out.path()).iter().any(|e| e["kind"] == "disruption_failed"));
}

/// The wall clock steps back an hour right after the SIGKILL (an NTP step).
struct SteppingClock {
    stepped: Arc<AtomicBool>,
}

impl Clock for SteppingClock {
    fn now(&self) -> DateTime<Utc> {
        let back = if self.stepped.load(Ordering::SeqCst) {
            chrono::Duration::hours(1)
        } else {
            chrono::Duration::zero()
        };
        Utc::now() - back
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wall_clock_step_changes_no_duration() {
    let stepped = Arc::new(AtomicBool::new(false));
    let clock: Arc<dyn Clock> = Arc::new(SteppingClock { stepped: stepped.clone() });
    let during = move |dir: std::path::PathBuf| {
        tokio::spawn(async move {
            wait_event(&dir, "sigkill_sent").await;
            stepped.store(true, Ordering::SeqCst);
        })
    };
    let (r, out) =
        sit_with(Sit::default(), LocalOptions::default(), clock, std::future::pending(), during)
            .await;
    let b = r.unwrap_or_else(|e| panic!("trial: {e}"));
    let d = b.disruption.as_ref().expect("disruption");
    // The step is in the wall-clock fields...
    assert!(d.healthy_at.expect("healthy") < d.requested_at, "the clock did step back");
    // ...and in no duration.
    let loss = d.loss_to_healthy_s.expect("loss_to_healthy_s");
    assert!((0.0..30.0).contains(&loss), "loss_to_healthy_s {loss}");
    assert!((0.0..30.0).contains(&d.request_to_healthy_s.expect("request_to_healthy_s")));
    for w in &b.windows {
        assert!((0.0..40.0).contains(&w.duration_s), "window {} lasted {} s", w.name, w.duration_s);
    }
    // The recovery's steps, all there and in their order, timed by the monotonic clock.
    let steps: Vec<&str> = d.waterfall.iter().map(|s| s.step.as_str()).collect();
    let at = |step: &str| {
        steps.iter().position(|s| *s == step).unwrap_or_else(|| panic!("no step {step}: {steps:?}"))
    };
    let order = [
        "requested",
        "sigkill_sent",
        "exited",
        "restarted",
        "member_back (measured)",
        "healthy_list (measured)",
    ]
    .map(at);
    assert!(order.windows(2).all(|p| p[0] < p[1]), "steps out of order: {steps:?}");
    assert!(
        d.waterfall.windows(2).all(|p| p[0].since_request_s <= p[1].since_request_s),
        "{:?}",
        d.waterfall
    );
    assert!(
        d.waterfall.iter().all(|s| (0.0..30.0).contains(&s.since_request_s)),
        "{:?}",
        d.waterfall
    );
    assert!(
        d.ground_truth.iter().all(|g| g.measured_minus_truth_s.is_none_or(|x| x.abs() < 10.0)),
        "{:?}",
        d.ground_truth
    );
    assert_windows_tile_the_run(out.path(), &b);
    // The cause is found by the monotonic clock, so the step does not hide it.
    assert_causes_and_health(out.path(), &b, "sigkill_sent");
}
