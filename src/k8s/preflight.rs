//! `leaderwatch preflight`: the spec's acceptance criteria 2-6, checked live, each a
//! PASS/FAIL line with its evidence. `measure` refuses to evict unless all pass.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::{Api, Client};
use serde::Serialize;

use super::discover::{Reach, pods};
use super::{KubeError, KubeOptions, call};
use crate::analysis::recovery::healthy_list;
use crate::io::probe::ProbeConfig;
use crate::io::round::{Sampler, probers};
use crate::model::clock::Clock;

const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub name: &'static str,
    /// The spec's acceptance criterion it checks.
    pub criterion: u8,
    pub pass: bool,
    pub evidence: String,
}

impl Check {
    fn new(name: &'static str, criterion: u8, pass: bool, evidence: impl Into<String>) -> Self {
        Check { name, criterion, pass, evidence: evidence.into() }
    }
}

#[derive(Debug, Clone)]
pub struct PreflightOptions {
    pub members: usize,
    pub pdb: String,
    pub storage_class: String,
    pub storage: String,
    pub reach: Reach,
    pub probe: ProbeConfig,
}

impl Default for PreflightOptions {
    fn default() -> Self {
        PreflightOptions {
            members: 3,
            pdb: "dlock-etcd-pdb".into(),
            storage_class: "premium-rwo".into(),
            storage: "10Gi".into(),
            reach: Reach::Dns,
            probe: ProbeConfig { with_metrics: false, ..ProbeConfig::default() },
        }
    }
}

/// The pod's Ready condition is True.
pub fn ready(p: &Pod) -> bool {
    p.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// Runs every check; API failures are errors, failed criteria are FAIL lines.
pub async fn run(
    client: &Client,
    o: &KubeOptions,
    po: &PreflightOptions,
    clock: Arc<dyn Clock>,
) -> Result<Vec<Check>, KubeError> {
    let pods = pods(client, o).await?;
    let mut checks = members(client, o, po, &pods).await?;
    checks.push(pvcs(client, o, po, &pods).await?);
    checks.push(endpoints(client, o, po, clock).await);
    checks.push(pdb(client, o, po).await?);
    Ok(checks)
}

/// The checks the API alone answers (all but the members' health, which needs their
/// client port): what `leaderwatch sitting` checks from outside before it applies the Job,
/// whose `measure` then runs them all.
pub async fn run_api(
    client: &Client,
    o: &KubeOptions,
    po: &PreflightOptions,
) -> Result<Vec<Check>, KubeError> {
    let pods = pods(client, o).await?;
    let mut checks = members(client, o, po, &pods).await?;
    checks.push(pvcs(client, o, po, &pods).await?);
    checks.push(pdb(client, o, po).await?);
    Ok(checks)
}

/// 2. n/n Running on n distinct nodes in n distinct zones.
async fn members(
    client: &Client,
    o: &KubeOptions,
    po: &PreflightOptions,
    pods: &[Pod],
) -> Result<Vec<Check>, KubeError> {
    let (t, n) = (o.request_timeout, po.members);
    let mut checks = Vec::new();
    let running: Vec<String> = pods
        .iter()
        .map(|p| {
            let phase =
                p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_else(|| "Unknown".into());
            format!("{} {phase}{}", name(p), if ready(p) { " Ready" } else { " NotReady" })
        })
        .collect();
    let ok = pods.len() == n
        && pods.iter().all(|p| {
            ready(p) && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        });
    checks.push(Check::new(
        "members-running",
        2,
        ok,
        format!("{}/{n}: {}", pods.iter().filter(|p| ready(p)).count(), running.join(", ")),
    ));

    let nodes: Vec<(String, String)> = pods
        .iter()
        .map(|p| (name(p), p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()))
        .collect();
    let distinct: BTreeSet<&str> =
        nodes.iter().map(|(_, n)| n.as_str()).filter(|n| !n.is_empty()).collect();
    let ev: Vec<String> = nodes
        .iter()
        .map(|(p, n)| format!("{p} on {}", if n.is_empty() { "(unscheduled)" } else { n }))
        .collect();
    checks.push(Check::new("distinct-nodes", 2, distinct.len() == n, ev.join(", ")));

    let node_api: Api<Node> = Api::all(client.clone());
    let mut zones = Vec::new();
    for node in &distinct {
        let nd = call("get node", t, node_api.get(node)).await?;
        let zone = nd
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ZONE_LABEL).cloned())
            .unwrap_or_else(|| "(no zone label)".into());
        zones.push(format!("{node} in {zone}"));
    }
    let distinct_zones: BTreeSet<&str> = zones
        .iter()
        .filter_map(|z| z.split(" in ").nth(1))
        .filter(|z| !z.starts_with('('))
        .collect();
    checks.push(Check::new("distinct-zones", 2, distinct_zones.len() == n, zones.join(", ")));

    Ok(checks)
}

