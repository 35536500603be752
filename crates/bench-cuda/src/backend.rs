//! The runner's view of CUDA: which GPU a case names, the idle guard, the clock warm-up, the
//! environment record, and a [`CopyCase`] per case.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hwc_model::{size_label, Case, CellKind, EngineDecl, EngineId, Library, Needs, PathId};
use hwc_runner::{BenchError, Engine, Idle, Prepared};
use nvml_wrapper::{Device, Nvml};

use crate::affinity::node_cpus;
use crate::bdf::normalize_bdf;
use crate::copy::{CaseContext, CopyCase, CopyOp, DeviceRuntime, WarmKit, LATCH_TIMEOUT_NS};
use crate::error::{driver, CudaError};
use crate::nvml::{self, link_setting, Sample};
use crate::params::CopySpec;
use crate::probe::{CudaDevice, CudaProbe};
use hwc_model::Setting;

/// Utilisation above this share of time (NVML, %) means someone else is using the GPU.
pub const BUSY_UTILISATION_PCT: u32 = 5;
/// NVML's utilisation covers a past window of up to 1 s: our own work inside it would count.
const UTILISATION_WINDOW: Duration = Duration::from_millis(1100);
/// Clock warm-up before a GPU's first case.
const FIRST_WARMUP: Duration = Duration::from_millis(200);
/// Shorter warm-up when the GPU has been idle this long since our last work on it.
const REWARM_AFTER: Duration = Duration::from_secs(2);
const REWARM: Duration = Duration::from_millis(100);
/// Idle this long (on a machine with several GPUs, one waits through another's block of cases:
/// about 17 s of H2D copies on an H200), a GPU gets the first warm-up's length again.
const LONG_IDLE: Duration = Duration::from_secs(10);

/// How long to warm a GPU before a case: `None` when it worked less than [`REWARM_AFTER`] ago.
fn warm_duration(warmed: bool, idle_for: Option<Duration>) -> Option<Duration> {
    match idle_for {
        _ if !warmed => Some(FIRST_WARMUP),
        Some(d) if d < REWARM_AFTER => None,
        Some(d) if d < LONG_IDLE => Some(REWARM),
        _ => Some(FIRST_WARMUP),
    }
}
/// Device memory left free beyond what a case allocates.
const DEVICE_MEMORY_MARGIN_BYTES: u64 = 256 << 20;

/// One GPU the caller named.
struct Slot {
    /// Our name (`gpu0`).
    name: String,
    bdf: String,
    device: Option<CudaDevice>,
    nvml_index: Option<u32>,
    runtime: Option<DeviceRuntime>,
    /// Notes every figure of this GPU carries.
    notes: Vec<String>,
    environment: hwc_model::Environment,
    /// When the idle guard last looked (µs since the epoch, NVML's sample clock).
    utilisation_seen_us: Option<u64>,
    warmed: bool,
    /// The cases announced for this GPU (sizes its buffer pool will serve), until its context
    /// is opened.
    expected: Vec<CopySpec>,
}

/// The CUDA copy backend: H2D, D2H, duplex and D2D on the GPUs it was given.
pub struct CudaBackend {
    slots: Vec<Slot>,
    nvml: Option<Nvml>,
    environment: hwc_model::Environment,
    /// Set when CUDA is not usable here: every case is waived with this reason.
    unavailable: Option<String>,
    /// Duplex case key → the key of the announced case of the other direction of the same
    /// copies (see [`partners`]).
    partners: HashMap<String, String>,
}

const HINT_NO_CUDA: &str =
    "install the NVIDIA driver (libcuda.so.1) and check that nvidia-smi lists the GPU";

/// The `cuda.copy_placement` setting: which copies search placement, and over what.
fn copy_placement_setting() -> Setting {
    Setting::about(
        format!(
            "searched: 1-stream duplex and D2H up to {max}, {} placements; 1-stream D2D up to \
             {d2d_max}, {} placements",
            crate::params::SEARCH_PLACEMENTS.len(),
            crate::params::D2D_SEARCH_PLACEMENTS.len(),
            max = size_label(crate::params::PLACEMENT_SEARCH_MAX_BYTES as u64),
            d2d_max = size_label(crate::params::D2D_SEARCH_MAX_BYTES as u64),
        ),
        format!(
            "where small copies lie in their buffers moves them, so they are measured at the \
             fastest placement tried first (the {} fastest tried again, median of {} batches; \
             D2D placements reach {reach} into their buffers); other copies at their buffers' \
             start",
            crate::copy::FINALISTS,
            crate::copy::FINAL_REPS,
            reach = size_label(crate::params::D2D_SEARCH_REACH_BYTES as u64),
        ),
    )
}

