//! The in-cluster sitting's objects, from the committed manifests compiled into the binary
//! (deploy/k8s/leaderwatch: rbac.yaml, the method's extra RBAC file, job-measure.yaml):
//! parsed into typed objects, the Job's image and arguments set from the user's flags (the
//! files stay the template and are never edited; `measure`'s arguments are written and
//! read back by src/ops/measure/args.rs, [`args_of`] a Job's), applied server-side (dry run first), and the pod that brings a run
//! directory back from the volume through its log ([`fetch`], src/io/pack.rs).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{EnvVar, PersistentVolumeClaim, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams,
    PropagationPolicy,
};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{KubeError, call};
use crate::model::baseline::KubeMethod;

/// The committed manifests, as the binary was built with them.
pub const RBAC: &str = include_str!("../../deploy/k8s/leaderwatch/rbac.yaml");
pub const RBAC_MAINTENANCE: &str =
    include_str!("../../deploy/k8s/leaderwatch/rbac-maintenance.yaml");
pub const RBAC_DRAIN: &str = include_str!("../../deploy/k8s/leaderwatch/rbac-drain.yaml");
pub const JOB: &str = include_str!("../../deploy/k8s/leaderwatch/job-measure.yaml");
pub const POD_MONITORING: &str =
    include_str!("../../deploy/k8s/leaderwatch/podmonitoring-sitting.yaml");

/// Server-side apply's field manager: what `kubectl get --show-managed-fields` names.
const MANAGER: &str = "leaderwatch-sitting";

/// One object of the manifests.
#[derive(Debug, Clone)]
pub enum Object {
    ServiceAccount(ServiceAccount),
    Role(Role),
    RoleBinding(RoleBinding),
    ClusterRole(ClusterRole),
    ClusterRoleBinding(ClusterRoleBinding),
    Pvc(Box<PersistentVolumeClaim>),
    Job(Box<Job>),
    /// Managed Service for Prometheus's PodMonitoring (a custom resource: no typed struct).
    PodMonitoring(Box<DynamicObject>),
}

/// The PodMonitoring's kind, `monitoring.googleapis.com/v1`, resource `podmonitorings`.
fn pod_monitoring_resource() -> ApiResource {
    ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "monitoring.googleapis.com",
        "v1",
        "PodMonitoring",
    ))
}

impl Object {
    /// The object as the API's generic type, with its kind's resource: one apply and one
    /// delete for every kind.
    fn erased(&self) -> (ApiResource, Result<DynamicObject, String>) {
        fn e<K: Resource<DynamicType = ()> + Serialize>(
            k: &K,
        ) -> (ApiResource, Result<DynamicObject, String>) {
            let obj = serde_json::to_value(k).and_then(serde_json::from_value).map_err(|e| {
                format!("{} {}: {e}", K::kind(&()), k.meta().name.as_deref().unwrap_or("?"))
            });
            (ApiResource::erase::<K>(&()), obj)
        }
        match self {
            Object::ServiceAccount(o) => e(o),
            Object::Role(o) => e(o),
            Object::RoleBinding(o) => e(o),
            Object::ClusterRole(o) => e(o),
            Object::ClusterRoleBinding(o) => e(o),
            Object::Pvc(o) => e(o.as_ref()),
            Object::Job(o) => e(o.as_ref()),
            Object::PodMonitoring(o) => (pod_monitoring_resource(), Ok(o.as_ref().clone())),
        }
    }

    fn meta(&self) -> &ObjectMeta {
        match self {
            Object::ServiceAccount(o) => &o.metadata,
            Object::Role(o) => &o.metadata,
            Object::RoleBinding(o) => &o.metadata,
            Object::ClusterRole(o) => &o.metadata,
            Object::ClusterRoleBinding(o) => &o.metadata,
            Object::Pvc(o) => &o.metadata,
            Object::Job(o) => &o.metadata,
            Object::PodMonitoring(o) => &o.metadata,
        }
    }

