//! A fake Kubernetes API server on 127.0.0.1:0 that speaks the real wire format for what
//! leaderwatch uses (pods, nodes, PVCs, the PDB, the etcd StatefulSet from
//! deploy/k8s/etcd/statefulset.yaml, the eviction subresource with PDB semantics and
//! server-side dry run) and DRIVES A REAL `LocalCluster`: an accepted
//! eviction marks the pod, SIGTERMs that etcd member, deletes the pod, and after a delay
//! creates the replacement (Pending, then Running as the member restarts, Ready once its
//! /health is true). Pod IPs are 127.0.0.1 and the port named etcd-client is the local
//! member's client port, so `--reach pod-ip` finds the real members.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use leaderwatch::io::local::LocalCluster;
use serde_json::{Value, json};
use tokio::sync::Mutex;

pub const NS: &str = "dlock";
/// The StatefulSet that owns the pods (the name in deploy/k8s/etcd/statefulset.yaml).
pub const STS: &str = "dlock-etcd";
const STS_UID: &str = "uid-sts";

/// Knobs a test turns to make one thing wrong.
#[derive(Debug, Clone, Default)]
pub struct Knobs {
    /// Answer 403 to everything.
    pub forbidden: bool,
    /// Reject this many eviction attempts with 429 before PDB semantics apply.
    pub block_evictions: u32,
    /// Put every pod on node-0.
    pub same_node: bool,
    /// Give every node the same zone.
    pub same_zone: bool,
    /// StorageClass of the PVCs (default premium-rwo).
    pub storage_class: Option<String>,
    /// Report this many allowed disruptions instead of computing it.
    pub pdb_allowed: Option<i32>,
    /// Advertise a dead port for dlock-etcd-2's etcd-client.
    pub wrong_port: bool,
    /// On an eviction, end every watch and compact the history, so that resuming from the
    /// last resourceVersion gets 410 Gone and the client must relist.
    pub drop_watch_on_evict: bool,
    /// Serve everything, as for a cluster admin (laptop mode); by default only what the
    /// Role and ClusterRole in deploy/k8s/leaderwatch/rbac.yaml allow (else 403).
    pub no_rbac: bool,
    /// Take this (group, resource, verb) out of the Role, to prove it is enforced.
    pub revoke: Option<Rule>,
    /// Serve the StatefulSet with its etcd container's args removed (no flags at all).
    pub etcd_no_flags: bool,
}

/// deploy/k8s/etcd/statefulset.yaml as JSON, as the API server would return it.
fn statefulset_manifest() -> Value {
    let mut v: Value = super::yaml("deploy/k8s/etcd/statefulset.yaml");
    assert_eq!(v["metadata"]["name"], STS, "the fake's pods are named after the StatefulSet");
    v["metadata"]["uid"] = json!(STS_UID);
    v["metadata"]["generation"] = json!(1);
    v
}

/// (apiGroup, resource[/subresource], verb)
pub type Rule = (String, String, String);

/// The rules of every Role and ClusterRole in deploy/k8s/leaderwatch/rbac.yaml.
pub fn leaderwatch_rules() -> BTreeSet<Rule> {
    let mut out = BTreeSet::new();
    for v in super::yaml_values("deploy/k8s/leaderwatch/rbac.yaml") {
        let v: Value = serde_json::to_value(&v).expect("YAML as JSON");
        if !matches!(v["kind"].as_str(), Some("Role" | "ClusterRole")) {
            continue;
        }
        for r in v["rules"].as_array().into_iter().flatten() {
            for g in r["apiGroups"].as_array().into_iter().flatten() {
                for res in r["resources"].as_array().into_iter().flatten() {
                    for verb in r["verbs"].as_array().into_iter().flatten() {
                        out.insert((
                            g.as_str().unwrap_or("").into(),
                            res.as_str().unwrap_or("").into(),
                            verb.as_str().unwrap_or("").into(),
                        ));
                    }
                }
            }
        }
    }
    out
}

