//! The accept loop: HTTP/1.1 connections on the TCP or Unix listener, at most
//! `max_connections` at once (more wait in the backlog). A client must send a request's headers
//! within `read_timeout`, and its body within `read_timeout` after them, or it gets 408 and its
//! connection is closed. Each request passes the [`guard`](crate::guard) before its body is
//! read. At shutdown, stop accepting, answer 503 to requests still waiting on their body, and
//! let the others finish (idle keep-alive connections close at once).
//!
//! Every error is JSON, also those hyper answers itself (a malformed request, 414, 431): the
//! connection's writes go through [`JsonErrors`].

use crate::routes::error;
use crate::{guard, Listener, Peer};
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::response::Response;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

pub(crate) struct Limits {
    pub max_connections: usize,
    pub read_timeout: Duration,
    pub max_body_bytes: usize,
    /// Host names accepted besides loopback ones (see `guard`).
    pub host_names: Vec<String>,
}

/// How long shutdown waits for requests in flight (the handlers answer in milliseconds).
const DRAIN: Duration = Duration::from_secs(10);
/// Header fields a request may have (hyper's default, said in the 431 answer).
const MAX_HEADERS: usize = 100;
/// Bytes of request line and headers a request may have.
const MAX_HEAD_BYTES: usize = 256 << 10;
/// The longest request target hyper takes (its own limit; 414 above).
const MAX_URI_BYTES: usize = 65_534;

enum Conn {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<(Conn, Peer, Option<SocketAddr>)> {
        match self {
            Listener::Tcp(l) => {
                let (s, a) = l.accept().await?;
                // Small request/response pairs: do not wait to coalesce.
                let _ = s.set_nodelay(true);
                let local = s.local_addr().ok();
                Ok((Conn::Tcp(s), Peer::Tcp(a), local))
            }
            Listener::Unix(l) => l
                .accept()
                .await
                .map(|(s, _)| (Conn::Unix(s), Peer::Unix, None)),
        }
    }
}

/// What one connection's requests are checked and read with.
struct ConnState {
    peer: Peer,
    local: Option<SocketAddr>,
    limits: Arc<Limits>,
    stopping: watch::Receiver<bool>,
    app: Router,
}

/// `resp` with `Connection: close`: the request's body was not (all) read, so the connection
/// cannot carry another request.
fn closing(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

enum BodyError {
    TooLarge,
    Read(hyper::Error),
}

/// Bytes of a body over the limit still read (and dropped) before the 413, so that a client
/// still sending reads the answer rather than a connection reset.
const LINGER_BYTES: usize = 1 << 20;

/// The whole body, refused past `max` bytes.
async fn read_body(mut body: Incoming, max: usize) -> Result<Bytes, BodyError> {
    use hyper::body::Body as _;
    let mut buf = Vec::new();
    let mut len = 0usize;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(BodyError::Read)?;
        if let Ok(data) = frame.into_data() {
            len = len.saturating_add(data.len());
            if len > max.saturating_add(LINGER_BYTES) {
                break;
            }
            if len <= max {
                buf.extend_from_slice(&data);
            }
        }
    }
    if len > max {
        return Err(BodyError::TooLarge);
    }
    Ok(Bytes::from(buf))
}

/// Check a request, read its body within the deadline (or until shutdown), then route it.
async fn handle(req: Request<Incoming>, cx: &ConnState) -> Response {
    let limits = &cx.limits;
    if let Err((status, msg)) = guard::check(&req, cx.peer, cx.local, &limits.host_names) {
        return closing(error(status, msg));
    }
    let too_large = || {
        closing(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is over {} bytes (max_body_bytes)",
                limits.max_body_bytes
            ),
        ))
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes.saturating_add(LINGER_BYTES) as u64) {
        return too_large();
    }
    let (mut parts, body) = req.into_parts();
    let mut stopping = cx.stopping.clone();
    let body = tokio::select! {
        r = tokio::time::timeout(limits.read_timeout, read_body(body, limits.max_body_bytes)) => {
            match r {
                Ok(Ok(b)) => b,
                Ok(Err(BodyError::TooLarge)) => return too_large(),
                Ok(Err(BodyError::Read(e))) => {
                    return closing(error(
                        StatusCode::BAD_REQUEST,
                        format!("the request body could not be read: {e}"),
                    ))
                }
                Err(_) => {
                    return closing(error(
                        StatusCode::REQUEST_TIMEOUT,
                        format!(
                            "the request body did not arrive within {:?} of its headers",
                            limits.read_timeout
                        ),
                    ))
                }
            }
        }
        // A client stalled in its body does not hold up shutdown.
        _ = stopping.wait_for(|s| *s) => {
            return closing(error(StatusCode::SERVICE_UNAVAILABLE, "the daemon is shutting down"))
        }
    };
    parts.extensions.insert(ConnectInfo(cx.peer));
    let req = Request::from_parts(parts, Body::from(body));
    match cx.app.clone().oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

