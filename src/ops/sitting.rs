//! What `leaderwatch sitting` runs: the sitting run in the cluster as the committed Job,
//! driven from a machine with a kubeconfig, from the checks to the results in `data/`. The
//! steps are in the command's help (src/cli.rs) and [`sitting`] runs them in order; the objects
//! and the fetch come from src/k8s/job.rs, following the Job from src/k8s/follow.rs, the
//! copy of the run directory from src/io/pack.rs, the tables from src/render/report.rs.
//!
//! Nothing here deletes a sitting that runs: Ctrl-C only stops following it, and a fetch
//! that fails keeps the Job and the volume for `--fetch` to try again.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::Api;

use crate::Error;
use crate::k8s::follow::{self, Followed, JobLog, JobRef};
use crate::k8s::job::{self, FetchError, JobParams, Object};
use crate::k8s::{self, KubeError, KubeOptions, call};
use crate::model::baseline::{BASELINE, KubeMethod};
use crate::model::build::Build;
use crate::model::exit;
use crate::ops::measure::args::MeasureArgs;
use crate::render::progress::StatusLine;

mod handoff;
mod options;
mod remember;
use handoff::{Paths, paths};
pub use options::{Mode, SittingOptions};
use remember::Remembered;

fn step(step: &'static str, message: impl Into<String>) -> Error {
    Error::Step { step, message: message.into() }
}

/// The manifests' objects the sitting applies: the PVC and the Job template (the RBAC is
/// A Job's `measure` arguments, read as the Job's binary reads them (src/ops/measure/args.rs).
fn job_args(j: &Job) -> Result<MeasureArgs, Error> {
    MeasureArgs::parse_job(&job::args_of(j)).map_err(|e| step("the Job's arguments", e))
}

/// an admin's: [`check`] only looks for it).
struct Manifests {
    pvc: Object,
    job: Job,
    /// The live view (`--pod-monitoring`), podmonitoring-sitting.yaml.
    pod_monitoring: Object,
}

fn manifests() -> Result<Manifests, Error> {
    let bad = |e: String| step("manifests", e);
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
    let pod_monitoring = match job::parse("podmonitoring-sitting.yaml", job::POD_MONITORING)
        .map_err(bad)?
        .pop()
    {
        Some(o @ Object::PodMonitoring(_)) => o,
        _ => return Err(step("manifests", "podmonitoring-sitting.yaml: a PodMonitoring expected")),
    };
    match (pvc, template) {
        (Some(pvc), Some(job)) => Ok(Manifests { pvc, job, pod_monitoring }),
        _ => Err(step("manifests", "job-measure.yaml: a PVC and a Job expected")),
    }
}

