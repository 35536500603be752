//! The planner: a pure function from a detected [`Topology`] and [`PlanOptions`] to the spec's
//! full benchmark matrix. Every case gets a stable key; every path (or part of one) that cannot
//! run on this machine or in this build is waived with its reason and a hint.

use hwc_model::topology::{Gpu, NumaNode, ToolStatus};
use hwc_model::{
    case_key, size_label, Case, CellKind, CopyDirection, Covers, EngineId, EngineStatus,
    GpuCopySpec, HostCopySpec, HostMemory, PathId, Plan, Reps, Spec, Steady, Topology, Waiver, GIB,
    KIB, MIB,
};
use std::collections::BTreeSet;

pub mod bar;
pub mod gdrcopy;
mod gds;
pub mod input;
mod nvme;
pub mod xxh3;
pub use nvme::{
    drive_counts, drive_group, drive_key, same_root_groups, NvmePlanOptions, LATENCY_QUEUE_DEPTHS,
    NVME_QUEUE_DEPTHS, NVME_SIZES, READ_DRIVE_COUNTS, WRITE_DRIVE_COUNTS,
};

/// Host memcpy sizes (spec Path 7).
pub const HOST_RAM_SIZES: [u64; 4] = [4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB];
/// A host copy is a memory figure only when source + destination exceed the last-level cache
/// this many times over; below that it is (partly) a cache figure, and is labelled so.
pub const CACHE_MARGIN: u64 = 4;

/// The buffers one case places on a NUMA node may take at most this share of the node's memory
/// (1/2): the rest is left to the system and other processes. Pre-faulted, `mbind`-bound buffers
/// beyond it would fail with ENOMEM or wake the OOM killer; a case that needs more is waived
/// with the figures.
pub const BUFFER_SHARE_DIVISOR: u64 = 2;

/// H2D/D2H sizes (spec Path 3).
pub const GPU_COPY_SIZES: [u64; 10] = [
    128 * KIB,
    512 * KIB,
    MIB,
    2 * MIB,
    4 * MIB,
    8 * MIB,
    16 * MIB,
    32 * MIB,
    64 * MIB,
    256 * MIB,
];
/// Pinned H2D, D2H and duplex copies of at least this size must repeat within [`STEADY_SPREAD_PCT`]
/// (the spec's bar for them): where their first window of timed repetitions spreads more, the
/// runner times them again (at once, and once more after the other GPU copy cases:
/// `hwc_runner::MAX_WINDOWS` windows) and keeps the steadiest. Smaller copies, pageable ones and
/// D2D spread more on a quiet machine too (128 KiB H2D 1.5–5 %, pageable 3–26 %, several-stream L2
/// D2D 1–8 % on the H200 machine) and are timed once.
pub const STEADY_MIN_BYTES: u64 = 4 * MIB;
/// The spread, in per cent, above which a copy of [`STEADY_MIN_BYTES`] or more is timed again.
/// On a quiet H200 machine every pinned H2D and D2H case of 4 MiB or more spreads well under
/// 1 % and duplex ones up to about 2 %; on a busy host the plain-CUDA reference spreads as much
/// as we do (the figures: docs/gpu-method.md).
pub const STEADY_SPREAD_PCT: u32 = 1;
/// Concurrent streams for H2D/D2H (spec Path 3).
pub const GPU_COPY_STREAMS: [u32; 4] = [1, 2, 4, 8];
/// D2D sizes (spec Path 4), plus buffers several times any current GPU's L2 (HBM figures).
pub const D2D_SIZES: [u64; 9] = [
    128 * KIB,
    512 * KIB,
    MIB,
    2 * MIB,
    4 * MIB,
    8 * MIB,
    16 * MIB,
    256 * MIB,
    1024 * MIB,
];
pub const D2D_STREAMS: [u32; 3] = [1, 2, 4];
/// Pageable H2D/D2H sizes.
pub const PAGEABLE_SIZES: [u64; 2] = [4 * MIB, 256 * MIB];

