//! Which processes hold a device open: every `/proc/PID/fd/*` whose link names one of the
//! device's nodes. A drive in use is refused, naming who holds it; no process is ever killed.

use std::path::{Path, PathBuf};

/// A process that holds one of the device nodes open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub command: String,
    /// The node it holds.
    pub node: PathBuf,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (pid {}) has {} open",
            self.command,
            self.pid,
            self.node.display()
        )
    }
}

/// The processes other than this one under `proc_root` holding any of `nodes` open. Processes
/// whose descriptors this user may not read are passed over (binding needs root, who reads all).
pub fn open_by(proc_root: &Path, nodes: &[PathBuf]) -> Vec<Holder> {
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir(proc_root) else {
        return found;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if nodes.contains(&target)
                && !found
                    .iter()
                    .any(|h: &Holder| h.pid == pid && h.node == target)
            {
                let command = std::fs::read_to_string(p.path().join("comm"))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default();
                found.push(Holder {
                    pid,
                    command,
                    node: target,
                });
            }
        }
    }
    found.sort_by(|a, b| (a.pid, &a.node).cmp(&(b.pid, &b.node)));
    found
}
