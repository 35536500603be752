//! Which libraries, drivers and tools the benchmark paths need are present, with the evidence
//! and, when missing, how to get them (the spec's install instructions).
//!
//! Library directories and device files are looked up inside the filesystem root; `PATH`,
//! `LD_LIBRARY_PATH` and the deps folder are the user's own environment, on the host.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use hwc_model::topology::ToolStatus;

use crate::fsroot::FsRoot;
use crate::parse::meminfo_value;
use crate::Sources;

/// Library directories searched inside the root; a component ending in `*` matches by prefix.
fn library_dirs() -> [String; 9] {
    let (triplet, target) = match std::env::consts::ARCH {
        "aarch64" => ("aarch64-linux-gnu", "sbsa-linux"),
        _ => ("x86_64-linux-gnu", "x86_64-linux"),
    };
    [
        format!("/usr/lib/{triplet}"),
        "/usr/lib64".into(),
        "/usr/lib".into(),
        format!("/lib/{triplet}"),
        "/lib64".into(),
        "/usr/local/cuda*/lib64".into(),
        format!("/usr/local/cuda*/targets/{target}/lib"),
        "/usr/local/nvidia/lib64".into(),
        "/usr/local/gdrcopy*/lib*".into(),
    ]
}

const GDS_HINT: &str = "install GDS: sudo dnf install nvidia-gds nvidia-fs-dkms";
const GDRCOPY_HINT: &str = "build GDRCopy from github.com/NVIDIA/gdrcopy (make lib lib_install)";

/// (tool name, library file, install hint) for the shared libraries the backends load.
const LIBRARIES: [(&str, &str, &str); 4] = [
    (
        "libcuda",
        "libcuda.so.1",
        "install the NVIDIA driver (it provides libcuda.so.1)",
    ),
    (
        "libnvidia-ml",
        "libnvidia-ml.so.1",
        "install the NVIDIA driver (it provides libnvidia-ml.so.1)",
    ),
    ("libcufile", "libcufile.so.0", GDS_HINT),
    ("libgdrapi", "libgdrapi.so.2", GDRCOPY_HINT),
];

/// What a probe found: whether the thing is there, and what was looked at.
struct Finding {
    present: bool,
    evidence: String,
}

impl Finding {
    fn found(evidence: impl Into<String>) -> Self {
        Self {
            present: true,
            evidence: evidence.into(),
        }
    }

    fn missing(evidence: impl Into<String>) -> Self {
        Self {
            present: false,
            evidence: evidence.into(),
        }
    }

    fn status(self, name: &str, hint: &str) -> ToolStatus {
        ToolStatus {
            name: name.to_string(),
            present: self.present,
            evidence: self.evidence,
            install_hint: (!self.present).then(|| hint.to_string()),
        }
    }
}

/// One status per tool, in a fixed order.
pub(crate) fn probe(fs: &FsRoot, src: &Sources) -> Vec<ToolStatus> {
    let mut tools: Vec<ToolStatus> = LIBRARIES
        .iter()
        .map(|(name, file, hint)| library(fs, src, file).status(name, hint))
        .collect();
    tools.extend([
        gdrdrv(fs).status(
            "gdrdrv",
            "build GDRCopy from github.com/NVIDIA/gdrcopy and load gdrdrv (sudo ./insmod.sh)",
        ),
        nvidia_fs(fs).status(
            "nvidia_fs",
            "sudo dnf install nvidia-gds nvidia-fs-dkms, then sudo modprobe nvidia_fs",
        ),
        spdk_nvme_perf(src).status(
            "spdk_nvme_perf",
            "build SPDK and point deps/spdk-build at it (bin/spdk_nvme_perf)",
        ),
        vfio_pci(fs).status(
            "vfio-pci",
            "sudo modprobe vfio-pci (SPDK's scripts/setup.sh binds NVMe drives to it)",
        ),
        hugepages(fs).status(
            "hugepages",
            "reserve hugepages: sudo HUGEMEM=4096 deps/spdk/scripts/setup.sh",
        ),
    ]);
    tools
}