#[derive(Debug, Clone)]
struct PodState {
    uid: String,
    member: usize,
    port: u16,
    phase: &'static str,
    ready: bool,
    deleting: bool,
}

struct Inner {
    pods: BTreeMap<String, PodState>,
    rv: u64,
    /// Watch history: (resourceVersion, resource, type, object).
    history: Vec<(u64, &'static str, &'static str, Value)>,
    /// core/v1 Events about the pods, as the kubelet and scheduler would write them.
    events: Vec<Value>,
    /// Resuming a watch from before this is 410 Gone.
    compacted: u64,
    /// Bumped to end every open watch.
    watch_gen: u64,
    /// 410 answers given.
    pub gone_sent: u64,
    /// Port-forward streams opened.
    /// What the RBAC rules allow (None: everything), and what was used.
    rules: Option<BTreeSet<Rule>>,
    used: BTreeSet<Rule>,
    /// The etcd StatefulSet manifest (knobs applied when served).
    statefulset: Value,
    uid_seq: u64,
    knobs: Knobs,
    /// (pod, dry_run) of every accepted eviction.
    evictions: Vec<(String, bool)>,
    reschedule_delay: Duration,
}

#[derive(Clone)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    cluster: Arc<Mutex<LocalCluster>>,
    changed: Arc<tokio::sync::Notify>,
}

impl Inner {
    /// Records a change of pod `name` for watchers (DELETED carries the last state).
    fn touch(&mut self, name: &str, kind: &'static str, last: Option<Value>) {
        self.rv += 1;
        let obj = match self.pods.get(name) {
            Some(p) => pod_json(name, p, &self.knobs),
            None => last.unwrap_or(Value::Null),
        };
        let mut obj = obj;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.history.push((self.rv, "pods", kind, obj));
    }

    /// Records a core/v1 Event about pod `name`.
    fn k8s_event(&mut self, name: &str, reason: &str, message: &str) {
        self.rv += 1;
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let ev = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("{name}.{}", self.rv), "namespace": NS, "uid": format!("ev-{}", self.rv), "resourceVersion": self.rv.to_string()},
            "involvedObject": {"kind": "Pod", "name": name, "namespace": NS},
            "reason": reason, "message": message, "type": "Normal", "count": 1, "lastTimestamp": now,
            "source": {"component": "kubelet"}});
        self.events.push(ev.clone());
        self.history.push((self.rv, "events", "ADDED", ev));
    }
}

pub struct FakeApi {
    pub url: String,
    shared: Shared,
    server: tokio::task::JoinHandle<()>,
    poller: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.server.abort();
        self.poller.abort();
    }
}

fn status(code: u16, reason: &str, message: &str, causes: Value) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code, "details": {"causes": causes}});
    (StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), Json(body))
        .into_response()
}

