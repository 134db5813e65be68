//! deploy/k8s/leaderwatch: typed checks of the Job and the Deployment (security context,
//! labels the etcd selectors can never match, arguments this binary accepts). The log-marker
//! retrieval of baseline.json runs a rehearsal: tests/etcd/baseline_from_log.rs.

use crate::support;

use clap::Parser;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use support::selects;
use support::yaml_docs as docs;

fn job() -> Job {
    docs::<Job>("deploy/k8s/leaderwatch/job-measure.yaml", "Job").remove(0)
}
fn deployment() -> Deployment {
    docs::<Deployment>("deploy/k8s/leaderwatch/deployment-sample.yaml", "Deployment").remove(0)
}
fn templates() -> Vec<(&'static str, PodTemplateSpec)> {
    vec![
        ("job", job().spec.expect("job spec").template),
        ("deployment", deployment().spec.expect("deployment spec").template),
    ]
}
fn spec(t: &PodTemplateSpec) -> PodSpec {
    t.spec.clone().expect("pod spec")
}

#[test]
fn pods_run_non_root_read_only_without_capabilities() {
    for (what, t) in templates() {
        let s = spec(&t);
        let psc = s.security_context.clone().expect("pod securityContext");
        assert_eq!(psc.run_as_non_root, Some(true), "{what}");
        assert!(psc.run_as_user.is_some_and(|u| u != 0), "{what}");
        assert_eq!(
            psc.seccomp_profile.map(|p| p.type_).as_deref(),
            Some("RuntimeDefault"),
            "{what}"
        );
        for c in &s.containers {
            let sc = c.security_context.clone().expect("container securityContext");
            assert_eq!(sc.read_only_root_filesystem, Some(true), "{what}");
            assert_eq!(sc.allow_privilege_escalation, Some(false), "{what}");
            assert_eq!(
                sc.capabilities.and_then(|c| c.drop),
                Some(vec!["ALL".to_owned()]),
                "{what}"
            );
            let req = c.resources.clone().and_then(|r| r.requests).expect("requests");
            assert!(
                req.contains_key("cpu") && req.contains_key("memory"),
                "{what}: requests sized"
            );
        }
        let ann = t.metadata.clone().and_then(|m| m.annotations).unwrap_or_default();
        assert_eq!(
            ann.get("cluster-autoscaler.kubernetes.io/safe-to-evict").map(String::as_str),
            Some("false"),
            "{what}"
        );
    }
}

#[test]
fn no_etcd_selector_or_the_pdb_can_ever_match_leaderwatch_pods() {
    let sts: StatefulSet = docs("deploy/k8s/etcd/statefulset.yaml", "StatefulSet").remove(0);
    let pdb: PodDisruptionBudget =
        docs("deploy/k8s/etcd/pdb.yaml", "PodDisruptionBudget").remove(0);
    let sts_spec = sts.spec.expect("sts spec");
    let pod = sts_spec.template.spec.clone().expect("etcd pod spec");
    let mut selectors =
        vec![sts_spec.selector.clone(), pdb.spec.and_then(|s| s.selector).expect("pdb selector")];
    selectors.extend(
        pod.topology_spread_constraints.into_iter().flatten().filter_map(|c| c.label_selector),
    );
    selectors.extend(
        pod.affinity
            .and_then(|a| a.pod_anti_affinity)
            .and_then(|a| a.required_during_scheduling_ignored_during_execution)
            .into_iter()
            .flatten()
            .filter_map(|t| t.label_selector),
    );
    for (what, t) in templates() {
        let labels = t.metadata.and_then(|m| m.labels).expect("labels");
        assert_eq!(labels.get("app.kubernetes.io/name").map(String::as_str), Some("leaderwatch"));
        for sel in &selectors {
            assert!(!selects(sel, &labels), "{what} pods would be selected by {sel:?}");
        }
    }
}

#[test]
fn the_job_never_retries_and_runs_as_leaderwatch() {
    let j = job().spec.expect("job spec");
    assert_eq!(j.backoff_limit, Some(0), "a retry would evict a second member");
    let s = spec(&j.template);
    assert_eq!(s.service_account_name.as_deref(), Some("leaderwatch"));
    assert_eq!(s.restart_policy.as_deref(), Some("Never"));
    let d = spec(&deployment().spec.expect("deployment spec").template);
    assert_eq!(d.automount_service_account_token, Some(false), "sample needs no API token");
}