    /// "Job leaderwatch/leaderwatch-measure", for every line about it.
    pub fn describe(&self) -> String {
        let m = self.meta();
        let ns = m.namespace.as_deref().map(|n| format!("{n}/")).unwrap_or_default();
        format!("{} {ns}{}", self.erased().0.kind, m.name.as_deref().unwrap_or("?"))
    }

    /// The API of its kind, in its namespace (cluster-wide without one).
    fn api(&self, client: &Client) -> Api<DynamicObject> {
        let ar = self.erased().0;
        match &self.meta().namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        }
    }
}

/// The objects of one manifest file, in order.
pub fn parse(file: &str, text: &str) -> Result<Vec<Object>, String> {
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let v = <serde_json::Value as serde::Deserialize>::deserialize(doc)
            .map_err(|e| format!("{file}: {e}"))?;
        if v.is_null() {
            continue;
        }
        let kind = v["kind"].as_str().unwrap_or_default().to_owned();
        fn typed<K: DeserializeOwned>(file: &str, v: serde_json::Value) -> Result<K, String> {
            serde_json::from_value(v).map_err(|e| format!("{file}: {e}"))
        }
        out.push(match kind.as_str() {
            "ServiceAccount" => Object::ServiceAccount(typed(file, v)?),
            "Role" => Object::Role(typed(file, v)?),
            "RoleBinding" => Object::RoleBinding(typed(file, v)?),
            "ClusterRole" => Object::ClusterRole(typed(file, v)?),
            "ClusterRoleBinding" => Object::ClusterRoleBinding(typed(file, v)?),
            "PersistentVolumeClaim" => Object::Pvc(Box::new(typed(file, v)?)),
            "Job" => Object::Job(Box::new(typed(file, v)?)),
            "PodMonitoring" => Object::PodMonitoring(Box::new(typed(file, v)?)),
            other => return Err(format!("{file}: a {other:?} is not an object a sitting applies")),
        });
    }
    Ok(out)
}

/// The extra RBAC file a method needs beside rbac.yaml, if any.
pub fn extra_rbac(method: KubeMethod) -> Option<(&'static str, &'static str)> {
    match method {
        KubeMethod::Evict => None,
        KubeMethod::Delete | KubeMethod::RollingRestart => {
            Some(("rbac-maintenance.yaml", RBAC_MAINTENANCE))
        }
        KubeMethod::Drain => Some(("rbac-drain.yaml", RBAC_DRAIN)),
    }
}

/// Where the Job's one optional right lives: the node leases (src/k8s/nodes.rs). Without
/// it the trial runs on, its events.csv saying once that it had no node evidence; the
/// operator may not read bindings there (operator-rbac.yaml), so the sitting does not
/// check it.
pub const OPTIONAL_NAMESPACE: &str = "kube-node-lease";

/// The objects an admin applied for the Job of `method` (rbac.yaml's, and the method's
/// extra file's) that the Job's ServiceAccount `ns/sa` depends on: the account itself and
/// every binding that names it, but the node leases' ([`OPTIONAL_NAMESPACE`]). The sitting
/// only checks them ([`rights_bound`]): it never creates or changes RBAC.
pub fn rights_for(method: KubeMethod, ns: &str, sa: &str) -> Result<Vec<Object>, String> {
    let mut files = vec![("rbac.yaml", RBAC)];
    files.extend(extra_rbac(method));
    let mut out = Vec::new();
    for (file, text) in files {
        for o in parse(file, text)? {
            let names_it = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
                subjects.iter().flatten().any(|s| {
                    s.kind == "ServiceAccount" && s.name == sa && s.namespace.as_deref() == Some(ns)
                })
            };
            let keep = match &o {
                Object::ServiceAccount(a) => {
                    a.metadata.namespace.as_deref() == Some(ns)
                        && a.metadata.name.as_deref() == Some(sa)
                }
                Object::RoleBinding(b) => {
                    names_it(&b.subjects)
                        && b.metadata.namespace.as_deref() != Some(OPTIONAL_NAMESPACE)
                }
                Object::ClusterRoleBinding(b) => names_it(&b.subjects),
                _ => false,
            };
            if keep {
                out.push(o);
            }
        }
    }
    Ok(out)
}

