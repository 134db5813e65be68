//! The routine operations as disruptors (`measure --method rolling-restart | drain`):
//! what `kubectl rollout restart sts/dlock-etcd` and `kubectl drain --ignore-daemonsets
//! --delete-emptydir-data <node>` send, and what they then wait for. Each request and each
//! replacement step is reported as it happens (into events.csv); the per-member record
//! is built from those reports (src/analysis/maintenance.rs).
//!
//! Neither takes two members down by our hand: a rolling restart only patches the
//! template (the StatefulSet controller replaces one member at a time, waiting for
//! Ready), and a drain evicts through the Eviction API, so the PDB decides; a node that
//! holds two members is refused before the cordon.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::evict::RETRY_EVERY;
use super::preflight::ready;
use super::{KubeError, KubeOptions, api_error, call};
use crate::io::disrupt::{DisruptError, Disruptor, Reporter, Undo};
use crate::model::baseline::{DisruptionMethod, KubeMethod};
use crate::model::event::EventKind;
use crate::model::member::MemberName;

type Result<T, E = DisruptError> = std::result::Result<T, E>;

/// How often the operation's progress is polled: fine enough for the per-member times at
/// the sitting's usual 100 ms cadence, cheap for the API server (one list per poll).
const POLL: Duration = Duration::from_millis(200);
/// The annotation `kubectl rollout restart` sets on the pod template.
pub const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";
const FIELD_MANAGER: &str = "leaderwatch";

/// Where and how long: shared by both operations.
#[derive(Clone)]
pub struct Scope {
    pub client: Client,
    pub kube: KubeOptions,
    /// Give up on the operation (a blocked eviction, a rollout that does not finish) after this.
    pub timeout: Duration,
    /// Server-side dry run: the requests are sent and validated, nothing changes.
    pub dry_run: bool,
}

impl Scope {
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.kube.namespace)
    }

    fn dry(&self) -> &'static str {
        if self.dry_run { " (dry run)" } else { "" }
    }
}

/// Where one member's replacement stands, as the disruptor has seen it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Old,
    Terminating,
    Gone,
    Ready,
}

/// Follows the replacement of some member pods by name and old uid, reporting each step
/// once, in order.
struct Replacements {
    old: BTreeMap<String, Option<String>>,
    stage: BTreeMap<String, Stage>,
    /// Reported when an old pod is first seen terminating (`rollout_replacing` for a
    /// rollout; a drain has already reported its `eviction_accepted`).
    terminating_kind: Option<EventKind>,
}

impl Replacements {
    fn new(pods: &[Pod], names: &[String], terminating_kind: Option<EventKind>) -> Self {
        let old = names
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    pods.iter()
                        .find(|p| p.metadata.name.as_deref() == Some(n))
                        .and_then(|p| p.metadata.uid.clone()),
                )
            })
            .collect();
        Replacements {
            old,
            stage: names.iter().map(|n| (n.clone(), Stage::Old)).collect(),
            terminating_kind,
        }
    }

    fn all(&self, s: Stage) -> bool {
        self.stage.values().all(|v| *v >= s)
    }

    fn waiting(&self) -> String {
        let w: Vec<String> = self
            .stage
            .iter()
            .filter(|(_, s)| **s != Stage::Ready)
            .map(|(n, s)| format!("{n} ({s:?})"))
            .collect();
        if w.is_empty() { "nothing".to_owned() } else { w.join(", ") }
    }

    /// One look at the pods: reports what changed since the last. Replacements that became
    /// Ready are reported first: the controller may already have begun on the next member
    /// in the same look, and the record's order must say which came first.
    fn observe(&mut self, pods: &[Pod], report: &Reporter) {
        for ready_only in [true, false] {
            self.observe_pass(pods, report, ready_only);
        }
    }

    fn observe_pass(&mut self, pods: &[Pod], report: &Reporter, ready_only: bool) {
        for (name, stage) in self.stage.iter_mut() {
            if ready_only && *stage != Stage::Gone {
                continue;
            }
            let old = self.old.get(name).cloned().flatten();
            let p = pods.iter().find(|p| p.metadata.name.as_deref() == Some(name.as_str()));
            let is_old = p.is_some_and(|p| p.metadata.uid == Some(old.clone().unwrap_or_default()));
            let member = MemberName(name.clone());
            if *stage == Stage::Old
                && (p.is_none()
                    || !is_old
                    || p.is_some_and(|p| p.metadata.deletion_timestamp.is_some()))
            {
                if let Some(kind) = self.terminating_kind {
                    report.event(&member, kind, "its old pod is terminating");
                }
                *stage = Stage::Terminating;
            }
            if *stage == Stage::Terminating && !is_old {
                report.event(
                    &member,
                    EventKind::OldPodGone,
                    if p.is_some() { "replaced (new uid)" } else { "deleted" },
                );
                *stage = Stage::Gone;
            }
            if *stage == Stage::Gone
                && let Some(p) = p.filter(|p| !is_old && ready(p))
            {
                let node = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_else(|| "an unknown node".to_owned());
                report.event(&member, EventKind::NewPodReady, format!("on {node}"));
                *stage = Stage::Ready;
            }
        }
    }
}

