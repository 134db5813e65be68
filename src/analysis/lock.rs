//! What the lock canary's events say, pure: per window the grants, failures, leases lost
//! and the longest time between two grants ([`LockFold`]); over the whole run, whether
//! the lock stayed safe ([`SafetyCheck`]). No I/O, no clock: the events bring their own
//! time and the server's revisions.
//!
//! **Safety** is checked in the server's revision order, not by the clients' clocks: each
//! grant holds from the revision of the answer that granted it to the revision at which its
//! key was deleted (its holder's release, or its lease's expiry, as the watch on the prefix
//! recorded it). Sorted by grant revision, every grant's fencing token (its key's create
//! revision) must be above the previous grant's, and must start at or after the previous
//! grant's end. A holder that still *believes* it holds after its lease expired is not a
//! safety failure of etcd: it is counted as a lease lost while held (the case fencing
//! tokens exist for).

use std::collections::HashMap;

use crate::analysis::client::nearest_rank;
use crate::model::clock::Stamp;
use crate::model::lock::{LockEvent, LockEventKind, LockFigures, LockSafety, Verdict};

/// The lock's unavailability between two grants: their distance minus the hold (one
/// hold apart is normal), never below 0.
fn gap(prev: &Stamp, next: &Stamp, hold_s: f64) -> f64 {
    (prev.secs_to(next) - hold_s).max(0.0)
}

/// One window's lock figures, folded event by event.
#[derive(Debug, Clone, Default)]
pub struct LockFold {
    /// Each holder's hold, in seconds.
    hold_s: f64,
    figures: LockFigures,
    /// The last grant before this event (from an earlier window too): where the next gap
    /// starts.
    last_grant: Option<Stamp>,
    gaps_s: Vec<f64>,
}

impl LockFold {
    /// The lock canary runs, each holder holding `hold_s`.
    pub fn started(&mut self, hold_s: f64) {
        self.hold_s = hold_s;
    }

    pub fn push(&mut self, e: &LockEvent) {
        let f = &mut self.figures;
        match e.kind {
            LockEventKind::Granted => {
                f.grants += 1;
                if let Some(prev) = self.last_grant {
                    let g = gap(&prev, &e.at, self.hold_s);
                    self.gaps_s.push(g);
                    f.longest_unavailable_s = Some(f.longest_unavailable_s.map_or(g, |l| l.max(g)));
                }
                if self.last_grant.is_none_or(|p| e.at.mono >= p.mono) {
                    self.last_grant = Some(e.at);
                }
            }
            LockEventKind::AcquireFailed => f.acquire_failures += 1,
            LockEventKind::AppliedAfterError => f.applied_after_error += 1,
            LockEventKind::LeaseLost => {
                f.leases_lost += 1;
                if e.held {
                    f.leases_lost_while_held += 1;
                }
            }
            _ => {}
        }
    }

    /// Whether any event came in.
    pub fn is_empty(&self) -> bool {
        self.figures == LockFigures::default() && self.last_grant.is_none()
    }

    /// The next window's fold: its first gap starts at this window's last grant.
    pub fn continue_from(&self) -> LockFold {
        LockFold { hold_s: self.hold_s, last_grant: self.last_grant, ..LockFold::default() }
    }

    /// The figures so far; `None` when the lock canary has said nothing yet.
    pub fn figures(&self) -> Option<LockFigures> {
        if self.is_empty() {
            return None;
        }
        let mut sorted = self.gaps_s.clone();
        sorted.sort_by(f64::total_cmp);
        Some(LockFigures { handover_p50_s: nearest_rank(0.5, &sorted), ..self.figures.clone() })
    }
}

/// One grant, as the check needs it.
#[derive(Debug, Clone, PartialEq)]
struct Grant {
    holder: Option<u16>,
    key: String,
    /// The fencing token: the key's create revision.
    token: i64,
    /// The revision of the answer that granted it.
    at_rev: i64,
}