fn pod_json(name: &str, p: &PodState, knobs: &Knobs) -> Value {
    let node = if knobs.same_node { "node-0".to_owned() } else { format!("node-{}", p.member) };
    let port = if knobs.wrong_port && name.ends_with("-2") { 1 } else { p.port };
    let mut meta = json!({"name": name, "namespace": NS, "uid": p.uid,
        "labels": {"app.kubernetes.io/name": "dlock-etcd", "app.kubernetes.io/instance": "dlock-etcd"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": STS, "uid": STS_UID, "controller": true, "blockOwnerDeletion": true}]});
    let mut conditions =
        vec![json!({"type": "Ready", "status": if p.ready { "True" } else { "False" }})];
    if p.deleting {
        meta["deletionTimestamp"] =
            json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        conditions.push(json!({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}));
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"nodeName": node, "subdomain": "dlock-etcd-headless",
            "containers": [{"name": "etcd", "image": "gcr.io/etcd-development/etcd:v3.6.14",
                "ports": [{"name": "etcd-client", "containerPort": port}, {"name": "etcd-peer", "containerPort": 2380}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": format!("data-{name}")}}]},
        "status": {"phase": p.phase, "podIP": "127.0.0.1", "conditions": conditions}})
}

/// 403 unless the request is allowed: the `forbidden` knob, then the RBAC rules.
async fn authz(s: &Shared, group: &str, resource: &str, verb: &str) -> Option<Response> {
    let mut g = s.inner.lock().await;
    let user = "system:serviceaccount:dlock:leaderwatch";
    let deny = |what: &str| {
        Some(status(
            403,
            "Forbidden",
            &format!(
                "{what} is forbidden: User \"{user}\" cannot {verb} resource \"{what}\" in API group \"{group}\""
            ),
            json!([]),
        ))
    };
    if g.knobs.forbidden {
        return deny(resource);
    }
    let rule = (group.to_owned(), resource.to_owned(), verb.to_owned());
    if let Some(rules) = &g.rules
        && !rules.contains(&rule)
    {
        return deny(resource);
    }
    g.used.insert(rule);
    None
}

fn is_watch(q: &BTreeMap<String, String>) -> bool {
    q.get("watch").is_some_and(|w| w == "true" || w == "1")
}

async fn list_pods(State(s): State<Shared>, Query(q): Query<BTreeMap<String, String>>) -> Response {
    if let Some(r) = authz(&s, "", "pods", if is_watch(&q) { "watch" } else { "list" }).await {
        return r;
    }
    if is_watch(&q) {
        let from: u64 = q.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
        let secs: u64 = q.get("timeoutSeconds").and_then(|v| v.parse().ok()).unwrap_or(290);
        return watch_pods(s, from, Duration::from_secs(secs)).await;
    }
    let g = s.inner.lock().await;
    let items: Vec<Value> = g.pods.iter().map(|(n, p)| pod_json(n, p, &g.knobs)).collect();
    Json(json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": g.rv.to_string()}, "items": items})).into_response()
}

/// A watch: JSON lines of the changes after `from`, BOOKMARKs every second, 410 Gone as
/// an ERROR event when `from` is older than the compacted history.
async fn watch_pods(s: Shared, from: u64, timeout: Duration) -> Response {
    watch(s, "pods", from, timeout).await
}

async fn list_events(
    State(s): State<Shared>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    if let Some(r) = authz(&s, "", "events", if is_watch(&q) { "watch" } else { "list" }).await {
        return r;
    }
    if is_watch(&q) {
        let from: u64 = q.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
        let secs: u64 = q.get("timeoutSeconds").and_then(|v| v.parse().ok()).unwrap_or(290);
        return watch(s, "events", from, Duration::from_secs(secs)).await;
    }
    let g = s.inner.lock().await;
    Json(json!({"apiVersion": "v1", "kind": "EventList", "metadata": {"resourceVersion": g.rv.to_string()}, "items": g.events})).into_response()
}

async fn watch(s: Shared, resource: &'static str, from: u64, timeout: Duration) -> Response {
    let generation = s.inner.lock().await.watch_gen;
    let deadline = tokio::time::Instant::now() + timeout;
    let state = (s, from, false, tokio::time::Instant::now());
    let stream = futures::stream::unfold(
        state,
        move |(s, mut from, done, mut last_bookmark)| async move {
            if done {
                return None;
            }
            loop {
                let notified = s.changed.notified();
                {
                    let mut g = s.inner.lock().await;
                    if g.watch_gen != generation || tokio::time::Instant::now() >= deadline {
                        return None;
                    }
                    if from < g.compacted {
                        g.gone_sent += 1;
                        let line = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "message": format!("too old resource version: {from} ({})", g.compacted), "reason": "Expired", "code": 410}});
                        return Some((
                            Ok::<_, std::convert::Infallible>(format!("{line}\n")),
                            (s.clone(), from, true, last_bookmark),
                        ));
                    }
                    let next = g
                        .history
                        .iter()
                        .find(|(rv, res, _, _)| *rv > from && *res == resource)
                        .cloned();
                    if let Some((rv, _, kind, obj)) = next {
                        from = rv;
                        let line = json!({"type": kind, "object": obj});
                        return Some((
                            Ok(format!("{line}\n")),
                            (s.clone(), from, false, last_bookmark),
                        ));
                    }
                    if last_bookmark.elapsed() >= Duration::from_secs(1) {
                        last_bookmark = tokio::time::Instant::now();
                        let (kind, api) = match resource {
                            "pods" => ("Pod", "v1"),
                            "nodes" => ("Node", "v1"),
                            "leases" => ("Lease", "coordination.k8s.io/v1"),
                            _ => ("Event", "v1"),
                        };
                        let line = json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api, "metadata": {"resourceVersion": g.rv.to_string()}}});
                        from = from.max(g.rv);
                        return Some((
                            Ok(format!("{line}\n")),
                            (s.clone(), from, false, last_bookmark),
                        ));
                    }
                }
                let _ = tokio::time::timeout(Duration::from_millis(200), notified).await;
            }
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(axum::body::Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn get_pod(State(s): State<Shared>, Path((_ns, name)): Path<(String, String)>) -> Response {
    if let Some(r) = authz(&s, "", "pods", "get").await {
        return r;
    }
    let g = s.inner.lock().await;
    match g.pods.get(&name) {
        Some(p) => Json(pod_json(&name, p, &g.knobs)).into_response(),
        None => status(404, "NotFound", &format!("pods \"{name}\" not found"), json!([])),
    }
}

/// The nodes, every one Ready (the node watch; a fault of a node is the lab's, not this
/// server's): one per member, as the pods name them.
async fn list_nodes(
    State(s): State<Shared>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    if let Some(r) = authz(&s, "", "nodes", if is_watch(&q) { "watch" } else { "list" }).await {
        return r;
    }
    if is_watch(&q) {
        let from: u64 = q.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
        let secs: u64 = q.get("timeoutSeconds").and_then(|v| v.parse().ok()).unwrap_or(290);
        return watch(s, "nodes", from, Duration::from_secs(secs)).await;
    }
    let g = s.inner.lock().await;
    let items: Vec<Value> = (0..g.pods.len())
        .map(|i| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("node-{i}")},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}))
        .collect();
    Json(json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": g.rv.to_string()}, "items": items})).into_response()
}

/// The node leases: none (a lease that this server never renewed would go stale).
async fn list_leases(
    State(s): State<Shared>,
    Path(_ns): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let verb = if is_watch(&q) { "watch" } else { "list" };
    if let Some(r) = authz(&s, "coordination.k8s.io", "leases", verb).await {
        return r;
    }
    if is_watch(&q) {
        let from: u64 = q.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
        let secs: u64 = q.get("timeoutSeconds").and_then(|v| v.parse().ok()).unwrap_or(290);
        return watch(s, "leases", from, Duration::from_secs(secs)).await;
    }
    let rv = s.inner.lock().await.rv.to_string();
    Json(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "LeaseList", "metadata": {"resourceVersion": rv}, "items": []})).into_response()
}