impl CudaBackend {
    /// A backend for the GPUs in `gpus`, each given as (our name, PCI address), matched to the
    /// CUDA devices of `probe` by address.
    pub fn new(probe: &CudaProbe, gpus: &[(String, String)]) -> Self {
        let (nvml, nvml_error) = match Nvml::init() {
            Ok(n) => (Some(n), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let index = nvml.as_ref().map(nvml::index_by_bdf).unwrap_or_default();
        let mut environment = probe.environment.clone();
        environment.insert(
            "cuda.timing".into(),
            Setting::about(
                "latched events",
                "copies queued behind a spin-kernel latch (PTX, host-mapped flag), timed by CUDA \
                 events (CU_EVENT_DEFAULT), the host wall clock from the latch's release a \
                 cross-check",
            ),
        );
        environment.insert(
            "cuda.pinned_memory".into(),
            Setting::about(
                "registered mmap, huge pages",
                "mmap + mbind + pre-faulted, transparent huge pages requested (small pages for \
                 the copies that search placement), registered with \
                 cuMemHostRegister(PORTABLE), not write-combined",
            ),
        );
        environment.insert(
            "cuda.device_max_connections".into(),
            crate::connections::recorded(),
        );
        environment.insert("cuda.copy_placement".into(), copy_placement_setting());
        let slots = gpus
            .iter()
            .map(|(name, bdf)| {
                let bdf = normalize_bdf(bdf).unwrap_or_else(|| bdf.to_ascii_lowercase());
                let device = probe.devices.iter().find(|d| d.pci_bdf == bdf).cloned();
                let nvml_index = index.get(&bdf).copied();
                let mut notes = Vec::new();
                if let Some(e) = &nvml_error {
                    notes.push(format!(
                        "idle guard off: NVML unavailable ({e}), GPU load was not checked"
                    ));
                } else if nvml_index.is_none() {
                    notes.push(format!(
                        "idle guard off: NVML does not list {bdf}, GPU load was not checked"
                    ));
                }
                let mut environment = hwc_model::Environment::new();
                environment.insert(format!("{name}.pci_bdf"), bdf.clone().into());
                if let Some(d) = &device {
                    static_facts(name, d, &mut environment);
                }
                Slot {
                    name: name.clone(),
                    bdf,
                    device,
                    nvml_index,
                    runtime: None,
                    notes,
                    environment,
                    utilisation_seen_us: None,
                    warmed: false,
                    expected: Vec::new(),
                }
            })
            .collect();
        CudaBackend {
            slots,
            nvml,
            environment,
            unavailable: None,
            partners: HashMap::new(),
        }
    }

    /// A backend for a machine where [`crate::probe`] failed: it serves the GPU paths and waives
    /// every case with `reason`.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        CudaBackend {
            slots: Vec::new(),
            nvml: None,
            environment: BTreeMap::new(),
            unavailable: Some(reason.into()),
            partners: HashMap::new(),
        }
    }

