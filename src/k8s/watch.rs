//! Watching what Kubernetes does to the members: the member pods (created, scheduled with
//! node and zone, phase, Ready, DisruptionTarget, deletion) and the core/v1 Events about
//! them, as events.csv rows (`source` = `kubernetes`). The pod side diffs each state
//! against the last one seen, so a watch that restarts (410 Gone -> relist) neither loses
//! a change nor reports one twice. Watch errors are logged and recorded, never fatal.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as K8sEvent, Node, Pod};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use super::KubeOptions;
use crate::model::clock::Clock;
use crate::model::event::{Event, EventKind, Source};

const SOURCE: Source = Source::Kubernetes;

/// What leaderwatch reports about a pod; a change of any field is an event.
#[derive(Debug, Clone, Default, PartialEq)]
struct PodView {
    uid: String,
    node: Option<String>,
    phase: Option<String>,
    ready: bool,
    /// Reason of the DisruptionTarget condition, e.g. EvictionByEvictionAPI.
    disruption_target: Option<String>,
    deleting: Option<String>,
    /// status.podIP: a recreated pod (same name) gets a new one on most networks.
    ip: Option<String>,
}

fn view(p: &Pod) -> PodView {
    let conds: Vec<_> = p.status.iter().flat_map(|s| s.conditions.iter().flatten()).collect();
    PodView {
        uid: p.metadata.uid.clone().unwrap_or_default(),
        node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
        phase: p.status.as_ref().and_then(|s| s.phase.clone()),
        ready: conds.iter().any(|c| c.type_ == "Ready" && c.status == "True"),
        disruption_target: conds
            .iter()
            .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
            .map(|c| c.reason.clone().unwrap_or_default()),
        deleting: p.metadata.deletion_timestamp.as_ref().map(|t| t.0.to_string()),
        ip: p.status.as_ref().and_then(|s| s.pod_ip.clone()),
    }
}

/// Diffs pod states into events. Pure apart from the clock that stamps the events.
pub struct PodTracker {
    known: BTreeMap<String, PodView>,
    /// Pods seen since the last (re)list started.
    listed: BTreeSet<String>,
    /// The first list is complete: a pod unknown from now on was created, not just seen.
    listed_once: bool,
    clock: Arc<dyn Clock>,
}