/// Whether each of [`rights_for`]'s objects is in the cluster as the file has it (a
/// binding naming the Job's account, to the same role): the first one missing or different
/// is said (`Some`), with the file an admin applies; a request that fails is the error.
pub async fn rights_bound(
    client: &Client,
    wanted: &[Object],
    method: KubeMethod,
    t: Duration,
) -> Result<Option<String>, KubeError> {
    let file = |o: &Object| match (o, extra_rbac(method)) {
        (Object::RoleBinding(_) | Object::ClusterRoleBinding(_), Some((f, text)))
            if parse(f, text).is_ok_and(|v| v.iter().any(|x| x.describe() == o.describe())) =>
        {
            f
        }
        _ => "rbac.yaml",
    };
    for o in wanted {
        let what = format!("get {}", o.describe());
        let name = o.meta().name.clone().unwrap_or_default();
        let have = call(&what, t, o.api(client).get_opt(&name)).await?;
        let missing = match have {
            None => Some("not found".to_owned()),
            Some(got) => {
                let want = o
                    .erased()
                    .1
                    .map_err(|message| KubeError::Api { what: what.clone(), message })?;
                let bad = ["roleRef", "subjects"].into_iter().find(|k| match k {
                    &"subjects" => {
                        let w = want.data[*k].as_array().cloned().unwrap_or_default();
                        let g = got.data[*k].as_array().cloned().unwrap_or_default();
                        !w.iter().all(|s| g.contains(s))
                    }
                    k => want.data[*k] != got.data[*k],
                });
                bad.map(|k| format!("its {k} is not the file's"))
            }
        };
        if let Some(why) = missing {
            return Ok(Some(format!(
                "{} {why}: the Job's rights are a cluster admin's to apply (`kubectl apply -f deploy/k8s/leaderwatch/{}`; docs/gke-sitting.md, \"The operator's rights\")",
                o.describe(),
                file(o)
            )));
        }
    }
    Ok(None)
}

/// What the user's flags make of the Job.
#[derive(Debug, Clone)]
pub struct JobParams {
    pub image: String,
    /// `measure`'s arguments (after `measure`), written by src/ops/measure/args.rs.
    pub args: Vec<String>,
    /// How long the Job's own work may take (its windows, a blocked eviction, the
    /// recovery): with 5 minutes more, its deadline.
    pub runs_for: Duration,
    /// Added to the container's environment (the test-only idle floor, when set here).
    pub env: Vec<(String, String)>,
    /// The one architecture the image is built for (read from its registry): the Job's
    /// `kubernetes.io/arch`, so that it lands on a node that can run it. `None`: any node
    /// (an image for several, or one whose registry could not be read).
    pub arch: Option<String>,
}

/// The node label a pod asks for an architecture with.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";

/// A reference pinned by digest (`...@sha256:...`): the bytes a node runs are the ones
/// pushed. A tag can move under a node that pulled it before.
pub fn pinned(image: &str) -> bool {
    image.contains("@sha256:")
}