    fn prepare_case(&mut self, case: &Case) -> Result<CopyCase<'_>, CudaError> {
        if let Some(reason) = &self.unavailable {
            return Err(CudaError::unavailable(reason.clone(), Some(HINT_NO_CUDA)));
        }
        let spec = CopySpec::from_case(case)?;
        let CudaBackend {
            slots,
            nvml,
            partners,
            ..
        } = self;
        let known: Vec<String> = slots.iter().map(|s| s.name.clone()).collect();
        let slot = slots
            .iter_mut()
            .find(|s| s.name == spec.gpu)
            .ok_or_else(|| {
                CudaError::unavailable(
                    format!(
                        "{} is not one of the GPUs given to the CUDA backend ({})",
                        spec.gpu,
                        known.join(", ")
                    ),
                    None,
                )
            })?;
        let device = slot.device.clone().ok_or_else(|| {
            CudaError::unavailable(
                format!(
                    "{} ({}) is not a CUDA device here: the driver lists no device at that address",
                    slot.name, slot.bdf
                ),
                Some(HINT_NO_CUDA),
            )
        })?;
        let nvml_device = match (nvml.as_ref(), slot.nvml_index) {
            (Some(n), Some(i)) => n.device_by_index(i).ok(),
            _ => None,
        };
        let runtime = match slot.runtime {
            Some(ref mut r) => r,
            None => {
                let mut rt = DeviceRuntime::open(device.ordinal)?;
                rt.pool.expect(&slot.expected);
                slot.expected = Vec::new();
                slot.runtime.insert(rt)
            }
        };
        let (free_bytes, _) = runtime.ctx.mem_get_info().map_err(driver("cuMemGetInfo"))?;
        let needed = spec.device_bytes() + DEVICE_MEMORY_MARGIN_BYTES;
        let pooled = runtime.pool.device_bytes();
        if needed > free_bytes as u64 && needed <= free_bytes as u64 + pooled {
            // The pool holds what this case needs: start it afresh at this case's sizes.
            runtime.pool.release_device();
        }
        let (free_bytes, _) = runtime.ctx.mem_get_info().map_err(driver("cuMemGetInfo"))?;
        if needed > free_bytes as u64 + runtime.pool.device_bytes() {
            return Err(CudaError::unavailable(
                format!(
                    "the case needs {:.1} GiB of device memory on {}, {:.1} GiB is free",
                    needed as f64 / (1u64 << 30) as f64,
                    slot.name,
                    free_bytes as f64 / (1u64 << 30) as f64
                ),
                None,
            ));
        }
        let idle_for = runtime.last_active.map(|t| t.elapsed());
        if let Some(duration) = warm_duration(slot.warmed, idle_for) {
            let report = warm_up(runtime, nvml_device.as_ref(), duration)?;
            if !slot.warmed {
                report.record(&slot.name, &mut slot.environment);
                let max_sm = device.nvml.as_ref().and_then(|f| f.max_sm_clock_mhz);
                if let Some(note) = report.stalled_note(max_sm) {
                    slot.notes.push(note);
                }
                if let Some(d) = &nvml_device {
                    if let Ok(p) = d.is_in_persistent_mode() {
                        slot.environment.insert(
                            format!("{}.persistence_mode", slot.name),
                            if p { "enabled" } else { "disabled" }.into(),
                        );
                    }
                }
                slot.warmed = true;
            }
        }
        let pin = match spec.cpu_node {
            Some(node) => Some((node, node_cpus(Path::new("/sys"), node)?)),
            None => None,
        };
        let cx = CaseContext {
            l2_cache_bytes: device.l2_cache_bytes,
            notes: slot.notes.clone(),
            pin,
            partner: partners.get(&case.key).cloned(),
        };
        let watch = nvml_device.map(crate::case_state::StateWatch::new);
        CopyCase::prepare(runtime, &spec, cx, watch)
    }
}

/// Each duplex case's partner among `cases`: the case of the other direction of the same
/// copies (both valid, and the same copy spec but the flow they report). Both run at once in
/// any duplex case, so the first of the two to run gives both figures from the same
/// repetitions ([`hwc_runner::Prepared::also`]).
fn partners(cases: &[&Case]) -> HashMap<String, String> {
    let duplex: Vec<(&Case, CopySpec)> = cases
        .iter()
        .filter(|c| c.path == PathId::Duplex)
        .filter_map(|c| CopySpec::from_case(c).ok().map(|s| (*c, s)))
        .collect();
    let mut out = HashMap::new();
    for (a, sa) in &duplex {
        let other = duplex.iter().find(|(b, sb)| {
            b.key != a.key
                && sb.measured != sa.measured
                && CopySpec {
                    measured: sa.measured,
                    ..sb.clone()
                } == *sa
        });
        if let Some((b, _)) = other {
            out.insert(a.key.clone(), b.key.clone());
        }
    }
    out
}

