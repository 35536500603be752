//! The NVMe → BAR path's targets: the PCI BARs named with `--p2p-bar`, each through the BAR
//! gate, and whether a GPU's BAR1 can be mapped here (GDRCopy).
//!
//! The BAR gate: drives DMA into the BAR and overwrite it, so only memory that nothing else
//! uses is taken. The device exists, no driver holds it, it is not a GPU (a GPU's memory is
//! reached through BAR1 by GDRCopy, never through its raw BAR), its memory decoding is on
//! (`enable`), and BAR N is a prefetchable memory BAR (memory, not registers) of at least one
//! 2 MiB page.

use hwc_model::Topology;
use hwc_plan::bar::{BarPlanOptions, PciBarTarget};
use std::path::Path;

/// `IORESOURCE_MEM` and `IORESOURCE_PREFETCH` of a sysfs `resource` line's flags.
const IORESOURCE_MEM: u64 = 0x200;
const IORESOURCE_PREFETCH: u64 = 0x2000;
/// SPDK registers whole 2 MiB pages.
const MIN_BAR_BYTES: u64 = 2 << 20;

/// `0000:00:05.0/2` → (`0000:00:05.0`, 2).
pub fn parse(s: &str) -> Result<(String, u32), String> {
    let bad = || format!("`{s}` is not BDF/N (for example 0000:00:05.0/2: BAR 2 of that device)");
    let (bdf, n) = s.trim().split_once('/').ok_or_else(bad)?;
    let n: u32 = n.parse().map_err(|_| bad())?;
    let parts: Vec<&str> = bdf.split([':', '.']).collect();
    let hex = |p: &str, len: usize| p.len() == len && p.chars().all(|c| c.is_ascii_hexdigit());
    let ok = parts.len() == 4
        && hex(parts[0], 4)
        && hex(parts[1], 2)
        && hex(parts[2], 2)
        && parts[3].len() == 1
        && parts[3].chars().all(|c| ('0'..='7').contains(&c));
    if !ok || n > 5 {
        return Err(bad());
    }
    Ok((bdf.to_ascii_lowercase(), n))
}

/// `spec` (`BDF/N`) through the BAR gate, on the machine whose sysfs is `sys` (`/sys`).
pub fn gate(sys: &Path, topo: &Topology, spec: &str) -> Result<PciBarTarget, String> {
    let (bdf, n) = parse(spec)?;
    let dir = sys.join("bus/pci/devices").join(&bdf);
    if !dir.exists() {
        return Err(format!("--p2p-bar {spec}: no PCI device {bdf}"));
    }
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).map(|t| t.trim().to_string());
    if let Ok(driver) = std::fs::read_link(dir.join("driver")) {
        let name = driver
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        return Err(format!(
            "--p2p-bar {spec}: {bdf} is held by driver {name}: its BAR is in use, and the DMA \
             would overwrite it"
        ));
    }
    if read("vendor").ok().as_deref() == Some("0x10de")
        && read("class").is_ok_and(|c| c.starts_with("0x03"))
    {
        return Err(format!(
            "--p2p-bar {spec}: {bdf} is an NVIDIA GPU: its memory is reached through BAR1 by \
             GDRCopy (planned for every GPU), not through a raw BAR"
        ));
    }
    if read("enable").ok().as_deref() != Some("1") {
        return Err(format!(
            "--p2p-bar {spec}: {bdf} is not enabled (its memory decoding is off): enable it \
             with `echo 1 > /sys/bus/pci/devices/{bdf}/enable`, and `echo 0` after the run"
        ));
    }
    let resources =
        read("resource").map_err(|e| format!("--p2p-bar {spec}: reading its resources: {e}"))?;
    let line = resources
        .lines()
        .nth(n as usize)
        .ok_or_else(|| format!("--p2p-bar {spec}: {bdf} has no BAR {n}"))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).ok())
        .collect();
    let [start, end, flags] = f[..] else {
        return Err(format!(
            "--p2p-bar {spec}: its resource line `{line}` is unreadable"
        ));
    };
    let size_bytes = if end > start { end - start + 1 } else { 0 };
    if flags & IORESOURCE_MEM == 0 || size_bytes == 0 {
        return Err(format!(
            "--p2p-bar {spec}: BAR {n} of {bdf} is not a memory BAR"
        ));
    }
    if flags & IORESOURCE_PREFETCH == 0 {
        return Err(format!(
            "--p2p-bar {spec}: BAR {n} of {bdf} is not prefetchable: it holds registers, not \
             memory"
        ));
    }
    if size_bytes < MIN_BAR_BYTES {
        return Err(format!(
            "--p2p-bar {spec}: BAR {n} of {bdf} is {size_bytes} bytes: SPDK needs at least one \
             whole 2 MiB page"
        ));
    }
    let func = topo.pci.iter().find(|f| f.bdf == bdf);
    Ok(PciBarTarget {
        bdf,
        resource: n,
        size_bytes,
        numa_node: func.and_then(|f| f.numa_node),
        root: func.and_then(|f| f.root.clone()),
    })
}

