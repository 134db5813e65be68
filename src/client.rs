//! What the canary's ops say about a window, pure: per kind (write, read) the ops, the
//! failures, the availability, latency quantiles and the longest unavailability. No I/O,
//! no clock: the ops bring their own time.
//!
//! **Longest unavailability**: the longest interval from the completion of one successful
//! op to the completion of the next successful op of the same kind, minus the cadence (one
//! cadence is the normal spacing), never below 0. The first interval starts when the canary
//! started: before that nothing was measured. Defined in docs/counting.md.

use serde::{Deserialize, Serialize};

use crate::canary::{Kind, Op};
use crate::clock::Stamp;

/// The figures of one kind of op over one window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KindFigures {
    pub ops: u64,
    pub failures: u64,
    /// Successful ops / ops; null without ops.
    pub availability: Option<f64>,
    /// Latency of the successful ops, nearest rank; null without one.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// See the module header; null until a successful op completed in the window.
    pub longest_unavailable_s: Option<f64>,
}

/// `windows[].client` in baseline.json.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientFigures {
    pub write: KindFigures,
    pub read: KindFigures,
}

/// Nearest-rank quantile of `sorted` (ascending): the smallest value with at least
/// `q × n` values at or below it.
pub fn nearest_rank(q: f64, sorted: &[f64]) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// The longest unavailability from the completions (seconds, ascending) of the successful
/// ops, the first interval starting at `from`. `None` without a successful op.
pub fn longest_unavailable(from: f64, ok_done: &[f64], cadence: f64) -> Option<f64> {
    let mut prev = from;
    let mut longest: Option<f64> = None;
    for &t in ok_done {
        let gap = (t - prev - cadence).max(0.0);
        longest = Some(longest.map_or(gap, |l: f64| l.max(gap)));
        prev = t;
    }
    longest
}

/// The write unavailability that overlaps `[after, until]`: the longest gap between
/// consecutive successful writes (`oks`, completion instants in order; the first gap
/// starts at the canary's start `from`) that overlaps it, minus the cadence. `None` when
/// the canary started after `until`, or no successful write closed such a gap yet.
pub fn unavailable_over(from: Stamp, oks: &[Stamp], after: Stamp, until: Stamp, cadence_s: f64) -> Option<f64> {
    if from.mono > until.mono {
        return None;
    }
    let mut prev = from;
    let mut worst: Option<f64> = None;
    for t in oks {
        if prev.mono > until.mono {
            break; // every later gap starts after the election
        }
        if t.mono >= after.mono {
            let gap = (prev.secs_to(t) - cadence_s).max(0.0);
            worst = Some(worst.map_or(gap, |w: f64| w.max(gap)));
        }
        prev = *t;
    }
    worst
}

/// One kind over one window, folded op by op.
#[derive(Debug, Clone, Default)]
struct KindFold {
    ops: u64,
    failures: u64,
    latencies_ms: Vec<f64>,
    /// Completion of the last successful op (or the canary's start): where the next
    /// interval begins, carried across windows.
    last_ok: Option<Stamp>,
    longest: Option<f64>,
}

impl KindFold {
    fn push(&mut self, op: &Op, cadence: f64) {
        self.ops += 1;
        if !op.ok {
            self.failures += 1;
            return;
        }
        self.latencies_ms.push(op.latency_ms());
        if let Some(prev) = self.last_ok {
            let gap = (prev.secs_to(&op.done) - cadence).max(0.0);
            self.longest = Some(self.longest.map_or(gap, |l| l.max(gap)));
        }
        self.last_ok = Some(op.done);
    }

    fn figures(&self) -> KindFigures {
        let mut sorted = self.latencies_ms.clone();
        sorted.sort_by(f64::total_cmp);
        KindFigures {
            ops: self.ops,
            failures: self.failures,
            availability: (self.ops > 0).then(|| (self.ops - self.failures) as f64 / self.ops as f64),
            p50_ms: nearest_rank(0.5, &sorted),
            p99_ms: nearest_rank(0.99, &sorted),
            max_ms: sorted.last().copied(),
            longest_unavailable_s: self.longest,
        }
    }
}