impl PodTracker {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        PodTracker { known: BTreeMap::new(), listed: BTreeSet::new(), listed_once: false, clock }
    }

    fn ev(&self, pod: &str, kind: EventKind, detail: String) -> Event {
        Event::new(self.clock.now(), SOURCE, pod, kind, detail)
    }

    /// Events for a pod as it is now (added, modified, or seen in a relist).
    pub fn apply(&mut self, p: &Pod) -> Vec<Event> {
        let name = p.metadata.name.clone().unwrap_or_default();
        self.listed.insert(name.clone());
        let new = view(p);
        let old = self.known.get(&name).cloned();
        let mut out = Vec::new();
        let old = match old {
            Some(o) if o.uid == new.uid => o,
            Some(o) => {
                // A relist can show the replacement without the old pod's deletion.
                out.push(self.ev(&name, EventKind::PodDeleted, format!("uid {}", o.uid)));
                out.push(self.ev(&name, EventKind::PodCreated, format!("uid {}", new.uid)));
                PodView { uid: new.uid.clone(), ..PodView::default() }
            }
            None => {
                let kind =
                    if self.listed_once { EventKind::PodCreated } else { EventKind::PodSeen };
                out.push(self.ev(&name, kind, format!("uid {}", new.uid)));
                PodView { uid: new.uid.clone(), ..PodView::default() }
            }
        };
        if new.node != old.node
            && let Some(n) = &new.node
        {
            out.push(self.ev(&name, EventKind::PodScheduled, format!("node {n}")));
        }
        if new.phase != old.phase {
            out.push(self.ev(&name, EventKind::PodPhase, new.phase.clone().unwrap_or_default()));
        }
        if new.ready != old.ready {
            out.push(self.ev(
                &name,
                if new.ready { EventKind::PodReady } else { EventKind::PodNotReady },
                String::new(),
            ));
        }
        if new.disruption_target.is_some() && old.disruption_target.is_none() {
            out.push(self.ev(
                &name,
                EventKind::DisruptionTarget,
                new.disruption_target.clone().unwrap_or_default(),
            ));
        }
        if new.deleting.is_some() && old.deleting.is_none() {
            out.push(self.ev(
                &name,
                EventKind::PodDeleting,
                format!("deletionTimestamp {}", new.deleting.clone().unwrap_or_default()),
            ));
        }
        // A pod's address once it has one, after the first list (the members were found
        // at their addresses then): `--reach pod-ip` follows it.
        if self.listed_once
            && new.ip != old.ip
            && let Some(ip) = &new.ip
        {
            out.push(self.ev(&name, EventKind::PodIp, ip.clone()));
        }
        self.known.insert(name, new);
        out
    }

    pub fn delete(&mut self, p: &Pod) -> Vec<Event> {
        let name = p.metadata.name.clone().unwrap_or_default();
        match self.known.remove(&name) {
            Some(v) => vec![self.ev(&name, EventKind::PodDeleted, format!("uid {}", v.uid))],
            None => vec![],
        }
    }

    /// A (re)list starts.
    pub fn relist_started(&mut self) {
        self.listed.clear();
    }

    /// The relist is complete: pods not in it were deleted while the watch was down.
    pub fn relist_done(&mut self) -> Vec<Event> {
        self.listed_once = true;
        let gone: Vec<String> =
            self.known.keys().filter(|k| !self.listed.contains(*k)).cloned().collect();
        gone.into_iter()
            .flat_map(|n| {
                let uid = self.known.remove(&n).map(|v| v.uid).unwrap_or_default();
                vec![self.ev(&n, EventKind::PodDeleted, format!("uid {uid} (seen on relist)"))]
            })
            .collect()
    }

    pub fn handle(&mut self, e: watcher::Event<Pod>) -> Vec<Event> {
        match e {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => self.apply(&p),
            watcher::Event::Delete(p) => self.delete(&p),
            watcher::Event::Init => {
                self.relist_started();
                vec![]
            }
            watcher::Event::InitDone => self.relist_done(),
        }
    }
}

/// Watches the member pods until the returned task is aborted; zones are looked up once
/// per node.
pub fn spawn_pod_watcher(
    client: Client,
    o: &KubeOptions,
    placement: super::nodes::Placement,
    clock: Arc<dyn Clock>,
    tx: UnboundedSender<Event>,
) -> JoinHandle<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &o.namespace);
    let nodes: Api<Node> = Api::all(client);
    let cfg = watcher::Config::default().labels(&o.selector);
    let timeout = o.request_timeout;
    tokio::spawn(async move {
        let mut tracker = PodTracker::new(clock.clone());
        let mut zones: BTreeMap<String, String> = BTreeMap::new();
        let stream = watcher(api, cfg).default_backoff();
        futures::pin_mut!(stream);
        while let Some(item) = stream.next().await {
            let events = match item {
                Ok(e) => {
                    place(&placement, &e);
                    tracker.handle(e)
                }
                Err(e) => {
                    tracing::warn!("pod watch: {e} (retrying)");
                    vec![Event::new(
                        clock.now(),
                        SOURCE,
                        "",
                        EventKind::WatchError,
                        format!("pods: {e}"),
                    )]
                }
            };
            for mut e in events {
                if e.kind == EventKind::PodScheduled {
                    let node = e.detail.trim_start_matches("node ").to_owned();
                    if !zones.contains_key(&node) {
                        let zone = super::call("get node", timeout, nodes.get(&node))
                            .await
                            .ok()
                            .and_then(|n| {
                                n.metadata
                                    .labels
                                    .and_then(|l| l.get("topology.kubernetes.io/zone").cloned())
                            })
                            .unwrap_or_else(|| "unknown".into());
                        zones.insert(node.clone(), zone);
                    }
                    e.detail = format!(
                        "node {node}, zone {}",
                        zones.get(&node).map_or("unknown", String::as_str)
                    );
                }
                if tx.send(e).is_err() {
                    return;
                }
            }
        }
    })
}

