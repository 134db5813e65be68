//! The sitting day as an SRE has it, on the real local cluster (lw-lab): `leaderwatch`
//! installed with `cargo install --path .` and run from a directory of another checkout's
//! tree, as a user bound to `operator-rbac.yaml`'s two roles and nothing else, whose
//! kubeconfig's exec credential plugin hands out ServiceAccount tokens (TokenRequest) that
//! expire during the sitting and really stop working (each bound to a Secret the test
//! deletes past the stated expiry).
//!
//! - `sitting --dry-run --method drain` evicts nothing, survives an API server restart mid-follow (a
//!   "reconnecting" line, then "reconnected"), fetches a complete run and writes its
//!   report.csv, and leaves the README's table alone;
//! - an outage longer than `--reconnect-for` (the API server frozen) during a real `--method
//!   delete` detaches with exit 9 and the `--attach` line; `--attach` then follows it to its
//!   fetch, is killed there, and `--fetch` finishes the day (hand-off, clean-up) without
//!   fetching again; the Job's ServiceAccount deleted one member, the operator none;
//! - a wrong image, a pod an admission policy refuses, the Job's own preflight failing
//!   (a member frozen after the laptop's checks passed) and the Job's own rights short
//!   (exit 6) each end the sitting with one line naming the cause (the exit code and the
//!   log's last lines) and the Job deleted, nothing fetched, the first two within a minute
//!   of the Job;
//! - a binary for another CPU (the kernel's "exec format error") and a volume the kubelet
//!   cannot mount each end the sitting with the cluster's words, the wait within a minute
//!   of the cause (`sitting_day/early.rs`);
//! - `--pod-monitoring`: without the PodMonitoring resource the dry run stops naming it;
//!   with it, the PodMonitoring is applied beside the Job, a Prometheus scraping what it
//!   selects sees the sitting's members while it runs, and the clean-up removes it
//!   (`sitting_day/live.rs`);
//! - the image's platforms read from its registry (a local one): the Job asks for the
//!   image's architecture; an arm64 image on the lab's amd64 nodes is a pod no node takes,
//!   waited for while the autoscaler's scale-up (events written by the test) is said to
//!   come, ended with its words once it failed (`sitting_day/arch.rs`);
//! - a method whose rights no admin applied stops at the checks, naming the file;
//! - the operator role is exactly enough: the audit log shows no request of the operator
//!   refused, and every verb of every rule used; one rule taken away makes the step that
//!   needs it fail, with a line naming the right;
//! - the operator role has no way up: each way tried with the operator's own credentials
//!   (change a role, bind one, borrow another ServiceAccount, a privileged pod, exec into a
//!   member, read a Secret) is refused by the API server; docs/operator-rights.txt is
//!   `kubectl auth can-i --list` for that user (`LW_WRITE_DOCS=1` rewrites it).
//!
//! Ignored in plain `cargo test` (root, `make kube-tools`, the built image);
//! `make test-sitting-day` (part of `make test`) runs it.

mod arch;
mod early;
mod live;

use crate::in_cluster::{image_arg, job_json, job_pods, pinned_image, signal, wait_until};
use crate::support::lab;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lab::{Lab, repo};
use nix::sys::signal::Signal;
use serde_json::Value;

/// The operator: a ServiceAccount bound to operator-rbac.yaml's roles only.
const OPERATOR_NS: &str = "default";
const OPERATOR: &str = "lw-operator";
/// What a run of this test is labelled in baseline.json.
const ENVIRONMENT: &str =
    "local control plane (lw-lab), Kubernetes v1.35.4, etcd 3.6.14, sitting day";
/// The token's stated life; kube-rs asks for a new one 60 s before it.
const TOKEN_LIFE_S: u64 = 90;

#[test]
#[ignore = "needs root, make kube-tools and the test image; make test runs it"]
fn a_sitting_day_from_a_laptop_as_the_operator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wrong_arch_arg, wrong_arch) = early::wrong_arch_image(dir.path());
    // A registry the sitting reads the images' platforms from: the test image (imported into
    // the nodes under the same name, as a pull would leave it) and the arm64 one (never on a
    // node: none is arm64).
    let registry = arch::LocalRegistry::start();
    let env = crate::support::image_env();
    let (layout, tag) = (Path::new(&env["IMAGE_LAYOUT"]), &env["IMAGE_TAG"]);
    let from_registry = registry.push(layout, tag, "lw/leaderwatch");
    let served =
        format!("127.0.0.1:{}/lw/leaderwatch:{tag}={}:{tag}", registry.port, layout.display());
    let (arm_layout, arm_tag) = arch::arm64_image(dir.path());
    let arm64 = registry.push(&arm_layout, &arm_tag, "lw/leaderwatch-arm64");
    let lab = Lab::up_images(&[], &[], &[image_arg(), wrong_arch_arg, served]);
    lab.deploy();
    let day = Day::new(&lab, dir.path());
    let revoker = Revoker::start(&lab);

    a_dry_run_evicts_nothing_and_survives_an_api_server_restart(&day);
    live::the_live_view_shows_the_sitting_while_it_runs(&day, &from_registry);
    a_method_without_its_rights_stops_at_the_checks(&day);
    // The methods' extra rights, as an admin applies them for such a sitting.
    day.lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac-maintenance.yaml"]);
    a_long_outage_detaches_and_attach_finishes(&day);
    a_wrong_image_ends_within_a_minute(&day);
    day.lab.ok(&["delete", "-f", "deploy/k8s/leaderwatch/rbac-maintenance.yaml"]);
    day.lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac-drain.yaml"]);
    a_refused_pod_ends_within_a_minute(&day);
    day.lab.ok(&["delete", "-f", "deploy/k8s/leaderwatch/rbac-drain.yaml"]);
    the_jobs_own_preflight_failing_is_said_and_cleaned_up(&day);
    a_job_that_ends_early_with_any_code_is_named_and_not_fetched(&day);
    early::a_binary_for_another_cpu_is_named_in_one_line(&day, &wrong_arch);
    early::a_volume_that_cannot_mount_ends_within_a_minute(&day);
    arch::an_arm64_image_asks_for_arm64_nodes_until_the_scale_up_fails(&day, &arm64);

    // Before a rule is taken away on purpose (its 403 is the next step's point).
    the_operator_role_was_exactly_enough(&lab);
    a_rule_removed_fails_its_step_naming_the_right(&day);
    the_operator_has_no_way_up(&day);

    let revoked = revoker.stop();
    let tokens = std::fs::read_to_string(day.dir.join("tokens.log")).unwrap_or_default();
    assert!(tokens.lines().count() >= 3, "tokens refreshed during the day: {tokens}");
    assert!(revoked >= 2, "tokens revoked while the sittings ran: {revoked}");
}

