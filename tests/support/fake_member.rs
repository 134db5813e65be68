//! A misbehaving "etcd member" on 127.0.0.1:0 for the bad-input tests: /metrics and
//! /health answer garbage, binary, a body beyond the cap, a trickle (slowloris), 404 or
//! 500. It speaks no gRPC, so the Status RPC fails too.
#![allow(dead_code)]

use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misbehaviour {
    Garbage,
    Binary,
    Huge,
    Slowloris,
    NotFound,
    ServerError,
}

async fn page(State(m): State<Misbehaviour>) -> Response {
    match m {
        Misbehaviour::Garbage => "lorem ipsum {{{ etcd_server_leader_changes_seen_total\n# TYPE broken\nnot a metric line at all\n".into_response(),
        Misbehaviour::Binary => (0..=255u8).cycle().take(64 * 1024).collect::<Vec<u8>>().into_response(),
        Misbehaviour::Huge => {
            // 17 MiB in 64 KiB chunks, past the 16 MiB cap.
            let chunks = futures::stream::iter((0..272).map(|_| Ok::<_, std::convert::Infallible>(Bytes::from(vec![b'#'; 64 * 1024]))));
            Response::new(Body::from_stream(chunks))
        }
        Misbehaviour::Slowloris => {
            let trickle = futures::stream::unfold((), |_| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Some((Ok::<_, std::convert::Infallible>(Bytes::from_static(b"e")), ()))
            });
            Response::new(Body::from_stream(trickle))
        }
        Misbehaviour::NotFound => (StatusCode::NOT_FOUND, "404 page not found").into_response(),
        Misbehaviour::ServerError => (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response(),
    }
}

async fn health(State(m): State<Misbehaviour>) -> Response {
    match m {
        Misbehaviour::Garbage => "{\"status\": \"probably fine\"".into_response(),
        other => page(State(other)).await,
    }
}

/// Serves the misbehaviour until the returned task is dropped; returns its base URL.
pub async fn start(m: Misbehaviour) -> (String, tokio::task::JoinHandle<()>) {
    let app =
        Router::new().route("/metrics", get(page)).route("/health", get(health)).with_state(m);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, task)
}
