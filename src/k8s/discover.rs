//! Members from the pods: `-n/--namespace` and `--selector` find them; their client URL is
//! the pod's stable DNS name (in the cluster) or its IP, on the port named `etcd-client`.

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client};

use super::forward::{Forwarder, forward};
use super::{KubeError, KubeOptions, call};
use crate::model::member::{Member, MemberName};

crate::model::named! {
    /// How to reach a member from where leaderwatch runs (`--reach`).
    Reach {
        /// `<pod>.<subdomain>.<ns>.svc.cluster.local` (leaderwatch runs in the cluster).
        Dns = "dns",
        /// The pod IP (in the cluster without DNS, or a flat network).
        PodIp = "pod-ip",
        /// Built-in port-forwards to each pod (from a laptop).
        PortForward = "port-forward",
    }
}

const CLIENT_PORT_NAME: &str = "etcd-client";

fn client_port(pod: &Pod) -> i32 {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some(CLIENT_PORT_NAME))
        .map_or(2379, |p| p.container_port)
}

/// The member a pod is, reached as `reach` says.
pub fn member_of(pod: &Pod, reach: Reach) -> Result<Member, String> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let port = client_port(pod);
    let host = match reach {
        Reach::Dns => {
            let sub = pod
                .spec
                .as_ref()
                .and_then(|s| s.subdomain.clone())
                .ok_or_else(|| format!("pod {name} has no subdomain (headless Service)"))?;
            format!("{name}.{sub}.{ns}.svc.cluster.local")
        }
        Reach::PodIp => pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .ok_or_else(|| format!("pod {name} has no IP yet"))?,
        Reach::PortForward => {
            return Err(format!("pod {name}: port-forward members come from `connect`"));
        }
    };
    Ok(Member { name: MemberName(name), url: format!("http://{host}:{port}") })
}

/// The member pods, sorted by name.
pub async fn pods(client: &Client, o: &KubeOptions) -> Result<Vec<Pod>, KubeError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &o.namespace);
    let list =
        call("list pods", o.request_timeout, api.list(&ListParams::default().labels(&o.selector)))
            .await?;
    let mut pods = list.items;
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(pods)
}

/// The members and, with `--reach port-forward`, the forwarders that must stay alive
/// as long as the members are probed.
pub struct Connected {
    pub members: Vec<Member>,
    pub forwarders: Vec<Forwarder>,
}

/// The members, one per pod; fails when no pod matches.
pub async fn connect(
    client: &Client,
    o: &KubeOptions,
    reach: Reach,
) -> Result<Connected, KubeError> {
    let pods = pods(client, o).await?;
    if pods.is_empty() {
        return Err(KubeError::Api {
            what: "list pods".into(),
            message: format!("no pod matches {} in namespace {}", o.selector, o.namespace),
        });
    }
    if reach != Reach::PortForward {
        let members = pods
            .iter()
            .map(|p| {
                member_of(p, reach)
                    .map_err(|m| KubeError::Api { what: "discover members".into(), message: m })
            })
            .collect::<Result<_, _>>()?;
        return Ok(Connected { members, forwarders: vec![] });
    }
    let api: Api<Pod> = Api::namespaced(client.clone(), &o.namespace);
    let mut members = Vec::new();
    let mut forwarders = Vec::new();
    for p in &pods {
        let name = p.metadata.name.clone().unwrap_or_default();
        let port = u16::try_from(client_port(p)).unwrap_or(2379);
        // One forward opened now, so that a refusal (a 403: the verbs of
        // rbac-port-forward.yaml) is one clear error, not a connection reset on every probe.
        drop(
            call(
                &format!("port-forward to pod {name}"),
                o.request_timeout,
                api.portforward(&name, &[port]),
            )
            .await?,
        );
        let f = forward(api.clone(), &name, port).await.map_err(|e| KubeError::Api {
            what: "port-forward listener".into(),
            message: e.to_string(),
        })?;
        members.push(Member { name: MemberName(name), url: format!("http://{}", f.local) });
        forwarders.push(f);
    }
    Ok(Connected { members, forwarders })
}
