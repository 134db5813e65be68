//! Cluster DNS as CoreDNS's kubernetes plugin answers it, from the API: `<svc>.<ns>.svc.cluster.local`
//! (the ClusterIP, or for a headless Service every endpoint address) and
//! `<hostname>.<svc>.<ns>.svc.cluster.local` (an endpoint with a hostname, as the StatefulSet's
//! pods have). Records follow the EndpointSlices, so a recreated pod's new address resolves.
//! A records only; nothing outside cluster.local is answered (this machine has no upstream).

use crate::error::{IoContext, Result};
use futures::StreamExt;
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType, rdata::A};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, RwLock};

pub const DOMAIN: &str = "cluster.local";

/// The Service a slice belongs to and its (address, hostname) endpoints.
type Slice = (String, Vec<(Ipv4Addr, Option<String>)>);

#[derive(Default)]
struct Tables {
    /// (namespace, service) -> ClusterIP (None for headless).
    services: BTreeMap<(String, String), Option<Ipv4Addr>>,
    /// slice (namespace, name) -> (service, [(address, hostname)])
    slices: BTreeMap<(String, String), Slice>,
}

#[derive(Clone, Default)]
pub struct Dns {
    t: Arc<RwLock<Tables>>,
}

impl Dns {
    /// The addresses of a fully qualified name (lower case, no trailing dot).
    pub fn resolve(&self, name: &str) -> Option<Vec<Ipv4Addr>> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let rest = name.strip_suffix(&format!(".svc.{DOMAIN}"))?;
        let parts: Vec<&str> = rest.split('.').collect();
        let t = self.t.read().ok()?;
        let endpoints = |ns: &str, svc: &str| -> Vec<(Ipv4Addr, Option<String>)> {
            t.slices
                .iter()
                .filter(|((sns, _), (s, _))| sns == ns && s == svc)
                .flat_map(|(_, (_, eps))| eps.iter().cloned())
                .collect()
        };
        match parts.as_slice() {
            [svc, ns] => match t.services.get(&(ns.to_string(), svc.to_string()))? {
                Some(ip) => Some(vec![*ip]),
                None => Some(
                    endpoints(ns, svc)
                        .into_iter()
                        .map(|(a, _)| a)
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect(),
                ),
            },
            [host, svc, ns] => {
                let v: Vec<Ipv4Addr> = endpoints(ns, svc)
                    .into_iter()
                    .filter(|(_, h)| h.as_deref() == Some(host))
                    .map(|(a, _)| a)
                    .collect();
                (!v.is_empty()).then_some(v)
            }
            _ => None,
        }
    }

    /// Follows Services and EndpointSlices in every namespace until cancelled.
    pub async fn follow(self, client: Client) {
        let svcs = watcher(Api::<Service>::all(client.clone()), watcher::Config::default()).boxed();
        let slices = watcher(Api::<EndpointSlice>::all(client), watcher::Config::default()).boxed();
        let mut both = futures::stream::select(svcs.map(Ev::Svc), slices.map(Ev::Slice));
        while let Some(ev) = both.next().await {
            let Ok(mut t) = self.t.write() else { return };
            match ev {
                Ev::Svc(Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s))) => {
                    let ip = s
                        .spec
                        .as_ref()
                        .and_then(|sp| sp.cluster_ip.as_deref())
                        .and_then(|ip| ip.parse().ok());
                    t.services.insert((s.namespace().unwrap_or_default(), s.name_any()), ip);
                }
                Ev::Svc(Ok(watcher::Event::Delete(s))) => {
                    t.services.remove(&(s.namespace().unwrap_or_default(), s.name_any()));
                }
                Ev::Slice(Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s))) => {
                    let svc =
                        s.labels().get("kubernetes.io/service-name").cloned().unwrap_or_default();
                    let mut eps = Vec::new();
                    for e in &s.endpoints {
                        // CoreDNS serves an endpoint unless it is explicitly not ready.
                        if e.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                            continue;
                        }
                        for a in &e.addresses {
                            if let Ok(ip) = a.parse() {
                                eps.push((ip, e.hostname.clone()));
                            }
                        }
                    }
                    t.slices.insert((s.namespace().unwrap_or_default(), s.name_any()), (svc, eps));
                }
                Ev::Slice(Ok(watcher::Event::Delete(s))) => {
                    t.slices.remove(&(s.namespace().unwrap_or_default(), s.name_any()));
                }
                Ev::Svc(Err(e)) | Ev::Slice(Err(e)) => tracing::warn!("dns watch: {e}"),
                _ => {}
            }
        }
    }

    fn answer(&self, query: &[u8]) -> Option<Vec<u8>> {
        let req = Message::from_vec(query).ok()?;
        let mut resp = Message::new();
        resp.set_id(req.id())
            .set_message_type(MessageType::Response)
            .set_op_code(req.op_code())
            .set_authoritative(true)
            .set_recursion_desired(req.recursion_desired());
        let q = req.queries().first()?.clone();
        resp.add_query(q.clone());
        let name = q.name().to_ascii();
        let in_zone = name.trim_end_matches('.').to_ascii_lowercase().ends_with(DOMAIN);
        match self.resolve(&name) {
            Some(ips) => {
                if q.query_type() == RecordType::A {
                    for ip in ips {
                        resp.add_answer(Record::from_rdata(q.name().clone(), 5, RData::A(A(ip))));
                    }
                }
            }
            None => {
                resp.set_response_code(if in_zone {
                    ResponseCode::NXDomain
                } else {
                    ResponseCode::Refused
                });
            }
        }
        resp.to_vec().ok()
    }

    /// Serves UDP and TCP on `addr` until cancelled.
    pub async fn serve(self, addr: SocketAddr) -> Result<()> {
        let udp =
            tokio::net::UdpSocket::bind(addr).await.ctx(|| format!("DNS: bind udp {addr}"))?;
        let tcp =
            tokio::net::TcpListener::bind(addr).await.ctx(|| format!("DNS: bind tcp {addr}"))?;
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = tcp.accept().await else { continue };
                let me = me.clone();
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut len = [0u8; 2];
                    while s.read_exact(&mut len).await.is_ok() {
                        let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
                        if s.read_exact(&mut buf).await.is_err() {
                            return;
                        }
                        let Some(out) = me.answer(&buf) else { return };
                        let mut framed = (out.len() as u16).to_be_bytes().to_vec();
                        framed.extend(out);
                        if s.write_all(&framed).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, peer)) = udp.recv_from(&mut buf).await else { continue };
            if let Some(out) = self.answer(&buf[..n]) {
                let _ = udp.send_to(&out, peer).await;
            }
        }
    }
}

