//! What can stop a followed Job short of its end, decided from what was read (no API
//! calls, no clock of its own): a pod that cannot start ([`trouble`]: an image that cannot
//! be pulled, a pod the admission refuses, one no node takes), and how long to keep trying
//! when the API itself does not answer ([`Reconnect`]).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

/// A reason the Job's pod does not run, and how long it may last before the sitting gives
/// up: some clear by themselves (a registry's hiccup, a node being added).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trouble {
    /// What kind: the same kind seen again keeps its first sighting.
    pub kind: TroubleKind,
    /// One line for the user: the cause as Kubernetes words it.
    pub cause: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TroubleKind {
    /// The image name cannot be a reference: it never will be.
    BadImage,
    /// The pull fails (no such image, no access, the registry down).
    Pull,
    /// The container cannot be made (a missing ConfigMap, an unusable security context).
    Create,
    /// The Job controller cannot create the pod (admission webhook, policy, quota).
    Refused,
    /// The pod's volume cannot be attached or mounted (`FailedAttachVolume`, a
    /// Multi-Attach error, `FailedMount`): without it the container never starts.
    Volume,
    /// No node takes the pod, and no node is being added for it.
    Unschedulable,
    /// No node takes the pod yet, and the autoscaler is adding one (Autopilot does this
    /// for most new pods).
    ScalingUp,
}

impl TroubleKind {
    /// How long it may last before the sitting gives up on it.
    pub fn grace(self) -> Duration {
        match self {
            TroubleKind::BadImage => Duration::ZERO,
            TroubleKind::Pull | TroubleKind::Create | TroubleKind::Refused => {
                Duration::from_secs(30)
            }
            // A disk the last sitting's node still holds is usually let go within this;
            // one that is not, ends the sitting (nothing was disrupted: run it again).
            TroubleKind::Volume => Duration::from_secs(60),
            TroubleKind::Unschedulable => Duration::from_secs(45),
            TroubleKind::ScalingUp => Duration::from_secs(600),
        }
    }

    /// What to do about it.
    pub fn advice(self) -> &'static str {
        match self {
            TroubleKind::BadImage | TroubleKind::Pull => {
                "check --image (pushed? the digest the push printed? can the nodes' service account read the repository?)"
            }
            TroubleKind::Create => {
                "see `kubectl -n leaderwatch describe pod` for the container's config"
            }
            TroubleKind::Volume => {
                "the volume leaderwatch-data cannot be attached or mounted (still attached to another node? its zone?): see `kubectl -n leaderwatch describe pod` and `kubectl -n leaderwatch get pvc`"
            }
            TroubleKind::Refused => {
                "the cluster's admission refused the pod: see the message (docs/autopilot-rules.md)"
            }
            TroubleKind::Unschedulable | TroubleKind::ScalingUp => {
                "no node takes the pod: see `kubectl -n leaderwatch describe pod` (requests, quota, the PVC's zone)"
            }
        }
    }
}

/// An event's reason and message, as [`trouble`] reads them.
#[derive(Debug, Clone)]
pub struct Seen {
    pub reason: String,
    pub message: String,
}

