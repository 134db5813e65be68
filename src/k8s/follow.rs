//! Following a Job from outside the cluster until it ends: its phase and the time left on
//! one status line, the events about it, its pod and the members (an eviction, a
//! replacement pod), and its pod's log line by line (`leaderwatch sitting`, step 3); API
//! errors that can clear are retried, a pod that cannot start ends it (the decisions are
//! in [`trouble`]). Reads only: nothing here changes the Job, and giving up on following
//! leaves it running.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Client;
use kube::api::{Api, ListParams, LogParams};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;

use super::{KubeError, call};
use crate::model::build::{Agreement, Build};
use crate::render::progress::StatusLine;

pub mod trouble;
use trouble::{Reconnect, Retry, Trouble, Watch};

/// How often the Job, its pod and their events are read while following.
pub const POLL: Duration = Duration::from_secs(2);

/// A Job in the cluster, and the bound on each request about it.
pub struct JobRef<'a> {
    pub client: &'a Client,
    /// The Job's namespace.
    pub ns: &'a str,
    /// The members' namespace (the Job runs in one of its own).
    pub members_ns: &'a str,
    pub name: &'a str,
    pub timeout: Duration,
}

/// How following ended.
pub enum Followed {
    /// The Job ended: the Job as last read, its pod, its end condition and reason, and
    /// what its log said.
    Ended { job: Box<Job>, pod: Option<Box<Pod>>, condition: String, reason: String, log: JobLog },
    /// The caller's shutdown came first: the Job goes on in the cluster.
    Detached,
    /// The API did not answer for `down_for`: the Job goes on in the cluster.
    Lost { error: KubeError, down_for: Duration },
    /// The Job's pod cannot start (past the trouble's grace): nothing of the sitting ran.
    Stuck { trouble: Trouble, log: JobLog },
}

/// What the Job's log said that the sitting acts on.
#[derive(Debug, Default, Clone)]
pub struct JobLog {
    /// The image's build, from its first line ([`Build::line`]); `None` from an image too
    /// old to say it, or before the log was read.
    pub build: Option<Build>,
    /// Its last lines, oldest first.
    pub last: Vec<String>,
    /// Whether any of its lines was read: without them, nothing is known of what it wrote.
    pub read: bool,
    /// It said it opened its run directory ([`RUN_DIR_OPENED`]): there is something to fetch.
    pub run_dir: bool,
}

/// How the line starts that a run prints once its run directory is open
/// (src/ops/drive.rs): before it, a Job that ended left nothing on its volume.
pub const RUN_DIR_OPENED: &str = "run directory opened:";

impl JobLog {
    /// Takes one line of the log, in order.
    fn take(&mut self, l: String) {
        self.read = true;
        self.run_dir |= l.starts_with(RUN_DIR_OPENED);
        if self.last.len() == LAST_LINES {
            self.last.remove(0);
        }
        self.last.push(l);
    }
}

/// How many of the log's last lines are kept for a failure's message.
const LAST_LINES: usize = 5;

/// An API timestamp as chrono's.
pub fn utc(t: &k8s_openapi::jiff::Timestamp) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(
        t.as_second(),
        u32::try_from(t.subsec_nanosecond()).unwrap_or(0),
    )
}

