//! `--metrics-addr` on a real local cluster: `leaderwatch_elections_total` against the
//! raft term etcd itself reports, across a leader SIGKILL and restart; the exposition
//! against a strict OpenMetrics parser (Python prometheus_client); a real Prometheus
//! (Debian's package) scraping it and answering a query. The last two need tools that
//! `make deps` installs, so they are #[ignore]d here and run by `make test`.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{cluster, events, leaderwatch, repo, sample_config, sleep, start_sampler_with};

/// The address `--metrics-addr` bound, from its `metrics_serving` row in events.csv.
async fn metrics_url(dir: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(e) = dir
            .join("events.csv")
            .exists()
            .then(|| events(dir))
            .and_then(|ev| ev.into_iter().find(|e| e["kind"] == "metrics_serving"))
        {
            return e["detail"].clone();
        }
        assert!(Instant::now() < deadline, "no metrics_serving event in {}", dir.display());
        sleep(50).await;
    }
}

async fn get(url: &str) -> (u16, String, String) {
    let c = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("client");
    let r = c.get(url).send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = r.status().as_u16();
    let ctype = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (status, ctype, r.text().await.expect("body"))
}

/// Every sample line of the exposition: series (name and labels) -> value.
fn series(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            l.rsplit_once(' ').and_then(|(s, v)| v.parse().ok().map(|v| (s.to_owned(), v)))
        })
        .collect()
}

fn sum(s: &BTreeMap<String, f64>, prefix: &str) -> f64 {
    s.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, v)| v).sum()
}

/// The highest raft term any member reports, asked of etcd directly.
async fn etcd_term(f: &support::Fixture) -> u64 {
    let mut best = 0;
    for m in f.cluster.members() {
        let Ok(Ok(mut c)) = tokio::time::timeout(
            Duration::from_secs(2),
            etcd_client::Client::connect([m.url.as_str()], None),
        )
        .await
        else {
            continue;
        };
        if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_secs(2), c.status()).await {
            best = best.max(s.raft_term());
        }
    }
    best
}

/// Scrapes until `ok` holds (the sampler needs a round or two to see a change).
async fn scrape_until(
    url: &str,
    what: &str,
    ok: impl Fn(&BTreeMap<String, f64>) -> bool,
) -> BTreeMap<String, f64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = series(&get(url).await.2);
        if ok(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}: not within 30 s; last scrape {s:?}");
        sleep(100).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elections_total_moves_by_the_raft_term_across_a_leader_sigkill_and_restart() {
    let mut f = cluster().await;
    let mut cfg = sample_config(&f, Duration::from_millis(200), Duration::from_secs(1));
    cfg.metrics_addr = Some("127.0.0.1:0".parse().expect("addr"));
    let run = start_sampler_with(cfg, std::sync::Arc::new(leaderwatch::model::clock::SystemClock));
    let url = metrics_url(f.out.path()).await;

    let leader = f.cluster.wait_leader(Duration::from_secs(10)).await.expect("a leader");
    let term0 = etcd_term(&f).await;
    let before = scrape_until(&url, "every member up at the first term", |s| {
        sum(s, "leaderwatch_member_up{") == 3.0
            && s.get("leaderwatch_raft_term") == Some(&(term0 as f64))
            && sum(s, "leaderwatch_member_leader_changes_seen{") >= 3.0
    })
    .await;

    f.cluster.kill(leader).await.expect("SIGKILL the leader");
    f.cluster.wait_leader(Duration::from_secs(15)).await.expect("a new leader");
    f.cluster.restart(leader).expect("restart the old leader");
    f.cluster.wait_healthy(Duration::from_secs(30)).await.expect("healthy again");
    let term1 = etcd_term(&f).await;
    assert!(term1 > term0, "the SIGKILL caused an election (term {term0} -> {term1})");
    // The sampler has seen the new term and every member; then a few more rounds, so
    // that every counter read is one taken after the restart.
    scrape_until(&url, "the new term and three members up", |s| {
        sum(s, "leaderwatch_member_up{") == 3.0
            && s.get("leaderwatch_raft_term") == Some(&(term1 as f64))
    })
    .await;
    sleep(600).await;
    let after = series(&get(&url).await.2);
    let term1 = etcd_term(&f).await;
    assert_eq!(
        after.get("leaderwatch_raft_term"),
        Some(&(term1 as f64)),
        "no further election while reading"
    );
    run.stop().await;

    let elections = after["leaderwatch_elections_total"] - before["leaderwatch_elections_total"];
    assert_eq!(
        elections,
        (term1 - term0) as f64,
        "elections_total moved by exactly the raft term delta"
    );
    let raw = sum(&after, "leaderwatch_member_leader_changes_seen{")
        - sum(&before, "leaderwatch_member_leader_changes_seen{");
    // One new leader: each surviving follower's counter +1 and the restarted member
    // counts from 1 again, so the summed raw counter moves by more than one election.
    // (A split vote adds a term no counter sees; then the two can be equal.)
    if term1 - term0 == 1 {
        assert!(raw > elections, "raw counters moved by {raw}, elections by {elections}");
    } else {
        assert!(raw >= 2.0, "raw counters moved by {raw}");
    }
    let up: Vec<_> =
        after.keys().filter(|k| k.starts_with("leaderwatch_member_is_leader{")).collect();
    assert_eq!(up.len(), 3, "one is_leader series per member: {up:?}");
    assert_eq!(sum(&after, "leaderwatch_member_is_leader{"), 1.0, "exactly one leader");
}

