//! Following a Job from outside the cluster until it ends: its phase and the time left on
//! one status line, the events about it, its pod and the members (an eviction, a
//! replacement pod), and its pod's log line by line (`leaderwatch sitting`, step 3). Reads
//! only: nothing here changes the Job, and giving up on following leaves it running.

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
use crate::render::progress::StatusLine;

/// How often the Job, its pod and their events are read while following.
pub const POLL: Duration = Duration::from_secs(2);

/// A Job in the cluster, and the bound on each request about it.
pub struct JobRef<'a> {
    pub client: &'a Client,
    pub ns: &'a str,
    pub name: &'a str,
    pub timeout: Duration,
}

/// How following ended.
pub enum Followed {
    /// The Job ended: the Job as last read, its pod, and its end condition and reason.
    Ended { job: Box<Job>, pod: Option<Box<Pod>>, condition: String, reason: String },
    /// The caller's shutdown came first: the Job goes on in the cluster.
    Detached,
}

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

/// The Job's pod, if it exists (the newest).
pub async fn job_pod(j: &JobRef<'_>) -> Result<Option<Pod>, KubeError> {
    let api: Api<Pod> = Api::namespaced(j.client.clone(), j.ns);
    let lp = ListParams::default().labels(&format!("job-name={}", j.name));
    let mut pods = call("list the Job's pods", j.timeout, api.list(&lp)).await?.items;
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
/// `members`; `planned` (the windows' lengths) gives the time left. Ends early, with
/// [`Followed::Detached`], when `shutdown` resolves.
pub async fn follow<F: Future<Output = ()>>(
    j: &JobRef<'_>,
    members: &[String],
    planned: Duration,
    out: &mut StatusLine,
    mut shutdown: Pin<&mut F>,
) -> Result<Followed, KubeError> {
    let jobs: Api<Job> = Api::namespaced(j.client.clone(), j.ns);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut seen = Seen { events: HashSet::new(), log: None, tx, rx };
    let began = Instant::now();
    loop {
        let job = call("get the Job", j.timeout, jobs.get(j.name)).await?;
        let pod = job_pod(j).await?;
        seen.print_new(j, &job, pod.as_ref(), members, out).await?;
        if let Some((condition, reason)) = finished(&job) {
            seen.last_lines(out).await;
            out.done();
            return Ok(Followed::Ended {
                job: Box::new(job),
                pod: pod.map(Box::new),
                condition,
                reason,
            });
        }
        out.status(&status(j, &job, pod.as_ref(), planned, began));
        tokio::select! {
            _ = shutdown.as_mut() => {
                out.done();
                if let Some(h) = seen.log.take() {
                    h.abort();
                }
                return Ok(Followed::Detached);
            }
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// What following has printed already, and the pod's log as it arrives.
struct Seen {
    /// Each event printed, by uid and count (a repeated event prints again).
    events: HashSet<String>,
    /// The task following the pod's log, once its container started.
    log: Option<JoinHandle<()>>,
    tx: UnboundedSender<String>,
    rx: UnboundedReceiver<String>,
}

impl Seen {
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
        let about = std::iter::once(j.name)
            .chain(members.iter().map(String::as_str))
            .chain(pod_name.as_deref());
        for name in about {
            for e in new_events(j, name, since, &mut self.events).await? {
                out.line(&e);
            }
        }
        if let (Some(p), Some(name)) = (pod, pod_name)
            && self.log.is_none()
            && started(p)
        {
            self.log = Some(follow_log(j.client.clone(), j.ns.to_owned(), name, self.tx.clone()));
        }
        while let Ok(l) = self.rx.try_recv() {
            out.line(&format!("  | {l}"));
        }
        Ok(())
    }

    /// The log's last lines (the result), once the Job ended: waits up to 10 s for the
    /// log's end.
    async fn last_lines(&mut self, out: &StatusLine) {
        if let Some(h) = self.log.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), h).await;
        }
        while let Ok(l) = self.rx.try_recv() {
            out.line(&format!("  | {l}"));
        }
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

/// Events about `name` not printed yet, none from before `since` (the Job's creation).
async fn new_events(
    j: &JobRef<'_>,
    name: &str,
    since: Option<k8s_openapi::jiff::Timestamp>,
    seen: &mut HashSet<String>,
) -> Result<Vec<String>, KubeError> {
    let api: Api<Event> = Api::namespaced(j.client.clone(), j.ns);
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
/// printed); ends when the container has ended. A log that cannot be read (the request
/// refused, the stream broken) is tried again every [`POLL`], without a word.
fn follow_log(
    client: Client,
    ns: String,
    pod: String,
    tx: UnboundedSender<String>,
) -> JoinHandle<()> {
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
                    let Some(text) = new_line(&l, &mut last, &mut unstamped, &mut sent_unstamped)
                    else {
                        continue;
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
