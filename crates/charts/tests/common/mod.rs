//! The fixture results the chart tests draw: the H200 test machine's profile, with a
//! two-drive NVMe sweep added (that machine has no drive).

use hwc_model::profile::NvmeDriveProfile;
use hwc_model::spec::{NvmePattern, NvmeSpec, NvmeTest};
use hwc_model::topology::LinkTheory;
use hwc_model::{EngineId, Measurement, PathId, Profile, Spec, Stats};

const H200: &str = include_str!("../../../profile/tests/fixtures/v1-h200-a.yaml");

pub fn h200() -> Profile {
    hwc_profile::from_yaml(H200).expect("the fixture reads")
}

fn drive_link(i: usize) -> LinkTheory {
    LinkTheory {
        device: format!("nvme{i}"),
        bdf: format!("0000:{:02x}:00.0", 0x41 + i),
        gen: 4,
        width: 4,
        max_gen: Some(4),
        max_width: Some(4),
        theoretical_gbps: hwc_model::pcie_theoretical_gbps(16.0, 4),
        max_theoretical_gbps: None,
        degraded: false,
        basis: Default::default(),
        detected: None,
        min_mps_bytes: None,
        tlp_write_gbps: None,
        tlp_read_gbps: None,
    }
}

/// The H200 profile with two Gen4 x4 drives on a second root complex, read alone and together
/// at QD16 and QD32 from 4 KiB to 4 MiB.
pub fn h200_with_drives() -> Profile {
    let mut p = h200();
    for i in 0..2 {
        let l = drive_link(i);
        p.nvme.drives.push(NvmeDriveProfile {
            bdf: Some(l.bdf.clone()),
            name: l.device.clone(),
            model: Some("PM1733".into()),
            numa_node: Some(0),
            root: Some("0000:40".into()),
            pcie_gen: Some(4),
            pcie_width: Some(4),
            ..Default::default()
        });
        p.topology.links.push(l);
    }
    let bdfs: Vec<String> = (0..2).map(|i| drive_link(i).bdf).collect();
    for drives in [vec![bdfs[0].clone()], bdfs.clone()] {
        for qd in [16u32, 32] {
            for shift in (12..=22).step_by(2) {
                let size = 1u64 << shift;
                // A curve that saturates: each drive tops out near 6.8 GB/s.
                let per_drive =
                    6.8 * (1.0 - (-(size as f64) / 200_000.0 * f64::from(qd) / 16.0).exp());
                let median = per_drive * drives.len() as f64;
                p.measurements.push(Measurement {
                    key: format!("nvme_read/io-uring/{}d/qd{qd}/{size}", drives.len()),
                    path: PathId::NvmeRead,
                    engine: EngineId::new("io-uring"),
                    cell: format!("{}d/qd{qd}/{size}", drives.len()),
                    spec: Spec::Nvme(NvmeSpec {
                        test: NvmeTest::Sweep,
                        block_bytes: size,
                        queue_depth: qd,
                        drives: drives.clone(),
                        target: false,
                        pattern: NvmePattern::Sequential,
                    }),
                    bytes_per_rep: 2 << 30,
                    gbps: Stats {
                        median,
                        min: median * 0.97,
                        max: median * 1.02,
                        spread_pct: 5.0,
                        n: 6,
                    },
                    cold_gbps: None,
                    warmup: 1,
                    latency_us: None,
                    latency_p50_us: None,
                    latency_p99_us: None,
                    placement: None,
                    cache_resident: false,
                    contended: false,
                    spread_limit_pct: None,
                    evidence: Default::default(),
                    notes: vec![],
                });
            }
        }
    }
    p
}
