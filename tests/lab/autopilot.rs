//! GKE Autopilot's documented workload rules in the lab (lab/policies/autopilot.yaml, which
//! lw-lab applies at start; table and sources in docs/autopilot-rules.md), and their
//! negative control: for each rule a Pod that breaks it is refused with that rule's message
//! (a server-side dry run: the API server admits or refuses, nothing is stored), a workload
//! whose template breaks one is refused at admission as on Autopilot, and the pods the
//! repository runs (the etcd member, leaderwatch's Job) are admitted, so a rule that refuses
//! everything fails here too.
//!
//! Ignored in plain `cargo test` (they need root, runc and `make kube-tools`); `make
//! test-kube` runs them.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::lab::Lab;
use crate::support::yaml_values;

/// The etcd member's pod as the StatefulSet controller makes it from
/// deploy/k8s/etcd/statefulset.yaml (its volumeClaimTemplate as the PVC volume), in `default`.
fn etcd_member_pod(name: &str) -> Value {
    let sts = yaml_values("deploy/k8s/etcd/statefulset.yaml")
        .into_iter()
        .find(|d| d.get("kind").and_then(|k| k.as_str()) == Some("StatefulSet"))
        .expect("the StatefulSet");
    let template = serde_json::to_value(&sts["spec"]["template"]).expect("json");
    let mut spec = template["spec"].clone();
    spec["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data-dlock-etcd-0"}}]);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": template["metadata"]["labels"]},
        "spec": spec,
    })
}

/// `kubectl create --dry-run=server` of `obj`: Ok, or what the API server said.
fn dry_run(lab: &Lab, dir: &Path, obj: &Value) -> Result<(), String> {
    let name = obj["metadata"]["name"].as_str().expect("a name");
    let path = dir.join(format!("{}-{name}.json", obj["kind"].as_str().expect("kind")));
    std::fs::write(&path, serde_json::to_vec_pretty(obj).expect("json")).expect("write");
    let (ok, out, err) =
        lab.kubectl(&["create", "--dry-run=server", "-f", path.to_str().expect("path")]);
    if ok { Ok(()) } else { Err(format!("{err}{out}")) }
}

/// `obj` is refused by `policy` with a message containing `message`.
fn refused(lab: &Lab, dir: &Path, obj: &Value, policy: &str, message: &str) {
    let what = format!("{} {}", obj["kind"], obj["metadata"]["name"]);
    match dry_run(lab, dir, obj) {
        Ok(()) => panic!("{what} was admitted; {policy} should refuse it"),
        Err(e) => {
            assert!(
                e.contains(&format!("ValidatingAdmissionPolicy '{policy}'")) && e.contains(message),
                "{what}: refused, but not by {policy} with {message:?}: {e}"
            );
            eprintln!("refused as expected: {what}: {}", e.trim());
        }
    }
}

fn admitted(lab: &Lab, dir: &Path, obj: &Value) {
    let what = format!("{} {}", obj["kind"], obj["metadata"]["name"]);
    if let Err(e) = dry_run(lab, dir, obj) {
        panic!("{what} was refused: {e}");
    }
}

/// Makes the first container privileged (the member's allowPrivilegeEscalation: false
/// contradicts privileged, which the API server's validation refuses on its own).
fn privileged(spec: &mut Value) {
    let sc = &mut spec["containers"][0]["securityContext"];
    sc["privileged"] = json!(true);
    sc.as_object_mut().expect("securityContext").remove("allowPrivilegeEscalation");
}

/// hostNetwork alone. The API server defaults each port's hostPort to its containerPort on a
/// hostNetwork pod, which the host-port rule refuses as well, and which of two failing
/// policies the API server names is not fixed (regression: a run got the host-port message).
/// Without ports only the host-namespace rule is left.
fn host_network(spec: &mut Value) {
    spec["hostNetwork"] = json!(true);
    spec["containers"][0]["ports"] = json!([]);
}

