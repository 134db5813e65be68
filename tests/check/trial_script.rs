//! A whole trial with no etcd and no network: scripted rounds (src/io/round.rs's
//! `Rounds`) and a scripted disruptor drive `drive::run_trial_with` under tokio's paused
//! time, so phases, cuts, signals, recovery and the baseline are checked in milliseconds.
//! The script: three members, m0 leads at term 2; the disruptor "kills" m0; the two
//! others have no leader for 1 s, then m1 leads at term 3; m0 is back, restarted, 3 s
//! after the kill. The real-etcd tests (tests/etcd) stay the end-to-end check.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use leaderwatch::analysis::cadence::Pages;
use leaderwatch::analysis::recovery::Target;
use leaderwatch::io::disrupt::{Disruptor, Reporter};
use leaderwatch::io::probe::ProbeConfig;
use leaderwatch::io::round::Rounds;
use leaderwatch::model::baseline::{
    Baseline, Completion, DisruptionMethod, Environment, EnvironmentKind, LocalMethod, WindowName,
};
use leaderwatch::model::clock::{Clock, Stamp};
use leaderwatch::model::event::EventKind;
use leaderwatch::model::member::{Member, MemberName};
use leaderwatch::model::metrics::MemberMetrics;
use leaderwatch::model::observation::{Health, Observation, Part, Round, Status};
use leaderwatch::ops::drive::{self, TrialConfig};

/// The wall clock moves with tokio's paused clock, from a fixed instant.
struct PausedClock {
    utc: DateTime<Utc>,
    mono: Instant,
}

impl Clock for PausedClock {
    fn now(&self) -> DateTime<Utc> {
        self.utc + (Instant::now() - self.mono)
    }
}

/// When the leader was killed; the script's rounds and the signal follow it.
type Killed = Arc<Mutex<Option<Instant>>>;

fn killed_since(k: &Killed) -> Option<Duration> {
    k.lock().ok().and_then(|g| *g).map(|t| Instant::now() - t)
}

/// Members m0, m1, m2 with ids 1, 2, 3; what each answers follows the script.
struct Script {
    killed: Killed,
    /// How long m0 stays down after the kill.
    down: Duration,
    index: u64,
    with_metrics: bool,
    clock: Arc<dyn Clock>,
}

const DOWN: Duration = Duration::from_secs(3);
const LEADERLESS: Duration = Duration::from_secs(1);

impl Script {
    fn observe(&self, i: u64, at: Stamp) -> Observation {
        let name = MemberName(format!("m{i}"));
        let since = killed_since(&self.killed);
        let ms = 5.0;
        if i == 0 && since.is_some_and(|d| d < self.down) {
            let error = "connection refused".to_owned();
            return Observation::new(
                name,
                endpoint(i),
                at,
                Part::Failed { error: error.clone(), ms },
                Part::Failed { error: error.clone(), ms },
                Part::Failed { error, ms },
            );
        }
        // (leader id, term, leader changes this member has seen, its start time)
        let (leader, term, seen, start) = match since {
            None => (1, 2, 1.0, 100.0),
            Some(d) if d < LEADERLESS => (0, 2, 1.0, 100.0),
            Some(_) if i == 0 => (2, 3, 1.0, 200.0), // restarted: sees the new leader once
            Some(_) => (2, 3, 2.0, 100.0),
        };
        let metrics = MemberMetrics {
            leader_changes_seen_total: Some(seen),
            has_leader: Some(leader != 0),
            is_leader: Some(leader == i + 1),
            process_start_time: Some(start),
            ..MemberMetrics::default()
        };
        let health = if leader == 0 {
            Health { healthy: false, reason: "RAFT NO LEADER".to_owned() }
        } else {
            Health { healthy: true, reason: String::new() }
        };
        let mut status = Status::of(i + 1, leader, term);
        status.raft_applied_index = 10;
        status.version = "3.6.14".to_owned();
        let metrics =
            if self.with_metrics { Part::Ok { value: metrics, ms } } else { Part::Skipped };
        Observation::new(
            name,
            endpoint(i),
            at,
            metrics,
            Part::Ok { value: health, ms },
            Part::Ok { value: status, ms },
        )
    }
}