/// 3. n PVCs, of the class and size asked for, Bound.
async fn pvcs(
    client: &Client,
    o: &KubeOptions,
    po: &PreflightOptions,
    pods: &[Pod],
) -> Result<Check, KubeError> {
    let (t, n) = (o.request_timeout, po.members);
    let pvc_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &o.namespace);
    let claims: Vec<String> = pods
        .iter()
        .flat_map(|p| p.spec.iter().flat_map(|s| s.volumes.iter().flatten()))
        .filter_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()))
        .collect();
    let mut pvc_ok = claims.len() == n;
    let mut pvc_ev = Vec::new();
    for c in &claims {
        match call("get persistentvolumeclaim", t, pvc_api.get_opt(c)).await? {
            None => {
                pvc_ok = false;
                pvc_ev.push(format!("{c} missing"));
            }
            Some(pvc) => {
                let class = pvc
                    .spec
                    .as_ref()
                    .and_then(|s| s.storage_class_name.clone())
                    .unwrap_or_default();
                let phase = pvc.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
                let cap = pvc
                    .status
                    .as_ref()
                    .and_then(|s| s.capacity.as_ref())
                    .and_then(|c| c.get("storage"))
                    .map(|q| q.0.clone())
                    .unwrap_or_default();
                pvc_ok &= class == po.storage_class && phase == "Bound" && cap == po.storage;
                pvc_ev.push(format!("{c} {class} {cap} {phase}"));
            }
        }
    }
    Ok(Check::new(
        "pvcs",
        3,
        pvc_ok,
        if pvc_ev.is_empty() {
            "no PVC mounted by the member pods".into()
        } else {
            pvc_ev.join(", ")
        },
    ))
}

/// 4. n endpoints with exactly one leader (one probe round).
async fn endpoints(
    client: &Client,
    o: &KubeOptions,
    po: &PreflightOptions,
    clock: Arc<dyn Clock>,
) -> Check {
    let n = po.members;
    match super::discover::connect(client, o, po.reach).await {
        Err(e) => Check::new("endpoints", 4, false, e.to_string()),
        Ok(connected) => match probers(&connected.members, &po.probe, &clock) {
            Err(e) => Check::new("endpoints", 4, false, e.to_string()),
            Ok(p) => {
                let round = Sampler::new(p, clock.clone()).round().await;
                let leaders: Vec<String> = round
                    .observations
                    .iter()
                    .filter(|o| {
                        o.status
                            .ok()
                            .is_some_and(|s| s.leader_id != 0 && s.leader_id == s.member_id)
                    })
                    .map(|o| o.member.0.clone())
                    .collect();
                match healthy_list(&round, n, None) {
                    Ok(()) => Check::new(
                        "endpoints",
                        4,
                        true,
                        format!("{n} healthy endpoints, leader {}", leaders.join(",")),
                    ),
                    Err(why) => Check::new("endpoints", 4, false, why),
                }
            }
        },
    }
}

/// 5. The PDB allows exactly one disruption.
async fn pdb(client: &Client, o: &KubeOptions, po: &PreflightOptions) -> Result<Check, KubeError> {
    let t = o.request_timeout;
    let pdb_api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &o.namespace);
    let pdb = call("get poddisruptionbudget", t, pdb_api.get_opt(&po.pdb)).await?;
    Ok(match pdb.and_then(|p| p.status) {
        Some(s) => Check::new(
            "pdb",
            5,
            s.disruptions_allowed == 1,
            format!(
                "{}: allowed disruptions {} (healthy {}/{} desired)",
                po.pdb, s.disruptions_allowed, s.current_healthy, s.desired_healthy
            ),
        ),
        None => Check::new("pdb", 5, false, format!("{} not found or has no status", po.pdb)),
    })
}

/// `PASS name  evidence` lines.
pub fn render(checks: &[Check]) -> String {
    checks
        .iter()
        .map(|c| {
            format!(
                "{} {:<16} (criterion {}) {}",
                if c.pass { "PASS" } else { "FAIL" },
                c.name,
                c.criterion,
                c.evidence
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