fn static_facts(name: &str, d: &CudaDevice, env: &mut hwc_model::Environment) {
    let mut put = |key: &str, v: Setting| {
        env.insert(format!("{name}.{key}"), v);
    };
    put("model", d.name.clone().into());
    put("cuda_ordinal", d.ordinal.to_string().into());
    put(
        "memory_bytes",
        Setting::bytes(d.memory_bytes, "device memory"),
    );
    put(
        "l2_cache_bytes",
        Setting::bytes(d.l2_cache_bytes, "L2 cache"),
    );
    put(
        "compute_capability",
        format!("{}.{}", d.compute_capability.0, d.compute_capability.1).into(),
    );
    put("copy_engines", d.copy_engines.to_string().into());
    if let Some(f) = &d.nvml {
        if let Some(l) = link_setting(f.link_gen_max, f.link_width_max) {
            put("pcie_link_max", l);
        }
        if let Some(b) = f.bar1_total_bytes {
            put("bar1_total_bytes", Setting::bytes(b, "BAR1 aperture"));
        }
        if let Some(c) = f.max_sm_clock_mhz {
            put("sm_clock_max_mhz", c.to_string().into());
        }
    }
}

/// Clocks and link before, during and after the warm-up.
struct WarmReport {
    idle: Sample,
    load: Sample,
    duration: Duration,
}

impl WarmReport {
    fn record(&self, gpu: &str, env: &mut hwc_model::Environment) {
        let mut put = |key: &str, v: Option<Setting>| {
            if let Some(v) = v {
                env.insert(hwc_model::gpu_key(gpu, key), v);
            }
        };
        let mhz = |c: Option<u32>| c.map(|c| Setting::from(c.to_string()));
        put("sm_clock_idle_mhz", mhz(self.idle.sm_clock_mhz));
        put("sm_clock_load_mhz", mhz(self.load.sm_clock_mhz));
        put("mem_clock_load_mhz", mhz(self.load.mem_clock_mhz));
        put(
            "pcie_link_idle",
            link_setting(self.idle.link_gen, self.idle.link_width),
        );
        put(
            hwc_model::PCIE_LINK_LOAD,
            link_setting(self.load.link_gen, self.load.link_width),
        );
        put("pstate_load", self.load.pstate.clone().map(Setting::from));
        put(
            "warmup_ms",
            Some(self.duration.as_millis().to_string().into()),
        );
    }

    /// A note when the SM clock did not rise under the warm-up load.
    /// A note when the SM clock neither rose under the warm-up load nor already ran at 90 % of
    /// its maximum `max_mhz` (a GPU just used by someone else starts the warm-up at full clock).
    fn stalled_note(&self, max_mhz: Option<u32>) -> Option<String> {
        stalled_clock_note(self.idle.sm_clock_mhz, self.load.sm_clock_mhz, max_mhz)
    }
}

fn stalled_clock_note(idle: Option<u32>, load: Option<u32>, max: Option<u32>) -> Option<String> {
    let (idle, load) = (idle?, load?);
    let near_max = max.is_some_and(|m| u64::from(load) * 10 >= u64::from(m) * 9);
    (load <= idle && !near_max).then(|| {
        format!("SM clock did not rise during the warm-up ({idle} MHz idle, {load} MHz under load)")
    })
}