async fn get_node(State(s): State<Shared>, Path(name): Path<String>) -> Response {
    if let Some(r) = authz(&s, "", "nodes", "get").await {
        return r;
    }
    let same = s.inner.lock().await.knobs.same_zone;
    let i = name.trim_start_matches("node-");
    let zone = if same {
        "europe-west1-b".to_owned()
    } else {
        format!("europe-west1-{}", ["b", "c", "d"][i.parse::<usize>().unwrap_or(0) % 3])
    };
    Json(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}}})).into_response()
}

async fn get_pvc(State(s): State<Shared>, Path((_ns, name)): Path<(String, String)>) -> Response {
    if let Some(r) = authz(&s, "", "persistentvolumeclaims", "get").await {
        return r;
    }
    let class =
        s.inner.lock().await.knobs.storage_class.clone().unwrap_or_else(|| "premium-rwo".into());
    Json(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": NS},
        "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
        "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}}}))
    .into_response()
}

/// The StatefulSet as served now: the manifest, the knobs, and a status from the pods.
fn statefulset_json(g: &Inner) -> Value {
    let mut v = g.statefulset.clone();
    if g.knobs.etcd_no_flags
        && let Some(c) = v["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .and_then(|cs| cs.first_mut())
            .and_then(Value::as_object_mut)
    {
        c.remove("args");
    }
    let ready = g.pods.values().filter(|p| p.ready && !p.deleting).count();
    v["metadata"]["resourceVersion"] = json!(g.rv.to_string());
    v["status"] = json!({"observedGeneration": 1, "replicas": g.pods.len(), "readyReplicas": ready, "availableReplicas": ready,
        "currentReplicas": g.pods.len(), "updatedReplicas": g.pods.len()});
    v
}

/// Does an equality-only labelSelector (`k=v,k2==v2`) select `labels`? Other syntax is an error.
fn selects(selector: &str, labels: &Value) -> Result<bool, String> {
    let mut all = true;
    for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (k, v) = term
            .split_once("==")
            .or_else(|| term.split_once('='))
            .filter(|(k, _)| !k.ends_with('!'))
            .ok_or_else(|| format!("the fake supports only k=v selectors: {term}"))?;
        all &= labels[k.trim()].as_str() == Some(v.trim());
    }
    Ok(all)
}

async fn list_statefulsets(
    State(s): State<Shared>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    if let Some(r) = authz(&s, "apps", "statefulsets", "list").await {
        return r;
    }
    let g = s.inner.lock().await;
    let sts = statefulset_json(&g);
    let items = match q.get("labelSelector").map(|sel| selects(sel, &sts["metadata"]["labels"])) {
        Some(Err(m)) => return status(400, "BadRequest", &m, json!([])),
        Some(Ok(false)) => vec![],
        Some(Ok(true)) | None => vec![sts],
    };
    Json(json!({"apiVersion": "apps/v1", "kind": "StatefulSetList", "metadata": {"resourceVersion": g.rv.to_string()}, "items": items})).into_response()
}

async fn get_statefulset(
    State(s): State<Shared>,
    Path((_ns, name)): Path<(String, String)>,
) -> Response {
    if let Some(r) = authz(&s, "apps", "statefulsets", "get").await {
        return r;
    }
    if name != STS {
        return status(
            404,
            "NotFound",
            &format!("statefulsets.apps \"{name}\" not found"),
            json!([]),
        );
    }
    let g = s.inner.lock().await;
    Json(statefulset_json(&g)).into_response()
}

fn allowed(g: &Inner) -> i32 {
    let healthy = g.pods.values().filter(|p| p.ready && !p.deleting).count() as i32;
    g.knobs.pdb_allowed.unwrap_or((healthy - 2).max(0))
}

async fn get_pdb(State(s): State<Shared>, Path((_ns, name)): Path<(String, String)>) -> Response {
    if let Some(r) = authz(&s, "policy", "poddisruptionbudgets", "get").await {
        return r;
    }
    let g = s.inner.lock().await;
    let healthy = g.pods.values().filter(|p| p.ready && !p.deleting).count();
    Json(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": NS},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": "dlock-etcd"}}},
        "status": {"currentHealthy": healthy, "desiredHealthy": 2, "disruptionsAllowed": allowed(&g), "expectedPods": 3}}))
    .into_response()
}

