//! Typed tests of the T-056 manifests: each contract line of spec §2, each point of §4 and
//! each addition of issue #2 has its own named test, so drift fails with the line's name.
//! The manifests are deserialised into k8s-openapi types (unknown fields are caught by
//! `kubernetes-validate --strict` in `make test-manifests`).

use crate::support;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Container, Namespace, PodSpec, Probe, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::de::DeserializeOwned;

const NS: &str = "dlock";
const HEADLESS_DOMAIN: &str = "dlock-etcd-headless.dlock.svc.cluster.local";

fn k8s_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s")
}

/// One manifest under deploy/k8s, typed (the one YAML loader, in tests/support).
fn load<T: DeserializeOwned>(rel: &str) -> T {
    support::yaml(&format!("deploy/k8s/{rel}"))
}

fn sts() -> StatefulSet {
    load("etcd/statefulset.yaml")
}
fn svc() -> Service {
    load("etcd/service-headless.yaml")
}
fn pdb() -> PodDisruptionBudget {
    load("etcd/pdb.yaml")
}

fn pod_spec(s: &StatefulSet) -> PodSpec {
    s.spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .expect("statefulset has a pod template spec")
}

fn pod_labels(s: &StatefulSet) -> BTreeMap<String, String> {
    s.spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .expect("pod template has labels")
}

fn etcd_container(s: &StatefulSet) -> Container {
    let spec = pod_spec(s);
    assert_eq!(spec.containers.len(), 1, "one container per member");
    spec.containers[0].clone()
}

fn args(s: &StatefulSet) -> Vec<String> {
    etcd_container(s).args.unwrap_or_default()
}

/// The value of `--flag=value` in the container args.
fn flag(s: &StatefulSet, name: &str) -> Option<String> {
    let prefix = format!("--{name}=");
    args(s).iter().find_map(|a| a.strip_prefix(&prefix).map(str::to_owned))
}

/// What the kubelet makes of `s` for pod `dlock-etcd-<ordinal>`, whose `POD_NAME` is its name.
fn expand_for(ordinal: usize, s: &str) -> String {
    leaderwatch::k8s::expand::expand_with(s, |n| {
        (n == "POD_NAME").then(|| format!("dlock-etcd-{ordinal}"))
    })
}

/// Does `sel` select a pod with `labels`? A manifest's selector must not be empty: an
/// empty one would select every pod in the namespace.
fn selects(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    assert!(
        sel.match_labels.as_ref().is_some_and(|m| !m.is_empty())
            || sel.match_expressions.as_ref().is_some_and(|e| !e.is_empty()),
        "an empty selector: {sel:?}"
    );
    support::selects(sel, labels)
}

fn http_get(p: &Probe) -> (String, IntOrString) {
    let g = p.http_get.as_ref().expect("probe is an HTTP GET");
    (g.path.clone().unwrap_or_default(), g.port.clone())
}

/// The container port number behind a probe's named or numbered port.
fn port_number(c: &Container, port: &IntOrString) -> i32 {
    match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => {
            c.ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("probe names unknown port {name}"))
                .container_port
        }
    }
}

fn pvc_template(s: &StatefulSet) -> k8s_openapi::api::core::v1::PersistentVolumeClaim {
    let t = s
        .spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.clone())
        .expect("volumeClaimTemplates");
    assert_eq!(t.len(), 1, "one PVC per member");
    t[0].clone()
}

// ---- spec §2: contracts ----------------------------------------------------------------

#[test]
fn contract_sts_named_dlock_etcd_with_three_replicas() {
    let s = sts();
    assert_eq!(s.metadata.name.as_deref(), Some("dlock-etcd"), "§2: StatefulSet dlock-etcd");
    assert_eq!(s.spec.as_ref().and_then(|s| s.replicas), Some(3), "§2: dlock-etcd ×3");
}