/// What shapes a plan besides the machine.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Only these paths (`--paths`); `None` = every path.
    pub paths: Option<BTreeSet<PathId>>,
    /// The engines of this build, in registration order, with what their probes found: a path
    /// is measured by each engine that declares it (and is selected), and waived for each that
    /// cannot run here.
    pub engines: Vec<EngineStatus>,
    /// Only these engines (`--engines`); `None` = every engine on by default.
    pub selected_engines: Option<BTreeSet<EngineId>>,
    /// The run has root's rights (engines that need them are waived otherwise).
    pub root: bool,
    /// Override the host thread sweep (`--threads 1,4,16`); a count larger than a node's CPUs
    /// is waived for that node (see [`input`] for the counts refused outright).
    pub host_threads: Option<Vec<u32>>,
    /// Override the host sizes (`--host-sizes 4MiB,256MiB`); a size whose buffers would take
    /// more than [`BUFFER_SHARE_DIVISOR`]'s share of a node's memory is waived for that pair.
    pub host_sizes: Option<Vec<u64>>,
    /// Divide repetition counts (for quick smoke runs): timed = max(timed / n, 5), each a fixed
    /// count.
    pub reps_divisor: Option<u32>,
    /// Time every case its full count of repetitions (`--fixed-reps`) rather than stopping it
    /// once steady ([`Reps::steady`]).
    pub fixed_reps: bool,
    /// Tool version, quoted in the waiver of a path no engine of this build measures.
    pub version: String,
    /// NVMe sizes, queue depths, selected drives, write approvals, `--target`.
    pub nvme: NvmePlanOptions,
    /// NVMe → BAR targets: PCI BARs named, and whether GPU BAR1 can be mapped.
    pub bar: bar::BarPlanOptions,
}

impl PlanOptions {
    fn wants(&self, path: PathId) -> bool {
        self.paths.as_ref().is_none_or(|p| p.contains(&path))
    }
    fn reps(&self, warmup: u32, timed: u32) -> Reps {
        match self.reps_divisor {
            Some(d) if d > 1 => Reps {
                // At least one where any was asked for.
                warmup: (warmup / d).max(warmup.min(1)),
                timed: (timed / d).max(5),
                retry_above_spread_pct: None,
                steady: None,
            },
            _ => Reps {
                warmup,
                timed,
                retry_above_spread_pct: None,
                steady: None,
            },
        }
    }
    /// [`PlanOptions::reps`] with `timed` as a cap, stopping once steady ([`Steady`]: at least
    /// `min_timed`, the median known within `within_pct`), unless the run asked for fixed
    /// counts or fewer repetitions.
    pub(crate) fn adaptive_reps(
        &self,
        warmup: u32,
        timed: u32,
        min_timed: u32,
        within_pct: u32,
    ) -> Reps {
        let reps = self.reps(warmup, timed);
        let fixed = self.fixed_reps || self.reps_divisor.is_some_and(|d| d > 1);
        Reps {
            steady: (!fixed && min_timed < timed).then_some(Steady {
                min_timed,
                within_pct,
            }),
            ..reps
        }
    }
}

/// One cell of a path's matrix: what every engine that measures cells of its kind is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub kind: CellKind,
    /// The cell's name in case keys (`gpu0/local/4MiB/s1`): see [`hwc_model::case_key`].
    pub name: String,
    pub spec: Spec,
    pub reps: Reps,
}

/// A path's matrix on this machine: its cells, and what of it cannot run here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matrix {
    pub cells: Vec<Cell>,
    pub waived: Vec<Waiver>,
}

/// The matrix of `path` on `topo`, engines aside.
pub fn matrix(path: PathId, topo: &Topology, opts: &PlanOptions) -> Matrix {
    let mut m = Matrix::default();
    match path {
        PathId::HostRam => plan_host_ram(topo, opts, &mut m),
        PathId::H2d | PathId::D2h | PathId::Duplex | PathId::D2d => {
            plan_gpu_copies(path, topo, opts, &mut m)
        }
        PathId::NvmeRead | PathId::NvmeWrite => nvme::plan_nvme(path, topo, opts, &mut m),
        PathId::Gds => gds::plan_gds(topo, opts, &mut m),
        PathId::NvmeBar1 => bar::plan_bar(topo, opts, &mut m),
        PathId::Gdrcopy => gdrcopy::plan_gdrcopy(topo, opts, &mut m),
        PathId::Xxh3 => xxh3::plan_xxh3(topo, opts, &mut m),
    }
    m
}

impl PlanOptions {
    /// Whether the run plans `decl`'s engine: named in `--engines`, or on by default.
    fn selects(&self, decl: &hwc_model::EngineDecl) -> bool {
        match &self.selected_engines {
            Some(named) => named.contains(&decl.id),
            None => decl.default_on,
        }
    }
}