/// Every grant of the run and the revision each key was deleted at.
#[derive(Debug, Clone, Default)]
pub struct SafetyCheck {
    grants: Vec<Grant>,
    /// (key, create revision) -> the revision it was deleted at.
    ends: HashMap<(String, i64), i64>,
}

impl SafetyCheck {
    pub fn push(&mut self, e: &LockEvent) {
        match e.kind {
            LockEventKind::Granted => self.grants.push(Grant {
                holder: e.holder,
                key: e.key.clone(),
                token: e.create_revision,
                at_rev: e.revision,
            }),
            // A release answered, or the server's record of any deletion: the earliest
            // revision wins (both name the same deletion when both came).
            LockEventKind::Released | LockEventKind::Deleted if e.create_revision > 0 => {
                let end = self.ends.entry((e.key.clone(), e.create_revision)).or_insert(e.revision);
                *end = (*end).min(e.revision);
            }
            _ => {}
        }
    }

    /// The verdict over every grant so far.
    pub fn verdict(&self) -> LockSafety {
        let mut grants: Vec<&Grant> = self.grants.iter().collect();
        grants.sort_by_key(|g| (g.at_rev, g.token));
        let mut tokens_not_increasing = Vec::new();
        let mut overlaps = Vec::new();
        let mut without_end = 0;
        for (i, g) in grants.iter().enumerate() {
            let end = self.ends.get(&(g.key.clone(), g.token)).copied();
            let Some(next) = grants.get(i + 1) else {
                without_end += u64::from(end.is_none());
                break;
            };
            if next.token <= g.token {
                tokens_not_increasing.push(format!(
                    "{} at revision {} got token {}, not above {}'s {}",
                    who(next),
                    next.at_rev,
                    next.token,
                    who(g),
                    g.token
                ));
            }
            match end {
                Some(end) if next.at_rev < end => overlaps.push(format!(
                    "{} was granted at revision {} while {} (token {}) held until revision {end}",
                    who(next),
                    next.at_rev,
                    who(g),
                    g.token
                )),
                Some(_) => {}
                None => without_end += 1,
            }
        }
        let verdict = if grants.is_empty() {
            Verdict::NotChecked
        } else if !tokens_not_increasing.is_empty() || !overlaps.is_empty() {
            Verdict::Broken
        } else if grants.len() > 1 && without_end > 1 {
            // A grant followed by another whose end the record lacks cannot be checked.
            Verdict::Incomplete
        } else {
            Verdict::Held
        };
        LockSafety {
            verdict,
            grants_checked: grants.len() as u64,
            grants_without_end: without_end,
            tokens_not_increasing,
            overlaps,
        }
    }
}

