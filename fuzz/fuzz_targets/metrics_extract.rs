//! Fuzzes `metrics::extract`, the one function that reads a member's /metrics page: any
//! bytes must give a value or an error, never a panic, a hang or a non-finite number, and
//! the same whether fed whole or in chunks.
#![no_main]

// The extractor and the types it fills, not the whole crate: the fuzz build stays small.
#[path = "../../src/model/metrics.rs"]
pub mod model_metrics;
mod model {
    pub use super::model_metrics as metrics;
}
#[path = "../../src/io/metrics.rs"]
#[allow(dead_code)]
mod metrics;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = metrics::extract(data);
    // Fed in chunks, as the probe reads a page, it must say the same as fed whole.
    let mut e = metrics::Extractor::default();
    for chunk in data.chunks(1 + data.first().copied().unwrap_or(0) as usize) {
        e.feed(chunk);
    }
    assert_eq!(e.finish(), whole, "chunked and whole extraction differ");
    if let Ok(m) = whole {
        for v in [
            m.leader_changes_seen_total,
            m.process_start_time,
            m.heartbeat_send_failures_total,
            m.slow_apply_total,
            m.wal_fsync_sum,
            m.wal_fsync_count,
        ]
        .into_iter()
        .flatten()
        {
            assert!(v.is_finite(), "non-finite value {v} extracted");
        }
    }
});