#[test]
fn contract_sts_service_name_is_dlock_etcd_headless() {
    let s = sts();
    let spec = s.spec.as_ref().expect("spec");
    assert_eq!(
        spec.service_name.as_deref(),
        Some("dlock-etcd-headless"),
        "§2: serviceName: dlock-etcd-headless"
    );
    assert_eq!(
        svc().metadata.name.as_deref(),
        Some("dlock-etcd-headless"),
        "§2: the Service exists under that name"
    );
}

#[test]
fn contract_pvc_10gi_premium_rwo_read_write_once() {
    let pvc = pvc_template(&sts());
    let spec = pvc.spec.expect("pvc spec");
    assert_eq!(spec.storage_class_name.as_deref(), Some("premium-rwo"), "§2: PVC premium-rwo");
    assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_owned()]), "§4: ReadWriteOnce");
    let storage = spec
        .resources
        .and_then(|r| r.requests)
        .and_then(|r| r.get("storage").cloned())
        .expect("storage request");
    assert_eq!(storage.0, "10Gi", "§2: PVC 10 GB (acceptance 3 reads 10Gi)");
}

#[test]
fn contract_requests_500m_1gi() {
    let req = etcd_container(&sts()).resources.and_then(|r| r.requests).expect("requests");
    assert_eq!(req.get("cpu").map(|q| q.0.as_str()), Some("500m"), "§2: requests cpu 500m");
    assert_eq!(req.get("memory").map(|q| q.0.as_str()), Some("1Gi"), "§2: requests memory 1Gi");
}

#[test]
fn contract_no_limits() {
    let res = etcd_container(&sts()).resources.expect("resources");
    assert!(res.limits.is_none(), "§4: no limits");
}

#[test]
fn contract_anti_affinity_required_on_hostname() {
    let s = sts();
    let terms = pod_spec(&s)
        .affinity
        .and_then(|a| a.pod_anti_affinity)
        .and_then(|a| a.required_during_scheduling_ignored_during_execution)
        .expect("§2: podAntiAffinity requiredDuringSchedulingIgnoredDuringExecution");
    assert_eq!(terms.len(), 1);
    assert_eq!(
        terms[0].topology_key, "kubernetes.io/hostname",
        "§4: topologyKey kubernetes.io/hostname"
    );
    let sel = terms[0].label_selector.as_ref().expect("label selector");
    assert_eq!(
        sel.match_labels.as_ref().and_then(|m| m.get("app.kubernetes.io/name")).map(String::as_str),
        Some("dlock-etcd"),
        "§4: anti-affinity on app.kubernetes.io/name=dlock-etcd"
    );
    assert!(selects(sel, &pod_labels(&s)), "anti-affinity selects the members themselves");
}

#[test]
fn contract_zone_spread_max_skew_1() {
    let s = sts();
    let tsc = pod_spec(&s).topology_spread_constraints.expect("§2: zone spread");
    let zone: Vec<_> =
        tsc.iter().filter(|c| c.topology_key == "topology.kubernetes.io/zone").collect();
    assert_eq!(zone.len(), 1, "§4: one spread constraint on topology.kubernetes.io/zone");
    assert_eq!(zone[0].max_skew, 1, "§4: maxSkew: 1");
    let sel = zone[0].label_selector.as_ref().expect("spread label selector");
    assert!(selects(sel, &pod_labels(&s)), "zone spread selects the members themselves");
}

#[test]
fn contract_safe_to_evict_false_on_pod_template() {
    let ann = sts()
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .expect("pod template annotations");
    assert_eq!(
        ann.get("cluster-autoscaler.kubernetes.io/safe-to-evict").map(String::as_str),
        Some("false"),
        "§2: safe-to-evict: \"false\" on the pod template (where the autoscaler reads it)"
    );
}