/// A tag is said before anything is applied: the digest pins what the nodes run.
fn warn_on_a_tag(image: &str) {
    if !job::pinned(image) {
        eprintln!(
            "sitting: warning: --image {image} is a tag, which can move: the Job pulls it on start (imagePullPolicy Always); pin the digest the push printed (...@sha256:...)"
        );
    }
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

/// A sitting, attached to or fetched as `a.mode` says: the steps of the command's help, in
/// order.
pub async fn sitting(a: SittingOptions, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    steps(a, shutdown).await.map_err(for_the_operator)
}

/// A refusal here is the operator's own credentials': the advice is their role, not the
/// Job's ServiceAccount's (which the Kubernetes layer's message names).
fn for_the_operator(e: Error) -> Error {
    match e {
        Error::Kube(KubeError::Forbidden { what, message }) => Error::Kube(KubeError::Api {
            what,
            message: format!(
                "forbidden ({message}); deploy/k8s/leaderwatch/operator-rbac.yaml is what the person running a sitting needs (docs/gke-sitting.md, \"The operator's rights\")"
            ),
        }),
        e => e,
    }
}

async fn steps(mut a: SittingOptions, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    let mut shutdown = Box::pin(shutdown);
    let (s, paths) = if a.attach() || a.fetch() {
        // The flags it was started with come with the Job.
        let s = Cluster::connect(&a).await?;
        recall(&mut a, &s).await?;
        (s, paths(&a)?)
    } else {
        // Bad input is said before any request.
        crate::ops::trial_windows(a.idle, a.settle, a.dry_run).map_err(Error::Usage)?;
        let paths = paths(&a)?;
        (Cluster::connect(&a).await?, paths)
    };
    if !a.attach() && !a.fetch() {
        let objects = check(&a, &s).await?;
        apply(&s, &objects).await?;
        let j = call("get the Job", s.t, s.jobs().get(&s.name)).await?;
        if let Some(uid) = j.metadata.uid.as_deref() {
            remember::save(uid, &Remembered::of(&a));
        }
    }
    let (j, pod, log) = follow_or_find(&a, &s, shutdown.as_mut()).await?;
    let args = job_args(&j)?;
    if let Some(e) = no_run_directory(pod.as_ref(), &log) {
        clean_up(&a, &s, &j, args.method).await?;
        return Err(e.with_clean_up(&a, &s));
    }
    let dest = fetch(&a, &paths, &s, &j, pod.as_ref(), &args).await?;
    if let Some(d) = crate::io::test_hooks::pause_after_fetch().map_err(Error::Usage)? {
        tokio::time::sleep(d).await;
    }
    // From here on every step is idempotent: a second `--fetch` finds the run fetched and
    // does them again.
    let outcome = results(&paths, &dest, pod.as_ref()).map_err(|e| unfinished(&s, e))?;
    clean_up(&a, &s, &j, args.method).await.map_err(|e| unfinished(&s, e))?;
    outcome
}

/// `--attach`, `--fetch`: the flags the sitting was started with, where this machine
/// started it and they are not given again.
async fn recall(a: &mut SittingOptions, s: &Cluster) -> Result<(), Error> {
    let Some(j) = call("get the Job", s.t, s.jobs().get_opt(&s.name)).await? else {
        return Ok(());
    };
    let Some(uid) = j.metadata.uid.as_deref() else { return Ok(()) };
    if let Some((path, r)) = remember::load(uid)? {
        r.fill(a);
        eprintln!(
            "sitting: as it was started here: {} (remembered in {})",
            Remembered::of(a).flags(),
            path.display()
        );
    }
    Ok(())
}

/// A step after the fetch failed: the run is safe on disk, and `--fetch` takes it from
/// there (the hand-off and the clean-up again, no second fetch). Said on the line before
/// the error's own, which keeps its exit code.
fn unfinished(s: &Cluster, e: Error) -> Error {
    eprintln!(
        "sitting: the run is fetched and safe; `leaderwatch sitting --fetch` finishes the hand-off and removes Job {}/{} without fetching it again",
        s.ns, s.name
    );
    e
}

/// The cluster a sitting runs in: the client, and where the committed manifests put the
/// Job.
struct Cluster {
    m: Manifests,
    client: Client,
    o: KubeOptions,
    /// The Job's namespace (`leaderwatch`); `o.namespace` is the members' (`dlock`).
    ns: String,
    name: String,
    /// The Job's ServiceAccount, whose rights an admin bound.
    sa: String,
    /// The bound on each API request (`--request-timeout`).
    t: Duration,
}

impl Cluster {
    /// The manifests, a client for `--kubeconfig`/`--context`, and the server's version
    /// said on stderr (the first request: a cluster that cannot be reached fails here).
    async fn connect(a: &SittingOptions) -> Result<Cluster, Error> {
        let m = manifests()?;
        let ns = m.job.metadata.namespace.clone().unwrap_or_else(|| "leaderwatch".into());
        let name = m.job.metadata.name.clone().unwrap_or_else(|| "leaderwatch-measure".into());
        let spec = m.job.spec.as_ref().and_then(|s| s.template.spec.as_ref());
        let sa = spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "leaderwatch".into());
        let t = a.request_timeout;
        let o = KubeOptions {
            kubeconfig: a.kubeconfig.clone(),
            context: a.context.clone(),
            namespace: job_args(&m.job)?.kube.namespace,
            selector: "app.kubernetes.io/name=dlock-etcd".into(),
            request_timeout: t,
        };
        let client = k8s::client(&o).await?;
        let version = call("version", t, client.apiserver_version()).await?;
        eprintln!(
            "sitting: Kubernetes {} (context {})",
            version.git_version,
            a.context.as_deref().unwrap_or("the kubeconfig's current one")
        );
        Ok(Cluster { m, client, o, ns, name, sa, t })
    }

    fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn job_ref(&self) -> JobRef<'_> {
        JobRef {
            client: &self.client,
            ns: &self.ns,
            members_ns: &self.o.namespace,
            name: &self.name,
            timeout: self.t,
        }
    }
}