fn connection<I>(
    io: I,
    cx: ConnState,
    graceful: &GracefulShutdown,
    slot: OwnedSemaphorePermit,
) -> impl Future<Output = ()> + Send + 'static
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let read_timeout = cx.limits.read_timeout;
    let cx = Arc::new(cx);
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let cx = cx.clone();
        async move { Ok::<_, std::convert::Infallible>(handle(req, &cx).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout)
        // A client that shuts its sending side after its request still gets the answer.
        .half_close(true)
        .max_headers(MAX_HEADERS)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(JsonErrors::new(io)), service);
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
    stopping: watch::Receiver<bool>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let limits = Arc::new(limits);
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
        let (conn, peer, local) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: back off, keep serving.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let cx = ConnState {
            peer,
            local,
            limits: limits.clone(),
            stopping: stopping.clone(),
            app: app.clone(),
        };
        match conn {
            Conn::Tcp(s) => tokio::spawn(connection(s, cx, &graceful, permit)),
            Conn::Unix(s) => tokio::spawn(connection(s, cx, &graceful, permit)),
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

/// A connection whose error answers from hyper itself — a request it cannot parse (400), a
/// request target over 64 KiB (414), too many or too large headers (431) — get a JSON body like
/// every other error. Those answers are a head with `content-length: 0` and nothing after it,
/// written on their own (the connection closes after them); the daemon's own answers always
/// have a body. Writes are not vectored, so hyper writes each head in one buffer.
struct JsonErrors<I> {
    io: I,
    /// A rewritten answer not yet written out.
    pending: Vec<u8>,
    sent: usize,
}

impl<I> JsonErrors<I> {
    fn new(io: I) -> Self {
        JsonErrors {
            io,
            pending: Vec::new(),
            sent: 0,
        }
    }
}

impl<I: AsyncWrite + Unpin> JsonErrors<I> {
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.sent < self.pending.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.pending[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.pending.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for JsonErrors<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for JsonErrors<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        if let Some(answer) = json_error_answer(buf) {
            self.pending = answer;
            // Written out now as far as the socket takes it, the rest on flush.
            if let Poll::Ready(Err(e)) = self.poll_pending(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// `head` — an error answer's head with `content-length: 0` and nothing after it — with a JSON
/// body saying what was wrong; `None` for anything else.
fn json_error_answer(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?.strip_suffix("\r\n\r\n")?;
    if text.contains("\r\n\r\n") {
        return None;
    }
    let mut lines = text.split("\r\n");
    let status_line = lines.next()?;
    let status: u16 = status_line
        .strip_prefix("HTTP/1.1 ")?
        .get(..3)?
        .parse()
        .ok()?;
    if !(400..600).contains(&status) {
        return None;
    }
    let fields: Vec<&str> = lines.collect();
    let named = |l: &str, n: &str| {
        l.split_once(':')
            .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case(n))
    };
    let empty = fields.iter().any(|l| {
        named(l, "content-length") && l.split_once(':').is_some_and(|(_, v)| v.trim() == "0")
    });
    if !empty || fields.iter().any(|l| named(l, "content-type")) {
        return None;
    }
    let msg = match status {
        400 => "malformed request: not a valid HTTP/1.1 request line and headers".to_string(),
        414 => format!("the request target (path and query) is over {MAX_URI_BYTES} bytes"),
        431 => format!(
            "the request's headers are too large: at most {MAX_HEADERS} fields and {} KiB",
            MAX_HEAD_BYTES >> 10
        ),
        _ => status_line
            .get("HTTP/1.1 ".len()..)
            .unwrap_or_default()
            .to_string(),
    };
    let body = serde_json::json!({ "error": msg }).to_string();
    let mut out = format!(
        "{status_line}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for l in fields
        .iter()
        .filter(|l| !named(l, "content-length") && !named(l, "connection"))
    {
        out.push_str(l);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_empty_error_heads_get_a_json_body_and_nothing_else_is_touched() {
        let head =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let out = String::from_utf8(json_error_answer(head).unwrap()).unwrap();
        let r = crate::client::parse_response(out.as_bytes()).unwrap();
        assert_eq!(r.status, 431);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("date"), Some("x"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert!(v["error"].as_str().unwrap().contains("100 fields"), "{v}");
        for other in [
            &b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}",
            b"{\"a\":1}",
        ] {
            assert_eq!(json_error_answer(other), None);
        }
    }
}