#[test]
fn contract_readiness_and_liveness_get_health_on_2379() {
    let c = etcd_container(&sts());
    for (which, p) in [("readiness", &c.readiness_probe), ("liveness", &c.liveness_probe)] {
        let p = p.as_ref().unwrap_or_else(|| panic!("§2: {which} probe present"));
        let (path, port) = http_get(p);
        let bare = path.split('?').next().unwrap_or_default();
        assert_eq!(bare, "/health", "§2: {which} probe GETs /health");
        assert_eq!(port_number(&c, &port), 2379, "§4: {which} probe on 2379");
    }
}

#[test]
fn contract_pdb_dlock_etcd_pdb_max_unavailable_1() {
    let p = pdb();
    assert_eq!(p.metadata.name.as_deref(), Some("dlock-etcd-pdb"), "§2: dlock-etcd-pdb");
    let spec = p.spec.expect("pdb spec");
    assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)), "§2: maxUnavailable: 1");
    assert!(spec.min_available.is_none(), "maxUnavailable only");
    let sel = spec.selector.expect("pdb selector");
    assert!(selects(&sel, &pod_labels(&sts())), "the PDB selects the etcd pods");
}

#[test]
fn contract_headless_service_cluster_ip_none() {
    let spec = svc().spec.expect("service spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"), "§2: clusterIP: None");
    let sel = spec.selector.expect("service selector");
    let labels = pod_labels(&sts());
    assert!(sel.iter().all(|(k, v)| labels.get(k) == Some(v)), "the Service selects the etcd pods");
}

#[test]
fn contract_only_google_storage_classes() {
    let class = pvc_template(&sts())
        .spec
        .and_then(|s| s.storage_class_name)
        .expect("§2: an explicit storageClassName (never the cluster default)");
    assert!(
        ["premium-rwo", "standard-rwo", "standard"].contains(&class.as_str()),
        "§2: only Google StorageClasses, got {class}"
    );
    assert_ne!(class, "standard-rwo", "§4: standard-rwo is forbidden here (05 §5.8)");
}

#[test]
fn contract_names_and_app_kubernetes_io_labels() {
    let s = sts();
    let metas: Vec<(&str, ObjectMeta)> = vec![
        ("statefulset", s.metadata.clone()),
        ("service", svc().metadata),
        ("pdb", pdb().metadata),
        (
            "pod template",
            s.spec.as_ref().and_then(|s| s.template.metadata.clone()).expect("template meta"),
        ),
    ];
    for (what, m) in metas {
        let labels = m.labels.unwrap_or_default();
        assert_eq!(
            labels.get("app.kubernetes.io/name").map(String::as_str),
            Some("dlock-etcd"),
            "§2 (C5 §5.6): {what} has app.kubernetes.io/name=dlock-etcd"
        );
        for key in [
            "app.kubernetes.io/instance",
            "app.kubernetes.io/component",
            "app.kubernetes.io/part-of",
        ] {
            assert!(labels.contains_key(key), "§2 (C5 §5.6): {what} has {key}");
        }
        assert!(
            labels.keys().all(|k| k.starts_with("app.kubernetes.io/")),
            "{what}: only app.kubernetes.io/* labels"
        );
    }
}

#[test]
fn contract_etcd_3_6_pinned_patch_tag() {
    let image = etcd_container(&sts()).image.expect("image");
    let (repo, tag) = image.rsplit_once(':').expect("image has a tag");
    assert!(
        repo == "gcr.io/etcd-development/etcd" || repo == "quay.io/coreos/etcd",
        "§4: the upstream image (no mirror), got {repo}"
    );
    let patch =
        tag.strip_prefix("v3.6.").unwrap_or_else(|| panic!("§2 (C5 §5.3): etcd 3.6, got {tag}"));
    assert!(
        !patch.is_empty() && patch.chars().all(|c| c.is_ascii_digit()),
        "a pinned patch tag, got {tag}"
    );
    let label = s_label(&sts(), "app.kubernetes.io/version");
    assert_eq!(format!("v{label}"), tag, "the version label tells the truth about the image");
}