fn endpoint(i: u64) -> String {
    format!("http://127.0.0.1:{}", 2379 + i)
}

impl Rounds for Script {
    async fn round_within(&mut self, _wait: Option<Duration>) -> Round {
        let started = self.clock.stamp();
        tokio::time::sleep(Duration::from_millis(5)).await; // the probes' time
        let observations = (0..3).map(|i| self.observe(i, started)).collect();
        self.index += 1;
        Round { index: self.index - 1, started, observations, silent: vec![] }
    }

    fn set_pages(&mut self, pages: Pages) {
        // The script has no Status memory: "on change" reads no page, as a quiet member's.
        self.with_metrics = pages == Pages::Every;
    }

    fn next_index(&self) -> u64 {
        self.index
    }

    fn repoint(
        &mut self,
        _member: &Member,
        _cfg: &ProbeConfig,
    ) -> Result<(), leaderwatch::io::round::SetupError> {
        Ok(())
    }

    fn abort(&mut self) {}
}

/// "Kills" its target (the script takes it from there) and "restarts" it after [`DOWN`].
struct Kill {
    killed: Killed,
}

impl Disruptor for Kill {
    fn method(&self) -> DisruptionMethod {
        DisruptionMethod::local(LocalMethod::Sigkill)
    }

    async fn disrupt(
        self,
        member: MemberName,
        report: Reporter,
    ) -> Result<(), leaderwatch::io::disrupt::DisruptError> {
        report.event(&member, EventKind::SigkillSent, "scripted");
        if let Ok(mut k) = self.killed.lock() {
            *k = Some(Instant::now());
        }
        tokio::time::sleep(DOWN).await;
        report.event(&member, EventKind::Restarted, "scripted");
        Ok(())
    }
}

fn config(out: &std::path::Path) -> TrialConfig {
    TrialConfig {
        members: (0..3)
            .map(|i| Member { name: MemberName(format!("m{i}")), url: endpoint(i) })
            .collect(),
        idle: Duration::from_secs(30),
        settle: Duration::from_secs(20),
        interval: Duration::from_secs(1),
        fast_interval: Duration::from_millis(100),
        target: Target::Leader,
        probe: ProbeConfig::default(),
        out: out.to_owned(),
        recovery_timeout: Duration::from_secs(60),
        environment: Environment {
            kind: EnvironmentKind::Local,
            description: "scripted rounds, etcd {etcd}".to_owned(),
            ..Environment::default()
        },
        cause_horizon: Duration::from_secs(30),
        canary: None,
        lock: None,
        metrics_addr: None,
        follow_pod_ips: false,
    }
}

fn script(killed: &Killed, clock: &Arc<dyn Clock>) -> Script {
    Script {
        killed: killed.clone(),
        down: DOWN,
        index: 0,
        with_metrics: true,
        clock: clock.clone(),
    }
}

fn clock() -> Arc<dyn Clock> {
    let utc = DateTime::parse_from_rfc3339("2026-12-02T12:00:00Z").map(|t| t.to_utc());
    Arc::new(PausedClock { utc: utc.expect("fixed instant"), mono: Instant::now() })
}

fn read_baseline(dir: &std::path::Path) -> Baseline {
    let text = std::fs::read(dir.join("baseline.json")).expect("baseline.json written");
    serde_json::from_slice(&text).expect("baseline.json parses")
}