/// Step 1, the checks, before anything is applied: the image reference, both namespaces,
/// the Job's rights (an admin's to apply), no Job of an earlier sitting, a server-side dry
/// run of every object, the preflight's API checks. Returns the objects to apply, the Job
/// made from the user's flags among them.
async fn check(a: &SittingOptions, s: &Cluster) -> Result<Vec<Object>, Error> {
    let image = a.image.clone().unwrap_or_default();
    check_image(&image)?;
    warn_on_a_tag(&image);
    let nss: Api<Namespace> = Api::all(s.client.clone());
    for (ns, how) in [
        (&s.o.namespace, "deploy etcd first (deploy/k8s/apply.sh)"),
        (&s.ns, "a cluster admin applies deploy/k8s/leaderwatch/rbac.yaml"),
    ] {
        if call("get namespace", s.t, nss.get_opt(ns)).await?.is_none() {
            return Err(step("checks", format!("namespace {ns} not found: {how}")));
        }
    }
    let rights = job::rights_for(a.method, &s.ns, &s.sa).map_err(|e| step("manifests", e))?;
    if let Some(missing) = job::rights_bound(&s.client, &rights, a.method, s.t).await? {
        return Err(step("checks", format!("{missing}; nothing applied")));
    }
    eprintln!(
        "sitting: the Job's rights for --method {} are bound ({} objects)",
        a.method.as_str(),
        rights.len()
    );
    refuse_an_earlier_job(s).await?;
    let arch = image_arch(&image, s.t).await?;
    let (idle, settle) =
        crate::ops::trial_windows(a.idle, a.settle, a.dry_run).map_err(Error::Usage)?;
    // The committed manifest's arguments (clap's defaults for the rest), with the user's.
    let mut m = job_args(&s.m.job)?;
    m.target = a.target.clone();
    m.method = a.method;
    (m.idle, m.settle) = (Some(idle), Some(settle));
    m.timeouts.evict_timeout = a.evict_timeout;
    m.timeouts.recovery_timeout = a.recovery_timeout;
    m.environment = a.environment.clone();
    m.checksums = true;
    m.expect_build = Some(Build::this());
    m.dry_run = a.dry_run;
    let p = JobParams {
        image,
        args: m.to_args(),
        runs_for: idle + settle + a.evict_timeout + a.recovery_timeout,
        env: crate::io::test_hooks::forwarded(),
        arch,
    };
    let j = job::job(&s.m.job, &p).map_err(|e| step("manifests", e))?;
    let deadline = j.spec.as_ref().and_then(|s| s.active_deadline_seconds).unwrap_or(0);
    let d = |d: Duration| humantime::format_duration(d).to_string();
    eprintln!(
        "sitting: {}{} at rest, the {} and the recovery (a minute or two; up to {} blocked and {} to recover), {} to settle: about {} in all, {} at most (the Job's deadline)",
        if a.dry_run { "a dry run: " } else { "" },
        d(idle),
        a.method.as_str(),
        d(a.evict_timeout),
        d(a.recovery_timeout),
        d(settle),
        d(idle + settle + Duration::from_secs(120)),
        d(Duration::from_secs(u64::try_from(deadline).unwrap_or(0))),
    );
    let the_job = Object::Job(Box::new(j));
    let mut objects = vec![s.m.pvc.clone(), the_job];
    if a.pod_monitoring {
        objects.push(s.m.pod_monitoring.clone());
    }
    for ob in &objects {
        job::apply(&s.client, ob, true, s.t).await.map_err(|e| match ob {
            Object::PodMonitoring(_) if e.status() == Some(404) => step(
                "dry run",
                format!("--pod-monitoring: the cluster has no PodMonitoring resource (monitoring.googleapis.com/v1), so Managed Service for Prometheus's managed collection is off: run without --pod-monitoring, or turn it on (docs/gke-sitting.md, \"The live view\"); nothing applied ({e})"),
            ),
            _ => step("dry run", e.to_string()),
        })?;
    }
    eprintln!("sitting: server-side dry run of {} objects: accepted", objects.len());
    preflight(s).await?;
    Ok(objects)
}

