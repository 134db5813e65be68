//! What the canary's ops say about a window, pure: per kind (write, read) the ops, the
//! failures, the availability, latency quantiles and the longest unavailability, twice:
//! over every op (the cluster) and over the ops a one-in-flight client would have sent
//! (src/io/canary.rs). No I/O, no clock: the ops bring their own time.
//!
//! **Longest unavailability**: the longest interval from the completion of one successful
//! op to the completion of the next successful op of the same kind, minus the cadence (one
//! cadence is the normal spacing), never below 0. The first interval starts when the canary
//! started: before that nothing was measured. Defined in docs/counting.md.

use std::collections::VecDeque;

use crate::model::canary::{ClientFigures, Kind, KindFigures, Op};
use crate::model::clock::Stamp;

/// The unavailability between two successful completions: their distance minus the
/// cadence (one cadence apart is normal), never below 0. The one formula of this file.
fn gap(prev: &Stamp, done: &Stamp, cadence_s: f64) -> f64 {
    (prev.secs_to(done) - cadence_s).max(0.0)
}

/// The gaps between successive successful completions, minus the cadence.
#[derive(Debug, Clone, Copy, Default)]
struct Gaps {
    /// Completion of the last success (or the canary's start): where the next gap begins.
    last_ok: Option<Stamp>,
    longest: Option<f64>,
}

impl Gaps {
    fn ok(&mut self, done: Stamp, cadence: f64) {
        if let Some(prev) = self.last_ok {
            let g = gap(&prev, &done, cadence);
            self.longest = Some(self.longest.map_or(g, |l| l.max(g)));
        }
        // Ops in flight together can be reported a hair out of order: keep the latest.
        if self.last_ok.is_none_or(|p| done.mono >= p.mono) {
            self.last_ok = Some(done);
        }
    }

    /// The next window's: the gaps continue from the last success.
    fn continued(&self) -> Gaps {
        Gaps { last_ok: self.last_ok, longest: None }
    }
}

/// The recent successful writes (completions, in order) from the canary's start, for the
/// cost of each election: the gap between successes that overlaps it.
#[derive(Debug, Clone)]
pub struct WriteTrail {
    /// Where the first gap kept starts: the canary's start, or the newest write dropped.
    from: Stamp,
    oks: VecDeque<Stamp>,
    /// Writes from here on are never trimmed: a sitting's waterfall asks for the first
    /// one after the member was lost, which may be long before the sitting ends.
    held_from: Option<Stamp>,
}

impl WriteTrail {
    pub fn new(from: Stamp) -> Self {
        WriteTrail { from, oks: VecDeque::new(), held_from: None }
    }

    /// Keeps every write completed after `at` (see `held_from`).
    pub fn hold_from(&mut self, at: Stamp) {
        self.held_from = Some(at);
    }

    /// The first successful write completed after `t`, if it is still kept.
    pub fn first_after(&self, t: Stamp) -> Option<Stamp> {
        self.oks.iter().find(|w| w.mono > t.mono).copied()
    }

    /// A successful write completed at `done` (in any order).
    pub fn push(&mut self, done: Stamp) {
        let at = self.oks.partition_point(|t| t.mono <= done.mono);
        self.oks.insert(at, done);
    }

    /// Forgets writes more than `keep_s` before the newest; the last one forgotten starts
    /// the first gap kept.
    pub fn trim(&mut self, keep_s: f64) {
        let Some(newest) = self.oks.back().copied() else { return };
        let held = |t: &Stamp| self.held_from.is_some_and(|h| t.mono > h.mono);
        while self.oks.len() > 1
            && self.oks.front().is_some_and(|t| t.secs_to(&newest) > keep_s && !held(t))
        {
            if let Some(old) = self.oks.pop_front()
                && old.mono > self.from.mono
            {
                self.from = old;
            }
        }
    }

    /// The write unavailability that overlaps `[after, until]`: the longest gap between
    /// consecutive successful writes that overlaps it, minus the cadence. `None` when the
    /// canary started after `until`, or no successful write closed such a gap yet.
    pub fn unavailable_over(&self, after: Stamp, until: Stamp, cadence_s: f64) -> Option<f64> {
        if self.from.mono > until.mono {
            return None;
        }
        let mut prev = self.from;
        let mut worst: Option<f64> = None;
        for t in &self.oks {
            if prev.mono > until.mono {
                break; // every later gap starts after the election
            }
            if t.mono >= after.mono {
                let g = gap(&prev, t, cadence_s);
                worst = Some(worst.map_or(g, |w: f64| w.max(g)));
            }
            prev = *t;
        }
        worst
    }
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

/// One kind over one window, folded op by op.
#[derive(Debug, Clone, Default)]
struct KindFold {
    ops: u64,
    failures: u64,
    latencies_ms: Vec<f64>,
    all: Gaps,
    one_in_flight: Gaps,
}

impl KindFold {
    fn push(&mut self, op: &Op, cadence: f64) {
        self.ops += 1;
        if !op.ok {
            self.failures += 1;
            return;
        }
        self.latencies_ms.push(op.latency_ms());
        self.all.ok(op.done, cadence);
        if op.one_in_flight {
            self.one_in_flight.ok(op.done, cadence);
        }
    }

    fn started(&mut self, at: Stamp) {
        self.all.last_ok.get_or_insert(at);
        self.one_in_flight.last_ok.get_or_insert(at);
    }

    fn continued(&self) -> KindFold {
        KindFold {
            all: self.all.continued(),
            one_in_flight: self.one_in_flight.continued(),
            ..KindFold::default()
        }
    }

