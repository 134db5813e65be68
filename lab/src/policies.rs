//! GKE Autopilot's documented workload rules, enforced by the lab's own API server: the
//! ValidatingAdmissionPolicies and their bindings in lab/policies/autopilot.yaml (each rule
//! with its source; the table and the negative control are in docs/autopilot-rules.md).
//! This module owns applying them when the cluster starts and waiting until every one is in
//! effect, so that a cluster the lab hands out never admits a Pod or workload that
//! Autopilot would refuse or rewrite.

use crate::error::{Error, KubeContext, Result};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The policies and bindings, one `v1 List` (one YAML document, so its anchors are shared).
const YAML: &str = include_str!("../policies/autopilot.yaml");
/// The field manager of the server-side apply.
const MANAGER: &str = "lw-lab";
/// The API server loads policies asynchronously; on the lab's two cores this took well
/// under a second, plus the default ServiceAccount the probes need (the controller-manager
/// creates it a few seconds after start).
const IN_EFFECT_WITHIN: Duration = Duration::from_secs(30);
/// Where the probes are dry-run: any namespace but kube-system, which the bindings exempt.
const PROBE_NAMESPACE: &str = "default";

enum Object {
    Policy(Box<ValidatingAdmissionPolicy>),
    Binding(Box<ValidatingAdmissionPolicyBinding>),
}

/// The objects of lab/policies/autopilot.yaml, in file order (each policy before its binding).
fn objects() -> Result<Vec<Object>> {
    let bad = |e: String| Error::Command(format!("lab/policies/autopilot.yaml: {e}"));
    let list: Value = serde_yaml_ng::from_str(YAML).map_err(|e| bad(e.to_string()))?;
    if list["kind"] != "List" {
        return Err(bad("not a v1 List".into()));
    }
    let items = list["items"].as_array().ok_or_else(|| bad("no items".into()))?;
    items
        .iter()
        .map(|item| {
            let name = item["metadata"]["name"].as_str().unwrap_or("?");
            let what = |e: serde_json::Error| bad(format!("{} {name}: {e}", item["kind"]));
            match item["kind"].as_str() {
                Some("ValidatingAdmissionPolicy") => Ok(Object::Policy(Box::new(
                    serde_json::from_value(item.clone()).map_err(what)?,
                ))),
                Some("ValidatingAdmissionPolicyBinding") => Ok(Object::Binding(Box::new(
                    serde_json::from_value(item.clone()).map_err(what)?,
                ))),
                k => Err(bad(format!("unexpected kind {k:?} ({name})"))),
            }
        })
        .collect()
}

/// Applies every policy and binding (server-side apply, so a restarted API server or a
/// second call converges), then waits until each policy refuses its probe.
pub async fn apply(client: &Client) -> Result<()> {
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let pp = PatchParams::apply(MANAGER).force();
    let mut names = Vec::new();
    for o in objects()? {
        match o {
            Object::Policy(p) => {
                let name = p.metadata.name.clone().unwrap_or_default();
                policies
                    .patch(&name, &pp, &Patch::Apply(&p))
                    .await
                    .kctx(|| format!("apply ValidatingAdmissionPolicy {name}"))?;
                names.push(name);
            }
            Object::Binding(b) => {
                let name = b.metadata.name.clone().unwrap_or_default();
                bindings
                    .patch(&name, &pp, &Patch::Apply(&b))
                    .await
                    .kctx(|| format!("apply ValidatingAdmissionPolicyBinding {name}"))?;
            }
        }
    }
    wait_in_effect(client, &names).await
}

/// A Pod the lab admits: the etcd member's container, reduced (requests, securityContext).
fn compliant_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": PROBE_NAMESPACE, "labels": {"lw-lab/probe": "autopilot"}},
        "spec": {
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "probe",
                "image": "gcr.io/etcd-development/etcd:v3.6.14",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
            }],
        },
    })
}

