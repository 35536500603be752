//! The engines of this build, registered once: each engine's declaration (what the planner plans
//! and waives from) and, on a live machine, the engine itself or why it cannot run here.

use hwc_model::{EngineDecl, EngineStatus, PathId, Topology};
use hwc_runner::Engine;

/// Every engine's declaration, in registration order (the order their cases run in).
pub fn declarations() -> Vec<EngineDecl> {
    vec![
        hwc_bench_host::memcpy_decl(),
        hwc_bench_host::streaming_decl(),
        hwc_bench_hash::decl(),
        hwc_bench_cuda::decl(),
        hwc_engine_cufile::decl(),
        hwc_engine_gdrcopy::decl(),
        hwc_bench_nvme::decl(),
        hwc_engine_spdk::decl(),
        #[cfg(feature = "spdk")]
        hwc_engine_spdk::native::decl(),
        hwc_engine_null::decl(),
    ]
}

/// The engines of a run and what their probes found.
pub struct Engines {
    pub status: Vec<EngineStatus>,
    pub list: Vec<Box<dyn Engine>>,
}

/// Probe this machine for every engine (CUDA facts merge into the topology); `wants` are the
/// paths the run measures: an engine of none of them is not probed. The NVMe engine is built
/// apart (`crate::nvme`), after the drives are gated; it is added with [`Engines::push`].
pub fn probe(topo: &mut Topology, wants: &dyn Fn(PathId) -> bool, gds_bytes: u64) -> Engines {
    let wanted = |d: &EngineDecl| d.paths.iter().any(|&p| wants(p));
    let mut e = Engines {
        status: Vec::new(),
        list: Vec::new(),
    };
    let (memcpy, streaming) = hwc_bench_host::engines(topo, "/proc");
    e.push(hwc_bench_host::memcpy_decl(), Ok(Box::new(memcpy)));
    e.push(
        hwc_bench_host::streaming_decl(),
        hwc_bench_host::streaming_available().map(|()| Box::new(streaming) as Box<dyn Engine>),
    );
    e.push(
        hwc_bench_hash::decl(),
        hwc_bench_hash::available().map(|()| Box::new(hash_engine(topo)) as Box<dyn Engine>),
    );
    let cuda = hwc_bench_cuda::decl();
    let cufile = hwc_engine_cufile::decl();
    let gdrcopy = hwc_engine_gdrcopy::decl();
    let libcuda = topo.tools.iter().any(|t| t.name == "libcuda" && t.present);
    if topo.gpus.is_empty() || !libcuda || ![&cuda, &cufile, &gdrcopy].into_iter().any(wanted) {
        // The planner waives them from their declarations (no GPU, no libcuda), or nothing
        // asks for them.
        for decl in [cuda, cufile, gdrcopy] {
            e.status.push(EngineStatus {
                decl,
                available: Ok(()),
            });
        }
    } else {
        let hint = "check that nvidia-smi lists the GPU and the driver is loaded".to_string();
        match hwc_bench_cuda::probe() {
            Ok(probe) => {
                merge_cuda_facts(topo, &probe);
                let gpus: Vec<(String, String)> = topo
                    .gpus
                    .iter()
                    .map(|g| (g.name(), g.pci_bdf.clone()))
                    .collect();
                e.push(
                    cuda,
                    Ok(Box::new(hwc_bench_cuda::CudaBackend::new(&probe, &gpus))),
                );
                e.push(cufile, Ok(Box::new(cufile_engine(topo, gds_bytes))));
                e.push(gdrcopy, gdrcopy_engine(topo));
            }
            Err(reason) => {
                e.push(cuda, Err((reason.clone(), Some(hint.clone()))));
                e.push(cufile, Err((reason.clone(), Some(hint.clone()))));
                e.push(gdrcopy, Err((reason, Some(hint))));
            }
        }
    }
    e.push(
        hwc_engine_null::decl(),
        Ok(Box::new(hwc_engine_null::NullEngine)),
    );
    e
}

