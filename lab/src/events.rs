//! core/v1 Events as the kubelet and a CSI provisioner post them (leaderwatch records them).

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Normal,
    Warning,
}

/// Who posts: `kubelet` on a node, or the provisioner.
#[derive(Clone)]
pub struct Source {
    pub component: String,
    pub host: Option<String>,
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// Posts one Event about a pod (optionally one of its containers). A failure is logged, not
/// returned: the kubelet does not stop a pod because an Event could not be written.
pub async fn pod(
    client: &Client,
    src: &Source,
    pod: &Pod,
    container: Option<&str>,
    kind: Kind,
    reason: &str,
    message: &str,
) {
    let ns = pod.namespace().unwrap_or_default();
    let mut involved = json!({
        "apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": pod.name_any(),
        "uid": pod.metadata.uid, "resourceVersion": pod.metadata.resource_version,
    });
    if let Some(c) = container {
        involved["fieldPath"] = json!(format!("spec.containers{{{c}}}"));
    }
    post(client, &ns, &pod.name_any(), involved, src, kind, reason, message).await;
}

#[allow(clippy::too_many_arguments)]
pub async fn post(
    client: &Client,
    ns: &str,
    name: &str,
    involved: serde_json::Value,
    src: &Source,
    kind: Kind,
    reason: &str,
    message: &str,
) {
    let t = now();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut source = json!({"component": src.component});
    if let Some(h) = &src.host {
        source["host"] = json!(h);
    }
    let ev = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{name}.{nanos:x}"), "namespace": ns},
        "involvedObject": involved,
        "reason": reason, "message": message,
        "type": if kind == Kind::Normal { "Normal" } else { "Warning" },
        "source": source,
        "firstTimestamp": t, "lastTimestamp": t, "count": 1,
        "reportingComponent": src.component,
        "reportingInstance": src.host.clone().unwrap_or_default(),
    });
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    match serde_json::from_value(ev) {
        // Bounded: an API server that does not answer must not hold a pod's worker (the
        // client's read timeout is long, for watches).
        Ok(ev) => match tokio::time::timeout(
            std::time::Duration::from_secs(5),
            api.create(&PostParams::default(), &ev),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!("event {reason} for {ns}/{name}: {e}"),
            Err(_) => tracing::warn!("event {reason} for {ns}/{name}: no answer within 5 s"),
        },
        Err(e) => tracing::warn!("event {reason}: {e}"),
    }
}