fn s_label(s: &StatefulSet, key: &str) -> String {
    s.metadata.labels.as_ref().and_then(|l| l.get(key).cloned()).unwrap_or_default()
}

#[test]
fn all_objects_live_in_namespace_dlock() {
    let ns: Namespace = load("namespace.yaml");
    assert_eq!(ns.metadata.name.as_deref(), Some(NS));
    for (what, m) in
        [("statefulset", sts().metadata), ("service", svc().metadata), ("pdb", pdb().metadata)]
    {
        assert_eq!(m.namespace.as_deref(), Some(NS), "{what} is in namespace {NS}");
    }
}

// ---- spec §4: specification --------------------------------------------------------------

#[test]
fn spec4_pod_management_parallel() {
    assert_eq!(
        sts().spec.and_then(|s| s.pod_management_policy).as_deref(),
        Some("Parallel"),
        "§4/§8: podManagementPolicy: Parallel (OrderedReady deadlocks the bootstrap)"
    );
}

#[test]
fn spec4_update_strategy_rolling_update() {
    assert_eq!(
        sts().spec.and_then(|s| s.update_strategy).and_then(|u| u.type_).as_deref(),
        Some("RollingUpdate"),
        "§4: updateStrategy: RollingUpdate"
    );
}

#[test]
fn spec4_member_name_from_pod_name_field_ref() {
    let s = sts();
    assert_eq!(flag(&s, "name").as_deref(), Some("$(POD_NAME)"), "§4: --name from the pod name");
    let env = etcd_container(&s).env.unwrap_or_default();
    let pod_name = env.iter().find(|e| e.name == "POD_NAME").expect("POD_NAME env");
    let field = pod_name
        .value_from
        .as_ref()
        .and_then(|v| v.field_ref.as_ref())
        .map(|f| f.field_path.as_str());
    assert_eq!(field, Some("metadata.name"), "§4: POD_NAME is a fieldRef to metadata.name");
}

#[test]
fn spec4_advertise_urls_from_pod_dns_name() {
    let s = sts();
    assert_eq!(
        flag(&s, "advertise-client-urls").as_deref(),
        Some(format!("http://$(POD_NAME).{HEADLESS_DOMAIN}:2379").as_str()),
        "§4: client URL from <pod>.dlock-etcd-headless.dlock.svc.cluster.local"
    );
    assert_eq!(
        flag(&s, "initial-advertise-peer-urls").as_deref(),
        Some(format!("http://$(POD_NAME).{HEADLESS_DOMAIN}:2380").as_str()),
        "§4: peer URL from <pod>.dlock-etcd-headless.dlock.svc.cluster.local"
    );
}

#[test]
fn spec4_initial_cluster_names_all_three_members_state_new_with_token() {
    let s = sts();
    let ic = flag(&s, "initial-cluster").expect("§4: --initial-cluster");
    let entries: Vec<(String, String)> = ic
        .split(',')
        .map(|e| {
            let (n, u) = e.split_once('=').expect("name=url");
            (n.to_owned(), u.to_owned())
        })
        .collect();
    let want: Vec<(String, String)> = (0..3)
        .map(|i| {
            (format!("dlock-etcd-{i}"), format!("http://dlock-etcd-{i}.{HEADLESS_DOMAIN}:2380"))
        })
        .collect();
    assert_eq!(entries, want, "§4: initial-cluster names all three members");
    // etcd refuses to start when a member's advertised peer URL is not its initial-cluster entry.
    let peer = flag(&s, "initial-advertise-peer-urls").expect("peer urls");
    for (i, (_, url)) in want.iter().enumerate() {
        assert_eq!(&expand_for(i, &peer), url, "member {i} advertises its initial-cluster URL");
    }
    assert_eq!(
        flag(&s, "initial-cluster-state").as_deref(),
        Some("new"),
        "§4: initial-cluster-state: new"
    );
    assert!(
        flag(&s, "initial-cluster-token").is_some_and(|t| !t.is_empty()),
        "issue #2: an initial-cluster token"
    );
}