/// What every engine's probe found, for a plan that does not run (a dry run, the engines'
/// listing): the NVMe engine, built once a profile has gated the drives, is judged from its
/// declaration's needs alone; spdk-perf by whether `spdk_nvme_perf` is there (under
/// `spdk_dir` when given).
pub fn statuses(
    topo: &mut Topology,
    wants: &dyn Fn(PathId) -> bool,
    spdk_dir: Option<&std::path::Path>,
) -> Vec<EngineStatus> {
    let mut status = probe(topo, wants, hwc_engine_cufile::DEFAULT_BYTES_PER_DRIVE).status;
    status.push(EngineStatus {
        decl: hwc_bench_nvme::decl(),
        available: Ok(()),
    });
    status.push(crate::spdk::perf_status(spdk_dir));
    #[cfg(feature = "spdk")]
    status.push(EngineStatus {
        decl: hwc_engine_spdk::native::decl(),
        available: Ok(()),
    });
    status
}

impl Engines {
    /// Add an engine, or why it cannot run here.
    pub fn push(
        &mut self,
        decl: EngineDecl,
        engine: Result<Box<dyn Engine>, (String, Option<String>)>,
    ) {
        let available = match engine {
            Ok(engine) => {
                self.list.push(engine);
                Ok(())
            }
            Err(why) => Err(why),
        };
        self.status.push(EngineStatus { decl, available });
    }

    /// The declarations of the engines of this run, in registration order.
    pub fn declarations(&self) -> Vec<EngineDecl> {
        self.status.iter().map(|s| s.decl.clone()).collect()
    }
}

/// The cuFile engine over the GPUs CUDA matched (their ordinals) and each drive's first
/// namespace; libcufile from `HWC_LIBCUFILE`, where the topology found it, or the usual places.
fn cufile_engine(topo: &Topology, bytes_per_drive: u64) -> hwc_engine_cufile::CufileEngine {
    let found = topo
        .tools
        .iter()
        .find(|t| t.name == "libcufile" && t.present)
        .map(|t| std::path::PathBuf::from(&t.evidence))
        .filter(|p| p.is_absolute() && p.exists());
    let explicit = std::env::var_os("HWC_LIBCUFILE")
        .map(std::path::PathBuf::from)
        .or(found);
    let lib = hwc_engine_cufile::Cufile::load(&hwc_engine_cufile::candidates(explicit.as_deref()));
    let gpus = topo
        .gpus
        .iter()
        .filter_map(|g| {
            Some(hwc_engine_cufile::GpuSlot {
                name: g.name(),
                ordinal: g.cuda_index?,
                bdf: g.pci_bdf.clone(),
            })
        })
        .collect();
    let devices = topo
        .nvme
        .iter()
        .filter_map(|d| {
            let ns = d.namespaces.first()?;
            Some((
                hwc_plan::drive_key(d),
                std::path::Path::new("/dev").join(&ns.name),
            ))
        })
        .collect();
    let node_cpus = node_cpus(topo);
    // The check of the mode runs in a child: this program again, as `__cufile-strict-open`.
    let strict: hwc_engine_cufile::StrictOpen = Box::new(|lib: &std::path::Path| {
        let exe = std::env::current_exe().ok()?;
        hwc_engine_cufile::strict::in_child(&exe, lib)
    });
    hwc_engine_cufile::CufileEngine::new(lib, gpus, devices, node_cpus, bytes_per_drive, strict)
}

/// The GDRCopy engine over the GPUs CUDA matched, or why it cannot run (no libgdrapi, no
/// gdrdrv) with the install hint.
fn gdrcopy_engine(topo: &Topology) -> Result<Box<dyn Engine>, (String, Option<String>)> {
    let gdr = hwc_engine_gdrcopy::probe(std::path::Path::new("/dev"))
        .map_err(|(reason, hint)| (reason, Some(hint)))?;
    let gpus = topo
        .gpus
        .iter()
        .filter_map(|g| {
            Some(hwc_engine_gdrcopy::GpuSlot {
                name: g.name(),
                ordinal: g.cuda_index?,
            })
        })
        .collect();
    let peermem = hwc_engine_gdrcopy::nvidia_peermem_loaded(std::path::Path::new("/sys"));
    Ok(Box::new(hwc_engine_gdrcopy::GdrcopyEngine::new(
        gdr,
        gpus,
        node_cpus(topo),
        peermem,
    )))
}