/// The committed Job with the user's image, flags and environment: everything else (the
/// run directory on the volume, the security context, the deadline, no retry) as committed.
pub fn job(template: &Job, p: &JobParams) -> Result<Job, String> {
    let mut job = template.clone();
    let c = job
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .and_then(|s| s.containers.first_mut())
        .ok_or("job-measure.yaml: the Job has no container")?;
    c.image = Some(p.image.clone());
    // A tag is looked up on every start (a node may hold an older image under it); a
    // digest names the bytes, and a node that has them need not ask.
    c.image_pull_policy = Some(if pinned(&p.image) { "IfNotPresent" } else { "Always" }.into());
    if c.args.as_ref().and_then(|a| a.first()).map(String::as_str) != Some("measure") {
        return Err("job-measure.yaml: the container's first argument is not `measure`".into());
    }
    c.args = Some(std::iter::once("measure".to_owned()).chain(p.args.iter().cloned()).collect());
    let env = c.env.get_or_insert_with(Vec::new);
    for (k, v) in &p.env {
        env.push(EnvVar { name: k.clone(), value: Some(v.clone()), ..EnvVar::default() });
    }
    // The fetch pod is made from this template: it asks for the same nodes.
    if let (Some(arch), Some(spec)) =
        (&p.arch, job.spec.as_mut().and_then(|s| s.template.spec.as_mut()))
    {
        spec.node_selector
            .get_or_insert_with(BTreeMap::new)
            .insert(ARCH_LABEL.into(), arch.clone());
    }
    // Room for the windows, a blocked eviction, the recovery and 5 minutes (the disruption,
    // the writing); never below the committed deadline.
    if let Some(s) = job.spec.as_mut() {
        let need = p.runs_for + Duration::from_secs(300);
        let need = i64::try_from(need.as_secs()).unwrap_or(i64::MAX);
        s.active_deadline_seconds = Some(s.active_deadline_seconds.unwrap_or(0).max(need));
    }
    Ok(job)
}

/// The arguments of a Job's `leaderwatch measure`, after `measure` (none when its first
/// argument is not `measure`): src/ops/measure/args.rs reads them as the Job does.
pub fn args_of(j: &Job) -> Vec<String> {
    let args = j
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.args.as_deref())
        .unwrap_or_default();
    match args.split_first() {
        Some((m, rest)) if m == "measure" => rest.to_vec(),
        _ => Vec::new(),
    }
}

/// The PVC the Job writes to (`leaderwatch-data`).
pub fn claim_of(job: &Job) -> Option<String> {
    job.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .volumes
        .as_ref()?
        .iter()
        .find_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()))
}

