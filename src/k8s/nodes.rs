//! The nodes that carry the members: each node's Lease in `kube-node-lease` (the kubelet's
//! own heartbeat, renewed every 10 s; stale after [`LEASE_STALE`]) and its Ready condition
//! (the node controller's word, 40-50 s after a node goes), as events.csv rows about each
//! member on that node: `node_lease_stale` / `node_lease_renewed`, `node_not_ready` /
//! `node_ready`. A lost node's rows come long after the election its loss caused, so each
//! is stamped with the last instant the node was heard from (its lease's renewTime): the
//! attribution finds it before the election, and the engine revises a cause it already
//! gave (src/analysis/engine.rs). Watch errors are recorded, never fatal; a refusal (403:
//! an rbac.yaml older than this version) stops the node watch with one row saying so.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use crate::model::clock::Clock;
use crate::model::event::{Event, EventKind, Source};

/// A lease not renewed for this long is stale: two renewals missed (the kubelet renews
/// every 10 s, a quarter of the lease's 40 s), half of the node controller's grace period.
pub const LEASE_STALE: Duration = Duration::from_secs(20);

/// Where the node leases live.
const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The API's time as the rows' (k8s-openapi speaks jiff, the files chrono).
fn utc(t: &k8s_openapi::jiff::Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32)
}

/// Which member pod runs on which node, as the pod watcher last saw it.
pub type Placement = Arc<Mutex<BTreeMap<String, String>>>;

/// The members on `node`, by pod name.
pub fn members_on(placement: &Placement, node: &str) -> Vec<String> {
    placement
        .lock()
        .map(|p| p.iter().filter(|(_, n)| *n == node).map(|(pod, _)| pod.clone()).collect())
        .unwrap_or_default()
}

/// Each node's lease and Ready condition, diffed into rows. Pure: the caller brings the
/// time and the members on each node.
#[derive(Debug, Default)]
pub struct NodeTracker {
    /// Node -> its lease's last renewTime.
    renewed: BTreeMap<String, DateTime<Utc>>,
    /// Nodes whose lease is stale now (said once, until renewed).
    stale: BTreeSet<String>,
    /// Node -> Ready (Unknown counts as not ready).
    ready: BTreeMap<String, bool>,
}

impl NodeTracker {
    /// The last instant `node` was heard from, if its lease was seen.
    fn last_heard(&self, node: &str) -> Option<DateTime<Utc>> {
        self.renewed.get(node).copied()
    }

    fn rows(at: DateTime<Utc>, members: &[String], kind: EventKind, detail: &str) -> Vec<Event> {
        members
            .iter()
            .map(|m| Event::new(at, Source::Kubernetes, m, kind, detail.to_owned()))
            .collect()
    }

    /// A node as listed or watched, at `now`: a change of its Ready condition is a row for
    /// each member on it (a node first seen Ready is no news).
    pub fn node(&mut self, n: &Node, members: &[String], now: DateTime<Utc>) -> Vec<Event> {
        let Some(name) = n.metadata.name.clone() else { return Vec::new() };
        let cond = n
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .find(|c| c.type_ == "Ready");
        let Some(cond) = cond else { return Vec::new() };
        let ready = cond.status == "True";
        let before = self.ready.insert(name.clone(), ready);
        if before == Some(ready) || (before.is_none() && ready) {
            return Vec::new();
        }
        let heard = self
            .last_heard(&name)
            .or_else(|| cond.last_heartbeat_time.as_ref().and_then(|t| utc(&t.0)))
            .unwrap_or(now);
        let why = cond.reason.clone().unwrap_or_default();
        if ready {
            Self::rows(now, members, EventKind::NodeReady, &format!("node {name}: Ready ({why})"))
        } else {
            let detail = format!(
                "node {name}: Ready {} ({why}), seen {}; stamped with its last heartbeat",
                cond.status,
                crate::model::clock::ts(now)
            );
            Self::rows(heard, members, EventKind::NodeNotReady, &detail)
        }
    }