/// The Job's end: `Some((condition, reason))` once Complete or Failed.
pub fn finished(j: &Job) -> Option<(String, String)> {
    j.status.as_ref()?.conditions.as_ref()?.iter().find_map(|c| {
        (matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True")
            .then(|| (c.type_.clone(), c.reason.clone().unwrap_or_default()))
    })
}

/// The Job's pod, if it exists (the newest). Only this Job's: a pod of an earlier Job of
/// the same name (deleted, its pod still going) carries the same `job-name` label.
pub async fn job_pod(j: &JobRef<'_>, job: &Job) -> Result<Option<Pod>, KubeError> {
    let api: Api<Pod> = Api::namespaced(j.client.clone(), j.ns);
    let lp = ListParams::default().labels(&format!("job-name={}", j.name));
    let mut pods = call("list the Job's pods", j.timeout, api.list(&lp)).await?.items;
    let uid = job.metadata.uid.as_deref();
    pods.retain(|p| {
        p.metadata.owner_references.iter().flatten().any(|o| Some(o.uid.as_str()) == uid)
    });
    pods.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
    Ok(pods.pop())
}

/// The pod's (first) container's exit code, once it ended.
pub fn exit_code(p: &Pod) -> Option<i32> {
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

/// Why the pod's container never ran, if it did not: it ended without running the program
/// (`StartError`, `ContainerCannotRun`: an `exec format error` is an image of another CPU
/// architecture), or the pod failed with no container started.
pub fn never_ran(p: &Pod) -> Option<String> {
    let status = p.status.as_ref()?;
    let c = status.container_statuses.as_ref().and_then(|c| c.first());
    let terminated = c.and_then(|c| c.state.as_ref()?.terminated.as_ref());
    match terminated {
        Some(t) if matches!(t.reason.as_deref(), Some("StartError" | "ContainerCannotRun")) => {
            Some(format!(
                "{}: {}",
                t.reason.as_deref().unwrap_or_default(),
                t.message.as_deref().unwrap_or_default().trim()
            ))
        }
        Some(_) => None,
        None if status.phase.as_deref() == Some("Failed") => Some(format!(
            "pod Failed: {} {}",
            status.reason.as_deref().unwrap_or_default(),
            status.message.as_deref().unwrap_or_default().trim()
        )),
        None => None,
    }
}

/// What the Job's finished pod's log says (the `--fetch` path, which did not follow it):
/// its head (the build, whether the run directory was opened) and its last lines; nothing
/// read when it cannot be read.
pub async fn log_tail(j: &JobRef<'_>, pod: Option<&Pod>) -> JobLog {
    let Some(name) = pod.and_then(|p| p.metadata.name.as_deref()) else {
        return JobLog::default();
    };
    let api: Api<Pod> = Api::namespaced(j.client.clone(), j.ns);
    // The marker comes after the build line and the preflight's: within the first lines.
    let head = LogParams { limit_bytes: Some(64 * 1024), ..LogParams::default() };
    let tail = LogParams { tail_lines: Some(LAST_LINES as i64), ..LogParams::default() };
    let mut log = JobLog::default();
    if let Ok(text) = call("read the Job's log", j.timeout, api.logs(name, &head)).await {
        log.build = text.lines().next().and_then(Build::from_line);
        text.lines().for_each(|l| log.take(l.to_owned()));
    }
    if let Ok(text) = call("read the Job's log", j.timeout, api.logs(name, &tail)).await {
        log.last.clear();
        text.lines().for_each(|l| log.take(l.to_owned()));
    }
    log
}

/// Its container has started (running, or already ended): its log can be read.
fn started(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .is_some_and(|c| {
            c.state.as_ref().is_some_and(|s| s.running.is_some() || s.terminated.is_some())
        })
}

/// Follows the Job until it ends, printing into `out` what happens to it, its pod and the
/// `members`; `planned` (the windows' lengths) gives the time left. Requests that fail
/// for a reason that can clear are tried again ([`Reconnect`]) for up to `reconnect_for`.
/// Ends early when `shutdown` resolves ([`Followed::Detached`]), when the API has not
/// answered for `reconnect_for` ([`Followed::Lost`]), or when the pod cannot start
/// ([`Followed::Stuck`]).
pub async fn follow<F: Future<Output = ()>>(
    j: &JobRef<'_>,
    members: &[String],
    planned: Duration,
    reconnect_for: Duration,
    out: &mut StatusLine,
    mut shutdown: Pin<&mut F>,
) -> Result<Followed, KubeError> {
    let mut seen = SoFar::new();
    let mut watch = Watch::default();
    let mut reconnect = Reconnect::new(reconnect_for);
    let began = Instant::now();
    loop {
        let wait = match seen.poll(j, members, out).await {
            Ok((job, pod)) => {
                if let Some(d) = reconnect.answered(Instant::now()) {
                    out.line(&format!("reconnected: the API answers again after {}", secs(d)));
                }
                if let Some((condition, reason)) = finished(&job) {
                    seen.last_lines(out).await;
                    out.done();
                    let log = seen.job_log();
                    let (job, pod) = (Box::new(job), pod.map(Box::new));
                    return Ok(Followed::Ended { job, pod, condition, reason, log });
                }
                let now = trouble::trouble(pod.as_ref(), &seen.pod_events, &seen.job_events);
                if let Some(trouble) = watch.observe(now.as_ref(), Instant::now()) {
                    seen.stop_log();
                    out.done();
                    return Ok(Followed::Stuck { trouble, log: seen.job_log() });
                }
                out.status(&status(j, &job, pod.as_ref(), planned, began));
                POLL
            }
            Err(e) if !e.transient() => {
                seen.stop_log();
                out.done();
                return Err(e);
            }
            Err(error) => match reconnect.failed(Instant::now()) {
                Retry::GiveUp { down_for } => {
                    seen.stop_log();
                    out.done();
                    return Ok(Followed::Lost { error, down_for });
                }
                Retry::After { wait, first, down_for } => {
                    if first {
                        out.line(&format!("reconnecting: {error}"));
                    }
                    out.status(&format!(
                        "reconnecting: no answer from the API for {} (gives up after {}); next try in {}",
                        secs(down_for),
                        secs(reconnect_for),
                        secs(wait)
                    ));
                    wait
                }
            },
        };
        tokio::select! {
            _ = shutdown.as_mut() => {
                out.done();
                seen.stop_log();
                return Ok(Followed::Detached);
            }
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// `90s` as people read it.
fn secs(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// What following has printed already, the pod's log as it arrives, and what the events
/// said (for [`trouble::trouble`]).
struct SoFar {
    /// Each event printed, by uid and count (a repeated event prints again).
    events: HashSet<String>,
    /// The events about the Job and about its pod, oldest first.
    job_events: Vec<trouble::Seen>,
    pod_events: Vec<trouble::Seen>,
    /// The task following the pod's log, once its container started.
    log: Option<JoinHandle<()>>,
    tx: UnboundedSender<LogMsg>,
    rx: UnboundedReceiver<LogMsg>,
    /// What the log said so far.
    job_log: JobLog,
    /// The log's first line was read (the image's build, if it says one).
    first_line: bool,
}

impl SoFar {
    fn new() -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        SoFar {
            events: HashSet::new(),
            job_events: Vec::new(),
            pod_events: Vec::new(),
            log: None,
            tx,
            rx,
            job_log: JobLog::default(),
            first_line: false,
        }
    }

    /// One look: the Job, its pod, and what is new about them (printed).
    async fn poll(
        &mut self,
        j: &JobRef<'_>,
        members: &[String],
        out: &StatusLine,
    ) -> Result<(Job, Option<Pod>), KubeError> {
        let jobs: Api<Job> = Api::namespaced(j.client.clone(), j.ns);
        let job = call("get the Job", j.timeout, jobs.get(j.name)).await?;
        let pod = job_pod(j, &job).await?;
        self.print_new(j, &job, pod.as_ref(), members, out).await?;
        Ok((job, pod))
    }

    /// The events about the Job, the members and the pod not printed yet, and the pod's
    /// log lines that arrived; starts following the log once the container started.
    async fn print_new(
        &mut self,
        j: &JobRef<'_>,
        job: &Job,
        pod: Option<&Pod>,
        members: &[String],
        out: &StatusLine,
    ) -> Result<(), KubeError> {
        let since = job.metadata.creation_timestamp.clone().map(|t| t.0);
        let pod_name = pod.and_then(|p| p.metadata.name.clone());
        let about = std::iter::once((j.ns, j.name))
            .chain(members.iter().map(|m| (j.members_ns, m.as_str())))
            .chain(pod_name.as_deref().map(|p| (j.ns, p)));
        for (ns, name) in about {
            for e in new_events(j, ns, name, since, &mut self.events).await? {
                out.line(&e.line);
                if name == j.name {
                    self.job_events.push(e.seen);
                } else if Some(name) == pod_name.as_deref() {
                    self.pod_events.push(e.seen);
                }
            }
        }
        if let (Some(p), Some(name)) = (pod, pod_name)
            && self.log.is_none()
            && started(p)
        {
            let t = j.timeout;
            let follow = LogFollow { client: j.client.clone(), ns: j.ns.to_owned(), pod: name, t };
            self.log = Some(follow.spawn(self.tx.clone()));
        }
        self.drain(out);
        Ok(())
    }

    /// The log's lines that arrived, printed and kept.
    fn drain(&mut self, out: &StatusLine) {
        while let Ok(m) = self.rx.try_recv() {
            let l = match m {
                LogMsg::Line(l) => l,
                LogMsg::Trouble(t) => {
                    out.line(&format!("log: {t}; trying again"));
                    continue;
                }
            };
            out.line(&format!("  | {l}"));
            if !self.first_line {
                self.first_line = true;
                self.job_log.build = Build::from_line(&l);
                self.say_build(out);
            }
            self.job_log.take(l);
        }
    }

    /// The image's build beside this one: a Job of another build refuses to run (it was
    /// given this one's as `--expect-build`), and here is why.
    fn say_build(&self, out: &StatusLine) {
        let this = Build::this();
        match &self.job_log.build {
            Some(b) => match b.agrees(&this) {
                Agreement::Same => {}
                Agreement::CommitUnknown => out.line(&format!(
                    "warning: the image is leaderwatch {b}, this sitting is {this}: one does not know its commit, so they may differ"
                )),
                Agreement::Differs => out.line(&format!(
                    "the image is leaderwatch {b}, this sitting is {this}: the Job refuses to run a build other than the sitting's"
                )),
            },
            None => out.line(&format!(
                "the image does not say its build (older than leaderwatch {this}?): it will not take --expect-build"
            )),
        }
    }

    /// The log's last lines (the result), once the Job ended: waits up to 10 s for the
    /// log's end.
    async fn last_lines(&mut self, out: &StatusLine) {
        if let Some(h) = self.log.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), h).await;
        }
        self.drain(out);
    }

    fn stop_log(&mut self) {
        if let Some(h) = self.log.take() {
            h.abort();
        }
    }

    fn job_log(&self) -> JobLog {
        self.job_log.clone()
    }
}

/// The status line: the pod's phase, the time in, and the time left of `planned`.
fn status(
    j: &JobRef<'_>,
    job: &Job,
    pod: Option<&Pod>,
    planned: Duration,
    began: Instant,
) -> String {
    let start = job.status.as_ref().and_then(|s| s.start_time.clone()).map(|t| t.0);
    let elapsed = start
        .and_then(|s| utc(&s))
        .and_then(|s| (chrono::Utc::now() - s).to_std().ok())
        .unwrap_or_else(|| began.elapsed());
    let phase = pod
        .and_then(|p| p.status.as_ref())
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "no pod yet".into());
    let left = match planned.checked_sub(elapsed) {
        Some(l) => {
            format!("about {} left", humantime::format_duration(Duration::from_secs(l.as_secs())))
        }
        None => "past the plan (recovery or a blocked eviction)".to_owned(),
    };
    format!(
        "Job {}/{}: pod {phase}, {} in, {left}",
        j.ns,
        j.name,
        humantime::format_duration(Duration::from_secs(elapsed.as_secs()))
    )
}

/// An event not printed before: its line, and its reason and message.
struct NewEvent {
    line: String,
    seen: trouble::Seen,
}

/// Events about `name` not printed yet, none from before `since` (the Job's creation).
async fn new_events(
    j: &JobRef<'_>,
    ns: &str,
    name: &str,
    since: Option<k8s_openapi::jiff::Timestamp>,
    seen: &mut HashSet<String>,
) -> Result<Vec<NewEvent>, KubeError> {
    let api: Api<Event> = Api::namespaced(j.client.clone(), ns);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let mut items = call("list events", j.timeout, api.list(&lp)).await?.items;
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
            let reason = e.reason.clone().unwrap_or_default();
            let message = e.message.clone().unwrap_or_default().trim().to_owned();
            out.push(NewEvent {
                line: format!(
                    "event {} {}: {reason} {message}",
                    e.involved_object.kind.as_deref().unwrap_or("?"),
                    e.involved_object.name.as_deref().unwrap_or("?"),
                ),
                seen: trouble::Seen { reason, message },
            });
        }
    }
    Ok(out)
}