/// Waits for one condition, polled every [`POLL`], for at most `timeout`. API errors
/// (the API server away for a moment) are waited out, said once.
struct Wait {
    what: String,
    deadline: Instant,
    timeout: Duration,
    said: bool,
}

impl Wait {
    fn new(what: String, timeout: Duration) -> Self {
        Wait { what, deadline: Instant::now() + timeout, timeout, said: false }
    }

    /// An API error while polling: waited out until the deadline.
    fn tolerate(&mut self, e: KubeError, report: &Reporter) -> Result<()> {
        match e {
            KubeError::Timeout { .. }
            | KubeError::Status { .. }
            | KubeError::Unreachable { .. }
            | KubeError::Api { .. }
                if Instant::now() < self.deadline =>
            {
                if !self.said {
                    report.event(
                        &MemberName(String::new()),
                        EventKind::ApiUnreachable,
                        format!("waiting for {}: {e}; retrying", self.what),
                    );
                    self.said = true;
                }
                Ok(())
            }
            e => Err(e.into()),
        }
    }

    /// Sleeps until the next poll; fails once the deadline has passed.
    async fn next(&self, waiting_for: impl FnOnce() -> String) -> Result<()> {
        if Instant::now() >= self.deadline {
            return Err(DisruptError::Incomplete(format!(
                "{}: not within {} (waiting for {})",
                self.what,
                humantime::format_duration(self.timeout),
                waiting_for()
            )));
        }
        tokio::time::sleep(POLL).await;
        Ok(())
    }
}

/// `kubectl rollout restart` of the StatefulSet that owns the members, then the rollout
/// watched to its end: every member replaced and Ready, `updateRevision ==
/// currentRevision`.
pub struct RollingRestart {
    pub scope: Scope,
    /// Patched and not yet seen complete: a rollout cut short keeps rolling, and says so.
    running: Arc<Mutex<Option<String>>>,
}

impl RollingRestart {
    pub fn new(scope: Scope) -> Self {
        RollingRestart { scope, running: Arc::new(Mutex::new(None)) }
    }
}

fn set(slot: &Mutex<Option<String>>, v: Option<String>) {
    if let Ok(mut g) = slot.lock() {
        *g = v;
    }
}

/// The rollout is complete: the controller saw the new template and every replica is
/// updated and Ready under it.
fn rollout_complete(s: &StatefulSet) -> Option<String> {
    let st = s.status.as_ref()?;
    let replicas = s.spec.as_ref().and_then(|sp| sp.replicas).unwrap_or(1);
    let observed = st.observed_generation.unwrap_or(0) >= s.metadata.generation.unwrap_or(0);
    let done = observed
        && st.update_revision.is_some()
        && st.update_revision == st.current_revision
        && st.updated_replicas == Some(replicas)
        && st.ready_replicas == Some(replicas);
    done.then(|| st.update_revision.clone().unwrap_or_default())
}

