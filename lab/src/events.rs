//! core/v1 Events as a CSI provisioner posts them (leaderwatch records them).

use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

/// Who posts: the provisioner standing in for the PD CSI driver.
#[derive(Clone)]
pub struct Source {
    pub component: String,
    pub host: Option<String>,
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// Posts one Normal Event. A failure is logged, not returned: a provisioner does not
/// undo a volume because its Event could not be written.
#[allow(clippy::too_many_arguments)]
pub async fn post(
    client: &Client,
    ns: &str,
    name: &str,
    involved: serde_json::Value,
    src: &Source,
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
        "type": "Normal",
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