/// Why engine `e` cannot run on `topo` (by a run with root's rights or not), from its
/// declaration and its probe: (reason, hint); `None` where it can.
pub fn engine_blocked(
    topo: &Topology,
    root: bool,
    e: &EngineStatus,
) -> Option<(String, Option<String>)> {
    let needs = &e.decl.needs;
    if needs.gpu && topo.gpus.is_empty() {
        return Some(("no NVIDIA GPU was detected".into(), None));
    }
    for lib in &needs.libraries {
        if let Some((reason, hint)) = tool_missing(topo, &lib.name) {
            return Some((reason, lib.install_hint.clone().or(hint)));
        }
    }
    if needs.root && !root {
        return Some((
            format!("engine {} needs root", e.decl.id),
            Some("run as root (sudo)".into()),
        ));
    }
    e.available.clone().err()
}

/// Build the plan. Pure: same inputs, same plan.
///
/// Each path's [`matrix`] is measured by every selected engine that declares the path and the
/// cell's kind; an engine that cannot run here is waived for the path with its reason. An
/// engine's cases come together, in the registry's order, so that each engine's cases run back
/// to back.
pub fn plan(topo: &Topology, opts: &PlanOptions) -> Plan {
    let mut p = Plan::default();
    for path in PathId::ALL {
        if !opts.wants(path) {
            continue;
        }
        let m = matrix(path, topo, opts);
        if m.cells.is_empty() {
            // The path's own reasons (no GPU, no drives, …).
            p.waived.extend(m.waived);
            continue;
        }
        let engines: Vec<&EngineStatus> = opts
            .engines
            .iter()
            .filter(|e| e.decl.paths.contains(&path))
            .collect();
        let selected: Vec<&EngineStatus> = engines
            .iter()
            .copied()
            .filter(|e| opts.selects(&e.decl))
            .collect();
        if selected.is_empty() {
            let reason = if engines.is_empty() {
                format!(
                    "no engine of this build of hwceiling {} measures {path}",
                    opts.version
                )
            } else {
                let names: Vec<&str> = engines.iter().map(|e| e.decl.id.as_str()).collect();
                format!(
                    "no engine selected measures {path} (its engines: {})",
                    names.join(", ")
                )
            };
            p.waived.push(Waiver {
                path,
                engine: None,
                scope: None,
                covers: None,
                reason,
                hint: Some(
                    "`hwceiling engines` lists this build's engines and what they measure".into(),
                ),
            });
            continue;
        }
        let before = p.cases.len();
        for e in selected {
            let cells: Vec<&Cell> = m
                .cells
                .iter()
                .filter(|c| e.decl.cells.contains(&c.kind))
                .collect();
            if cells.is_empty() {
                continue;
            }
            if let Some((reason, hint)) = engine_blocked(topo, opts.root, e) {
                p.waived.push(Waiver {
                    path,
                    engine: Some(e.decl.id.clone()),
                    scope: None,
                    covers: None,
                    reason,
                    hint,
                });
                continue;
            }
            let cells = match userspace_cells(path, e, cells, &opts.nvme, &mut p.waived) {
                Some(cells) => cells,
                None => continue,
            };
            for c in cells {
                debug_assert_eq!(c.spec.check(path), Ok(()), "{}", c.name);
                p.cases.push(Case {
                    key: case_key(path, &e.decl.id, &c.name),
                    path,
                    engine: e.decl.id.clone(),
                    cell: c.name.clone(),
                    spec: c.spec.clone(),
                    reps: c.reps,
                });
            }
        }
        // What of the matrix cannot run here, where some engine measures the rest (where none
        // can, its waivers say why and the matrix's are moot).
        if p.cases.len() > before {
            p.waived.extend(m.waived);
        }
    }
    // The cases of engines of userspace drivers run last, each engine's together (in
    // registration order): their drives leave the kernel once per engine, for its cases only,
    // and every other engine (the kernel NVMe engine's reads and writes among them) sees the
    // drives on their kernel driver.
    let userspace: Vec<&EngineId> = opts
        .engines
        .iter()
        .filter(|e| e.decl.needs.vfio)
        .map(|e| &e.decl.id)
        .collect();
    p.cases.sort_by_key(|c| {
        userspace
            .iter()
            .position(|e| **e == c.engine)
            .map_or(0, |i| i + 1)
    });
    p
}

