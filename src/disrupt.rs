//! "Disrupt one member": the small trait behind every sitting, with the local-process
//! implementation (`rehearse`); the Kubernetes eviction lives in the kube module.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
use crate::events::Event;
use crate::local::LocalCluster;
use crate::member::MemberName;
use crate::Result;

pub trait Disruptor {
    /// Recorded as `disruption.method` in baseline.json.
    fn method(&self) -> &'static str;

    /// Disrupts `member` once. Returns when the disruptor's own part is over (local
    /// process: after the restart; eviction: once the old pod is gone).
    fn disrupt(&mut self, member: &MemberName) -> impl Future<Output = Result<DisruptReport>>;
}

/// What a disruptor knows exactly about its own disruption.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DisruptReport {
    /// Its instants (signal, exit, restart; eviction attempts, acceptance, pod gone).
    pub events: Vec<Event>,
    /// Requests it took (an eviction blocked by the PDB takes several).
    pub attempts: u32,
    /// Time from the first attempt to the accepted one.
    pub blocked_s: f64,
}

/// SIGTERM (what the kubelet sends an evicted pod), wait for the exit, stay down for
/// `down` (standing in for the reschedule), restart on the same data dir.
pub struct LocalDisruptor<'a> {
    pub cluster: &'a mut LocalCluster,
    pub down: Duration,
    /// terminationGracePeriodSeconds: SIGKILL after this.
    pub grace: Duration,
    pub clock: Arc<dyn Clock>,
}

impl Disruptor for LocalDisruptor<'_> {
    fn method(&self) -> &'static str {
        "local-sigterm"
    }

    async fn disrupt(&mut self, member: &MemberName) -> Result<DisruptReport> {
        let i = self
            .cluster
            .members()
            .iter()
            .position(|m| &m.name == member)
            .ok_or_else(|| crate::Error::Usage(format!("no local member named {member}")))?;
        let name = &member.0;
        let mut out = vec![Event::new(self.clock.now(), "local", name, "sigterm_sent", "SIGTERM, as the kubelet on eviction")];
        self.cluster.terminate(i, self.grace).await?;
        out.push(Event::new(self.clock.now(), "local", name, "exited", ""));
        tokio::time::sleep(self.down).await;
        self.cluster.restart(i)?;
        out.push(Event::new(
            self.clock.now(),
            "local",
            name,
            "restarted",
            format!("after {} down, same data dir", humantime::format_duration(self.down)),
        ));
        Ok(DisruptReport { events: out, attempts: 1, blocked_s: 0.0 })
    }
}