#[test]
fn spec4_data_dir_is_a_subdirectory_of_the_mount() {
    let s = sts();
    let data_dir = flag(&s, "data-dir").expect("--data-dir");
    let mounts = etcd_container(&s).volume_mounts.unwrap_or_default();
    let pvc_name = pvc_template(&s).metadata.name.expect("pvc template name");
    let mount = mounts.iter().find(|m| m.name == pvc_name).expect("the PVC is mounted");
    let rest = data_dir.strip_prefix(&mount.mount_path).unwrap_or_else(|| {
        panic!("§4: data dir {data_dir} is under the mount {}", mount.mount_path)
    });
    assert!(
        rest.starts_with('/') && rest.len() > 1,
        "§4: data dir is a subdirectory of the mount, not the mount point ({data_dir})"
    );
}

#[test]
fn spec4_ports_etcd_client_2379_and_etcd_peer_2380() {
    let c = etcd_container(&sts());
    let ports: Vec<(Option<String>, i32)> =
        c.ports.unwrap_or_default().into_iter().map(|p| (p.name, p.container_port)).collect();
    assert_eq!(
        ports,
        vec![(Some("etcd-client".to_owned()), 2379), (Some("etcd-peer".to_owned()), 2380)],
        "§4: client 2379 named etcd-client, peer 2380 named etcd-peer"
    );
    let svc_ports: Vec<(Option<String>, i32)> = svc()
        .spec
        .and_then(|s| s.ports)
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.name, p.port))
        .collect();
    assert_eq!(svc_ports, ports, "the headless Service exposes the same named ports");
}

#[test]
fn spec8_no_port_named_http_metrics() {
    let c = etcd_container(&sts());
    let names = c.ports.unwrap_or_default().into_iter().filter_map(|p| p.name);
    let svc_names =
        svc().spec.and_then(|s| s.ports).unwrap_or_default().into_iter().filter_map(|p| p.name);
    for n in names.chain(svc_names) {
        assert_ne!(
            n, "http-metrics",
            "§8: the M6 PodMonitoring would scrape 404s from a port named http-metrics"
        );
    }
}

/// Not in the spec, nor against it: lock churn would grow the backend into NOSPACE.
#[test]
fn periodic_auto_compaction_keeps_the_backend_out_of_nospace() {
    let s = sts();
    assert_eq!(flag(&s, "auto-compaction-mode").as_deref(), Some("periodic"));
    assert_eq!(flag(&s, "auto-compaction-retention").as_deref(), Some("1h"));
    let text =
        fs::read_to_string(k8s_dir().join("etcd/statefulset.yaml")).expect("read statefulset");
    assert!(
        text.contains("NOSPACE") && text.contains("ModRevision"),
        "the why-comment beside the flags"
    );
}

#[test]
fn spec4_liveness_generous_enough_that_an_election_never_restarts_a_member() {
    let s = sts();
    let election_ms: u64 =
        flag(&s, "election-timeout").map_or(1000, |v| v.parse().expect("numeric election timeout"));
    let request_timeout_ms = 5_000 + 2 * election_ms; // etcd ServerConfig.ReqTimeout()
    let p = etcd_container(&s).liveness_probe.expect("liveness probe");
    let period_ms = p.period_seconds.unwrap_or(10) as u64 * 1000;
    let failures = p.failure_threshold.unwrap_or(3) as u64;
    let restart_after_ms = period_ms * failures;
    // A randomised election takes at most 2 election timeouts; demand room for ten of them.
    assert!(
        restart_after_ms >= 10 * 2 * election_ms,
        "§4: liveness restarts after {restart_after_ms} ms of failures, less than 10 worst-case elections ({} ms)",
        20 * election_ms
    );
    // A probe against a member stuck behind a slow request can wait a full request timeout:
    // three of those in a row must not be enough for a restart.
    assert!(
        restart_after_ms >= 3 * request_timeout_ms,
        "liveness restarts after {restart_after_ms} ms, less than 3 etcd request timeouts ({request_timeout_ms} ms each)"
    );
    assert!(
        p.timeout_seconds.unwrap_or(1) as u64 * 1000 <= period_ms,
        "a probe times out before the next one starts"
    );
}