enum Ev<A, B> {
    Svc(A),
    Slice(B),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headless_service_names_resolve_to_endpoints_and_hostnames_to_their_pod() {
        let dns = Dns::default();
        {
            let mut t = dns.t.write().expect("lock");
            t.services.insert(("dlock".into(), "dlock-etcd-headless".into()), None);
            t.services
                .insert(("default".into(), "kubernetes".into()), Some(Ipv4Addr::new(10, 96, 0, 1)));
            let eps = vec![
                (Ipv4Addr::new(10, 1, 1, 10), Some("dlock-etcd-0".to_string())),
                (Ipv4Addr::new(10, 1, 1, 11), Some("dlock-etcd-1".to_string())),
            ];
            t.slices.insert(
                ("dlock".into(), "dlock-etcd-headless-abcde".into()),
                ("dlock-etcd-headless".into(), eps),
            );
        }
        assert_eq!(
            dns.resolve("dlock-etcd-1.dlock-etcd-headless.dlock.svc.cluster.local."),
            Some(vec![Ipv4Addr::new(10, 1, 1, 11)])
        );
        assert_eq!(
            dns.resolve("DLOCK-ETCD-0.dlock-etcd-headless.dlock.svc.cluster.local"),
            Some(vec![Ipv4Addr::new(10, 1, 1, 10)])
        );
        assert_eq!(
            dns.resolve("dlock-etcd-headless.dlock.svc.cluster.local").map(|v| v.len()),
            Some(2)
        );
        assert_eq!(
            dns.resolve("kubernetes.default.svc.cluster.local"),
            Some(vec![Ipv4Addr::new(10, 96, 0, 1)])
        );
        assert_eq!(
            dns.resolve("dlock-etcd-2.dlock-etcd-headless.dlock.svc.cluster.local"),
            None,
            "no such pod"
        );
        assert_eq!(dns.resolve("example.com"), None, "nothing outside the cluster");
    }
}
