//! The node network: one Linux bridge with the host's address, and one network namespace per
//! node joined to it by a veth pair, with routes so that the host and every node reach every
//! pod (the pods' own interfaces are the CNI bridge plugin's, inside each node). Every name
//! starts with `lw` and the run's id, so what a killed run left behind is found by name.

use crate::error::{Error, Result};
use crate::proc::run;
use std::net::Ipv4Addr;

pub const PREFIX: &str = "lw";

pub struct Network {
    pub id: String,
    pub bridge: String,
    /// First three octets of the run's /21: the bridge's /24, then one /24 per node.
    base: [u8; 3],
    /// The host's address on the bridge: the API server and CoreDNS listen on it.
    pub gateway: Ipv4Addr,
}

/// True for a name one of our runs made: `lw` + 4 hex digits.
pub fn ours(name: &str) -> bool {
    name.len() >= 6 && name.starts_with(PREFIX) && name[2..6].chars().all(|c| c.is_ascii_hexdigit())
}

/// Ours, and not of a cluster that is still running.
fn left_over(name: &str) -> bool {
    ours(name) && !crate::registry::live(&name[2..6])
}

/// Network namespaces and links that a run of this harness left behind.
pub async fn leftovers() -> Result<Vec<String>> {
    let mut found = Vec::new();
    for line in run("ip", &["netns", "list"]).await?.lines() {
        if let Some(n) = line.split_whitespace().next().filter(|n| left_over(n)) {
            found.push(format!("network namespace {n}"));
        }
    }
    for line in run("ip", &["-o", "link", "show"]).await?.lines() {
        // "12: lwab12br: <BROADCAST,...": the name is the second field, up to '@' or ':'.
        if let Some(n) = line.split_whitespace().nth(1) {
            let n = n.trim_end_matches(':');
            let n = n.split('@').next().unwrap_or(n);
            if left_over(n) {
                found.push(format!("network link {n}"));
            }
        }
    }
    Ok(found)
}

/// Removes what `leftovers` finds.
pub async fn remove_leftovers() -> Result<Vec<String>> {
    remove_where(&left_over).await
}

/// Removes run `id`'s own network namespaces and links, while it is still registered: a
/// cluster starting beside it meanwhile must not find them unregistered (it would refuse
/// them as a killed run's).
pub async fn remove_own(id: &str) -> Result<Vec<String>> {
    let prefix = format!("{PREFIX}{id}");
    remove_where(&|n: &str| n.starts_with(&prefix)).await
}

async fn remove_where(pick: &dyn Fn(&str) -> bool) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for line in run("ip", &["netns", "list"]).await?.lines() {
        if let Some(n) = line.split_whitespace().next().filter(|n| pick(n)) {
            let _ = run("ip", &["netns", "delete", n]).await;
            let _ = std::fs::remove_dir_all(format!("/etc/netns/{n}"));
            removed.push(format!("network namespace {n}"));
        }
    }
    for line in run("ip", &["-o", "link", "show"]).await?.lines() {
        if let Some(n) = line.split_whitespace().nth(1) {
            let n = n.trim_end_matches(':');
            let n = n.split('@').next().unwrap_or(n);
            if pick(n) && run("ip", &["link", "delete", n]).await.is_ok() {
                removed.push(format!("network link {n}"));
            }
        }
    }
    Ok(removed)
}

/// A node's place on the network: its own namespace joined to the bridge by a veth pair,
/// its address on the bridge, and the /24 its pods get addresses from.
#[derive(Clone, Debug)]
pub struct NodeNet {
    /// `lw<id>-<node>`: the kubelet, containerd and kube-proxy run in it (`nsenter --net`).
    pub netns: String,
    pub ip: Ipv4Addr,
    pub pod_cidr: String,
}

/// How many nodes a cluster can have: three zones, each with a surge node.
pub const MAX_NODES: u8 = 6;