async fn evict(
    State(s): State<Shared>,
    Path((_ns, name)): Path<(String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = authz(&s, "", "pods/eviction", "create").await {
        return r;
    }
    if body["kind"] != "Eviction" || body["metadata"]["name"] != name.as_str() {
        return status(400, "BadRequest", "body is not an Eviction of this pod", json!([]));
    }
    let dry =
        q.get("dryRun").is_some_and(|v| v == "All") || body["deleteOptions"]["dryRun"][0] == "All";
    let mut g = s.inner.lock().await;
    if !g.pods.contains_key(&name) {
        return status(404, "NotFound", &format!("pods \"{name}\" not found"), json!([]));
    }
    let healthy = g.pods.values().filter(|p| p.ready && !p.deleting).count();
    let knob = g.knobs.block_evictions > 0;
    if knob || allowed(&g) < 1 {
        g.knobs.block_evictions = g.knobs.block_evictions.saturating_sub(1);
        // The API server's wording (desiredHealthy, currentHealthy); a knob-blocked attempt
        // plays "one member not Ready yet".
        let has = if knob { 2 } else { healthy };
        let msg = format!(
            "The disruption budget dlock-etcd-pdb needs 2 healthy pods and has {has} currently"
        );
        return status(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            json!([{"reason": "DisruptionBudget", "message": msg}]),
        );
    }
    g.evictions.push((name.clone(), dry));
    if !dry {
        let delay = g.reschedule_delay;
        if let Some(p) = g.pods.get_mut(&name) {
            p.deleting = true;
        }
        g.touch(&name, "MODIFIED", None);
        g.k8s_event(&name, "Killing", "Stopping container etcd");
        if g.knobs.drop_watch_on_evict {
            g.watch_gen += 1;
            g.compacted = g.rv + 1;
        }
        s.changed.notify_waiters();
        let s2 = s.clone();
        tokio::spawn(async move { reschedule(s2, name, delay).await });
    }
    (StatusCode::CREATED, Json(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}))).into_response()
}

