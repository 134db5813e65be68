//! The image deploy/image/build.sh builds (make test: target/image-test, from the debug
//! binary; LEADERWATCH_IMAGE_DIR, else target/image), run as the kubelet runs a container: its
//! root filesystem unpacked from the OCI layout by umoci, started by Debian's runc under the
//! securityContext of deploy/k8s/leaderwatch/job-measure.yaml and deployment-sample.yaml
//! (uid/gid 65532, fsGroup 65532 as a supplementary group, read-only root, every capability
//! dropped, no privilege escalation), with its data volume writable as fsGroup makes it.
//! The container shares the host's network namespace, so `sample` reaches real etcd
//! members on 127.0.0.1.
//!
//! Ignored in plain `cargo test` (root, runc, umoci and the built image); `make test-image`
//! (part of `make test`) builds the image and runs them.

use crate::support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodSpec;
use serde_json::{Value, json};

fn reference() -> String {
    let env = support::image_env();
    format!("{}:{}", env["IMAGE_LAYOUT"], env["IMAGE_TAG"])
}

/// The image's config (entrypoint, user, env) as skopeo reads it from the layout.
fn image_config() -> Value {
    let o = Command::new("skopeo")
        .args(["inspect", "--config"])
        .arg(format!("oci:{}", reference()))
        .output()
        .expect("run skopeo");
    assert!(o.status.success(), "skopeo inspect --config: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice::<Value>(&o.stdout).expect("config json")["config"].clone()
}

/// The security settings of a pod template, as the kubelet turns them into an OCI config.
#[derive(Debug, PartialEq)]
struct Security {
    uid: u32,
    gid: u32,
    fs_group: u32,
    read_only_root: bool,
    no_new_privileges: bool,
    capabilities: Vec<String>,
    data_mount: String,
}

fn security(what: &str, spec: PodSpec) -> Security {
    let psc = spec.security_context.expect("pod securityContext");
    let c = &spec.containers[0];
    let csc = c.security_context.clone().expect("container securityContext");
    assert_eq!(psc.run_as_non_root, Some(true), "{what}");
    let drop = csc.capabilities.as_ref().and_then(|c| c.drop.clone()).unwrap_or_default();
    assert!(
        csc.capabilities.as_ref().and_then(|c| c.add.clone()).unwrap_or_default().is_empty(),
        "{what} adds no capability"
    );
    // containerd's default set, less what is dropped (here: ALL).
    let capabilities = if drop.iter().any(|d| d == "ALL") {
        vec![]
    } else {
        panic!("{what}: expected drop ALL, got {drop:?}")
    };
    let data =
        c.volume_mounts.iter().flatten().find(|m| m.name == "data").expect("a data volume mount");
    Security {
        uid: csc.run_as_user.or(psc.run_as_user).expect("runAsUser") as u32,
        gid: csc.run_as_group.or(psc.run_as_group).expect("runAsGroup") as u32,
        fs_group: psc.fs_group.expect("fsGroup") as u32,
        read_only_root: csc.read_only_root_filesystem == Some(true),
        no_new_privileges: csc.allow_privilege_escalation == Some(false),
        capabilities,
        data_mount: data.mount_path.clone(),
    }
}

fn job_security() -> Security {
    let job = support::yaml_docs::<Job>("deploy/k8s/leaderwatch/job-measure.yaml", "Job").remove(0);
    security("job", job.spec.expect("spec").template.spec.expect("pod spec"))
}

fn deployment_security() -> Security {
    let d = support::yaml_docs::<Deployment>(
        "deploy/k8s/leaderwatch/deployment-sample.yaml",
        "Deployment",
    )
    .remove(0);
    security("deployment", d.spec.expect("spec").template.spec.expect("pod spec"))
}

/// The image's root filesystem, unpacked once per test by umoci from the OCI layout (what
/// a pull gives the node), owned by root as on a node.
struct Unpacked {
    dir: tempfile::TempDir,
}

impl Unpacked {
    fn new() -> Unpacked {
        let dir = tempfile::tempdir().expect("tempdir");
        let o = Command::new("umoci")
            .args(["raw", "unpack", "--image"])
            .arg(reference())
            .arg(dir.path().join("rootfs"))
            .output()
            .expect("run umoci");
        assert!(o.status.success(), "umoci raw unpack: {}", String::from_utf8_lossy(&o.stderr));
        Unpacked { dir }
    }

    fn rootfs(&self) -> PathBuf {
        self.dir.path().join("rootfs")
    }

    /// A volume directory as the kubelet prepares it for fsGroup: group-owned by it,
    /// setgid, group-writable.
    fn volume(&self, name: &str, fs_group: u32) -> PathBuf {
        let p = self.dir.path().join("volumes").join(name);
        std::fs::create_dir_all(&p).expect("volume dir");
        std::os::unix::fs::chown(&p, None, Some(fs_group)).expect("chgrp volume");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o2775))
            .expect("chmod volume");
        p
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

/// A container created by [`run`]: killed and deleted when dropped, a panic included.
struct Container {
    root: PathBuf,
    id: String,
}

impl Drop for Container {
    fn drop(&mut self) {
        for args in
            [vec!["kill", self.id.as_str(), "KILL"], vec!["delete", "--force", self.id.as_str()]]
        {
            let _ = Command::new("runc")
                .arg("--root")
                .arg(&self.root)
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Runs the image's entrypoint with `args` under `sec`, `volume` mounted writable at the
/// manifest's data path; stops it (SIGTERM, as the kubelet would) after `limit`.
fn run(img: &Unpacked, sec: &Security, volume: &Path, args: &[&str], limit: Duration) -> Run {
    let cfg = image_config();
    let entrypoint: Vec<String> =
        serde_json::from_value(cfg["Entrypoint"].clone()).expect("Entrypoint");
    let mut env: Vec<String> = serde_json::from_value(cfg["Env"].clone()).unwrap_or_default();
    env.push("HOSTNAME=leaderwatch-image-test".into());
    env.push("LEADERWATCH_LOG=info".into());
    let argv: Vec<String> =
        entrypoint.into_iter().chain(args.iter().map(|a| a.to_string())).collect();
    let caps = &sec.capabilities;
    let config = json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": sec.uid, "gid": sec.gid, "additionalGids": [sec.fs_group]},
            "args": argv, "env": env, "cwd": "/",
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
            "noNewPrivileges": sec.no_new_privileges,
        },
        "root": {"path": img.rootfs(), "readonly": sec.read_only_root},
        "hostname": "leaderwatch-image-test",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": sec.data_mount, "type": "bind", "source": volume, "options": ["rbind", "rprivate"]},
        ],
        // No network namespace: the host's, where the test's etcd members listen.
        "linux": {
            "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
            "maskedPaths": ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
        },
    });
    let bundle = tempfile::tempdir().expect("bundle dir");
    std::fs::write(
        bundle.path().join("config.json"),
        serde_json::to_vec_pretty(&config).expect("config"),
    )
    .expect("write config.json");
    let root = bundle.path().join("runc-state");
    let id = format!(
        "lw-image-test-{}-{}",
        std::process::id(),
        bundle.path().file_name().and_then(|n| n.to_str()).unwrap_or("x").trim_start_matches('.')
    );
    let container = Container { root: root.clone(), id: id.clone() };
    let (out, err) = (bundle.path().join("stdout"), bundle.path().join("stderr"));
    let t = Instant::now();
    let mut child = Command::new("runc")
        .arg("--root")
        .arg(&root)
        .args(["run", "--no-new-keyring", "--bundle"])
        .arg(bundle.path())
        .arg(&id)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("start runc (Debian's runc: make image installs it)");
    let mut termed = false;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait runc") {
            break st;
        }
        if t.elapsed() > limit && !termed {
            let _ =
                Command::new("runc").arg("--root").arg(&root).args(["kill", &id, "TERM"]).status();
            termed = true;
        }
        assert!(
            t.elapsed() < limit + Duration::from_secs(30),
            "the container did not stop within 30 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = t.elapsed();
    drop(container);
    Run {
        code: status.code(),
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        elapsed,
    }
}