impl Network {
    /// A bridge on a private /24 that no route of this machine uses, and the /24s after it
    /// (one per node, for its pods) free too: the run owns a /21.
    pub async fn create(id: &str) -> Result<Network> {
        let routes = run("ip", &["-4", "route", "show", "table", "all"]).await?;
        let addrs = run("ip", &["-4", "-o", "addr", "show"]).await?;
        let seed = u32::from_str_radix(id, 16).unwrap_or(0);
        let base = (0..200u32)
            .map(|i| {
                let v = seed.wrapping_add(i * 7919);
                [10u8, 200 + (v % 50) as u8, (((v / 50) % 31) * 8) as u8]
            })
            .find(|b| {
                (0..8u8).all(|k| {
                    let p = format!("{}.{}.{}.", b[0], b[1], b[2] + k);
                    !routes.contains(&p) && !addrs.contains(&p)
                })
            })
            .ok_or(Error::NoFree("private /21 for the node and pod networks"))?;
        let gateway = Ipv4Addr::new(base[0], base[1], base[2], 1);
        let bridge = format!("{PREFIX}{id}br");
        run("ip", &["link", "add", &bridge, "type", "bridge"]).await?;
        run("ip", &["addr", "add", &format!("{gateway}/24"), "dev", &bridge]).await?;
        run("ip", &["link", "set", &bridge, "up"]).await?;
        Ok(Network { id: id.to_string(), bridge, base, gateway })
    }

    /// Every address a pod can get, on any node.
    pub fn cidr(&self) -> String {
        format!("{}.{}.{}.0/21", self.base[0], self.base[1], self.base[2])
    }

    pub fn node_ip(&self, index: u8) -> Ipv4Addr {
        Ipv4Addr::new(self.base[0], self.base[1], self.base[2], 2 + index)
    }

    fn pod_cidr(&self, index: u8) -> String {
        format!("{}.{}.{}.0/24", self.base[0], self.base[1], self.base[2] + 1 + index)
    }

    /// Node `index` (0..MAX_NODES): its namespace, veth and address, a default route to the
    /// host, a route to every other node's pods through that node, and the host's route to
    /// its pods. No NAT and no forwarding on the host: every hop is one bridge away.
    pub async fn add_node(&self, index: u8) -> Result<NodeNet> {
        if index >= MAX_NODES {
            return Err(Error::NoFree("node slot"));
        }
        let netns = format!("{PREFIX}{}-n{index}", self.id);
        let veth = format!("{PREFIX}{}n{index}", self.id);
        let ip = self.node_ip(index);
        let mut steps: Vec<Vec<String>> = vec![
            sv(&["netns", "add", &netns]),
            sv(&["link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &netns]),
            sv(&["link", "set", &veth, "master", &self.bridge, "up"]),
            sv(&["-n", &netns, "addr", "add", &format!("{ip}/24"), "dev", "eth0"]),
            sv(&["-n", &netns, "link", "set", "eth0", "up"]),
            sv(&["-n", &netns, "link", "set", "lo", "up"]),
            sv(&["-n", &netns, "route", "add", "default", "via", &self.gateway.to_string()]),
            sv(&[
                "route",
                "add",
                &self.pod_cidr(index),
                "via",
                &ip.to_string(),
                "dev",
                &self.bridge,
            ]),
        ];
        for other in (0..MAX_NODES).filter(|&o| o != index) {
            let via = self.node_ip(other).to_string();
            steps.push(sv(&["-n", &netns, "route", "add", &self.pod_cidr(other), "via", &via]));
        }
        for s in steps {
            let args: Vec<&str> = s.iter().map(|x| x.as_str()).collect();
            if let Err(e) = run("ip", &args).await {
                let _ = run("ip", &["netns", "delete", &netns]).await;
                return Err(e);
            }
        }
        // The node routes its pods' packets (the CNI bridge plugin also turns this on).
        run("ip", &["netns", "exec", &netns, "sysctl", "-qw", "net.ipv4.ip_forward=1"]).await?;
        Ok(NodeNet { netns, ip, pod_cidr: self.pod_cidr(index) })
    }
}

fn sv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_names_of_our_runs_count_as_ours() {
        assert!(super::ours("lwbeef-1") && super::ours("lw0a1bbr") && super::ours("lw0a1bv12"));
        assert!(
            !super::ours("lwx")
                && !super::ours("lwxyzw-1")
                && !super::ours("eth0")
                && !super::ours("lo")
        );
    }
}
