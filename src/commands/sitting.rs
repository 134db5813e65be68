//! `leaderwatch sitting`: the sitting run in the cluster as the committed Job, driven from a
//! machine with a kubeconfig, from the checks to the results in `data/`. The steps are in
//! the command's help (src/commands/cli.rs); the objects come from src/k8s/job.rs, the copy of the
//! run directory from src/io/pack.rs, the tables from src/render/report.rs.
//!
//! Nothing here deletes a sitting that runs: Ctrl-C only stops following it, and a fetch
//! that fails keeps the Job and the volume for `--fetch` to try again.

use std::collections::HashSet;
use std::future::Future;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, LogParams};

use crate::Error;
use crate::commands::cli::SittingArgs;
use crate::io::pack;
use crate::k8s::job::{self, JobParams, Object};
use crate::k8s::{self, KubeError, KubeOptions, call};
use crate::model::baseline::{BASELINE, KubeMethod};

/// How often the Job, its pod and their events are read while following.
const POLL: Duration = Duration::from_secs(2);
/// Off a terminal, a status line this often.
const STATUS_EVERY: Duration = Duration::from_secs(60);
/// The fetch pod must have printed its archive within this (an image pull included).
const FETCH_WITHIN: Duration = Duration::from_secs(300);
/// The fetch pod's name: one at a time.
const FETCH_POD: &str = "leaderwatch-fetch";

/// An API timestamp as chrono's.
fn utc(t: &k8s_openapi::jiff::Timestamp) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(
        t.as_second(),
        u32::try_from(t.subsec_nanosecond()).unwrap_or(0),
    )
}

fn step(step: &'static str, message: impl Into<String>) -> Error {
    Error::Step { step, message: message.into() }
}

/// A progress line on stderr (above the status line on a terminal).
struct Out {
    bar: Option<indicatif::ProgressBar>,
    last_status: Instant,
}

impl Out {
    fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new_spinner();
            b.enable_steady_tick(Duration::from_millis(250));
            b
        });
        Out { bar, last_status: Instant::now() }
    }

    fn line(&self, s: &str) {
        match &self.bar {
            Some(b) => b.println(s),
            None => eprintln!("{s}"),
        }
    }

    /// The one updating line on a terminal; off one, a line every [`STATUS_EVERY`].
    fn status(&mut self, s: &str) {
        match &self.bar {
            Some(b) => b.set_message(s.to_owned()),
            None if self.last_status.elapsed() >= STATUS_EVERY => {
                self.last_status = Instant::now();
                eprintln!("sitting: {s}");
            }
            None => {}
        }
    }

    fn done(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// The manifests' objects: rbac.yaml's, the PVC and the Job template.
struct Manifests {
    rbac: Vec<Object>,
    pvc: Object,
    job: Job,
}

fn manifests() -> Result<Manifests, Error> {
    let bad = |e: String| step("manifests", e);
    let rbac = job::parse("rbac.yaml", job::RBAC).map_err(bad)?;
    let mut pvc = None;
    let mut template = None;
    for o in job::parse("job-measure.yaml", job::JOB).map_err(bad)? {
        match o {
            Object::Job(j) => template = Some(*j),
            o @ Object::Pvc(_) => pvc = Some(o),
            o => {
                return Err(step(
                    "manifests",
                    format!("job-measure.yaml: unexpected {}", o.describe()),
                ));
            }
        }
    }
    match (pvc, template) {
        (Some(pvc), Some(job)) => Ok(Manifests { rbac, pvc, job }),
        _ => Err(step("manifests", "job-measure.yaml: a PVC and a Job expected")),
    }
}

fn extra_objects(method: KubeMethod) -> Result<Vec<Object>, Error> {
    match job::extra_rbac(method) {
        Some((file, text)) => job::parse(file, text).map_err(|e| step("manifests", e)),
        None => Ok(Vec::new()),
    }
}

/// `--name=value` of the Job's container.
fn job_arg(j: &Job, name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    j.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .args
        .as_ref()?
        .iter()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_owned))
}