/// Keep the GPU busy for `duration` (the latch kernel spinning on one SM, pinned H2D copies
/// and D2D copies on two more streams) so its clocks leave their idle state; sample NVML in
/// the middle, with copies in flight, for the link and clocks under load.
fn warm_up(
    rt: &mut DeviceRuntime,
    nvml: Option<&Device<'_>>,
    duration: Duration,
) -> Result<WarmReport, CudaError> {
    let idle = nvml.map(nvml::sample).unwrap_or_default();
    let ctx = rt.ctx.clone();
    ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
    // Kept for the GPU's later re-warms: allocating and freeing them between cases is work
    // the measured cases should not follow.
    let kit = match rt.warm_kit.take() {
        Some(k) => k,
        None => WarmKit::new(&ctx)?,
    };
    let WarmKit {
        spin,
        h2d,
        d2d,
        host,
        a,
        b,
    } = &kit;
    rt.flag.reset();
    let spin_ns = u64::try_from(duration.as_nanos()).unwrap_or(LATCH_TIMEOUT_NS);
    rt.latch.launch(spin, &rt.flag, spin_ns)?;
    let up = CopyOp::H2d {
        dst: a.ptr(),
        src: host.as_ptr(),
    };
    let there = CopyOp::D2d {
        dst: b.ptr(),
        src: a.ptr(),
    };
    let back = CopyOp::D2d {
        dst: a.ptr(),
        src: b.ptr(),
    };
    let began = Instant::now();
    let mut load = None;
    let result = (|| {
        while began.elapsed() < duration {
            for _ in 0..4 {
                // SAFETY: host, a and b hold kit.bytes() each; the kit is kept, or dropped,
                // only after every stream is synchronised below; the context is bound.
                unsafe {
                    up.enqueue(kit.bytes(), h2d)?;
                    there.enqueue(kit.bytes(), d2d)?;
                    back.enqueue(kit.bytes(), d2d)?;
                }
            }
            if load.is_none() && began.elapsed() >= duration / 2 {
                load = nvml.map(nvml::sample);
            }
            h2d.synchronize().map_err(driver("cuStreamSynchronize"))?;
            d2d.synchronize().map_err(driver("cuStreamSynchronize"))?;
        }
        Ok::<(), CudaError>(())
    })();
    rt.flag.release();
    let spun = spin.synchronize().map_err(driver("cuStreamSynchronize"));
    let h2d_done = h2d.synchronize().is_ok();
    let d2d_done = d2d.synchronize().is_ok();
    rt.last_active = Some(Instant::now());
    if h2d_done && d2d_done && spun.is_ok() {
        rt.warm_kit = Some(kit);
    }
    result?;
    spun?;
    Ok(WarmReport {
        idle,
        load: load.or_else(|| nvml.map(nvml::sample)).unwrap_or_default(),
        duration: began.elapsed(),
    })
}

/// The CUDA copy engine's id.
pub const ENGINE: EngineId = EngineId::new("cuda-copy");

/// The CUDA copy engine's declaration: every GPU copy path, through the driver API.
pub fn decl() -> EngineDecl {
    EngineDecl {
        id: ENGINE,
        title: "CUDA copy engine: cuMemcpyAsync behind a device-side latch, timed by events".into(),
        paths: vec![PathId::H2d, PathId::D2h, PathId::Duplex, PathId::D2d],
        cells: vec![CellKind::Sweep],
        needs: Needs {
            gpu: true,
            libraries: vec![Library {
                name: "libcuda".into(),
                install_hint: None,
            }],
            ..Needs::default()
        },
        hardware: true,
        default_on: true,
    }
}

impl Engine for CudaBackend {
    fn id(&self) -> EngineId {
        ENGINE
    }