    /// A node's lease as listed or watched: a renewal after it went stale is a row.
    pub fn lease(&mut self, l: &Lease, members: &[String]) -> Vec<Event> {
        let Some(node) = l.metadata.name.clone() else { return Vec::new() };
        let Some(t) = l.spec.as_ref().and_then(|s| s.renew_time.as_ref()).and_then(|t| utc(&t.0))
        else {
            return Vec::new();
        };
        let gap = self.renewed.insert(node.clone(), t).map(|prev| t - prev);
        if !self.stale.remove(&node) {
            return Vec::new();
        }
        let gap = gap.map_or(String::new(), |g| {
            format!(" after {:.1} s", g.num_milliseconds() as f64 / 1000.0)
        });
        Self::rows(
            t,
            members,
            EventKind::NodeLeaseRenewed,
            &format!("node {node}: lease renewed{gap}"),
        )
    }

    /// At `now`: each node whose lease is older than [`LEASE_STALE`] and was not yet said
    /// to be is a row for each member on it, stamped with the lease's renewTime.
    pub fn tick(
        &mut self,
        now: DateTime<Utc>,
        members_on: &dyn Fn(&str) -> Vec<String>,
    ) -> Vec<Event> {
        let stale = chrono::Duration::from_std(LEASE_STALE).unwrap_or(chrono::Duration::MAX);
        let mut out = Vec::new();
        for (node, t) in &self.renewed {
            if now - *t > stale && self.stale.insert(node.clone()) {
                let age = (now - *t).num_milliseconds() as f64 / 1000.0;
                let detail = format!(
                    "node {node}: lease last renewed {}, {age:.1} s before {}",
                    crate::model::clock::ts(*t),
                    crate::model::clock::ts(now)
                );
                out.extend(Self::rows(*t, &members_on(node), EventKind::NodeLeaseStale, &detail));
            }
        }
        out
    }
}

/// The row that stops the node watch, or says a passing error (retried).
fn watch_error(now: DateTime<Utc>, what: &str, e: &watcher::Error) -> (Event, bool) {
    let forbidden = matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 403
    );
    let detail = if forbidden {
        format!(
            "{what}: forbidden: no node evidence in this run (apply the current deploy/k8s/leaderwatch/rbac.yaml)"
        )
    } else {
        format!("{what}: {e}")
    };
    (Event::new(now, Source::Kubernetes, "", EventKind::WatchError, detail), forbidden)
}

