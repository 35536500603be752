//! `hwceiling serve` on TCP, end to end: `--listen localhost:PORT`, a web page's `Host` refused,
//! and SIGTERM not held up by a client stalled in its request body.

use hwc_daemon::client::{self, Target};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(10);

/// `hwceiling serve --listen localhost:0` over an empty folder, and the address it listens on
/// (from its log line).
fn serve_on_localhost(
    dir: &std::path::Path,
) -> (Child, SocketAddr, BufReader<std::process::ChildStderr>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hwceiling"))
        .args(["serve", "--listen", "localhost:0", "-o"])
        .arg(dir)
        .env("HWCEILING_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "serve exited");
        if !line.contains("listening") {
            continue;
        }
        let port: String = line
            .split("127.0.0.1:")
            .nth(1)
            .unwrap_or_else(|| panic!("not on 127.0.0.1: {line}"))
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        break SocketAddr::from(([127, 0, 0, 1], port.parse::<u16>().unwrap()));
    };
    (child, addr, stderr)
}

fn sigterm(child: &Child) {
    // SAFETY: kill(2) on our own child, which has not been waited for yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
}

#[test]
fn listen_localhost_serves_on_loopback_and_sigterm_does_not_wait_for_a_stalled_body() {
    let d = tempfile::tempdir().unwrap();
    let (mut child, addr, _stderr) = serve_on_localhost(d.path());
    let target = Target::Tcp(addr);
    let r = client::get_json(&target, "/healthz", TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let r = client::request(
        &target,
        "GET",
        "/healthz",
        &[("Origin", "http://evil.example")],
        b"",
        TIMEOUT,
    )
    .unwrap();
    assert_eq!(r.status, 403, "{}", r.text());

    // A client that sends headers promising 100 bytes of body, then one byte, and waits.
    let mut stalled = std::net::TcpStream::connect(addr).unwrap();
    stalled
        .write_all(b"POST /v1/profile/run HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();
    stalled.set_read_timeout(Some(TIMEOUT)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    sigterm(&child);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    // Not the 10 s body deadline, nor the 10 s drain.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let mut answer = Vec::new();
    let _ = stalled.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
}