/// For each policy, a Pod that breaks its rule and no other's.
fn probes() -> Vec<(&'static str, Value)> {
    let with = |policy: &'static str, change: &dyn Fn(&mut Value)| {
        let mut p = compliant_pod(&format!("lw-lab-probe-{policy}"));
        change(&mut p["spec"]);
        (policy, p)
    };
    vec![
        with("autopilot-no-privileged", &|s| {
            // allowPrivilegeEscalation: false contradicts privileged (a validation error).
            s["containers"][0]["securityContext"] = json!({"privileged": true})
        }),
        with("autopilot-linux-capabilities", &|s| {
            s["containers"][0]["securityContext"]["capabilities"]["add"] = json!(["SYS_ADMIN"])
        }),
        with("autopilot-no-host-namespaces", &|s| s["hostIPC"] = json!(true)),
        with("autopilot-no-host-port", &|s| {
            s["containers"][0]["ports"] = json!([{"containerPort": 2379, "hostPort": 2379}])
        }),
        with("autopilot-volumes", &|s| {
            s["volumes"] = json!([{"name": "etc", "hostPath": {"path": "/etc"}}]);
            s["containers"][0]["volumeMounts"] =
                json!([{"name": "etc", "mountPath": "/host-etc", "readOnly": true}]);
        }),
        with("autopilot-resource-requests", &|s| {
            s["containers"][0]["resources"]["requests"] = json!({"cpu": "31", "memory": "64Gi"})
        }),
        with("autopilot-proc-mount", &|s| {
            s["hostUsers"] = json!(false);
            s["containers"][0]["securityContext"]["procMount"] = json!("Unmasked");
        }),
        with("autopilot-sysctls", &|s| {
            s["securityContext"] = json!({"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]})
        }),
    ]
}

/// Polls a server-side dry-run create of each probe until the policy it breaks refuses it
/// (the API server compiles and loads policies and bindings asynchronously). The lab's
/// kube-apiserver runs --allow-privileged=true, as GKE's does (kube-system runs privileged
/// pods), so what refuses the privileged probe is the autopilot-no-privileged policy. The
/// API server's own 422 ("disallowed by cluster policy") also counts: a cluster started
/// with `--apiserver-arg=--allow-privileged=false` refuses privileged containers in
/// validation, before any policy sees them.
async fn wait_in_effect(client: &Client, policies: &[String]) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), PROBE_NAMESPACE);
    let dry = PostParams { dry_run: true, ..Default::default() };
    let mut pending: Vec<(&str, Pod)> = Vec::new();
    for (policy, probe) in probes() {
        let pod = serde_json::from_value(probe)
            .map_err(|e| Error::Command(format!("probe for {policy}: {e}")))?;
        pending.push((policy, pod));
    }
    if let Some(p) = policies.iter().find(|p| !pending.iter().any(|(q, _)| q == p)) {
        return Err(Error::Command(format!("policy {p} has no probe in lab/src/policies.rs")));
    }
    let start = Instant::now();
    let mut last = String::new();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for (policy, pod) in pending {
            match pods.create(&dry, &pod).await {
                Err(kube::Error::Api(s))
                    if s.message.contains(&format!("ValidatingAdmissionPolicy '{policy}'"))
                        || (policy == "autopilot-no-privileged"
                            && s.code == 422
                            && s.message.contains(
                                "privileged: Forbidden: disallowed by cluster policy",
                            )) => {}
                Ok(_) => {
                    last = format!("{policy}: its probe was admitted");
                    still.push((policy, pod));
                }
                Err(e) => {
                    last = format!("{policy}: {e}");
                    still.push((policy, pod));
                }
            }
        }
        pending = still;
        if pending.is_empty() {
            break;
        }
        if start.elapsed() > IN_EFFECT_WITHIN {
            let names: Vec<&str> = pending.iter().map(|(p, _)| *p).collect();
            return Err(Error::Command(format!(
                "Autopilot admission policies not in effect within {} s: {} (last: {last})",
                IN_EFFECT_WITHIN.as_secs(),
                names.join(", ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tracing::info!("Autopilot admission policies in effect after {:?}", start.elapsed());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_has_one_deny_binding_that_exempts_kube_system_and_one_probe() {
        let objects = objects().expect("autopilot.yaml");
        let policies: Vec<String> = objects
            .iter()
            .filter_map(|o| match o {
                Object::Policy(p) => p.metadata.name.clone(),
                _ => None,
            })
            .collect();
        assert_eq!(policies.len(), 8, "{policies:?}");
        for p in &policies {
            let bindings: Vec<_> = objects
                .iter()
                .filter_map(|o| match o {
                    Object::Binding(b) => {
                        b.spec.as_ref().filter(|s| s.policy_name.as_ref() == Some(p))
                    }
                    _ => None,
                })
                .collect();
            assert_eq!(bindings.len(), 1, "{p}: one binding");
            let b = bindings[0];
            assert_eq!(b.validation_actions.as_deref(), Some(&["Deny".to_string()][..]), "{p}");
            let sel = b
                .match_resources
                .as_ref()
                .and_then(|m| m.namespace_selector.as_ref())
                .and_then(|s| s.match_expressions.as_ref())
                .expect("namespaceSelector");
            assert!(
                sel.iter().any(|e| e.key == "kubernetes.io/metadata.name"
                    && e.operator == "NotIn"
                    && e.values.as_deref() == Some(&["kube-system".to_string()][..])),
                "{p}: kube-system exempt"
            );
            assert_eq!(probes().iter().filter(|(q, _)| q == p).count(), 1, "{p}: one probe");
        }
        assert_eq!(probes().len(), policies.len(), "no probe without its policy");
    }

    #[test]
    fn the_probes_are_pods() {
        for (policy, probe) in probes() {
            let pod: Pod =
                serde_json::from_value(probe).unwrap_or_else(|e| panic!("{policy}: {e}"));
            assert!(pod.metadata.name.is_some_and(|n| n.ends_with(policy)));
        }
    }
}
