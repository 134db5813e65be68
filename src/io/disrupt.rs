//! "Disrupt one member": the small trait behind every sitting. A disruptor runs as its own
//! task and reports what it does over a channel as it happens, so that nothing it did is
//! lost when it fails or the sitting is interrupted. The local-process implementation
//! (`rehearse`, three methods) is here; the Kubernetes eviction is in `k8s::evict`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::sync::mpsc::UnboundedSender;

use crate::io::local::{LocalCluster, LocalError};
use crate::model::baseline::{DisruptionMethod, LocalMethod};
use crate::model::clock::Clock;
use crate::model::event::{DisruptorReport, Event, EventKind, Source};
use crate::model::member::MemberName;

/// Why a disruption failed. Its kind decides the command's exit code: a member that is not
/// there and a disruption that cannot be done were refused before anything was disrupted;
/// one that did not finish leaves the trial incomplete; the platform's own failure (the
/// local cluster, the Kubernetes API) is said as that platform's.
#[derive(Debug, thiserror::Error)]
pub enum DisruptError {
    /// The member to disrupt is not there.
    #[error("{0}")]
    Target(String),
    /// What the disruption needs is not so (a member on no node): nothing was disrupted.
    #[error("{0}")]
    Refused(String),
    /// Started and not finished in time (an eviction blocked past `--evict-timeout`).
    #[error("{0}")]
    Incomplete(String),
    /// The local cluster failed.
    #[error(transparent)]
    Local(#[from] LocalError),
    /// The platform's API failed: a Kubernetes error, kept whole for the command (which
    /// knows the kinds of the layers above this one).
    #[error(transparent)]
    Api(Box<dyn std::error::Error + Send + Sync>),
}

pub trait Disruptor: Send + 'static {
    /// Recorded as `disruption.method` in baseline.json.
    fn method(&self) -> DisruptionMethod;

    /// Disrupts `member` once, reporting each step through `report`. Returns when the
    /// disruptor's own part is over (local: restarted or thawed; eviction: the old pod is
    /// gone). Taking `self` makes a second disruption in one run impossible.
    fn disrupt(
        self,
        member: MemberName,
        report: Reporter,
    ) -> impl Future<Output = Result<(), DisruptError>> + Send + 'static;

    /// What puts the cluster back if the disruptor's task is cut short (a signal, a
    /// failure): a drain's uncordon. Taken before [`Disruptor::disrupt`]; the sitting runs
    /// it once the task has ended, however it ended (it does nothing when there is
    /// nothing left to undo).
    fn undo(&self) -> Option<Undo> {
        None
    }
}

/// See [`Disruptor::undo`].
pub type Undo =
    Box<dyn FnOnce(Reporter) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// Where a disruptor reports, stamped with both clocks.
#[derive(Clone)]
pub struct Reporter {
    tx: UnboundedSender<DisruptorReport>,
    clock: Arc<dyn Clock>,
    source: Source,
}

impl Reporter {
    pub fn new(
        tx: UnboundedSender<DisruptorReport>,
        clock: Arc<dyn Clock>,
        source: Source,
    ) -> Self {
        Reporter { tx, clock, source }
    }

    pub fn event(&self, member: &MemberName, kind: EventKind, detail: impl Into<String>) {
        // The sitting may be gone (interrupted): nothing is left to tell.
        let _ = self.tx.send(DisruptorReport::Event(Event::stamped(
            self.clock.stamp(),
            self.source,
            &member.0,
            kind,
            detail,
        )));
    }

    pub fn attempts(&self, attempts: u32, blocked_s: f64) {
        let _ = self.tx.send(DisruptorReport::Attempts { attempts, blocked_s });
    }
}

/// Fails one member of a [`LocalCluster`] with `method`, and brings it back after `down`
/// (standing in for the reschedule).
pub struct LocalDisruptor {
    pub cluster: Arc<Mutex<LocalCluster>>,
    pub method: LocalMethod,
    pub down: Duration,
    /// terminationGracePeriodSeconds: SIGKILL after this when SIGTERM is not enough.
    pub grace: Duration,
}

impl Disruptor for LocalDisruptor {
    fn method(&self) -> DisruptionMethod {
        DisruptionMethod::local(self.method)
    }

    async fn disrupt(self, member: MemberName, report: Reporter) -> Result<(), DisruptError> {
        let i = {
            let c = self.cluster.lock().await;
            c.members().iter().position(|m| m.name == member)
        }
        .ok_or_else(|| DisruptError::Target(format!("no local member named {member}")))?;
        let down = humantime::format_duration(self.down);
        match self.method {
            LocalMethod::Sigterm => {
                report.event(
                    &member,
                    EventKind::SigtermSent,
                    "SIGTERM, as the kubelet on eviction",
                );
                self.cluster.lock().await.terminate(i, self.grace).await?;
                report.event(&member, EventKind::Exited, "");
            }
            LocalMethod::Sigkill => {
                report.event(&member, EventKind::SigkillSent, "SIGKILL, a crash");
                self.cluster.lock().await.kill(i).await?;
                report.event(&member, EventKind::Exited, "");
            }
            LocalMethod::Sigstop => {
                report.event(
                    &member,
                    EventKind::SigstopSent,
                    format!("SIGSTOP, frozen for {down}"),
                );
                self.cluster.lock().await.freeze(i)?;
            }
        }
        tokio::time::sleep(self.down).await;
        if self.method == LocalMethod::Sigstop {
            self.cluster.lock().await.thaw(i)?;
            report.event(&member, EventKind::Continued, format!("SIGCONT after {down} frozen"));
        } else {
            self.cluster.lock().await.restart(i)?;
            report.event(
                &member,
                EventKind::Restarted,
                format!("after {down} down, same data dir"),
            );
        }
        Ok(())
    }
}
