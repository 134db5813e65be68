//! The sitting day's early deaths and silent waits (issue 61, points 3 and 4), each on the
//! real cluster: a binary for another CPU in an image labelled for this one, a volume the
//! kubelet cannot mount (and, in sitting_day/arch.rs, a scale-up said to come that then
//! failed). Each ends the sitting with one line naming the cause in the cluster's own
//! words, nothing fetched, the Job deleted; the waits end within a minute of the cause, not
//! at the Job's deadline.

use super::{Day, fetch_pods_created};
use crate::in_cluster::{JOB_NS, job_pods, manifest_image, pinned_image, pod_events};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The test image with its binary's ELF header saying aarch64 ([`aarch64_header`]), still
/// labelled amd64: what a build that mixed architectures leaves (an arm64 laptop's binary
/// in an amd64 image). A node runs it and the kernel refuses the binary ("exec format
/// error"). lw-lab's `--image` for it, and the reference that pins it.
pub(super) fn wrong_arch_image(dir: &Path) -> (String, String) {
    let env = crate::support::image_env();
    let arm = aarch64_header(dir);
    let layout = dir.join("wrong-arch.oci");
    let tag = &env["IMAGE_TAG"];
    let run = |c: &mut Command| {
        let o = c.output().expect("run");
        assert!(o.status.success(), "{c:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    run(Command::new("cp").arg("-a").arg(&env["IMAGE_LAYOUT"]).arg(&layout));
    let image = format!("{}:{tag}", layout.display());
    run(Command::new("umoci")
        .args(["insert", "--image", &image])
        .arg(&arm)
        .arg("/usr/local/bin/leaderwatch"));
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).expect("index"))
            .expect("index.json");
    let digest = index["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag.as_str())
        .and_then(|m| m["digest"].as_str())
        .expect("the tag's manifest")
        .to_owned();
    let job = manifest_image("deploy/k8s/leaderwatch/job-measure.yaml");
    let reference = format!("{}-wrong-arch", job.rsplit_once(':').expect("a tag").0);
    (format!("{reference}:{tag}={image}"), format!("{reference}@{digest}"))
}

/// The test image's binary with the ELF header's machine field set to aarch64 (0xb7): what
/// the kernel reads to refuse a binary for another CPU, and what build.sh labels an image
/// by. (A real arm64 build, cross-compiled, is make test-cross's, beside the lab: building
/// it before the lab would cost a fresh clone three minutes.)
pub(super) fn aarch64_header(dir: &Path) -> PathBuf {
    let env = crate::support::image_env();
    let layout = Path::new(&env["IMAGE_LAYOUT"]);
    let mut bytes = std::fs::read(layout.parent().expect("image dir").join("leaderwatch"))
        .expect("the test image's binary");
    assert_eq!(&bytes[18..20], &[0x3e, 0x00], "an x86-64 ELF");
    bytes[18..20].copy_from_slice(&[0xb7, 0x00]);
    let out = dir.join("leaderwatch-aarch64-header");
    std::fs::write(&out, bytes).expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    out
}

/// The kubelet starts the container, the kernel refuses its binary: the sitting names the
/// other architecture in one line with the exit code, fetches nothing (the fetch pod would
/// run the same binary) and deletes the Job.
pub(super) fn a_binary_for_another_cpu_is_named_in_one_line(day: &Day, image: &str) {
    let before = fetch_pods_created(day.lab);
    let (code, err) = day.start(image, &[]).finish();
    eprintln!("sitting, a binary for another CPU:\n{err}");
    assert_eq!(code, Some(8), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("another CPU architecture")
            && last.contains("deleted Job leaderwatch/leaderwatch-measure"),
        "{last}"
    );
    assert!(err.contains("exec format error"), "the cluster's words are shown: {err}");
    assert_eq!(fetch_pods_created(day.lab), before, "no fetch tried");
    day.no_job_left();
}

/// The admin's PersistentVolume pre-bound to the sitting's claim, on a node where its
/// directory does not exist: the pod is scheduled there and the kubelet's mount fails
/// (FailedMount) on every try. The sitting ends within a minute of the first failure with
/// the kubelet's words, instead of waiting out the Job's deadline.
pub(super) fn a_volume_that_cannot_mount_ends_within_a_minute(day: &Day) {
    const PV: &str = "lw-test-no-dir";
    let lab = day.lab;
    let no_claim = || {
        lab.ok(&[
            "-n",
            JOB_NS,
            "delete",
            "pvc",
            "leaderwatch-data",
            "--ignore-not-found",
            "--wait=true",
        ])
    };
    no_claim();
    let nodes = lab.json(&["get", "nodes", "-o", "json"]);
    let node = nodes["items"][0]["metadata"]["name"].as_str().expect("a node").to_owned();
    let pv = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": PV},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "standard-rwo",
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": JOB_NS, "name": "leaderwatch-data"},
            "local": {"path": "/lw-test-no-such-directory"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
            ]}]}},
        },
    });
    let file = day.dir.join("pv-no-dir.json");
    std::fs::write(&file, pv.to_string()).expect("pv");
    lab.ok(&["apply", "-f", file.to_str().expect("utf8")]);

    let mut r = day.start(&pinned_image(), &[]);
    let first = wait_for_event(day, &mut r, "FailedMount", Duration::from_secs(180));
    let (code, err) = r.finish();
    let took = first.elapsed();
    no_claim();
    lab.ok(&["delete", "pv", PV, "--ignore-not-found"]);
    eprintln!("sitting, a volume that cannot mount:\n{err}");
    assert_eq!(code, Some(8), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("FailedMount")
            && last.contains("lw-test-no-such-directory")
            && last.contains("deleted Job leaderwatch/leaderwatch-measure"),
        "{last}"
    );
    // The grace is 60 s from the sitting's first sight of it; 40 s more for the polls.
    assert!(took < Duration::from_secs(100), "{took:?} after the first FailedMount");
    day.no_job_left();
}

/// An event about the Job's pod as the cluster autoscaler posts one.
pub(super) fn autoscaler_event(day: &Day, pod: &Value, reason: &str, kind: &str, message: &str) {
    let name = pod["metadata"]["name"].as_str().expect("name");
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{name}.lw-test-{}", reason.to_lowercase()), "namespace": JOB_NS},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": JOB_NS,
                           "uid": pod["metadata"]["uid"]},
        "reason": reason, "message": message, "type": kind,
        "source": {"component": "cluster-autoscaler"},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    });
    let file = day.dir.join(format!("event-{reason}.json"));
    std::fs::write(&file, event.to_string()).expect("event");
    day.lab.ok(&["create", "-f", file.to_str().expect("utf8")]);
}

/// Waits for an event `reason` about the Job's pod; when the test first saw it.
fn wait_for_event(day: &Day, r: &mut super::Running, reason: &str, within: Duration) -> Instant {
    let began = Instant::now();
    loop {
        let seen = job_pods(day.lab)
            .first()
            .and_then(|p| p["metadata"]["name"].as_str().map(str::to_owned))
            .is_some_and(|pod| pod_events(day.lab, JOB_NS, &pod).iter().any(|(r, _)| r == reason));
        if seen {
            return Instant::now();
        }
        if r.child.try_wait().ok().flatten().is_some() || began.elapsed() > within {
            panic!("no {reason} event seen:\n{}", r.stderr());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
