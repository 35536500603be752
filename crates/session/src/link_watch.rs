//! PCIe errors around each case: the AER counters of every function on the paths a case
//! crosses (the GPU's, the drives', and each bridge up to the root port), read from sysfs when
//! the case starts and when it finishes. A case during which one rose is marked
//! (`evidence.link_errors`) and the profile warns (`link_errors`). Functions without AER
//! (no `aer_dev_*` files) are not watched. The host's frequency and memory settings are read
//! at the same two moments ([`crate::host_state`], `evidence.host_state`).

use hwc_model::topology::PciePath;
use hwc_model::{AerIncrease, Case, HostCaseState, Topology};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One function's AER totals: correctable, non-fatal, fatal.
type Totals = [u64; 3];

pub(crate) struct LinkWatch {
    /// `…/sys/bus/pci/devices`.
    devices: PathBuf,
    /// Each GPU's name and BDF, to find its path.
    gpus: Vec<(String, String)>,
    paths: Vec<PciePath>,
    /// The case started last: its key and the totals then.
    before: Option<(String, BTreeMap<String, Totals>)>,
    /// What rose, by case key.
    seen: BTreeMap<String, Vec<AerIncrease>>,
    /// `…/sys` and `…/proc`, for the host's settings.
    sys: PathBuf,
    proc: PathBuf,
    /// The case started last: its key and the host's settings then.
    host_before: Option<(String, crate::host_state::Reading)>,
    /// The host's settings through each case, by case key.
    host: BTreeMap<String, HostCaseState>,
}

/// What the watch saw, by case key.
#[derive(Debug, Default)]
pub(crate) struct Watched {
    pub(crate) link_errors: BTreeMap<String, Vec<AerIncrease>>,
    pub(crate) host_state: BTreeMap<String, HostCaseState>,
}

impl LinkWatch {
    pub(crate) fn new(sys: &Path, proc: &Path, topo: &Topology) -> LinkWatch {
        LinkWatch {
            devices: sys.join("bus/pci/devices"),
            sys: sys.to_path_buf(),
            proc: proc.to_path_buf(),
            host_before: None,
            host: BTreeMap::new(),
            gpus: topo
                .gpus
                .iter()
                .map(|g| (g.name(), g.pci_bdf.clone()))
                .collect(),
            paths: topo.topology.pcie_paths.clone(),
            before: None,
            seen: BTreeMap::new(),
        }
    }