/// A pod from the Job's own template (image, security context, volume) that prints the
/// run directory `run` as an archive block and exits: read through its log, it brings the
/// files back with nothing but the API. The volume is mounted read-only.
pub fn fetch_pod(job: &Job, name: &str, run: &str) -> Result<Pod, String> {
    let t = job.spec.as_ref().map(|s| s.template.clone()).ok_or("the Job has no spec")?;
    let mut spec = t.spec.ok_or("the Job's template has no spec")?;
    spec.restart_policy = Some("Never".into());
    // It needs no API access.
    spec.automount_service_account_token = Some(false);
    let c = spec.containers.first_mut().ok_or("the Job has no container")?;
    c.name = "pack".into();
    c.args = Some(vec!["pack".into(), format!("/data/{run}")]);
    c.env = None;
    for m in c.volume_mounts.iter_mut().flatten() {
        m.read_only = Some(true);
    }
    let mut labels = BTreeMap::new();
    labels.insert("app.kubernetes.io/name".to_owned(), "leaderwatch".to_owned());
    labels.insert("app.kubernetes.io/component".to_owned(), "fetch".to_owned());
    Ok(Pod {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: job.metadata.namespace.clone(),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// Server-side apply of one object (a dry run when `dry_run`: the API server validates and
/// admits it, nothing is stored).
pub async fn apply(
    client: &Client,
    o: &Object,
    dry_run: bool,
    t: Duration,
) -> Result<(), KubeError> {
    let what = format!("{} {}", if dry_run { "dry-run apply" } else { "apply" }, o.describe());
    let obj = o.erased().1.map_err(|message| KubeError::Api { what: what.clone(), message })?;
    let name = o.meta().name.clone().unwrap_or_default();
    let mut pp = PatchParams::apply(MANAGER).force();
    pp.dry_run = dry_run;
    call(&what, t, o.api(client).patch(&name, &pp, &Patch::Apply(&obj))).await.map(|_| ())
}

/// Whether one object is in the cluster.
pub async fn get(client: &Client, o: &Object, t: Duration) -> Result<bool, KubeError> {
    let what = format!("get {}", o.describe());
    let name = o.meta().name.clone().unwrap_or_default();
    call(&what, t, o.api(client).get_opt(&name)).await.map(|found| found.is_some())
}

/// Deletes one object (gone already is fine); a Job's pods go with it.
pub async fn delete(client: &Client, o: &Object, t: Duration) -> Result<(), KubeError> {
    let what = format!("delete {}", o.describe());
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    let name = o.meta().name.clone().unwrap_or_default();
    match call(&what, t, o.api(client).delete(&name, &dp)).await {
        Ok(_) => Ok(()),
        Err(e) if e.status() == Some(404) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates the fetch pod (a dry run first is not needed: it is made from the Job's
/// template, which the API server admitted).
pub async fn create_pod(client: &Client, pod: &Pod, t: Duration) -> Result<(), KubeError> {
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let what = format!("create pod {ns}/{}", pod.metadata.name.as_deref().unwrap_or("?"));
    call(&what, t, api.create(&PostParams::default(), pod)).await.map(|_| ())
}

/// The fetch pod's name: one at a time.
pub const FETCH_POD: &str = "leaderwatch-fetch";
/// The fetch pod's wait has no fixed bound: it ends when its trouble has lasted its
/// grace (src/k8s/follow/trouble.rs: a pull, a volume, no node), or at this cap.
const FETCH_CAP: Duration = Duration::from_secs(1800);

/// Why a run directory did not come back.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// The fetch pod could not start, did not finish, failed, or printed a bad archive.
    #[error("{0}")]
    Failed(String),
}

/// Brings run directory `run` of `job`'s volume back into `dest`, through the log of a
/// [`fetch_pod`]; the pod is removed when the files are safe, kept to look at otherwise.
pub async fn fetch(
    client: &Client,
    job: &Job,
    run: &str,
    dest: &std::path::Path,
    t: Duration,
) -> Result<crate::io::pack::Unpacked, FetchError> {
    let ns = job.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    clear_fetch_pod(&pods, &ns, t).await?;
    let pod = fetch_pod(job, FETCH_POD, run).map_err(FetchError::Failed)?;
    create_pod(client, &pod, t).await?;
    let phase = fetch_pod_end(&pods, &ns, t).await?;
    let log = call(
        "read the fetch pod's log",
        t.max(Duration::from_secs(60)),
        pods.logs(FETCH_POD, &kube::api::LogParams::default()),
    )
    .await?;
    let r = if phase == "Failed" {
        let last = log.lines().last().unwrap_or("");
        Err(FetchError::Failed(format!("pod {ns}/{FETCH_POD} failed: {last}")))
    } else {
        crate::io::pack::unpack(&log, dest).map_err(FetchError::Failed)
    };
    if r.is_ok() {
        // Left behind, the next fetch removes it first.
        let _ =
            call("delete the fetch pod", t, pods.delete(FETCH_POD, &DeleteParams::default())).await;
    }
    r
}

/// One fetch at a time: an earlier fetch's pod is deleted, and gone within 60 s.
async fn clear_fetch_pod(pods: &Api<Pod>, ns: &str, t: Duration) -> Result<(), FetchError> {
    // Not there is the usual case; one that stays is the error below.
    let _ = call("delete the fetch pod", t, pods.delete(FETCH_POD, &DeleteParams::default())).await;
    let began = std::time::Instant::now();
    while call("get the fetch pod", t, pods.get_opt(FETCH_POD)).await?.is_some() {
        if began.elapsed() > Duration::from_secs(60) {
            return Err(FetchError::Failed(format!(
                "an earlier pod {ns}/{FETCH_POD} is still there after 60 s"
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}

/// Waits for the fetch pod to end (`Succeeded` or `Failed`) for as long as it makes
/// progress: its scheduling (a node added), a zonal disk's detach and attach and a pull
/// take what they take, and trouble that lasts its grace ([`crate::k8s::follow::trouble`])
/// is the error, in Kubernetes' words. [`FETCH_CAP`] bounds it all.
async fn fetch_pod_end(pods: &Api<Pod>, ns: &str, t: Duration) -> Result<String, FetchError> {
    use crate::k8s::follow::trouble::{self, Seen, Watch};
    use k8s_openapi::api::core::v1::Event;
    let events: Api<Event> = Api::namespaced(pods.clone().into_client(), ns);
    let lp = kube::api::ListParams::default().fields(&format!("involvedObject.name={FETCH_POD}"));
    let mut watch = Watch::default();
    let began = std::time::Instant::now();
    loop {
        let p = call("get the fetch pod", t, pods.get(FETCH_POD)).await?;
        let phase = p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            return Ok(phase);
        }
        let uid = p.metadata.uid.clone();
        let mut seen: Vec<(Option<k8s_openapi::jiff::Timestamp>, Seen)> =
            call("list the fetch pod's events", t, events.list(&lp))
                .await?
                .items
                .into_iter()
                .filter(|e| e.involved_object.uid == uid)
                .map(|e| {
                    let at = e.last_timestamp.map(|t| t.0).or(e.event_time.map(|t| t.0));
                    let seen = Seen {
                        reason: e.reason.unwrap_or_default(),
                        message: e.message.unwrap_or_default(),
                    };
                    (at, seen)
                })
                .collect();
        seen.sort_by_key(|(at, _)| *at);
        let seen: Vec<Seen> = seen.into_iter().map(|(_, s)| s).collect();
        let now = trouble::trouble(Some(&p), &seen, &[]);
        if let Some(tr) = watch.observe(now.as_ref(), std::time::Instant::now()) {
            return Err(FetchError::Failed(format!(
                "pod {ns}/{FETCH_POD}: {}: {}; the run stays on the PVC",
                tr.cause,
                tr.kind.advice()
            )));
        }
        if began.elapsed() > FETCH_CAP {
            return Err(FetchError::Failed(format!(
                "pod {ns}/{FETCH_POD} still {phase} after {}; the run stays on the PVC",
                humantime::format_duration(FETCH_CAP)
            )));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> Job {
        parse("job-measure.yaml", JOB)
            .expect("parse")
            .into_iter()
            .find_map(|o| match o {
                Object::Job(j) => Some(*j),
                _ => None,
            })
            .expect("a Job")
    }

    fn params() -> JobParams {
        JobParams {
            image: "registry.example/p/leaderwatch@sha256:00".into(),
            args: ["--target=leader", "--method=delete", "--out=/data/$(POD_NAME)"]
                .map(String::from)
                .to_vec(),
            runs_for: Duration::from_secs(1800 + 600 + 600 + 900),
            env: vec![(crate::io::test_hooks::MIN_IDLE.into(), "1m".into())],
            arch: Some("amd64".into()),
        }
    }

    #[test]
    fn every_committed_manifest_parses_into_the_objects_a_sitting_applies() {
        let kinds = |t: &str| -> Vec<String> {
            parse("f", t).expect("parse").iter().map(|o| o.describe()).collect()
        };
        assert_eq!(
            kinds(RBAC),
            [
                "ServiceAccount dlock/leaderwatch",
                "ServiceAccount leaderwatch/leaderwatch",
                "Role dlock/leaderwatch",
                "RoleBinding dlock/leaderwatch",
                "ClusterRole dlock-leaderwatch-nodes",
                "ClusterRoleBinding dlock-leaderwatch-nodes",
                "Role kube-node-lease/dlock-leaderwatch-node-leases",
                "RoleBinding kube-node-lease/dlock-leaderwatch-node-leases"
            ]
        );
        assert_eq!(
            kinds(JOB),
            [
                "PersistentVolumeClaim leaderwatch/leaderwatch-data",
                "Job leaderwatch/leaderwatch-measure"
            ]
        );
        assert_eq!(kinds(RBAC_MAINTENANCE).len(), 2);
        assert_eq!(kinds(RBAC_DRAIN).len(), 2);
        assert_eq!(kinds(POD_MONITORING), ["PodMonitoring leaderwatch/leaderwatch-sitting"]);
        assert!(parse("f", "kind: Secret\nmetadata: {name: x}\n").is_err());
    }

    /// The live view scrapes the sitting's pod and nothing else: its selector is the Job's
    /// pod labels, its port one the container serves `--metrics-addr` on, in the Job's
    /// namespace; and not the sampler's (whose pods say component: sampler).
    #[test]
    fn the_live_views_pod_monitoring_selects_the_jobs_pod_and_its_metrics_port() {
        let Some(Object::PodMonitoring(pm)) = parse("p", POD_MONITORING).expect("parses").pop()
        else {
            panic!("a PodMonitoring")
        };
        let j = template();
        assert_eq!(pm.metadata.namespace, j.metadata.namespace);
        let pod = j.spec.as_ref().expect("spec").template.clone();
        let labels = pod.metadata.and_then(|m| m.labels).unwrap_or_default();
        let selector = pm.data["spec"]["selector"]["matchLabels"].as_object().expect("matchLabels");
        for (k, v) in selector {
            assert_eq!(labels.get(k).map(String::as_str), v.as_str(), "label {k}");
        }
        assert_eq!(selector["app.kubernetes.io/component"], "sitting");
        let c = &pod.spec.expect("pod spec").containers[0];
        let port_name = pm.data["spec"]["endpoints"][0]["port"].as_str().expect("port");
        let port = c.ports.iter().flatten().find(|p| p.name.as_deref() == Some(port_name));
        let port = port.expect("the container has the PodMonitoring's port").container_port;
        let args = c.args.clone().unwrap_or_default();
        assert!(
            args.contains(&format!("--metrics-addr=0.0.0.0:{port}")),
            "measure serves /metrics on the port: {args:?}"
        );
    }

    #[test]
    fn the_rights_a_sitting_checks_are_the_jobs_account_and_each_binding_naming_it() {
        let names = |m: KubeMethod| -> Vec<String> {
            rights_for(m, "leaderwatch", "leaderwatch")
                .expect("rights")
                .iter()
                .map(Object::describe)
                .collect()
        };
        let base = [
            "ServiceAccount leaderwatch/leaderwatch",
            "RoleBinding dlock/leaderwatch",
            "ClusterRoleBinding dlock-leaderwatch-nodes",
        ];
        assert_eq!(names(KubeMethod::Evict), base);
        let with = |extra: &str| {
            base.iter().map(|s| s.to_string()).chain([extra.into()]).collect::<Vec<_>>()
        };
        assert_eq!(names(KubeMethod::Delete), with("RoleBinding dlock/leaderwatch-maintenance"));
        assert_eq!(
            names(KubeMethod::RollingRestart),
            with("RoleBinding dlock/leaderwatch-maintenance")
        );
        assert_eq!(names(KubeMethod::Drain), with("ClusterRoleBinding dlock-leaderwatch-drain"));
        // The Job's account is the one job-measure.yaml runs under, in its namespace.
        let t = template();
        assert_eq!(t.metadata.namespace.as_deref(), Some("leaderwatch"));
        let spec = t.spec.and_then(|s| s.template.spec).expect("spec");
        assert_eq!(spec.service_account_name.as_deref(), Some("leaderwatch"));
        assert!(rights_for(KubeMethod::Evict, "dlock", "nobody").expect("rights").is_empty());
    }

    #[test]
    fn the_users_flags_go_into_the_jobs_arguments_and_nothing_else_changes() {
        let t = template();
        let j = job(&t, &params()).expect("job");
        let c = |j: &Job| {
            j.spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .map(|s| s.containers[0].clone())
                .expect("container")
        };
        let args = c(&j).args.expect("args");
        assert_eq!(args[0], "measure");
        assert_eq!(args[1..], params().args, "measure's arguments as given");
        assert_eq!(args_of(&j), params().args, "and read back");
        assert_eq!(args_of(&t)[0], "--namespace=dlock", "the template's own");
        assert_eq!(c(&j).image.as_deref(), Some("registry.example/p/leaderwatch@sha256:00"));
        assert!(c(&j).env.expect("env").iter().any(|e| e.name == crate::io::test_hooks::MIN_IDLE));
        let pod = |j: &Job| j.spec.as_ref().and_then(|s| s.template.spec.clone()).expect("pod");
        let selector = pod(&j).node_selector.unwrap_or_default();
        assert_eq!(selector.get(ARCH_LABEL).map(String::as_str), Some("amd64"), "the image's");
        let fetch = fetch_pod(&j, "leaderwatch-fetch", "run").expect("fetch pod");
        assert_eq!(fetch.spec.expect("spec").node_selector, Some(selector), "the fetch pod's too");
        let any = job(&t, &JobParams { arch: None, ..params() }).expect("job");
        assert_eq!(pod(&any).node_selector, None, "an image for several: any node");
        // The rest is the committed template's.
        let (mut a, mut b) =
            (serde_json::to_value(&t).expect("json"), serde_json::to_value(&j).expect("json"));
        for v in [&mut a, &mut b] {
            let c = &mut v["spec"]["template"]["spec"]["containers"][0];
            for k in ["args", "image", "env", "imagePullPolicy"] {
                c[k] = serde_json::Value::Null;
            }
            v["spec"]["template"]["spec"].as_object_mut().map(|s| s.remove("nodeSelector"));
        }
        assert_eq!(a, b, "30 + 10 + 10 + 15 + 5 min is under the committed 70 min deadline");
        let long = job(&t, &JobParams { runs_for: Duration::from_secs(3 * 3600), ..params() })
            .expect("job");
        assert_eq!(
            long.spec.and_then(|s| s.active_deadline_seconds),
            Some(3 * 3600 + 300),
            "the Job's own work and 5 minutes, over the committed deadline"
        );
        assert_eq!(claim_of(&j).as_deref(), Some("leaderwatch-data"));
    }

    #[test]
    fn a_tag_is_pulled_on_every_start_a_digest_once() {
        let policy = |j: &Job| {
            j.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("spec").containers[0]
                .image_pull_policy
                .clone()
        };
        let t = template();
        let pinned = job(&t, &params()).expect("job");
        assert_eq!(policy(&pinned).as_deref(), Some("IfNotPresent"));
        let tagged =
            job(&t, &JobParams { image: "r.example/p/lw:0.1.0".into(), ..params() }).expect("job");
        assert_eq!(policy(&tagged).as_deref(), Some("Always"));
    }

    #[test]
    fn the_fetch_pod_mounts_the_volume_read_only_and_only_packs() {
        let p =
            fetch_pod(&template(), "leaderwatch-fetch", "leaderwatch-measure-abcde").expect("pod");
        let s = p.spec.expect("spec");
        let c = &s.containers[0];
        assert_eq!(
            c.args.as_deref(),
            Some(&["pack".to_owned(), "/data/leaderwatch-measure-abcde".to_owned()][..])
        );
        assert!(c.volume_mounts.iter().flatten().all(|m| m.read_only == Some(true)));
        assert_eq!(s.restart_policy.as_deref(), Some("Never"));
        assert_eq!(s.automount_service_account_token, Some(false));
    }
}