fn library(fs: &FsRoot, src: &Sources, file: &str) -> Finding {
    let patterns = library_dirs();
    let in_root = patterns
        .iter()
        .flat_map(|pattern| expand(fs, pattern))
        .map(|dir| dir.join(file))
        .find(|path| fs.exists(path));
    let on_host = || host_dirs(src.ld_library_path.as_deref()).find_map(|d| host_file(&d, file));
    match in_root.or_else(on_host) {
        Some(path) => Finding::found(path.display().to_string()),
        None => {
            let mut searched = patterns.join(", ");
            if src.ld_library_path.is_some() {
                searched.push_str(", LD_LIBRARY_PATH");
            }
            Finding::missing(format!("{file} not found in {searched}"))
        }
    }
}

/// Directories matching a pattern whose components may end in `*` (prefix match).
fn expand(fs: &FsRoot, pattern: &str) -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from("/")];
    for part in pattern.split('/').filter(|p| !p.is_empty()) {
        dirs = match part.strip_suffix('*') {
            Some(prefix) => dirs
                .iter()
                .flat_map(|dir| {
                    fs.names(dir)
                        .into_iter()
                        .filter(|name| name.starts_with(prefix))
                        .map(move |name| dir.join(name))
                })
                .collect(),
            None => dirs.iter().map(|dir| dir.join(part)).collect(),
        };
    }
    dirs
}

/// The directories of a `PATH`-style variable.
fn host_dirs(var: Option<&OsStr>) -> impl Iterator<Item = PathBuf> + '_ {
    var.into_iter().flat_map(std::env::split_paths)
}

fn host_file(dir: &Path, file: &str) -> Option<PathBuf> {
    let path = dir.join(file);
    path.is_file().then_some(path)
}

fn gdrdrv(fs: &FsRoot) -> Finding {
    if fs.exists("/dev/gdrdrv") {
        Finding::found("/dev/gdrdrv exists")
    } else {
        Finding::missing("/dev/gdrdrv not found")
    }
}

fn nvidia_fs(fs: &FsRoot) -> Finding {
    if let Some(version) = fs.text("/proc/driver/nvidia-fs/version") {
        let first = version.lines().next().unwrap_or_default();
        return Finding::found(format!("/proc/driver/nvidia-fs/version: {first}"));
    }
    let loaded = fs.read("/proc/modules").is_some_and(|modules| {
        modules
            .lines()
            .any(|l| l.split_whitespace().next() == Some("nvidia_fs"))
    });
    if loaded {
        Finding::found("nvidia_fs listed in /proc/modules")
    } else {
        Finding::missing("no /proc/driver/nvidia-fs/version and nvidia_fs not in /proc/modules")
    }
}

fn spdk_nvme_perf(src: &Sources) -> Finding {
    const BIN: &str = "spdk_nvme_perf";
    let deps_bins: Vec<PathBuf> = src
        .deps_dir
        .iter()
        .flat_map(|deps| [deps.join("spdk-build/bin"), deps.join("spdk/build/bin")])
        .collect();
    let found = host_dirs(src.path_env.as_deref())
        .chain(deps_bins.iter().cloned())
        .find_map(|dir| host_file(&dir, BIN));
    if let Some(path) = found {
        return Finding::found(path.display().to_string());
    }
    let mut searched: Vec<String> = deps_bins.iter().map(|d| d.display().to_string()).collect();
    if src.path_env.is_some() {
        searched.insert(0, "PATH".to_string());
    }
    if searched.is_empty() {
        return Finding::missing(format!("{BIN}: no PATH and no deps folder to search"));
    }
    Finding::missing(format!("{BIN} not found in {}", searched.join(", ")))
}

fn vfio_pci(fs: &FsRoot) -> Finding {
    const DRIVER: &str = "/sys/bus/pci/drivers/vfio-pci";
    if !fs.exists(DRIVER) {
        return Finding::missing(format!("{DRIVER} not found (module not loaded)"));
    }
    let bound = fs
        .names(DRIVER)
        .iter()
        .filter(|name| name.contains(':') && name.contains('.'))
        .count();
    Finding::found(format!("{DRIVER} exists ({bound} devices bound)"))
}

