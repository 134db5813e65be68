//! `lw-lab measure`: the GKE sitting rehearsed on the local cluster, as a user runs it: a
//! fresh cluster, dlock's etcd deployed by deploy/k8s/apply.sh, leaderwatch's
//! ServiceAccount and RBAC from deploy/k8s/leaderwatch/rbac.yaml, a token for that
//! ServiceAccount from TokenRequest (never the admin's credentials), then `leaderwatch
//! measure --reach pod-ip` with its defaults except the environment label, and the baseline
//! table.

use crate::error::{Error, Result};
use crate::lab::{KUBE_VERSION, Options, State};
use std::path::{Path, PathBuf};
use std::time::Duration;

async fn kubectl(state: &State, repo: &Path, args: &[&str]) -> Result<String> {
    let out = tokio::time::timeout(
        Duration::from_secs(900),
        tokio::process::Command::new(&state.kubectl)
            .args(args)
            .env("KUBECONFIG", &state.kubeconfig)
            .current_dir(repo)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| Error::Command(format!("kubectl {} timed out", args.join(" "))))?
    .map_err(|e| Error::Command(format!("kubectl: {e}")))?;
    if !out.status.success() {
        return Err(Error::Command(format!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A kubeconfig for dlock's `leaderwatch` ServiceAccount, with a TokenRequest token.
pub async fn service_account_kubeconfig(state: &State, repo: &Path, path: &Path) -> Result<()> {
    let token =
        kubectl(state, repo, &["-n", "dlock", "create", "token", "leaderwatch", "--duration=6h"])
            .await?;
    let admin = std::fs::read_to_string(&state.kubeconfig)
        .map_err(|e| Error::Command(format!("read admin kubeconfig: {e}")))?;
    let ca = admin
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
        .ok_or_else(|| Error::Command("admin kubeconfig has no CA".into()))?;
    let kc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lw-lab\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: dlock-leaderwatch\n  user:\n    token: {}\ncontexts:\n- name: leaderwatch@lw-lab\n  context:\n    cluster: lw-lab\n    user: dlock-leaderwatch\n    namespace: dlock\ncurrent-context: leaderwatch@lw-lab\n",
        state.server,
        token.trim()
    );
    std::fs::write(path, kc).map_err(|e| Error::Command(format!("write {}: {e}", path.display())))
}

/// Namespace, apply.sh, leaderwatch's namespace and rbac.yaml: what a user (and an admin)
/// does before the sitting.
pub async fn deploy(state: &State, repo: &Path) -> Result<()> {
    kubectl(state, repo, &["apply", "-f", "deploy/k8s/namespace.yaml"]).await?;
    let out = tokio::process::Command::new(repo.join("deploy/k8s/apply.sh"))
        .env("KUBECONFIG", &state.kubeconfig)
        .env("KUBECTL", &state.kubectl)
        .current_dir(repo)
        .kill_on_drop(true)
        .status()
        .await
        .map_err(|e| Error::Command(format!("apply.sh: {e}")))?;
    if !out.success() {
        return Err(Error::Command(format!("deploy/k8s/apply.sh failed ({out})")));
    }
    kubectl(state, repo, &["apply", "-f", "deploy/k8s/leaderwatch/namespace.yaml"]).await?;
    kubectl(state, repo, &["apply", "-f", "deploy/k8s/leaderwatch/rbac.yaml"]).await?;
    Ok(())
}

/// The value of `--flag` in `args`, if given.
fn arg<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|x| x == flag).and_then(|i| args.get(i + 1)).map(String::as_str)
}

pub fn environment() -> String {
    format!(
        "local control plane, Kubernetes {KUBE_VERSION}, real kubelet + containerd {}, etcd 3.6.14",
        crate::lab::CONTAINERD_VERSION.trim_start_matches('v')
    )
}

/// `etcdctl` in dlock-etcd-0, JSON out.
async fn etcdctl(state: &State, repo: &Path, args: &[&str]) -> Result<serde_json::Value> {
    let mut a = vec!["-n", "dlock", "exec", "dlock-etcd-0", "--", "etcdctl"];
    a.extend(args);
    a.extend(["-w", "json"]);
    let out = kubectl(state, repo, &a).await?;
    serde_json::from_str(&out)
        .map_err(|e| Error::Command(format!("etcdctl {}: {e}", args.join(" "))))
}

/// Moves the leadership to `to` (a member name) with `etcdctl move-leader`, sent to the
/// current leader as it requires; waits until `to` leads.
async fn move_leader(state: &State, repo: &Path, to: &str) -> Result<()> {
    let members = etcdctl(state, repo, &["member", "list"]).await?;
    let id_of = |name: &str| {
        members["members"]
            .as_array()
            .and_then(|a| a.iter().find(|m| m["name"] == name))
            .and_then(|m| m["ID"].as_u64())
    };
    let id = id_of(to)
        .ok_or_else(|| Error::Usage(format!("--leader {to}: no etcd member of that name")))?;
    for _ in 0..30 {
        let status = etcdctl(state, repo, &["endpoint", "status", "--cluster"]).await?;
        let eps = status.as_array().cloned().unwrap_or_default();
        let leader = eps.iter().find_map(|e| e["Status"]["leader"].as_u64());
        if leader == Some(id) {
            println!("lw-lab: {to} leads");
            return Ok(());
        }
        let at = eps
            .iter()
            .find(|e| e["Status"]["header"]["member_id"].as_u64() == leader)
            .and_then(|e| e["Endpoint"].as_str())
            .map(str::to_owned);
        if let Some(ep) = at {
            let hex = format!("{id:x}");
            let _ = kubectl(
                state,
                repo,
                &[
                    "-n",
                    "dlock",
                    "exec",
                    "dlock-etcd-0",
                    "--",
                    "etcdctl",
                    "--endpoints",
                    &ep,
                    "move-leader",
                    &hex,
                ],
            )
            .await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Err(Error::Command(format!("--leader {to}: the leadership did not move within 30 s")))
}

/// The members' pod IPs, as `--reach pod-ip` reaches them.
async fn pod_urls(state: &State, repo: &Path) -> Result<Vec<String>> {
    let mut args = crate::lab::MEMBER_PODS.to_vec();
    args.extend(["-o", "jsonpath={range .items[*]}{.status.podIP}{\"\\n\"}{end}"]);
    let out = kubectl(state, repo, &args).await?;
    Ok(out.lines().filter(|l| !l.is_empty()).map(|ip| format!("http://{ip}:2379")).collect())
}

/// Go's `concurrency.Mutex` beside the sitting (lw-etcd-locker, built by `make deps-etcd`):
/// the reference for the lock canary's figures. Two clients on prefixes of their own, one
/// with every call under the lock canary's 1 s deadline and one on clientv3's defaults,
/// each writing its CSV into a temporary directory until [`GoLockers::stop`].
struct GoLockers {
    children: Vec<(tokio::process::Child, PathBuf, &'static str)>,
    dir: PathBuf,
}

/// The two lockers' files in the run directory, and the `-op-timeout` each runs with.
const GO_LOCKERS: [(&str, &str); 2] = [("go-locker.csv", "1s"), ("go-locker-defaults.csv", "0")];

impl GoLockers {
    async fn start(repo: &Path, urls: &[String], dir: &Path) -> Result<Option<GoLockers>> {
        let bin = repo.join(".tools/bin/lw-etcd-locker");
        if !bin.is_file() {
            println!("lw-lab: {} missing (make deps-etcd): no Go locker beside", bin.display());
            return Ok(None);
        }
        let dir = dir.join("go-lockers");
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::Command(format!("{}: {e}", dir.display())))?;
        let mut children = Vec::new();
        for (name, op_timeout) in GO_LOCKERS {
            let path = dir.join(name);
            let file = std::fs::File::create(&path)
                .map_err(|e| Error::Command(format!("{}: {e}", path.display())))?;
            let child = tokio::process::Command::new(&bin)
                .args(["-endpoints", &urls.join(","), "-op-timeout", op_timeout])
                .args(["-prefix", &format!("__lw-lab/{name}"), "-ttl", "10", "-hold", "100ms"])
                .stdout(file)
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| Error::Command(format!("{}: {e}", bin.display())))?;
            children.push((child, path, name));
        }
        println!("lw-lab: Go concurrency.Mutex beside the sitting at {}", urls.join(","));
        Ok(Some(GoLockers { children, dir }))
    }

    /// SIGTERM (each releases and closes its session), then the CSVs into `out`.
    async fn stop(mut self, out: &Path) -> Result<()> {
        for (child, _, _) in &mut self.children {
            if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            let _ = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
        }
        for (_, path, name) in &self.children {
            let to = out.join(name);
            std::fs::copy(path, &to)
                .map_err(|e| Error::Command(format!("{}: {e}", to.display())))?;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        Ok(())
    }
}

type Time = chrono::DateTime<chrono::FixedOffset>;

/// The longest time between consecutive `grants` (sorted) that overlaps `[after, seen]`,
/// less the 100 ms hold, never below 0: the lock canary's `lock_unavailable_s`, computed
/// again from the Go client's grants.
fn unavailable_over(grants: &[Time], after: Time, seen: Time) -> Option<f64> {
    grants
        .windows(2)
        .filter(|w| w[0] <= seen && w[1] >= after)
        .map(|w| ((w[1] - w[0]).as_seconds_f64() - 0.1).max(0.0))
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
}

/// Each election of the run: the lock canary's `lock_unavailable_s` beside the Go
/// lockers' longest gap between grants over it, less the 100 ms hold (docs/counting.md).
fn compare_locks(out: &Path) -> Result<()> {
    let text = std::fs::read_to_string(out.join("baseline.json"))
        .map_err(|e| Error::Command(format!("baseline.json: {e}")))?;
    let b: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::Command(format!("baseline.json: {e}")))?;
    let time = |v: &serde_json::Value| {
        v.as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
    };
    let mut grants = Vec::new();
    for (name, _) in GO_LOCKERS {
        let csv = std::fs::read_to_string(out.join(name)).unwrap_or_default();
        let mut g: Vec<_> = csv
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f.get(1) == Some(&"granted"))
                    .then(|| f.get(2).and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()))
                    .flatten()
            })
            .collect();
        g.sort();
        grants.push((name, g));
    }
    let windows = b["windows"].as_array().cloned().unwrap_or_default();
    for e in
        windows.iter().flat_map(|w| w["elections_detail"].as_array().cloned().unwrap_or_default())
    {
        let (Some(after), Some(seen)) = (time(&e["after"]), time(&e["observed_at"])) else {
            continue;
        };
        let mut line = format!(
            "lw-lab: election term {} -> {} ({}): lock unavailable: lock canary {} s",
            e["term_from"],
            e["term_to"],
            e["cause"].as_str().unwrap_or("?"),
            e["lock_unavailable_s"].as_f64().map_or("—".to_owned(), |v| format!("{v:.2}"))
        );
        for (name, g) in &grants {
            let gap = unavailable_over(g, after, seen);
            line.push_str(&format!(
                ", {name} {}",
                gap.map_or("—".to_owned(), |v| format!("{v:.2} s"))
            ));
        }
        println!("{line}");
    }
    Ok(())
}