fn who(g: &Grant) -> String {
    match g.holder {
        Some(h) => format!("holder {h} ({})", g.key),
        None => g.key.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(s: f64) -> Stamp {
        use std::sync::OnceLock;
        static BASE: OnceLock<tokio::time::Instant> = OnceLock::new();
        let base = *BASE.get_or_init(tokio::time::Instant::now);
        Stamp {
            utc: chrono::DateTime::<chrono::Utc>::default(),
            mono: base + Duration::from_secs_f64(s),
        }
    }

    fn ev(kind: LockEventKind, t: f64, holder: u16, key: &str, token: i64, rev: i64) -> LockEvent {
        LockEvent {
            key: key.into(),
            create_revision: token,
            revision: rev,
            ..LockEvent::new(kind, at(t), Some(holder))
        }
    }

    /// Three holders taking turns: a grants at 10, releases at 12; b (created at 11)
    /// granted at 12, releases at 14; c (created at 13) granted at 14.
    fn turns() -> Vec<LockEvent> {
        use LockEventKind::*;
        vec![
            ev(Granted, 0.0, 0, "p/a", 10, 10),
            ev(Released, 0.2, 0, "p/a", 10, 12),
            ev(Granted, 0.21, 1, "p/b", 11, 12),
            ev(Released, 0.4, 1, "p/b", 11, 14),
            ev(Granted, 1.5, 2, "p/c", 13, 14),
        ]
    }

    fn check(events: &[LockEvent]) -> LockSafety {
        let mut c = SafetyCheck::default();
        events.iter().for_each(|e| c.push(e));
        c.verdict()
    }

    #[test]
    fn turns_taken_in_order_are_safe() {
        let s = check(&turns());
        assert_eq!(s.verdict, Verdict::Held, "{s:?}");
        assert_eq!((s.grants_checked, s.grants_without_end), (3, 1));
    }

    #[test]
    fn a_planted_overlap_breaks_safety() {
        let mut e = turns();
        // b granted at revision 11, while a's key lived until 12.
        e[2].revision = 11;
        let s = check(&e);
        assert_eq!(s.verdict, Verdict::Broken);
        assert_eq!(s.overlaps.len(), 1, "{s:?}");
        assert!(s.overlaps[0].contains("holder 1 (p/b) was granted at revision 11"), "{s:?}");
        assert!(s.tokens_not_increasing.is_empty());
    }

    #[test]
    fn a_planted_token_that_does_not_increase_breaks_safety() {
        let mut e = turns();
        // c's key created before b's: a lower token granted later.
        e[4].create_revision = 9;
        let s = check(&e);
        assert_eq!(s.verdict, Verdict::Broken);
        assert_eq!(s.tokens_not_increasing.len(), 1, "{s:?}");
        assert!(s.overlaps.is_empty());
    }

    #[test]
    fn an_end_only_the_server_recorded_counts() {
        // a's lease expired (no release): the watch's deletion at 12 ends its hold.
        let mut e = turns();
        e[1] = LockEvent { holder: None, ..ev(LockEventKind::Deleted, 0.2, 0, "p/a", 10, 12) };
        assert_eq!(check(&e).verdict, Verdict::Held);
        // Without it, a's hold cannot be checked against b's.
        e.remove(1);
        let s = check(&e);
        assert_eq!(s.verdict, Verdict::Incomplete, "{s:?}");
        assert_eq!(s.grants_without_end, 2);
    }

    #[test]
    fn no_grant_is_not_checked() {
        assert_eq!(check(&[]).verdict, Verdict::NotChecked);
    }

    #[test]
    fn the_fold_counts_and_measures_the_gaps_between_grants_less_the_hold() {
        let mut f = LockFold::default();
        f.started(0.2);
        assert!(f.figures().is_none());
        for e in turns() {
            f.push(&e);
        }
        let mut lost = ev(LockEventKind::LeaseLost, 2.0, 1, "p/b", 0, 0);
        lost.held = true;
        f.push(&lost);
        f.push(&ev(LockEventKind::AcquireFailed, 2.1, 0, "p/a", 0, 0));
        let fig = f.figures().expect("figures");
        assert_eq!((fig.grants, fig.leases_lost, fig.leases_lost_while_held), (3, 1, 1));
        assert_eq!(fig.acquire_failures, 1);
        // Gaps 0.21 and 1.29 s, each minus the 0.2 s hold.
        assert!((fig.longest_unavailable_s.expect("longest") - 1.09).abs() < 1e-9, "{fig:?}");
        assert!((fig.handover_p50_s.expect("p50") - 0.01).abs() < 1e-9, "{fig:?}");
        // The next window's first gap starts at this window's last grant.
        let mut next = f.continue_from();
        assert!(next.figures().is_some(), "it knows the last grant");
        next.push(&ev(LockEventKind::Granted, 2.5, 0, "p/a", 20, 20));
        let n = next.figures().expect("figures");
        assert_eq!(n.grants, 1);
        assert!((n.longest_unavailable_s.expect("gap") - 0.8).abs() < 1e-9, "{n:?}");
    }
}
