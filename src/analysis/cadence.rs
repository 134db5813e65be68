//! What a member's next probe asks, from what its last probe learned. The Status RPC is
//! asked every round (it is what shows a change first, and costs etcd least); `/health`
//! (a linearizable read through the leader) only when its last answer may no longer hold;
//! `/metrics` (the ~160 KB page) on the loop's schedule, or, in a sitting's fast phase,
//! only when the member's Status shows something the page would count. Pure: observations
//! in, a plan out; src/io/round.rs keeps one [`Cadence`] per member.

use std::time::Duration;

use tokio::time::Instant;

use crate::model::observation::{Health, Observation, Part};

/// How long a healthy `/health` answer is kept while the member's Status does not change:
/// a stable member is asked once a second, as at rest. Measured on the committed runs'
/// rounds (tests/check/cadence_replay.rs): no recovery instant moves.
pub const HEALTH_KEPT_FOR: Duration = Duration::from_secs(1);

/// Slack under [`HEALTH_KEPT_FOR`] so that rounds a second apart always ask (round starts
/// jitter by a few ms either way).
const KEEP_SLACK: Duration = Duration::from_millis(50);

/// When `/metrics` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// In every probe started from now on.
    Every,
    /// In none.
    Skip,
    /// Only from a member whose Status (leader, term, alarms, or whether it answered)
    /// changed since its last page: the page's counter moves only when the member sees a
    /// new leader, and a restart shows as a failed Status first. A sitting's fast phase.
    OnChange,
}

/// What a probe asks of `/health`.
#[derive(Debug, Clone, PartialEq)]
pub enum HealthAsk {
    Ask,
    /// Not asked: this answer, given `age` ago, still holds.
    Keep(Health, Duration),
}

/// One probe's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub metrics: bool,
    pub health: HealthAsk,
}

/// What in a Status answer makes a kept `/health` answer stale when it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StatusKey {
    member_id: u64,
    leader_id: u64,
    raft_term: u64,
    alarms: bool,
}

fn key(o: &Observation) -> Option<StatusKey> {
    o.status.ok().map(|s| StatusKey {
        member_id: s.member_id,
        leader_id: s.leader_id,
        raft_term: s.raft_term,
        alarms: !s.errors.is_empty(),
    })
}

/// One member's memory between probes.
#[derive(Debug, Clone, Default)]
pub struct Cadence {
    /// The last `/health` answer actually read, the Status beside it, and when.
    health: Option<(Health, Option<StatusKey>, Instant)>,
    /// The Status at the last page read (`None` inside: that Status failed).
    paged: Option<Option<StatusKey>>,
    /// The Status of the last probe (`None`: it failed, or no probe yet).
    last: Option<StatusKey>,
    /// A page was due ([`Pages::Every`]) while this member's probe was still out: its next
    /// probe asks it. A member whose probes each take longer than a round (a leader
    /// waiting on its disk) would otherwise never be in a paging round, and its slow syncs
    /// would show only after the fault (fault sweep 2026-12-06: no page in 2 minutes).
    owed: bool,
}

impl Cadence {
    /// Learns from a finished probe of this member.
    pub fn observe(&mut self, o: &Observation) {
        let k = key(o);
        match &o.health {
            Part::Ok { value, .. } => self.health = Some((value.clone(), k.clone(), o.at)),
            Part::Failed { .. } => self.health = None,
            Part::Kept { .. } | Part::Skipped => {}
        }
        if matches!(o.metrics, Part::Ok { .. }) {
            self.paged = Some(k.clone());
        }
        self.last = k;
    }

    /// A round of `pages` found this member's probe still out.
    pub fn missed(&mut self, pages: Pages) {
        self.owed |= pages == Pages::Every;
    }

    /// The plan of the probe starting at `now`, which pays a page owed.
    pub fn plan_next(&mut self, pages: Pages, now: Instant) -> Plan {
        let plan = self.plan(pages, now);
        self.owed &= !plan.metrics;
        plan
    }