impl Disruptor for RollingRestart {
    fn method(&self) -> DisruptionMethod {
        DisruptionMethod::kube(KubeMethod::RollingRestart, self.scope.dry_run)
    }

    /// Nothing can be put back: the rollout is the controller's now. Says so.
    fn undo(&self) -> Option<Undo> {
        let running = self.running.clone();
        Some(Box::new(move |report: Reporter| {
            Box::pin(async move {
                if let Some(sts) = running.lock().ok().and_then(|g| g.clone()) {
                    report.event(&MemberName(String::new()), EventKind::RolloutLeftRunning, format!("statefulset/{sts}: the sitting ended before the rollout was complete; the StatefulSet controller finishes it (kubectl rollout status sts/{sts})"));
                }
            })
        }))
    }

    async fn disrupt(self, _first: MemberName, report: Reporter) -> Result<()> {
        let sc = &self.scope;
        let t = sc.kube.request_timeout;
        let pods = super::discover::pods(&sc.client, &sc.kube).await?;
        let name = super::timing::owning_statefulset(&pods, &sc.kube).map_err(|message| {
            KubeError::Api { what: "find the members' StatefulSet".into(), message }
        })?;
        let names: Vec<String> = pods.iter().filter_map(|p| p.metadata.name.clone()).collect();
        let mut track = Replacements::new(&pods, &names, Some(EventKind::RolloutReplacing));
        let sts: Api<StatefulSet> = Api::namespaced(sc.client.clone(), &sc.kube.namespace);
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let patch =
            json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: at}}}}});
        let pp = PatchParams {
            dry_run: sc.dry_run,
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        call("patch statefulset", t, sts.patch(&name, &pp, &Patch::Strategic(&patch))).await?;
        let all = MemberName(String::new());
        report.event(
            &all,
            EventKind::RolloutRequested,
            format!("statefulset/{name} {RESTARTED_AT}={at}{}", sc.dry()),
        );
        if sc.dry_run {
            return Ok(());
        }
        set(&self.running, Some(name.clone()));
        let started = Instant::now();
        let mut wait = Wait::new(format!("the rollout of statefulset/{name}"), sc.timeout);
        let lp = ListParams::default().labels(&sc.kube.selector);
        let revision = loop {
            let step = async {
                let list = call("list pods", t, sc.pods().list(&lp)).await?;
                track.observe(&list.items, &report);
                let s = call("get statefulset", t, sts.get(&name)).await?;
                Ok::<_, KubeError>(rollout_complete(&s).filter(|_| track.all(Stage::Ready)))
            };
            match step.await {
                Ok(Some(rev)) => break rev,
                Ok(None) => {}
                Err(e) => wait.tolerate(e, &report)?,
            }
            wait.next(|| track.waiting()).await?;
        };
        set(&self.running, None);
        report.event(
            &all,
            EventKind::RolloutComplete,
            format!(
                "revision {revision}: {} members replaced, one at a time, in {:.1} s",
                names.len(),
                started.elapsed().as_secs_f64()
            ),
        );
        Ok(())
    }
}

/// `kubectl drain` of the target's node: cordon, evict every pod on it (DaemonSet and
/// mirror pods excepted) through the Eviction API, wait for them to go. The node is
/// uncordoned when the member is Ready on another node of its zone (a surge node), or
/// after `down` without one (standing in for the node's upgrade), and in any case by
/// [`Disruptor::undo`] when the sitting ends.
pub struct Drain {
    pub scope: Scope,
    /// How long the node stays cordoned after its drain when the member has nowhere else
    /// to go.
    pub down: Duration,
    pub retry_every: Duration,
    /// The node we cordoned and have not uncordoned: what [`Disruptor::undo`] puts back.
    cordoned: Arc<Mutex<Option<String>>>,
}