/// Keeps `placement` (member pod -> node, for the node watcher) as the pod watch says.
fn place(placement: &super::nodes::Placement, e: &watcher::Event<Pod>) {
    let Ok(mut p) = placement.lock() else { return };
    match e {
        watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
            let name = pod.metadata.name.clone().unwrap_or_default();
            match pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                Some(node) => p.insert(name, node),
                None => p.remove(&name),
            };
        }
        watcher::Event::Delete(pod) => {
            p.remove(&pod.metadata.name.clone().unwrap_or_default());
        }
        watcher::Event::Init | watcher::Event::InitDone => {}
    }
}

/// Watches core/v1 Events whose involved object is a member pod (by name prefix of the
/// selector's pods, given as `pod_prefix`). A relist re-delivers old Events: each
/// (uid, count) is reported once.
pub fn spawn_event_watcher(
    client: Client,
    o: &KubeOptions,
    pod_prefix: String,
    clock: Arc<dyn Clock>,
    tx: UnboundedSender<Event>,
) -> JoinHandle<()> {
    let api: Api<K8sEvent> = Api::namespaced(client, &o.namespace);
    let cfg = watcher::Config::default().fields("involvedObject.kind=Pod");
    tokio::spawn(async move {
        let mut seen: BTreeSet<(String, i32)> = BTreeSet::new();
        let stream = watcher(api, cfg).default_backoff();
        futures::pin_mut!(stream);
        while let Some(item) = stream.next().await {
            let ev = match item {
                Ok(watcher::Event::Apply(e) | watcher::Event::InitApply(e)) => e,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!("event watch: {e} (retrying)");
                    continue;
                }
            };
            let pod = ev.involved_object.name.clone().unwrap_or_default();
            if !pod.starts_with(&pod_prefix) {
                continue;
            }
            let key = (ev.metadata.uid.clone().unwrap_or_default(), ev.count.unwrap_or(1));
            if !seen.insert(key) {
                continue;
            }
            let at = ev
                .last_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .or_else(|| ev.event_time.as_ref().map(|t| t.0.to_string()))
                .unwrap_or_default();
            let detail = format!(
                "{} {}: {} (cluster time {at})",
                ev.type_.unwrap_or_default(),
                ev.reason.unwrap_or_default(),
                ev.message.unwrap_or_default()
            );
            if tx.send(Event::new(clock.now(), SOURCE, &pod, EventKind::K8sEvent, detail)).is_err()
            {
                return;
            }
        }
    })
}

/// Whether the API server answered the last heartbeat, and since when it has not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ApiReach {
    Up,
    Down { since: chrono::DateTime<chrono::Utc> },
}

impl ApiReach {
    /// The next state after one heartbeat, and the events.csv row its change is worth:
    /// `api_unreachable` when answers stop, `api_reachable` with the gap when they resume.
    pub fn step(
        self,
        now: chrono::DateTime<chrono::Utc>,
        answer: Result<(), String>,
    ) -> (ApiReach, Option<(EventKind, String)>) {
        match (self, answer) {
            (ApiReach::Up, Ok(())) => (ApiReach::Up, None),
            (ApiReach::Up, Err(e)) => {
                (ApiReach::Down { since: now }, Some((EventKind::ApiUnreachable, e)))
            }
            (d @ ApiReach::Down { .. }, Err(_)) => (d, None),
            (ApiReach::Down { since }, Ok(())) => {
                let gap = (now - since).num_milliseconds() as f64 / 1000.0;
                (
                    ApiReach::Up,
                    Some((
                        EventKind::ApiReachable,
                        format!("answering again after {gap:.1} s without an answer"),
                    )),
                )
            }
        }
    }
}

/// How often the sitting asks the API server whether it is there.
pub const API_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(5);