    fn prepare<'a>(&'a mut self, case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        Ok(Box::new(self.prepare_case(case)?))
    }

    /// Size each GPU's buffer pool for the largest case that will use each buffer.
    fn expect(&mut self, cases: &[&Case]) {
        self.partners = partners(cases);
        for spec in cases.iter().filter_map(|c| CopySpec::from_case(c).ok()) {
            let Some(slot) = self.slots.iter_mut().find(|s| s.name == spec.gpu) else {
                continue;
            };
            match slot.runtime.as_mut() {
                Some(rt) => rt.pool.expect([&spec]),
                None => slot.expected.push(spec),
            }
        }
    }

    /// Busy when another process holds a compute context on the GPU (or, for copies through host
    /// memory, on any other GPU of the machine: see [`foreign_compute`]), or NVML's utilisation
    /// exceeds [`BUSY_UTILISATION_PCT`] for work that is not ours. Our own copies stay in NVML's
    /// device utilisation for up to a second, so right after them the check reads the per-process
    /// utilisation of other processes instead, where the driver keeps it. Device utilisation above
    /// the limit with no other compute process listed is read again after one NVML window (a
    /// process that just exited leaves its load in the trailing figure).
    fn idle_check(&mut self, case: &Case) -> Idle {
        let (Some(nvml), Some(gpu)) = (self.nvml.as_ref(), case.spec.gpu()) else {
            return Idle::Idle;
        };
        let Some(at) = self.slots.iter().position(|s| s.name == gpu) else {
            return Idle::Idle;
        };
        let me = std::process::id();
        // Copies through host memory share it with every GPU's work.
        let via_host = case.path != PathId::D2d;
        let listed: Vec<GpuProcesses> = self
            .slots
            .iter()
            .filter(|s| via_host || s.name == gpu)
            .filter_map(|s| {
                let device = nvml.device_by_index(s.nvml_index?).ok()?;
                let procs = device.running_compute_processes().ok()?;
                Some(GpuProcesses {
                    name: &s.name,
                    bdf: &s.bdf,
                    pids: procs.iter().map(|p| p.pid).collect(),
                })
            })
            .collect();
        if let Some(why) = foreign_compute(&listed, gpu, me) {
            return Idle::Busy(why);
        }
        let slot = &mut self.slots[at];
        let Some(device) = slot.nvml_index.and_then(|i| nvml.device_by_index(i).ok()) else {
            return Idle::Idle;
        };
        let recently_ours = slot
            .runtime
            .as_ref()
            .and_then(|r| r.last_active)
            .is_some_and(|t| t.elapsed() < UTILISATION_WINDOW);
        let now_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        let window_us = u64::try_from(UTILISATION_WINDOW.as_micros()).unwrap_or(u64::MAX);
        if !recently_ours {
            // NVML's figure trails by up to one window: load that a process which has since
            // exited left behind (no compute process is listed now) is read again after it.
            for attempt in 0..2 {
                match device.utilization_rates() {
                    Ok(u) if u.gpu > BUSY_UTILISATION_PCT => {
                        if attempt == 0 {
                            std::thread::sleep(UTILISATION_WINDOW);
                            continue;
                        }
                        return Idle::Busy(format!(
                            "{} ({}) is {} % utilised (NVML; more than {} %)",
                            slot.name, slot.bdf, u.gpu, BUSY_UTILISATION_PCT
                        ));
                    }
                    _ => break,
                }
            }
            slot.utilisation_seen_us = Some(now_us);
            return Idle::Idle;
        }
        // NVML's per-process samples (CPU timestamps in µs) since the last check.
        let since = slot
            .utilisation_seen_us
            .unwrap_or(now_us.saturating_sub(window_us));
        slot.utilisation_seen_us = Some(now_us);
        match device.process_utilization_stats(since) {
            Ok(samples) => {
                let busiest = samples
                    .iter()
                    .filter(|s| s.pid != me && s.sm_util > BUSY_UTILISATION_PCT)
                    .max_by_key(|s| s.sm_util);
                match busiest {
                    Some(s) => Idle::Busy(format!(
                        "{} ({}): process {} uses {} % of the SMs (NVML)",
                        slot.name, slot.bdf, s.pid, s.sm_util
                    )),
                    None => Idle::Idle,
                }
            }
            // No per-process figures here (unsupported, or none buffered): the process
            // list above is then the whole check.
            Err(_) => Idle::Idle,
        }
    }

    fn refuse_when_busy(&self) -> bool {
        true
    }

    fn environment(&self) -> hwc_model::Environment {
        let mut env = self.environment.clone();
        for slot in &self.slots {
            env.extend(slot.environment.clone());
        }
        env
    }
}

/// One GPU's compute processes as NVML lists them.
struct GpuProcesses<'a> {
    /// Our name (`gpu0`).
    name: &'a str,
    bdf: &'a str,
    pids: Vec<u32>,
}

