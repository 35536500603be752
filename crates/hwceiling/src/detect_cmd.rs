//! `hwceiling detect`: what the machine is, without measuring anything.

use crate::cli::{DetectArgs, Format};
use anyhow::{bail, Context, Result};
use hwc_model::Topology;
use hwc_topology::Sources;
use std::fmt::Write;
use std::path::Path;

/// Detect the live machine (`fsroot` None) or a snapshot, filling what only the live system
/// can tell (hostname, kernel) when the files did not.
pub fn detect(fsroot: Option<&Path>) -> Result<Topology> {
    match fsroot {
        Some(root) => {
            if !root.join("sys").is_dir() && !root.join("proc").is_dir() {
                bail!(
                    "{} has neither sys/ nor proc/: not a filesystem root",
                    root.display()
                );
            }
            Ok(hwc_topology::detect(&Sources::fsroot(root)))
        }
        None => {
            let mut src = Sources::live();
            if Path::new("deps").is_dir() {
                src.deps_dir = Some("deps".into());
            }
            let mut t = hwc_topology::detect(&src);
            if t.platform.hostname.is_none() {
                t.platform.hostname = live_hostname();
            }
            Ok(t)
        }
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

pub fn run(a: &DetectArgs) -> Result<i32> {
    let t = detect(a.fsroot.as_deref())?;
    let text = match a.format {
        Format::Json => serde_json::to_string_pretty(&t).context("serialising to JSON")? + "\n",
        Format::Yaml => serde_saphyr::to_string(&t).context("serialising to YAML")?,
        Format::Text => summary(&t),
    };
    print!("{text}");
    Ok(0)
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(T::to_string).unwrap_or_else(|| "?".into())
}

/// A human summary of the topology.
pub fn summary(t: &Topology) -> String {
    let p = &t.platform;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "host      {}  ({}, kernel {})",
        opt(&p.hostname),
        opt(&p.os),
        opt(&p.kernel)
    );
    let _ = writeln!(
        s,
        "cpu       {}  {} socket(s), {} core(s), {} thread(s)",
        opt(&p.cpu),
        opt(&p.sockets),
        opt(&p.cores),
        p.threads
    );
    for n in &p.numa {
        let cpus = if n.memory_only {
            "memory only".to_string()
        } else {
            hwc_model::cpulist::format(&n.cpus)
        };
        let _ = writeln!(s, "numa      node {}: cpus {cpus}", n.id);
    }
    let _ = writeln!(
        s,
        "features  avx512={} avx2={} sse4_2={} aes={} pclmulqdq={}  xxh3 tier {}",
        t.cpu_features.has_avx512,
        t.cpu_features.has_avx2,
        t.cpu_features.has_sse4_2,
        t.cpu_features.has_aes,
        t.cpu_features.has_pclmulqdq,
        t.cpu_features.xxh3_tier
    );
    if t.gpus.is_empty() {
        let _ = writeln!(s, "gpus      none");
    }
    for g in &t.gpus {
        let _ = writeln!(
            s,
            "gpu{}      {} {}  Gen{} x{} (max Gen{} x{})  BAR1 {}  node {}  root {}",
            g.index,
            g.pci_bdf,
            opt(&g.model),
            opt(&g.pcie_gen),
            opt(&g.pcie_width),
            opt(&g.pcie_max_gen),
            opt(&g.pcie_max_width),
            g.bar1_bytes
                .map(hwc_model::size_label)
                .unwrap_or_else(|| "?".into()),
            opt(&g.numa_node),
            opt(&g.root)
        );
    }
    if t.nvme.is_empty() {
        let _ = writeln!(s, "nvme      none");
    }
    for d in &t.nvme {
        let _ = writeln!(
            s,
            "{:<9} {} {} serial {}  node {}  root {}{}",
            d.name,
            opt(&d.bdf),
            opt(&d.model),
            opt(&d.serial),
            opt(&d.numa_node),
            opt(&d.root),
            if d.in_use { "  IN USE" } else { "" }
        );
    }
    for l in &t.topology.links {
        let _ = writeln!(
            s,
            "link      {} {} Gen{} x{}: {:.2} GB/s theoretical per direction{}",
            l.device,
            l.bdf,
            l.gen,
            l.width,
            l.theoretical_gbps,
            if l.degraded { " (below max)" } else { "" }
        );
    }
    for r in &t.topology.routes {
        let _ = writeln!(
            s,
            "route     {} ↔ {}: {}",
            r.gpu,
            r.drive,
            r.relation.describe()
        );
    }
    for tool in &t.tools {
        let _ = writeln!(
            s,
            "tool      {:<15} {}  {}",
            tool.name,
            if tool.present { "present" } else { "missing" },
            tool.evidence
        );
    }
    s
}
