//! The Job asks for the image's architecture (issue 61, point 7): the sitting reads the
//! image's platforms from its registry (here go-containerregistry's registry, `make
//! registry`, on this machine; images pushed into it by skopeo) and sets the Job's
//! `kubernetes.io/arch`. An arm64 image on the lab's amd64 nodes is then a pod no node takes,
//! waited for while a scale-up is said to come and ended with the scheduler's and the
//! autoscaler's words once it failed, instead of a binary the kernel refuses.
//! A registry this machine cannot reach (every other step's image) is said and sets none.

use super::Day;
use super::early::autoscaler_event;
use crate::in_cluster::{free_port, job_pods};
use crate::support::lab::repo;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::Value;

/// go-containerregistry's registry on a free port, killed when dropped.
pub(super) struct LocalRegistry {
    child: Child,
    pub port: u16,
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LocalRegistry {
    pub(super) fn start() -> LocalRegistry {
        let bin = repo().join(".tools/bin/lw-registry");
        assert!(bin.is_file(), "{}: missing: make registry builds it", bin.display());
        let port = free_port();
        let child = Command::new(&bin)
            .args(["-port", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("lw-registry");
        let reg = LocalRegistry { child, port };
        let began = Instant::now();
        while !Command::new("curl")
            .args(["-sf", "-m", "2", &format!("http://127.0.0.1:{port}/v2/")])
            .status()
            .is_ok_and(|s| s.success())
        {
            assert!(began.elapsed() < Duration::from_secs(30), "the registry did not answer");
            std::thread::sleep(Duration::from_millis(200));
        }
        reg
    }

    /// The OCI layout's `tag` pushed as `REPO:tag` (skopeo, plain HTTP to this machine);
    /// the reference that pins it, `127.0.0.1:PORT/REPO@sha256:...`.
    pub(super) fn push(&self, layout: &Path, tag: &str, repo_path: &str) -> String {
        let dest = format!("docker://127.0.0.1:{}/{repo_path}:{tag}", self.port);
        let o = Command::new("skopeo")
            .args(["copy", "--dest-tls-verify=false"])
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(&dest)
            .output()
            .expect("skopeo");
        assert!(o.status.success(), "skopeo copy {dest}: {}", String::from_utf8_lossy(&o.stderr));
        format!("127.0.0.1:{}/{repo_path}@{}", self.port, manifest_digest(layout, tag))
    }
}

fn manifest_digest(layout: &Path, tag: &str) -> String {
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).expect("index"))
            .expect("index.json");
    index["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
        .and_then(|m| m["digest"].as_str())
        .expect("the tag's manifest")
        .to_owned()
}

/// An arm64 image, assembled by build.sh (as `make image IMAGE_ARCH=arm64` does: arm64's
/// Debian packages, the label from the binary's ELF header), around the test binary whose
/// header says aarch64: its pod is never meant to run. Its layout and tag.
pub(super) fn arm64_image(dir: &Path) -> (PathBuf, String) {
    let bin = super::early::aarch64_header(dir);
    let out = dir.join("arm64-image");
    let o = Command::new(repo().join("deploy/image/build.sh"))
        .arg(&bin)
        .arg(&out)
        .env("IMAGE_ARCH", "arm64")
        .env("DEB_CACHE", repo().join(".tools/debs"))
        .output()
        .expect("build.sh");
    assert!(o.status.success(), "build.sh arm64: {}", String::from_utf8_lossy(&o.stderr));
    let env = std::fs::read_to_string(out.join("image.env")).expect("image.env");
    let tag = env.lines().find_map(|l| l.strip_prefix("IMAGE_TAG=")).expect("tag").to_owned();
    (out.join("oci"), tag)
}

/// An arm64 image: the sitting says so and the Job asks for arm64 nodes; none of the lab's
/// amd64 nodes takes its pod. The test then writes the events the cluster autoscaler would
/// (the lab has none): TriggeredScaleUp for an Arm node, and 50 s later FailedScaleUp.
/// While a node is said to be coming the sitting waits (past the 45 s it gives a pod no node
/// takes); once the scale-up has failed it ends within a minute with the scheduler's and the
/// autoscaler's words, the Job deleted.
pub(super) fn an_arm64_image_asks_for_arm64_nodes_until_the_scale_up_fails(day: &Day, arm64: &str) {
    let mut r = day.start(arm64, &["--dry-run"]);
    let began = Instant::now();
    let pod = loop {
        if let Some(p) = job_pods(day.lab).into_iter().next() {
            break p;
        }
        if r.child.try_wait().ok().flatten().is_some() || began.elapsed() > Duration::from_secs(120)
        {
            panic!("no pod of the Job:\n{}", r.stderr());
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(pod["spec"]["nodeSelector"]["kubernetes.io/arch"], "arm64", "{}", pod["spec"]);
    autoscaler_event(
        day,
        &pod,
        "TriggeredScaleUp",
        "Normal",
        "pod triggered scale-up: [{https://www.googleapis.com/compute/v1/projects/lw-lab/zones/europe-west1-b/instanceGroups/gk3-lab-arm-pool 0->1 (max: 1000)}]",
    );
    std::thread::sleep(Duration::from_secs(50));
    assert!(
        r.child.try_wait().ok().flatten().is_none(),
        "the sitting gave up while a node was said to be coming:\n{}",
        r.stderr()
    );
    autoscaler_event(
        day,
        &pod,
        "FailedScaleUp",
        "Warning",
        "Node scale up in zones europe-west1-b associated with this pod failed: GCE quota exceeded. Pod is at risk of not being scheduled.",
    );
    let failed = Instant::now();
    let (code, err) = r.finish();
    let took = failed.elapsed();
    eprintln!("sitting, an arm64 image and a failed scale-up:\n{err}");
    assert!(err.contains("the image is linux/arm64: the Job asks for arm64 nodes"), "{err}");
    assert_eq!(code, Some(8), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("node affinity/selector")
            && last.contains("FailedScaleUp")
            && last.contains("GCE quota exceeded")
            && last.contains("deleted Job leaderwatch/leaderwatch-measure"),
        "{last}"
    );
    // 45 s of grace from the sitting's sight of it, and its polls.
    assert!(took < Duration::from_secs(90), "{took:?} after FailedScaleUp");
    day.no_job_left();
}