    /// The plan of a probe starting at `now`.
    pub fn plan(&self, pages: Pages, now: Instant) -> Plan {
        let metrics = match pages {
            Pages::Every => true,
            Pages::Skip => self.owed,
            Pages::OnChange => self.last.is_none() || self.paged.as_ref() != Some(&self.last),
        };
        let health = match &self.health {
            Some((h, k, at))
                if h.healthy
                    && self.last.is_some()
                    && k == &self.last
                    && now.saturating_duration_since(*at) + KEEP_SLACK < HEALTH_KEPT_FOR =>
            {
                HealthAsk::Keep(h.clone(), now.saturating_duration_since(*at))
            }
            _ => HealthAsk::Ask,
        };
        Plan { metrics, health }
    }
}

/// How long after a round starts its answers (`/metrics` pages, `/health`, Status) are
/// first read, learned from the rounds before: by then the last answer of the last round
/// that had to wait had come, so every member's answers are read in one wakeup instead of
/// one per answer, piece or poll. After each round whose answers were all whole at their
/// first read the wait shortens by a sixteenth (pages shrink, members get faster); a
/// round that read one too early sets it to when that round's last answer came.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadWait {
    wait: Duration,
    /// No wait is longer: a round read later than that waits for nothing it needs.
    cap: Duration,
}

/// One member's answers in a round, as far as [`ReadWait`] learns from them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    /// From the round's start to when the last of them had come.
    pub after: Duration,
    /// Whether their first read found them all whole.
    pub at_first_read: bool,
}

