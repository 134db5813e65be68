//! The pod network: one Linux bridge with the gateway and the nodes' addresses, and one
//! network namespace per pod joined to it by a veth pair, so every pod has its own address
//! and three etcd members can all listen on 0.0.0.0:2379. Every name starts with `lw` and
//! the run's id, so what a killed run left behind is found by name.

use crate::error::{Error, Result};
use crate::proc::run;
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Mutex;

pub const PREFIX: &str = "lw";

pub struct Network {
    pub id: String,
    pub bridge: String,
    /// First three octets of the /24.
    base: [u8; 3],
    pub gateway: Ipv4Addr,
    state: Mutex<Pool>,
}

struct Pool {
    next_ns: u32,
    used: BTreeSet<u8>,
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
    let mut removed = Vec::new();
    for line in run("ip", &["netns", "list"]).await?.lines() {
        if let Some(n) = line.split_whitespace().next().filter(|n| left_over(n)) {
            let _ = run("ip", &["netns", "delete", n]).await;
            let _ = std::fs::remove_dir_all(format!("/etc/netns/{n}"));
            removed.push(format!("network namespace {n}"));
        }
    }
    for line in run("ip", &["-o", "link", "show"]).await?.lines() {
        if let Some(n) = line.split_whitespace().nth(1) {
            let n = n.trim_end_matches(':');
            let n = n.split('@').next().unwrap_or(n);
            if left_over(n) && run("ip", &["link", "delete", n]).await.is_ok() {
                removed.push(format!("network link {n}"));
            }
        }
    }
    Ok(removed)
}

impl Network {
    /// A bridge on a private /24 that no route of this machine uses.
    pub async fn create(id: &str) -> Result<Network> {
        let routes = run("ip", &["-4", "route", "show", "table", "all"]).await?;
        let addrs = run("ip", &["-4", "-o", "addr", "show"]).await?;
        let seed = u32::from_str_radix(id, 16).unwrap_or(0);
        let base = (0..200u32)
            .map(|i| {
                let v = seed.wrapping_add(i * 7919);
                [10u8, 200 + (v % 50) as u8, ((v / 50) % 250) as u8]
            })
            .find(|b| {
                let p = format!("{}.{}.{}.", b[0], b[1], b[2]);
                !routes.contains(&p) && !addrs.contains(&p)
            })
            .ok_or(Error::NoFree("private /24 for the pod network"))?;
        let gateway = Ipv4Addr::new(base[0], base[1], base[2], 1);
        let bridge = format!("{PREFIX}{id}br");
        run("ip", &["link", "add", &bridge, "type", "bridge"]).await?;
        run("ip", &["addr", "add", &format!("{gateway}/24"), "dev", &bridge]).await?;
        run("ip", &["link", "set", &bridge, "up"]).await?;
        Ok(Network {
            id: id.to_string(),
            bridge,
            base,
            gateway,
            state: Mutex::new(Pool { next_ns: 0, used: BTreeSet::new() }),
        })
    }

    pub fn cidr(&self) -> String {
        format!("{}.{}.{}.0/24", self.base[0], self.base[1], self.base[2])
    }

    /// The node's address (.2, .3, ...), on the bridge.
    pub async fn add_node_ip(&self, index: u8) -> Result<Ipv4Addr> {
        let ip = Ipv4Addr::new(self.base[0], self.base[1], self.base[2], 2 + index);
        run("ip", &["addr", "add", &format!("{ip}/24"), "dev", &self.bridge]).await?;
        Ok(ip)
    }

    /// A pod sandbox: a fresh namespace, its veth on the bridge, an address from .10-.250.
    pub async fn add_pod(&self) -> Result<(String, Ipv4Addr)> {
        let (n, host_octet) = {
            let mut st = self
                .state
                .lock()
                .map_err(|_| Error::Command("network pool lock poisoned".into()))?;
            let octet =
                (10u8..=250).find(|o| !st.used.contains(o)).ok_or(Error::NoFree("pod address"))?;
            st.used.insert(octet);
            st.next_ns += 1;
            (st.next_ns, octet)
        };
        let ns = format!("{PREFIX}{}-{n}", self.id);
        let veth = format!("{PREFIX}{}v{n}", self.id);
        let ip = Ipv4Addr::new(self.base[0], self.base[1], self.base[2], host_octet);
        let steps: Vec<Vec<String>> = vec![
            vec!["netns".into(), "add".into(), ns.clone()],
            vec![
                "link".into(),
                "add".into(),
                veth.clone(),
                "type".into(),
                "veth".into(),
                "peer".into(),
                "name".into(),
                "eth0".into(),
                "netns".into(),
                ns.clone(),
            ],
            vec![
                "link".into(),
                "set".into(),
                veth.clone(),
                "master".into(),
                self.bridge.clone(),
                "up".into(),
            ],
            vec![
                "-n".into(),
                ns.clone(),
                "addr".into(),
                "add".into(),
                format!("{ip}/24"),
                "dev".into(),
                "eth0".into(),
            ],
            vec!["-n".into(), ns.clone(), "link".into(), "set".into(), "eth0".into(), "up".into()],
            vec!["-n".into(), ns.clone(), "link".into(), "set".into(), "lo".into(), "up".into()],
            vec![
                "-n".into(),
                ns.clone(),
                "route".into(),
                "add".into(),
                "default".into(),
                "via".into(),
                self.gateway.to_string(),
            ],
        ];
        for s in steps {
            let args: Vec<&str> = s.iter().map(|x| x.as_str()).collect();
            if let Err(e) = run("ip", &args).await {
                let _ = run("ip", &["netns", "delete", &ns]).await;
                self.release(ip);
                return Err(e);
            }
        }
        Ok((ns, ip))
    }

    fn release(&self, ip: Ipv4Addr) {
        if let Ok(mut st) = self.state.lock() {
            st.used.remove(&ip.octets()[3]);
        }
    }

    /// Deleting the namespace deletes its end of the veth pair, and so the pair.
    pub async fn remove_pod(&self, ns: &str, ip: Ipv4Addr) {
        let _ = run("ip", &["netns", "delete", ns]).await;
        self.release(ip);
    }
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
