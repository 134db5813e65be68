//! The Kubernetes disruptor: one policy/v1 Eviction (honours the PDB, like `kubectl
//! drain`), posted through `create_subresource` (kube's `EvictParams` would send
//! `delete_options`, which the API server ignores). A 429 (PDB) is retried every 5 s up
//! to `--evict-timeout`, each attempt and its cause reported as it happens (so a sitting
//! that gives up still has them). Or, with `--method delete`, one DELETE of the pod with
//! its own grace period (the spec's §6 `kubectl delete pod`; the PDB is not asked). Never a
//! second member: `disrupt` consumes the evictor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use kube::Api;
use kube::api::PostParams;

use super::{KubeError, api_error, call, never_sent};
use crate::io::disrupt::{DisruptError, Disruptor, Reporter};
use crate::model::baseline::{DisruptionMethod, KubeMethod};
use crate::model::clock::Clock;
use crate::model::event::EventKind;
use crate::model::member::MemberName;

type Result<T, E = DisruptError> = std::result::Result<T, E>;

/// `kubectl drain` waits this long between blocked attempts.
pub const RETRY_EVERY: Duration = Duration::from_secs(5);

pub struct KubeEvictor {
    pub pods: Api<Pod>,
    pub namespace: String,
    /// Bound on each API request.
    pub request_timeout: Duration,
    /// Give up on a PDB-blocked eviction after this long.
    pub evict_timeout: Duration,
    /// Server-side dry run: everything but the eviction.
    pub dry_run: bool,
    pub retry_every: Duration,
    pub clock: Arc<dyn Clock>,
    /// An Eviction (the PDB decides) or a plain DELETE.
    pub method: KubeMethod,
}

impl KubeEvictor {
    pub fn new(
        pods: Api<Pod>,
        namespace: &str,
        request_timeout: Duration,
        evict_timeout: Duration,
        dry_run: bool,
        clock: Arc<dyn Clock>,
    ) -> Self {
        KubeEvictor {
            pods,
            namespace: namespace.to_owned(),
            request_timeout,
            evict_timeout,
            dry_run,
            retry_every: RETRY_EVERY,
            clock,
            method: KubeMethod::Evict,
        }
    }
}

