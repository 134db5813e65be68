//! Who is measured: a member's name and its client URL, parsed from `NAME=URL`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A member's name as the user (or the pod) calls it, e.g. `dlock-etcd-0` or `m1`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MemberName(pub String);

impl fmt::Display for MemberName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One etcd member to probe: `/metrics` and `/health` on `url`, the Status RPC on the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: MemberName,
    /// Base client URL, `http://host:2379` or `https://...`, without a trailing slash.
    pub url: String,
}

impl Member {
    /// The same member at another host (a recreated pod's address), scheme and port kept;
    /// `None` when the URL has no `scheme://host:port` form.
    pub fn at_host(&self, host: &str) -> Option<Member> {
        let (scheme, rest) = self.url.split_once("://")?;
        let (_, port) = rest.rsplit_once(':')?;
        let host = if host.contains(':') { format!("[{host}]") } else { host.to_owned() };
        Some(Member { name: self.name.clone(), url: format!("{scheme}://{host}:{port}") })
    }

    /// Parses `NAME=URL`; the one-line error names what is wrong.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let (name, url) = spec.split_once('=').ok_or_else(|| {
            format!("endpoint {spec:?}: expected NAME=URL, e.g. m0=http://127.0.0.1:2379")
        })?;
        let name = name.trim();
        if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == ',') {
            return Err(format!(
                "endpoint {spec:?}: member name must be non-empty, without spaces or commas"
            ));
        }
        let url = url.trim().trim_end_matches('/');
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or_else(|| format!("endpoint {spec:?}: URL must start with http:// or https://"))?;
        if rest.is_empty() || rest.contains('/') {
            return Err(format!("endpoint {spec:?}: URL must be scheme://host:port with no path"));
        }
        Ok(Member { name: MemberName(name.to_owned()), url: url.to_owned() })
    }

    pub fn is_tls(&self) -> bool {
        self.url.starts_with("https://")
    }
}

/// Parses every `NAME=URL` and rejects duplicate names or URLs.
pub fn parse_members(specs: &[String]) -> Result<Vec<Member>, String> {
    let members = specs.iter().map(|s| Member::parse(s)).collect::<Result<Vec<_>, _>>()?;
    for (i, a) in members.iter().enumerate() {
        for b in &members[..i] {
            if a.name == b.name {
                return Err(format!("member name {} given twice", a.name));
            }
            if a.url == b.url {
                return Err(format!(
                    "endpoint {} given twice (members {} and {})",
                    a.url, b.name, a.name
                ));
            }
        }
    }
    if members.is_empty() {
        return Err("no member given: at least one NAME=URL is needed".to_owned());
    }
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_name_and_url() {
        let m = Member::parse("m0=http://127.0.0.1:2379/").expect("valid");
        assert_eq!(m.name.0, "m0");
        assert_eq!(m.url, "http://127.0.0.1:2379");
    }

    #[test]
    fn rejects_bad_specs_with_a_reason() {
        for bad in [
            "m0",
            "=http://x:1",
            "m0=ftp://x:1",
            "m0=127.0.0.1:2379",
            "m0=http://x:1/metrics",
            "a b=http://x:1",
        ] {
            assert!(Member::parse(bad).is_err(), "{bad} should be rejected");
        }
        let dup = parse_members(&["a=http://x:1".into(), "a=http://y:1".into()]);
        assert!(dup.unwrap_err().contains("twice"));
    }
}

#[cfg(test)]
mod at_host_tests {
    use super::{Member, MemberName};

    #[test]
    fn a_member_moved_to_another_host_keeps_its_scheme_and_port() {
        let m = Member { name: MemberName("m0".into()), url: "https://10.0.0.5:2379".into() };
        let moved = m.at_host("10.0.0.9").expect("moved");
        assert_eq!((moved.name.0.as_str(), moved.url.as_str()), ("m0", "https://10.0.0.9:2379"));
        assert_eq!(m.at_host("fd00::9").expect("v6").url, "https://[fd00::9]:2379");
        let bare = Member { name: MemberName("m1".into()), url: "nowhere".into() };
        assert!(bare.at_host("10.0.0.9").is_none());
    }
}
