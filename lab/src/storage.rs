//! Storage as GKE has it: the StorageClasses `premium-rwo` (pd-ssd) and `standard-rwo`
//! (pd-balanced, the default), both WaitForFirstConsumer, and a provisioner standing in for
//! the PD CSI driver: it answers each PVC the scheduler has placed (annotation
//! `volume.kubernetes.io/selected-node`) with a zonal PV backed by a directory, with a
//! nodeAffinity on the selected node's zone, so a recreated pod is pinned to its disk's zone.
//!
//! With `--disk-faults` each volume's directory is an lw-slowfs mount (lab/go/node/slowfs)
//! of `<pv>.disk`, whose fsync delay `lw-lab fault disk` writes into `<pv>.fsync-delay`
//! while etcd runs: a slow disk under one member, no restart.

use crate::error::{Error, IoContext, KubeContext, Result};
use crate::events::{self, Source};
use crate::proc::Proc;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::Mutex;

/// The PV annotation naming the file that holds its volume's fsync delay (`--disk-faults`).
pub const FSYNC_DELAY_ANNOTATION: &str = "lw-lab/fsync-delay-file";

/// GKE's PD CSI driver name, which the GKE classes name as their provisioner.
pub const PROVISIONER: &str = "pd.csi.storage.gke.io";

pub async fn create_classes(client: &Client) -> Result<()> {
    let api: Api<StorageClass> = Api::all(client.clone());
    for (name, ty, default) in
        [("premium-rwo", "pd-ssd", false), ("standard-rwo", "pd-balanced", true)]
    {
        let mut sc = json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name, "labels": {"lw-lab/stands-in-for": "gke"}},
            "provisioner": PROVISIONER,
            "parameters": {"type": ty},
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowVolumeExpansion": true,
        });
        if default {
            sc["metadata"]["annotations"] =
                json!({"storageclass.kubernetes.io/is-default-class": "true"});
        }
        let sc: StorageClass =
            serde_json::from_value(sc).map_err(|e| Error::Command(format!("StorageClass: {e}")))?;
        api.create(&PostParams::default(), &sc)
            .await
            .kctx(|| format!("create StorageClass {name}"))?;
    }
    Ok(())
}

pub struct Provisioner {
    client: Client,
    root: PathBuf,
    /// lw-slowfs, when every volume is to be slowable (`--disk-faults`).
    slowfs: Option<PathBuf>,
    /// The lw-slowfs process of each volume, by PV name.
    mounts: Mutex<BTreeMap<String, Proc>>,
}

impl Provisioner {
    pub fn new(client: Client, root: PathBuf, slowfs: Option<PathBuf>) -> Self {
        Provisioner { client, root, slowfs, mounts: Mutex::default() }
    }