/// The XXH3 engine: each node's CPUs in the host engines' pinning order (a thread per
/// physical core first).
fn hash_engine(topo: &Topology) -> hwc_bench_hash::HashEngine {
    let node_cpus = topo
        .platform
        .numa
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .map(|n| {
            (
                n.id,
                hwc_bench_host::pinning_order(&n.cpus, &topo.platform.cpus),
            )
        })
        .collect();
    hwc_bench_hash::HashEngine::new(node_cpus, topo.platform.llc_bytes(), "/proc")
}

/// Each node's CPUs.
fn node_cpus(topo: &Topology) -> std::collections::BTreeMap<u32, Vec<u32>> {
    topo.platform
        .numa
        .iter()
        .map(|n| (n.id, n.cpus.clone()))
        .collect()
}

/// CUDA ordinal, model, memory and L2 of every GPU the driver reports, matched by PCI address.
pub fn merge_cuda_facts(topo: &mut Topology, probe: &hwc_bench_cuda::CudaProbe) {
    for g in &mut topo.gpus {
        let bdf = hwc_bench_cuda::normalize_bdf(&g.pci_bdf).unwrap_or_else(|| g.pci_bdf.clone());
        if let Some(d) = probe.devices.iter().find(|d| d.pci_bdf == bdf) {
            g.cuda_index = Some(d.ordinal);
            g.model.get_or_insert_with(|| d.name.clone());
            g.memory_bytes = Some(d.memory_bytes);
            g.l2_cache_bytes = Some(d.l2_cache_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::merge_cuda_facts;

    #[test]
    fn cuda_ordinals_are_matched_to_gpus_by_pci_address_not_by_order() {
        // sysfs lists gpu0 at 0000:41:00.0 and gpu1 at 0000:81:00.0; the driver enumerates
        // them the other way round (CUDA's default order is not the PCI order).
        let gpu = |index: u32, bdf: &str, node: u32| hwc_model::topology::Gpu {
            index,
            cuda_index: None,
            pci_bdf: bdf.into(),
            model: None,
            vendor: "0x10de".into(),
            device: "0x2335".into(),
            pcie_gen: None,
            pcie_width: None,
            pcie_max_gen: None,
            pcie_max_width: None,
            bar1_bytes: None,
            bar1_gib: None,
            bars: vec![],
            numa_node: Some(node),
            root: None,
            driver: None,
            memory_bytes: None,
            l2_cache_bytes: None,
        };
        let device = |ordinal: u32, bdf: &str, memory_bytes: u64| hwc_bench_cuda::CudaDevice {
            ordinal,
            pci_bdf: bdf.into(),
            name: "NVIDIA H200".into(),
            memory_bytes,
            l2_cache_bytes: 60 << 20,
            multiprocessors: 132,
            compute_capability: (9, 0),
            copy_engines: 3,
            nvml: None,
        };
        let mut topo = hwc_model::Topology {
            gpus: vec![gpu(0, "0000:41:00.0", 0), gpu(1, "0000:81:00.0", 1)],
            ..Default::default()
        };
        let probe = hwc_bench_cuda::CudaProbe {
            devices: vec![device(0, "0000:81:00.0", 2), device(1, "0000:41:00.0", 1)],
            driver_version: "580.159.04".into(),
            environment: Default::default(),
        };
        merge_cuda_facts(&mut topo, &probe);
        let facts: Vec<_> = topo
            .gpus
            .iter()
            .map(|g| (g.index, g.cuda_index, g.memory_bytes, g.numa_node))
            .collect();
        assert_eq!(
            facts,
            vec![
                (0, Some(1), Some(1), Some(0)),
                (1, Some(0), Some(2), Some(1))
            ]
        );
    }
}
