//! `cargo bench --bench soak`: 100k rounds against a local 3-member cluster, back to back,
//! with this process's RSS (VmRSS) after the warm-up and every 10k rounds. Goal: growth
//! <= 1 MB (1,024 KiB). Appends its figure to $BENCH_SUMMARY when set. Rounds are health + Status RPC (the fast path); SOAK_FULL=1 adds /metrics,
//! SOAK_ROUNDS changes the count.

use std::sync::Arc;
use std::time::Instant;

use leaderwatch::analysis::counts::Window;
use leaderwatch::analysis::member_changes::Tracker;
use leaderwatch::io::local::{LocalCluster, LocalOptions};
use leaderwatch::io::probe::ProbeConfig;
use leaderwatch::io::round::{Sampler, probers};
use leaderwatch::model::clock::{Clock, SystemClock};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let rounds: u64 =
        std::env::var("SOAK_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let full = std::env::var("SOAK_FULL").is_ok_and(|v| v == "1");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let cluster = LocalCluster::start(LocalOptions::default()).await.expect("local etcd cluster (run `make deps`)");
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let cfg = ProbeConfig { with_metrics: full, ..ProbeConfig::default() };
        let mut sampler = Sampler::new(probers(&cluster.members(), &cfg, &clock).expect("probers"), clock.clone());
        // The same per-round work as `sample`, minus the CSV writes: counting and events.
        let mut window = Window::new();
        let mut tracker = Tracker::new();
        for _ in 0..1_000 {
            let r = sampler.round().await;
            window.push(&r.view());
        }
        let start = rss_kib();
        let t0 = Instant::now();
        println!("soak: {rounds} rounds ({}), RSS after warm-up {start} KiB", if full { "metrics+health+status" } else { "health+status" });
        for i in 1..=rounds {
            let r = sampler.round().await;
            for o in &r.observations {
                tracker.observe(o);
            }
            window.push(&r.view());
            if i % 10_000 == 0 {
                println!("  {i:>7} rounds  {:>6.0} s  RSS {} KiB", t0.elapsed().as_secs_f64(), rss_kib());
            }
        }
        let end = rss_kib();
        let growth = end as i64 - start as i64;
        println!("soak: RSS {start} -> {end} KiB, growth {growth} KiB over {rounds} rounds in {:.0} s (goal <= 1024 KiB)", t0.elapsed().as_secs_f64());
        if let Ok(path) = std::env::var("BENCH_SUMMARY") {
            use std::io::Write as _;
            let met = if growth <= 1024 { "met" } else { "NOT met" };
            let kind = if full { "metrics+health+status" } else { "health+status" };
            let line = format!("| RSS growth over a {rounds}-round soak ({kind}) | {growth} KiB ({start} -> {end}) | <= 1024 KiB | {met} |\n");
            let written = std::fs::OpenOptions::new().create(true).append(true).open(&path).and_then(|mut f| f.write_all(line.as_bytes()));
            if let Err(e) = written {
                eprintln!("bench: cannot append to {path}: {e}");
            }
        }
    });
}