/// What the kubelet and the StatefulSet controller would do after an eviction.
async fn reschedule(s: Shared, name: String, delay: Duration) {
    let Some(member) = s.inner.lock().await.pods.get(&name).map(|p| p.member) else { return };
    {
        let mut c = s.cluster.lock().await;
        let _ = c.terminate(member, Duration::from_secs(30)).await; // SIGTERM, like the kubelet
    }
    let port = {
        let mut g = s.inner.lock().await;
        let last = g.pods.get(&name).map(|p| pod_json(&name, p, &g.knobs));
        let old = g.pods.remove(&name);
        g.touch(&name, "DELETED", last);
        old.map(|p| p.port).unwrap_or_default()
    };
    s.changed.notify_waiters();
    tokio::time::sleep(delay).await;
    {
        let mut g = s.inner.lock().await;
        g.uid_seq += 1;
        let uid = format!("uid-{}", g.uid_seq);
        g.pods.insert(
            name.clone(),
            PodState { uid, member, port, phase: "Pending", ready: false, deleting: false },
        );
        g.touch(&name, "ADDED", None);
        g.k8s_event(
            &name,
            "Scheduled",
            &format!("Successfully assigned dlock/{name} to node-{member}"),
        );
    }
    s.changed.notify_waiters();
    let _ = s.cluster.lock().await.restart(member);
    let mut g = s.inner.lock().await;
    if let Some(p) = g.pods.get_mut(&name) {
        p.phase = "Running";
        g.touch(&name, "MODIFIED", None);
    }
    drop(g);
    s.changed.notify_waiters();
}

