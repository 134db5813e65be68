//! Faults injected below etcd on the real nodes (`lw-lab fault`: blackhole routes in the
//! pods' network namespaces, the cgroup freezer, a slow fsync under a volume, a lowered CFS
//! quota, a lost node) while `leaderwatch sample` watches, told nothing. Afterwards the fault log the harness kept (`faults.csv`, which leaderwatch never
//! reads) is held against the elections leaderwatch found and the causes it gave them.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::in_cluster::wait_until;
use crate::support::lab::Lab;
use crate::support::{events, leaderwatch, read_csv, spawn_tied, terminate};

/// How long after a fault is cleared an election may still be its: the cut-off member
/// rejoins, and leaderwatch writes an election row only once its cause is chosen.
const AFTER_CLEAR: Duration = Duration::from_secs(10);

/// One fault as the harness logged it: injected at, cleared at, what, on whom.
#[derive(Debug)]
struct Injected {
    fault: String,
    member: String,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
}

fn ts(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap_or_else(|e| panic!("{s}: {e}")).with_timezone(&Utc)
}

/// faults.csv's inject and clear rows paired up.
fn injected(lab_dir: &Path) -> Vec<Injected> {
    let rows = read_csv(&lab_dir.join("faults.csv"));
    let mut out: Vec<Injected> = Vec::new();
    for r in &rows {
        match r["act"].as_str() {
            "inject" => out.push(Injected {
                fault: r["fault"].clone(),
                member: r["member"].clone(),
                from: ts(&r["ts"]),
                to: DateTime::<Utc>::MAX_UTC,
            }),
            "clear" => {
                let open = out
                    .iter_mut()
                    .rev()
                    .find(|f| f.fault == r["fault"] && f.to == DateTime::<Utc>::MAX_UTC);
                open.unwrap_or_else(|| panic!("a clear with no inject: {r:?}")).to = ts(&r["ts"]);
            }
            other => panic!("faults.csv act {other:?}"),
        }
    }
    out
}

/// The causes leaderwatch may give an election that a fault caused, and the row kinds a
/// cause must rest on. A leader cut off one way only (its own sends dropped) often learns
/// the new leader from its peers and never says "no leader": with nothing to show the cut,
/// `unexplained` is the honest answer (docs/counting.md), never a wrong cause.
fn expected(fault: &str) -> (&'static [&'static str], &'static [&'static str]) {
    match fault {
        // The cut leader's "no leader": from its `/health`, or from its Status (leader 0).
        "partition" => (&["network"], &["health_false", "leader_changed", "peer_down"]),
        "partition-one-way" => {
            (&["network", "unexplained"], &["health_false", "leader_changed", "peer_down"])
        }
        // A lost node's member is as silent to leaderwatch as to its peers.
        "freeze" | "node-loss" => (&["unreachable"], &["unreachable", "unresponsive"]),
        // `cpu|disk` names both where the rows cannot tell them apart: ambiguous, not
        // wrong (a slow step that began long before the election, the leader slow since).
        f if f.starts_with("disk-fsync-") => (&["disk", "cpu|disk"], &["slow_disk"]),
        // A leader starved so hard that it answers nothing at all until the fault ends
        // gives no slow answer to read: `unreachable` is then the honest reading
        // (counting.md's limits; 2 of 5 make test runs on a busy 2-core machine,
        // 2026-12-07; the committed quiet runs read 5 of 5 `cpu`). `cpu|disk`: a
        // `slow_disk` row from a step that began before the fault (make test, 2026-12-08:
        // read `disk` before that answer existed).
        f if f.starts_with("cpu-") => (
            &["cpu", "unreachable", "cpu|disk"],
            &["slow_answers", "unreachable", "unresponsive", "slow_disk"],
        ),
        other => panic!("no expectation for fault {other}"),
    }
}

/// `leaderwatch sample` of the lab's members by pod address, told nothing of the faults.
fn sample(lab: &Lab, run: &Path, extra: &[&str]) -> std::process::Child {
    let mut cmd = leaderwatch();
    cmd.args(["sample", "--interval", "100ms", "--metrics-interval", "1s", "--out"]).arg(run);
    cmd.args(extra);
    for p in lab.member_pods() {
        let (name, ip) = (
            p["metadata"]["name"].as_str().expect("name"),
            p["status"]["podIP"].as_str().expect("ip"),
        );
        cmd.arg("--endpoint").arg(format!("{name}=http://{ip}:2379"));
    }
    spawn_tied(&mut cmd, "leaderwatch sample")
}

