//! The accept loop: HTTP/1.1 connections on the TCP or Unix listener, at most
//! `max_connections` at once (more wait in the backlog), each closed if its request headers do
//! not arrive within `header_read_timeout`; at shutdown, stop accepting and let the connections
//! finish their requests in flight (idle keep-alive connections close at once).

use crate::{Listener, Peer};
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

pub(crate) struct Limits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
}

/// How long shutdown waits for requests in flight (the handlers answer in milliseconds).
const DRAIN: Duration = Duration::from_secs(10);

enum Conn {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<(Conn, Peer)> {
        match self {
            Listener::Tcp(l) => {
                let (s, a) = l.accept().await?;
                // Small request/response pairs: do not wait to coalesce.
                let _ = s.set_nodelay(true);
                Ok((Conn::Tcp(s), Peer::Tcp(a)))
            }
            Listener::Unix(l) => l.accept().await.map(|(s, _)| (Conn::Unix(s), Peer::Unix)),
        }
    }
}

fn connection<I>(
    io: I,
    peer: Peer,
    app: Router,
    limits: &Limits,
    graceful: &GracefulShutdown,
    slot: OwnedSemaphorePermit,
) -> impl Future<Output = ()> + Send + 'static
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        app.clone().oneshot(req)
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(TokioIo::new(io), service);
    let conn = graceful.watch(conn);
    async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "connection ended with an error");
        }
        drop(slot);
    }
}

pub(crate) async fn serve(
    listener: Listener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = &mut shutdown => break,
        };
        let (conn, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: back off, keep serving.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        match conn {
            Conn::Tcp(s) => {
                tokio::spawn(connection(s, peer, app.clone(), &limits, &graceful, permit))
            }
            Conn::Unix(s) => {
                tokio::spawn(connection(s, peer, app.clone(), &limits, &graceful, permit))
            }
        };
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight after {DRAIN:?}: closing them");
    }
}
