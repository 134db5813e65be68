//! The live view (issue 61, point 8): `sitting --pod-monitoring` applies
//! podmonitoring-sitting.yaml beside the Job, Managed Service for Prometheus scrapes what it
//! selects (here Debian's prometheus, reading the stored PodMonitoring as the managed
//! collector does: the lab has no managed collection), and the clean-up removes it. On a
//! cluster without the resource the flag stops the sitting at its dry run, nothing applied.

use super::Day;
use crate::in_cluster::{
    JOB_NS, Prometheus, job_json, pinned_image, prometheus_config, wait_until, write_targets,
};
use crate::support::lab::repo;

use std::time::Duration;

use serde_yaml_ng::Value as Yaml;

/// The PodMonitoring's resource, its name and the flag that applies it.
const PM: &str = "podmonitoring/leaderwatch-sitting";

/// `image` is served by a registry this machine reaches: the Job asks for its
/// architecture (sitting_day/arch.rs), checked here on the running pod.
pub(super) fn the_live_view_shows_the_sitting_while_it_runs(day: &Day, image: &str) {
    let lab = day.lab;
    // Managed collection off (no such resource): said at the dry run, nothing applied.
    let (code, err) = day.start(&pinned_image(), &["--dry-run", "--pod-monitoring"]).finish();
    eprintln!("sitting --pod-monitoring, no PodMonitoring resource:\n{err}");
    assert_eq!(code, Some(8), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("--pod-monitoring: the cluster has no PodMonitoring resource")
            && last.contains("nothing applied"),
        "{last}"
    );
    assert!(job_json(lab).is_none(), "nothing applied");

    // The admin's part on GKE is managed collection; here, the resource's stand-in.
    let crd = repo().join("tests/fixtures/podmonitoring-crd.yaml");
    lab.ok(&["apply", "-f", crd.to_str().expect("utf8")]);
    wait_until("the PodMonitoring resource served", Duration::from_secs(60), || {
        lab.kubectl(&["-n", JOB_NS, "get", "podmonitorings"]).0
    });

    // A rolling restart's dry run: the operator's part of that method end to end (its
    // extra rights an admin's, applied for it and removed after).
    lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac-maintenance.yaml"]);
    let mut r = day.start(
        image,
        &["--dry-run", "--pod-monitoring", "--method", "rolling-restart", "--idle", "40s"],
    );
    day.wait_running(&mut r);
    let pod = crate::in_cluster::job_pods(lab).into_iter().next().expect("the Job's pod");
    assert_eq!(pod["spec"]["nodeSelector"]["kubernetes.io/arch"], "amd64", "the image's");
    let stored = lab.ok(&["-n", JOB_NS, "get", PM, "-o", "yaml"]);
    let pm: Yaml = serde_yaml_ng::from_str(&stored).expect("PodMonitoring yaml");
    let dir = day.dir.join("live-view");
    std::fs::create_dir_all(&dir).expect("dir");
    let targets = dir.join("targets.json");
    assert_eq!(write_targets(lab, &pm, &targets), 1, "it selects the sitting's one pod, one port");
    let rules = dir.join("rules.yml");
    std::fs::write(&rules, "groups: []\n").expect("rules");
    let mut prom = Prometheus::start(&dir, &prometheus_config(&pm, &targets, &rules));
    // The sitting's own view of the members, scraped while it runs: each member up.
    let series =
        "leaderwatch_member_up{job=\"leaderwatch-sitting\",namespace=\"leaderwatch\"} == 1";
    wait_until(
        "Prometheus scraped the sitting's leaderwatch_member_up",
        Duration::from_secs(90),
        || {
            prom.query(series).len() == 3
                || !prom.alive()
                || r.child.try_wait().ok().flatten().is_some()
        },
    );
    let seen = prom.query(series).len();
    let running = r.child.try_wait().ok().flatten().is_none();
    let (code, err) = r.finish();
    lab.ok(&["delete", "-f", "deploy/k8s/leaderwatch/rbac-maintenance.yaml"]);
    eprintln!("sitting --dry-run --pod-monitoring --method rolling-restart:\n{err}");
    assert_eq!(seen, 3, "each member up, as the sitting's pod sees it, scraped");
    assert!(running, "scraped while the sitting ran");
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("lab-follower-rolling-restart-dry-run-"), "the run fetched: {err}");
    assert!(
        err.contains("sitting: applied PodMonitoring leaderwatch/leaderwatch-sitting"),
        "{err}"
    );
    assert!(err.contains("the image is linux/amd64: the Job asks for amd64 nodes"), "{err}");
    assert!(
        err.contains("sitting: deleted PodMonitoring leaderwatch/leaderwatch-sitting"),
        "{err}"
    );
    let (found, _, _) = lab.kubectl(&["-n", JOB_NS, "get", PM]);
    assert!(!found, "the clean-up removed the PodMonitoring");
    day.no_job_left();
}