/// The etcd member's pod named `name`, with `change` applied to its spec.
fn breaking(name: &str, change: impl Fn(&mut Value)) -> Value {
    let mut p = etcd_member_pod(name);
    change(&mut p["spec"]);
    p
}

/// The privilege rules' cases: privileged, added capabilities, the host's namespaces and
/// ports. Each: a pod that breaks one rule, the policy that must refuse it, and (part of)
/// its message.
fn privilege_and_host_namespace_cases() -> Vec<(Value, &'static str, &'static str)> {
    vec![
        (
            breaking("privileged", privileged),
            "autopilot-no-privileged",
            "Autopilot refuses privileged containers (container etcd)",
        ),
        (
            breaking("cap-sys-admin", |s| {
                s["containers"][0]["securityContext"]["capabilities"]["add"] =
                    json!(["NET_RAW", "SYS_ADMIN"])
            }),
            "autopilot-linux-capabilities",
            "Autopilot refuses adding Linux capabilities outside its allowed set (container etcd: SYS_ADMIN)",
        ),
        (
            // Only with --workload-policies=allow-net-admin, which the lab's cluster has not.
            breaking("cap-net-admin", |s| {
                s["containers"][0]["securityContext"]["capabilities"]["add"] =
                    json!(["CAP_NET_ADMIN"])
            }),
            "autopilot-linux-capabilities",
            "(container etcd: CAP_NET_ADMIN)",
        ),
        (
            breaking("host-network", host_network),
            "autopilot-no-host-namespaces",
            "Autopilot refuses hostNetwork (container etcd)",
        ),
        (
            breaking("host-pid", |s| s["hostPID"] = json!(true)),
            "autopilot-no-host-namespaces",
            "Autopilot refuses hostPID (container etcd)",
        ),
        (
            breaking("host-ipc", |s| s["hostIPC"] = json!(true)),
            "autopilot-no-host-namespaces",
            "Autopilot refuses hostIPC (container etcd)",
        ),
        (
            breaking("host-port", |s| s["containers"][0]["ports"][0]["hostPort"] = json!(2379)),
            "autopilot-no-host-port",
            "Autopilot refuses host ports (container etcd: hostPort 2379)",
        ),
    ]
}

/// The volume rules' cases: hostPath (but read-only /var/log) and volume types, as
/// `privilege_and_host_namespace_cases`.
fn volume_cases() -> Vec<(Value, &'static str, &'static str)> {
    vec![
        (
            breaking("host-path-etc", |s| {
                s["volumes"]
                    .as_array_mut()
                    .expect("volumes")
                    .push(json!({"name": "host", "hostPath": {"path": "/etc"}}));
                s["containers"][0]["volumeMounts"]
                    .as_array_mut()
                    .expect("mounts")
                    .push(json!({"name": "host", "mountPath": "/host", "readOnly": true}));
            }),
            "autopilot-volumes",
            "Autopilot refuses hostPath volumes except read-only under /var/log (volume host (/etc) in container etcd read-only)",
        ),
        (
            // The documented exception is read-only: a writable /var/log is refused.
            breaking("host-path-var-log-rw", |s| {
                s["volumes"]
                    .as_array_mut()
                    .expect("volumes")
                    .push(json!({"name": "logs", "hostPath": {"path": "/var/log"}}));
                s["containers"][0]["volumeMounts"]
                    .as_array_mut()
                    .expect("mounts")
                    .push(json!({"name": "logs", "mountPath": "/logs"}));
            }),
            "autopilot-volumes",
            "(volume logs (/var/log) in container etcd read-write)",
        ),
        (
            breaking("volume-iscsi", |s| {
                s["volumes"].as_array_mut().expect("volumes").push(json!({"name": "disk",
                    "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:disk", "lun": 0}}));
            }),
            "autopilot-volumes",
            "Autopilot refuses volume types outside",
        ),
    ]
}