fn hugepages(fs: &FsRoot) -> Finding {
    const SIZES: &str = "/sys/kernel/mm/hugepages";
    let pools: Vec<(String, u64)> = fs
        .names(SIZES)
        .into_iter()
        .filter_map(|size| {
            let count = fs.parse(format!("{SIZES}/{size}/nr_hugepages"))?;
            Some((size, count))
        })
        .collect();
    if !pools.is_empty() {
        let listed: Vec<String> = pools.iter().map(|(s, n)| format!("{s}: {n}")).collect();
        let evidence = format!("{SIZES}: {}", listed.join(", "));
        let reserved = pools.iter().any(|(_, n)| *n > 0);
        return Finding {
            present: reserved,
            evidence,
        };
    }
    match fs
        .read("/proc/meminfo")
        .and_then(|m| meminfo_value(&m, "HugePages_Total"))
    {
        Some(total) => Finding {
            present: total > 0,
            evidence: format!("/proc/meminfo HugePages_Total: {total}"),
        },
        None => {
            Finding::missing("no /sys/kernel/mm/hugepages and no HugePages_Total in /proc/meminfo")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn touch(root: &Path, path: &str) {
        let full = root.join(path.trim_start_matches('/'));
        fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        fs::write(full, "x\n").expect("write");
    }

    fn by_name<'a>(tools: &'a [ToolStatus], name: &str) -> &'a ToolStatus {
        tools.iter().find(|t| t.name == name).expect("tool listed")
    }

    #[test]
    fn an_empty_root_has_nothing_and_says_how_to_get_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tools = probe(&FsRoot::new(dir.path()), &Sources::fsroot(dir.path()));
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "libcuda",
                "libnvidia-ml",
                "libcufile",
                "libgdrapi",
                "gdrdrv",
                "nvidia_fs",
                "spdk_nvme_perf",
                "vfio-pci",
                "hugepages"
            ]
        );
        for t in &tools {
            assert!(!t.present, "{t:?}");
            assert!(t.install_hint.is_some(), "{t:?}");
        }
        assert!(by_name(&tools, "libcufile")
            .install_hint
            .as_deref()
            .is_some_and(|h| h.contains("nvidia-gds nvidia-fs-dkms")));
        assert!(by_name(&tools, "libcuda")
            .evidence
            .contains("/usr/local/cuda*/lib64"));
    }

    #[test]
    fn finds_files_in_globbed_dirs_deps_and_procfs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        let deps = dir.path().join("deps");
        touch(&root, "/usr/local/cuda-12.9/lib64/libcufile.so.0");
        touch(&root, "/usr/local/gdrcopy-2.4/lib64/libgdrapi.so.2");
        touch(&root, "/dev/gdrdrv");
        fs::create_dir_all(root.join("sys/bus/pci/drivers/vfio-pci/0000:01:00.0")).expect("mkdir");
        fs::create_dir_all(root.join("proc")).expect("mkdir");
        fs::write(root.join("proc/modules"), "nvidia_fs 1 0 - Live 0x0\n").expect("write");
        fs::create_dir_all(root.join("sys/kernel/mm/hugepages/hugepages-2048kB")).expect("mkdir");
        fs::write(
            root.join("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
            "1024\n",
        )
        .expect("write");
        touch(&deps, "/spdk-build/bin/spdk_nvme_perf");
        let src = Sources {
            deps_dir: Some(deps.clone()),
            ..Sources::fsroot(&root)
        };
        let tools = probe(&FsRoot::new(&root), &src);
        let present: Vec<&str> = tools
            .iter()
            .filter(|t| t.present)
            .map(|t| t.name.as_str())
            .collect();
        let expected = [
            "libcufile",
            "libgdrapi",
            "gdrdrv",
            "nvidia_fs",
            "spdk_nvme_perf",
            "vfio-pci",
            "hugepages",
        ];
        assert_eq!(present, expected);
        assert_eq!(
            by_name(&tools, "libgdrapi").evidence,
            "/usr/local/gdrcopy-2.4/lib64/libgdrapi.so.2"
        );
        assert!(by_name(&tools, "vfio-pci")
            .evidence
            .contains("(1 devices bound)"));
        assert_eq!(
            by_name(&tools, "hugepages").evidence,
            "/sys/kernel/mm/hugepages: hugepages-2048kB: 1024"
        );
        assert!(tools
            .iter()
            .filter(|t| t.present)
            .all(|t| t.install_hint.is_none()));
    }
}
