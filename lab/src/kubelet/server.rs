//! The kubelet's HTTPS port (10250) on each node address, as the API server reaches it:
//! `exec` over WebSocket (v5/v4.channel.k8s.io; the API server is told not to translate to
//! SPDY), `containerLogs` (so `kubectl logs` works) and `/healthz`. Client certificates are
//! verified against the cluster CA, as a kubelet with x509 authentication does.

use super::{ContainerEntry, Shared};
use crate::error::{Error, IoContext, Result};
use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

fn query(q: &Option<String>) -> Vec<(String, String)> {
    form_urlencoded::parse(q.as_deref().unwrap_or("").as_bytes()).into_owned().collect()
}

fn flag(q: &[(String, String)], k: &str) -> bool {
    q.iter().any(|(kk, v)| kk == k && (v == "1" || v == "true"))
}

fn entry(sh: &Shared, ns: &str, pod: &str, c: &str) -> Option<ContainerEntry> {
    sh.registry.lock().ok()?.get(&(ns.to_string(), pod.to_string(), c.to_string())).cloned()
}

async fn exec(
    State(sh): State<Arc<Shared>>,
    Path((ns, pod, c)): Path<(String, String, String)>,
    RawQuery(q): RawQuery,
    ws: WebSocketUpgrade,
) -> Response {
    let q = query(&q);
    let Some(target) = entry(&sh, &ns, &pod, &c).and_then(|e| e.exec) else {
        return (
            StatusCode::NOT_FOUND,
            format!("container {c} of pod {ns}/{pod} is not running on this node"),
        )
            .into_response();
    };
    let cmd: Vec<String> =
        q.iter().filter(|(k, _)| k == "command").map(|(_, v)| v.clone()).collect();
    let (stdin, stdout, stderr) = (flag(&q, "input"), flag(&q, "output"), flag(&q, "error"));
    ws.protocols(["v5.channel.k8s.io", "v4.channel.k8s.io"])
        .on_upgrade(move |socket| run_exec(socket, target, cmd, stdin, stdout, stderr))
}

async fn exec_uid(
    st: State<Arc<Shared>>,
    Path((ns, pod, _uid, c)): Path<(String, String, String, String)>,
    q: RawQuery,
    ws: WebSocketUpgrade,
) -> Response {
    exec(st, Path((ns, pod, c)), q, ws).await
}

fn status_json(code: Option<i32>, err: Option<String>) -> Vec<u8> {
    let v = match (code, err) {
        (_, Some(e)) => {
            serde_json::json!({"metadata": {}, "status": "Failure", "message": e, "reason": "InternalError"})
        }
        (Some(0), None) => serde_json::json!({"metadata": {}, "status": "Success"}),
        (c, None) => {
            let c = c.unwrap_or(1);
            serde_json::json!({"metadata": {}, "status": "Failure", "message": format!("command terminated with non-zero exit code: exit status {c}"),
                "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": c.to_string()}]}})
        }
    };
    let mut out = vec![3u8];
    out.extend(serde_json::to_vec(&v).unwrap_or_default());
    out
}

async fn run_exec(
    socket: WebSocket,
    t: super::ExecTarget,
    cmd: Vec<String>,
    stdin: bool,
    want_out: bool,
    want_err: bool,
) {
    let (mut sink, mut stream) = socket.split();
    let (wtx, mut wrx) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        while let Some(m) = wrx.recv().await {
            if sink.send(Message::Binary(Bytes::from(m))).await.is_err() {
                return;
            }
        }
        // A normal closure (1000): client-go reads a close without a status code (1005) as an error.
        let _ = sink
            .send(Message::Close(Some(axum::extract::ws::CloseFrame {
                code: 1000,
                reason: "".into(),
            })))
            .await;
    });
    let mut child = match t.runc.exec(&t.id, t.uid, t.gid, &t.groups, &cmd, stdin) {
        Ok(c) => c,
        Err(e) => {
            let _ = wtx.send(status_json(None, Some(e.to_string()))).await;
            drop(wtx);
            let _ = writer.await;
            return;
        }
    };
    let mut pumps = Vec::new();
    for (chan, pipe, want) in [
        (
            1u8,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            want_out,
        ),
        (
            2u8,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            want_err,
        ),
    ] {
        let Some(mut pipe) = pipe else { continue };
        let wtx = wtx.clone();
        pumps.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 16384];
            loop {
                match pipe.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) if want => {
                        let mut m = vec![chan];
                        m.extend_from_slice(&buf[..n]);
                        if wtx.send(m).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                }
            }
        }));
    }
    let mut child_stdin = child.stdin.take();
    let reader = tokio::spawn(async move {
        while let Some(Ok(m)) = stream.next().await {
            let data: Vec<u8> = match m {
                Message::Binary(b) => b.to_vec(),
                Message::Close(_) => break,
                _ => continue,
            };
            match data.first() {
                Some(0) => {
                    if let Some(s) = child_stdin.as_mut()
                        && s.write_all(&data[1..]).await.is_err()
                    {
                        child_stdin = None;
                    }
                }
                // v5 close signal: [255, channel]; closing stdin is the only one that matters.
                Some(255) if data.get(1) == Some(&0) => child_stdin = None,
                _ => {}
            }
        }
    });
    let code = match tokio::time::timeout(std::time::Duration::from_secs(3600), child.wait()).await
    {
        Ok(Ok(st)) => st.code(),
        _ => {
            let _ = child.kill().await;
            Some(137)
        }
    };
    for p in pumps {
        let _ = p.await;
    }
    reader.abort();
    let _ = wtx.send(status_json(code, None)).await;
    drop(wtx);
    let _ = writer.await;
}