/// Holds every election of `run` against the faults the harness logged since `since`
/// (the cluster's earlier faults belong to an earlier run): each lies in the span of a
/// fault (up to [`AFTER_CLEAR`] after it), has that fault's cause, rests on a row of the
/// fault's evidence and names the faulted member as the old leader. Returns the faults'
/// names and how many elections each caused.
fn judge(lab: &Lab, run: &Path, since: DateTime<Utc>) -> (Vec<String>, Vec<usize>) {
    let faults: Vec<Injected> =
        injected(&lab.dir).into_iter().filter(|f| f.from >= since).collect();
    let rows = events(run);
    let elections: Vec<&HashMap<String, String>> =
        rows.iter().filter(|e| e["kind"] == "election").collect();
    let after = chrono::Duration::from_std(AFTER_CLEAR).expect("duration");
    let mut per_fault = vec![0; faults.len()];
    for e in &elections {
        let at = ts(&e["ts"]);
        let (i, f) = faults
            .iter()
            .enumerate()
            .find(|(_, f)| f.from <= at && at <= f.to + after)
            .unwrap_or_else(|| {
                panic!("an election outside every fault: {e:#?}\nfaults: {faults:#?}")
            });
        per_fault[i] += 1;
        let (causes, kinds) = expected(&f.fault);
        let cause = e["cause"].as_str();
        assert!(
            causes.contains(&cause),
            "{} on {}: {cause}, not {causes:?}: {e:#?}",
            f.fault,
            f.member
        );
        assert_eq!(e["member"], f.member, "the old leader is the faulted member: {e:#?}");
        if cause == "unexplained" {
            println!("{} on {}: election {} -> unexplained", f.fault, f.member, e["ts"]);
            continue;
        }
        let row = rows
            .iter()
            .find(|r| r["ts"] == e["cause_ts"] && kinds.contains(&r["kind"].as_str()))
            .unwrap_or_else(|| panic!("{}: no {kinds:?} row at cause_ts: {e:#?}", f.fault));
        println!(
            "{} on {}: election {} -> {cause} ({} on {}: {})",
            f.fault, f.member, e["ts"], row["kind"], row["member"], row["detail"]
        );
    }
    (faults.into_iter().map(|f| f.fault).collect(), per_fault)
}

/// Injects `args`, keeps it `hold`, clears it, lets the cluster settle `quiet`.
async fn inject(lab: &Lab, args: &[&str], hold: Duration, quiet: Duration) {
    println!("{}", lab.fault(args).trim());
    tokio::time::sleep(hold).await;
    println!("{}", lab.fault(&["clear"]).trim());
    tokio::time::sleep(quiet).await;
}

/// Every fault below etcd on one cluster (every volume on lw-slowfs, as the committed
/// fault runs have it; one bring-up instead of two keeps `make test` in its budget), in
/// two runs of `sample`, each told nothing: the slow disk and the starved CPU under the
/// write canary, then the network, the freeze and the lost node (last: the cluster is
/// left with a member made anew).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and make kube-tools; make test runs it"]
async fn each_fault_below_etcd_is_each_election_s_cause() {
    let toleration = format!("--default-unreachable-toleration-seconds={TOLERATION_S}");
    let (lab, _kc, out) = Lab::deployed_with(&[&toleration], &["--disk-faults"]);
    a_slow_disk_and_a_starved_cpu(&lab, &out.path().join("disk")).await;
    the_network_a_freeze_and_a_lost_node(&lab, &out.path().join("net")).await;
}