/// The policy/v1 Eviction of `namespace/pod` (a server-side dry run with `dry_run`).
pub fn eviction(namespace: &str, pod: &str, dry_run: bool) -> Eviction {
    Eviction {
        metadata: ObjectMeta {
            name: Some(pod.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        delete_options: Some(DeleteOptions {
            dry_run: dry_run.then(|| vec!["All".to_owned()]),
            ..DeleteOptions::default()
        }),
    }
}

impl KubeEvictor {
    /// One DELETE with the pod's own grace period; never retried (it may have landed).
    async fn delete(
        &self,
        member: &MemberName,
        uid: Option<String>,
        report: &Reporter,
    ) -> Result<()> {
        let dp = kube::api::DeleteParams {
            dry_run: self.dry_run,
            preconditions: uid
                .clone()
                .map(|u| kube::api::Preconditions { uid: Some(u), resource_version: None }),
            ..Default::default()
        };
        report.attempts(1, 0.0);
        call("delete pod", self.request_timeout, self.pods.delete(&member.0, &dp)).await?;
        report.event(
            member,
            EventKind::DeleteAccepted,
            format!("grace period: the pod's own{}", if self.dry_run { " (dry run)" } else { "" }),
        );
        if !self.dry_run {
            let how = self.wait_gone(member, uid, report).await?;
            report.event(member, EventKind::OldPodGone, how);
        }
        Ok(())
    }

    /// Waits until the evicted pod is gone or replaced (another uid); says which.
    async fn wait_gone(
        &self,
        member: &MemberName,
        uid: Option<String>,
        report: &Reporter,
    ) -> std::result::Result<&'static str, KubeError> {
        let deadline = Instant::now() + self.evict_timeout;
        let mut unreachable = false;
        loop {
            // The eviction is done; this only watches it happen. An API server that does not
            // answer for a while (a control-plane upgrade) is waited out, up to the deadline.
            let p = match call("get pod", self.request_timeout, self.pods.get_opt(&member.0)).await
            {
                Ok(p) => p,
                Err(
                    e @ (KubeError::Timeout { .. }
                    | KubeError::Status { .. }
                    | KubeError::Unreachable { .. }
                    | KubeError::Api { .. }),
                ) if Instant::now() < deadline => {
                    if !unreachable {
                        report.event(
                            member,
                            EventKind::ApiUnreachable,
                            format!("waiting for the old pod to go: {e}; retrying"),
                        );
                        unreachable = true;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let gone = p.as_ref().is_none_or(|p| p.metadata.uid != uid);
            if gone {
                return Ok(if p.is_some() { "replaced (new uid)" } else { "deleted" });
            }
            if Instant::now() >= deadline {
                return Err(KubeError::Timeout {
                    what: format!("pod {member} to go after its eviction"),
                    timeout: self.evict_timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// "needs N healthy pods and has M" from a 429's causes, else its message.
fn blocked_cause(s: &kube::core::Status) -> String {
    let causes: Vec<String> = s
        .details
        .iter()
        .flat_map(|d| &d.causes)
        .map(|c| c.message.clone())
        .filter(|m| !m.is_empty())
        .collect();
    if causes.is_empty() { s.message.clone() } else { causes.join("; ") }
}

impl Disruptor for KubeEvictor {
    fn method(&self) -> DisruptionMethod {
        DisruptionMethod::kube(self.method, self.dry_run)
    }

    async fn disrupt(self, member: MemberName, report: Reporter) -> Result<()> {
        let member = &member;
        let first = Instant::now();
        // The API server may be away for a moment (a control-plane upgrade): a request that
        // could not even connect is retried like a blocked eviction, until --evict-timeout.
        let uid = loop {
            match call("get pod", self.request_timeout, self.pods.get(&member.0)).await {
                Ok(p) => break p.metadata.uid,
                Err(KubeError::Unreachable { message, .. })
                    if first.elapsed() + self.retry_every <= self.evict_timeout =>
                {
                    report.event(
                        member,
                        EventKind::ApiUnreachable,
                        format!("get pod before the eviction: {message}; retrying"),
                    );
                    tokio::time::sleep(self.retry_every).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        if self.method == KubeMethod::Delete {
            return self.delete(member, uid, &report).await;
        }
        let body = eviction(&self.namespace, &member.0, self.dry_run);
        let pp = PostParams { dry_run: self.dry_run, field_manager: None };
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let req = self
                .pods
                .create_subresource::<_, kube::core::Status>("eviction", &member.0, &pp, &body);
            let answer = tokio::time::timeout(self.request_timeout, req).await;
            report.attempts(attempt, if attempt > 1 { first.elapsed().as_secs_f64() } else { 0.0 });
            match answer {
                Ok(Ok(_)) => {
                    report.event(
                        member,
                        EventKind::EvictionAccepted,
                        format!(
                            "attempt {attempt}{}",
                            if self.dry_run { " (dry run)" } else { "" }
                        ),
                    );
                    if !self.dry_run {
                        let how = self.wait_gone(member, uid, &report).await?;
                        report.event(member, EventKind::OldPodGone, how);
                    }
                    return Ok(());
                }
                Ok(Err(kube::Error::Api(s))) if s.code == 429 => {
                    let cause = blocked_cause(&s);
                    tracing::warn!(member = %member, attempt, "eviction blocked: {cause}");
                    report.event(
                        member,
                        EventKind::EvictionBlocked,
                        format!("attempt {attempt}: {cause}"),
                    );
                    if first.elapsed() + self.retry_every > self.evict_timeout {
                        return Err(DisruptError::Incomplete(format!(
                            "eviction of {member} still blocked after {attempt} attempts ({}): {cause}",
                            humantime::format_duration(Duration::from_secs(
                                first.elapsed().as_secs()
                            ))
                        )));
                    }
                    tokio::time::sleep(self.retry_every).await;
                }
                // Never sent (the connection was refused): nothing was evicted, so asking again
                // cannot take a second member. A timeout is not retried: it may have landed.
                Ok(Err(e))
                    if never_sent(&e)
                        && first.elapsed() + self.retry_every <= self.evict_timeout =>
                {
                    report.event(
                        member,
                        EventKind::ApiUnreachable,
                        format!("attempt {attempt}: {e}; nothing sent, retrying"),
                    );
                    tokio::time::sleep(self.retry_every).await;
                }
                Ok(Err(e)) => return Err(api_error("create pods/eviction", e).into()),
                Err(_) => {
                    return Err(KubeError::Timeout {
                        what: "create pods/eviction".into(),
                        timeout: self.request_timeout,
                    }
                    .into());
                }
            }
        }
    }
}
