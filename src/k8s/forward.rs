//! Built-in port-forward for running leaderwatch from a laptop: one local listener per
//! member on 127.0.0.1, and for every connection accepted there a new Kubernetes
//! port-forward to the pod *by name*. So a recreated pod of the same name is followed
//! without any restart: the next connection (the probe's pool reconnects on its own)
//! reaches the replacement.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A running forwarder; dropping it stops the listener.
pub struct Forwarder {
    pub pod: String,
    pub local: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Bound on opening one port-forward stream.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Listens on 127.0.0.1:0 and forwards each connection to `pod`:`port`.
pub async fn forward(pods: Api<Pod>, pod: &str, port: u16) -> std::io::Result<Forwarder> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let local = listener.local_addr()?;
    let name = pod.to_owned();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { continue };
            let (pods, name) = (pods.clone(), name.clone());
            tokio::spawn(async move {
                let pf = match tokio::time::timeout(OPEN_TIMEOUT, pods.portforward(&name, &[port]))
                    .await
                {
                    Ok(Ok(pf)) => pf,
                    Ok(Err(e)) => return tracing::debug!(pod = %name, "port-forward: {e}"),
                    Err(_) => {
                        return tracing::debug!(pod = %name, "port-forward: no answer within {OPEN_TIMEOUT:?}");
                    }
                };
                let mut pf = pf;
                if let Some(mut upstream) = pf.take_stream(port) {
                    // Ends when either side closes (the pod went away, or the probe's pool dropped it).
                    let _ = tokio::io::copy_bidirectional(&mut sock, &mut upstream).await;
                }
                drop(pf);
            });
        }
    });
    Ok(Forwarder { pod: pod.to_owned(), local, task })
}