/// The architecture the Job asks its node for: the image's, read from its registry, when it
/// is built for one (linux/amd64 or linux/arm64). An image for none of them is refused; an
/// image for several, or a registry this machine cannot read, sets none (said).
async fn image_arch(image: &str, t: Duration) -> Result<Option<String>, Error> {
    use crate::io::registry;
    let platforms = match registry::Reference::parse(image) {
        Ok(r) => registry::platforms(&r, t).await,
        Err(e) => Err(e),
    };
    let platforms = match platforms {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "sitting: warning: the image's architecture is not known ({e}): the Job asks for none (GKE's nodes are amd64 unless asked; a binary for another CPU is said when it fails)"
            );
            return Ok(None);
        }
    };
    let runnable: Vec<&registry::Platform> = platforms
        .iter()
        .filter(|p| p.os == "linux" && matches!(p.architecture.as_str(), "amd64" | "arm64"))
        .collect();
    let all = platforms.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    match runnable.as_slice() {
        [] => Err(step(
            "checks",
            format!(
                "--image {image} is built for {}: not linux/amd64 or linux/arm64, which GKE's nodes are (build it with --platform linux/amd64: docs/gke-sitting.md, step 3); nothing applied",
                if all.is_empty() { "no platform it says" } else { &all }
            ),
        )),
        [one] => {
            eprintln!(
                "sitting: the image is {one}: the Job asks for {} nodes ({}={})",
                one.architecture,
                job::ARCH_LABEL,
                one.architecture
            );
            Ok(Some(one.architecture.clone()))
        }
        _ => {
            eprintln!(
                "sitting: the image is built for {all}: each node pulls its own, the Job asks for none"
            );
            Ok(None)
        }
    }
}

/// A Job of an earlier sitting is left to `--fetch` (ended) or `--attach` (running):
/// applying over it would lose its results.
async fn refuse_an_earlier_job(s: &Cluster) -> Result<(), Error> {
    let Some(j) = call("get the Job", s.t, s.jobs().get_opt(&s.name)).await? else {
        return Ok(());
    };
    let since = j.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()).unwrap_or_default();
    let (ns, name) = (&s.ns, &s.name);
    Err(step(
        "checks",
        match follow::finished(&j) {
            Some((c, _)) => format!(
                "Job {ns}/{name} from {since} exists ({c}): `leaderwatch sitting --fetch` brings its results back and removes it"
            ),
            None => format!(
                "Job {ns}/{name} from {since} is running: `leaderwatch sitting --attach` follows it"
            ),
        },
    ))
}

/// The preflight's API checks (members, zones, PVCs, PDB), each said on stderr; one
/// failing is [`Error::Preflight`] with nothing applied.
async fn preflight(s: &Cluster) -> Result<(), Error> {
    let po = k8s::preflight::PreflightOptions::default();
    let checks = k8s::preflight::run_api(&s.client, &s.o, &po).await?;
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
    Ok(())
}

/// Step 2: applies the objects the checks accepted, in order (the volume before the Job).
async fn apply(s: &Cluster, objects: &[Object]) -> Result<(), Error> {
    for ob in objects {
        job::apply(&s.client, ob, false, s.t).await?;
        eprintln!("sitting: applied {}", ob.describe());
    }
    Ok(())
}

