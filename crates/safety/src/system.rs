//! The system a journal changes and restores: PCI drivers, hugepages per NUMA node, hugetlbfs
//! mounts. [`Live`] is the running machine (sysfs and procfs under injectable roots); tests use
//! an in-memory system of their own.

use crate::pci::{Pci, Sysfs};
use std::io;
use std::path::{Path, PathBuf};

/// Everything a [`crate::Change`] touches.
pub trait System: Pci + Send {
    /// `nr_hugepages` of pages of `page_kib` KiB on `node` (`None`: the whole machine).
    fn nr_hugepages(&self, node: Option<u32>, page_kib: u64) -> io::Result<u64>;
    fn set_nr_hugepages(&self, node: Option<u32>, page_kib: u64, pages: u64) -> io::Result<()>;
    /// Free hugepages of that size on that node.
    fn free_hugepages(&self, node: Option<u32>, page_kib: u64) -> io::Result<u64>;
    /// Whether a hugetlbfs is mounted at `target`.
    fn hugetlbfs_mounted_at(&self, target: &Path) -> io::Result<bool>;
    fn mount_hugetlbfs(&self, target: &Path) -> io::Result<()>;
    fn unmount(&self, target: &Path) -> io::Result<()>;
}

/// The running machine.
#[derive(Debug, Clone)]
pub struct Live {
    pub sys: Sysfs,
    pub proc: PathBuf,
}

impl Default for Live {
    fn default() -> Self {
        Self {
            sys: Sysfs::default(),
            proc: PathBuf::from("/proc"),
        }
    }
}

impl Live {
    fn hugepages_dir(&self, node: Option<u32>, page_kib: u64) -> PathBuf {
        let leaf = format!("hugepages-{page_kib}kB");
        match node {
            Some(n) => self
                .sys
                .root
                .join(format!("devices/system/node/node{n}/hugepages"))
                .join(leaf),
            None => self.sys.root.join("kernel/mm/hugepages").join(leaf),
        }
    }

    fn read_u64(path: &Path) -> io::Result<u64> {
        let text = std::fs::read_to_string(path)?;
        text.trim().parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} holds {:?}, not a count", path.display(), text.trim()),
            )
        })
    }

    /// Mount points of hugetlbfs file systems (from `/proc/self/mounts`).
    pub fn hugetlbfs_mounts(&self) -> io::Result<Vec<PathBuf>> {
        let text = std::fs::read_to_string(self.proc.join("self/mounts"))?;
        Ok(hugetlbfs_mounts(&text))
    }
}

/// Mount points of hugetlbfs in a `/proc/self/mounts` text.
pub fn hugetlbfs_mounts(mounts: &str) -> Vec<PathBuf> {
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"hugetlbfs")).then(|| PathBuf::from(unescape_mount(f[1])))
        })
        .collect()
}

/// `/proc/self/mounts` writes space, tab, newline and backslash as octal escapes.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        // Three octal digits of a byte value (the first at most 3).
        let octal = b.get(i + 1..i + 4).filter(|d| {
            (b'0'..=b'3').contains(&d[0]) && d[1..].iter().all(|c| (b'0'..=b'7').contains(c))
        });
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Pci for Live {
    fn driver(&self, bdf: &str) -> io::Result<Option<String>> {
        self.sys.driver(bdf)
    }
    fn driver_override(&self, bdf: &str) -> io::Result<Option<String>> {
        self.sys.driver_override(bdf)
    }
    fn set_driver_override(&self, bdf: &str, driver: Option<&str>) -> io::Result<()> {
        self.sys.set_driver_override(bdf, driver)
    }
    fn unbind(&self, bdf: &str) -> io::Result<()> {
        self.sys.unbind(bdf)
    }
    fn probe(&self, bdf: &str) -> io::Result<()> {
        self.sys.probe(bdf)
    }
    fn bind(&self, bdf: &str, driver: &str) -> io::Result<()> {
        self.sys.bind(bdf, driver)
    }
}

impl System for Live {
    fn nr_hugepages(&self, node: Option<u32>, page_kib: u64) -> io::Result<u64> {
        Self::read_u64(&self.hugepages_dir(node, page_kib).join("nr_hugepages"))
    }

    fn set_nr_hugepages(&self, node: Option<u32>, page_kib: u64, pages: u64) -> io::Result<()> {
        let path = self.hugepages_dir(node, page_kib).join("nr_hugepages");
        let set = || {
            std::fs::write(&path, format!("{pages}\n")).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("writing {pages} to {}: {e}", path.display()),
                )
            })
        };
        set()?;
        if Self::read_u64(&path)? < pages {
            // Free memory too fragmented for whole pages: compact it (the kernel moves movable
            // pages together; nothing to put back) and ask once more.
            let _ = std::fs::write(self.proc.join("sys/vm/compact_memory"), "1\n");
            set()?;
        }
        Ok(())
    }

    fn free_hugepages(&self, node: Option<u32>, page_kib: u64) -> io::Result<u64> {
        Self::read_u64(&self.hugepages_dir(node, page_kib).join("free_hugepages"))
    }

    fn hugetlbfs_mounted_at(&self, target: &Path) -> io::Result<bool> {
        Ok(self.hugetlbfs_mounts()?.iter().any(|m| m == target))
    }

    fn mount_hugetlbfs(&self, target: &Path) -> io::Result<()> {
        let c = |s: &str| std::ffi::CString::new(s).map_err(io::Error::other);
        let t = c(&target.to_string_lossy())?;
        let fstype = c("hugetlbfs")?;
        let source = c("nodev")?;
        // SAFETY: all pointers are valid NUL-terminated strings that outlive the call; data is
        // null (no options).
        let rc = unsafe {
            libc::mount(
                source.as_ptr(),
                t.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("mounting hugetlbfs at {}: {e}", target.display()),
            ));
        }
        Ok(())
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        let t = std::ffi::CString::new(target.to_string_lossy().as_bytes())
            .map_err(io::Error::other)?;
        // SAFETY: a valid NUL-terminated path that outlives the call.
        if unsafe { libc::umount(t.as_ptr()) } == 0 {
            return Ok(());
        }
        let mut e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EBUSY) {
            // Still mapped, by this process's SPDK environment (DPDK keeps its hugepages until
            // the process exits) or by a job that outlived it: detached from the file system
            // now, freed when the last mapping goes.
            // SAFETY: as above.
            if unsafe { libc::umount2(t.as_ptr(), libc::MNT_DETACH) } == 0 {
                return Ok(());
            }
            e = io::Error::last_os_error();
        }
        Err(io::Error::new(
            e.kind(),
            format!("unmounting {}: {e}", target.display()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hugetlbfs_mounts_are_read_with_their_escapes() {
        let m = "sysfs /sys sysfs rw 0 0\n\
                 hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n\
                 nodev /mnt/huge\\040pages hugetlbfs rw 0 0\n\
                 tmpfs /run tmpfs rw 0 0\n";
        assert_eq!(
            hugetlbfs_mounts(m),
            vec![
                PathBuf::from("/dev/hugepages"),
                PathBuf::from("/mnt/huge pages")
            ]
        );
        assert_eq!(unescape_mount("a\\134b\\9"), "a\\b\\9");
    }
}