#[tokio::test(start_paused = true)]
async fn a_scripted_leader_loss_gives_three_windows_one_election_and_its_recovery() {
    let dir = tempfile::tempdir().expect("tempdir");
    let killed: Killed = Arc::default();
    let clock = clock();
    let b = drive::run_trial_with(
        config(dir.path()),
        Kill { killed: killed.clone() },
        script(&killed, &clock),
        clock,
        None,
        std::future::pending(),
    )
    .await
    .expect("the trial completes");

    assert_eq!(b.status, Completion::Complete);
    let names: Vec<WindowName> = b.windows.iter().map(|w| w.name).collect();
    assert_eq!(names, [WindowName::AtRest, WindowName::Disruption, WindowName::Settle]);
    let [rest, disruption, settle] = &b.windows[..] else { panic!("three windows") };
    assert!(rest.duration_s >= 30.0, "at_rest spans --idle: {}", rest.duration_s);
    assert!(settle.duration_s >= 20.0, "settle spans --settle: {}", settle.duration_s);
    assert_eq!(rest.elections, Some(0));
    assert_eq!(disruption.elections, Some(1), "one election, term 2 -> 3");
    assert_eq!(settle.elections, Some(0));

    let d = b.disruption.expect("the disruption record");
    assert_eq!((d.target.as_str(), d.target_was_leader), ("m0", true));
    // Lost at the first round after the kill, healthy once m0 answers again (3 s): the
    // figures are the script's, to within one fast round (100 ms).
    let loss_to_healthy = d.loss_to_healthy_s.expect("recovered");
    assert!((2.8..=3.2).contains(&loss_to_healthy), "loss to healthy {loss_to_healthy}");
    let elected = d.leader_elected_at.expect("a leader was elected");
    let lost = d.member_lost_at.expect("the loss was seen");
    let leaderless = (elected - lost).num_milliseconds();
    assert!((900..=1200).contains(&leaderless), "leaderless {leaderless} ms");
    let steps: Vec<&str> = d.waterfall.iter().map(|s| s.step.as_str()).collect();
    for want in ["requested", "sigkill_sent", "member_lost (measured)", "restarted"] {
        assert!(steps.contains(&want), "waterfall {steps:?} lacks {want}");
    }
    assert_eq!(b.environment.description, "scripted rounds, etcd 3.6.14");

    let events = std::fs::read_to_string(dir.path().join("events.csv")).expect("events.csv");
    assert_eq!(events.lines().filter(|l| l.contains(",election,")).count(), 1, "{events}");
    assert!(events.contains("sitting_ended,complete"), "{events}");
}

#[tokio::test(start_paused = true)]
async fn a_signal_during_the_recovery_writes_an_incomplete_baseline_with_what_was_measured() {
    let dir = tempfile::tempdir().expect("tempdir");
    let killed: Killed = Arc::default();
    let clock = clock();
    // The signal comes 2 s after the kill: the leader is elected, m0 not yet back.
    let k = killed.clone();
    let signal = async move {
        while killed_since(&k).is_none_or(|d| d < Duration::from_secs(2)) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let err = drive::run_trial_with(
        config(dir.path()),
        Kill { killed: killed.clone() },
        script(&killed, &clock),
        clock,
        None,
        signal,
    )
    .await
    .expect_err("a signal cuts the trial short");

    assert!(
        matches!(&err, leaderwatch::Error::Incomplete(m) if m.contains("interrupted by a signal during the disruption")),
        "{err}"
    );
    let b = read_baseline(dir.path());
    assert_eq!(b.status, Completion::Incomplete);
    let d = b.disruption.expect("the disruption record is kept");
    assert!(d.member_lost_at.is_some() && d.leader_elected_at.is_some(), "{d:?}");
    assert_eq!(d.healthy_at, None, "never healthy before the signal");
    let names: Vec<WindowName> = b.windows.iter().map(|w| w.name).collect();
    assert_eq!(names, [WindowName::AtRest, WindowName::Disruption]);
}

#[tokio::test(start_paused = true)]
async fn a_member_that_never_comes_back_ends_the_trial_at_the_recovery_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let killed: Killed = Arc::default();
    let clock = clock();
    let mut cfg = config(dir.path());
    cfg.recovery_timeout = Duration::from_secs(10);
    let never = Script { down: Duration::from_secs(24 * 3600), ..script(&killed, &clock) };
    let err = drive::run_trial_with(
        cfg,
        Kill { killed: killed.clone() },
        never,
        clock,
        None,
        std::future::pending(),
    )
    .await
    .expect_err("no recovery");

    assert!(
        matches!(&err, leaderwatch::Error::Incomplete(m) if m.contains("no healthy 3-member endpoint list within 10s")),
        "{err}"
    );
    let b = read_baseline(dir.path());
    assert_eq!(b.status, Completion::Incomplete);
    let d = b.disruption.expect("the disruption record is kept");
    assert!(d.member_lost_at.is_some() && d.member_back_at.is_none(), "{d:?}");
    assert_eq!(b.windows.last().map(|w| w.name), Some(WindowName::Disruption));
    assert_eq!(b.windows.last().and_then(|w| w.elections), Some(1));
}