/// A slow disk under the leader (every fsync DISK_DELAY late, lw-slowfs) and its CPU
/// starved (CPU_PERCENT of a core), one after the other under one `sample` with the write
/// canary (the write load that makes etcd fsync): each causes elections, each election
/// has that fault's cause (`disk` on a `slow_disk` row, `cpu` on a `slow_answers` row, or
/// `unreachable` for a leader starved into silence; never `disk`), and a slow disk under a
/// follower causes none.
async fn a_slow_disk_and_a_starved_cpu(lab: &Lab, run: &Path) {
    let since = Utc::now();
    let mut sample = sample(lab, run, &["--canary"]);
    // A moment the analysis is not told: it is told nothing at all.
    tokio::time::sleep(Duration::from_secs(5 + u64::from(std::process::id() % 4))).await;
    let quiet = Duration::from_secs(20);
    let disk = ["disk", "--pod", "leader", "--fsync", DISK_DELAY];
    inject(lab, &disk, Duration::from_secs(15), quiet).await;
    let follower = ["disk", "--pod", "follower", "--fsync", DISK_DELAY];
    inject(lab, &follower, Duration::from_secs(15), quiet).await;
    // A starved leader loses its leadership once its backlog outgrows the election
    // timeout, seconds in (at 1 % of a core, 2026-12-06: within 7 s in CI, not in three
    // holds of 15 s here): up to three tries of 20 s at 0.5 %, until the raft term rises.
    let cpu = ["cpu", "--pod", "leader", "--percent", CPU_PERCENT];
    let mut tries = 0;
    while tries < 3 {
        tries += 1;
        let term = max_term(run);
        inject(lab, &cpu, Duration::from_secs(20), quiet).await;
        if max_term(run) > term {
            break;
        }
    }
    terminate(&mut sample);

    let (names, per_fault) = judge(lab, run, since);
    let disk_fault = format!("disk-fsync-{}", DISK_DELAY);
    let cpu_fault = format!("cpu-{CPU_PERCENT}pct");
    assert_eq!(names[..2], [disk_fault.as_str(), &disk_fault]);
    assert!(names[2..].iter().all(|n| *n == cpu_fault), "{names:?}");
    assert!(per_fault[0] >= 1, "the leader's slow disk caused no election");
    assert_eq!(per_fault[1], 0, "a follower's slow disk caused an election");
    let starved: usize = per_fault[2..].iter().sum();
    assert!(starved >= 1, "the leader's starved CPU caused no election in {tries} tries");
}

/// A leader cut from its peers both ways and one way, a follower cut, a frozen leader and
/// the leader's node lost, one after the other under one `sample`: every election the raft
/// term shows lies in the span of a fault that replaces a leader, has that fault's cause,
/// rests on a row of the fault's evidence and names the faulted member as the old leader;
/// the follower's cut and the quiet time between faults hold no election at all. The lost
/// node is also held against what the control plane did ([`lose_the_leaders_node`]).
async fn the_network_a_freeze_and_a_lost_node(lab: &Lab, run: &Path) {
    let since = Utc::now();
    let mut sample = sample(lab, run, &[]);
    tokio::time::sleep(Duration::from_secs(5 + u64::from(std::process::id() % 4))).await;
    let (hold, quiet) = (Duration::from_secs(12), Duration::from_secs(20));
    inject(lab, &["partition", "--pod", "leader"], hold, quiet).await;
    inject(lab, &["partition", "--pod", "leader", "--one-way"], hold, quiet).await;
    inject(lab, &["partition", "--pod", "follower"], hold, quiet).await;
    inject(lab, &["freeze", "--pod", "leader"], Duration::from_secs(4), quiet).await;
    lose_the_leaders_node(lab).await;
    terminate(&mut sample);

    let (names, per_fault) = judge(lab, run, since);
    let elections: Vec<_> = events(run).into_iter().filter(|e| e["kind"] == "election").collect();
    // In the order injected: CheckQuorum makes a leader that hears no peer step down and
    // the others elect; PreVote keeps a follower that was cut off from disturbing the two
    // that still have a leader.
    assert_eq!(names, ["partition", "partition-one-way", "partition", "freeze", "node-loss"]);
    assert!(per_fault[0] >= 1, "the leader cut off both ways caused no election");
    assert!(per_fault[1] >= 1, "the leader cut off one way caused no election");
    assert_eq!(per_fault[2], 0, "a follower cut off caused an election: {elections:#?}");
    assert!(per_fault[3] >= 1, "the frozen leader caused no election");
    assert!(per_fault[4] >= 1, "the lost node's leader caused no election");
}