/// The cells an engine of a userspace driver (`needs.vfio`) may measure: those over drives
/// handed to it (`--spdk-drives`), not over a `--target`; the rest waived for it, once per path
/// with their count. `None`: the engine measures nothing of `path` (waived). Other engines get
/// `cells` as they are.
fn userspace_cells<'c>(
    path: PathId,
    e: &EngineStatus,
    cells: Vec<&'c Cell>,
    nvme: &NvmePlanOptions,
    waived: &mut Vec<Waiver>,
) -> Option<Vec<&'c Cell>> {
    if !e.decl.needs.vfio {
        return Some(cells);
    }
    let mut waive = |scope: Option<String>, reason: String, hint: Option<&str>| {
        waived.push(Waiver {
            path,
            engine: Some(e.decl.id.clone()),
            scope,
            covers: None,
            reason,
            hint: hint.map(str::to_string),
        })
    };
    const HINT: &str = "--spdk-drives DRIVE,... (drives without data: none mounted, partitioned, \
        held or signed)";
    let Some(bindable) = &nvme.bindable else {
        waive(
            None,
            format!(
                "engine {} hands drives to vfio-pci, and does so only for drives named with \
                 --spdk-drives",
                e.decl.id
            ),
            Some(HINT),
        );
        return None;
    };
    let (mine, others): (Vec<&Cell>, Vec<&Cell>) = cells.into_iter().partition(|c| {
        let drives = c.spec.drives();
        !c.spec.nvme().is_some_and(|s| s.target)
            && !drives.is_empty()
            && drives.iter().all(|d| bindable.contains(d))
    });
    if !others.is_empty() {
        let target = others
            .iter()
            .any(|c| c.spec.nvme().is_some_and(|s| s.target));
        let reason = if target {
            format!(
                "engine {} drives whole NVMe drives, not a --target",
                e.decl.id
            )
        } else {
            format!(
                "engine {} measures only the drives named with --spdk-drives: {} of {path}'s \
                 cases use others",
                e.decl.id,
                others.len()
            )
        };
        waive(
            Some(format!("{path}/{}", e.decl.id)),
            reason,
            (!target).then_some(HINT),
        );
    }
    (!mine.is_empty()).then_some(mine)
}

/// Waive `path`, or the part of it `scope` names in words (typed: [`Covers::Other`]; see
/// [`waive_part`] for a part programs tell apart).
fn waive(p: &mut Matrix, path: PathId, scope: Option<String>, reason: String, hint: Option<&str>) {
    let part = scope.map(|s| (s, Covers::Other));
    waive_part(p, path, part, reason, hint);
}

/// Waive the part of `path` that `part` names, in words and typed.
fn waive_part(
    p: &mut Matrix,
    path: PathId,
    part: Option<(String, Covers)>,
    reason: String,
    hint: Option<&str>,
) {
    let (scope, covers) = part.unzip();
    p.waived.push(Waiver {
        path,
        engine: None,
        scope,
        covers,
        reason,
        hint: hint.map(str::to_string),
    });
}

fn tool<'a>(topo: &'a Topology, name: &str) -> Option<&'a ToolStatus> {
    topo.tools.iter().find(|t| t.name == name)
}

fn tool_missing(topo: &Topology, name: &str) -> Option<(String, Option<String>)> {
    match tool(topo, name) {
        Some(t) if t.present => None,
        Some(t) => Some((
            format!("{name} not found ({})", t.evidence),
            t.install_hint.clone(),
        )),
        None => Some((format!("{name} was not looked for"), None)),
    }
}

/// Nodes with CPUs, in id order.
fn cpu_nodes(topo: &Topology) -> Vec<&NumaNode> {
    let mut v: Vec<&NumaNode> = topo
        .platform
        .numa
        .iter()
        .filter(|n| !n.memory_only && !n.cpus.is_empty())
        .collect();
    v.sort_by_key(|n| n.id);
    v
}

/// The thread counts a full run sweeps on some node: every node's [`thread_sweep`], together. A
/// `--threads` list that holds them all sweeps every point a full run does on every node.
pub fn default_host_threads(topo: &Topology) -> Vec<u32> {
    let mut all = BTreeSet::new();
    for n in cpu_nodes(topo) {
        let cpus = u32::try_from(n.cpus.len()).unwrap_or(u32::MAX);
        all.extend(thread_sweep(cpus, physical_cores(topo, &n.cpus)));
    }
    all.into_iter().collect()
}