#[test]
fn spec4_non_root_with_fs_group() {
    let sc = pod_spec(&sts()).security_context.expect("pod securityContext");
    assert_eq!(sc.run_as_non_root, Some(true), "§4: non-root");
    assert!(
        sc.run_as_user.is_some_and(|u| u != 0),
        "§4: an explicit non-root uid (the image defaults to root)"
    );
    assert!(sc.fs_group.is_some(), "§4: a fsGroup that can write the PVC");
}

#[test]
fn spec4_termination_grace_30s() {
    assert_eq!(
        pod_spec(&sts()).termination_grace_period_seconds,
        Some(30),
        "§4: terminationGracePeriodSeconds: 30"
    );
}

#[test]
fn spec4_zone_spread_do_not_schedule() {
    let tsc = pod_spec(&sts()).topology_spread_constraints.expect("zone spread");
    let zone = tsc
        .iter()
        .find(|c| c.topology_key == "topology.kubernetes.io/zone")
        .expect("zone constraint");
    assert_eq!(
        zone.when_unsatisfiable, "DoNotSchedule",
        "§4: whenUnsatisfiable: DoNotSchedule for the zone constraint"
    );
    let text =
        fs::read_to_string(k8s_dir().join("etcd/statefulset.yaml")).expect("read statefulset");
    assert!(
        text.contains("zonal incident") && text.contains("Pending"),
        "§4: the why-comment (zonal incident takes the quorum; Pending is the louder failure) is present"
    );
}

#[test]
fn spec4_cpu_to_memory_ratio_inside_autopilot_bounds() {
    // 500m : 1Gi = 1 vCPU : 2 GiB; Autopilot general-purpose needs 1:1 .. 1:6.5.
    let req = etcd_container(&sts()).resources.and_then(|r| r.requests).expect("requests");
    let cpu = req["cpu"]
        .0
        .strip_suffix('m')
        .and_then(|m| m.parse::<f64>().ok())
        .expect("cpu in millicores")
        / 1000.0;
    let gib = req["memory"]
        .0
        .strip_suffix("Gi")
        .and_then(|g| g.parse::<f64>().ok())
        .expect("memory in Gi");
    let ratio = gib / cpu;
    assert!((1.0..=6.5).contains(&ratio), "§4: cpu:memory 1:{ratio} outside 1:1-1:6.5");
}

// ---- issue #2 additions -------------------------------------------------------------------

#[test]
fn issue2_headless_service_publishes_not_ready_addresses() {
    assert_eq!(
        svc().spec.and_then(|s| s.publish_not_ready_addresses),
        Some(true),
        "members need DNS records before they are Ready, or a Parallel bootstrap can deadlock"
    );
}

#[test]
fn issue2_zone_spread_min_domains_3() {
    let tsc = pod_spec(&sts()).topology_spread_constraints.expect("zone spread");
    let zone = tsc
        .iter()
        .find(|c| c.topology_key == "topology.kubernetes.io/zone")
        .expect("zone constraint");
    assert_eq!(
        zone.min_domains,
        Some(3),
        "without minDomains a 2+1 placement over two zones satisfies maxSkew 1"
    );
}

