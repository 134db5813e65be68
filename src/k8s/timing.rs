//! The members' election timing (`--heartbeat-interval`, `--election-timeout`) read from
//! where it is set: the etcd container of the StatefulSet that owns the member pods.
//! [`from_statefulset`] reads one spec (pure); [`read`] finds that StatefulSet in the cluster.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

use super::discover::pods;
use super::{KubeError, KubeOptions, call};

/// The two values baseline.json records, and where they were read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElectionTiming {
    pub heartbeat_ms: u64,
    pub election_ms: u64,
    /// Where each value came from, e.g. `StatefulSet dlock/dlock-etcd container etcd args`.
    pub source: String,
}

/// One setting: its etcd flag, its environment variable and etcd's default.
struct Setting {
    flag: &'static str,
    env: &'static str,
    default: u64,
}

const HEARTBEAT: Setting =
    Setting { flag: "heartbeat-interval", env: "ETCD_HEARTBEAT_INTERVAL", default: 100 };
const ELECTION: Setting =
    Setting { flag: "election-timeout", env: "ETCD_ELECTION_TIMEOUT", default: 1000 };
const DEFAULT_SOURCE: &str = "etcd default";

/// The election timing of the etcd container `container` (else the one that runs etcd)
/// of `sts`: flags in command/args win over `ETCD_*` env vars, which win over etcd's
/// defaults, as in etcd itself. A value the spec alone cannot tell is an error, never a default.
pub fn from_statefulset(
    sts: &StatefulSet,
    container: Option<&str>,
) -> Result<ElectionTiming, String> {
    let name = sts.metadata.name.as_deref().unwrap_or("(unnamed)");
    let sts_name = match sts.metadata.namespace.as_deref() {
        Some(ns) => format!("StatefulSet {ns}/{name}"),
        None => format!("StatefulSet {name}"),
    };
    let containers = sts
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| p.containers.as_slice())
        .unwrap_or_default();
    let c = etcd_container(containers, container).map_err(|m| format!("{sts_name}: {m}"))?;
    let at = format!("{sts_name} container {}", c.name);
    let env = Env::of(c);
    let tokens = tokens(c);
    // With a config file etcd ignores its flags and env vars; the values are in that file.
    if let Some((v, _)) = find_flag(&tokens, "config-file").map_err(|m| format!("{at}: {m}"))? {
        return Err(format!(
            "{at}: etcd reads --config-file {v} (its flags and env are then ignored); the timing is in that file, not in the StatefulSet"
        ));
    }
    if env.vars.contains_key("ETCD_CONFIG_FILE") {
        return Err(format!(
            "{at}: etcd reads the file named by env ETCD_CONFIG_FILE; the timing is in that file, not in the StatefulSet"
        ));
    }
    let (heartbeat_ms, h) = resolve(&HEARTBEAT, &tokens, &env).map_err(|m| format!("{at}: {m}"))?;
    let (election_ms, e) = resolve(&ELECTION, &tokens, &env).map_err(|m| format!("{at}: {m}"))?;
    let describe = |w: &Option<String>| {
        w.as_ref().map_or_else(|| DEFAULT_SOURCE.to_owned(), |w| format!("{at} {w}"))
    };
    let source = if h == e {
        describe(&h)
    } else {
        format!("heartbeat: {}; election: {}", describe(&h), describe(&e))
    };
    Ok(ElectionTiming { heartbeat_ms, election_ms, source })
}

/// The StatefulSet that owns the member pods (`--namespace`, `--selector`) and its timing.
/// Uses `list pods` and `get statefulsets`, each under the request timeout.
pub async fn read(client: &Client, kube: &KubeOptions) -> Result<ElectionTiming, KubeError> {
    let pods = pods(client, kube).await?;
    let name = owning_statefulset(&pods, kube).map_err(|message| KubeError::Api {
        what: "find the members' StatefulSet".into(),
        message,
    })?;
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), &kube.namespace);
    let sts = call("get statefulset", kube.request_timeout, api.get(&name)).await?;
    from_statefulset(&sts, None).map_err(|message| KubeError::Api {
        what: format!("election timing of statefulset {name}"),
        message,
    })
}

/// The one StatefulSet controlling all of `pods`. By owner, not by a label match: a
/// StatefulSet's own labels need not match the pod selector.
pub(crate) fn owning_statefulset(pods: &[Pod], kube: &KubeOptions) -> Result<String, String> {
    if pods.is_empty() {
        return Err(format!("no pod matches {} in namespace {}", kube.selector, kube.namespace));
    }
    let mut owners: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut orphans = Vec::new();
    for p in pods {
        let pod = p.metadata.name.clone().unwrap_or_default();
        match owner(p) {
            Some(o) => owners.entry(o).or_default().push(pod),
            None => orphans.push(pod),
        }
    }
    if !orphans.is_empty() {
        return Err(format!("pods {} are not controlled by a StatefulSet", orphans.join(", ")));
    }
    match owners.keys().collect::<Vec<_>>().as_slice() {
        [one] => Ok((*one).clone()),
        _ => {
            let all: Vec<String> =
                owners.iter().map(|(s, p)| format!("{s} ({})", p.join(", "))).collect();
            Err(format!(
                "the pods matching {} belong to {} StatefulSets: {}; narrow the selector to one",
                kube.selector,
                owners.len(),
                all.join(", ")
            ))
        }
    }
}