    /// Watches PVCs and PVs until cancelled; each failure is logged and retried on the next event.
    pub async fn run(self) {
        let pvcs: Api<PersistentVolumeClaim> = Api::all(self.client.clone());
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let claims = watcher(pvcs, watcher::Config::default()).boxed();
        let volumes = watcher(pvs, watcher::Config::default()).boxed();
        let mut both =
            futures::stream::select(claims.map(Either::Claim), volumes.map(Either::Volume));
        while let Some(ev) = both.next().await {
            match ev {
                Either::Claim(Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c))) => {
                    if let Err(e) = self.provision(&c).await {
                        tracing::warn!(
                            "provision {}/{}: {e}",
                            c.namespace().unwrap_or_default(),
                            c.name_any()
                        );
                    }
                }
                Either::Volume(Ok(watcher::Event::Apply(v) | watcher::Event::InitApply(v))) => {
                    if let Err(e) = self.reclaim(&v).await {
                        tracing::warn!("reclaim {}: {e}", v.name_any());
                    }
                }
                Either::Claim(Err(e)) | Either::Volume(Err(e)) => {
                    tracing::warn!("storage watch: {e}")
                }
                _ => {}
            }
        }
    }

    async fn provision(&self, c: &PersistentVolumeClaim) -> Result<()> {
        let ann = c.annotations();
        let ours = ann.get("volume.kubernetes.io/storage-provisioner").map(String::as_str)
            == Some(PROVISIONER);
        let Some(node) = ann.get("volume.kubernetes.io/selected-node") else { return Ok(()) };
        let spec = c.spec.as_ref();
        if !ours
            || spec.and_then(|s| s.volume_name.as_ref()).is_some()
            || c.metadata.deletion_timestamp.is_some()
        {
            return Ok(());
        }
        let uid = c.metadata.uid.clone().unwrap_or_default();
        let pv_name = format!("pvc-{uid}");
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        if pvs.get_opt(&pv_name).await.kctx(|| format!("get PV {pv_name}"))?.is_some() {
            return Ok(());
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        let n = nodes.get(node).await.kctx(|| format!("get node {node}"))?;
        let zone = n
            .labels()
            .get("topology.kubernetes.io/zone")
            .cloned()
            .ok_or_else(|| Error::Command(format!("node {node} has no zone label")))?;
        let region = n.labels().get("topology.kubernetes.io/region").cloned().unwrap_or_default();
        let storage = spec
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_else(|| "1Gi".into());
        let dir = self.root.join(&pv_name);
        std::fs::create_dir_all(&dir).ctx(|| format!("create {}", dir.display()))?;
        let mut annotations = json!({"pv.kubernetes.io/provisioned-by": PROVISIONER, "lw-lab/directory": dir.display().to_string()});
        if let Some(slowfs) = &self.slowfs {
            let delay = self.slow_mount(slowfs, &pv_name, &dir).await?;
            annotations[FSYNC_DELAY_ANNOTATION] = json!(delay.display().to_string());
        }
        let pv: PersistentVolume = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": pv_name,
                "labels": {"topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": region},
                "annotations": annotations},
            "spec": {
                "capacity": {"storage": storage},
                "accessModes": spec.and_then(|s| s.access_modes.clone()).unwrap_or_default(),
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": spec.and_then(|s| s.storage_class_name.clone()),
                "volumeMode": "Filesystem",
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": c.namespace(), "name": c.name_any(), "uid": uid},
                // A local volume, not hostPath: the kubelet applies the pod's fsGroup to it,
                // as it does to a PD through the CSI driver.
                "local": {"path": dir.display().to_string()},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}},
            },
        }))
        .map_err(|e| Error::Command(format!("PV object: {e}")))?;
        pvs.create(&PostParams::default(), &pv).await.kctx(|| format!("create PV {pv_name}"))?;
        let src = Source { component: format!("{PROVISIONER}_lw-lab"), host: None };
        let involved = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": c.namespace(), "name": c.name_any(), "uid": c.metadata.uid});
        let ns = c.namespace().unwrap_or_default();
        events::post(
            &self.client,
            &ns,
            &c.name_any(),
            involved,
            &src,
            "ProvisioningSucceeded",
            &format!("Successfully provisioned volume {pv_name} in zone {zone}"),
        )
        .await;
        Ok(())
    }

    /// A Released PV of ours with reclaim policy Delete: its directory and object go.
    async fn reclaim(&self, v: &PersistentVolume) -> Result<()> {
        let ours = v.annotations().get("pv.kubernetes.io/provisioned-by").map(String::as_str)
            == Some(PROVISIONER);
        let released = v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
        let delete = v.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
            == Some("Delete");
        if !(ours && released && delete) {
            return Ok(());
        }
        if let Some(mut p) = self.mounts.lock().await.remove(&v.name_any()) {
            p.stop(Duration::from_secs(5)).await; // SIGTERM: it unmounts
        }
        if let Some(dir) = v.annotations().get("lw-lab/directory") {
            let dir = Path::new(dir);
            let _ = nix::mount::umount2(dir, nix::mount::MntFlags::MNT_DETACH);
            let _ = std::fs::remove_dir_all(dir);
            let _ = std::fs::remove_dir_all(dir.with_extension("disk"));
            let _ = std::fs::remove_file(dir.with_extension("fsync-delay"));
        }
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        pvs.delete(&v.name_any(), &DeleteParams::default())
            .await
            .kctx(|| format!("delete PV {}", v.name_any()))?;
        Ok(())
    }
}

impl Provisioner {
    /// Mounts lw-slowfs at `dir` over `<dir>.disk`, its delay 0; returns the delay file.
    async fn slow_mount(&self, slowfs: &Path, pv: &str, dir: &Path) -> Result<PathBuf> {
        let backing = dir.with_extension("disk");
        let delay = dir.with_extension("fsync-delay");
        std::fs::create_dir_all(&backing).ctx(|| format!("create {}", backing.display()))?;
        std::fs::write(&delay, "0").ctx(|| format!("write {}", delay.display()))?;
        let args = [&backing, dir, &delay].map(|p| p.display().to_string());
        let mut p = Proc::spawn("lw-slowfs", slowfs, &args, dir.with_extension("slowfs.log"))?;
        for _ in 0..100 {
            if mounted(dir) {
                self.mounts.lock().await.insert(pv.to_owned(), p);
                return Ok(delay);
            }
            p.check_running()?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        p.stop(Duration::from_secs(1)).await;
        Err(Error::Command(format!("lw-slowfs did not mount {} within 5 s", dir.display())))
    }
}

/// Whether `dir` is a mount point now (/proc/self/mountinfo).
fn mounted(dir: &Path) -> bool {
    let want = dir.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4).map(crate::node::unescape).as_deref() == Some(want.as_str()))
}

enum Either<A, B> {
    Claim(A),
    Volume(B),
}