    fn figures(&self) -> KindFigures {
        let mut sorted = self.latencies_ms.clone();
        sorted.sort_by(f64::total_cmp);
        KindFigures {
            ops: self.ops,
            failures: self.failures,
            availability: (self.ops > 0)
                .then(|| (self.ops - self.failures) as f64 / self.ops as f64),
            p50_ms: nearest_rank(0.5, &sorted),
            p99_ms: nearest_rank(0.99, &sorted),
            max_ms: sorted.last().copied(),
            longest_unavailable_s: self.all.longest,
            one_in_flight_longest_unavailable_s: self.one_in_flight.longest,
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
        self.write.started(at);
        self.read.started(at);
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
        ClientFold {
            cadence_s: self.cadence_s,
            write: self.write.continued(),
            read: self.read.continued(),
        }
    }

    /// The figures, or `None` when no op fell in the window (the canary was off).
    pub fn figures(&self) -> Option<ClientFigures> {
        (self.ops() > 0)
            .then(|| ClientFigures { write: self.write.figures(), read: self.read.figures() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: f64) -> Stamp {
        use std::sync::OnceLock;
        static BASE: OnceLock<tokio::time::Instant> = OnceLock::new();
        let base = *BASE.get_or_init(tokio::time::Instant::now);
        Stamp {
            utc: chrono::DateTime::<chrono::Utc>::default(),
            mono: base + std::time::Duration::from_secs_f64(s),
        }
    }

    fn write(started: f64, done: f64, ok: bool, one_in_flight: bool) -> Op {
        Op {
            kind: Kind::Write,
            due: at(started),
            started: at(started),
            done: at(done),
            ok,
            error: String::new(),
            member_id: 0,
            one_in_flight,
        }
    }

    #[test]
    fn longest_unavailable_is_the_widest_gap_between_successes_minus_the_cadence() {
        let longest = |done: &[f64]| {
            let mut f = ClientFold::new(0.1);
            f.started(at(0.0), 0.1);
            for &d in done {
                f.push(&write(d - 0.01, d, true, true));
            }
            f.figures().map(|c| c.write.longest_unavailable_s)
        };
        // Successes every 0.1 s, then none from 1.0 to 2.5 s.
        let mut done: Vec<f64> = (1..=10).map(|i| f64::from(i) * 0.1).collect();
        done.extend([2.5, 2.6]);
        let l = longest(&done).flatten().expect("successes");
        assert!((l - 1.4).abs() < 1e-9, "{l}");
        // Evenly spaced at the cadence: available throughout.
        assert_eq!(longest(&[0.1, 0.2, 0.3]).flatten().map(|l| (l * 1e9).round()), Some(0.0));
        // The first interval starts with the canary: a run that begins unavailable counts.
        assert!((longest(&[2.0]).flatten().expect("one") - 1.9).abs() < 1e-9);
        assert_eq!(longest(&[]), None);
    }

    #[test]
    fn one_in_flight_counts_only_the_ops_such_a_client_sends() {
        // Ticks every 0.1 s. The one-in-flight client's write at 1.0 hangs to its 1 s
        // deadline; the cluster takes writes again at 1.3, which the overlapping ops see at
        // 1.31, the one-in-flight client only with its next op after 2.0.
        let mut f = ClientFold::new(0.1);
        f.started(at(0.0), 0.1);
        for i in 1..=9 {
            let t = f64::from(i) * 0.1;
            f.push(&write(t, t + 0.01, true, true));
        }
        f.push(&write(1.0, 2.0, false, true));
        f.push(&write(1.1, 1.2, false, false));
        f.push(&write(1.2, 1.25, false, false));
        for i in 13..=20 {
            let t = f64::from(i) * 0.1;
            f.push(&write(t, t + 0.01, true, false));
        }
        f.push(&write(2.1, 2.11, true, true));
        let w = f.figures().expect("ops").write;
        assert!(
            (w.longest_unavailable_s.expect("all") - (1.31 - 0.91 - 0.1)).abs() < 1e-9,
            "{w:?}"
        );
        assert!(
            (w.one_in_flight_longest_unavailable_s.expect("one") - (2.11 - 0.91 - 0.1)).abs()
                < 1e-9,
            "{w:?}"
        );
        assert_eq!((w.ops, w.failures), (21, 3));
    }

    #[test]
    fn the_unavailability_around_an_election_is_the_gap_that_overlaps_it() {
        let trail = |from: f64| {
            let mut t = WriteTrail::new(at(from));
            // Out of order, as ops in flight together may finish.
            for d in [0.1, 0.3, 0.2, 1.8, 1.9] {
                t.push(at(d));
            }
            t
        };
        let oks = trail(0.0);
        // The election between 0.5 and 1.5 s falls in the gap 0.3 -> 1.8.
        let u = oks.unavailable_over(at(0.5), at(1.5), 0.1).expect("overlaps");
        assert!((u - 1.4).abs() < 1e-9, "{u}");
        // Writes kept succeeding around a hand-over: 0.
        assert_eq!(
            oks.unavailable_over(at(0.15), at(0.25), 0.1).map(|u| (u * 1e9).round()),
            Some(0.0)
        );
        // The canary started after the election: not measured.
        assert_eq!(trail(2.0).unavailable_over(at(0.5), at(1.5), 0.1), None);
        // No success since: the gap is still open.
        assert_eq!(oks.unavailable_over(at(2.0), at(2.5), 0.1), None);
        // Trimmed: the newest write forgotten starts the first gap kept.
        let mut t = trail(0.0);
        t.trim(1.0);
        let u = t.unavailable_over(at(0.5), at(1.5), 0.1).expect("kept");
        assert!((u - 1.4).abs() < 1e-9, "{u}");
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