/// The Job's end: `Some((condition, reason))` once Complete or Failed.
fn finished(j: &Job) -> Option<(String, String)> {
    j.status.as_ref()?.conditions.as_ref()?.iter().find_map(|c| {
        (matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True")
            .then(|| (c.type_.clone(), c.reason.clone().unwrap_or_default()))
    })
}

/// The image reference as a registry can take it.
fn check_image(image: &str) -> Result<(), Error> {
    if image.is_empty() || image.chars().any(char::is_whitespace) || !image.contains('/') {
        return Err(Error::Usage(format!(
            "--image {image:?}: not an image reference (REGISTRY/PATH/NAME:TAG or @sha256:...)"
        )));
    }
    if image.contains("/PROJECT/") {
        return Err(Error::Usage(format!(
            "--image {image}: PROJECT is the docs' placeholder; put your project id there"
        )));
    }
    Ok(())
}

/// The Job's pod, if it exists (the newest).
async fn job_pod(
    client: &Client,
    ns: &str,
    name: &str,
    t: Duration,
) -> Result<Option<Pod>, KubeError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&format!("job-name={name}"));
    let mut pods = call("list the Job's pods", t, api.list(&lp)).await?.items;
    pods.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
    Ok(pods.pop())
}

/// The sitting's exit code, once its container ended.
fn exit_code(p: &Pod) -> Option<i32> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

/// Events about `name` not printed yet, none from before `since` (the Job's creation).
async fn new_events(
    client: &Client,
    ns: &str,
    name: &str,
    since: Option<k8s_openapi::jiff::Timestamp>,
    seen: &mut HashSet<String>,
    t: Duration,
) -> Result<Vec<String>, KubeError> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let mut items = call("list events", t, api.list(&lp)).await?.items;
    let at =
        |e: &Event| e.last_timestamp.clone().map(|t| t.0).or(e.event_time.clone().map(|t| t.0));
    items.sort_by_key(at);
    let mut out = Vec::new();
    for e in items {
        if since.is_some_and(|s| at(&e).is_some_and(|a| a < s)) {
            continue;
        }
        let key =
            format!("{}/{}", e.metadata.uid.clone().unwrap_or_default(), e.count.unwrap_or(1));
        if seen.insert(key) {
            out.push(format!(
                "event {} {}: {} {}",
                e.involved_object.kind.as_deref().unwrap_or("?"),
                e.involved_object.name.as_deref().unwrap_or("?"),
                e.reason.as_deref().unwrap_or(""),
                e.message.as_deref().unwrap_or("").trim()
            ));
        }
    }
    Ok(out)
}

/// Follows the pod's log into `tx`, line by line, from where it left off when the stream
/// breaks (the kubelet's timestamps, or a count of lines where it gives none, skip what was
/// printed); ends when the container has ended.
fn follow_log(
    client: Client,
    ns: String,
    pod: String,
    tx: tokio::sync::mpsc::UnboundedSender<String>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<Pod> = Api::namespaced(client, &ns);
        let mut last: Option<String> = None;
        // Without timestamps, a new stream starts from the top again: skip what was sent.
        let mut sent_unstamped = 0usize;
        loop {
            let lp = LogParams { follow: true, timestamps: true, ..LogParams::default() };
            if let Ok(stream) = api.log_stream(&pod, &lp).await {
                let mut lines = stream.lines();
                let mut unstamped = 0usize;
                while let Some(Ok(l)) = lines.next().await {
                    // The kubelet's timestamp prefix, when it gives one (a kubelet may not).
                    let stamped = l
                        .split_once(' ')
                        .filter(|(ts, _)| ts.parse::<k8s_openapi::jiff::Timestamp>().is_ok());
                    let text = match stamped {
                        Some((ts, text)) => {
                            if last.as_deref().is_some_and(|t| ts <= t) {
                                continue;
                            }
                            last = Some(ts.to_owned());
                            text
                        }
                        None => {
                            unstamped += 1;
                            if unstamped <= sent_unstamped {
                                continue;
                            }
                            sent_unstamped = unstamped;
                            l.as_str()
                        }
                    };
                    if tx.send(text.to_owned()).is_err() {
                        return;
                    }
                }
            }
            // The stream ended: the container ended, or the connection broke.
            match api.get(&pod).await {
                Ok(p) if exit_code(&p).is_some() => return,
                Err(kube::Error::Api(s)) if s.code == 404 => return,
                _ => tokio::time::sleep(POLL).await,
            }
        }
    })
}