/// What every step shares: the lab, the installed binary, the operator's kubeconfig, the
/// checkout copy it runs in.
struct Day<'a> {
    lab: &'a Lab,
    dir: PathBuf,
    bin: PathBuf,
    kubeconfig: PathBuf,
    /// A directory inside a copy of the checkout's layout (README only): `sitting` finds
    /// data/ and the README from here.
    cwd: PathBuf,
    checkout: PathBuf,
    /// How many sittings were started (each has its own log).
    started: std::sync::atomic::AtomicUsize,
}

impl<'a> Day<'a> {
    fn new(lab: &'a Lab, dir: &Path) -> Day<'a> {
        // The admin's part (Lab::deploy applied namespace.yaml and rbac.yaml): the
        // operator's roles, bound to the operator below.
        let bin = installed(dir);
        let kubeconfig = operator_kubeconfig(lab, dir);
        let checkout = dir.join("checkout");
        let readme = checkout.join("deploy/k8s/etcd/README.md");
        std::fs::create_dir_all(readme.parent().expect("dir")).expect("mkdir");
        std::fs::copy(repo().join("deploy/k8s/etcd/README.md"), &readme).expect("README");
        let cwd = checkout.join("notes/today");
        std::fs::create_dir_all(&cwd).expect("mkdir");
        Day {
            lab,
            dir: dir.to_owned(),
            bin,
            kubeconfig,
            cwd,
            checkout,
            started: Default::default(),
        }
    }

    /// `leaderwatch sitting` as the operator, from `cwd`, with the short windows the
    /// test-only floor lets through.
    fn sitting(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.current_dir(&self.cwd)
            .env(leaderwatch::io::test_hooks::MIN_IDLE, "10s")
            // What a sitting remembers of itself, kept in the test's own directory.
            .env("XDG_STATE_HOME", self.dir.join("state"))
            .arg("sitting")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// A sitting started, its stderr into a file (read whole when it ends, or when a step
    /// waiting on it gives up). At rest 60 s unless `extra` has an `--idle`: with the
    /// settle, a sitting outlives the operator's token (revoked 100 s after it was made)
    /// unless it refreshes it.
    fn start(&self, image: &str, extra: &[&str]) -> Running {
        let mut args = vec!["--image", image, "--settle", "10s"];
        if !extra.contains(&"--idle") {
            args.extend_from_slice(&["--idle", "60s"]);
        }
        args.extend_from_slice(&["--environment", ENVIRONMENT, "--label", "lab"]);
        args.extend_from_slice(extra);
        let log =
            self.dir.join(format!("sitting-{}.log", self.started.fetch_add(1, Ordering::SeqCst)));
        let file = std::fs::File::create(&log).expect("log");
        let child = self.sitting(&args).stderr(file).spawn().expect("leaderwatch sitting");
        Running { child, log }
    }

    /// A sitting run while the first rule of a role (`object`: `[-n NS] KIND NAME`), which
    /// grants `resource`, is taken out by the admin; the role's file under
    /// deploy/k8s/leaderwatch put back after it. Its exit code and stderr.
    fn sitting_without_rule_0(
        &self,
        object: &[&str],
        resource: &str,
        file: &str,
    ) -> (Option<i32>, String) {
        let get = [&["get"], object, &["-o", "json"]].concat();
        let role = self.lab.json(&get);
        assert_eq!(role["rules"][0]["resources"][0], resource, "the rule removed is {resource}'s");
        let patch = r#"[{"op":"remove","path":"/rules/0"}]"#;
        self.lab.ok(&[&["patch"], object, &["--type=json", "-p", patch]].concat());
        let ended = self.start(&pinned_image(), &[]).finish();
        self.lab.ok(&["apply", "-f", &format!("deploy/k8s/leaderwatch/{file}")]);
        ended
    }

    /// Waits for the Job's pod to run; says what the sitting printed if it does not.
    fn wait_running(&self, r: &mut Running) {
        let began = Instant::now();
        while !job_pods(self.lab).first().is_some_and(|p| p["status"]["phase"] == "Running") {
            let ended = r.child.try_wait().ok().flatten();
            if ended.is_some() || began.elapsed() > Duration::from_secs(120) {
                panic!("the Job's pod not Running (sitting {ended:?}):\n{}", r.stderr());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The Job and its pods gone, so that the next step starts clean.
    fn no_job_left(&self) {
        wait_until("the Job deleted", Duration::from_secs(60), || job_json(self.lab).is_none());
        wait_until("its pods gone", Duration::from_secs(90), || job_pods(self.lab).is_empty());
    }
}

/// A sitting running, and the file its stderr goes to.
struct Running {
    child: Child,
    log: PathBuf,
}

impl Running {
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its exit code and everything it printed on stderr.
    fn finish(mut self) -> (Option<i32>, String) {
        let st = self.child.wait().expect("sitting");
        (st.code(), self.stderr())
    }
}

/// `cargo install --path .` (debug: the release build's fat LTO costs minutes here) into a
/// root of the test's own; the binary then runs from anywhere.
fn installed(dir: &Path) -> PathBuf {
    let root = dir.join("cargo");
    let st = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["install", "--locked", "--offline", "--debug", "--path"])
        .arg(repo())
        .arg("--root")
        .arg(&root)
        .arg("--target-dir")
        .arg(repo().join("target"))
        .status()
        .expect("cargo install");
    assert!(st.success(), "cargo install --path .: {st}");
    root.join("bin/leaderwatch")
}

/// operator-rbac.yaml applied and its three roles bound to [`OPERATOR`] (as the file's
/// header says an admin does), and a kubeconfig whose exec
/// plugin hands out that account's tokens: each bound to a new Secret (deleting it revokes
/// the token), said to expire in [`TOKEN_LIFE_S`].
fn operator_kubeconfig(lab: &Lab, dir: &Path) -> PathBuf {
    lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/operator-rbac.yaml"]);
    lab.ok(&["-n", OPERATOR_NS, "create", "serviceaccount", OPERATOR]);
    let subject = format!("--serviceaccount={OPERATOR_NS}:{OPERATOR}");
    lab.ok(&[
        "-n",
        "leaderwatch",
        "create",
        "rolebinding",
        "leaderwatch-operator",
        "--role=leaderwatch-operator",
        &subject,
    ]);
    lab.ok(&[
        "-n",
        "dlock",
        "create",
        "rolebinding",
        "leaderwatch-operator",
        "--role=leaderwatch-operator-read",
        &subject,
    ]);
    lab.ok(&[
        "create",
        "clusterrolebinding",
        "leaderwatch-operator",
        "--clusterrole=leaderwatch-operator",
        &subject,
    ]);
    let (kubectl, admin) = (
        lab.state["kubectl"].as_str().expect("kubectl"),
        lab.state["kubeconfig"].as_str().expect("kubeconfig"),
    );
    let plugin = dir.join("token.sh");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\n# The operator's credential plugin: a new token per call, bound to a new Secret.\nset -e\nn=$(date +%s%N)\n\
             {kubectl} --kubeconfig {admin} -n {OPERATOR_NS} create secret generic {OPERATOR}-token-$n >/dev/null\n\
             tok=$({kubectl} --kubeconfig {admin} -n {OPERATOR_NS} create token {OPERATOR} --bound-object-kind Secret --bound-object-name {OPERATOR}-token-$n --duration 10m)\n\
             echo $n >>{log}\n\
             exp=$(date -u -d '+{TOKEN_LIFE_S} seconds' +%Y-%m-%dT%H:%M:%SZ)\n\
             printf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"%s\",\"expirationTimestamp\":\"%s\"}}}}' \"$tok\" \"$exp\"\n",
            log = dir.join("tokens.log").display()
        ),
    )
    .expect("plugin");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = dir.join("operator.kubeconfig");
    let exec = format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      interactiveMode: Never\n",
        plugin.display()
    );
    lab.kubeconfig_for(&path, &exec);
    path
}

/// Deletes the Secret behind each token 10 s past its stated expiry: a token kept longer
/// than the plugin said stops working, as a real one does.
struct Revoker {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<usize>,
}

impl Revoker {
    fn start(lab: &Lab) -> Revoker {
        let stop = Arc::new(AtomicBool::new(false));
        let (kubectl, admin) = (
            lab.state["kubectl"].as_str().expect("kubectl").to_owned(),
            lab.state["kubeconfig"].as_str().expect("kubeconfig").to_owned(),
        );
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut revoked = 0;
            while !flag.load(Ordering::SeqCst) {
                let out = Command::new(&kubectl)
                    .args([
                        "--kubeconfig",
                        &admin,
                        "-n",
                        OPERATOR_NS,
                        "get",
                        "secrets",
                        "-o",
                        "name",
                    ])
                    .output();
                let now_ns = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                for name in out.iter().flat_map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .into_owned()
                        .lines()
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                }) {
                    let Some(n) = name
                        .strip_prefix(&format!("secret/{OPERATOR}-token-"))
                        .and_then(|n| n.parse::<u128>().ok())
                    else {
                        continue;
                    };
                    if now_ns.saturating_sub(n) > u128::from(TOKEN_LIFE_S + 10) * 1_000_000_000 {
                        let st = Command::new(&kubectl)
                            .args(["--kubeconfig", &admin, "-n", OPERATOR_NS, "delete", &name])
                            .stdout(Stdio::null())
                            .status();
                        revoked += usize::from(st.is_ok_and(|s| s.success()));
                    }
                }
                std::thread::sleep(Duration::from_secs(5));
            }
            revoked
        });
        Revoker { stop, handle }
    }

    fn stop(self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().expect("revoker")
    }
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The run directories in `data`.
fn runs(data: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn member_uids(lab: &Lab) -> Vec<String> {
    lab.member_pods()
        .iter()
        .map(|p| p["metadata"]["uid"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// `--dry-run --method drain`: the Job runs, its cordon and evictions server-side dry runs;
/// the API server restarts
/// mid-follow and the follow goes on; the run comes back complete into the checkout's
/// data/ (found from the working directory), with its report.csv, and the README's table
/// does not take it.
fn a_dry_run_evicts_nothing_and_survives_an_api_server_restart(day: &Day) {
    let (uids, readme) = (member_uids(day.lab), day.checkout.join("deploy/k8s/etcd/README.md"));
    let before = std::fs::read_to_string(&readme).expect("README");
    // A drain's dry run: the operator's part of that method end to end (its extra rights an
    // admin's, applied for it and removed after); its evictions are dry runs too.
    day.lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac-drain.yaml"]);
    // 60 s at rest (Day::start's): the API server's restart below is over before the drain
    // asks it anything (at 30 s, its first request met the restart: exit 5, incomplete).
    let mut r = day.start(&pinned_image(), &["--dry-run", "--method", "drain"]);
    day.wait_running(&mut r);
    std::thread::sleep(Duration::from_secs(5));
    // lw-lab restarts kube-apiserver on SIGUSR1 (SIGTERM, then the same flags).
    signal(day.lab.child.id() as i32, Signal::SIGUSR1);
    let (code, err) = r.finish();
    day.lab.ok(&["delete", "-f", "deploy/k8s/leaderwatch/rbac-drain.yaml"]);
    eprintln!("sitting --dry-run --method drain:\n{err}");
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("reconnecting:") && err.contains("reconnected:"), "{err}");
    assert!(!err.contains("is a tag"), "a digest is not warned about: {err}");
    // Its registry (GKE's name for the lab's image) cannot be reached from here: said, and
    // the Job asks for no architecture (sitting_day/arch.rs has one that can).
    assert!(err.contains("the image's architecture is not known"), "{err}");
    assert!(err.contains(&format!("  | {}", leaderwatch::model::build::Build::this().line())));
    assert_eq!(member_uids(day.lab), uids, "no member was evicted");
    let evictions: Vec<Value> = day
        .lab
        .audit()
        .into_iter()
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["objectRef"]["subresource"] == "eviction"
                && e["verb"] == "create"
        })
        .collect();
    assert!(!evictions.is_empty(), "the Job sent its eviction");
    assert!(
        evictions
            .iter()
            .all(|e| e["requestURI"].as_str().is_some_and(|u| u.contains("dryRun=All"))),
        "every eviction a dry run: {evictions:?}"
    );
    let data = day.checkout.join("data");
    let got = runs(&data);
    assert_eq!(got.len(), 1, "{got:?}");
    let name = got[0].file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    assert!(name.starts_with("lab-follower-drain-dry-run-"), "{name}");
    assert!(got[0].join("report.csv").is_file() && got[0].join("baseline.json").is_file());
    assert_eq!(std::fs::read_to_string(&readme).expect("README"), before, "no row for a dry run");
    day.no_job_left();
}

/// The API server frozen longer than `--reconnect-for`: exit 9 with the `--attach` line,
/// the Job untouched; `--attach` follows it again to its end. The sitting is a real
/// `--method delete` run by the operator: the Job's ServiceAccount (not the operator)
/// deletes one follower, the StatefulSet makes it again, the run is a row of the README's
/// table. With the drain's and the rolling restart's dry runs, every method of `sitting`
/// runs end to end with the operator's rights (an eviction needs no right a delete does not
/// have; each method's Job-side rights, for real: tests/lab/kube.rs).
fn a_long_outage_detaches_and_attach_finishes(day: &Day) {
    // At rest 30 s: the dry run above has outlived a token already.
    let (uids, since) = (member_uids(day.lab), day.lab.audit().len());
    let mut r = day
        .start(&pinned_image(), &["--method", "delete", "--reconnect-for", "15s", "--idle", "30s"]);
    day.wait_running(&mut r);
    let api = day.lab.apiserver_pid();
    signal(api, Signal::SIGSTOP);
    let began = Instant::now();
    let (code, err) = r.finish();
    let waited = began.elapsed();
    signal(api, Signal::SIGCONT);
    eprintln!("sitting, API frozen:\n{err}");
    assert_eq!(code, Some(9), "{err}");
    assert!(
        err.contains("did not answer") && err.contains("leaderwatch sitting --attach"),
        "{err}"
    );
    assert!(waited < Duration::from_secs(90), "gave up after {waited:?}");
    // `--attach` killed once the run is fetched (a test hook holds it there), before the
    // hand-off and the clean-up: the next `--fetch` finishes the day without a second fetch.
    let log = day.dir.join("attach.log");
    // Only the context: the sitting remembers its --label.
    let mut attach = day.sitting(&["--attach"]);
    attach
        .env(leaderwatch::io::test_hooks::PAUSE_AFTER_FETCH, "10m")
        .stderr(std::fs::File::create(&log).expect("log"));
    let mut child = attach.spawn().expect("sitting --attach");
    let began = Instant::now();
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    while !said().contains("waiting before the hand-off") {
        let ended = child.try_wait().ok().flatten();
        if ended.is_some() || began.elapsed() > Duration::from_secs(600) {
            panic!("--attach did not reach its fetch ({ended:?}):\n{}", said());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    child.kill().expect("kill --attach");
    let _ = child.wait();
    eprintln!("sitting --attach, killed after its fetch:\n{}", said());
    assert!(said().contains("fetched into"), "{}", said());
    assert!(said().contains("as it was started here: --label lab"), "{}", said());
    assert!(job_json(day.lab).is_some(), "the Job outlived the killed command");
    let fetches = || fetch_pods_created(day.lab);
    let fetched_once = fetches();
    assert!(fetched_once >= 1, "the operator's fetch pod in the audit log");
    let o = day.sitting(&["--fetch"]).output().expect("sitting --fetch");
    let err = text(&o);
    eprintln!("sitting --fetch:\n{err}");
    assert_eq!(o.status.code(), Some(0), "--fetch: {err}");
    assert!(err.contains("not fetched again"), "{err}");
    assert_eq!(fetches(), fetched_once, "no second fetch pod");
    day.no_job_left();
    let kept = std::fs::read_dir(day.dir.join("state/leaderwatch/sittings"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(kept, 0, "the hand-off done, nothing is left to remember");
    let now = member_uids(day.lab);
    let replaced = uids.iter().filter(|u| !now.contains(u)).count();
    assert_eq!(replaced, 1, "one member deleted and made again: {uids:?} -> {now:?}");
    // Who deleted members' pods: the Job's ServiceAccount once; the kubelet's final delete
    // once the container stopped is the node's, and the operator's none.
    let deleted_by: Vec<String> = day
        .lab
        .audit()
        .iter()
        .skip(since)
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["verb"] == "delete"
                && e["objectRef"]["resource"] == "pods"
                && e["objectRef"]["namespace"] == "dlock"
        })
        .map(|e| e["user"]["username"].as_str().unwrap_or_default().to_owned())
        .collect();
    let job = "system:serviceaccount:leaderwatch:leaderwatch";
    assert_eq!(deleted_by.iter().filter(|u| *u == job).count(), 1, "{deleted_by:?}");
    assert!(
        deleted_by.iter().all(|u| u == job || u.starts_with("system:node:")),
        "only the Job and the kubelet delete members: {deleted_by:?}"
    );
    // The run, fetched into the checkout's data/, is a row of the README's table; this lab
    // is no GKE, so baselines.csv and the ledger are not written.
    let data = day.checkout.join("data");
    let run = runs(&data)
        .into_iter()
        .find(|p| {
            p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("lab-follower-delete-2"))
        })
        .expect("the fetched run");
    assert!(run.join("report.csv").is_file());
    let readme =
        std::fs::read_to_string(day.checkout.join("deploy/k8s/etcd/README.md")).expect("README");
    let name = run.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    assert!(readme.contains(&name), "the README's table names {name}");
    assert!(err.contains("not one"), "no baselines.csv for a lab run, said: {err}");
}

/// The fetch pods the operator created, from the audit log.
fn fetch_pods_created(lab: &Lab) -> usize {
    let user = format!("system:serviceaccount:{OPERATOR_NS}:{OPERATOR}");
    lab.audit()
        .into_iter()
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["verb"] == "create"
                && e["user"]["username"] == user.as_str()
                && e["objectRef"]["resource"] == "pods"
                && e["objectRef"]["subresource"].is_null()
                && e["responseStatus"]["code"] == 201
        })
        .count()
}