/// What the log follower sends: a line of the log, or why it cannot read it now.
enum LogMsg {
    Line(String),
    Trouble(String),
}

/// The pod whose log is followed.
struct LogFollow {
    client: Client,
    ns: String,
    pod: String,
    /// The bound on opening the stream and on each other request.
    t: Duration,
}

/// A stream that has said nothing for this long is opened again (a connection can die
/// without a word; the timestamps skip what was printed).
const LOG_IDLE: Duration = Duration::from_secs(120);

impl LogFollow {
    /// Follows the pod's log into `tx`, line by line, from where it left off when the
    /// stream breaks (the kubelet's timestamps, or a count of lines where it gives none,
    /// skip what was printed); ends when the container has ended. A log that cannot be
    /// read is said once per distinct reason and tried again every [`POLL`].
    fn spawn(self, tx: UnboundedSender<LogMsg>) -> JoinHandle<()> {
        tokio::spawn(async move {
            let api: Api<Pod> = Api::namespaced(self.client, &self.ns);
            let pod = self.pod;
            let mut last: Option<String> = None;
            // Without timestamps, a new stream starts from the top again: skip what was sent.
            let mut sent_unstamped = 0usize;
            let mut said: Option<String> = None;
            let mut trouble = |what: String| {
                if said.as_deref() != Some(&what) {
                    let _ = tx.send(LogMsg::Trouble(what.clone()));
                    said = Some(what);
                }
            };
            loop {
                let lp = LogParams { follow: true, timestamps: true, ..LogParams::default() };
                match call("read the Job's log", self.t, api.log_stream(&pod, &lp)).await {
                    Ok(stream) => {
                        let mut lines = stream.lines();
                        let mut unstamped = 0usize;
                        loop {
                            let l = match tokio::time::timeout(LOG_IDLE, lines.next()).await {
                                Ok(Some(Ok(l))) => l,
                                Ok(Some(Err(e))) => {
                                    trouble(format!("the Job's log broke off: {e}"));
                                    break;
                                }
                                Ok(None) | Err(_) => break,
                            };
                            let Some(text) =
                                new_line(&l, &mut last, &mut unstamped, &mut sent_unstamped)
                            else {
                                continue;
                            };
                            if tx.send(LogMsg::Line(text.to_owned())).is_err() {
                                return;
                            }
                        }
                    }
                    Err(e) => trouble(e.to_string()),
                }
                // The stream ended: the container ended, or the connection broke.
                match call("get the Job's pod", self.t, api.get(&pod)).await {
                    Ok(p) if exit_code(&p).is_some() => return,
                    Err(e) if e.status() == Some(404) => return,
                    _ => tokio::time::sleep(POLL).await,
                }
            }
        })
    }
}

/// A log line's text if it was not sent before: after the last timestamp sent, or (a
/// kubelet that gives no timestamps) past the count of unstamped lines sent.
fn new_line<'l>(
    l: &'l str,
    last: &mut Option<String>,
    unstamped: &mut usize,
    sent_unstamped: &mut usize,
) -> Option<&'l str> {
    // The kubelet's timestamp prefix, when it gives one (a kubelet may not).
    let stamped =
        l.split_once(' ').filter(|(ts, _)| ts.parse::<k8s_openapi::jiff::Timestamp>().is_ok());
    match stamped {
        Some((ts, text)) => {
            if last.as_deref().is_some_and(|t| ts <= t) {
                return None;
            }
            *last = Some(ts.to_owned());
            Some(text)
        }
        None => {
            *unstamped += 1;
            if *unstamped <= *sent_unstamped {
                return None;
            }
            *sent_unstamped = *unstamped;
            Some(l)
        }
    }
}