/// Asks the API server for the members' PDB every [`API_HEARTBEAT`] (a `get` the sitting
/// needs anyway), so that an API outage is a row in events.csv with its length, not a
/// silence: watch streams are quiet when nothing happens, and the members are measured
/// directly, whatever the API server does.
pub fn spawn_api_heartbeat(
    client: Client,
    o: &KubeOptions,
    pdb: String,
    clock: Arc<dyn Clock>,
    tx: UnboundedSender<Event>,
) -> JoinHandle<()> {
    let api: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client, &o.namespace);
    let timeout = o.request_timeout;
    tokio::spawn(async move {
        let mut state = ApiReach::Up;
        let mut tick = tokio::time::interval(API_HEARTBEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let answer =
                super::call("get poddisruptionbudget (API heartbeat)", timeout, api.get(&pdb))
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string());
            let (next, row) = state.step(clock.now(), answer);
            state = next;
            if let Some((kind, detail)) = row {
                tracing::warn!("{kind}: {detail}");
                if tx.send(Event::new(clock.now(), SOURCE, "", kind, detail)).is_err() {
                    return;
                }
            }
        }
    })
}

#[cfg(test)]
mod api_reach_tests {
    use super::ApiReach;
    use crate::model::event::EventKind;
    use chrono::{TimeZone, Utc};

    #[test]
    fn an_outage_is_one_row_when_it_starts_and_one_with_its_length_when_it_ends() {
        let t = |s: i64| Utc.timestamp_opt(1_800_000_000 + s, 0).single().expect("time");
        let (s, row) = ApiReach::Up.step(t(0), Ok(()));
        assert_eq!((s, row), (ApiReach::Up, None));
        let (s, row) = s.step(t(5), Err("timed out".into()));
        assert_eq!(row, Some((EventKind::ApiUnreachable, "timed out".to_string())));
        let (s, row) = s.step(t(10), Err("timed out".into()));
        assert_eq!(row, None, "still down: no second row");
        let (s, row) = s.step(t(35), Ok(()));
        assert_eq!(s, ApiReach::Up);
        assert_eq!(
            row,
            Some((
                EventKind::ApiReachable,
                "answering again after 30.0 s without an answer".to_string()
            ))
        );
    }
}

#[cfg(test)]
mod pod_tracker_tests {
    use super::PodTracker;
    use crate::model::clock::{Clock, SystemClock};
    use crate::model::event::EventKind;
    use k8s_openapi::api::core::v1::Pod;
    use std::sync::Arc;

    fn pod(uid: &str, ip: Option<&str>) -> Pod {
        let mut v = serde_json::json!({
            "metadata": {"name": "dlock-etcd-0", "uid": uid},
            "status": {"phase": "Running"},
        });
        if let Some(ip) = ip {
            v["status"]["podIP"] = ip.into();
        }
        serde_json::from_value(v).expect("pod")
    }

    fn ips(events: &[crate::model::event::Event]) -> Vec<String> {
        events.iter().filter(|e| e.kind == EventKind::PodIp).map(|e| e.detail.clone()).collect()
    }

    /// Regression (found on the real kubelet, whose CNI gives a recreated pod a new
    /// address): `--reach pod-ip` kept probing the old address for ever. The tracker now
    /// reports a pod's new address; the first list's addresses are the ones found.
    #[test]
    fn a_recreated_pod_at_a_new_address_is_a_pod_ip_event() {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let mut t = PodTracker::new(clock);
        t.relist_started();
        assert!(ips(&t.apply(&pod("a", Some("10.0.1.2")))).is_empty(), "found, not moved");
        t.relist_done();
        assert!(ips(&t.apply(&pod("a", Some("10.0.1.2")))).is_empty(), "unchanged");
        t.delete(&pod("a", Some("10.0.1.2")));
        assert!(ips(&t.apply(&pod("b", None))).is_empty(), "no address yet");
        assert_eq!(ips(&t.apply(&pod("b", Some("10.0.1.3")))), vec!["10.0.1.3"]);
        assert!(ips(&t.apply(&pod("b", Some("10.0.1.3")))).is_empty(), "reported once");
    }
}
