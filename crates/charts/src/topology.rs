//! The machine's topology as a picture: a box per NUMA node, in it a box per PCIe root
//! complex, under each the GPUs and NVMe drives on it with their links.

use crate::{draw_error, Result};
use hwc_model::Profile;
use plotters::prelude::*;

#[derive(Debug, Clone, PartialEq)]
pub struct Picture {
    pub title: String,
    pub nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// `None`: the devices whose NUMA node is not known.
    pub id: Option<u32>,
    /// `NUMA node 0: 16 CPUs, 125.8 GiB`.
    pub label: String,
    pub roots: Vec<Root>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Root {
    /// The root complex (PCI domain:bus), `unknown` where not reported.
    pub label: String,
    pub devices: Vec<Device>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    Gpu,
    Drive,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    pub kind: DeviceKind,
    /// `gpu0 NVIDIA H200`.
    pub name: String,
    /// `0000:00:06.0, Gen5 x16, 63.0 GB/s`.
    pub detail: String,
}

/// The picture of the profile's machine; `None` where it knows no NUMA node, GPU or drive.
pub fn picture(p: &Profile) -> Option<Picture> {
    let mut nodes: Vec<Node> = p
        .platform
        .numa
        .iter()
        .map(|n| Node {
            id: Some(n.id),
            label: node_label(Some(n.id), Some(n)),
            roots: Vec::new(),
        })
        .collect();
    let link = |device: &str, bdf: &str| {
        p.topology
            .links
            .iter()
            .find(|l| l.device == device || l.bdf == bdf)
            .map(|l| {
                format!(
                    ", Gen{} x{}, {:.1} GB/s",
                    l.gen, l.width, l.theoretical_gbps
                )
            })
    };
    let mut devices: Vec<(Option<u32>, Option<String>, Device)> = Vec::new();
    for (name, g) in &p.gpus {
        let detail = link(name, &g.pci_bdf).unwrap_or_else(|| match (g.pcie_gen, g.pcie_width) {
            (Some(gen), Some(w)) => format!(", Gen{gen} x{w}"),
            _ => String::new(),
        });
        devices.push((
            g.numa_node,
            g.root.clone(),
            Device {
                kind: DeviceKind::Gpu,
                name: format!("{name} {}", g.model.as_deref().unwrap_or("GPU")),
                detail: format!("{}{detail}", g.pci_bdf),
            },
        ));
    }
    for d in &p.nvme.drives {
        let bdf = d.bdf.clone().unwrap_or_else(|| "?".into());
        let detail = link(&d.name, &bdf).unwrap_or_else(|| match (d.pcie_gen, d.pcie_width) {
            (Some(gen), Some(w)) => format!(", Gen{gen} x{w}"),
            _ => String::new(),
        });
        devices.push((
            d.numa_node,
            d.root.clone(),
            Device {
                kind: DeviceKind::Drive,
                name: format!("{} {}", d.name, d.model.as_deref().unwrap_or("NVMe")),
                detail: format!("{bdf}{detail}"),
            },
        ));
    }
    if nodes.is_empty() && devices.is_empty() {
        return None;
    }
    for (node, root, device) in devices {
        let i = match nodes.iter().position(|n| n.id == node) {
            Some(i) => i,
            None => {
                nodes.push(Node {
                    id: node,
                    label: node_label(node, None),
                    roots: Vec::new(),
                });
                nodes.len() - 1
            }
        };
        let label = format!(
            "root complex {}",
            root.unwrap_or_else(|| "unknown".to_string())
        );
        let roots = &mut nodes[i].roots;
        match roots.iter_mut().find(|r| r.label == label) {
            Some(r) => r.devices.push(device),
            None => roots.push(Root {
                label,
                devices: vec![device],
            }),
        }
    }
    // Known nodes by id, the unknown one last.
    nodes.sort_by_key(|n| n.id.unwrap_or(u32::MAX));
    let host = p.platform.hostname.as_deref().unwrap_or("this machine");
    Some(Picture {
        title: format!("Topology of {host}: NUMA nodes, PCIe root complexes, GPUs and drives"),
        nodes,
    })
}

fn node_label(id: Option<u32>, n: Option<&hwc_model::topology::NumaNode>) -> String {
    let Some(id) = id else {
        return "NUMA node not reported".into();
    };
    let mut s = format!("NUMA node {id}");
    if let Some(n) = n {
        if !n.cpus.is_empty() {
            s.push_str(&format!(": {} CPUs", n.cpus.len()));
        } else if n.memory_only {
            s.push_str(": memory only");
        }
        if let Some(b) = n.memory_bytes {
            s.push_str(&format!(", {:.1} GiB", b as f64 / (1u64 << 30) as f64));
        }
    }
    s
}

const ROOT_W: i32 = 330;
const DEVICE_H: i32 = 46;
const DEVICE_GAP: i32 = 14;
const PAD: i32 = 16;

fn node_width(n: &Node) -> i32 {
    n.roots.len().max(1) as i32 * (ROOT_W + PAD) + PAD
}

/// The picture as SVG.
pub fn svg(t: &Picture) -> Result<String> {
    let mut out = String::new();
    draw(t, &mut out).map_err(|e| draw_error("topology", e))?;
    Ok(out)
}

fn draw(t: &Picture, out: &mut String) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let most = t
        .nodes
        .iter()
        .flat_map(|n| n.roots.iter().map(|r| r.devices.len()))
        .max()
        .unwrap_or(0) as i32;
    let node_gap = 60;
    let width = (t.nodes.iter().map(node_width).sum::<i32>()
        + node_gap * (t.nodes.len() as i32 - 1).max(0)
        + 2 * PAD)
        .max(720);
    let node_top = 56;
    let root_top = node_top + 40;
    let device_top = root_top + 40 + 24;
    let node_bottom =
        device_top + most * (DEVICE_H + DEVICE_GAP) + PAD.max(if most == 0 { 20 } else { 0 });
    let height = node_bottom + 44;
    let root = SVGBackend::with_string(out, (width as u32, height as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let font = |size: i32| ("sans-serif", size).into_font();
    root.draw(&Text::new(
        t.title.clone(),
        (PAD, 16),
        font(20).color(&BLACK),
    ))?;

    let node_fill = RGBColor(245, 245, 245);
    let root_fill = RGBColor(255, 236, 204);
    let gpu_fill = RGBColor(204, 235, 218);
    let drive_fill = RGBColor(208, 226, 242);
    let edge = RGBColor(100, 100, 100);
    let mut x = PAD;
    let mut centres = Vec::new();
    for n in &t.nodes {
        let w = node_width(n);
        root.draw(&Rectangle::new(
            [(x, node_top), (x + w, node_bottom)],
            node_fill.filled(),
        ))?;
        root.draw(&Rectangle::new(
            [(x, node_top), (x + w, node_bottom)],
            ShapeStyle::from(&edge).stroke_width(2),
        ))?;
        root.draw(&Text::new(
            n.label.clone(),
            (x + 10, node_top + 10),
            font(16).color(&BLACK),
        ))?;
        centres.push((x, x + w));
        if n.roots.is_empty() {
            root.draw(&Text::new(
                "no GPU or NVMe drive",
                (x + 10, root_top + 10),
                font(14).color(&RGBColor(90, 90, 90)),
            ))?;
        }
        for (j, r) in n.roots.iter().enumerate() {
            let rx = x + PAD + j as i32 * (ROOT_W + PAD);
            root.draw(&Rectangle::new(
                [(rx, root_top), (rx + ROOT_W, root_top + 40)],
                root_fill.filled(),
            ))?;
            root.draw(&Rectangle::new(
                [(rx, root_top), (rx + ROOT_W, root_top + 40)],
                ShapeStyle::from(&edge),
            ))?;
            root.draw(&Text::new(
                r.label.clone(),
                (rx + 10, root_top + 12),
                font(15).color(&BLACK),
            ))?;
            // A trunk down from the root complex, a branch to each device.
            let trunk = rx + 20;
            let last = device_top + (r.devices.len() as i32 - 1) * (DEVICE_H + DEVICE_GAP);
            root.draw(&PathElement::new(
                vec![(trunk, root_top + 40), (trunk, last + DEVICE_H / 2)],
                ShapeStyle::from(&edge).stroke_width(2),
            ))?;
            for (k, d) in r.devices.iter().enumerate() {
                let dy = device_top + k as i32 * (DEVICE_H + DEVICE_GAP);
                let dx = rx + 44;
                root.draw(&PathElement::new(
                    vec![(trunk, dy + DEVICE_H / 2), (dx, dy + DEVICE_H / 2)],
                    ShapeStyle::from(&edge).stroke_width(2),
                ))?;
                let fill = match d.kind {
                    DeviceKind::Gpu => gpu_fill,
                    DeviceKind::Drive => drive_fill,
                };
                root.draw(&Rectangle::new(
                    [(dx, dy), (rx + ROOT_W, dy + DEVICE_H)],
                    fill.filled(),
                ))?;
                root.draw(&Rectangle::new(
                    [(dx, dy), (rx + ROOT_W, dy + DEVICE_H)],
                    ShapeStyle::from(&edge),
                ))?;
                root.draw(&Text::new(
                    d.name.clone(),
                    (dx + 8, dy + 6),
                    font(14).color(&BLACK),
                ))?;
                root.draw(&Text::new(
                    d.detail.clone(),
                    (dx + 8, dy + 26),
                    font(12).color(&RGBColor(60, 60, 60)),
                ))?;
            }
        }
        x += w + node_gap;
    }
    // Nodes side by side are joined by the CPUs' inter-socket (or inter-die) fabric.
    for pair in centres.windows(2) {
        let y = node_top + 20;
        root.draw(&PathElement::new(
            vec![(pair[0].1, y), (pair[1].0, y)],
            ShapeStyle::from(&edge).stroke_width(3),
        ))?;
    }
    // The key.
    let ky = node_bottom + 14;
    let mut kx = PAD;
    for (fill, label) in [
        (root_fill, "PCIe root complex"),
        (gpu_fill, "GPU: BDF, link, theoretical GB/s per direction"),
        (drive_fill, "NVMe drive"),
    ] {
        root.draw(&Rectangle::new(
            [(kx, ky), (kx + 16, ky + 16)],
            fill.filled(),
        ))?;
        root.draw(&Rectangle::new(
            [(kx, ky), (kx + 16, ky + 16)],
            ShapeStyle::from(&edge),
        ))?;
        root.draw(&Text::new(label, (kx + 22, ky + 1), font(13).color(&BLACK)))?;
        kx += 40 + 7 * label.chars().count() as i32;
    }
    root.present()?;
    Ok(())
}