/// The highest raft term in the run's samples.csv so far.
fn max_term(run: &Path) -> u64 {
    read_csv(&run.join("samples.csv"))
        .iter()
        .filter_map(|r| r["raft_term"].parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

/// Slow enough that the leader's loop, waiting on each fsync, misses the followers'
/// election timeout (1 s): docs/results.md has the sweep.
const DISK_DELAY: &str = "2000ms";
/// Low enough that the leader's heartbeats come late (at 5 % they fail but no election;
/// at 1 % not always within 15 s): 1 ms of CPU every 200 ms.
const CPU_PERCENT: &str = "0.5";

/// How long the test cluster's pods tolerate an unreachable node (the API server's
/// `--default-unreachable-toleration-seconds`): 300 s by default, as on GKE; lowered here to
/// keep the test short (`make fault-runs MODE=node` measures the default).
const TOLERATION_S: u64 = 30;

/// The leader's node lost (`lw-lab fault node-loss`: kubelet and containerd stopped, its
/// pods frozen, its link down), held until the node controller's taint has deleted the
/// member's pod, then brought back, with the control plane's view checked at each step:
/// the node NotReady only after the node controller's grace period; the PDB then allowing
/// no disruption, and the pod deleted anyway once its toleration ran out (node failure
/// ignores the PDB, as the spec says); no replacement while the node is gone (the pod
/// stays Terminating: nobody can confirm its containers stopped); once the node is back,
/// the member made anew and Ready.
async fn lose_the_leaders_node(lab: &Lab) {
    println!("{}", lab.fault(&["node-loss", "--node", "leader"]).trim());
    let lost = Instant::now();
    let row = read_csv(&lab.dir.join("faults.csv")).pop().expect("faults.csv's inject row");
    let (name, node) = (row["member"].clone(), row["node"].clone());
    let pod = |lab: &Lab| lab.json(&["-n", "dlock", "get", "pod", &name, "-o", "json"]);
    let uid = pod(lab)["metadata"]["uid"].as_str().expect("uid").to_owned();
    let node_ready = |lab: &Lab| {
        let n = lab.json(&["get", "node", &node, "-o", "json"]);
        let conds = n["status"]["conditions"].as_array().cloned().unwrap_or_default();
        conds.iter().find(|c| c["type"] == "Ready").map(|c| c["status"] == "True")
    };
    let pdb_allowed = |lab: &Lab| {
        lab.json(&["-n", "dlock", "get", "pdb", "dlock-etcd-pdb", "-o", "json"])["status"]
            ["disruptionsAllowed"]
            .as_i64()
    };
    wait_until(&format!("{node} NotReady"), Duration::from_secs(240), || {
        node_ready(lab) == Some(false)
    });
    let not_ready = Instant::now();
    // The kubelet renews its lease every 10 s, so the last renewal may lie 10 s before the
    // loss; the grace period is 50 s (Kubernetes v1.35's default).
    let since_loss = not_ready - lost;
    assert!(since_loss >= Duration::from_secs(30), "{node} NotReady after {since_loss:?}");
    println!("{node} NotReady {:.0} s after it was lost", since_loss.as_secs_f64());
    wait_until(&format!("{name} deleted"), Duration::from_secs(TOLERATION_S + 180), || {
        pod(lab)["metadata"]["deletionTimestamp"].is_string()
    });
    let deleting = Instant::now();
    // The PDB allowed no disruption then (two healthy of two desired), and it was deleted.
    assert_eq!(pdb_allowed(lab), Some(0), "the PDB allows a disruption with {name} lost");
    // The taint goes on when the node controller marks the node; the deletion waits for
    // the toleration from then (our NotReady is seen up to a poll later than the taint).
    let waited = deleting - not_ready;
    assert!(
        waited >= Duration::from_secs(TOLERATION_S * 2 / 3),
        "{name} deleted {waited:?} after {node} was NotReady, within its {TOLERATION_S} s toleration"
    );
    println!("{name} deleted by the taint {:.0} s after NotReady", waited.as_secs_f64());
    // Nobody can confirm its containers stopped: it stays, Terminating, and the StatefulSet
    // makes no second pod of that name.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let p = pod(lab);
    assert_eq!(p["metadata"]["uid"], uid.as_str(), "{name} replaced while {node} was gone");
    assert!(p["metadata"]["deletionTimestamp"].is_string());
    println!("{}", lab.fault(&["clear"]).trim());
    wait_until(&format!("{name} made anew and Ready"), Duration::from_secs(240), || {
        let pods = lab.member_pods();
        pods.len() == 3
            && pods.iter().all(|p| {
                let conds = p["status"]["conditions"].as_array().cloned().unwrap_or_default();
                p["metadata"]["deletionTimestamp"].is_null()
                    && conds.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
            && pods.iter().any(|p| {
                p["metadata"]["name"] == name.as_str() && p["metadata"]["uid"] != uid.as_str()
            })
    });
}