#[test]
#[ignore = "needs root, runc, umoci and make image; make test runs it"]
fn the_image_is_what_the_dockerfile_says_and_small() {
    let cfg = image_config();
    assert_eq!(cfg["User"], "65532:65532");
    assert_eq!(cfg["Entrypoint"], json!(["/usr/local/bin/leaderwatch"]));
    // The Dockerfile's last stage says the same.
    let dockerfile =
        std::fs::read_to_string(support::repo("deploy/Dockerfile")).expect("Dockerfile");
    assert!(
        dockerfile.contains("USER 65532:65532")
            && dockerfile.contains(r#"ENTRYPOINT ["/usr/local/bin/leaderwatch"]"#),
        "deploy/Dockerfile and the image disagree"
    );
    // Both manifests run it under the same settings, the ones tested below.
    assert_eq!(job_security(), deployment_security());

    let img = Unpacked::new();
    let root = img.rootfs();
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).expect("passwd");
    assert!(passwd.lines().any(|l| l.starts_with("nonroot:x:65532:65532:")), "{passwd}");
    for f in [
        "etc/ssl/certs/ca-certificates.crt",
        "usr/share/zoneinfo/UTC",
        "etc/services",
        "etc/os-release",
        "usr/local/bin/leaderwatch",
    ] {
        assert!(root.join(f).exists(), "{f} missing from the image");
    }
    let home = std::fs::metadata(root.join("home/nonroot")).expect("home");
    assert_eq!((home.uid(), home.gid()), (65532, 65532));
    let tmp = std::fs::metadata(root.join("tmp")).expect("tmp");
    assert_eq!(tmp.mode() & 0o7777, 0o1777);
    let status: Vec<String> = std::fs::read_dir(root.join("var/lib/dpkg/status.d"))
        .expect("status.d")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for p in ["base-files", "netbase", "tzdata", "ca-certificates", "libc6", "libgcc-s1"] {
        assert!(status.iter().any(|s| s == p), "no dpkg status for {p}: {status:?}");
    }
    let env = support::image_env();
    let compressed: u64 = env["IMAGE_COMPRESSED_BYTES"].parse().expect("size");
    let unpacked: u64 = env["IMAGE_UNPACKED_BYTES"].parse().expect("size");
    let binary: u64 = env["IMAGE_BINARY_BYTES"].parse().expect("size");
    eprintln!(
        "image {}: {compressed} bytes compressed, {unpacked} unpacked, of which the binary {binary}",
        env["IMAGE_DIGEST"]
    );
    // What the recipe adds around the binary: the packages, about 7 MB unpacked. The
    // binary's own budget (12 MB, release) is make bench's: make test builds this image
    // from the debug binary.
    assert!(
        unpacked - binary < 12_000_000,
        "the image grew to {} bytes unpacked besides the binary",
        unpacked - binary
    );
}

