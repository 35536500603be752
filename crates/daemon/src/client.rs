//! A minimal blocking HTTP/1.1 client for the daemon — one request per connection
//! (`Connection: close`) over its Unix socket or a TCP address — used by `hwceiling efficiency
//! --socket`, the tests and the load test. It reads `Content-Length` and chunked bodies and caps
//! what it accepts.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where the daemon is.
#[derive(Debug, Clone)]
pub enum Target {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Unix(p) => write!(f, "{}", p.display()),
            Target::Tcp(a) => write!(f, "{a}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The I/O error is in each message, and so not also a `source` (a chain printer would print it
/// twice).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the daemon at {target}: {err} (is `hwceiling serve` running?)")]
    Connect { target: String, err: std::io::Error },
    #[error("talking to the daemon at {target}: {err}")]
    Io { target: String, err: std::io::Error },
    #[error("the daemon at {target} sent a malformed response: {why}")]
    Malformed { target: String, why: String },
}

/// Largest response accepted (a profile is capped at 16 MiB).
const MAX_RESPONSE_BYTES: u64 = 32 << 20;

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

fn connect(target: &Target, timeout: Duration) -> std::io::Result<Box<dyn Stream>> {
    match target {
        Target::Unix(p) => {
            let s = std::os::unix::net::UnixStream::connect(p)?;
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))?;
            Ok(Box::new(s))
        }
        Target::Tcp(a) => {
            let s = std::net::TcpStream::connect_timeout(a, timeout)?;
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))?;
            s.set_nodelay(true)?;
            Ok(Box::new(s))
        }
    }
}

/// `s` percent-encoded for a URL query value (RFC 3986: everything but unreserved characters).
pub fn encode_query_value(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Send one request and read the whole response.
pub fn request(
    target: &Target,
    method: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Result<Response, ClientError> {
    let t = target.to_string();
    let mut stream = connect(target, timeout).map_err(|err| ClientError::Connect {
        target: t.clone(),
        err,
    })?;
    let io = |err| ClientError::Io {
        target: t.clone(),
        err,
    };
    let mut head = format!(
        "{method} {path_and_query} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).map_err(io)?;
    stream.write_all(body).map_err(io)?;
    stream.flush().map_err(io)?;
    let mut raw = Vec::new();
    stream
        .take(MAX_RESPONSE_BYTES + 1)
        .read_to_end(&mut raw)
        .map_err(io)?;
    if raw.len() as u64 > MAX_RESPONSE_BYTES {
        return Err(ClientError::Malformed {
            target: t,
            why: format!("larger than {MAX_RESPONSE_BYTES} bytes"),
        });
    }
    parse_response(&raw).map_err(|why| ClientError::Malformed { target: t, why })
}

/// `GET path` with `Accept: application/json`.
pub fn get_json(
    target: &Target,
    path_and_query: &str,
    timeout: Duration,
) -> Result<Response, ClientError> {
    request(
        target,
        "GET",
        path_and_query,
        &[("Accept", "application/json")],
        b"",
        timeout,
    )
}

/// Parse a complete HTTP/1.1 response.
pub fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "headers are not text")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("empty response")?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(format!("not HTTP/1.x: `{status_line}`"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line `{status_line}`"))?;
    let mut headers = Vec::new();
    for l in lines {
        let (n, v) = l
            .split_once(':')
            .ok_or_else(|| format!("bad header `{l}`"))?;
        headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let rest = &raw[end + 4..];
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let body = if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(rest)?
    } else if let Some(len) = find("content-length") {
        let n: usize = len
            .parse()
            .map_err(|_| format!("bad content-length `{len}`"))?;
        rest.get(..n)
            .ok_or("body shorter than its content-length")?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk size")?;
        let size_text = std::str::from_utf8(&data[..line_end]).map_err(|_| "bad chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size `{size_text}`"))?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = data.get(..size).ok_or("truncated chunk")?;
        out.extend_from_slice(chunk);
        data = data.get(size + 2..).ok_or("truncated chunk")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_keep_unreserved_characters_and_escape_the_rest() {
        assert_eq!(
            encode_query_value("warm_gpu0-peak.gbps~"),
            "warm_gpu0-peak.gbps~"
        );
        assert_eq!(encode_query_value("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn parses_length_chunked_and_bad_responses() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n\r\nhiEXTRA")
            .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hi"[..]));
        assert_eq!(r.header("x-a"), Some("b"));
        let r = parse_response(
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.text().as_str()), (404, "abcde"));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
        assert!(parse_response(b"SMTP 220\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }
}