/// Resolves once the run's events.csv says the canaries started (the at-rest window is
/// over), or the disruption was requested (both canaries off).
async fn canaries_started(events: &Path) {
    loop {
        if let Ok(text) = tokio::fs::read_to_string(events).await
            && text.lines().any(|l| {
                [",canary_started,", ",lock_canary_started,", ",disruption_requested,"]
                    .iter()
                    .any(|k| l.contains(k))
            })
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The rights a method needs beyond an eviction's, if any.
fn extra_rights(method: &str) -> Option<&'static str> {
    match method {
        "drain" => Some("deploy/k8s/leaderwatch/rbac-drain.yaml"),
        "delete" | "rolling-restart" => Some("deploy/k8s/leaderwatch/rbac-maintenance.yaml"),
        _ => None,
    }
}

/// The run's directory when `--out` is not given: `data/kube-<target>-<what>-<time>`.
fn run_dir_name(method: &str, leader: Option<&str>, target: Option<&str>, surge: bool) -> PathBuf {
    // A rolling restart's name says who goes first: the highest ordinal.
    let target = match (method, leader) {
        ("rolling-restart", Some(l)) if l.ends_with("-2") => "leader-first",
        ("rolling-restart", Some(_)) => "follower-first",
        ("rolling-restart", None) => "all",
        _ => target.unwrap_or("follower"),
    };
    // A drain's name says whether a surge node took the member in.
    let what = match method {
        "evict" => "eviction",
        "drain" if surge => "drain-surge",
        "drain" => "drain-no-surge",
        m => m,
    };
    PathBuf::from(format!(
        "data/kube-{target}-{what}-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
    ))
}

/// `leaderwatch report` on the run's baseline, if it wrote one (best effort: the run's
/// files are what counts).
async fn print_report(lw: &Path, repo: &Path, run_dir: &Path) {
    let baseline = run_dir.join("baseline.json");
    if baseline.is_file() {
        let _ = tokio::process::Command::new(lw)
            .arg("report")
            .arg(&baseline)
            .current_dir(repo)
            .status()
            .await;
    }
}

/// `lw-lab measure`: `leaderwatch measure` on the lab with the rights its method needs,
/// the Go lockers beside it (their gaps printed beside the lock canary's), then the report.
pub async fn run(
    opts: &Options,
    repo: &Path,
    leaderwatch: &Path,
    leader: Option<String>,
    args: Vec<String>,
) -> Result<()> {
    if !leaderwatch.is_file() {
        return Err(Error::MissingTool {
            what: "leaderwatch (make build)",
            path: leaderwatch.to_path_buf(),
        });
    }
    let (repo, lw, dir) = (repo.to_path_buf(), leaderwatch.to_path_buf(), opts.dir.clone());
    let surge = opts.surge;
    crate::with_lab(opts, move |state| async move {
        deploy(&state, &repo).await?;
        let method = arg(&args, "--method").unwrap_or("evict").to_owned();
        // The rights beyond an eviction's are applied only for the methods that use them,
        // as a user would.
        if let Some(file) = extra_rights(&method) {
            kubectl(&state, &repo, &["apply", "-f", file]).await?;
        }
        if let Some(to) = &leader {
            move_leader(&state, &repo, to).await?;
        }
        let kc = dir.join("leaderwatch.kubeconfig");
        service_account_kubeconfig(&state, &repo, &kc).await?;
        let mut a: Vec<String> = vec![
            "measure".into(),
            "--kubeconfig".into(),
            kc.display().to_string(),
            "--reach".into(),
            "pod-ip".into(),
        ];
        if arg(&args, "--environment").is_none() {
            a.extend(["--environment".into(), environment()]);
        }
        let out = match arg(&args, "--out") {
            Some(o) => PathBuf::from(o),
            None => {
                let p = run_dir_name(&method, leader.as_deref(), arg(&args, "--target"), surge);
                a.extend(["--out".into(), p.display().to_string()]);
                p
            }
        };
        a.extend(args);
        let urls = pod_urls(&state, &repo).await?;
        println!("lw-lab: {} {}", lw.display(), a.join(" "));
        let mut child = tokio::process::Command::new(&lw)
            .args(&a)
            .current_dir(&repo)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::Command(format!("leaderwatch: {e}")))?;
        let run_dir = repo.join(&out);
        // The at-rest window is idle (T-056): the Go lockers start with the canaries.
        let events = run_dir.join("events.csv");
        let started = tokio::select! {
            st = child.wait() => Err(st),
            () = canaries_started(&events) => Ok(()),
        };
        let (st, lockers) = match started {
            Err(st) => (st, None),
            Ok(()) => {
                let lockers = GoLockers::start(&repo, &urls, &dir).await?;
                (child.wait().await, lockers)
            }
        };
        let st = st.map_err(|e| Error::Command(format!("leaderwatch: {e}")))?;
        if let Some(l) = lockers
            && run_dir.is_dir()
        {
            l.stop(&run_dir).await?;
            compare_locks(&run_dir)?;
        }
        print_report(&lw, &repo, &run_dir).await;
        match st.code() {
            Some(0) => Ok(()),
            c => Err(Error::Command(format!(
                "leaderwatch measure exited {}",
                c.map(|c| c.to_string()).unwrap_or_else(|| "by a signal".into())
            ))),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Time {
        chrono::DateTime::parse_from_rfc3339(s).expect("time")
    }

    #[test]
    fn the_gap_over_an_election_is_the_longest_that_overlaps_it_less_the_hold() {
        let g = [
            t("2026-12-05T10:00:00.000Z"),
            t("2026-12-05T10:00:00.150Z"),
            t("2026-12-05T10:00:02.150Z"), // 2.0 s: over the election
            t("2026-12-05T10:00:02.300Z"),
            t("2026-12-05T10:00:09.300Z"), // 7.0 s, but after it
        ];
        let (after, seen) = (t("2026-12-05T10:00:01.000Z"), t("2026-12-05T10:00:01.500Z"));
        let gap = unavailable_over(&g, after, seen).expect("a gap");
        assert!((gap - 1.9).abs() < 1e-9, "{gap}");
        assert_eq!(unavailable_over(&g[..2], after, seen), None, "no grant after it");
        let close = [t("2026-12-05T10:00:00.950Z"), t("2026-12-05T10:00:01.000Z")];
        assert_eq!(unavailable_over(&close, after, seen), Some(0.0), "never below 0");
    }
}
