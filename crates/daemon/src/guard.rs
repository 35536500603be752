//! What a web page in a browser on the same machine must not do to the daemon, checked on every
//! request before its body is read:
//!
//! - over TCP, a `Host` that is not a loopback name or address (`localhost`, `127.0.0.0/8`,
//!   `[::1]`), the address the connection came in on, or a name the daemon was configured to
//!   listen by, is refused (403): a DNS-rebinding page sends its own name;
//! - a request with an `Origin` that is not the daemon's own (`http://` and the request's
//!   `Host`; a Unix socket has no origin, so any `Origin` there) is refused (403): only a
//!   browser sends `Origin`, and the daemon serves no pages;
//! - a `POST` without `Content-Type: application/json` is refused (415): a page can send
//!   `text/plain` or a form without asking first (no CORS preflight), but not JSON.
//!
//! A request without `Host` (HTTP/1.0) is not a browser's, and passes.

use crate::Peer;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use std::net::{IpAddr, SocketAddr};

/// Whether the request may go on; if not, its status and why, in the caller's terms.
pub(crate) fn check<B>(
    req: &Request<B>,
    peer: Peer,
    local: Option<SocketAddr>,
    host_names: &[String],
) -> Result<(), (StatusCode, String)> {
    let headers = req.headers();
    let forbidden = |msg: String| Err((StatusCode::FORBIDDEN, msg));
    let host = text(headers, header::HOST);
    if let (Peer::Tcp(_), Some(host)) = (peer, host) {
        if !host_allowed(host, local, host_names) {
            return forbidden(format!(
                "Host `{host}` is not this daemon's: it answers to localhost, a loopback address \
                 or the name it listens by (a web page's name is refused)"
            ));
        }
    }
    if let Some(origin) = text(headers, header::ORIGIN) {
        let own = match (peer, host) {
            (Peer::Tcp(_), Some(host)) => Some(format!("http://{host}")),
            _ => None,
        };
        if !own.as_ref().is_some_and(|o| o.eq_ignore_ascii_case(origin)) {
            return forbidden(format!(
                "requests from web pages are refused: Origin `{origin}` is not this daemon's"
            ));
        }
    }
    if req.method() == Method::POST && !is_json(text(headers, header::CONTENT_TYPE)) {
        return Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "{} takes a JSON body: send `Content-Type: application/json`{}",
                req.uri().path(),
                text(headers, header::CONTENT_TYPE)
                    .map(|t| format!(" (not `{t}`)"))
                    .unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// A header's value as text (one that is not text is as good as absent, except for `Host` and
/// `Origin`, which then match nothing).
fn text(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(&name).map(|v| v.to_str().unwrap_or("\u{fffd}"))
}

fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|t| {
        t.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// `host[:port]` or `[v6][:port]`: the name or address, lower-cased, without a trailing dot.
fn host_name(host: &str) -> String {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        },
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn host_allowed(host: &str, local: Option<SocketAddr>, host_names: &[String]) -> bool {
    let name = host_name(host);
    if name == "localhost" || host_names.iter().any(|n| host_name(n) == name) {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(ip) => {
            let ip = ip.to_canonical();
            ip.is_loopback() || local.is_some_and(|l| l.ip().to_canonical() == ip)
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_that_are_loopback_the_local_address_or_configured_pass() {
        let local: SocketAddr = "192.0.2.7:9187".parse().unwrap();
        let names = ["node1.example".to_string()];
        for ok in [
            "localhost",
            "LOCALHOST:9187",
            "localhost.",
            "127.0.0.1",
            "127.3.4.5:80",
            "[::1]:9187",
            "[::ffff:127.0.0.1]",
            "192.0.2.7:9187",
            "node1.example:9187",
        ] {
            assert!(host_allowed(ok, Some(local), &names), "{ok}");
        }
        for bad in [
            "evil.example",
            "localhost.evil.example",
            "192.0.2.8",
            "[2001:db8::1]",
            "",
            "\u{fffd}",
        ] {
            assert!(!host_allowed(bad, Some(local), &names), "{bad}");
        }
    }
}