impl ReadWait {
    /// Starts at no wait (read as soon as possible), never above `cap`.
    pub fn new(cap: Duration) -> ReadWait {
        ReadWait { wait: Duration::ZERO, cap }
    }

    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Learns from the answers a round read (none: nothing to learn).
    pub fn observe(&mut self, answers: impl IntoIterator<Item = Arrival>) {
        let (mut any, mut early, mut last) = (false, false, Duration::ZERO);
        for a in answers {
            any = true;
            early |= !a.at_first_read;
            last = last.max(a.after);
        }
        if !any {
            return;
        }
        self.wait = if early { last } else { self.wait - self.wait / 16 }.min(self.cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::member::MemberName;
    use crate::model::observation::Status;

    fn obs(
        at: Instant,
        health: Option<bool>,
        status: Option<(u64, u64)>,
        page: bool,
    ) -> Observation {
        Observation {
            member: MemberName("m0".into()),
            endpoint: "http://127.0.0.1:2379".into(),
            ts: chrono::Utc::now(),
            at,
            metrics: if page {
                Part::Ok { value: Default::default(), ms: 1.0 }
            } else {
                Part::Skipped
            },
            health: match health {
                Some(h) => {
                    Part::Ok { value: Health { healthy: h, reason: String::new() }, ms: 1.0 }
                }
                None => Part::Failed { error: "connection refused".into(), ms: 1.0 },
            },
            status: match status {
                Some((leader, term)) => Part::Ok { value: Status::of(1, leader, term), ms: 1.0 },
                None => Part::Failed { error: "connection refused".into(), ms: 1.0 },
            },
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn a_stable_healthy_member_is_asked_once_a_second() {
        let t = Instant::now();
        let mut c = Cadence::default();
        assert_eq!(c.plan(Pages::Every, t).health, HealthAsk::Ask, "nothing known yet");
        c.observe(&obs(t, Some(true), Some((7, 2)), true));
        for k in 1..=9 {
            assert!(
                matches!(c.plan(Pages::Every, t + ms(100 * k)).health, HealthAsk::Keep(..)),
                "round {k}"
            );
        }
        assert_eq!(c.plan(Pages::Every, t + ms(1000)).health, HealthAsk::Ask);
        // Rounds a second apart (at rest) always ask, even a little early.
        assert_eq!(c.plan(Pages::Every, t + ms(990)).health, HealthAsk::Ask);
    }

    #[tokio::test(start_paused = true)]
    async fn a_changed_or_failed_status_or_an_unhealthy_answer_asks_at_once() {
        let t = Instant::now();
        let mut c = Cadence::default();
        c.observe(&obs(t, Some(true), Some((7, 2)), true));
        // A new term, a new leader, no leader, a failed Status: ask.
        for status in [Some((7, 3)), Some((8, 2)), Some((0, 2)), None] {
            let mut d = c.clone();
            let mut o = obs(t + ms(100), Some(true), status, false);
            o.health = Part::Skipped;
            d.observe(&o);
            assert_eq!(d.plan(Pages::Every, t + ms(200)).health, HealthAsk::Ask, "{status:?}");
        }
        let mut d = c.clone();
        d.observe(&obs(t + ms(100), Some(false), Some((7, 2)), false));
        assert_eq!(d.plan(Pages::Every, t + ms(200)).health, HealthAsk::Ask, "unhealthy");
        let mut d = c.clone();
        d.observe(&obs(t + ms(100), None, Some((7, 2)), false));
        assert_eq!(d.plan(Pages::Every, t + ms(200)).health, HealthAsk::Ask, "health failed");
    }

    #[tokio::test(start_paused = true)]
    async fn pages_on_change_follow_the_status() {
        let t = Instant::now();
        let mut c = Cadence::default();
        assert!(c.plan(Pages::OnChange, t).metrics, "no page yet");
        c.observe(&obs(t, Some(true), Some((7, 2)), true));
        assert!(!c.plan(Pages::OnChange, t).metrics, "nothing changed");
        assert!(c.plan(Pages::Every, t).metrics && !c.plan(Pages::Skip, t).metrics);
        c.observe(&obs(t, Some(true), Some((8, 3)), false));
        assert!(c.plan(Pages::OnChange, t).metrics, "a new leader: its counter moved");
        c.observe(&obs(t, Some(true), Some((8, 3)), true));
        assert!(!c.plan(Pages::OnChange, t).metrics, "read since");
        c.observe(&obs(t, None, None, false));
        assert!(c.plan(Pages::OnChange, t).metrics, "gone: asked until it is back");
        c.observe(&obs(t, None, None, true));
        assert!(c.plan(Pages::OnChange, t).metrics, "still gone");
        c.observe(&obs(t, Some(true), Some((8, 3)), false));
        assert!(c.plan(Pages::OnChange, t).metrics, "back: read its (restarted) counter");
    }

    fn arrival(after_ms: u64, at_first_read: bool) -> Arrival {
        Arrival { after: ms(after_ms), at_first_read }
    }

    #[test]
    fn the_read_wait_is_the_last_answers_time_after_a_read_too_early() {
        let mut w = ReadWait::new(ms(500));
        assert_eq!(w.wait(), Duration::ZERO, "no round yet: read at once");
        w.observe([arrival(9, false), arrival(14, false), arrival(12, true)]);
        assert_eq!(w.wait(), ms(14), "the last answer of the round, not the first late one");
        w.observe([arrival(20, true), arrival(6, false)]);
        assert_eq!(w.wait(), ms(20), "one answer read early is enough to wait longer");
    }

    #[test]
    fn the_read_wait_shortens_while_every_answer_is_whole_at_its_first_read() {
        let mut w = ReadWait::new(ms(500));
        w.observe([arrival(16, false)]);
        w.observe([arrival(16, true), arrival(16, true), arrival(16, true)]);
        assert_eq!(w.wait(), ms(15), "a sixteenth shorter");
        for _ in 0..20 {
            w.observe([arrival(15, true)]);
        }
        assert!(w.wait() < ms(5), "answers came sooner: the wait follows ({:?})", w.wait());
        let before = w.wait();
        w.observe([]);
        assert_eq!(w.wait(), before, "a round that read nothing says nothing");
    }

    #[test]
    fn the_read_wait_never_exceeds_its_cap() {
        let mut w = ReadWait::new(ms(30));
        w.observe([arrival(2_000, false)]);
        assert_eq!(w.wait(), ms(30));
    }

    #[test]
    fn a_page_due_while_the_probe_is_out_is_asked_by_the_next_probe() {
        let t = Instant::now();
        let mut c = Cadence::default();
        assert!(!c.plan_next(Pages::Skip, t).metrics);
        c.missed(Pages::Skip);
        assert!(!c.plan_next(Pages::Skip, t).metrics, "nothing was due");
        c.missed(Pages::Every);
        assert!(c.plan_next(Pages::Skip, t).metrics, "owed from the paging round");
        assert!(!c.plan_next(Pages::Skip, t).metrics, "paid");
    }
}