/// An image nobody can pull: one line naming the pull error, the Job deleted, within a
/// minute of the Job (the grace of a pull error is 30 s).
fn a_wrong_image_ends_within_a_minute(day: &Day) {
    let repo_part = pinned_image().split('@').next().expect("repo").to_owned();
    let wrong = format!("{repo_part}@sha256:{}", "0".repeat(63) + "1");
    let mut r = day.start(&wrong, &["--method", "delete"]);
    // The lab has no registry: its nodes' pulls are refused at once (lw-lab's hosts.toml),
    // as GKE's registry answers a missing digest at once. The clock starts at the pull error.
    let began = Instant::now();
    while !job_pods(day.lab).first().is_some_and(|p| {
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
            .as_str()
            .is_some_and(|w| matches!(w, "ErrImagePull" | "ImagePullBackOff"))
    }) {
        if r.child.try_wait().ok().flatten().is_some() || began.elapsed() > Duration::from_secs(180)
        {
            panic!("no pull error seen:\n{}", r.stderr());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let failed = Instant::now();
    let (code, err) = r.finish();
    let took = failed.elapsed();
    eprintln!("sitting, wrong image:\n{err}");
    assert_eq!(code, Some(8), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.contains("ErrImagePull") || last.contains("ImagePullBackOff"), "{last}");
    assert!(last.contains("deleted Job leaderwatch/leaderwatch-measure"), "{last}");
    assert!(took < Duration::from_secs(60), "{took:?} after the pull error");
    day.no_job_left();
}

/// A policy that refuses the sitting's pod (as an Autopilot rule would): the Job
/// controller's FailedCreate is the cause, with the policy's words.
fn a_refused_pod_ends_within_a_minute(day: &Day) {
    let policy = day.dir.join("refuse.yaml");
    std::fs::write(&policy, REFUSE).expect("policy");
    let path = policy.to_str().expect("utf8");
    day.lab.ok(&["apply", "-f", path]);
    // The policy takes effect once the API server has loaded it.
    std::thread::sleep(Duration::from_secs(5));
    let began = Instant::now();
    // --method drain: its ClusterRole is applied and removed (the operator's delete on it).
    let (code, err) = day.start(&pinned_image(), &["--method", "drain"]).finish();
    day.lab.ok(&["delete", "-f", path]);
    eprintln!("sitting, pod refused:\n{err}");
    assert_eq!(code, Some(8), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.contains("cannot create its pod") && last.contains("lw-test-refusal"), "{last}");
    assert!(last.contains("deleted Job"), "{last}");
    assert!(began.elapsed() < Duration::from_secs(100), "took {:?}", began.elapsed());
    day.no_job_left();
}

const REFUSE: &str = "\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: lw-test-refusal
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [\"\"]
        apiVersions: [\"v1\"]
        operations: [\"CREATE\"]
        resources: [\"pods\"]
  validations:
    - expression: \"!has(object.metadata.labels) || !('app.kubernetes.io/component' in object.metadata.labels) || object.metadata.labels['app.kubernetes.io/component'] != 'sitting'\"
      message: \"lw-test-refusal: the sitting's pod is refused (as a cluster policy would)\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: lw-test-refusal
spec:
  policyName: lw-test-refusal
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: leaderwatch
";

/// A member frozen just before the sitting: the laptop's checks (the API's view: the pod is
/// still Ready) pass, the Job's own preflight (which asks the members) fails, exit 7 before
/// any run directory; the sitting says so with the Job's last lines and deletes it, and
/// `--cleanup-pvc` removes the sitting's volume.
fn the_jobs_own_preflight_failing_is_said_and_cleaned_up(day: &Day) {
    let leader = day.lab.leader();
    let follower = day
        .lab
        .member_pods()
        .into_iter()
        .find(|p| p["metadata"]["name"] != leader.as_str())
        .expect("a follower");
    let pid = day.lab.container_pid(&follower);
    signal(pid, Signal::SIGSTOP);
    let (code, err) = day.start(&pinned_image(), &["--cleanup-pvc"]).finish();
    signal(pid, Signal::SIGCONT);
    eprintln!("sitting, a member frozen:\n{err}");
    assert_eq!(code, Some(8), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("the Job ended (exit 7) before it wrote a run directory")
            && last.contains("preflight failed"),
        "{last}"
    );
    assert!(!err.contains("--fetch tries again"), "no --fetch advice: {err}");
    day.no_job_left();
    let (_, pvc, _) =
        day.lab.kubectl(&["-n", "leaderwatch", "get", "pvc", "leaderwatch-data", "-o", "name"]);
    assert!(pvc.trim().is_empty(), "--cleanup-pvc removed the sitting's volume: {pvc}");
    // The member answers again before the next test needs it.
    wait_until("the members healthy", Duration::from_secs(120), || {
        day.lab.member_pods().iter().all(|p| {
            p["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
        })
    });
}

/// The Job's own Role without its `pods` rule (an admin's mistake): `measure` in the Job
/// stops at its first request with exit 6, before any run directory. The sitting says so
/// with the code and the log's last lines, fetches nothing (no fetch pod in the audit log)
/// and deletes the Job. Before issue 61 only exits 2 and 7 were known, and this went to a
/// fetch that could not succeed.
fn a_job_that_ends_early_with_any_code_is_named_and_not_fetched(day: &Day) {
    let before = fetch_pods_created(day.lab);
    let (code, err) =
        day.sitting_without_rule_0(&["-n", "dlock", "role", "leaderwatch"], "pods", "rbac.yaml");
    eprintln!("sitting, the Job's rights short:\n{err}");
    assert_eq!(code, Some(8), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("the Job ended (exit 6) before it wrote a run directory")
            && last.contains("forbidden")
            && last.contains("deleted Job leaderwatch/leaderwatch-measure"),
        "{last}"
    );
    assert_eq!(fetch_pods_created(day.lab), before, "no fetch tried");
    day.no_job_left();
}

/// One rule taken out of the operator's ClusterRole (the `dlock` namespace's `get`): the
/// sitting stops at its checks, before anything is applied, with one line naming the
/// request and the right it lacked; the rule put back, it passes that step again.
fn a_rule_removed_fails_its_step_naming_the_right(day: &Day) {
    let (code, err) = day.sitting_without_rule_0(
        &["clusterrole", "leaderwatch-operator"],
        "namespaces",
        "operator-rbac.yaml",
    );
    eprintln!("sitting, a rule removed:\n{err}");
    assert_eq!(code, Some(6), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("get namespace")
            && last.contains("cannot get resource \"namespaces\"")
            && last.contains("operator-rbac.yaml"),
        "{last}"
    );
    assert!(job_json(day.lab).is_none(), "nothing applied");
}

/// Every request of the operator's in the audit log: none refused, and each verb of each
/// rule of operator-rbac.yaml used by one.
fn the_operator_role_was_exactly_enough(lab: &Lab) {
    let user = format!("system:serviceaccount:{OPERATOR_NS}:{OPERATOR}");
    let mine: Vec<Value> = lab
        .audit()
        .into_iter()
        .filter(|e| e["stage"] == "ResponseComplete" && e["user"]["username"] == user.as_str())
        .collect();
    assert!(!mine.is_empty(), "the operator made requests");
    let refused: Vec<String> = mine
        .iter()
        .filter(|e| e["responseStatus"]["code"] == 403)
        .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
        .collect();
    assert!(refused.is_empty(), "the operator role refused: {refused:?}");
    let text = std::fs::read_to_string(repo().join("deploy/k8s/leaderwatch/operator-rbac.yaml"))
        .expect("operator-rbac.yaml");
    let mut unused = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let role: Value = serde::Deserialize::deserialize(doc).expect("yaml");
        for rule in role["rules"].as_array().into_iter().flatten() {
            for verb in rule["verbs"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                let used = rule["resources"].as_array().into_iter().flatten().any(|r| {
                    let r = r.as_str().unwrap_or_default();
                    let (resource, sub) = r.split_once('/').unwrap_or((r, ""));
                    mine.iter().any(|e| {
                        let o = &e["objectRef"];
                        let code = e["responseStatus"]["code"].as_i64().unwrap_or(0);
                        // A server-side apply that creates is a `patch` answered 201,
                        // authorized as create too.
                        let created = audit_verb(e) == "patch" && code == 201;
                        (audit_verb(e) == verb || (verb == "create" && created))
                            && o["resource"] == resource
                            && o["subresource"].as_str().unwrap_or_default() == sub
                            && (code < 400 || code == 404)
                    })
                });
                if !used {
                    unused.push(format!("{verb} {}", rule["resources"]));
                }
            }
        }
    }
    assert!(unused.is_empty(), "rules of operator-rbac.yaml no step used: {unused:?}");
}

/// The RBAC verb of an audit event (the audit log says `get` for a single read and `list`
/// for a collection, as RBAC does).
fn audit_verb(e: &Value) -> &str {
    e["verb"].as_str().unwrap_or_default()
}

/// `--method rolling-restart` while no admin applied rbac-maintenance.yaml: the sitting
/// stops at its checks naming the binding and the file, nothing applied.
fn a_method_without_its_rights_stops_at_the_checks(day: &Day) {
    let (code, err) = day.start(&pinned_image(), &["--method", "rolling-restart"]).finish();
    eprintln!("sitting, rights not applied:\n{err}");
    assert_eq!(code, Some(8), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("RoleBinding dlock/leaderwatch-maintenance not found")
            && last.contains("kubectl apply -f deploy/k8s/leaderwatch/rbac-maintenance.yaml")
            && last.contains("nothing applied"),
        "{last}"
    );
    assert!(job_json(day.lab).is_none(), "nothing applied");
}

/// One request as the operator (`kubectl` with the operator's kubeconfig): its exit
/// status and stderr.
fn as_operator(day: &Day, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let kubectl = day.lab.state["kubectl"].as_str().expect("kubectl");
    let mut c = Command::new(kubectl);
    c.arg("--kubeconfig").arg(&day.kubeconfig).args(args);
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().expect("kubectl");
    if let Some(text) = stdin {
        use std::io::Write;
        child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write stdin");
    }
    drop(child.stdin.take());
    let o = child.wait_with_output().expect("kubectl");
    let out = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (o.status.success(), out(&o.stdout), out(&o.stderr))
}

/// Each way up the issue of 2026-12-07 found (and the ones beside it), tried with the
/// operator's own credentials: each refused by the API server (RBAC's Forbidden, or Pod
/// Security Admission in the Job's namespace), and `can-i '*' '*'` says no. Then the
/// operator's `kubectl auth can-i --list` in both namespaces is docs/operator-rights.txt.
fn the_operator_has_no_way_up(day: &Day) {
    // What the ways would borrow: a ServiceAccount of dlock's (a Spring workload's) and a
    // Secret, made by the admin.
    day.lab.ok(&["-n", "dlock", "create", "serviceaccount", "lw-test-spring"]);
    day.lab.ok(&[
        "-n",
        "dlock",
        "create",
        "secret",
        "generic",
        "lw-test-secret",
        "--from-literal=k=v",
    ]);
    let me = format!("system:serviceaccount:{OPERATOR_NS}:{OPERATOR}");
    let everything = r#"{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}"#;
    let add_rule = format!(r#"[{{"op":"add","path":"/rules/-","value":{everything}}}]"#);
    let drain_everything = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: dlock-leaderwatch-drain\nrules:\n- {everything}\n"
    );
    let binding = |kind: &str, ns: Option<&str>, role_kind: &str, role: &str| {
        let ns = ns.map(|n| format!("  namespace: {n}\n")).unwrap_or_default();
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata:\n  name: lw-test-up\n{ns}roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: {role_kind}\n  name: {role}\nsubjects:\n- kind: ServiceAccount\n  name: {OPERATOR}\n  namespace: {OPERATOR_NS}\n"
        )
    };
    let pod = |ns: &str, sa: &str, privileged: bool| {
        let image = pinned_image();
        let sc = if privileged { "\n    securityContext: {privileged: true}" } else { "" };
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: lw-test-up\n  namespace: {ns}\nspec:\n  serviceAccountName: {sa}\n  containers:\n  - name: c\n    image: {image}{sc}\n"
        )
    };
    let job_in_dlock = format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: lw-test-up\n  namespace: dlock\nspec:\n  template:\n    spec:\n      serviceAccountName: lw-test-spring\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: {}\n",
        pinned_image()
    );
    let apply = ["apply", "--server-side", "-f", "-"];
    let dry = ["create", "--dry-run=server", "-f", "-"];
    let ways: Vec<(&str, Vec<&str>, Option<String>, &str)> = vec![
        (
            "add a rule to the Job's Role",
            vec!["-n", "dlock", "patch", "role", "leaderwatch", "--type=json", "-p", &add_rule],
            None,
            "forbidden",
        ),
        (
            "add a rule to the Job's node ClusterRole",
            vec!["patch", "clusterrole", "dlock-leaderwatch-nodes", "--type=json", "-p", &add_rule],
            None,
            "forbidden",
        ),
        (
            "rewrite the drain ClusterRole to */* (server-side apply)",
            apply.to_vec(),
            Some(drain_everything.clone()),
            "forbidden",
        ),
        (
            "bind cluster-admin to themselves",
            apply.to_vec(),
            Some(binding("ClusterRoleBinding", None, "ClusterRole", "cluster-admin")),
            "forbidden",
        ),
        (
            "bind the Job's Role to themselves in dlock",
            apply.to_vec(),
            Some(binding("RoleBinding", Some("dlock"), "Role", "leaderwatch")),
            "forbidden",
        ),
        (
            "bind the admin ClusterRole to themselves in the Job's namespace",
            apply.to_vec(),
            Some(binding("RoleBinding", Some("leaderwatch"), "ClusterRole", "admin")),
            "forbidden",
        ),
        (
            "a pod in dlock under a Spring workload's ServiceAccount",
            dry.to_vec(),
            Some(pod("dlock", "lw-test-spring", false)),
            "forbidden",
        ),
        (
            "a Job in dlock under a Spring workload's ServiceAccount",
            dry.to_vec(),
            Some(job_in_dlock),
            "forbidden",
        ),
        (
            "a ServiceAccount of their own in the Job's namespace",
            vec!["-n", "leaderwatch", "create", "serviceaccount", "lw-test-up", "--dry-run=server"],
            None,
            "forbidden",
        ),
        (
            "a privileged pod in the Job's namespace",
            dry.to_vec(),
            Some(pod("leaderwatch", "leaderwatch", true)),
            "violates PodSecurity",
        ),
        (
            "exec into a member",
            vec!["-n", "dlock", "exec", "dlock-etcd-0", "--", "true"],
            None,
            "forbidden",
        ),
        (
            "a port-forward to a member",
            vec!["-n", "dlock", "port-forward", "pod/dlock-etcd-0", "0:2379"],
            None,
            "forbidden",
        ),
        (
            "read a Secret of dlock",
            vec!["-n", "dlock", "get", "secret", "lw-test-secret"],
            None,
            "forbidden",
        ),
        (
            "list the Secrets of the Job's namespace",
            vec!["-n", "leaderwatch", "get", "secrets"],
            None,
            "forbidden",
        ),
    ];
    let mut allowed = Vec::new();
    for (what, args, stdin, refusal) in &ways {
        let (ok, out, err) = as_operator(day, args, stdin.as_deref());
        eprintln!("way up: {what}: {}", err.trim());
        if ok || !err.to_lowercase().contains(&refusal.to_lowercase()) {
            allowed.push(format!("{what}: ok={ok} {out} {err}"));
        }
    }
    assert!(allowed.is_empty(), "ways up not refused by the API server: {allowed:#?}");
    let (_, all, _) = as_operator(day, &["auth", "can-i", "*", "*"], None);
    assert_eq!(all.trim(), "no", "can-i '*' '*'");
    // Into dlock's pods, no exec, attach or port-forward (in leaderwatch the operator's own
    // pods hold nothing the operator does not: docs/operator-rights.txt says what they may).
    for sub in ["pods/exec", "pods/attach", "pods/portforward"] {
        let (_, can, _) = as_operator(day, &["-n", "dlock", "auth", "can-i", "create", sub], None);
        assert_eq!(can.trim(), "no", "dlock: {sub}");
    }
    // The audit log agrees: every refusal was the operator's, answered 403.
    let refused = day
        .lab
        .audit()
        .into_iter()
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["user"]["username"] == me.as_str()
                && e["responseStatus"]["code"] == 403
        })
        .count();
    assert!(refused >= ways.len() - 1, "403s in the audit log: {refused}");
    operator_rights_are_the_docs(day);
    day.lab.ok(&["-n", "dlock", "delete", "serviceaccount", "lw-test-spring"]);
    day.lab.ok(&["-n", "dlock", "delete", "secret", "lw-test-secret"]);
}

/// `kubectl auth can-i --list` as the operator in the two namespaces, as
/// docs/operator-rights.txt has it; `LW_WRITE_DOCS=1` writes the file instead.
fn operator_rights_are_the_docs(day: &Day) {
    let mut text = String::from(
        "# `kubectl auth can-i --list` for a user bound to deploy/k8s/leaderwatch/operator-rbac.yaml's\n# three roles only, on the local control plane (Kubernetes v1.35.4). Written by\n# tests/lab/sitting_day.rs (LW_WRITE_DOCS=1), which fails when it differs.\n",
    );
    for ns in ["leaderwatch", "dlock", "default"] {
        let (ok, out, err) = as_operator(day, &["-n", ns, "auth", "can-i", "--list"], None);
        assert!(ok, "can-i --list in {ns}: {err}");
        text.push_str(&format!("\n## -n {ns}\n\n"));
        text.push_str(&out);
    }
    let path = repo().join("docs/operator-rights.txt");
    if std::env::var_os("LW_WRITE_DOCS").is_some() {
        std::fs::write(&path, &text).expect("write docs/operator-rights.txt");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "docs/operator-rights.txt differs from what the operator may do (LW_WRITE_DOCS=1 rewrites it):\n{text}"
    );
}