async fn logs(
    State(sh): State<Arc<Shared>>,
    Path((ns, pod, c)): Path<(String, String, String)>,
    RawQuery(q): RawQuery,
) -> Response {
    let q = query(&q);
    let Some(e) = entry(&sh, &ns, &pod, &c) else {
        return (
            StatusCode::NOT_FOUND,
            format!("container {c} of pod {ns}/{pod} is not on this node"),
        )
            .into_response();
    };
    let path = if flag(&q, "previous") {
        match e.previous_log {
            Some(p) => p,
            None => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!("previous terminated container \"{c}\" in pod \"{pod}\" not found"),
                )
                    .into_response();
            }
        }
    } else {
        e.log
    };
    let tail: Option<usize> =
        q.iter().find(|(k, _)| k == "tailLines").and_then(|(_, v)| v.parse().ok());
    let text = std::fs::read(&path).unwrap_or_default();
    let start = match tail {
        Some(n) => {
            let mut idx = text.len();
            let mut seen = 0;
            while idx > 0 {
                idx -= 1;
                if text[idx] == b'\n' && idx + 1 < text.len() {
                    seen += 1;
                    if seen > n {
                        idx += 1;
                        break;
                    }
                }
            }
            idx
        }
        None => 0,
    };
    let head = text[start..].to_vec();
    if !flag(&q, "follow") {
        return head.into_response();
    }
    // Follow: the file as it grows, until the container instance changes or goes.
    let offset = text.len() as u64;
    let stream = futures::stream::once(
        async move { Ok::<Bytes, std::io::Error>(Bytes::from(head)) },
    )
    .chain(futures::stream::unfold(
        (offset, sh, ns, pod, c, path),
        |(off, sh, ns, pod, c, path)| async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                if len > off {
                    let mut f = tokio::fs::File::open(&path).await.ok()?;
                    use tokio::io::AsyncSeekExt;
                    f.seek(std::io::SeekFrom::Start(off)).await.ok()?;
                    let mut buf = vec![0u8; (len - off) as usize];
                    f.read_exact(&mut buf).await.ok()?;
                    return Some((Ok(Bytes::from(buf)), (len, sh, ns, pod, c, path)));
                }
                let still = entry(&sh, &ns, &pod, &c).is_some_and(|e| e.log == path);
                if !still {
                    return None;
                }
            }
        },
    ));
    axum::body::Body::from_stream(stream).into_response()
}

pub fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
    ca_pem: &str,
) -> Result<rustls::ServerConfig> {
    let bad =
        |what: &str, e: &dyn std::fmt::Display| Error::Command(format!("kubelet TLS {what}: {e}"));
    let certs: Vec<_> = rustls_pemfile::certs(&mut std::io::BufReader::new(
        std::fs::File::open(cert).ctx(|| format!("open {}", cert.display()))?,
    ))
    .collect::<std::result::Result<_, _>>()
    .map_err(|e| bad("certificate", &e))?;
    let key = rustls_pemfile::private_key(&mut std::io::BufReader::new(
        std::fs::File::open(key).ctx(|| format!("open {}", key.display()))?,
    ))
    .map_err(|e| bad("key", &e))?
    .ok_or_else(|| Error::Command("kubelet TLS: no key".into()))?;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(c.map_err(|e| bad("CA", &e))?).map_err(|e| bad("CA", &e))?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .map_err(|e| bad("client verifier", &e))?;
    let mut cfg = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| bad("config", &e))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Serves the kubelet API on `addr` until cancelled.
pub async fn serve(sh: Arc<Shared>, addr: SocketAddr, tls: rustls::ServerConfig) -> Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/exec/{ns}/{pod}/{container}", get(exec).post(exec))
        .route("/exec/{ns}/{pod}/{uid}/{container}", get(exec_uid).post(exec_uid))
        .route("/containerLogs/{ns}/{pod}/{container}", get(logs))
        .with_state(sh);
    let listener =
        tokio::net::TcpListener::bind(addr).await.ctx(|| format!("kubelet: bind {addr}"))?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(Ok(tls)) =
                tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(tcp))
                    .await
            else {
                return;
            };
            let svc = hyper_util::service::TowerToHyperService::new(app);
            let _ =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
        });
    }
}