/// Why the Job's pod does not run now, if something says so: its container waiting on an
/// image or a config, its volume (the pod's own `FailedAttachVolume` or `FailedMount`
/// events while it waits), its scheduling condition (a scale-up said to come, or said to
/// have failed), or (no pod at all) the Job's `FailedCreate` events. `pod_events` and `job_events` are the events read about each so far.
pub fn trouble(pod: Option<&Pod>, pod_events: &[Seen], job_events: &[Seen]) -> Option<Trouble> {
    let Some(p) = pod else {
        return job_events.iter().rev().find(|e| e.reason == "FailedCreate").map(|e| Trouble {
            kind: TroubleKind::Refused,
            cause: format!("the Job cannot create its pod: {}", e.message.trim()),
        });
    };
    let status = p.status.as_ref()?;
    let waiting =
        status.container_statuses.iter().flatten().find_map(|c| c.state.as_ref()?.waiting.as_ref());
    if let Some(w) = waiting {
        let reason = w.reason.clone().unwrap_or_default();
        let kind = match reason.as_str() {
            "InvalidImageName" => Some(TroubleKind::BadImage),
            "ErrImagePull" | "ImagePullBackOff" | "ErrImageNeverPull" => Some(TroubleKind::Pull),
            "CreateContainerConfigError" | "CreateContainerError" => Some(TroubleKind::Create),
            _ => None,
        };
        if let Some(kind) = kind {
            let message = w.message.clone().unwrap_or_default();
            return Some(Trouble { kind, cause: format!("{reason}: {}", message.trim()) });
        }
    }
    // Scheduled, not started: the last volume event, unless the container ran since.
    let started =
        status.container_statuses.iter().flatten().any(|c| {
            c.state.as_ref().is_some_and(|s| s.running.is_some() || s.terminated.is_some())
        });
    let volume = pod_events
        .iter()
        .rev()
        .take_while(|e| e.reason != "SuccessfulAttachVolume")
        .find(|e| matches!(e.reason.as_str(), "FailedAttachVolume" | "FailedMount"));
    if let (false, Some(e)) = (started, volume) {
        return Some(Trouble {
            kind: TroubleKind::Volume,
            cause: format!("{}: {}", e.reason, e.message.trim()),
        });
    }
    let unschedulable = status.conditions.iter().flatten().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    })?;
    // Autopilot adds a node for a pod it cannot place: TriggeredScaleUp says one is coming,
    // NotTriggerScaleUp or FailedScaleUp (after it) that none is.
    let last = pod_events.iter().rev().find(|e| {
        matches!(e.reason.as_str(), "TriggeredScaleUp" | "NotTriggerScaleUp" | "FailedScaleUp")
    });
    let message = unschedulable.message.clone().unwrap_or_default();
    Some(match last {
        Some(e) if e.reason == "TriggeredScaleUp" => Trouble {
            kind: TroubleKind::ScalingUp,
            cause: format!("Unschedulable: {}", message.trim()),
        },
        Some(e) => Trouble {
            kind: TroubleKind::Unschedulable,
            cause: format!("Unschedulable: {}; {}: {}", message.trim(), e.reason, e.message.trim()),
        },
        None => Trouble {
            kind: TroubleKind::Unschedulable,
            cause: format!("Unschedulable: {}", message.trim()),
        },
    })
}

/// When the current kind of trouble was first seen: a kind that stays past its grace ends
/// the follow. A pull retried shows no trouble while it runs (the kubelet says
/// `ContainerCreating` again), so a kind is forgotten only after [`CLEARED`] without it.
#[derive(Debug, Default)]
pub struct Watch {
    /// The kind, when it was first seen, and when last.
    since: Option<(TroubleKind, Instant, Instant)>,
}

/// Trouble not seen for this long has cleared.
pub const CLEARED: Duration = Duration::from_secs(60);

impl Watch {
    /// The trouble read at `now`; `Some` once it has lasted its grace.
    pub fn observe(&mut self, t: Option<&Trouble>, now: Instant) -> Option<Trouble> {
        let Some(t) = t else {
            if self.since.is_some_and(|(_, _, last)| now.duration_since(last) >= CLEARED) {
                self.since = None;
            }
            return None;
        };
        let first = match self.since {
            Some((k, first, _)) if k == t.kind => first,
            _ => now,
        };
        self.since = Some((t.kind, first, now));
        (now.duration_since(first) >= t.kind.grace()).then(|| t.clone())
    }
}

/// Requests about the Job that fail are tried again, each wait twice the last (1 s up to
/// 30 s), until the API has not answered for `give_up_after`.
#[derive(Debug)]
pub struct Reconnect {
    give_up_after: Duration,
    /// The first failure of the current outage, and the failures since.
    outage: Option<(Instant, u32)>,
}

/// What to do after a failed request.
#[derive(Debug, PartialEq, Eq)]
pub enum Retry {
    /// Wait this long, then try again; `first` for the outage's first failure.
    After { wait: Duration, first: bool, down_for: Duration },
    /// The outage has lasted `give_up_after`.
    GiveUp { down_for: Duration },
}

impl Reconnect {
    pub fn new(give_up_after: Duration) -> Self {
        Reconnect { give_up_after, outage: None }
    }

    /// A request failed at `now`.
    pub fn failed(&mut self, now: Instant) -> Retry {
        let (since, n) = self.outage.get_or_insert((now, 0));
        *n += 1;
        let down_for = now.duration_since(*since);
        if down_for >= self.give_up_after {
            return Retry::GiveUp { down_for };
        }
        let wait = Duration::from_secs(1u64 << (*n - 1).min(5)).min(Duration::from_secs(30));
        Retry::After { wait, first: *n == 1, down_for }
    }

    /// A request answered: the outage (if any) is over; how long it lasted.
    pub fn answered(&mut self, now: Instant) -> Option<Duration> {
        self.outage.take().map(|(since, _)| now.duration_since(since))
    }
}

#[cfg(test)]
mod tests;