#[test]
fn issue2_no_shell_in_the_distroless_image() {
    let c = etcd_container(&sts());
    let command = c.command.clone().unwrap_or_default();
    assert_eq!(
        command,
        vec!["/usr/local/bin/etcd".to_owned()],
        "run etcd directly: the image has no shell"
    );
    for a in command.iter().chain(c.args.iter().flatten()) {
        assert!(
            !(a == "sh" || a == "-c" || a.ends_with("/sh") || a.contains("bash")),
            "no shell: {a}"
        );
    }
}

#[test]
fn issue2_every_var_reference_resolves_to_an_env_var_defined_before_it() {
    // Kubernetes leaves an unknown $(VAR) verbatim, which etcd would then advertise.
    // The kubelet resolves an env value against the entries before it, the args against all.
    let c = etcd_container(&sts());
    let env = c.env.clone().unwrap_or_default();
    let defined: Vec<&str> = env.iter().map(|e| e.name.as_str()).collect();
    let mut texts: Vec<(String, &[&str])> =
        c.args.clone().unwrap_or_default().into_iter().map(|a| (a, &defined[..])).collect();
    texts.extend(
        env.iter().enumerate().filter_map(|(i, e)| Some((e.value.clone()?, &defined[..i]))),
    );
    for (t, before) in &texts {
        for var in leaderwatch::k8s::expand::references(t) {
            assert!(
                before.contains(&var.as_str()),
                "$({var}) in {t:?} is not an env var defined before it"
            );
        }
    }
}

#[test]
fn issue2_liveness_is_serializable_so_quorum_loss_does_not_restart_healthy_members() {
    let c = etcd_container(&sts());
    let (live, _) = http_get(c.liveness_probe.as_ref().expect("liveness"));
    let (ready, _) = http_get(c.readiness_probe.as_ref().expect("readiness"));
    assert!(live.starts_with("/health?") && live.contains("serializable=true"), "liveness: {live}");
    assert_eq!(ready, "/health", "readiness keeps the linearizable check (needs a leader)");
    let startup = c.startup_probe.as_ref().expect("a startup probe covers the bootstrap");
    let (path, _) = http_get(startup);
    assert!(path.starts_with("/health"), "startup probe GETs /health");
}

#[test]
fn issue2_pvc_template_is_not_a_shared_volume() {
    // Each member must get its own disk: a pod-level volume named like the template would
    // shadow it and put all three members on one PVC.
    let s = sts();
    let name = pvc_template(&s).metadata.name.expect("template name");
    let vols = pod_spec(&s).volumes.unwrap_or_default();
    assert!(vols.iter().all(|v| v.name != name), "no pod volume shadows the claim template {name}");
}

#[test]
fn one_kubernetes_version_across_the_lab_both_crates_and_the_validation() {
    // lab/go/kube pins the control plane the tests run; k8s-openapi's feature in both crates
    // and the Makefile's kubernetes-validate version follow its minor.
    let gomod = std::fs::read_to_string(support::repo("lab/go/kube/go.mod")).expect("go.mod");
    let pin = gomod
        .lines()
        .find_map(|l| l.trim().strip_prefix("k8s.io/kubernetes v"))
        .and_then(|v| v.split_whitespace().next())
        .expect("k8s.io/kubernetes in lab/go/kube/go.mod");
    let minor = pin.split('.').nth(1).expect("a minor");
    let feature = format!("features = [\"v1_{minor}\"]");
    for toml in ["Cargo.toml", "lab/Cargo.toml"] {
        let text = std::fs::read_to_string(support::repo(toml)).expect("Cargo.toml");
        let line = text.lines().find(|l| l.starts_with("k8s-openapi")).expect("k8s-openapi");
        assert!(line.contains(&feature), "{toml}: {line} (lab/go/kube pins v{pin})");
    }
    let make = std::fs::read_to_string(support::repo("Makefile")).expect("Makefile");
    assert!(make.contains("K8S_VERSION = 1.$(KUBE_MINOR).0"), "the Makefile derives K8S_VERSION");
}
