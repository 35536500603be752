//! Where the daemon may listen: a Unix socket (mode 0660, a stale one replaced, a live one
//! refused), or a TCP address that must be loopback unless the operator says otherwise; and
//! which callers count as local.

use crate::{DaemonError, Peer};
use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// `$XDG_RUNTIME_DIR/hwceiling.sock` for a user session, `/run/hwceiling/hwceiling.sock`
/// otherwise (the systemd unit's `RuntimeDirectory=hwceiling`).
pub fn default_socket_path() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("hwceiling.sock"),
        None => PathBuf::from("/run/hwceiling/hwceiling.sock"),
    }
}

/// Refuse a non-loopback TCP address unless `public` is set.
pub fn check_listen_addr(addr: SocketAddr, public: bool) -> Result<(), DaemonError> {
    if public || addr.ip().to_canonical().is_loopback() {
        Ok(())
    } else {
        Err(DaemonError::NotLoopback(addr))
    }
}

/// A `--listen` address: `ADDRESS:PORT`, `[IPv6]:PORT`, or `NAME:PORT` resolved (`localhost`
/// is 127.0.0.1, whatever the resolver says; another name's first IPv4 address, else its first).
/// The name comes back too, as one the daemon answers to (`Config::host_names`).
pub fn resolve_listen(spec: &str) -> Result<(SocketAddr, Option<String>), DaemonError> {
    use std::net::{Ipv4Addr, ToSocketAddrs};
    if let Ok(addr) = spec.parse::<SocketAddr>() {
        return Ok((addr, None));
    }
    let bad = || DaemonError::BadListen(spec.to_string());
    let (name, port) = spec.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if name.is_empty() || name.contains(':') {
        return Err(bad());
    }
    if name.eq_ignore_ascii_case("localhost") {
        return Ok((
            SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            Some(name.into()),
        ));
    }
    let resolve = |cause| DaemonError::Resolve {
        spec: spec.to_string(),
        cause,
    };
    let addrs: Vec<SocketAddr> = (name, port).to_socket_addrs().map_err(resolve)?.collect();
    let addr = addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| resolve(std::io::ErrorKind::NotFound.into()))?;
    Ok((addr, Some(name.to_string())))
}

/// A caller on this machine: any Unix-socket peer, or a TCP peer from a loopback address.
pub fn is_local_peer(peer: &Peer) -> bool {
    match peer {
        Peer::Unix => true,
        Peer::Tcp(a) => a.ip().to_canonical().is_loopback(),
    }
}

/// Bind a Unix socket at `path` with mode 0660. A socket file left by a daemon that is gone is
/// replaced; one that still answers, or any other kind of file, is refused. Needs a Tokio
/// runtime.
pub fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, DaemonError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(DaemonError::io(format!(
            "cannot create {}",
            parent.display()
        )))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(DaemonError::SocketInUse(path.to_path_buf()));
            }
            std::fs::remove_file(path).map_err(DaemonError::io(format!(
                "cannot remove the stale socket {}",
                path.display()
            )))?;
        }
        Ok(_) => return Err(DaemonError::NotASocket(path.to_path_buf())),
        Err(_) => {}
    }
    let std_listener = std::os::unix::net::UnixListener::bind(path).map_err(DaemonError::io(
        format!("cannot listen on {}", path.display()),
    ))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(
        DaemonError::io(format!("cannot set the mode of {}", path.display())),
    )?;
    std_listener
        .set_nonblocking(true)
        .map_err(DaemonError::io("cannot make the socket non-blocking"))?;
    tokio::net::UnixListener::from_std(std_listener).map_err(DaemonError::io(
        "cannot register the socket with the runtime",
    ))
}

/// The socket file this daemon created, removed at shutdown unless something replaced it.
pub(crate) struct SocketFile {
    path: PathBuf,
    inode: Option<(u64, u64)>,
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.file_type().is_socket())
        .map(|m| (m.dev(), m.ino()))
}

impl SocketFile {
    pub fn new(path: PathBuf) -> Self {
        let inode = identity(&path);
        SocketFile { path, inode }
    }

    pub fn remove(self) {
        if self.inode.is_some() && identity(&self.path) == self.inode {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_unless_public() {
        let lo: SocketAddr = "127.0.0.1:9100".parse().unwrap();
        let lo6: SocketAddr = "[::1]:9100".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:9100".parse().unwrap();
        let lan: SocketAddr = "192.0.2.10:9100".parse().unwrap();
        assert!(check_listen_addr(lo, false).is_ok());
        assert!(check_listen_addr(lo6, false).is_ok());
        let e = check_listen_addr(any, false).unwrap_err().to_string();
        assert!(e.contains("--listen-public"), "{e}");
        assert!(check_listen_addr(lan, false).is_err());
        assert!(check_listen_addr(any, true).is_ok());
    }

    #[test]
    fn listen_names_resolve_and_localhost_is_loopback() {
        let (a, name) = resolve_listen("localhost:9187").unwrap();
        assert_eq!(
            (a, name.as_deref()),
            ("127.0.0.1:9187".parse().unwrap(), Some("localhost"))
        );
        assert!(check_listen_addr(a, false).is_ok());
        assert_eq!(
            resolve_listen("[::1]:80").unwrap(),
            ("[::1]:80".parse().unwrap(), None)
        );
        for bad in [
            "localhost",
            "localhost:http",
            ":80",
            "::1:80",
            "localhost:70000",
        ] {
            let e = resolve_listen(bad).unwrap_err().to_string();
            assert!(e.contains("NAME:PORT"), "{bad}: {e}");
        }
    }

    #[test]
    fn local_peers() {
        assert!(is_local_peer(&Peer::Unix));
        assert!(is_local_peer(&Peer::Tcp("127.0.0.5:1".parse().unwrap())));
        assert!(is_local_peer(&Peer::Tcp(
            "[::ffff:127.0.0.1]:1".parse().unwrap()
        )));
        assert!(!is_local_peer(&Peer::Tcp("192.0.2.1:1".parse().unwrap())));
        assert!(!is_local_peer(&Peer::Tcp(
            "[2001:db8::1]:1".parse().unwrap()
        )));
    }
}
