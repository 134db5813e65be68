//! The test helpers, in one place: the one lock that keeps clusters one at a time (CPU
//! contention between clusters on 2 cores can cause elections), a real local etcd cluster,
//! the one way to run the leaderwatch binary, the one YAML loader for the repository's
//! manifests, and readers for the run directory. Each test binary uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use leaderwatch::io::local::{LocalCluster, LocalOptions};
use leaderwatch::io::probe::ProbeConfig;
use leaderwatch::model::clock::{Clock, SystemClock};
use leaderwatch::model::summary::Summary;
use leaderwatch::ops::sample::{self, SampleConfig};
use tokio::sync::{Mutex, MutexGuard, oneshot};
use tokio::task::JoinHandle;

static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// Keys under `__leaderwatch/` (the canary's), read through one client of every member.
pub async fn canary_keys(members: &[leaderwatch::model::member::Member]) -> usize {
    let urls: Vec<&str> = members.iter().map(|m| m.url.as_str()).collect();
    let mut c = etcd_client::Client::connect(urls, None).await.expect("etcd client");
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        c.get("__leaderwatch/", Some(etcd_client::GetOptions::new().with_prefix())),
    )
    .await
    .expect("get within 5 s")
    .expect("get");
    r.kvs().len()
}

/// A started 3-member cluster and the guard that keeps other tests' clusters away.
pub struct Fixture {
    pub cluster: LocalCluster,
    pub out: tempfile::TempDir,
    _guard: MutexGuard<'static, ()>,
}

/// Holds off every other cluster of this test binary while alive.
pub async fn one_cluster_at_a_time() -> MutexGuard<'static, ()> {
    ONE_CLUSTER_AT_A_TIME.lock().await
}

/// The same lock, for tests that are not async (they run the binary).
pub fn one_cluster_at_a_time_blocking() -> MutexGuard<'static, ()> {
    ONE_CLUSTER_AT_A_TIME.blocking_lock()
}

/// The leaderwatch binary this test run built, with stdout and stderr captured
/// (`tokio::process::Command::from` makes it async).
pub fn leaderwatch() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_leaderwatch"));
    c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    c
}

/// A path in this repository.
pub fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The run directories committed under data/ (each `data/<run>/` git tracks a file in),
/// sorted: exactly those, never a run a user recorded there since (regression: `make
/// rehearse` before `make test` wrote data/rehearsal-leader-sigterm-<now>/ and changed what
/// the tests counted).
pub fn committed_runs() -> Vec<PathBuf> {
    let o = std::process::Command::new("git")
        .current_dir(repo(""))
        .args(["ls-files", "-z", "--", "data/"])
        .output()
        .expect("git ls-files: the tests read the committed runs from git");
    assert!(o.status.success(), "git ls-files data/: {}", String::from_utf8_lossy(&o.stderr));
    let mut runs = std::collections::BTreeSet::new();
    for file in o.stdout.split(|b| *b == 0).filter_map(|p| std::str::from_utf8(p).ok()) {
        let parts: Vec<&str> = file.split('/').collect();
        if parts.len() >= 3 {
            runs.insert(repo(&format!("data/{}", parts[1])));
        }
    }
    assert!(!runs.is_empty(), "no committed run under data/ (git ls-files data/)");
    runs.into_iter().collect()
}

/// The committed runs' baseline.json files (a sitting's; `sample` writes summary.json).
pub fn committed_baselines() -> Vec<PathBuf> {
    committed_runs().into_iter().map(|d| d.join("baseline.json")).filter(|p| p.is_file()).collect()
}

/// The committed runs whose directory name starts with `prefix` (e.g. "rehearsal-").
pub fn committed_runs_named(prefix: &str) -> Vec<PathBuf> {
    committed_runs()
        .into_iter()
        .filter(|d| d.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix)))
        .collect()
}

/// A copy of the committed runs in `<tmp>/data/`, for a command given the directory.
pub fn committed_data_dir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    for run in committed_runs() {
        let to = tmp.path().join("data").join(run.file_name().expect("run name"));
        std::fs::create_dir_all(&to).expect("mkdir");
        for e in std::fs::read_dir(&run).expect("run dir") {
            let p = e.expect("entry").path();
            if p.is_file() {
                std::fs::copy(&p, to.join(p.file_name().expect("name"))).expect("copy");
            }
        }
    }
    tmp
}

/// Every YAML document of the repository file `rel`.
pub fn yaml_values(rel: &str) -> Vec<serde_yaml_ng::Value> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde_yaml_ng::Value::deserialize(d).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .collect()
}

/// The documents of kind `kind` in `rel`, typed.
pub fn yaml_docs<T: serde::de::DeserializeOwned>(rel: &str, kind: &str) -> Vec<T> {
    yaml_values(rel)
        .into_iter()
        .filter(|v| v.get("kind").and_then(|k| k.as_str()) == Some(kind))
        .map(|v| serde_yaml_ng::from_value(v).unwrap_or_else(|e| panic!("{rel} ({kind}): {e}")))
        .collect()
}