/// `leaderwatch sample --metrics-addr 127.0.0.1:0 --canary` for `secs`, as a user runs it.
fn spawn_sample(f: &support::Fixture, secs: u32) -> Child {
    let mut c = leaderwatch();
    c.args([
        "sample",
        "--interval",
        "200ms",
        "--canary",
        "--metrics-addr",
        "127.0.0.1:0",
        "--duration",
        &format!("{secs}s"),
        "--out",
    ])
    .arg(f.out.path());
    for m in f.cluster.members() {
        c.args(["--endpoint", &format!("{}={}", m.name, m.url)]);
    }
    c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn leaderwatch sample")
}

/// Runs the strict OpenMetrics parser of Python's prometheus_client over `text`; returns
/// its verdict (the family names, or the parser's error).
fn openmetrics_parse(text: &str) -> Result<Vec<String>, String> {
    let py = repo(".tools/venv/bin/python");
    assert!(py.exists(), "{} missing: run make deps", py.display());
    let script = "import sys\nfrom prometheus_client.openmetrics.parser import text_string_to_metric_families as p\nfor f in p(sys.stdin.read()):\n    print(f.name, f.type, len(f.samples))\n";
    let mut child = Command::new(py)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    use std::io::Write;
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("python output");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or_default().to_owned())
    }
}

/// A Prometheus that is killed when dropped.
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs .tools/venv (prometheus_client) and Debian's prometheus; make test runs it"]
async fn exposition_is_strict_openmetrics_and_a_real_prometheus_scrapes_and_queries_it() {
    let f = cluster().await;
    let child = spawn_sample(&f, 40);
    let url = metrics_url(f.out.path()).await;
    scrape_until(&url, "a round with the canary", |s| {
        sum(s, "leaderwatch_canary_ops_total{") > 0.0
            && s.contains_key("leaderwatch_elections_total")
    })
    .await;
    let (status, ctype, body) = get(&url).await;
    assert_eq!(status, 200);
    assert_eq!(ctype, leaderwatch::io::exporter::CONTENT_TYPE);

    assert_strict_openmetrics(&body);
    // /healthz answers while rounds are recorded.
    let health = url.replace("/metrics", "/healthz");
    assert_eq!(get(&health).await.0, 200);
    a_real_prometheus_scrapes_and_queries(&url).await;
    let mut child = child;
    let _ = child.kill();
    let _ = child.wait();
}

/// The exposition parses as strict OpenMetrics (the reference parser) and has every family.
fn assert_strict_openmetrics(body: &str) {
    let families =
        openmetrics_parse(body).unwrap_or_else(|e| panic!("not valid OpenMetrics: {e}\n{body}"));
    for want in [
        "leaderwatch_elections counter",
        "leaderwatch_leader_transitions counter",
        "leaderwatch_member_up gauge",
        "leaderwatch_member_healthy gauge",
        "leaderwatch_member_is_leader gauge",
        "leaderwatch_raft_term gauge",
        "leaderwatch_member_leader_changes_seen gauge",
        "leaderwatch_round_duration_seconds histogram",
        "leaderwatch_canary_ops counter",
        "leaderwatch_canary_latency_seconds histogram",
    ] {
        assert!(
            families.iter().any(|l| l.starts_with(&format!("{want} "))),
            "{want} in {families:?}"
        );
    }
    // Negative control: the parser is strict (no `# EOF`, a counter without _total).
    assert!(
        openmetrics_parse(body.trim_end().trim_end_matches("# EOF")).is_err(),
        "accepted an exposition without # EOF"
    );
    assert!(
        openmetrics_parse("# TYPE x counter\nx 1\n# EOF\n").is_err(),
        "accepted a counter sample without _total"
    );
}

/// A real Prometheus scrapes `url` every second and answers queries on what it scraped.
async fn a_real_prometheus_scrapes_and_queries(url: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = url.trim_start_matches("http://").trim_end_matches("/metrics");
    std::fs::write(
        dir.path().join("prometheus.yml"),
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: leaderwatch\n    static_configs:\n      - targets: ['{target}']\n"),
    )
    .expect("config");
    let port = free_port();
    let _prom = Prometheus(
        Command::new("prometheus")
            .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian package; make deps installs it)"),
    );
    let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().expect("client");
    let query = |q: &str| {
        let req = http.get(format!("http://127.0.0.1:{port}/api/v1/query?query={q}"));
        async move {
            let text = req.send().await.ok()?.text().await.ok()?;
            serde_json::from_str::<serde_json::Value>(&text).ok()
        }
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let result = loop {
        if let Some(v) = query("leaderwatch_elections_total").await
            && v["data"]["result"].as_array().is_some_and(|a| !a.is_empty())
        {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not answer leaderwatch_elections_total within 30 s"
        );
        sleep(250).await;
    };
    let sample = &result["data"]["result"][0];
    assert_eq!(sample["metric"]["job"], "leaderwatch");
    assert_eq!(sample["value"][1], "0", "no election while sampling: {result}");
    let up = query("sum(leaderwatch_member_up)").await.expect("sum(leaderwatch_member_up)");
    assert_eq!(up["data"]["result"][0]["value"][1], "3", "{up}");
}
