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

    /// Disrupts `member` once. Returns when the disruptor's own part is over (for the
    /// local process: after the restart), with the instants it knows exactly, as events.
    fn disrupt(&mut self, member: &MemberName) -> impl Future<Output = Result<Vec<Event>>>;
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

    async fn disrupt(&mut self, member: &MemberName) -> Result<Vec<Event>> {
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
        Ok(out)
    }
}