/// The StatefulSet controlling `p`, by its controller owner reference.
fn owner(p: &Pod) -> Option<String> {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| {
            o.controller == Some(true)
                && o.kind == "StatefulSet"
                && o.api_version.starts_with("apps/")
        })
        .map(|o| o.name.clone())
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// `gcr.io/etcd-development/etcd:v3.6.14` -> `etcd`.
fn image_name(image: &str) -> &str {
    let path = image.split('@').next().unwrap_or(image);
    let last = basename(path);
    last.split(':').next().unwrap_or(last)
}

/// The named container; else the first that runs etcd, whose image is etcd, or that
/// mentions etcd (in that order, so a sidecar mentioning etcd loses); else the first.
fn etcd_container<'a>(cs: &'a [Container], name: Option<&str>) -> Result<&'a Container, String> {
    if let Some(n) = name {
        return cs.iter().find(|c| c.name == n).ok_or_else(|| {
            let names: Vec<&str> = cs.iter().map(|c| c.name.as_str()).collect();
            format!("no container named {n} (containers: {})", names.join(", "))
        });
    }
    let runs = |c: &&Container| {
        c.command.as_ref().and_then(|v| v.first()).is_some_and(|p| basename(p) == "etcd")
    };
    let image = |c: &&Container| c.image.as_deref().is_some_and(|i| image_name(i) == "etcd");
    let mentions = |c: &&Container| {
        c.command
            .iter()
            .chain(c.args.iter())
            .flatten()
            .chain(c.image.iter())
            .any(|s| s.contains("etcd"))
    };
    cs.iter()
        .find(runs)
        .or_else(|| cs.iter().find(image))
        .or_else(|| cs.iter().find(mentions))
        .or_else(|| cs.first())
        .ok_or_else(|| "the pod template has no containers".to_owned())
}

/// An env var as the container spec defines it.
#[derive(Debug, Clone)]
enum EnvValue {
    /// Its value, and the vars a `$(VAR)` in it took theirs from.
    Literal { value: String, via: Vec<String> },
    /// Why the spec alone cannot tell its value.
    Unreadable(String),
}

struct Env {
    vars: BTreeMap<String, EnvValue>,
    /// The container's `envFrom`, which may define any name.
    env_from: Option<String>,
}

impl Env {
    /// The container's env as the kubelet builds it: in order, a later entry replacing an
    /// earlier one, each `$(VAR)` resolved against the entries before it.
    fn of(c: &Container) -> Env {
        let env_from = c
            .env_from
            .as_ref()
            .filter(|v| !v.is_empty())
            .map(|v| serde_json::to_string(v).unwrap_or_default());
        let mut env = Env { vars: BTreeMap::new(), env_from };
        for e in c.env.iter().flatten() {
            let v = match (&e.value_from, &e.value) {
                (Some(from), _) => EnvValue::Unreadable(format!(
                    "env {} is set by valueFrom {}",
                    e.name,
                    serde_json::to_string(from).unwrap_or_default()
                )),
                (None, Some(v)) => match env.expand(v) {
                    Ok((value, via)) => EnvValue::Literal { value, via },
                    Err(why) => EnvValue::Unreadable(format!("env {}: {why}", e.name)),
                },
                (None, None) => EnvValue::Literal { value: String::new(), via: vec![] },
            };
            env.vars.insert(e.name.clone(), v);
        }
        env
    }

    /// `Ok(None)`: not defined anywhere (the kubelet then leaves `$(NAME)` as it is).
    fn lookup(&self, name: &str) -> Result<Option<String>, String> {
        match self.vars.get(name) {
            Some(EnvValue::Literal { value, .. }) => Ok(Some(value.clone())),
            Some(EnvValue::Unreadable(why)) => Err(why.clone()),
            None => match &self.env_from {
                Some(from) => Err(format!("{name} is not in env and may come from envFrom {from}")),
                None => Ok(None),
            },
        }
    }

    /// The kubelet's expansion ([`super::expand`]) against this env.
    fn expand(&self, s: &str) -> Result<(String, Vec<String>), String> {
        super::expand::expand(s, |name| self.lookup(name))
    }