/// Readiness as the kubelet's probe would see it: /health true.
async fn poll_ready(s: Shared) {
    loop {
        let members: Vec<(String, usize)> =
            s.inner.lock().await.pods.iter().map(|(n, p)| (n.clone(), p.member)).collect();
        for (name, m) in members {
            let ok = s.cluster.lock().await.healthy(m).await;
            let mut g = s.inner.lock().await;
            let changed = match g.pods.get_mut(&name) {
                Some(p) if p.phase == "Running" && !p.deleting && p.ready != ok => {
                    p.ready = ok;
                    true
                }
                _ => false,
            };
            if changed {
                g.touch(&name, "MODIFIED", None);
                drop(g);
                s.changed.notify_waiters();
            }
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

impl FakeApi {
    /// Serves the pods `dlock-etcd-0..N` backed by the cluster's members.
    pub async fn start(cluster: LocalCluster, knobs: Knobs, reschedule_delay: Duration) -> FakeApi {
        let mut pods = BTreeMap::new();
        for (i, m) in cluster.members().iter().enumerate() {
            let port = m.url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("member port");
            pods.insert(
                format!("dlock-etcd-{i}"),
                PodState {
                    uid: format!("uid-{i}"),
                    member: i,
                    port,
                    phase: "Running",
                    ready: true,
                    deleting: false,
                },
            );
        }
        let n = pods.len() as u64;
        let mut rules = (!knobs.no_rbac).then(leaderwatch_rules);
        if let (Some(r), Some(revoke)) = (rules.as_mut(), &knobs.revoke) {
            r.remove(revoke);
        }
        let shared = Shared {
            inner: Arc::new(Mutex::new(Inner {
                pods,
                rv: 1,
                history: vec![],
                events: vec![],
                compacted: 0,
                watch_gen: 0,
                gone_sent: 0,
                rules,
                used: BTreeSet::new(),
                statefulset: statefulset_manifest(),
                uid_seq: n,
                knobs,
                evictions: vec![],
                reschedule_delay,
            })),
            cluster: Arc::new(Mutex::new(cluster)),
            changed: Arc::new(tokio::sync::Notify::new()),
        };
        let app = Router::new()
            .route("/api/v1/namespaces/{ns}/pods", get(list_pods))
            .route("/api/v1/namespaces/{ns}/events", get(list_events))
            .route("/api/v1/namespaces/{ns}/pods/{name}", get(get_pod))
            .route("/api/v1/namespaces/{ns}/pods/{name}/eviction", post(evict))
            .route("/api/v1/nodes", get(list_nodes))
            .route("/api/v1/nodes/{name}", get(get_node))
            .route("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", get(list_leases))
            .route("/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}", get(get_pvc))
            .route("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}", get(get_pdb))
            .route("/apis/apps/v1/namespaces/{ns}/statefulsets", get(list_statefulsets))
            .route("/apis/apps/v1/namespaces/{ns}/statefulsets/{name}", get(get_statefulset))
            .with_state(shared.clone());
        let listener =
            tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake API server");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let poller = tokio::spawn(poll_ready(shared.clone()));
        FakeApi { url, shared, server, poller }
    }

    /// Stops serving and hands the local cluster back (for the next case).
    pub async fn into_cluster(self) -> LocalCluster {
        self.server.abort();
        self.poller.abort();
        let cluster = self.shared.cluster.clone();
        drop(self);
        // The aborted tasks drop their clones; wait until ours is the last one.
        let mut cluster = cluster;
        for _ in 0..500 {
            match Arc::try_unwrap(cluster) {
                Ok(m) => return m.into_inner(),
                Err(back) => {
                    cluster = back;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        panic!("the fake API server still holds the cluster after 10 s");
    }

    /// SIGSTOPs the member behind pod `i` (its /health stops answering: not Ready).
    pub async fn freeze(&self, i: usize) {
        self.shared.cluster.lock().await.freeze(i).expect("freeze");
    }

    pub async fn thaw(&self, i: usize) {
        self.shared.cluster.lock().await.thaw(i).expect("thaw");
    }

    /// The (group, resource, verb) the RBAC check let through so far.
    pub async fn used(&self) -> BTreeSet<Rule> {
        self.shared.inner.lock().await.used.clone()
    }

    /// How many watches were answered with 410 Gone.
    pub async fn gone_sent(&self) -> u64 {
        self.shared.inner.lock().await.gone_sent
    }

    pub async fn evictions(&self) -> Vec<(String, bool)> {
        self.shared.inner.lock().await.evictions.clone()
    }

    /// A kubeconfig file for the binary, pointing at this server.
    pub fn kubeconfig(&self, dir: &std::path::Path) -> std::path::PathBuf {
        let p = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: u\n    namespace: {NS}\ncurrent-context: fake\n",
            self.url
        );
        std::fs::write(&p, text).expect("write kubeconfig");
        p
    }

    /// The kube client leaderwatch would build, pointed here.
    pub fn client(&self) -> kube::Client {
        let cfg = kube::Config::new(self.url.parse().expect("url"));
        leaderwatch::k8s::from_config(cfg, Duration::from_secs(5)).expect("client")
    }
}