/// The host-RAM cells of a full run on `topo` that a run with the host sizes `sizes` does not
/// plan, as `<size>` (every cell of that size) or `<size> sustained` (its sustained cells, where
/// every host engine measures the ceiling: they are at the largest size of a sweep, so a list
/// with a larger size moves them, and the sustained ceiling with them). Empty when the list plans
/// every cell a full run does.
pub fn host_sizes_left_out(topo: &Topology, sizes: &[u64]) -> Vec<String> {
    let cells = |sizes: Option<Vec<u64>>| {
        let opts = PlanOptions {
            host_sizes: sizes,
            ..PlanOptions::default()
        };
        matrix(PathId::HostRam, topo, &opts).cells
    };
    let given: BTreeSet<(CellKind, String)> = cells(Some(sizes.to_vec()))
        .into_iter()
        .map(|c| (c.kind, c.name))
        .collect();
    let mut out: Vec<String> = Vec::new();
    // In the plan's order: by pair, then size.
    for c in cells(None) {
        if given.contains(&(c.kind, c.name.clone())) {
            continue;
        }
        let size = size_label(c.spec.size_bytes());
        let label = match c.kind {
            CellKind::Sustained => format!("{size} sustained"),
            _ => size,
        };
        if !out.contains(&label) {
            out.push(label);
        }
    }
    out
}

/// 1, 2, 4, … below `cpus`, plus the node's physical core count and all its CPUs.
pub fn thread_sweep(cpus: u32, physical_cores: Option<u32>) -> Vec<u32> {
    let mut set = BTreeSet::new();
    let mut t = 1;
    while t < cpus {
        set.insert(t);
        t *= 2;
    }
    if let Some(c) = physical_cores.filter(|&c| c >= 1 && c <= cpus) {
        set.insert(c);
    }
    set.insert(cpus.max(1));
    set.into_iter().collect()
}

/// Physical cores among `cpus` (distinct package/core pairs), when the topology knows them.
fn physical_cores(topo: &Topology, cpus: &[u32]) -> Option<u32> {
    let mut cores = BTreeSet::new();
    for id in cpus {
        let c = topo.platform.cpus.iter().find(|c| c.id == *id)?;
        cores.insert((c.package?, c.core?));
    }
    u32::try_from(cores.len()).ok()
}

/// The spec's host sizes, plus a sustained size when the last-level cache is so large that
/// 256 MiB buffers do not leave it [`CACHE_MARGIN`] times over (a 300 MiB L3 is common): the
/// smallest power of two that does, while both buffers stay within an eighth of the memory.
pub fn host_sizes(topo: &Topology) -> Vec<u64> {
    let mut sizes = HOST_RAM_SIZES.to_vec();
    let largest = HOST_RAM_SIZES[HOST_RAM_SIZES.len() - 1];
    if let Some(llc) = topo.platform.llc_bytes() {
        let need = (CACHE_MARGIN * llc).div_ceil(2).next_power_of_two();
        let memory_ok = topo.platform.memory_bytes.is_none_or(|m| 2 * need <= m / 8);
        if need > largest && memory_ok {
            sizes.push(need);
        }
    }
    sizes
}

fn host_reps(opts: &PlanOptions, size: u64) -> Reps {
    // The spec's counts: 200 iterations up to 16 MiB, 50 for its 64 and 256 MiB. A size beyond
    // the spec's (added to leave a large cache, see `host_sizes`) moves four times the bytes
    // per repetition and is swept with two copy kernels: 12 of them after 2 warm-up (on the
    // H200 machine a host copy's first warm-up still read a median 7 % under its timed median),
    // so that the default profile stays near a minute.
    // Each count is a cap: a case stops at a tenth of it (at least 5) once its median is known
    // within HOST_STEADY_PCT (see `Steady`).
    if size <= 16 * MIB {
        opts.adaptive_reps(20, 200, 20, HOST_STEADY_PCT)
    } else if size <= HOST_RAM_SIZES[HOST_RAM_SIZES.len() - 1] {
        opts.adaptive_reps(5, 50, 5, HOST_STEADY_PCT)
    } else {
        opts.adaptive_reps(2, 12, 5, HOST_STEADY_PCT)
    }
}