/// Step 3: the Job in the cluster, followed to its end (or, `--fetch`, found ended), its
/// pod and what its log said. Ctrl-C, or an API that stays away, is [`Error::Detached`]
/// with the command that follows it again; a pod that cannot start removes the Job (it ran
/// nothing) and says why.
async fn follow_or_find<F: Future<Output = ()>>(
    a: &SittingOptions,
    s: &Cluster,
    shutdown: Pin<&mut F>,
) -> Result<(Job, Option<Pod>, JobLog), Error> {
    let (ns, name) = (&s.ns, &s.name);
    let Some(j) = call("get the Job", s.t, s.jobs().get_opt(name)).await? else {
        return Err(step(
            "follow",
            format!(
                "no Job {ns}/{name} in the cluster: start one with `leaderwatch sitting --image ...`"
            ),
        ));
    };
    if a.fetch() {
        if follow::finished(&j).is_none() {
            return Err(step(
                "fetch",
                format!(
                    "Job {ns}/{name} is still running: `leaderwatch sitting --attach` follows it and fetches at its end"
                ),
            ));
        }
        let pod = follow::job_pod(&s.job_ref(), &j).await?;
        let log = follow::log_tail(&s.job_ref(), pod.as_ref()).await;
        return Ok((j, pod, log));
    }
    let args = job_args(&j)?;
    let planned =
        args.idle.unwrap_or_default() + args.settle.unwrap_or_default() + Duration::from_secs(60);
    let members: Vec<String> = k8s::discover::pods(&s.client, &s.o)
        .await?
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let mut out = StatusLine::new("sitting: ");
    let r = a.reconnect_for;
    match follow::follow(&s.job_ref(), &members, planned, r, &mut out, shutdown).await? {
        Followed::Ended { job, pod, condition, reason, log } => {
            eprintln!("sitting: the Job ended: {condition} {reason}");
            Ok((*job, pod.map(|p| *p), log))
        }
        Followed::Detached => Err(Error::Detached(format!(
            "detached; the sitting goes on in the cluster (Job {ns}/{name}). Follow it again: leaderwatch sitting --attach{}",
            again(a)
        ))),
        Followed::Lost { error, down_for } => Err(Error::Detached(format!(
            "the Kubernetes API did not answer for {} ({error}); the sitting goes on in the cluster (Job {ns}/{name}). Follow it again: leaderwatch sitting --attach{}",
            humantime::format_duration(Duration::from_secs(down_for.as_secs())),
            again(a)
        ))),
        Followed::Stuck { trouble, .. } => {
            clean_up(a, s, &j, args.method).await?;
            let e = NoRun { cause: format!("{}: {}", trouble.cause, trouble.kind.advice()) };
            Err(e.with_clean_up(a, s))
        }
    }
}

/// The Job ran nothing worth fetching: it ended before it wrote a run directory, or its
/// pod never started.
struct NoRun {
    cause: String,
}

impl NoRun {
    /// The one line: the cause, and what was removed (or kept, with `--keep`).
    fn with_clean_up(self, a: &SittingOptions, s: &Cluster) -> Error {
        let done = if a.keep {
            format!("Job {}/{} kept (--keep): delete it before the next sitting", s.ns, s.name)
        } else {
            format!("deleted Job {}/{}; nothing was disrupted", s.ns, s.name)
        };
        step("job", format!("{}; {done}", self.cause))
    }
}

/// Whether the ended Job wrote no run directory: its container never ran, or `measure`
/// ended, whatever its exit code, before its log said it opened one. Then `--fetch` could
/// never succeed, and the Job is removed. A log that could not be read at all says
/// nothing: only the exit codes that end `measure` before its run directory (2, bad
/// arguments or another build; 7, its preflight) count then.
fn no_run_directory(pod: Option<&Pod>, log: &JobLog) -> Option<NoRun> {
    let tail = || match log.last.as_slice() {
        [] => String::from("(no log)"),
        lines => lines.join(" | "),
    };
    let Some(p) = pod else {
        return Some(NoRun { cause: "the Job ended without a pod".into() });
    };
    if let Some(why) = follow::never_ran(p) {
        let arch = if why.contains("exec format error") { WRONG_ARCH } else { "" };
        return Some(NoRun { cause: format!("the Job's container never ran ({why}){arch}") });
    }
    let code = follow::exit_code(p)?;
    if log.last.iter().any(|l| l.contains("exec format error")) {
        return Some(NoRun {
            cause: format!(
                "the Job's program could not start (exit {code}: {}){WRONG_ARCH}",
                tail()
            ),
        });
    }
    let early = if log.read {
        !log.run_dir && code != 0
    } else {
        matches!(code, exit::USAGE | exit::PREFLIGHT)
    };
    early.then(|| NoRun {
        cause: format!("the Job ended (exit {code}) before it wrote a run directory: {}", tail()),
    })
}

/// What an `exec format error` means, said once.
const WRONG_ARCH: &str = ": the image is for another CPU architecture than the node (build it for the node's, linux/amd64 on GKE: docs/gke-sitting.md)";

/// The flags that reach this cluster again, for the line a detach prints.
fn again(a: &SittingOptions) -> String {
    let mut again = String::new();
    if let Some(c) = &a.context {
        again.push_str(&format!(" --context {c}"));
    }
    if let Some(k) = &a.kubeconfig {
        again.push_str(&format!(" --kubeconfig {}", k.display()));
    }
    again
}