/// The manifests' arguments parse with this binary's CLI (with $(POD_NAME) expanded).
#[test]
fn manifest_arguments_are_accepted_by_this_version() {
    for (what, t) in templates() {
        let c = spec(&t).containers.remove(0);
        let args: Vec<String> = std::iter::once("leaderwatch".to_owned())
            .chain(
                c.args
                    .expect("args")
                    .into_iter()
                    .map(|a| a.replace("$(POD_NAME)", "leaderwatch-measure-abcde")),
            )
            .collect();
        if let Err(e) = leaderwatch::cli::Cli::try_parse_from(&args) {
            panic!("{what}: {args:?} rejected: {e}");
        }
        assert!(
            c.image.is_some_and(|i| i.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION")))),
            "{what}: image tag is this version"
        );
    }
}

// Managed Service for Prometheus's PodMonitoring (monitoring.googleapis.com/v1): the
// fields this repository uses; kubernetes-validate has no schema for it, so an unknown
// or misspelt field fails here instead.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodMonitoring {
    api_version: String,
    kind: String,
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: PodMonitoringSpec,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodMonitoringSpec {
    selector: LabelSelector,
    endpoints: Vec<ScrapeEndpoint>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScrapeEndpoint {
    port: String,
    path: String,
    interval: String,
    timeout: String,
}

#[test]
fn the_podmonitoring_scrapes_only_the_samplers_metrics_port() {
    let pm: PodMonitoring = support::yaml("deploy/k8s/leaderwatch/podmonitoring.yaml");
    assert_eq!(
        (pm.api_version.as_str(), pm.kind.as_str()),
        ("monitoring.googleapis.com/v1", "PodMonitoring")
    );
    assert_eq!(pm.metadata.namespace.as_deref(), Some("dlock"));
    let d = deployment().spec.expect("deployment spec").template;
    let sampler = d.metadata.clone().and_then(|m| m.labels).expect("labels");
    assert!(selects(&pm.spec.selector, &sampler), "selects the sampler's pods");
    let job_labels =
        job().spec.expect("job spec").template.metadata.and_then(|m| m.labels).expect("job labels");
    assert!(!selects(&pm.spec.selector, &job_labels), "not the measure Job's pods");
    let sts: StatefulSet = docs("deploy/k8s/etcd/statefulset.yaml", "StatefulSet").remove(0);
    let etcd =
        sts.spec.and_then(|s| s.template.metadata).and_then(|m| m.labels).expect("etcd labels");
    assert!(!selects(&pm.spec.selector, &etcd), "not the etcd pods");

    let c = spec(&d).containers.remove(0);
    let [e] = &pm.spec.endpoints[..] else { panic!("one endpoint: {:?}", pm.spec.endpoints) };
    assert_ne!(e.port, "http-metrics", "the Spring workloads' PodMonitoring selects http-metrics");
    assert_eq!(
        (e.path.as_str(), e.interval.as_str()),
        ("/metrics", "30s"),
        "30 s: what report --alert-rule assumes by default"
    );
    assert_eq!(e.timeout, "10s", "a scrape times out well inside its interval");
    let port = c
        .ports
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.name.as_deref() == Some(e.port.as_str()))
        .expect("the container names the scraped port");
    let args = c.args.clone().expect("args");
    assert!(
        args.contains(&format!("--metrics-addr=0.0.0.0:{}", port.container_port)),
        "the sampler serves on the scraped port: {args:?}"
    );
    let probe = c.liveness_probe.and_then(|p| p.http_get).expect("liveness probe on /healthz");
    assert_eq!(probe.path.as_deref(), Some("/healthz"));
    assert_eq!(
        probe.port,
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(e.port.clone())
    );
    // No other port of any leaderwatch or etcd pod is called http-metrics either.
    for (what, t) in templates() {
        for c in spec(&t).containers {
            assert!(
                c.ports
                    .unwrap_or_default()
                    .iter()
                    .all(|p| p.name.as_deref() != Some("http-metrics")),
                "{what}"
            );
        }
    }
}