fn plan_host_ram(topo: &Topology, opts: &PlanOptions, p: &mut Matrix) {
    let nodes = cpu_nodes(topo);
    if nodes.is_empty() {
        waive(
            p,
            PathId::HostRam,
            None,
            "no NUMA node with CPUs was detected".into(),
            None,
        );
        return;
    }
    for n in topo.platform.numa.iter().filter(|n| n.memory_only) {
        waive(
            p,
            PathId::HostRam,
            Some(format!("node {}", n.id)),
            format!(
                "node {} is memory-only (no CPUs): device or CXL memory, not a host-RAM tier",
                n.id
            ),
            None,
        );
    }
    let sizes = opts.host_sizes.clone().unwrap_or_else(|| host_sizes(topo));
    let mut pairs: Vec<(&NumaNode, u32)> = nodes.iter().map(|n| (*n, n.id)).collect();
    for a in &nodes {
        for b in &nodes {
            if a.id < b.id {
                pairs.push((a, b.id));
            }
        }
    }
    if nodes.len() < 2 {
        waive_part(
            p,
            PathId::HostRam,
            Some(("cross-NUMA".into(), Covers::CrossNuma)),
            "one NUMA node with CPUs: there is no cross-NUMA path".into(),
            None,
        );
    }
    for (src, dst) in pairs {
        let cpus = u32::try_from(src.cpus.len()).unwrap_or(u32::MAX);
        let pair = if src.id == dst {
            format!("n{}-n{dst}", src.id)
        } else {
            format!("cross-NUMA n{}-n{dst}", src.id)
        };
        let threads: Vec<u32> = match &opts.host_threads {
            Some(asked) => {
                for &t in asked.iter().filter(|&&t| t == 0 || t > cpus) {
                    waive_threads(p, &pair, (src.id, dst), cpus, t);
                }
                asked
                    .iter()
                    .copied()
                    .filter(|&t| t >= 1 && t <= cpus)
                    .collect()
            }
            None => thread_sweep(cpus, physical_cores(topo, &src.cpus)),
        };
        let sizes: Vec<u64> = sizes
            .iter()
            .copied()
            .filter(|&size| {
                let why = host_buffers_too_large(topo, src.id, dst, size);
                if let Some(why) = &why {
                    waive_part(
                        p,
                        PathId::HostRam,
                        Some((
                            format!("{pair}, {}", size_label(size)),
                            Covers::HostPair {
                                src_node: src.id,
                                dst_node: dst,
                            },
                        )),
                        why.clone(),
                        Some("a smaller --host-sizes"),
                    );
                }
                why.is_none()
            })
            .collect();
        // Every size in the sweep (the spec's table); the largest (the sustained size, see
        // `host_sizes`) is where the sustained ceiling is taken, and every host engine measures
        // it: the streaming copy's non-temporal stores skip the read-for-ownership that the C
        // library's memcpy pays when it keeps to cached stores (see hwc-bench-host's `kernel`
        // module).
        let largest = sizes.iter().copied().max();
        for &size in &sizes {
            let kind = if Some(size) == largest {
                CellKind::Sustained
            } else {
                CellKind::Sweep
            };
            for &t in &threads {
                p.cells.push(Cell {
                    kind,
                    name: format!("n{}-n{dst}/{}/t{t}", src.id, size_label(size)),
                    spec: Spec::HostCopy(HostCopySpec {
                        size_bytes: size,
                        threads: t,
                        cpu_node: src.id,
                        src_node: src.id,
                        dst_node: dst,
                    }),
                    reps: host_reps(opts, size),
                });
            }
        }
    }
}

/// A `--threads` count the node cannot run: each copy thread is pinned to a CPU of its own.
fn waive_threads(p: &mut Matrix, pair: &str, (node, dst): (u32, u32), cpus: u32, t: u32) {
    let reason = if t == 0 {
        "0 threads copy nothing".to_string()
    } else {
        format!(
            "node {node} has {cpus} CPU{}: {t} copy threads need a CPU each (they are pinned \
             one to a CPU)",
            if cpus == 1 { "" } else { "s" }
        )
    };
    waive_part(
        p,
        PathId::HostRam,
        Some((
            format!("{pair}, {t} threads"),
            Covers::HostPair {
                src_node: node,
                dst_node: dst,
            },
        )),
        reason,
        Some(&format!("--threads from 1 to {cpus} for node {node}")),
    );
}

/// The memory of a NUMA node, when the topology knows it; a machine with one node has the
/// machine's memory.
fn node_memory(topo: &Topology, node: Option<u32>) -> Option<u64> {
    let one_node = topo.platform.numa.len() <= 1;
    match node {
        Some(id) => topo
            .platform
            .numa
            .iter()
            .find(|n| n.id == id)
            .and_then(|n| n.memory_bytes)
            .or_else(|| one_node.then_some(topo.platform.memory_bytes).flatten()),
        None => topo.platform.memory_bytes,
    }
}