/// Why no GPU's BAR1 can be mapped on this machine (GDRCopy: libgdrapi and gdrdrv), with the
/// fix; `None` where it can.
pub fn gpu_bar1_blocked(dev: &Path) -> Option<(String, Option<String>)> {
    hwc_engine_gdrcopy::probe(dev)
        .err()
        .map(|(reason, hint)| (reason, Some(hint)))
}

/// The plan's NVMe → BAR options: every `--p2p-bar` through the gate (the first refused ends
/// the run before anything is measured), and GPU BAR1's state (`live`: probed; a snapshot:
/// not probed).
pub fn options(
    sys: &Path,
    topo: &Topology,
    bars: Option<&[String]>,
    live: bool,
) -> Result<BarPlanOptions, String> {
    let pci_bars = bars
        .unwrap_or_default()
        .iter()
        .map(|b| gate(sys, topo, b))
        .collect::<Result<_, _>>()?;
    let gpu_bar1_blocked = if live {
        gpu_bar1_blocked(Path::new("/dev"))
    } else {
        Some((
            "GDRCopy is not probed on a snapshot".into(),
            Some("plan on the machine itself".into()),
        ))
    };
    Ok(BarPlanOptions {
        pci_bars,
        gpu_bar1_blocked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device directory under a fake sysfs.
    fn device(sys: &Path, bdf: &str, files: &[(&str, &str)]) {
        let dir = sys.join("bus/pci/devices").join(bdf);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }

    const IVSHMEM: &[(&str, &str)] = &[
        ("vendor", "0x1af4\n"),
        ("device", "0x1110\n"),
        ("class", "0x050000\n"),
        ("enable", "1\n"),
        (
            "resource",
            "0x00000000fe800000 0x00000000fe8000ff 0x0000000000040200\n\
             0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
             0x0000008000000000 0x0000008003ffffff 0x000000000014220c\n",
        ),
    ];

    #[test]
    fn a_driverless_prefetchable_bar_passes_with_its_size() {
        let t = tempfile::tempdir().unwrap();
        device(t.path(), "0000:00:05.0", IVSHMEM);
        let b = gate(t.path(), &Topology::default(), "0000:00:05.0/2").unwrap();
        assert_eq!((b.bdf.as_str(), b.resource), ("0000:00:05.0", 2));
        assert_eq!(b.size_bytes, 64 << 20);
    }

    #[test]
    fn the_gate_refuses_what_is_not_free_memory() {
        let t = tempfile::tempdir().unwrap();
        device(t.path(), "0000:00:05.0", IVSHMEM);
        let topo = Topology::default();
        let refused = |spec: &str| gate(t.path(), &topo, spec).unwrap_err();
        // Registers (BAR 0: not prefetchable), an empty BAR, no such BAR, no such device.
        assert!(
            refused("0000:00:05.0/0").contains("not prefetchable"),
            "{}",
            refused("0000:00:05.0/0")
        );
        assert!(refused("0000:00:05.0/1").contains("not a memory BAR"));
        assert!(refused("0000:00:05.0/4").contains("has no BAR 4"));
        assert!(refused("0000:00:09.0/2").contains("no PCI device"));
        assert!(refused("00:05.0/2").contains("is not BDF/N"));
        // Held by a driver.
        let dir = t.path().join("bus/pci/devices/0000:00:05.0");
        std::os::unix::fs::symlink(t.path().join("drivers/ivshmem"), dir.join("driver")).unwrap();
        assert!(refused("0000:00:05.0/2").contains("held by driver ivshmem"));
        std::fs::remove_file(dir.join("driver")).unwrap();
        // Decoding off.
        std::fs::write(dir.join("enable"), "0\n").unwrap();
        assert!(refused("0000:00:05.0/2").contains("is not enabled"));
        // A GPU.
        let mut gpu = IVSHMEM.to_vec();
        gpu[0] = ("vendor", "0x10de\n");
        gpu[2] = ("class", "0x030200\n");
        device(t.path(), "0000:00:06.0", &gpu);
        assert!(refused("0000:00:06.0/2").contains("NVIDIA GPU"));
    }

    #[test]
    fn a_small_bar_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let mut small = IVSHMEM.to_vec();
        small[4] = (
            "resource",
            "0x0 0x0 0x0\n0x0 0x0 0x0\n0x0000008000000000 0x00000080000fffff 0x000000000014220c\n",
        );
        device(t.path(), "0000:00:05.0", &small);
        let e = gate(t.path(), &Topology::default(), "0000:00:05.0/2").unwrap_err();
        assert!(e.contains("1048576 bytes"), "{e}");
    }
}