/// Follows the Job until it ends, with its events, its pod's and the members' (the
/// eviction, the replacement pod: a StatefulSet's pod keeps its name); Ctrl-C detaches.
#[allow(clippy::too_many_arguments)]
async fn follow(
    client: &Client,
    ns: &str,
    name: &str,
    members: &[String],
    t: Duration,
    planned: Duration,
    again: &str,
    shutdown: &mut std::pin::Pin<Box<impl Future<Output = ()>>>,
) -> Result<(Job, Option<Pod>), Error> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let mut out = Out::new();
    let mut seen = HashSet::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut log: Option<tokio::task::JoinHandle<()>> = None;
    let began = Instant::now();
    loop {
        let j = call("get the Job", t, jobs.get(name)).await?;
        let since = j.metadata.creation_timestamp.clone().map(|t| t.0);
        let pod = job_pod(client, ns, name, t).await?;
        for n in std::iter::once(name).chain(members.iter().map(String::as_str)) {
            for e in new_events(client, ns, n, since, &mut seen, t).await? {
                out.line(&e);
            }
        }
        if let Some(p) = &pod {
            let pname = p.metadata.name.clone().unwrap_or_default();
            for e in new_events(client, ns, &pname, since, &mut seen, t).await? {
                out.line(&e);
            }
            let started = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .is_some_and(|c| {
                    c.state.as_ref().is_some_and(|s| s.running.is_some() || s.terminated.is_some())
                });
            if log.is_none() && started {
                log = Some(follow_log(client.clone(), ns.to_owned(), pname, tx.clone()));
            }
        }
        while let Ok(l) = rx.try_recv() {
            out.line(&format!("  | {l}"));
        }
        if let Some(end) = finished(&j) {
            // The log's last lines (the result) before the end.
            if let Some(h) = log.take() {
                let _ = tokio::time::timeout(Duration::from_secs(10), h).await;
            }
            while let Ok(l) = rx.try_recv() {
                out.line(&format!("  | {l}"));
            }
            out.done();
            eprintln!("sitting: the Job ended: {} {}", end.0, end.1);
            return Ok((j, pod));
        }
        let start = j.status.as_ref().and_then(|s| s.start_time.clone()).map(|t| t.0);
        let elapsed = start
            .and_then(|s| utc(&s))
            .and_then(|s| (chrono::Utc::now() - s).to_std().ok())
            .unwrap_or_else(|| began.elapsed());
        let phase = pod
            .as_ref()
            .and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "no pod yet".into());
        let left = match planned.checked_sub(elapsed) {
            Some(l) => format!(
                "about {} left",
                humantime::format_duration(Duration::from_secs(l.as_secs()))
            ),
            None => "past the plan (recovery or a blocked eviction)".to_owned(),
        };
        out.status(&format!(
            "Job {ns}/{name}: pod {phase}, {} in, {left}",
            humantime::format_duration(Duration::from_secs(elapsed.as_secs()))
        ));
        tokio::select! {
            _ = shutdown.as_mut() => {
                out.done();
                if let Some(h) = log.take() {
                    h.abort();
                }
                return Err(Error::Detached(format!(
                    "detached; the sitting goes on in the cluster (Job {ns}/{name}). Follow it again: leaderwatch sitting --attach{again}"
                )));
            }
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// Brings the Job's run directory back into `dest` through a pod's log.
async fn fetch(
    client: &Client,
    job: &Job,
    run: &str,
    dest: &Path,
    t: Duration,
) -> Result<pack::Unpacked, Error> {
    let ns = job.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // One fetch at a time: an earlier one's pod goes first.
    let _ = pods.delete(FETCH_POD, &DeleteParams::default()).await;
    let began = Instant::now();
    while call("get the fetch pod", t, pods.get_opt(FETCH_POD)).await?.is_some() {
        if began.elapsed() > Duration::from_secs(60) {
            return Err(step(
                "fetch",
                format!("an earlier pod {ns}/{FETCH_POD} is still there after 60 s"),
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let pod = job::fetch_pod(job, FETCH_POD, run).map_err(|e| step("fetch", e))?;
    k8s::job::create_pod(client, &pod, t).await?;
    let began = Instant::now();
    let phase = loop {
        let p = call("get the fetch pod", t, pods.get(FETCH_POD)).await?;
        let phase = p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            break phase;
        }
        if began.elapsed() > FETCH_WITHIN {
            let waiting = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.waiting.as_ref())
                .map(|w| {
                    format!(
                        " ({}: {})",
                        w.reason.clone().unwrap_or_default(),
                        w.message.clone().unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            return Err(step(
                "fetch",
                format!(
                    "pod {ns}/{FETCH_POD} still {phase} after {}{waiting}; the run stays on the PVC",
                    humantime::format_duration(FETCH_WITHIN)
                ),
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let log = call(
        "read the fetch pod's log",
        t.max(Duration::from_secs(60)),
        pods.logs(FETCH_POD, &LogParams::default()),
    )
    .await?;
    let r = if phase == "Failed" {
        let last = log.lines().last().unwrap_or("").to_owned();
        Err(step("fetch", format!("pod {ns}/{FETCH_POD} failed: {last}")))
    } else {
        pack::unpack(&log, dest).map_err(|e| step("fetch", e))
    };
    if r.is_ok() {
        let _ = pods.delete(FETCH_POD, &DeleteParams::default()).await;
    }
    r
}

/// The README's table from every baseline in `out_dir`.
fn render_readme(readme: &Path, out_dir: &Path) -> Result<(), Error> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(out_dir)
        .map_err(|e| Error::input(out_dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path().join(BASELINE)))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    let baselines =
        paths.iter().map(|p| crate::io::read::baseline_file(p)).collect::<Result<Vec<_>, _>>()?;
    let changed = crate::io::readme::rewrite(readme, |text, dir| {
        crate::render::report::updated(text, dir, &baselines)
    })?;
    eprintln!(
        "sitting: {} {} ({} runs in {})",
        readme.display(),
        if changed { "table updated" } else { "table already up to date" },
        baselines.len(),
        out_dir.display()
    );
    Ok(())
}

pub async fn command(a: SittingArgs, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    let mut shutdown = Box::pin(shutdown);
    let m = manifests()?;
    let ns = m.job.metadata.namespace.clone().unwrap_or_else(|| "dlock".into());
    let name = m.job.metadata.name.clone().unwrap_or_else(|| "leaderwatch-measure".into());
    let t = a.conn.request_timeout;
    let o = KubeOptions {
        kubeconfig: a.conn.kubeconfig.clone(),
        context: a.conn.context.clone(),
        namespace: ns.clone(),
        selector: "app.kubernetes.io/name=dlock-etcd".into(),
        request_timeout: t,
    };
    let client = k8s::client(&o).await?;
    let version = call("version", t, client.apiserver_version()).await?;
    eprintln!(
        "sitting: Kubernetes {} (context {})",
        version.git_version,
        a.conn.context.as_deref().unwrap_or("the kubeconfig's current one")
    );
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let method: KubeMethod = a.method;

    if !a.attach && !a.fetch {
        // 1. checks
        let image = a.image.clone().unwrap_or_default();
        check_image(&image)?;
        let nss: Api<Namespace> = Api::all(client.clone());
        if call("get namespace", t, nss.get_opt(&ns)).await?.is_none() {
            return Err(step(
                "checks",
                format!("namespace {ns} not found: deploy etcd first (deploy/k8s/apply.sh)"),
            ));
        }
        if let Some(j) = call("get the Job", t, jobs.get_opt(&name)).await? {
            let since =
                j.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()).unwrap_or_default();
            return Err(step(
                "checks",
                match finished(&j) {
                    Some((c, _)) => format!(
                        "Job {ns}/{name} from {since} exists ({c}): `leaderwatch sitting --fetch` brings its results back and removes it"
                    ),
                    None => format!(
                        "Job {ns}/{name} from {since} is running: `leaderwatch sitting --attach` follows it"
                    ),
                },
            ));
        }
        let env = crate::io::test_hooks::forwarded();
        let p = JobParams {
            image,
            target: a.target.clone(),
            method,
            idle: a.idle,
            settle: a.settle,
            environment: a.environment.clone(),
            env,
        };
        let the_job =
            Object::Job(Box::new(job::job(&m.job, &p).map_err(|e| step("manifests", e))?));
        let extra = extra_objects(method)?;
        let mut objects: Vec<&Object> = m.rbac.iter().chain(extra.iter()).collect();
        objects.push(&m.pvc);
        objects.push(&the_job);
        for ob in &objects {
            job::apply(&client, ob, true, t).await.map_err(|e| step("dry run", e.to_string()))?;
        }
        eprintln!("sitting: server-side dry run of {} objects: accepted", objects.len());
        let po = k8s::preflight::PreflightOptions::default();
        let checks = k8s::preflight::run_api(&client, &o, &po).await?;
        for c in &checks {
            eprintln!(
                "sitting: preflight {} {}: {}",
                if c.pass { "PASS" } else { "FAIL" },
                c.name,
                c.evidence
            );
        }
        let failed: Vec<&str> = checks.iter().filter(|c| !c.pass).map(|c| c.name).collect();
        if !failed.is_empty() {
            return Err(Error::Preflight(format!("{} (nothing applied)", failed.join(", "))));
        }
        // 2. apply
        for ob in &objects {
            job::apply(&client, ob, false, t).await?;
            eprintln!("sitting: applied {}", ob.describe());
        }
    }

    // 3. follow
    let j = match call("get the Job", t, jobs.get_opt(&name)).await? {
        Some(j) => j,
        None => {
            return Err(step(
                "follow",
                format!(
                    "no Job {ns}/{name} in the cluster: start one with `leaderwatch sitting --image ...`"
                ),
            ));
        }
    };
    let planned = [job_arg(&j, "--idle"), job_arg(&j, "--settle")]
        .iter()
        .map(|d| d.as_deref().and_then(|d| humantime::parse_duration(d).ok()).unwrap_or_default())
        .sum::<Duration>()
        + Duration::from_secs(60);
    let (j, pod) = if a.fetch {
        if finished(&j).is_none() {
            return Err(step(
                "fetch",
                format!(
                    "Job {ns}/{name} is still running: `leaderwatch sitting --attach` follows it and fetches at its end"
                ),
            ));
        }
        let pod = job_pod(&client, &ns, &name, t).await?;
        (j, pod)
    } else {
        // The flags that reach this cluster again, for the line a detach prints.
        let mut again = String::new();
        if let Some(c) = &a.conn.context {
            again.push_str(&format!(" --context {c}"));
        }
        if let Some(k) = &a.conn.kubeconfig {
            again.push_str(&format!(" --kubeconfig {}", k.display()));
        }
        let members: Vec<String> = k8s::discover::pods(&client, &o)
            .await?
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        follow(&client, &ns, &name, &members, t, planned, &again, &mut shutdown).await?
    };
    let code = pod.as_ref().and_then(exit_code);

    // 4. fetch
    let run = pod.as_ref().and_then(|p| p.metadata.name.clone()).ok_or_else(|| {
        step(
            "fetch",
            format!(
                "Job {ns}/{name} has no pod any more, so its run directory on the PVC is unknown"
            ),
        )
    })?;
    let target = job_arg(&j, "--target").unwrap_or_else(|| "follower".into());
    let method_run = job_arg(&j, "--method").unwrap_or_else(|| "evict".into());
    let when = j
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| utc(&t.0))
        .map(|t| t.format("%Y%m%dT%H%M%SZ").to_string())
        .unwrap_or_default();
    let dest = a.out_dir.join(format!("{}-{target}-{method_run}-{when}", a.label));
    std::fs::create_dir_all(&a.out_dir).map_err(|source| {
        Error::Record(crate::io::record::RecordError::Io { path: a.out_dir.clone(), source })
    })?;
    let got = fetch(&client, &j, &run, &dest, t).await.map_err(|e| match e {
        Error::Step { step, message } => Error::Step {
            step,
            message: format!(
                "{message} (the Job and the PVC are kept: `leaderwatch sitting --fetch` tries again; `kubectl -n {ns} delete job {name}` gives the run up)"
            ),
        },
        e => e,
    })?;
    eprintln!(
        "sitting: {} files ({} bytes) of run {run} fetched into {}, {}",
        got.files,
        got.bytes,
        dest.display(),
        if got.job_sums {
            "each checked against the Job's SHA256SUMS"
        } else {
            "no SHA256SUMS from the Job (it ended early): checked against the archive's checksum only"
        }
    );

    // 5. tables and the note
    let path = dest.join(BASELINE);
    let outcome = if path.is_file() {
        let f = crate::io::read::baseline_file(&path)?;
        if a.readme.is_file() {
            render_readme(&a.readme, &a.out_dir)?;
        }
        println!("{}", crate::render::report::render(std::slice::from_ref(&f), None));
        println!();
        println!("{}", crate::render::report::ledger_note(&f));
        if f.baseline.is_complete() {
            Ok(())
        } else {
            Err(Error::Incomplete(
                f.baseline.incomplete_reason.clone().unwrap_or_else(|| "see baseline.json".into()),
            ))
        }
    } else {
        Err(step(
            "sitting",
            format!(
                "the Job ended (exit {}) without a baseline.json; what it wrote is in {}",
                code.map_or("unknown".into(), |c| c.to_string()),
                dest.display()
            ),
        ))
    };

    // 6. clean up what this sitting made (the fetched run is safe now)
    if !a.keep {
        job::delete(&client, &Object::Job(Box::new(j.clone())), t).await?;
        eprintln!("sitting: deleted Job {ns}/{name} and its pod");
        let m_run: KubeMethod = method_run.parse().unwrap_or(KubeMethod::Evict);
        for ob in extra_objects(m_run)? {
            job::delete(&client, &ob, t).await?;
            eprintln!("sitting: deleted {}", ob.describe());
        }
    }
    if a.cleanup_pvc {
        job::delete(&client, &m.pvc, t).await?;
        eprintln!("sitting: deleted {}", m.pvc.describe());
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_docs_placeholder_and_non_references_are_refused_as_images() {
        assert!(check_image("europe-west1-docker.pkg.dev/my-proj/dlock/leaderwatch:0.1.0").is_ok());
        assert!(
            check_image("europe-west1-docker.pkg.dev/PROJECT/dlock/leaderwatch:0.1.0").is_err()
        );
        assert!(check_image("leaderwatch").is_err());
        assert!(check_image("a b/c").is_err());
    }
}