/// Watches every node and the node leases, and checks the leases' age every second, for
/// as long as the run: rows about the members on each node into `tx`.
pub fn spawn_node_watcher(
    client: Client,
    placement: Placement,
    clock: Arc<dyn Clock>,
    tx: UnboundedSender<Event>,
) -> JoinHandle<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
    tokio::spawn(async move {
        let mut tracker = NodeTracker::default();
        let node_stream =
            watcher(nodes, watcher::Config::default()).default_backoff().applied_objects();
        let lease_stream =
            watcher(leases, watcher::Config::default()).default_backoff().applied_objects();
        futures::pin_mut!(node_stream, lease_stream);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut nodes_on, mut leases_on) = (true, true);
        while nodes_on || leases_on {
            let now = clock.now();
            let rows = tokio::select! {
                Some(item) = node_stream.next(), if nodes_on => match item {
                    Ok(n) => {
                        let name = n.metadata.name.clone().unwrap_or_default();
                        tracker.node(&n, &members_on(&placement, &name), now)
                    }
                    Err(e) => {
                        let (row, stop) = watch_error(now, "nodes", &e);
                        nodes_on = !stop;
                        vec![row]
                    }
                },
                Some(item) = lease_stream.next(), if leases_on => match item {
                    Ok(l) => {
                        let name = l.metadata.name.clone().unwrap_or_default();
                        tracker.lease(&l, &members_on(&placement, &name))
                    }
                    Err(e) => {
                        let (row, stop) = watch_error(now, "node leases", &e);
                        leases_on = !stop;
                        vec![row]
                    }
                },
                _ = tick.tick() => tracker.tick(now, &|n| members_on(&placement, n)),
            };
            for r in rows {
                if tx.send(r).is_err() {
                    return;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("a time")
    }

    fn jiff(s: &str) -> k8s_openapi::jiff::Timestamp {
        s.parse().expect("a time")
    }

    fn lease(node: &str, renewed: &str) -> Lease {
        Lease {
            metadata: ObjectMeta { name: Some(node.into()), ..Default::default() },
            spec: Some(LeaseSpec {
                renew_time: Some(MicroTime(jiff(renewed))),
                ..Default::default()
            }),
        }
    }

    fn node(name: &str, status: &str, heartbeat: &str) -> Node {
        Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: status.into(),
                    reason: Some("NodeStatusUnknown".into()),
                    last_heartbeat_time: Some(Time(jiff(heartbeat))),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A lost node: its lease stops; 20 s on it is stale, NotReady comes later still, and
    /// both rows are stamped with the last renewal, before the election the loss caused.
    #[test]
    fn a_lost_nodes_rows_are_stamped_with_its_last_renewal() {
        let mut tr = NodeTracker::default();
        let on = |_: &str| vec!["dlock-etcd-0".to_owned()];
        let members = on("lw-node-b");
        assert!(
            tr.node(
                &node("lw-node-b", "True", "2026-12-07T00:20:00Z"),
                &members,
                t("2026-12-07T00:26:00Z")
            )
            .is_empty()
        );
        assert!(tr.lease(&lease("lw-node-b", "2026-12-07T00:26:40Z"), &members).is_empty());
        assert!(tr.tick(t("2026-12-07T00:26:55Z"), &on).is_empty(), "15 s: not yet stale");
        let stale = tr.tick(t("2026-12-07T00:27:01Z"), &on);
        assert_eq!(stale.len(), 1);
        assert_eq!(
            (stale[0].kind, stale[0].member.as_str()),
            (EventKind::NodeLeaseStale, "dlock-etcd-0")
        );
        assert_eq!(stale[0].ts, t("2026-12-07T00:26:40Z"));
        assert!(tr.tick(t("2026-12-07T00:27:05Z"), &on).is_empty(), "said once");
        let nr = tr.node(
            &node("lw-node-b", "Unknown", "2026-12-07T00:20:00Z"),
            &members,
            t("2026-12-07T00:27:30Z"),
        );
        assert_eq!((nr[0].kind, nr[0].ts), (EventKind::NodeNotReady, t("2026-12-07T00:26:40Z")));
        // Back: renewed, then Ready.
        let back = tr.lease(&lease("lw-node-b", "2026-12-07T00:28:00Z"), &members);
        assert_eq!(back[0].kind, EventKind::NodeLeaseRenewed);
        assert!(back[0].detail.contains("after 80.0 s"), "{}", back[0].detail);
        let ready = tr.node(
            &node("lw-node-b", "True", "2026-12-07T00:28:01Z"),
            &members,
            t("2026-12-07T00:28:02Z"),
        );
        assert_eq!(ready[0].kind, EventKind::NodeReady);
    }

    /// A node first seen NotReady is news; a node with no member on it makes no row.
    #[test]
    fn a_node_first_seen_not_ready_is_a_row_and_an_empty_node_is_none() {
        let mut tr = NodeTracker::default();
        let rows = tr.node(
            &node("n1", "False", "2026-12-07T00:20:00Z"),
            &["m0".into()],
            t("2026-12-07T00:21:00Z"),
        );
        assert_eq!(
            (rows[0].kind, rows[0].ts),
            (EventKind::NodeNotReady, t("2026-12-07T00:20:00Z"))
        );
        assert!(
            tr.node(&node("n2", "False", "2026-12-07T00:20:00Z"), &[], t("2026-12-07T00:21:00Z"))
                .is_empty()
        );
    }
}
