//! `hwceiling detect`: what the machine is, without measuring anything.

use crate::cli::{DetectArgs, Format};
use anyhow::{Context, Result};
use hwc_model::Topology;
use std::fmt::Write;

pub fn run(a: &DetectArgs) -> Result<i32> {
    let t = hwc_session::detect(a.fsroot.as_deref())?;
    let text = match a.format {
        Format::Json => serde_json::to_string_pretty(&t).context("serialising to JSON")? + "\n",
        Format::Yaml => serde_saphyr::to_string(&t).context("serialising to YAML")?,
        // The machine's strings (a hostname, a drive's model) made inert for a terminal.
        Format::Text => summary(&hwc_model::text::escape_strings(
            &t,
            hwc_model::text::escape_control,
        )?),
    };
    crate::out::print(&text)?;
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
        "features  avx512={} avx2={} sse4_2={} aes={} pclmulqdq={}  xxh3 tier {} (inferred \
         from the flags, not measured; `profile` measures it)",
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
        let tlp = match (l.min_mps_bytes, l.tlp_write_gbps, l.tlp_read_gbps) {
            (Some(m), Some(w), Some(r)) => format!(
                "; MPS {m} B on its path: TLP-adjusted (a model) {} GB/s DMA writes, {} reads",
                hwc_model::text::fixed(w, 2),
                hwc_model::text::fixed(r, 2)
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "link      {} {} Gen{} x{}: {} GB/s theoretical per direction{}{tlp}",
            l.device,
            l.bdf,
            l.gen,
            l.width,
            hwc_model::text::fixed(l.theoretical_gbps, 2),
            if l.degraded { " (below max)" } else { "" }
        );
    }
    if t.platform.iommu_present.is_some() {
        let _ = writeln!(
            s,
            "iommu     {}{}",
            if t.platform.iommu_present == Some(true) {
                "on"
            } else {
                "off"
            },
            if t.platform.iommu_options.is_empty() {
                String::new()
            } else {
                format!(" ({})", t.platform.iommu_options.join(" "))
            }
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