/// The single document of `rel`, typed.
pub fn yaml<T: serde::de::DeserializeOwned>(rel: &str) -> T {
    let mut docs = yaml_values(rel);
    assert_eq!(docs.len(), 1, "{rel}: one YAML document expected");
    serde_yaml_ng::from_value(docs.remove(0)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Kubernetes' label-selector rule: every matchLabels pair and every matchExpressions
/// requirement (In, NotIn, Exists, DoesNotExist) holds; an empty selector selects every
/// pod. The one matcher of the manifest tests (two used to disagree on the empty case).
pub fn selects(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    labels: &std::collections::BTreeMap<String, String>,
) -> bool {
    let pairs = sel.match_labels.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    let exprs = sel.match_expressions.iter().flatten().all(|r| {
        let values = r.values.clone().unwrap_or_default();
        match r.operator.as_str() {
            "In" => labels.get(&r.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&r.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&r.key),
            "DoesNotExist" => !labels.contains_key(&r.key),
            other => panic!("not a selector operator: {other}"),
        }
    });
    pairs && exprs
}

/// The etcd version deploy/k8s/etcd/statefulset.yaml pins (its `app.kubernetes.io/version`
/// label, which tests/check/manifests.rs holds equal to the image tag): what the local members
/// run too (lab/go/etcd builds it), so a label like "local loopback, etcd X, 3 members" is
/// checked against it, not against a copy of the number.
pub fn pinned_etcd_version() -> String {
    let docs = yaml_values("deploy/k8s/etcd/statefulset.yaml");
    let sts = docs
        .iter()
        .find(|d| d.get("kind").and_then(|k| k.as_str()) == Some("StatefulSet"))
        .expect("a StatefulSet");
    sts.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(|l| l.get("app.kubernetes.io/version"))
        .and_then(|v| v.as_str())
        .expect("app.kubernetes.io/version label")
        .to_owned()
}

pub async fn cluster() -> Fixture {
    let guard = one_cluster_at_a_time().await;
    let cluster = LocalCluster::start(LocalOptions::default())
        .await
        .unwrap_or_else(|e| panic!("local etcd cluster: {e}"));
    let out = tempfile::tempdir().expect("tempdir");
    Fixture { cluster, out, _guard: guard }
}

/// A sampler running in the background until [`Running::stop`].
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<leaderwatch::Result<Summary>>,
}

impl Running {
    pub async fn stop(mut self) -> Summary {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.task.await.expect("sampler task").unwrap_or_else(|e| panic!("sampler failed: {e}"))
    }
}

pub fn start_sampler(f: &Fixture, interval: Duration, timeout: Duration) -> Running {
    start_sampler_with(sample_config(f, interval, timeout), Arc::new(SystemClock))
}

/// `sample`'s configuration as the tests start it: every member, /metrics every round,
/// no canary, no exporter, one samples.csv.
pub fn sample_config(f: &Fixture, interval: Duration, timeout: Duration) -> SampleConfig {
    SampleConfig {
        members: f.cluster.members(),
        interval,
        metrics_every: Some(1),
        duration: None,
        out: f.out.path().to_owned(),
        probe: ProbeConfig { timeout, ..ProbeConfig::default() },
        cause_horizon: leaderwatch::analysis::attribution::DEFAULT_HORIZON,
        canary: None,
        lock: None,
        metrics_addr: None,
        rotation: None,
    }
}

/// Runs `sample` with `cfg` and `clock` in the background until [`Running::stop`].
pub fn start_sampler_with(cfg: SampleConfig, clock: Arc<dyn Clock>) -> Running {
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(sample::run(cfg, clock, async move {
        let _ = rx.await;
    }));
    Running { stop: Some(tx), task }
}

/// samples.csv as maps from column name to value.
pub fn samples(dir: &Path) -> Vec<std::collections::HashMap<String, String>> {
    read_csv(&dir.join("samples.csv"))
}

pub fn events(dir: &Path) -> Vec<std::collections::HashMap<String, String>> {
    read_csv(&dir.join("events.csv"))
}

/// locks.csv (the lock canary's events) as maps from column name to value.
pub fn locks(dir: &Path) -> Vec<std::collections::HashMap<String, String>> {
    read_csv(&dir.join("locks.csv"))
}

pub fn read_csv(p: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_path(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let headers = r.headers().expect("header").clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap_or_else(|e| panic!("{}: unparseable row: {e}", p.display()));
            headers.iter().zip(rec.iter()).map(|(h, v)| (h.to_owned(), v.to_owned())).collect()
        })
        .collect()
}

pub async fn sleep(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// The rows of one member, in file order.
pub fn sample_rows_for<'a>(
    rows: &'a [std::collections::HashMap<String, String>],
    member: &str,
) -> Vec<&'a std::collections::HashMap<String, String>> {
    rows.iter().filter(|r| r["member"] == member).collect()
}
/// Starts `cmd` so that it dies with the test process (SIGKILL on the parent's death, a
/// panic's abort included); `what` names it in the panic if it cannot start.
pub fn spawn_tied(cmd: &mut std::process::Command, what: &str) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
    cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"))
}

/// SIGTERM to `child`, then up to 10 s for it to exit (its output flushed).
pub fn terminate(child: &mut std::process::Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub mod fake_api;
pub mod fake_member;
pub mod lab;
pub mod locker;
pub mod promtool;
pub mod writer;

/// What `deploy/image/build.sh` wrote into image.env (`make image`): the OCI layout, its
/// tag, digest and sizes. LEADERWATCH_IMAGE_DIR overrides target/image.
pub fn image_env() -> std::collections::BTreeMap<String, String> {
    let dir = std::env::var_os("LEADERWATCH_IMAGE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo("target/image"));
    let path = dir.join("image.env");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}: build the image first (make image)", path.display()));
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