    /// A shell's `$VAR` / `${VAR}` from env; a variable the env lacks is an error
    /// (the script may set it, which the spec cannot tell).
    fn shell_expand(&self, s: &str) -> Result<(String, Vec<String>), String> {
        let (mut out, mut via) = (String::new(), Vec::new());
        let mut rest = s;
        while let Some(i) = rest.find('$') {
            out.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            let (name, r) = match after.strip_prefix('{').and_then(|r| r.split_once('}')) {
                Some((n, r)) => (n, r),
                None => {
                    let end = after
                        .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                        .unwrap_or(after.len());
                    (&after[..end], &after[end..])
                }
            };
            if name.is_empty() {
                out.push('$');
                rest = after;
                continue;
            }
            match self.lookup(name)? {
                Some(v) => {
                    out.push_str(&v);
                    via.push(name.to_owned());
                }
                None => {
                    return Err(format!("shell variable ${name} is not in the container's env"));
                }
            }
            rest = r;
        }
        out.push_str(rest);
        Ok((out, via))
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ArgPlace {
    Command,
    Args,
}

/// One word etcd may see: an element of command/args, or a word of a `sh -c` script.
#[derive(Debug, Clone)]
struct Token {
    text: String,
    part: ArgPlace,
    script: bool,
}

impl Token {
    fn place(&self) -> &'static str {
        match (self.part, self.script) {
            (ArgPlace::Command, false) => "command",
            (ArgPlace::Args, false) => "args",
            (ArgPlace::Command, true) => "command (shell script)",
            (ArgPlace::Args, true) => "args (shell script)",
        }
    }
}

/// command + args; with `sh -c SCRIPT` the script is replaced by its words.
fn tokens(c: &Container) -> Vec<Token> {
    let tok = |part| move |s: &String| Token { text: s.clone(), part, script: false };
    let mut t: Vec<Token> = c
        .command
        .iter()
        .flatten()
        .map(tok(ArgPlace::Command))
        .chain(c.args.iter().flatten().map(tok(ArgPlace::Args)))
        .collect();
    let shell = t.first().is_some_and(|f| {
        matches!(basename(&f.text), "sh" | "bash" | "ash" | "dash" | "zsh" | "ksh")
    });
    // `-c`, `-ec`, `-xc`...: the next word is the script.
    let dash_c = t.iter().position(|x| {
        x.text.strip_prefix('-').is_some_and(|o| {
            o.contains('c') && o.len() <= 4 && o.chars().all(|ch| ch.is_ascii_lowercase())
        })
    });
    if let (true, Some(i)) = (shell, dash_c)
        && let Some(script) = t.get(i + 1).cloned()
    {
        let words = script
            .text
            .replace("\\\n", " ")
            .split(|ch: char| ch.is_whitespace() || matches!(ch, ';' | '&' | '|'))
            .map(|w| w.replace(['\'', '"'], ""))
            .filter(|w| !w.is_empty())
            .map(|text| Token { text, part: script.part, script: true })
            .collect::<Vec<_>>();
        t.splice(i + 1..i + 2, words);
    }
    t
}

/// The last `--flag=v`, `--flag v` (or one dash: etcd parses with Go's flag package, where
/// the last occurrence wins), with the token that set it.
fn find_flag<'a>(tokens: &'a [Token], flag: &str) -> Result<Option<(String, &'a Token)>, String> {
    let mut found = None;
    for (i, t) in tokens.iter().enumerate() {
        let Some(bare) = t.text.strip_prefix("--").or_else(|| t.text.strip_prefix('-')) else {
            continue;
        };
        if let Some(v) = bare.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            found = Some((v.to_owned(), t));
        } else if bare == flag {
            let v = tokens
                .get(i + 1)
                .ok_or_else(|| format!("--{flag} is the last word, with no value"))?;
            found = Some((v.text.clone(), t));
        }
    }
    Ok(found)
}

/// One setting's value and where it was set (`None`: etcd's default).
fn resolve(s: &Setting, tokens: &[Token], env: &Env) -> Result<(u64, Option<String>), String> {
    let parse = |v: &str, place: &str| {
        v.parse::<u64>().map_err(|_| {
            format!("--{} {v:?} ({place}) is not a whole number of milliseconds", s.flag)
        })
    };
    let with_via = |place: String, via: &[String]| {
        if via.is_empty() { place } else { format!("{place} via env {}", via.join(", ")) }
    };
    if let Some((raw, t)) = find_flag(tokens, s.flag)? {
        let unreadable = |why: String| format!("--{} {raw:?} ({}): {why}", s.flag, t.place());
        let (mut v, mut via) = env.expand(&raw).map_err(unreadable)?;
        if t.script {
            let (sv, svia) = env.shell_expand(&v).map_err(unreadable)?;
            v = sv;
            via.extend(svia);
        }
        let place = with_via(t.place().to_owned(), &via);
        return Ok((parse(&v, &place)?, Some(place)));
    }
    if tokens.iter().any(|t| t.script && t.text.contains(&format!("{}=", s.env))) {
        return Err(format!(
            "--{}: the shell script assigns {}, which the spec cannot tell",
            s.flag, s.env
        ));
    }
    match env.vars.get(s.env) {
        Some(EnvValue::Literal { value, via }) => {
            let place = with_via(format!("env {}", s.env), via);
            Ok((parse(value, &place)?, Some(place)))
        }
        Some(EnvValue::Unreadable(why)) => {
            Err(format!("--{}: {why}, not readable from the StatefulSet", s.flag))
        }
        None => match &env.env_from {
            Some(from) => Err(format!(
                "--{}: not set in command, args or env, and envFrom {from} may set {}; not readable from the StatefulSet",
                s.flag, s.env
            )),
            None => Ok((s.default, None)),
        },
    }
}

#[cfg(test)]
mod tests;