/// Why a case on `case_gpu` is busy, from the compute processes listed on the GPUs in `gpus`
/// (ours, `me`, left out): another process on its own GPU first, then on any other GPU listed
/// (the caller lists the others only for copies through host memory, which share it with that
/// GPU's work).
fn foreign_compute(gpus: &[GpuProcesses], case_gpu: &str, me: u32) -> Option<String> {
    let own = gpus.iter().filter(|g| g.name == case_gpu);
    let others = gpus.iter().filter(|g| g.name != case_gpu);
    own.chain(others).find_map(|g| {
        let pids: Vec<String> = g
            .pids
            .iter()
            .filter(|&&p| p != me)
            .map(|p| format!("pid {p}"))
            .collect();
        if pids.is_empty() {
            return None;
        }
        let (whose, why) = if g.name == case_gpu {
            ("", "")
        } else {
            (
                ", another GPU of this machine,",
                " (this case's copies share host memory with that GPU's work)",
            )
        };
        Some(format!(
            "{} ({}){whose} has {} other compute process(es): {}{why}",
            g.name,
            g.bdf,
            pids.len(),
            pids.join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::{
        copy_placement_setting, foreign_compute, partners, stalled_clock_note, warm_duration,
        GpuProcesses, FIRST_WARMUP, REWARM,
    };
    use hwc_model::v1::CaseParams;
    use hwc_model::{Case, PathId, Reps};
    use std::time::Duration;

    fn copy(key: &str, path: PathId, dir: Option<&str>, size: u64, node: Option<u32>) -> Case {
        let params = CaseParams {
            gpu: Some("gpu0".into()),
            size_bytes: Some(size),
            streams: Some(1),
            src_node: node,
            dst_node: node,
            cpu_node: node,
            host_memory: Some("pinned".into()),
            direction: dir.map(String::from),
            ..CaseParams::default()
        };
        Case {
            key: key.into(),
            path,
            engine: super::ENGINE,
            cell: key.into(),
            spec: params.spec(path, key),
            reps: Reps {
                warmup: 1,
                timed: 12,
                retry_above_spread_pct: None,
                steady: None,
            },
        }
    }

    #[test]
    fn each_gpu_name_runs_on_the_cuda_device_at_its_pci_address() {
        // The driver enumerates the two GPUs the other way round from their PCI order.
        let device = |ordinal: u32, bdf: &str| crate::CudaDevice {
            ordinal,
            pci_bdf: bdf.into(),
            name: "NVIDIA H200".into(),
            memory_bytes: 1,
            l2_cache_bytes: 60 << 20,
            multiprocessors: 132,
            compute_capability: (9, 0),
            copy_engines: 3,
            nvml: None,
        };
        let probe = crate::CudaProbe {
            devices: vec![device(0, "0000:81:00.0"), device(1, "0000:41:00.0")],
            driver_version: "580.159.04".into(),
            environment: Default::default(),
        };
        let gpus = [
            ("gpu0".to_string(), "0000:41:00.0".to_string()),
            ("gpu1".to_string(), "0000:81:00.0".to_string()),
        ];
        let env = hwc_runner::Engine::environment(&super::CudaBackend::new(&probe, &gpus));
        let get = |k: &str| env.get(k).map(|s| s.value.as_str());
        assert_eq!(get("gpu0.cuda_ordinal"), Some("1"));
        assert_eq!(get("gpu1.cuda_ordinal"), Some("0"));
        assert_eq!(get("gpu1.pci_bdf"), Some("0000:81:00.0"));
    }

    #[test]
    fn a_duplex_case_s_partner_is_the_other_direction_of_the_same_copies_only() {
        let cases = [
            copy(
                "d/512K/h2d",
                PathId::Duplex,
                Some("h2d"),
                512 << 10,
                Some(0),
            ),
            copy("h2d/cuda-copy/512K", PathId::H2d, None, 512 << 10, Some(0)),
            copy("d/1M/h2d", PathId::Duplex, Some("h2d"), 1 << 20, Some(0)),
            copy(
                "d/512K/d2h",
                PathId::Duplex,
                Some("d2h"),
                512 << 10,
                Some(0),
            ),
            // Another node: not the same copies.
            copy("d/1M/n1/d2h", PathId::Duplex, Some("d2h"), 1 << 20, Some(1)),
            // The same direction again is no partner.
            copy(
                "d/512K/h2d-again",
                PathId::Duplex,
                Some("h2d"),
                512 << 10,
                Some(0),
            ),
        ];
        let p = partners(&cases.iter().collect::<Vec<_>>());
        let of = |k: &str| p.get(k).map(String::as_str);
        assert_eq!(of("d/512K/h2d"), Some("d/512K/d2h"));
        assert_eq!(of("d/512K/d2h"), Some("d/512K/h2d"));
        assert_eq!(of("d/512K/h2d-again"), Some("d/512K/d2h"));
        assert_eq!(of("d/1M/h2d"), None);
        assert_eq!(of("d/1M/n1/d2h"), None);
        assert_eq!(of("h2d/cuda-copy/512K"), None);
    }

    #[test]
    fn the_placement_setting_names_the_cases_that_search_and_how_many_placements() {
        let s = copy_placement_setting();
        assert_eq!(
            s.value,
            "searched: 1-stream duplex and D2H up to 2MiB, 24 placements; 1-stream D2D up to \
             16MiB, 24 placements"
        );
        assert!(
            s.about
                .as_deref()
                .is_some_and(|a| a.contains("the 3 fastest tried again, median of 3 batches")),
            "{s}"
        );
    }

    #[test]
    fn a_clock_stuck_low_is_noted_a_clock_already_high_is_not() {
        // An idle H200 at 345 MHz that stays there is worth a note.
        let note = stalled_clock_note(Some(345), Some(345), Some(1980)).unwrap();
        assert!(note.contains("345 MHz idle"), "{note}");
        // Rising, or already at the maximum (the GPU was just busy), is fine.
        assert_eq!(stalled_clock_note(Some(345), Some(1980), Some(1980)), None);
        assert_eq!(stalled_clock_note(Some(1980), Some(1980), Some(1980)), None);
        // Without a known maximum only a rise counts.
        assert!(stalled_clock_note(Some(1980), Some(1980), None).is_some());
        assert_eq!(stalled_clock_note(None, Some(1980), None), None);
    }

    #[test]
    fn a_gpu_is_warmed_first_in_full_then_briefly_after_a_pause_and_in_full_after_a_long_one() {
        let s = Duration::from_secs;
        assert_eq!(warm_duration(false, None), Some(FIRST_WARMUP));
        assert_eq!(warm_duration(false, Some(s(0))), Some(FIRST_WARMUP));
        assert_eq!(warm_duration(true, Some(Duration::from_millis(1999))), None);
        assert_eq!(warm_duration(true, Some(s(2))), Some(REWARM));
        assert_eq!(warm_duration(true, Some(s(9))), Some(REWARM));
        // Another GPU's block of cases ran meanwhile.
        assert_eq!(warm_duration(true, Some(s(10))), Some(FIRST_WARMUP));
        assert_eq!(warm_duration(true, Some(s(20))), Some(FIRST_WARMUP));
        // No record of our last work (warm_up sets one, so only a caller that skipped it).
        assert_eq!(warm_duration(true, None), Some(FIRST_WARMUP));
    }

    fn gpu<'a>(name: &'a str, bdf: &'a str, pids: &[u32]) -> GpuProcesses<'a> {
        GpuProcesses {
            name,
            bdf,
            pids: pids.to_vec(),
        }
    }

    #[test]
    fn our_own_compute_context_does_not_make_a_gpu_busy() {
        let gpus = [
            gpu("gpu0", "0000:1b:00.0", &[7]),
            gpu("gpu1", "0000:9a:00.0", &[7]),
        ];
        assert_eq!(foreign_compute(&gpus, "gpu0", 7), None);
    }

    #[test]
    fn another_process_on_the_case_s_gpu_is_named_first() {
        let gpus = [
            gpu("gpu0", "0000:1b:00.0", &[7, 301]),
            gpu("gpu1", "0000:9a:00.0", &[402]),
        ];
        assert_eq!(
            foreign_compute(&gpus, "gpu1", 7).as_deref(),
            Some("gpu1 (0000:9a:00.0) has 1 other compute process(es): pid 402")
        );
        assert_eq!(
            foreign_compute(&gpus, "gpu0", 7).as_deref(),
            Some("gpu0 (0000:1b:00.0) has 1 other compute process(es): pid 301")
        );
    }

    #[test]
    fn another_process_on_another_gpu_makes_a_copy_through_host_memory_busy() {
        let gpus = [
            gpu("gpu0", "0000:1b:00.0", &[7]),
            gpu("gpu1", "0000:9a:00.0", &[402, 403]),
        ];
        assert_eq!(
            foreign_compute(&gpus, "gpu0", 7).as_deref(),
            Some(
                "gpu1 (0000:9a:00.0), another GPU of this machine, has 2 other compute \
                 process(es): pid 402, pid 403 (this case's copies share host memory with that \
                 GPU's work)"
            )
        );
        // A D2D case lists only its own GPU.
        assert_eq!(foreign_compute(&gpus[..1], "gpu0", 7), None);
    }
}