/// `24.5 GiB`: a memory size for a waiver.
fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / GIB as f64)
}

/// Why buffers of `need` bytes cannot go on `node` (`None`: the machine's memory, the node
/// being unknown), or `None` when they fit [`BUFFER_SHARE_DIVISOR`]'s share of its memory (or
/// the memory is unknown: an unknown fact is not guessed).
pub(crate) fn buffers_too_large(
    topo: &Topology,
    node: Option<u32>,
    need: u64,
    what: &str,
) -> Option<String> {
    let memory = node_memory(topo, node)?;
    let share = memory / BUFFER_SHARE_DIVISOR;
    (need > share).then(|| {
        let place = match node {
            Some(n) => format!("node {n}'s"),
            None => "this machine's".to_string(),
        };
        format!(
            "{what} would take {} of {place} {} of memory, more than half (the rest is left to \
             the system and other processes)",
            gib(need),
            gib(memory)
        )
    })
}

/// Why a host copy of `size` bytes from `src` to `dst` does not fit the nodes' memory.
fn host_buffers_too_large(topo: &Topology, src: u32, dst: u32, size: u64) -> Option<String> {
    if src == dst {
        let what = format!("the source and destination buffers of {}", size_label(size));
        buffers_too_large(topo, Some(src), size.saturating_mul(2), &what)
    } else {
        let what = |role: &str| format!("the {role} buffer of {}", size_label(size));
        buffers_too_large(topo, Some(src), size, &what("source"))
            .or_else(|| buffers_too_large(topo, Some(dst), size, &what("destination")))
    }
}

/// Host-buffer placements for one GPU: the GPU's node (local) first, then every other node
/// with CPUs (cross). `None` node = the GPU's node is unknown: no placement requested.
fn gpu_placements(
    topo: &Topology,
    g: &Gpu,
    p: &mut Matrix,
    path: PathId,
) -> Vec<(String, Option<u32>)> {
    let nodes = cpu_nodes(topo);
    let mut out = Vec::new();
    match g.numa_node {
        Some(local) => {
            out.push(("local".to_string(), Some(local)));
            for n in nodes.iter().filter(|n| n.id != local) {
                out.push((format!("cross-n{}", n.id), Some(n.id)));
            }
            if nodes.len() < 2 {
                waive_part(
                    p,
                    path,
                    Some((
                        format!("{} cross-NUMA", g.name()),
                        Covers::Gpu {
                            gpu: g.name(),
                            local: false,
                            cross: true,
                        },
                    )),
                    "one NUMA node with CPUs: there is no cross-NUMA placement".into(),
                    None,
                );
            }
        }
        None => {
            out.push(("unplaced".to_string(), None));
            waive_part(
                p,
                path,
                Some((
                    format!("{} NUMA-local and cross-NUMA", g.name()),
                    Covers::Gpu {
                        gpu: g.name(),
                        local: true,
                        cross: true,
                    },
                )),
                format!(
                    "the NUMA node of {} ({}) is not reported by sysfs: host buffers are not placed",
                    g.name(),
                    g.pci_bdf
                ),
                Some("check the platform's ACPI _PXM / SRAT tables"),
            );
        }
    }
    out
}

/// Timed repetitions a GPU copy case takes at least, where it may stop once steady
/// ([`Steady`]): the fewest whose min and max are a 93.75 % interval of the median.
pub const GPU_MIN_TIMED: u32 = 5;
/// How closely a GPU copy's median must be known for the case to stop before its cap, in per
/// cent (the tighter [`STEADY_SPREAD_PCT`] for the cases held to it).
pub const GPU_STEADY_PCT: u32 = 2;
/// How closely a host-RAM copy's median must be known for the case to stop before its cap, in
/// per cent.
pub const HOST_STEADY_PCT: u32 = 5;

/// The spread above which a GPU copy case is timed again ([`Reps::retry_above_spread_pct`]):
/// [`STEADY_SPREAD_PCT`] for pinned copies over PCIe (H2D, D2H, duplex) of at least
/// [`STEADY_MIN_BYTES`], none for the others.
pub fn gpu_copy_retry_limit(path: PathId, spec: &GpuCopySpec) -> Option<u32> {
    let steady = matches!(path, PathId::H2d | PathId::D2h | PathId::Duplex)
        && spec.pinned()
        && spec.size_bytes >= STEADY_MIN_BYTES;
    steady.then_some(STEADY_SPREAD_PCT)
}