/// The resource rules' cases: the general-purpose maxima, minima and CPU:memory ratio, as
/// `privilege_and_host_namespace_cases`.
fn resource_request_cases() -> Vec<(Value, &'static str, &'static str)> {
    vec![
        (
            breaking("cpu-over-max", |s| {
                s["containers"][0]["resources"]["requests"] = json!({"cpu": "31", "memory": "64Gi"})
            }),
            "autopilot-resource-requests",
            "Autopilot refuses a Pod requesting more than 30 vCPU, the general-purpose maximum (31 vCPU, 65536 MiB",
        ),
        (
            breaking("memory-over-max", |s| {
                s["containers"][0]["resources"]["requests"] =
                    json!({"cpu": "20", "memory": "111Gi"})
            }),
            "autopilot-resource-requests",
            "Autopilot refuses a Pod requesting more than 110 GiB of memory",
        ),
        (
            breaking("ephemeral-over-max", |s| {
                s["containers"][0]["resources"]["requests"]["ephemeral-storage"] = json!("11Gi")
            }),
            "autopilot-resource-requests",
            "Autopilot refuses a Pod requesting more than 10 GiB of ephemeral storage",
        ),
        (
            // An init container's request is the Pod's when it is the larger (Kubernetes'
            // effective request), and a container without requests does not hide it.
            breaking("init-over-max", |s| {
                s["initContainers"] = json!([{"name": "init", "image": "gcr.io/etcd-development/etcd:v3.6.14",
                    "resources": {"requests": {"cpu": "40", "memory": "60Gi"}}}]);
                s["containers"][0]["resources"] = json!({});
            }),
            "autopilot-resource-requests",
            "more than 30 vCPU, the general-purpose maximum (40 vCPU",
        ),
        (
            breaking("cpu-under-min", |s| {
                s["containers"][0]["resources"]["requests"] =
                    json!({"cpu": "10m", "memory": "64Mi"})
            }),
            "autopilot-resource-requests",
            "Autopilot would rewrite the Pod: its CPU request is under the general-purpose minimum of 50m",
        ),
        (
            // Memory left to Autopilot's defaults: the CPU stated is still under the minimum.
            breaking("cpu-only-under-min", |s| {
                s["containers"][0]["resources"]["requests"] = json!({"cpu": "10m"})
            }),
            "autopilot-resource-requests",
            "its CPU request is under the general-purpose minimum of 50m",
        ),
        (
            breaking("memory-under-min", |s| {
                s["containers"][0]["resources"]["requests"] =
                    json!({"cpu": "50m", "memory": "32Mi"})
            }),
            "autopilot-resource-requests",
            "Autopilot would rewrite the Pod: its memory request is under the general-purpose minimum of 52 MiB",
        ),
        (
            breaking("ratio-too-much-memory", |s| {
                s["containers"][0]["resources"]["requests"] =
                    json!({"cpu": "500m", "memory": "4Gi"})
            }),
            "autopilot-resource-requests",
            "Autopilot would rewrite the Pod: CPU:memory is outside 1:1 to 1:6.5 (vCPU:GiB)",
        ),
        (
            breaking("ratio-too-little-memory", |s| {
                s["containers"][0]["resources"]["requests"] = json!({"cpu": "2", "memory": "1Gi"})
            }),
            "autopilot-resource-requests",
            "Autopilot would rewrite the Pod: CPU:memory is outside 1:1 to 1:6.5 (vCPU:GiB)",
        ),
    ]
}

/// The kernel rules' cases: procMount and sysctls, as `privilege_and_host_namespace_cases`.
fn kernel_cases() -> Vec<(Value, &'static str, &'static str)> {
    vec![
        (
            breaking("proc-mount-unmasked", |s| {
                s["hostUsers"] = json!(false);
                s["containers"][0]["securityContext"]["procMount"] = json!("Unmasked");
            }),
            "autopilot-proc-mount",
            "Autopilot refuses procMount Unmasked (container etcd)",
        ),
        (
            breaking("unsafe-sysctl", |s| {
                s["securityContext"]["sysctls"] = json!([
                    {"name": "net.ipv4.tcp_syncookies", "value": "1"},
                    {"name": "kernel.msgmax", "value": "65536"}])
            }),
            "autopilot-sysctls",
            "Autopilot refuses unsafe sysctls (kernel.msgmax; container etcd)",
        ),
    ]
}