#[test]
#[ignore = "needs root, runc, umoci and make image; make test runs it"]
fn version_bad_argument_and_unwritable_out_under_the_pods_security_context() {
    let img = Unpacked::new();
    let sec = job_security();
    let data = img.volume("data", sec.fs_group);

    let r = run(&img, &sec, &data, &["--version"], Duration::from_secs(30));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // The image is built from this checkout, so it says this build's commit too.
    assert_eq!(r.stdout.trim(), format!("leaderwatch {}", leaderwatch::model::build::LONG_VERSION));

    let r = run(&img, &sec, &data, &["measure", "--no-such-flag"], Duration::from_secs(30));
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert_eq!(r.stderr.trim().lines().count(), 1, "one line: {}", r.stderr);
    assert!(r.stderr.contains("--no-such-flag"), "{}", r.stderr);

    // The read-only root: an --out outside the volume is refused with exit 3, naming the path.
    let r = run(
        &img,
        &sec,
        &data,
        &[
            "sample",
            "--endpoint",
            "m0=http://127.0.0.1:9",
            "--duration",
            "1s",
            "--out",
            "/var/lib/leaderwatch-run",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert_eq!(
        r.stderr.trim().lines().filter(|l| l.starts_with("leaderwatch:")).count(),
        1,
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("/var/lib/leaderwatch-run"), "{}", r.stderr);
    // Nothing can be written outside the volume, even by hand.
    assert!(!img.rootfs().join("var/lib/leaderwatch-run").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, runc, umoci and make image; make test runs it"]
async fn sample_from_inside_the_container_records_every_member() {
    let f = support::cluster().await;
    let img = Unpacked::new();
    let sec = deployment_security();
    let data = img.volume("data", sec.fs_group);
    let mut args: Vec<String> = vec![
        "sample".into(),
        "--interval".into(),
        "500ms".into(),
        "--duration".into(),
        "5s".into(),
    ];
    for m in f.cluster.members() {
        args.push("--endpoint".into());
        args.push(format!("{}={}", m.name, m.url));
    }
    args.extend(["--out".into(), format!("{}/continuous", sec.data_mount)]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = tokio::task::block_in_place(|| run(&img, &sec, &data, &argv, Duration::from_secs(60)));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let out = data.join("continuous");
    let rows = support::samples(&out);
    let members: std::collections::BTreeSet<&str> =
        rows.iter().filter(|r| r["error"].is_empty()).map(|r| r["member"].as_str()).collect();
    assert_eq!(members.len(), 3, "every member answered from inside the container: {members:?}");
    assert!(rows.len() >= 3 * 8, "{} rows in 5 s at 500 ms", rows.len());
    // Written by the pod's user, with the fsGroup the volume carries.
    let md = std::fs::metadata(out.join("samples.csv")).expect("samples.csv");
    assert_eq!((md.uid(), md.gid()), (sec.uid, sec.fs_group), "owner of samples.csv");
    assert!(out.join("summary.json").is_file());
    eprintln!("sample in the container: {} rows, {:.1} s", rows.len(), r.elapsed.as_secs_f64());
}
