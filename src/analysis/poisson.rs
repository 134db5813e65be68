//! The exact (Garwood) confidence interval of a Poisson rate: k events in an exposure T.
//! Pure maths, no I/O. The bounds are the rates at which seeing k (or fewer, or more)
//! events becomes as unlikely as the confidence allows:
//!
//! - upper λU: P(X ≤ k | λU·T) = α/2, lower λL: P(X ≥ k | λL·T) = α/2 (α = 1 − confidence);
//! - for k = 0 the lower bound is 0 and the upper is −ln(α/2)/T (two-sided 90 %: −ln 0.05/T,
//!   the "rule of three").
//!
//! Read in docs/rate.md.

/// A rate and its interval, in events per unit of the exposure's time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub rate: f64,
    pub lower: f64,
    pub upper: f64,
}

/// ln P(X ≤ k) for X ~ Poisson(mu), summed in log space (no overflow for large k or mu).
fn ln_cdf(k: u64, mu: f64) -> f64 {
    if mu <= 0.0 {
        return 0.0;
    }
    // ln P(X = i) = i ln mu − mu − ln i!, accumulated with log-sum-exp.
    let mut ln_term = -mu; // i = 0
    let mut acc = ln_term;
    for i in 1..=k {
        ln_term += mu.ln() - (i as f64).ln();
        let (a, b) = if acc > ln_term { (acc, ln_term) } else { (ln_term, acc) };
        acc = a + (b - a).exp().ln_1p();
    }
    acc.min(0.0)
}

/// P(X ≤ k | mu).
pub fn cdf(k: u64, mu: f64) -> f64 {
    ln_cdf(k, mu).exp()
}

/// The mu at which `f(mu)` (decreasing in mu) crosses `target`, by bisection.
fn solve(target: f64, f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    while f(hi) > target {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if f(mid) > target {
            lo = mid
        } else {
            hi = mid
        }
        if hi - lo <= 1e-12 * hi.max(1e-300) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// The two-sided exact interval of the expected count for k events.
pub fn count_interval(k: u64, confidence: f64) -> (f64, f64) {
    let half = (1.0 - confidence) / 2.0;
    let upper = solve(half, |mu| cdf(k, mu), 0.0, (k as f64 + 10.0) * 2.0);
    let lower = if k == 0 {
        0.0
    } else {
        // P(X ≥ k | mu) = 1 − P(X ≤ k − 1 | mu) rises with mu: solve P(X ≤ k − 1) = 1 − α/2.
        solve(1.0 - half, |mu| cdf(k - 1, mu), 0.0, k as f64 + 10.0)
    };
    (lower, upper)
}

/// k events in `exposure` units of time: the rate and its two-sided interval at
/// `confidence` (e.g. 0.95). `None` without exposure or with a confidence outside (0, 1).
pub fn rate(k: u64, exposure: f64, confidence: f64) -> Option<Interval> {
    if !(exposure > 0.0 && exposure.is_finite() && confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let (lo, hi) = count_interval(k, confidence);
    Some(Interval { rate: k as f64 / exposure, lower: lo / exposure, upper: hi / exposure })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-12)
    }

    #[test]
    fn zero_events_is_the_rule_of_three() {
        // Two-sided 90 % has the one-sided 95 % upper bound: −ln 0.05 ≈ 2.996.
        let i = rate(0, 10.0, 0.90).expect("interval");
        assert_eq!(i.lower, 0.0);
        assert!(close(i.upper, -(0.05f64.ln()) / 10.0, 1e-9), "{}", i.upper);
        // Two-sided 95 %: −ln 0.025 ≈ 3.689.
        assert!(close(rate(0, 1.0, 0.95).expect("interval").upper, -(0.025f64.ln()), 1e-9));
    }

    #[test]
    fn matches_published_values() {
        // Garwood 95 % limits for the expected count (standard tables, e.g. Ulm 1990).
        for (k, lo, hi) in [
            (1, 0.0253, 5.5716),
            (2, 0.2422, 7.2247),
            (5, 1.6235, 11.6683),
            (10, 4.7954, 18.3904),
            (20, 12.2165, 30.8884),
        ] {
            let (l, h) = count_interval(k, 0.95);
            assert!(close(l, lo, 2e-3) && close(h, hi, 2e-4), "k={k}: ({l}, {h}) vs ({lo}, {hi})");
        }
    }

    #[test]
    fn bad_exposure_or_confidence_gives_none() {
        assert!(rate(1, 0.0, 0.95).is_none());
        assert!(rate(1, f64::NAN, 0.95).is_none());
        assert!(rate(1, 1.0, 1.0).is_none());
        assert!(rate(1, 1.0, 0.0).is_none());
    }

    /// A deterministic Poisson sampler (Knuth's, on xorshift64*) for the coverage test.
    fn poisson(mu: f64, state: &mut u64) -> u64 {
        let l = (-mu).exp();
        let (mut k, mut p) = (0u64, 1.0f64);
        loop {
            *state ^= *state >> 12;
            *state ^= *state << 25;
            *state ^= *state >> 27;
            let u = (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            p *= u;
            if p <= l {
                return k;
            }
            k += 1;
        }
    }

    #[test]
    fn holds_its_nominal_coverage_on_simulated_poisson_data() {
        // The exact interval is conservative: it covers the true rate at least as often as
        // it says (up to the simulation's own noise: 4,000 draws, sd about 0.35 %).
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for mu in [0.3, 1.0, 2.5, 7.0, 20.0] {
            for conf in [0.90, 0.95] {
                let n = 4_000;
                let covered = (0..n)
                    .filter(|_| {
                        let k = poisson(mu, &mut state);
                        let i = rate(k, 1.0, conf).expect("interval");
                        i.lower <= mu && mu <= i.upper
                    })
                    .count();
                let cov = covered as f64 / n as f64;
                assert!(cov >= conf - 0.012, "mu {mu}, confidence {conf}: coverage {cov}");
            }
        }
    }

    proptest! {
        #[test]
        fn the_interval_holds_the_rate_and_widens_as_exposure_shrinks(k in 0u64..200, t in 0.01f64..1e6, shrink in 1.01f64..100.0, conf in 0.5f64..0.999) {
            let wide = rate(k, t / shrink, conf).expect("interval");
            let narrow = rate(k, t, conf).expect("interval");
            prop_assert!(narrow.lower <= narrow.rate && narrow.rate <= narrow.upper);
            prop_assert!(wide.upper - wide.lower > narrow.upper - narrow.lower);
        }

        #[test]
        fn more_confidence_is_a_wider_interval(k in 0u64..200, c in 0.5f64..0.98) {
            let (l1, h1) = count_interval(k, c);
            let (l2, h2) = count_interval(k, c + 0.01);
            prop_assert!(l2 <= l1 && h2 >= h1);
        }
    }
}