/// Step 4: the Job's run directory into OUT-DIR/LABEL-TARGET-METHOD-UTC, every file
/// checked. A failure keeps the Job and the PVC, and says how to try again.
async fn fetch(
    a: &SittingOptions,
    paths: &Paths,
    s: &Cluster,
    j: &Job,
    pod: Option<&Pod>,
    args: &MeasureArgs,
) -> Result<PathBuf, Error> {
    let (ns, name) = (&s.ns, &s.name);
    let run = pod.and_then(|p| p.metadata.name.clone()).ok_or_else(|| {
        step(
            "fetch",
            format!(
                "Job {ns}/{name} has no pod any more, so its run directory on the PVC is unknown"
            ),
        )
    })?;
    let when = j
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| follow::utc(&t.0))
        .map(|t| t.format("%Y%m%dT%H%M%SZ").to_string())
        .unwrap_or_default();
    let dry = if args.dry_run { "-dry-run" } else { "" };
    let out_dir = &paths.out_dir;
    let dest = out_dir.join(format!("{}-{}-{}{dry}-{when}", a.label(), args.target, args.method));
    if dest.exists() {
        return match crate::io::pack::verify_listed(&dest) {
            Ok(sums) => {
                eprintln!(
                    "sitting: run {run} is in {} already, its {} files each checked against the Job's SHA256SUMS: not fetched again",
                    dest.display(),
                    sums.len()
                );
                Ok(dest)
            }
            Err(why) => Err(step(
                "fetch",
                format!(
                    "{} exists but is not this run fetched whole ({why}); nothing was written: move it away and `leaderwatch sitting --fetch` fetches again",
                    dest.display()
                ),
            )),
        };
    }
    std::fs::create_dir_all(out_dir).map_err(|source| {
        Error::Record(crate::io::run_dir::RecordError::Io { path: out_dir.clone(), source })
    })?;
    let got = job::fetch(&s.client, j, &run, &dest, s.t).await.map_err(|e| match e {
        FetchError::Kube(e) => Error::Kube(e),
        FetchError::Failed(message) => step(
            "fetch",
            format!(
                "{message} (the Job and the PVC are kept: `leaderwatch sitting --fetch` tries again; `kubectl -n {ns} delete job {name}` gives the run up)"
            ),
        ),
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
    Ok(dest)
}

/// Step 5: the README's table and this run's, and the T-056 note. The outer error stops
/// the command before the clean-up (the run's files could not be read or the README not
/// written: the Job stays, and `--fetch` does this again); the inner one is the sitting's own outcome
/// (incomplete, or no baseline.json at all), returned after the clean-up.
fn results(paths: &Paths, dest: &Path, pod: Option<&Pod>) -> Result<Result<(), Error>, Error> {
    let path = dest.join(BASELINE);
    if !path.is_file() {
        return Ok(Err(step(
            "sitting",
            format!(
                "the Job ended (exit {}) without a baseline.json; what it wrote is in {}",
                pod.and_then(follow::exit_code).map_or("unknown".into(), |c| c.to_string()),
                dest.display()
            ),
        )));
    }
    let f = crate::io::read::baseline_file(&path)?;
    handoff::write(paths, &f)?;
    println!("{}", crate::render::report::render(std::slice::from_ref(&f), None));
    println!();
    println!("{}", crate::render::report::ledger_note(&f));
    Ok(if f.baseline.is_complete() {
        Ok(())
    } else {
        Err(Error::Incomplete(
            f.baseline.incomplete_reason.clone().unwrap_or_else(|| "see baseline.json".into()),
        ))
    })
}

/// Step 6: removes what this sitting made (the fetched run is safe now): the Job and its
/// pod unless `--keep`, the PVC with `--cleanup-pvc`. The method's extra RBAC is an
/// admin's: said, not touched.
async fn clean_up(
    a: &SittingOptions,
    s: &Cluster,
    j: &Job,
    method: KubeMethod,
) -> Result<(), Error> {
    if !a.keep {
        let the_job = Object::Job(Box::new(j.clone()));
        retried(|| job::delete(&s.client, &the_job, s.t)).await?;
        eprintln!("sitting: deleted Job {}/{} and its pod", s.ns, s.name);
    }
    if let Some((file, _)) = job::extra_rbac(method) {
        eprintln!(
            "sitting: the Job's extra rights for --method {} stay until a cluster admin removes them: kubectl delete -f deploy/k8s/leaderwatch/{file}",
            method.as_str()
        );
    }
    if a.cleanup_pvc {
        retried(|| job::delete(&s.client, &s.m.pvc, s.t)).await?;
        eprintln!("sitting: deleted {}", s.m.pvc.describe());
    }
    // The live view has nothing more to show: gone whether or not this machine applied it
    // (none, or a cluster without the resource, is fine).
    if pod_monitoring_applied(s).await? {
        retried(|| job::delete(&s.client, &s.m.pod_monitoring, s.t)).await?;
        eprintln!("sitting: deleted {}", s.m.pod_monitoring.describe());
    }
    // Its hand-off is done: nothing is left to remember.
    if let Some(uid) = j.metadata.uid.as_deref() {
        remember::forget(uid);
    }
    Ok(())
}

/// Whether the live view's PodMonitoring is in the cluster (a cluster without the
/// resource has none).
async fn pod_monitoring_applied(s: &Cluster) -> Result<bool, Error> {
    match job::get(&s.client, &s.m.pod_monitoring, s.t).await {
        Ok(found) => Ok(found),
        Err(e) if e.status() == Some(404) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A clean-up request tried again while it fails for a reason that can clear (no answer,
/// the server's 5xx), each wait twice the last from 1 s, for about a minute.
async fn retried<F, Fut>(mut request: F) -> Result<(), KubeError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), KubeError>>,
{
    let mut wait = Duration::from_secs(1);
    loop {
        match request().await {
            Err(e) if e.transient() && wait <= Duration::from_secs(32) => {
                eprintln!("sitting: clean-up: {e}; trying again in {}s", wait.as_secs());
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            r => return r,
        }
    }
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

    #[test]
    fn a_refusal_points_the_operator_to_their_role_and_keeps_exit_6() {
        let e = Error::Kube(KubeError::Forbidden {
            what: "get namespace".into(),
            message: "User \"me\" cannot get resource \"namespaces\"".into(),
        });
        let e = for_the_operator(e);
        assert!(matches!(e, Error::Kube(_)), "still the Kubernetes exit code");
        let text = e.to_string();
        assert!(text.contains("cannot get resource") && text.contains("operator-rbac.yaml"));
        assert!(!text.contains("rbac-maintenance.yaml"), "not the Job's advice: {text}");
    }

    fn ended(code: i32, reason: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "leaderwatch-measure-x"},
            "status": {"phase": "Failed", "containerStatuses": [{
                "name": "leaderwatch", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": code, "reason": reason}}
            }]}
        }))
        .expect("pod")
    }

    fn log(lines: &[&str]) -> JobLog {
        let mut l = JobLog::default();
        for line in lines {
            l.read = true;
            l.run_dir |= line.starts_with(follow::RUN_DIR_OPENED);
            l.last.push((*line).to_owned());
        }
        l
    }

    #[test]
    fn any_exit_before_the_run_directory_is_named_with_its_code_and_never_fetched() {
        let cause = |p: &Pod, l: &JobLog| no_run_directory(Some(p), l).map(|n| n.cause);
        let early = log(&["leaderwatch 0.1.0 commit abc", "thread 'main' panicked at src/x.rs"]);
        for code in [1, 2, 6, 7, 101, 137] {
            let c = cause(&ended(code, "Error"), &early).expect("no run directory");
            assert!(c.contains(&format!("exit {code}")) && c.contains("panicked"), "{c}");
        }
        let ran = log(&["leaderwatch 0.1.0 commit abc", "run directory opened: /data/x", "bye"]);
        for code in [0, 1, 5, 137] {
            assert!(cause(&ended(code, "Error"), &ran).is_none(), "exit {code}: fetch");
        }
        // Nothing read of the log: only the codes measure ends with before its directory.
        let unread = JobLog::default();
        assert!(cause(&ended(1, "Error"), &unread).is_none());
        assert!(cause(&ended(7, "Error"), &unread).is_some());
    }

    /// Regression (issue 61): a binary for another CPU ends with reason `Error` and
    /// "exec format error" in its log, which went to a fetch whose pod failed the same way.
    #[test]
    fn a_binary_of_another_architecture_is_said_in_one_line() {
        let l = log(&["exec /usr/local/bin/leaderwatch: exec format error"]);
        let c = no_run_directory(Some(&ended(255, "Error")), &l).expect("no run").cause;
        assert!(c.contains("another CPU architecture") && c.contains("exit 255"), "{c}");
    }
}
