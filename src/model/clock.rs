//! The one way leaderwatch reads the time, so that tests can drive it. A [`Stamp`] pairs
//! the wall clock (for display and for joining with Kubernetes events) with the monotonic
//! clock (for every duration), so that a step of the wall clock changes no duration. Also
//! the timestamp format of every file ([`ts`]) and the one way a duration is written by
//! hand ([`parse_duration`]: the command line's flags and the test hooks alike).

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// One instant, read from both clocks at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub utc: DateTime<Utc>,
    /// tokio's monotonic clock (paused time in tests moves it too).
    pub mono: Instant,
}

impl Stamp {
    /// Seconds from `self` to `later`, monotonic; negative if `later` is earlier.
    pub fn secs_to(&self, later: &Stamp) -> f64 {
        mono_secs(self.mono, later.mono)
    }
}

/// `b - a` in seconds, signed, from the monotonic clock.
pub fn mono_secs(a: Instant, b: Instant) -> f64 {
    if b >= a { (b - a).as_secs_f64() } else { -(a - b).as_secs_f64() }
}

pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;

    /// Both clocks at once; tests override [`Clock::now`] to step the wall clock.
    fn stamp(&self) -> Stamp {
        Stamp { utc: self.now(), mono: Instant::now() }
    }
}

/// The system's UTC clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// RFC 3339 UTC with milliseconds, the timestamp format of every file.
pub fn ts(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A duration as a person writes one (`500ms`, `1s`, `20m`; humantime's syntax), not zero.
/// The error says what was given and what would do.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration ({e}); use e.g. 500ms, 1s, 20m"))?;
    if d.is_zero() {
        return Err(format!("{s:?}: must be greater than zero"));
    }
    Ok(d)
}