impl Drain {
    pub fn new(scope: Scope, down: Duration) -> Self {
        Drain { scope, down, retry_every: RETRY_EVERY, cordoned: Arc::new(Mutex::new(None)) }
    }
}

/// Sets or clears `spec.unschedulable`, as `kubectl cordon` / `uncordon` do.
async fn set_unschedulable(
    nodes: &Api<Node>,
    node: &str,
    on: bool,
    dry_run: bool,
    t: Duration,
) -> std::result::Result<(), KubeError> {
    let pp = PatchParams {
        dry_run,
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    call(
        if on { "cordon node" } else { "uncordon node" },
        t,
        nodes.patch(node, &pp, &Patch::Merge(&json!({"spec": {"unschedulable": on}}))),
    )
    .await
    .map(|_| ())
}

/// Uncordons `node` if it is still the one we cordoned; reports it.
async fn uncordon(
    cordoned: &Mutex<Option<String>>,
    nodes: &Api<Node>,
    t: Duration,
    report: &Reporter,
    why: &str,
) {
    let Some(node) = cordoned.lock().ok().and_then(|g| g.clone()) else { return };
    match set_unschedulable(nodes, &node, false, false, t).await {
        Ok(()) => {
            if let Ok(mut g) = cordoned.lock() {
                *g = None;
            }
            report.event(
                &MemberName(String::new()),
                EventKind::NodeUncordoned,
                format!("{node}: {why}"),
            );
        }
        Err(e) => {
            tracing::error!("node {node} is still cordoned: {e}; run `kubectl uncordon {node}`");
            report.event(
                &MemberName(String::new()),
                EventKind::UncordonFailed,
                format!("{node}: {e}; run kubectl uncordon {node}"),
            );
        }
    }
}

/// What a drain evicts: every pod but DaemonSet pods (they would come straight back) and
/// mirror pods (the kubelet's own), as `--ignore-daemonsets` does.
fn evictable(p: &Pod) -> bool {
    let daemon = p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DaemonSet");
    let mirror = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    !daemon && !mirror
}

/// "ns/name" of a pod.
fn key(p: &Pod) -> (String, String) {
    (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default())
}

impl Disruptor for Drain {
    fn method(&self) -> DisruptionMethod {
        DisruptionMethod::kube(KubeMethod::Drain, self.scope.dry_run)
    }

    fn undo(&self) -> Option<Undo> {
        let (cordoned, nodes, t) = (
            self.cordoned.clone(),
            Api::<Node>::all(self.scope.client.clone()),
            self.scope.kube.request_timeout,
        );
        Some(Box::new(move |report: Reporter| {
            Box::pin(
                async move { uncordon(&cordoned, &nodes, t, &report, "the drain is over").await },
            )
        }))
    }

    async fn disrupt(self, member: MemberName, report: Reporter) -> Result<()> {
        let started = Instant::now();
        let (node, here, members) = self.cordon(&member, &report).await?;
        let uids = self.evict_all(&node, here, &report).await?;
        if self.scope.dry_run {
            return Ok(());
        }
        let mut track = Replacements::new(&members, std::slice::from_ref(&member.0), None);
        self.wait_gone(&node, &uids, &mut track, started, &report).await?;
        self.wait_back(&member, &node, &mut track, &report).await
    }
}

/// Every evicted pod by namespace and name, with its uid: gone once no pod of that name
/// has that uid.
type Evicted = BTreeMap<(String, String), Option<String>>;

/// A pod's eviction, asked once.
enum Asked {
    Accepted,
    /// 404: it went by itself.
    Gone,
    /// 429: its PDB refused it for now (the message).
    Blocked(String),
}

impl Drain {
    /// Cordons the member's node, unless it holds another member too (a drain would then
    /// take two down by our hand). Returns the node, the pods on it, and the members' pods.
    async fn cordon(
        &self,
        member: &MemberName,
        report: &Reporter,
    ) -> Result<(String, Vec<Pod>, Vec<Pod>)> {
        let sc = &self.scope;
        let t = sc.kube.request_timeout;
        let pod = call("get pod", t, sc.pods().get(&member.0)).await?;
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).ok_or_else(|| {
            DisruptError::Refused(format!("{member} is not scheduled on a node: nothing to drain"))
        })?;
        let here =
            call("list pods on the node", t, self.all_pods().list(&on_node(&node))).await?.items;
        // Never two members down by our hand: a node with two members is not drained.
        let members = super::discover::pods(&sc.client, &sc.kube).await?;
        let member_names: Vec<String> =
            members.iter().filter_map(|p| p.metadata.name.clone()).collect();
        let ours: Vec<&String> = here
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(sc.kube.namespace.as_str()))
            .filter_map(|p| p.metadata.name.as_ref())
            .filter(|n| member_names.contains(n))
            .collect();
        if ours.len() > 1 {
            return Err(DisruptError::Refused(format!(
                "node {node} holds {} members ({}): a drain would take more than one down; nothing was cordoned",
                ours.len(),
                ours.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        set_unschedulable(&self.nodes(), &node, true, sc.dry_run, t).await?;
        if !sc.dry_run
            && let Ok(mut g) = self.cordoned.lock()
        {
            *g = Some(node.clone());
        }
        report.event(
            &MemberName(String::new()),
            EventKind::NodeCordoned,
            format!("{node} (unschedulable){}", sc.dry()),
        );
        Ok((node, here, members))
    }

    /// Evicts every pod on the node (DaemonSet and mirror pods excepted); a blocked one
    /// (429: its PDB) is asked again every `retry_every`, until the scope's timeout.
    async fn evict_all(&self, node: &str, here: Vec<Pod>, report: &Reporter) -> Result<Evicted> {
        let sc = &self.scope;
        let mut pending: Vec<Pod> = here.into_iter().filter(evictable).collect();
        let uids: Evicted = pending.iter().map(|p| (key(p), p.metadata.uid.clone())).collect();
        let mut attempt = 0u32;
        let first = Instant::now();
        while !pending.is_empty() {
            attempt += 1;
            let mut blocked = Vec::new();
            for p in pending {
                let (ns, name) = key(&p);
                let who = MemberName(name.clone());
                match self.evict(&ns, &name).await? {
                    Asked::Accepted => report.event(
                        &who,
                        EventKind::EvictionAccepted,
                        format!("{ns}/{name} from node {node}, attempt {attempt}{}", sc.dry()),
                    ),
                    Asked::Gone => report.event(
                        &who,
                        EventKind::OldPodGone,
                        format!("{ns}/{name} already gone"),
                    ),
                    Asked::Blocked(message) => {
                        report.event(
                            &who,
                            EventKind::EvictionBlocked,
                            format!("{ns}/{name} attempt {attempt}: {message}"),
                        );
                        blocked.push(p);
                    }
                }
            }
            report.attempts(attempt, if attempt > 1 { first.elapsed().as_secs_f64() } else { 0.0 });
            pending = blocked;
            if !pending.is_empty() {
                if first.elapsed() + self.retry_every > sc.timeout {
                    let names: Vec<String> =
                        pending.iter().map(|p| format!("{}/{}", key(p).0, key(p).1)).collect();
                    return Err(DisruptError::Incomplete(format!(
                        "drain of {node}: evictions of {} still blocked after {attempt} attempts",
                        names.join(", ")
                    )));
                }
                tokio::time::sleep(self.retry_every).await;
            }
        }
        Ok(uids)
    }

    /// One Eviction of pod `ns/name`, through the PDB (a dry run when the scope says so).
    async fn evict(&self, ns: &str, name: &str) -> Result<Asked> {
        let sc = &self.scope;
        let t = sc.kube.request_timeout;
        let api: Api<Pod> = Api::namespaced(sc.client.clone(), ns);
        let body = super::evict::eviction(ns, name, sc.dry_run);
        let pp = PostParams { dry_run: sc.dry_run, field_manager: None };
        match tokio::time::timeout(
            t,
            api.create_subresource::<_, kube::core::Status>("eviction", name, &pp, &body),
        )
        .await
        {
            Ok(Ok(_)) => Ok(Asked::Accepted),
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => Ok(Asked::Gone),
            Ok(Err(kube::Error::Api(s))) if s.code == 429 => Ok(Asked::Blocked(s.message)),
            Ok(Err(e)) => Err(api_error("create pods/eviction", e).into()),
            Err(_) => {
                Err(KubeError::Timeout { what: "create pods/eviction".into(), timeout: t }.into())
            }
        }
    }

    /// The drain is over when every evicted pod is gone (kubectl drain waits for that);
    /// the member's replacement is followed meanwhile.
    async fn wait_gone(
        &self,
        node: &str,
        uids: &Evicted,
        track: &mut Replacements,
        started: Instant,
        report: &Reporter,
    ) -> Result<()> {
        let sc = &self.scope;
        let t = sc.kube.request_timeout;
        let lp = ListParams::default().labels(&sc.kube.selector);
        let gone = |items: &[Pod]| {
            uids.iter()
                .all(|(k, uid)| !items.iter().any(|p| key(p) == *k && p.metadata.uid == *uid))
        };
        let mut wait = Wait::new(
            format!("the pods evicted from {node} to go"),
            sc.timeout.saturating_sub(started.elapsed()),
        );
        loop {
            let step = async {
                let items = call("list pods on the node", t, self.all_pods().list(&on_node(node)))
                    .await?
                    .items;
                let m = call("list pods", t, sc.pods().list(&lp)).await?.items;
                track.observe(&m, report);
                Ok::<_, KubeError>(gone(&items))
            };
            match step.await {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => wait.tolerate(e, report)?,
            }
            wait.next(|| "the evicted pods".to_owned()).await?;
        }
        report.event(
            &MemberName(String::new()),
            EventKind::NodeDrained,
            format!(
                "{node}: {} pods evicted and gone in {:.1} s",
                uids.len(),
                started.elapsed().as_secs_f64()
            ),
        );
        Ok(())
    }

    /// The member back: on another node of its zone if there is one, else on this one
    /// once it is uncordoned after `down`. The node is uncordoned either way.
    async fn wait_back(
        &self,
        member: &MemberName,
        node: &str,
        track: &mut Replacements,
        report: &Reporter,
    ) -> Result<()> {
        let sc = &self.scope;
        let t = sc.kube.request_timeout;
        let lp = ListParams::default().labels(&sc.kube.selector);
        let nodes = self.nodes();
        let drained = Instant::now();
        let mut wait = Wait::new(
            format!("{member} Ready again after the drain of {node}"),
            self.down + sc.timeout,
        );
        loop {
            match call("list pods", t, sc.pods().list(&lp)).await {
                Ok(l) => {
                    track.observe(&l.items, report);
                    if track.all(Stage::Ready) {
                        break;
                    }
                }
                Err(e) => wait.tolerate(e, report)?,
            }
            if drained.elapsed() >= self.down {
                let why = format!(
                    "after --down {} with {member} not back (no other node in its zone took it)",
                    humantime::format_duration(self.down)
                );
                uncordon(&self.cordoned, &nodes, t, report, &why).await;
            }
            wait.next(|| track.waiting()).await?;
        }
        uncordon(&self.cordoned, &nodes, t, report, "the member is Ready on another node").await;
        Ok(())
    }

    fn all_pods(&self) -> Api<Pod> {
        Api::all(self.scope.client.clone())
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.scope.client.clone())
    }
}

/// The pods on `node`, as a list's field selector.
fn on_node(node: &str) -> ListParams {
    ListParams::default().fields(&format!("spec.nodeName={node}"))
}
