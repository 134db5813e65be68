//! Shared test helpers: a real local etcd cluster (one at a time, so that CPU contention
//! between clusters cannot cause elections), and readers for the run directory.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use leaderwatch::clock::{Clock, SystemClock};
use leaderwatch::local::{LocalCluster, LocalOptions};
use leaderwatch::probe::ProbeConfig;
use leaderwatch::sample::{self, SampleConfig};
use leaderwatch::summary::Summary;
use tokio::sync::{oneshot, Mutex, MutexGuard};
use tokio::task::JoinHandle;

static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// A started 3-member cluster and the guard that keeps other tests' clusters away.
pub struct Fixture {
    pub cluster: LocalCluster,
    pub out: tempfile::TempDir,
    _guard: MutexGuard<'static, ()>,
}

/// Holds off every other cluster of this test binary while alive.
pub async fn one_cluster_at_a_time() -> MutexGuard<'static, ()> {
    ONE_CLUSTER_AT_A_TIME.lock().await
}

pub async fn cluster() -> Fixture {
    let guard = one_cluster_at_a_time().await;
    let cluster = LocalCluster::start(LocalOptions::default()).await.unwrap_or_else(|e| panic!("local etcd cluster: {e}"));
    let out = tempfile::tempdir().expect("tempdir");
    Fixture { cluster, out, _guard: guard }
}

/// A sampler running in the background until [`Running::stop`].
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<leaderwatch::Result<Summary>>,
}

impl Running {
    pub async fn stop(mut self) -> Summary {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.task.await.expect("sampler task").unwrap_or_else(|e| panic!("sampler failed: {e}"))
    }
}

pub fn start_sampler(f: &Fixture, interval: Duration, timeout: Duration) -> Running {
    let cfg = SampleConfig {
        members: f.cluster.members(),
        interval,
        duration: None,
        out: f.out.path().to_owned(),
        probe: ProbeConfig { timeout, ..ProbeConfig::default() },
    };
    let (tx, rx) = oneshot::channel::<()>();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let task = tokio::spawn(sample::run(cfg, clock, async move {
        let _ = rx.await;
    }));
    Running { stop: Some(tx), task }
}

/// samples.csv as maps from column name to value.
pub fn samples(dir: &Path) -> Vec<std::collections::HashMap<String, String>> {
    read_csv(&dir.join("samples.csv"))
}

pub fn events(dir: &Path) -> Vec<std::collections::HashMap<String, String>> {
    read_csv(&dir.join("events.csv"))
}

fn read_csv(p: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_path(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let headers = r.headers().expect("header").clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap_or_else(|e| panic!("{}: unparseable row: {e}", p.display()));
            headers.iter().zip(rec.iter()).map(|(h, v)| (h.to_owned(), v.to_owned())).collect()
        })
        .collect()
}

pub async fn sleep(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// The rows of one member, in file order.
pub fn sample_rows_for<'a>(
    rows: &'a [std::collections::HashMap<String, String>],
    member: &str,
) -> Vec<&'a std::collections::HashMap<String, String>> {
    rows.iter().filter(|r| r["member"] == member).collect()
}
pub mod fake_api;
pub mod fake_member;