/// Every rule of docs/autopilot-rules.md refuses a pod that breaks it, with its own
/// message; the pod they were all made from is admitted.
fn each_documented_autopilot_rule_refuses_a_pod_that_breaks_it_with_its_message(lab: &Lab) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let cases: Vec<(Value, &str, &str)> = [
        privilege_and_host_namespace_cases(),
        volume_cases(),
        resource_request_cases(),
        kernel_cases(),
    ]
    .concat();
    for (pod, policy, message) in &cases {
        refused(lab, d, pod, policy, message);
    }
    // The negative control of the negative control: the pod they were all made from.
    admitted(lab, d, &etcd_member_pod("etcd-member"));
}

fn workloads_whose_pod_template_breaks_a_rule_are_refused_on_create_and_on_update(lab: &Lab) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let template = |change: &dyn Fn(&mut Value)| {
        let p = breaking("t", change);
        json!({"metadata": {"labels": p["metadata"]["labels"]}, "spec": p["spec"]})
    };
    let selector = json!({"matchLabels": {"app.kubernetes.io/name": "dlock-etcd",
        "app.kubernetes.io/instance": "dlock-etcd"}});
    let privileged_template = template(&privileged);
    refused(
        lab,
        d,
        &json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "privileged", "namespace": "default"},
            "spec": {"serviceName": "privileged", "selector": selector, "template": privileged_template}}),
        "autopilot-no-privileged",
        "Autopilot refuses privileged containers (container etcd)",
    );
    refused(
        lab,
        d,
        &json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "host-network", "namespace": "default"},
            "spec": {"selector": selector, "template": template(&host_network)}}),
        "autopilot-no-host-namespaces",
        "Autopilot refuses hostNetwork (container etcd)",
    );
    let mut job_pod = template(&|s| {
        s["containers"][0]["resources"]["requests"] = json!({"cpu": "4", "memory": "1Gi"})
    });
    job_pod["spec"]["restartPolicy"] = json!("Never");
    job_pod["spec"].as_object_mut().expect("spec").remove("affinity");
    refused(
        lab,
        d,
        &json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "ratio", "namespace": "default"},
            "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": job_pod}}}}),
        "autopilot-resource-requests",
        "Autopilot would rewrite the Pod: CPU:memory is outside 1:1 to 1:6.5",
    );

    // UPDATE: a compliant Deployment (no replicas, so nothing runs) cannot be patched into
    // one that breaks a rule, and stays as it was.
    let ok = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "compliant", "namespace": "default"},
        "spec": {"replicas": 0, "selector": selector, "template": template(&|_| {})}});
    let path = d.join("compliant.json");
    std::fs::write(&path, serde_json::to_vec(&ok).expect("json")).expect("write");
    lab.ok(&["create", "-f", path.to_str().expect("path")]);
    let (patched, _, err) = lab.kubectl(&[
        "-n",
        "default",
        "patch",
        "deployment",
        "compliant",
        "--type=json",
        "-p",
        r#"[{"op": "add", "path": "/spec/template/spec/hostPID", "value": true}]"#,
    ]);
    assert!(!patched, "the patch to hostPID was admitted");
    assert!(
        err.contains("ValidatingAdmissionPolicy 'autopilot-no-host-namespaces'")
            && err.contains("Autopilot refuses hostPID (container etcd)"),
        "{err}"
    );
    let now = lab.json(&["-n", "default", "get", "deployment", "compliant", "-o", "json"]);
    assert_eq!(now["spec"]["template"]["spec"].get("hostPID"), None, "unchanged: {now}");
}

