//! A container's environment and command line as the kubelet builds them: `env` in order,
//! `valueFrom.fieldRef` from the pod, and Kubernetes `$(VAR)` expansion in env values,
//! command and args.

use k8s_openapi::api::core::v1::{Container, Pod};
use std::collections::HashMap;

/// Kubernetes expansion: `$(NAME)` becomes NAME's value when defined and stays as written
/// otherwise; `$$` is an escaped `$`.
pub fn expand(s: &str, vars: &HashMap<String, String>) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            if b[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if b[i + 1] == b'('
                && let Some(end) = s[i + 2..].find(')')
            {
                let name = &s[i + 2..i + 2 + end];
                match vars.get(name) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&s[i..i + 3 + end]),
                }
                i += 3 + end;
                continue;
            }
        }
        let ch = s[i..].chars().next().unwrap_or('$');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// A `fieldRef` path's value for this pod.
pub fn field(pod: &Pod, path: &str, pod_ip: &str, host_ip: &str) -> Option<String> {
    let m = &pod.metadata;
    let spec = pod.spec.as_ref()?;
    if let Some(k) = path.strip_prefix("metadata.labels['").and_then(|r| r.strip_suffix("']")) {
        return m.labels.as_ref()?.get(k).cloned();
    }
    if let Some(k) = path.strip_prefix("metadata.annotations['").and_then(|r| r.strip_suffix("']"))
    {
        return m.annotations.as_ref()?.get(k).cloned();
    }
    Some(match path {
        "metadata.name" => m.name.clone()?,
        "metadata.namespace" => m.namespace.clone()?,
        "metadata.uid" => m.uid.clone()?,
        "spec.nodeName" => spec.node_name.clone()?,
        "spec.serviceAccountName" => {
            spec.service_account_name.clone().unwrap_or_else(|| "default".into())
        }
        "status.podIP" | "status.podIPs" => pod_ip.to_string(),
        "status.hostIP" | "status.hostIPs" => host_ip.to_string(),
        _ => return None,
    })
}

/// The env list (NAME=value) and a lookup of it; `base` comes first (image env, service
/// links), then the container's env in order, each value expanded against what came before.
/// Values from ConfigMaps and Secrets come in through `lookup` (namespace-local reads).
pub fn build(
    pod: &Pod,
    c: &Container,
    base: &[(String, String)],
    pod_ip: &str,
    host_ip: &str,
    lookup: &dyn Fn(&str, &str, bool) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    let mut vars: HashMap<String, String> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let set =
        |vars: &mut HashMap<String, String>, order: &mut Vec<String>, k: String, v: String| {
            if !vars.contains_key(&k) {
                order.push(k.clone());
            }
            vars.insert(k, v);
        };
    for (k, v) in base {
        set(&mut vars, &mut order, k.clone(), v.clone());
    }
    for ef in c.env_from.iter().flatten() {
        let prefix = ef.prefix.clone().unwrap_or_default();
        if let Some(cm) = &ef.config_map_ref {
            for (k, v) in crate::kubelet::env::all_keys(lookup, &cm.name, false) {
                set(&mut vars, &mut order, format!("{prefix}{k}"), v);
            }
        }
        if let Some(s) = &ef.secret_ref {
            for (k, v) in crate::kubelet::env::all_keys(lookup, &s.name, true) {
                set(&mut vars, &mut order, format!("{prefix}{k}"), v);
            }
        }
    }
    for e in c.env.iter().flatten() {
        let v = if let Some(v) = &e.value {
            expand(v, &vars)
        } else if let Some(vf) = &e.value_from {
            if let Some(f) = &vf.field_ref {
                field(pod, &f.field_path, pod_ip, host_ip).ok_or_else(|| {
                    format!("env {}: unsupported fieldRef {}", e.name, f.field_path)
                })?
            } else if let Some(r) = &vf.config_map_key_ref {
                match lookup(&r.name, &r.key, false) {
                    Some(v) => v,
                    None if r.optional == Some(true) => continue,
                    None => {
                        return Err(format!(
                            "configmap \"{}\" key \"{}\" not found",
                            r.name, r.key
                        ));
                    }
                }
            } else if let Some(r) = &vf.secret_key_ref {
                match lookup(&r.name, &r.key, true) {
                    Some(v) => v,
                    None if r.optional == Some(true) => continue,
                    None => {
                        return Err(format!("secret \"{}\" key \"{}\" not found", r.name, r.key));
                    }
                }
            } else if let Some(r) = &vf.resource_field_ref {
                resource_field(c, &r.resource)
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        set(&mut vars, &mut order, e.name.clone(), v);
    }
    Ok(order
        .into_iter()
        .map(|k| {
            let v = vars.get(&k).cloned().unwrap_or_default();
            (k, v)
        })
        .collect())
}

fn all_keys(
    lookup: &dyn Fn(&str, &str, bool) -> Option<String>,
    name: &str,
    secret: bool,
) -> Vec<(String, String)> {
    // "*" asks the lookup for every key as "k=v\n" lines.
    lookup(name, "*", secret)
        .map(|s| {
            s.lines()
                .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// `resourceFieldRef` with divisor 1: CPU rounded up to whole cores, memory in bytes; a
/// missing limit reads as the node's allocatable, as on a real node.
fn resource_field(c: &Container, resource: &str) -> String {
    let (kind, name) = resource.split_once('.').unwrap_or(("", resource));
    let r = c.resources.as_ref();
    let q = match kind {
        "limits" => r.and_then(|r| r.limits.as_ref()).and_then(|m| m.get(name)),
        _ => r.and_then(|r| r.requests.as_ref()).and_then(|m| m.get(name)),
    };
    match (name, q) {
        ("cpu", Some(q)) => {
            let s = &q.0;
            let cores = if let Some(m) = s.strip_suffix('m') {
                m.parse::<f64>().unwrap_or(0.0) / 1000.0
            } else {
                s.parse().unwrap_or(0.0)
            };
            format!("{}", cores.ceil().max(1.0) as u64)
        }
        ("cpu", None) => "4".into(),
        ("memory", Some(q)) => crate::kubelet::env::bytes(&q.0).to_string(),
        ("memory", None) => (16u64 << 30).to_string(),
        _ => "0".into(),
    }
}

pub fn bytes(q: &str) -> u64 {
    let units = [
        ("Ki", 1u64 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
    ];
    for (u, m) in units {
        if let Some(n) = q.strip_suffix(u) {
            return n.parse::<u64>().unwrap_or(0) * m;
        }
    }
    q.parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let vars: HashMap<String, String> =
            [("POD_NAME".to_string(), "dlock-etcd-0".to_string())].into();
        assert_eq!(expand("--name=$(POD_NAME)", &vars), "--name=dlock-etcd-0");
        assert_eq!(
            expand("http://$(POD_NAME).x:2380,$(POD_NAME)", &vars),
            "http://dlock-etcd-0.x:2380,dlock-etcd-0"
        );
        assert_eq!(expand("$(UNDEFINED)", &vars), "$(UNDEFINED)");
        assert_eq!(expand("$$(POD_NAME)", &vars), "$(POD_NAME)");
        assert_eq!(expand("a$b $(", &vars), "a$b $(");
        assert_eq!(expand("€$(POD_NAME)€", &vars), "€dlock-etcd-0€");
    }
}