    /// The functions `case` crosses: every hop of its GPU's and drives' paths.
    fn functions(&self, case: &Case) -> Vec<String> {
        let mut ends: Vec<&str> = case.spec.drives().iter().map(String::as_str).collect();
        if let Some(gpu) = case.spec.gpu() {
            ends.extend(
                self.gpus
                    .iter()
                    .filter(|(n, _)| n == gpu)
                    .map(|(_, b)| b.as_str()),
            );
        }
        let mut out: Vec<String> = self
            .paths
            .iter()
            .filter(|p| {
                p.hops
                    .first()
                    .is_some_and(|h| ends.contains(&h.bdf.as_str()))
            })
            .flat_map(|p| p.hops.iter().map(|h| h.bdf.clone()))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn totals(&self, bdfs: &[String]) -> BTreeMap<String, Totals> {
        bdfs.iter()
            .filter_map(|b| Some((b.clone(), read_totals(&self.devices.join(b))?)))
            .collect()
    }

    pub(crate) fn start(&mut self, case: &Case) {
        let f = self.functions(case);
        self.before = (!f.is_empty()).then(|| (case.key.clone(), self.totals(&f)));
        self.host_before = Some((
            case.key.clone(),
            crate::host_state::read(&self.sys, &self.proc),
        ));
    }

    pub(crate) fn finish(&mut self) {
        if let Some((key, before)) = self.host_before.take() {
            let after = crate::host_state::read(&self.sys, &self.proc);
            self.host
                .insert(key, crate::host_state::combine(&before, &after));
        }
        let Some((key, before)) = self.before.take() else {
            return;
        };
        let bdfs: Vec<String> = before.keys().cloned().collect();
        let rose: Vec<AerIncrease> = self
            .totals(&bdfs)
            .into_iter()
            .filter_map(|(bdf, after)| {
                let b = before.get(&bdf)?;
                let d = |i: usize| after[i].saturating_sub(b[i]);
                (d(0) + d(1) + d(2) > 0).then(|| AerIncrease {
                    bdf,
                    correctable: d(0),
                    nonfatal: d(1),
                    fatal: d(2),
                })
            })
            .collect();
        if !rose.is_empty() {
            self.seen.insert(key, rose);
        }
    }

    /// What rose during each case, and the host's settings through it, by case key.
    pub(crate) fn take(&mut self) -> Watched {
        Watched {
            link_errors: std::mem::take(&mut self.seen),
            host_state: std::mem::take(&mut self.host),
        }
    }
}

/// The `TOTAL_ERR_COR`, `TOTAL_ERR_NONFATAL` and `TOTAL_ERR_FATAL` lines of a function's AER
/// files; None where it has none (no AER, or sysfs does not show it).
fn read_totals(dir: &Path) -> Option<Totals> {
    let total = |file: &str, name: &str| -> Option<u64> {
        let text = std::fs::read_to_string(dir.join(file)).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
    };
    Some([
        total("aer_dev_correctable", "TOTAL_ERR_COR")?,
        total("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL")?,
        total("aer_dev_fatal", "TOTAL_ERR_FATAL")?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_model::pcie::PcieConfig;
    use hwc_model::topology::PcieHop;

    fn aer(dir: &Path, bdf: &str, cor: u64, fatal: u64) {
        let d = dir.join("bus/pci/devices").join(bdf);
        std::fs::create_dir_all(&d).unwrap();
        let w = |f: &str, body: String| std::fs::write(d.join(f), body).unwrap();
        w(
            "aer_dev_correctable",
            format!("RxErr {cor}\nBadTLP 0\nTOTAL_ERR_COR {cor}\n"),
        );
        w(
            "aer_dev_nonfatal",
            "Undefined 0\nTOTAL_ERR_NONFATAL 0\n".into(),
        );
        w("aer_dev_fatal", format!("TOTAL_ERR_FATAL {fatal}\n"));
    }

    fn hop(bdf: &str) -> PcieHop {
        PcieHop {
            bdf: bdf.into(),
            config: PcieConfig::default(),
            iommu_domain: None,
        }
    }

    #[test]
    fn a_counter_that_rises_during_a_case_marks_it_with_the_device() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path();
        // A drive behind a root port (both with AER), and a GPU without AER files.
        aer(sys, "0000:11:00.0", 0, 0);
        aer(sys, "0000:10:00.0", 5, 0);
        let mut topo = Topology::default();
        topo.topology.pcie_paths = vec![
            PciePath {
                device: "nvme0".into(),
                hops: vec![hop("0000:11:00.0"), hop("0000:10:00.0")],
            },
            PciePath {
                device: "gpu0".into(),
                hops: vec![hop("0000:41:00.0")],
            },
        ];
        let case = Case {
            key: "nvme_read/io-uring/1drive/128KiB/qd16".into(),
            path: hwc_model::PathId::NvmeRead,
            engine: hwc_model::EngineId::new("io-uring"),
            cell: "1drive/128KiB/qd16".into(),
            spec: hwc_model::Spec::Nvme(hwc_model::NvmeSpec {
                test: hwc_model::NvmeTest::Sweep,
                target: false,
                block_bytes: 128 << 10,
                queue_depth: 16,
                drives: vec!["0000:11:00.0".into()],
                pattern: hwc_model::NvmePattern::Sequential,
            }),
            reps: hwc_model::Reps {
                warmup: 1,
                timed: 5,
                retry_above_spread_pct: None,
                steady: None,
            },
        };
        let mut w = LinkWatch::new(sys, &sys.join("proc"), &topo);
        assert_eq!(w.functions(&case), ["0000:10:00.0", "0000:11:00.0"]);
        w.start(&case);
        aer(sys, "0000:10:00.0", 7, 1);
        w.finish();
        // A case with nothing rising is not marked.
        w.start(&case);
        w.finish();
        let watched = w.take();
        let seen = watched.link_errors;
        assert_eq!(seen.len(), 1);
        // The host's settings are read around every case (none here: an empty sysfs).
        assert_eq!(watched.host_state.len(), 1);
        assert_eq!(
            seen["nvme_read/io-uring/1drive/128KiB/qd16"],
            [AerIncrease {
                bdf: "0000:10:00.0".into(),
                correctable: 2,
                nonfatal: 0,
                fatal: 1,
            }]
        );
    }
}