fn the_repositorys_pods_and_manifests_and_documented_exceptions_are_admitted(lab: &Lab) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();

    // What the repository deploys, as `make acceptance` dry-runs it.
    lab.ok(&["apply", "-f", "deploy/k8s/namespace.yaml"]);
    lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/namespace.yaml"]);
    let etcd = lab.ok(&["apply", "--dry-run=server", "-R", "-f", "deploy/k8s/etcd/"]);
    assert_eq!(etcd.matches("(server dry run)").count(), 3, "{etcd}");
    let lw = lab.ok(&[
        "apply",
        "--dry-run=server",
        "-f",
        "deploy/k8s/leaderwatch/job-measure.yaml",
        "-f",
        "deploy/k8s/leaderwatch/deployment-sample.yaml",
    ]);
    assert_eq!(lw.matches("(server dry run)").count(), 4, "{lw}");

    // The pods themselves: the etcd member, and leaderwatch's Job pod as the Job controller
    // makes it (its ServiceAccount from rbac.yaml).
    admitted(lab, d, &etcd_member_pod("etcd-member"));
    lab.ok(&["apply", "-f", "deploy/k8s/leaderwatch/rbac.yaml"]);
    let job = yaml_values("deploy/k8s/leaderwatch/job-measure.yaml")
        .into_iter()
        .find(|d| d.get("kind").and_then(|k| k.as_str()) == Some("Job"))
        .expect("the Job");
    let t = serde_json::to_value(&job["spec"]["template"]).expect("json");
    admitted(
        lab,
        d,
        &json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "leaderwatch-measure-x", "namespace": "leaderwatch", "labels": t["metadata"]["labels"]},
            "spec": t["spec"]}),
    );

    // What Autopilot documents as allowed, or fills in itself.
    let allowed = [
        // No requests at all: Autopilot sets its defaults, it does not refuse the Pod.
        breaking("no-requests", |s| s["containers"][0]["resources"] = json!({})),
        // Only CPU given: Autopilot derives memory from the ratio.
        breaking("cpu-only", |s| {
            s["containers"][0]["resources"]["requests"] = json!({"cpu": "250m"})
        }),
        // leaderwatch's own requests, at the bursting minimum.
        breaking("at-the-minimum", |s| {
            s["containers"][0]["resources"]["requests"] = json!({"cpu": "50m", "memory": "64Mi"})
        }),
        breaking("net-raw-sys-ptrace", |s| {
            s["containers"][0]["securityContext"]["capabilities"]["add"] =
                json!(["NET_RAW", "CAP_SYS_PTRACE"])
        }),
        breaking("var-log-read-only", |s| {
            s["volumes"]
                .as_array_mut()
                .expect("volumes")
                .push(json!({"name": "logs", "hostPath": {"path": "/var/log/pods"}}));
            s["containers"][0]["volumeMounts"]
                .as_array_mut()
                .expect("mounts")
                .push(json!({"name": "logs", "mountPath": "/logs", "readOnly": true}));
        }),
        breaking("safe-sysctl", |s| {
            s["securityContext"]["sysctls"] =
                json!([{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}])
        }),
    ];
    for pod in &allowed {
        admitted(lab, d, pod);
    }

    // kube-system is exempt (GKE's own system workloads run there).
    let mut system = breaking("host-network-system", |s| s["hostNetwork"] = json!(true));
    system["metadata"]["namespace"] = json!("kube-system");
    admitted(lab, d, &system);

    // The API server admits privileged containers, as GKE's does (lw-lab runs it with
    // --allow-privileged=true): in kube-system nothing refuses one.
    let mut system = breaking("privileged-system", privileged);
    system["metadata"]["namespace"] = json!("kube-system");
    admitted(lab, d, &system);
}

/// The three on one cluster: they only talk to the API server's admission, each with objects
/// of its own names, so a cluster each (about 15 s to start) bought nothing.
#[test]
#[ignore = "needs root, runc and make kube-tools; make test-kube runs it"]
fn the_autopilot_rules_on_the_lab_as_every_other_test_runs_it() {
    let lab = Lab::up_with(&[], &[]);
    each_documented_autopilot_rule_refuses_a_pod_that_breaks_it_with_its_message(&lab);
    workloads_whose_pod_template_breaks_a_rule_are_refused_on_create_and_on_update(&lab);
    the_repositorys_pods_and_manifests_and_documented_exceptions_are_admitted(&lab);
}