/// Both kinds over one window.
#[derive(Debug, Clone, Default)]
pub struct ClientFold {
    cadence_s: f64,
    write: KindFold,
    read: KindFold,
}

impl ClientFold {
    pub fn new(cadence_s: f64) -> Self {
        ClientFold { cadence_s, ..Self::default() }
    }

    /// The canary started at `at`, one op of each kind every `cadence_s`: the first
    /// interval of each kind begins there.
    pub fn started(&mut self, at: Stamp, cadence_s: f64) {
        self.cadence_s = cadence_s;
        self.write.last_ok.get_or_insert(at);
        self.read.last_ok.get_or_insert(at);
    }

    pub fn push(&mut self, op: &Op) {
        let c = self.cadence_s;
        match op.kind {
            Kind::Write => self.write.push(op, c),
            Kind::Read => self.read.push(op, c),
        }
    }

    /// Ops seen in this window.
    pub fn ops(&self) -> u64 {
        self.write.ops + self.read.ops
    }

    /// The next window's fold: the intervals continue from the last successful ops.
    pub fn continue_from(&self) -> ClientFold {
        let mut next = ClientFold::new(self.cadence_s);
        next.write.last_ok = self.write.last_ok;
        next.read.last_ok = self.read.last_ok;
        next
    }

    /// The figures, or `None` when no op fell in the window (the canary was off).
    pub fn figures(&self) -> Option<ClientFigures> {
        (self.ops() > 0).then(|| ClientFigures { write: self.write.figures(), read: self.read.figures() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_unavailable_is_the_widest_gap_between_successes_minus_the_cadence() {
        // Successes every 0.1 s, then none from 1.0 to 2.5 s.
        let mut done: Vec<f64> = (1..=10).map(|i| f64::from(i) * 0.1).collect();
        done.extend([2.5, 2.6]);
        let l = longest_unavailable(0.0, &done, 0.1).expect("successes");
        assert!((l - 1.4).abs() < 1e-9, "{l}");
        // Evenly spaced at the cadence: available throughout.
        assert_eq!(longest_unavailable(0.0, &[0.1, 0.2, 0.3], 0.1).map(|l| (l * 1e9).round()), Some(0.0));
        // The first interval starts with the canary: a run that begins unavailable counts.
        assert!((longest_unavailable(0.0, &[2.0], 0.1).expect("one") - 1.9).abs() < 1e-9);
        assert_eq!(longest_unavailable(0.0, &[], 0.1), None);
    }

    #[test]
    fn the_unavailability_around_an_election_is_the_gap_that_overlaps_it() {
        let base = tokio::time::Instant::now();
        let at = |s: f64| Stamp { utc: chrono::DateTime::<chrono::Utc>::default(), mono: base + std::time::Duration::from_secs_f64(s) };
        let oks: Vec<Stamp> = [0.1, 0.2, 0.3, 1.8, 1.9].into_iter().map(at).collect();
        // The election between 0.5 and 1.5 s falls in the gap 0.3 -> 1.8.
        let u = unavailable_over(at(0.0), &oks, at(0.5), at(1.5), 0.1).expect("overlaps");
        assert!((u - 1.4).abs() < 1e-9, "{u}");
        // Writes kept succeeding around a hand-over: 0.
        assert_eq!(unavailable_over(at(0.0), &oks, at(0.15), at(0.25), 0.1).map(|u| (u * 1e9).round()), Some(0.0));
        // The canary started after the election: not measured.
        assert_eq!(unavailable_over(at(2.0), &oks, at(0.5), at(1.5), 0.1), None);
        // No success since: the gap is still open.
        assert_eq!(unavailable_over(at(0.0), &oks, at(2.0), at(2.5), 0.1), None);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(0.5, &v), Some(50.0));
        assert_eq!(nearest_rank(0.99, &v), Some(99.0));
        assert_eq!(nearest_rank(1.0, &v), Some(100.0));
        assert_eq!(nearest_rank(0.99, &[7.0]), Some(7.0));
        assert_eq!(nearest_rank(0.5, &[]), None);
    }
}
