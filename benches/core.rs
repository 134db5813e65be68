//! `cargo bench --bench core`: what the measuring core costs, in a release build.
//! 1. `/metrics` extraction on a real etcd 3.6.14 page (the version the deployment and the
//!    local members run; docs/benchmarks.md's extraction figures were measured on the 3.5.1 page,
//!    160 KB against this one's 170 KB): full prometheus-parse vs the filtered path
//!    leaderwatch uses.
//! 2. One round (metrics + health + Status RPC per member, and without metrics) against
//!    real local clusters of 3, 5 and 7 members: CPU of this process per round, latency.
//!
//! CPU is getrusage(RUSAGE_SELF) user+sys, so it includes tokio and TLS-free HTTP/gRPC.
//! Goals: the cost per member flat from 3 to 7 members (7-member cost per member within
//! 1.2x of the 3-member one). Appends its figures to $BENCH_SUMMARY when set.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaderwatch::io::local::{LocalCluster, LocalOptions};
use leaderwatch::io::metrics::extract;
use leaderwatch::io::probe::ProbeConfig;
use leaderwatch::io::round::{Sampler, probers};
use leaderwatch::model::clock::{Clock, SystemClock};
use nix::sys::resource::{UsageWho, getrusage};

/// The whole page through prometheus-parse: the general parser, for comparison.
fn parse_full_page(text: &str) -> usize {
    let lines = text.lines().map(|l| Ok::<_, std::io::Error>(l.to_owned()));
    prometheus_parse::Scrape::parse(lines).map(|s| s.samples.len()).unwrap_or(0)
}

fn cpu() -> Duration {
    let u = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let t =
        |tv: nix::sys::time::TimeVal| Duration::new(tv.tv_sec() as u64, tv.tv_usec() as u32 * 1000);
    t(u.user_time()) + t(u.system_time())
}

fn per_call(label: &str, n: u32, f: impl Fn()) {
    let (c0, t0) = (cpu(), Instant::now());
    for _ in 0..n {
        f();
    }
    let (wall, c) = (t0.elapsed() / n, (cpu() - c0) / n);
    println!(
        "{label:<44} {:>10.3} ms wall {:>10.3} ms CPU  (n={n})",
        wall.as_secs_f64() * 1e3,
        c.as_secs_f64() * 1e3
    );
}

fn main() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/metrics-etcd-3.6.14.txt"
    ))
    .expect("fixture page");
    println!(
        "extraction on a real etcd 3.6.14 /metrics page ({} bytes, {} lines)",
        page.len(),
        page.lines().count()
    );
    per_call("full prometheus-parse of the page", 200, || {
        std::hint::black_box(parse_full_page(std::hint::black_box(&page)));
    });
    per_call("leaderwatch extract (filtered, 8 families)", 2000, || {
        let _ = std::hint::black_box(extract(std::hint::black_box(&page)));
    });

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut per_member: Vec<(usize, &str, f64)> = Vec::new();
    rt.block_on(async {
        for members in [3usize, 5, 7] {
            let cluster = LocalCluster::start(LocalOptions { members, ..LocalOptions::default() })
                .await
                .expect("local etcd cluster (run `make deps`)");
            let clock: Arc<dyn Clock> = Arc::new(SystemClock);
            for (label, with_metrics) in [("full", true), ("fast", false)] {
                let cfg = ProbeConfig { with_metrics, ..ProbeConfig::default() };
                let mut sampler = Sampler::new(probers(&cluster.members(), &cfg, &clock).expect("probers"), clock.clone());
                for _ in 0..20 {
                    sampler.round().await; // warm up connections
                }
                let n = 300u32;
                let mut lat = Vec::with_capacity(n as usize);
                let c0 = cpu();
                for _ in 0..n {
                    let t = Instant::now();
                    let r = sampler.round().await;
                    lat.push(t.elapsed());
                    assert!(r.observations.iter().all(|o| o.reachable()), "a member did not answer");
                }
                let c = (cpu() - c0) / n;
                lat.sort();
                let q = |p: f64| lat[((lat.len() as f64 - 1.0) * p) as usize].as_secs_f64() * 1e3;
                let ms = c.as_secs_f64() * 1e3;
                println!(
                    "{members}-member {label} round {ms:>8.3} ms CPU/round, {:.3} ms per member  latency p50 {:.2} ms p99 {:.2} ms (n={n})",
                    ms / members as f64,
                    q(0.5),
                    q(0.99)
                );
                per_member.push((members, label, ms / members as f64));
            }
        }
    });
    summary(&per_member);
}

/// The flatness of the cost per member, 3 -> 7 members, into $BENCH_SUMMARY.
fn summary(per_member: &[(usize, &str, f64)]) {
    let Ok(path) = std::env::var("BENCH_SUMMARY") else { return };
    let mut lines = String::new();
    for label in ["full", "fast"] {
        let at = |n: usize| {
            per_member.iter().find(|(m, l, _)| *m == n && *l == label).map(|(_, _, c)| *c)
        };
        if let (Some(c3), Some(c7)) = (at(3), at(7)) {
            let ratio = c7 / c3;
            let met = if ratio <= 1.2 { "met" } else { "NOT met" };
            lines.push_str(&format!(
                "| CPU per member of a {label} round, 7 members / 3 members (core bench, probes only) | {ratio:.2} ({c7:.3} / {c3:.3} ms) | flat: <= 1.2 | {met} |\n"
            ));
        }
    }
    use std::io::Write as _;
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(lines.as_bytes()));
    if let Err(e) = written {
        eprintln!("bench: cannot append to {path}: {e}");
    }
}