fn gpu_cell(path: PathId, name: String, spec: GpuCopySpec, reps: Reps) -> Cell {
    let retry = gpu_copy_retry_limit(path, &spec);
    Cell {
        kind: CellKind::Sweep,
        name,
        reps: Reps {
            retry_above_spread_pct: retry,
            // A case held to a spread stops only within it.
            steady: reps.steady.map(|st| Steady {
                within_pct: retry.map_or(st.within_pct, |r| r.min(st.within_pct)),
                ..st
            }),
            ..reps
        },
        spec: Spec::GpuCopy(spec),
    }
}

fn plan_gpu_copies(path: PathId, topo: &Topology, opts: &PlanOptions, p: &mut Matrix) {
    if topo.gpus.is_empty() {
        waive(p, path, None, "no NVIDIA GPU was detected".into(), None);
        return;
    }
    // A GPU repetition is K back-to-back copies per stream lasting about 20 ms (see
    // hwc-bench-cuda): 12 of them hold thousands of copies, more than the spec's 50
    // single-copy iterations, with a spread of well under 1 %. No warm-up repetition for pinned
    // and device copies: the engine's calibration (its first batch the cold figure, then a
    // batch of K) has run the same copies on the same buffers, and a
    // repetition right after it lay a median 0.01 % from the timed median (docs/measurements.md,
    // "The cold repetition"). Pageable copies, whose first repetition read up to 6 % low there,
    // keep one.
    // 12 is the cap: a case stops at 5 once its median is known within its limit (see
    // `gpu_cell`).
    let copy_reps = opts.adaptive_reps(0, 12, GPU_MIN_TIMED, GPU_STEADY_PCT);
    let pageable_reps = opts.adaptive_reps(1, 12, GPU_MIN_TIMED, GPU_STEADY_PCT);
    for g in &topo.gpus {
        let gpu = g.name();
        let copy = |size: u64, streams: u32, memory: HostMemory, node: Option<u32>| GpuCopySpec {
            gpu: gpu.clone(),
            size_bytes: size,
            streams,
            host_memory: Some(memory),
            host_node: node,
            cpu_node: node,
            direction: None,
        };
        match path {
            PathId::H2d | PathId::D2h => {
                let placements = gpu_placements(topo, g, p, path);
                for (label, node) in &placements {
                    let cross = node.is_some() && *node != g.numa_node;
                    // Cross-NUMA rows: one stream (the spec's penalty fields); local: the sweep.
                    let streams: &[u32] = if cross { &[1] } else { &GPU_COPY_STREAMS };
                    for &size in &GPU_COPY_SIZES {
                        for &s in streams {
                            let spec = copy(size, s, HostMemory::Pinned, *node);
                            let name = format!("{gpu}/{label}/{}/s{s}", size_label(size));
                            p.cells.push(gpu_cell(path, name, spec, copy_reps));
                        }
                    }
                }
                let (label, node) = &placements[0];
                for &size in &PAGEABLE_SIZES {
                    let spec = copy(size, 1, HostMemory::Pageable, *node);
                    let name = format!("{gpu}/{label}-pageable/{}/s1", size_label(size));
                    p.cells.push(gpu_cell(path, name, spec, pageable_reps));
                }
            }
            PathId::Duplex => {
                let local = g.numa_node;
                let label = if local.is_some() { "local" } else { "unplaced" };
                for &size in &GPU_COPY_SIZES {
                    for dir in [CopyDirection::H2d, CopyDirection::D2h] {
                        let spec = GpuCopySpec {
                            direction: Some(dir),
                            ..copy(size, 1, HostMemory::Pinned, local)
                        };
                        let name =
                            format!("{gpu}/{label}/{}/s1/{}", size_label(size), dir.as_str());
                        p.cells.push(gpu_cell(path, name, spec, copy_reps));
                    }
                }
            }
            PathId::D2d => {
                for &size in &D2D_SIZES {
                    for &s in &D2D_STREAMS {
                        let spec = GpuCopySpec {
                            gpu: gpu.clone(),
                            size_bytes: size,
                            streams: s,
                            host_memory: None,
                            host_node: None,
                            cpu_node: None,
                            direction: None,
                        };
                        let name = format!("{gpu}/{}/s{s}", size_label(size));
                        p.cells.push(gpu_cell(path, name, spec, copy_reps));
                    }
                }
            }
            _ => unreachable!("plan_gpu_copies is called for GPU copy paths only"),
        }
    }
}

#[cfg(test)]
mod tests;
