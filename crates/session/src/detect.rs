//! What the machine is: the live one, or a snapshot of one's `/sys` and `/proc`.

use crate::SessionError;
use hwc_model::Topology;
use hwc_topology::Sources;
use std::path::Path;
use std::time::{Duration, Instant};

/// Detect the live machine (`fsroot` None) or a snapshot, filling what only the live system
/// can tell (hostname, kernel) when the files did not.
pub fn detect(fsroot: Option<&Path>) -> Result<Topology, SessionError> {
    match fsroot {
        Some(root) => {
            if !root.join("sys").is_dir() && !root.join("proc").is_dir() {
                return Err(SessionError::Refused(format!(
                    "{} has neither sys/ nor proc/: not a filesystem root",
                    root.display()
                )));
            }
            Ok(hwc_topology::detect(&Sources::fsroot(root)))
        }
        None => {
            let mut src = Sources::live();
            if Path::new("deps").is_dir() {
                src.deps_dir = Some("deps".into());
            }
            wait_for_starting_nvme(&src);
            let mut t = hwc_topology::detect(&src);
            if t.platform.hostname.is_none() {
                t.platform.hostname = live_hostname();
            }
            Ok(t)
        }
    }
}

/// How long a live detection waits for NVMe controllers the kernel is still starting.
/// Starting one takes well under a second; a drive that `bind` or `restore` just put back on
/// `nvme` is one, and a command that names it by serial right after must find it.
const NVME_START_WAIT: Duration = Duration::from_secs(10);

/// Waits (at most [`NVME_START_WAIT`]) until no NVMe controller is starting. A controller still
/// starting after that is detected as it is: without identity or namespaces, so no name
/// selects it and no write gate passes it.
fn wait_for_starting_nvme(src: &Sources) {
    let deadline = Instant::now() + NVME_START_WAIT;
    while !hwc_topology::starting_nvme_controllers(src).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn live_hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length; gethostname NUL-terminates within it on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).to_string();
    name.split('.')
        .next()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}
