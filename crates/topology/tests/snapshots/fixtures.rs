//! The `/sys` + `/proc` snapshots in `../shared/fixtures/fsroot`, extracted once.
//!
//! Each archive is extracted with the system `tar` into a `TempDir` under Cargo's test scratch
//! folder, then renamed to a name made of the archive's name, length and modification time, so
//! that later runs (and the other tests of this binary) reuse it instead of leaving a copy
//! behind every run; a changed archive gets a new name.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::UNIX_EPOCH;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/fsroot"
);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Snapshot {
    /// The H200 test machine: one GPU, 16 CPUs, one node, no NVMe.
    H200,
    /// The 2-core CI machine: nothing to find.
    Cpu2,
    /// hwloc's 2-socket Xeon with an NVMe drive (old kernel layout) and a partition.
    Em64t,
    /// hwloc's 4-package, 4-node machine with two root complexes.
    Intel40,
    /// hwloc's synthetic PCI localities: four root complexes on four nodes.
    FakePci,
}

static ROOTS: [OnceLock<PathBuf>; 5] = [const { OnceLock::new() }; 5];

/// Whether the snapshots are here; where the project's shared folder is not beside this
/// checkout (a fresh clone of the repository alone), says that the test skipped.
pub fn present() -> bool {
    let here = Path::new(FIXTURES).is_dir();
    if !here {
        eprintln!(
            "skipped: the /sys snapshots of the project's shared folder ({FIXTURES}) are not here"
        );
    }
    here
}

impl Snapshot {
    pub const ALL: [Snapshot; 5] = [
        Snapshot::H200,
        Snapshot::Cpu2,
        Snapshot::Em64t,
        Snapshot::Intel40,
        Snapshot::FakePci,
    ];

    fn archive(self) -> &'static str {
        match self {
            Snapshot::H200 => "h200-pcie-vm.tar.xz",
            Snapshot::Cpu2 => "cpu-vm-2core.tar.xz",
            Snapshot::Em64t => "hwloc-32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2",
            Snapshot::Intel40 => "hwloc-40intel64-2g2n4c+pcilocality.tar.bz2",
            Snapshot::FakePci => "hwloc-fakepcilocalities.tar.bz2",
        }
    }

    /// The snapshot's filesystem root, extracted on first use.
    pub fn root(self) -> &'static Path {
        ROOTS[self as usize].get_or_init(|| fsroot_of(&extract(self.archive())))
    }

    /// A file of the snapshot, trimmed (for deriving expectations from the data itself).
    pub fn file(self, path: &str) -> String {
        let full = self.root().join(path.trim_start_matches('/'));
        fs::read_to_string(&full)
            .unwrap_or_else(|e| panic!("{}: {e}", full.display()))
            .trim()
            .to_string()
    }
}

fn extract(archive: &str) -> PathBuf {
    let source = Path::new(FIXTURES).join(archive);
    let meta =
        fs::metadata(&source).unwrap_or_else(|e| panic!("fixture {}: {e}", source.display()));
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fsroot")
        .join(format!("{archive}-{}-{mtime}", meta.len()));
    if cache.exists() {
        return cache;
    }
    let parent = cache.parent().expect("cache has a parent");
    fs::create_dir_all(parent).expect("create the fixture cache folder");
    let staging = tempfile::tempdir_in(parent).expect("staging folder");
    let status = Command::new("tar")
        .arg("-xf")
        .arg(&source)
        .arg("-C")
        .arg(staging.path())
        .status()
        .expect("run tar");
    assert!(status.success(), "tar -xf {} failed", source.display());
    // Losing a race with another test process leaves its identical copy in place; the staging
    // folder is then removed when `staging` drops.
    let _ = fs::rename(staging.path(), &cache);
    cache
}

/// The hwloc archives hold one top-level folder; the others are the root themselves.
fn fsroot_of(dir: &Path) -> PathBuf {
    if dir.join("sys").is_dir() {
        return dir.to_path_buf();
    }
    let mut subdirs: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read the extracted folder")
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.join("sys").is_dir())
        .collect();
    assert_eq!(subdirs.len(), 1, "one snapshot folder in {}", dir.display());
    subdirs.remove(0)
}
