//! The `spdk-perf` engine: NVMe reads and writes through SPDK's userspace driver, as the spec runs
//! them, by SPDK's own `spdk_nvme_perf`. Each repetition is one perf process over the case's
//! drives (`-r 'trtype:PCIe traddr:BDF'` each, in the plan's same-root order), one core per drive
//! on the drive's NUMA node, for [`PERF_SECONDS`] (`-t`); its figure is perf's `Total` line
//! (GB/s = MiB/s × 1.048576 / 1000, the spec's formula) over perf's own timed window, and the
//! repetition fails unless every drive reports from the core it was given.
//!
//! Perf needs the drives on vfio-pci, which the kernel engine's cases cannot have: the engine
//! binds them (through a [`Binder`], which journals every change) before its first case and puts
//! them back when it finishes, so the engines that run before and after it see them on `nvme`.

use crate::perf_output::{self, PerfOutput};
use hwc_model::{
    Case, CellKind, EngineDecl, EngineId, Environment, Needs, NvmePattern, NvmeSpec, NvmeTest,
    PathId, Placement, Setting, Spec,
};
use hwc_runner::{BenchError, Engine, Prepared, Rep};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

pub const ENGINE: EngineId = EngineId::new("spdk-perf");

/// Seconds of I/O per repetition (`-t`): past the write cache of the drives measured, and long
/// enough that perf's start (controller attach) is far outside the window it times.
pub const PERF_SECONDS: u32 = 3;

/// How much longer than `-t` one perf process may take (EAL start, attach, detach) before it is
/// stopped and its repetition fails.
const PERF_GRACE: Duration = Duration::from_secs(90);

/// Hugepage memory each NUMA node keeps beyond the I/O buffers: DPDK's own heap, the queues and
/// their trackers.
const HUGEPAGE_OVERHEAD_BYTES: u64 = 256 << 20;
/// The least hugepage memory reserved on a node a bound drive is on.
pub const MIN_HUGEPAGES_BYTES_PER_NODE: u64 = 256 << 20;

/// The install hint when `spdk_nvme_perf` is not found.
pub const INSTALL_HINT: &str = "build SPDK (git clone https://github.com/spdk/spdk --recursive; \
    cd spdk; ./configure; make) into deps/spdk, or pass --spdk-dir DIR";

/// The engine's declaration.
pub fn decl() -> EngineDecl {
    EngineDecl {
        id: ENGINE,
        title: "SPDK spdk_nvme_perf: userspace NVMe driver over vfio-pci, one core per drive"
            .into(),
        paths: vec![PathId::NvmeRead, PathId::NvmeWrite],
        cells: vec![CellKind::Sweep],
        needs: Needs {
            root: true,
            vfio: true,
            writes_devices: true,
            ..Needs::default()
        },
        hardware: true,
        default_on: true,
    }
}

/// Where `spdk_nvme_perf` is: under `--spdk-dir DIR` (`DIR/build/bin`, `DIR/bin` or `DIR`
/// itself) when given (and only there), else under `deps/spdk-build/bin/` or
/// `deps/spdk/build/bin/` of `cwd` (the spec's places), else on `path` (`$PATH`).
pub fn locate(
    spdk_dir: Option<&Path>,
    cwd: &Path,
    path: Option<&OsStr>,
) -> Result<PathBuf, String> {
    const BIN: &str = "spdk_nvme_perf";
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if let Some(dir) = spdk_dir {
        let tried = [dir.join("build/bin"), dir.join("bin"), dir.to_path_buf()];
        return tried
            .iter()
            .map(|d| d.join(BIN))
            .find(|p| executable(p))
            .ok_or_else(|| {
                format!(
                    "--spdk-dir {}: no executable {BIN} in build/bin, bin or the folder itself",
                    dir.display()
                )
            });
    }
    let mut tried: Vec<PathBuf> = ["deps/spdk-build/bin", "deps/spdk/build/bin"]
        .iter()
        .map(|d| cwd.join(d))
        .collect();
    if let Some(p) = path {
        tried.extend(std::env::split_paths(p).filter(|d| d.is_absolute()));
    }
    tried
        .iter()
        .map(|d| d.join(BIN))
        .find(|p| executable(p))
        .ok_or_else(|| format!("{BIN} not found (deps/spdk-build/bin, deps/spdk/build/bin, PATH)"))
}

/// A drive handed to the userspace driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundDrive {
    /// The drive's controller name (`nvme0`), as it was on the kernel driver.
    pub name: String,
    /// Its PCI address, as the plan's cases name it.
    pub bdf: String,
    pub numa_node: Option<u32>,
    /// Reached over NVMe-oF TCP instead of its PCI function: the parity check on loopback
    /// (`examples/tcp_parity.rs`), where `bdf` is only the name cases give it.
    pub tcp: Option<TcpTarget>,
}

/// An NVMe-oF TCP subsystem (IPv4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpTarget {
    pub addr: String,
    pub port: u16,
    pub subnqn: String,
}

impl BoundDrive {
    /// SPDK's transport ID of the drive (`-r` of perf, `spdk_nvme_transport_id_parse`).
    pub fn trid(&self) -> String {
        match &self.tcp {
            None => format!("trtype:PCIe traddr:{}", self.bdf),
            Some(t) => format!(
                "trtype:TCP adrfam:IPv4 traddr:{} trsvcid:{} subnqn:{}",
                t.addr, t.port, t.subnqn
            ),
        }
    }

    /// How perf names the drive in its results: transport and address.
    fn perf_name(&self) -> (&'static str, String) {
        match &self.tcp {
            None => ("PCIE", self.bdf.clone()),
            Some(t) => ("TCP", format!("addr:{} subnqn:{}", t.addr, t.subnqn)),
        }
    }
}

/// Hands the engine's drives to vfio-pci and puts them back, journaling every change.
pub trait Binder {
    /// Bind every drive the engine may use, with `hugepages_bytes_per_node` of hugepages on
    /// each of their NUMA nodes.
    fn bind(&mut self, hugepages_bytes_per_node: u64) -> Result<Vec<BoundDrive>, String>;
    /// Journal the hugepage files a perf process (DPDK file prefix `prefix`) may leave should
    /// it be killed.
    fn record_files(&mut self, prefix: &str) -> Result<(), String>;
    /// Put everything back (or leave the drives bound, as asked); `None` when nothing is bound.
    fn finish(&mut self) -> Result<Option<Finished>, String>;
}

/// What finishing left: each drive's BDF and the driver it ends on, and what was done, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub drivers: Vec<(String, String)>,
    pub how: String,
}

/// CPUs for `drives` (their NUMA nodes, in order): each a distinct CPU of its drive's node,
/// highest first (away from CPU 0, where the kernel's housekeeping lands), then any CPU left;
/// with fewer CPUs than drives, they are shared round-robin. `node_cpus`: node → its CPUs.
pub fn cores_for(drives: &[Option<u32>], node_cpus: &BTreeMap<u32, Vec<u32>>) -> Vec<u32> {
    let all: Vec<u32> = {
        let mut v: Vec<u32> = node_cpus.values().flatten().copied().collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let mut used: BTreeSet<u32> = BTreeSet::new();
    let mut out = Vec::with_capacity(drives.len());
    for (i, node) in drives.iter().enumerate() {
        let local = node
            .and_then(|n| node_cpus.get(&n))
            .cloned()
            .unwrap_or_default();
        let pick = local
            .iter()
            .rev()
            .chain(all.iter().rev())
            .find(|c| !used.contains(c))
            .copied()
            .or_else(|| all.get(i % all.len().max(1)).copied())
            .unwrap_or(0);
        used.insert(pick);
        out.push(pick);
    }
    out
}

/// perf's workload for `spec` on `path`.
fn workload(path: PathId, spec: &NvmeSpec) -> Result<&'static str, String> {
    let random = matches!(spec.pattern, NvmePattern::Random);
    match (path, spec.test, random) {
        (PathId::NvmeRead, NvmeTest::Sweep | NvmeTest::Latency, false) => Ok("read"),
        (PathId::NvmeRead, NvmeTest::Sweep | NvmeTest::Latency, true) => Ok("randread"),
        (PathId::NvmeWrite, NvmeTest::Sweep, false) => Ok("write"),
        (PathId::NvmeWrite, NvmeTest::Sweep, true) => Ok("randwrite"),
        _ => Err(format!(
            "spdk_nvme_perf does not run the {:?} test of {path}",
            spec.test
        )),
    }
}

/// perf's arguments for one repetition: the drives in the order of `cores` ascending (perf
/// gives the n-th namespace attached to the n-th core of its mask), each with its core.
pub fn args(
    path: PathId,
    spec: &NvmeSpec,
    drives: &[(BoundDrive, u32)],
    seconds: u32,
) -> Result<Vec<String>, String> {
    let w = workload(path, spec)?;
    let mut sorted = drives.to_vec();
    sorted.sort_by_key(|d| d.1);
    let cores: BTreeSet<u32> = sorted.iter().map(|d| d.1).collect();
    if cores.len() != sorted.len() {
        return Err("two drives were given one core".into());
    }
    let mask = cores.iter().fold(0u128, |m, &c| m | (1u128 << c.min(127)));
    let mut v: Vec<String> = vec![
        "-q".into(),
        spec.queue_depth.to_string(),
        "-o".into(),
        spec.block_bytes.to_string(),
        "-w".into(),
        w.into(),
        "-t".into(),
        seconds.to_string(),
        "-c".into(),
        format!("{mask:#x}"),
    ];
    for (drive, _) in &sorted {
        v.push("-r".into());
        v.push(drive.trid());
    }
    Ok(v)
}

/// Check one run's results against what it was asked: every drive reported, from the core it
/// was given, and nothing else. Perf leaves out a drive that completed no I/O, and exits 0
/// even when it attached none.
pub fn check(out: &PerfOutput, drives: &[(BoundDrive, u32)]) -> Result<(), String> {
    for (drive, core) in drives {
        let bdf = &drive.bdf;
        let (transport, address) = drive.perf_name();
        let lines: Vec<_> = out
            .namespaces
            .iter()
            .filter(|n| n.transport.eq_ignore_ascii_case(transport) && n.address == address)
            .collect();
        match lines.as_slice() {
            [] => {
                return Err(format!(
                    "{bdf} completed no I/O (it is not in perf's results)"
                ))
            }
            [one] if one.core != *core => {
                return Err(format!(
                    "{bdf} was driven from core {}, not core {core} as asked",
                    one.core
                ))
            }
            [one] if one.stats.mib_per_s <= 0.0 => {
                return Err(format!("{bdf} reports {} MiB/s", one.stats.mib_per_s))
            }
            [_] => {}
            _ => return Err(format!("{bdf} has several results lines")),
        }
    }
    if out.namespaces.len() != drives.len() {
        return Err(format!(
            "perf reported {} namespaces for {} drives",
            out.namespaces.len(),
            drives.len()
        ));
    }
    Ok(())
}

/// The perf process in flight (0: none), for [`stop_running_perf`].
static RUNNING: AtomicI32 = AtomicI32::new(0);

/// Stop the perf process in flight, if any, and wait for it to end, so that its hold on the
/// drives goes with it: for the path that puts the drives back at once (a second signal), which
/// could not unbind a device perf still holds.
pub fn stop_running_perf() {
    let pid = RUNNING.swap(0, Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill and waitpid on our own child's pid (a null status pointer is allowed).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
}

/// The engine.
pub struct SpdkPerf {
    perf: PathBuf,
    binder: Box<dyn Binder>,
    node_cpus: BTreeMap<u32, Vec<u32>>,
    cancel: &'static AtomicBool,
    seconds: u32,
    hugepages_bytes_per_node: u64,
    /// `--no-huge -s MiB`: DPDK on ordinary memory (NVMe-oF TCP only; PCIe DMA needs hugepages).
    no_huge_mib: Option<u32>,
    /// The drives bound, or why they could not be; `None` before the first case.
    bound: Option<Result<Vec<BoundDrive>, String>>,
    /// What finishing did, for the provenance.
    finished: Option<Result<Finished, String>>,
}

impl SpdkPerf {
    /// The engine running `perf`, binding through `binder`, placing each drive's core on its
    /// node (`node_cpus`: node → CPUs); `cancel` stops a perf process in flight.
    pub fn new(
        perf: PathBuf,
        binder: Box<dyn Binder>,
        node_cpus: BTreeMap<u32, Vec<u32>>,
        cancel: &'static AtomicBool,
    ) -> Self {
        SpdkPerf {
            perf,
            binder,
            node_cpus,
            cancel,
            seconds: PERF_SECONDS,
            hugepages_bytes_per_node: MIN_HUGEPAGES_BYTES_PER_NODE,
            no_huge_mib: None,
            bound: None,
            finished: None,
        }
    }

    /// Repetitions of `seconds` instead of [`PERF_SECONDS`] (tests).
    pub fn with_seconds(mut self, seconds: u32) -> Self {
        self.seconds = seconds.max(1);
        self
    }

    /// Run perf on `mib` MiB of ordinary memory instead of hugepages (`--no-huge -s`): for
    /// drives reached over NVMe-oF TCP, which need no DMA.
    pub fn without_hugepages(mut self, mib: u32) -> Self {
        self.no_huge_mib = Some(mib);
        self
    }

    fn bound(&mut self) -> Result<&[BoundDrive], BenchError> {
        if self.bound.is_none() {
            self.bound = Some(self.binder.bind(self.hugepages_bytes_per_node));
        }
        match self.bound.as_ref().expect("just set") {
            Ok(d) => Ok(d),
            Err(e) => Err(BenchError::Unavailable {
                reason: format!("the drives could not be handed to vfio-pci: {e}"),
                hint: None,
            }),
        }
    }
}

/// Hugepage memory for `cases` on each node: the largest case's I/O buffers there (queue depth
/// × block size per drive) plus [`HUGEPAGE_OVERHEAD_BYTES`], at least
/// [`MIN_HUGEPAGES_BYTES_PER_NODE`]; the same on every node (the most any needs).
pub fn hugepages_per_node(cases: &[&NvmeSpec], node_of: &dyn Fn(&str) -> Option<u32>) -> u64 {
    let mut most = 0u64;
    for s in cases {
        let mut per_node: BTreeMap<Option<u32>, u64> = BTreeMap::new();
        for d in &s.drives {
            *per_node.entry(node_of(d)).or_default() += u64::from(s.queue_depth) * s.block_bytes;
        }
        most = most.max(per_node.values().copied().max().unwrap_or(0));
    }
    (most + HUGEPAGE_OVERHEAD_BYTES)
        .max(MIN_HUGEPAGES_BYTES_PER_NODE)
        .next_multiple_of(2 << 20)
}

impl Engine for SpdkPerf {
    fn id(&self) -> EngineId {
        ENGINE
    }

    fn expect(&mut self, cases: &[&Case]) {
        // Nodes are not known until bound; a drive's node comes from the topology the binder
        // was given, so size for the worst case: every drive of a case on one node.
        let specs: Vec<&NvmeSpec> = cases.iter().filter_map(|c| c.spec.nvme()).collect();
        self.hugepages_bytes_per_node = hugepages_per_node(&specs, &|_| None);
    }

    fn prepare<'a>(&'a mut self, case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        let Spec::Nvme(spec) = &case.spec else {
            return Err(BenchError::failed(format!(
                "the spdk-perf engine was given a {} case",
                case.spec.kind()
            )));
        };
        if spec.target {
            return Err(BenchError::unavailable(
                "spdk_nvme_perf drives whole NVMe drives, not a --target file or device",
            ));
        }
        let bound = self.bound()?.to_vec();
        let mut chosen = Vec::new();
        for key in &spec.drives {
            match bound.iter().find(|b| &b.bdf == key) {
                Some(b) => chosen.push(b.clone()),
                None => {
                    return Err(BenchError::unavailable(format!(
                        "{key} is not one of the drives handed to vfio-pci (--spdk-drives)"
                    )))
                }
            }
        }
        let nodes: Vec<Option<u32>> = chosen.iter().map(|b| b.numa_node).collect();
        let cores = cores_for(&nodes, &self.node_cpus);
        let drives: Vec<(BoundDrive, u32)> = chosen.into_iter().zip(cores).collect();
        let mut args = args(case.path, spec, &drives, self.seconds).map_err(BenchError::failed)?;
        if let Some(mib) = self.no_huge_mib {
            args.extend(["--no-huge".into(), "-s".into(), mib.to_string()]);
        }
        let placement = Placement {
            cpus: Some(
                drives
                    .iter()
                    .map(|d| d.1.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            verified: false,
            detail: String::new(),
        };
        Ok(Box::new(PerfCase {
            engine: self,
            args,
            drives,
            nodes,
            block_bytes: spec.block_bytes,
            bytes: Vec::new(),
            last: None,
            placement,
        }))
    }

    fn finish(&mut self) {
        // A bind that failed has put back what it did itself.
        if matches!(self.bound, Some(Ok(_))) && self.finished.is_none() {
            self.finished = self.binder.finish().transpose();
        }
    }

    fn environment(&self) -> Environment {
        let mut env = Environment::new();
        env.insert(
            "spdk.perf".into(),
            Setting::about(self.perf.display().to_string(), "the spdk_nvme_perf run"),
        );
        env.insert(
            "spdk.perf_seconds".into(),
            Setting::about(
                self.seconds.to_string(),
                "seconds of I/O per perf process (-t)",
            ),
        );
        if let Some(f) = &self.finished {
            env.insert("spdk.drivers_at_end".into(), drivers_at_end(f));
        }
        env
    }
}

/// What a userspace engine's finishing left, as the profile records it: each drive's BDF and
/// driver (`BDF=driver,…`), and what was put back; or why that failed.
pub fn drivers_at_end(finished: &Result<Finished, String>) -> Setting {
    match finished {
        Ok(f) => {
            let v: Vec<String> = f.drivers.iter().map(|(b, d)| format!("{b}={d}")).collect();
            Setting::about(v.join(","), f.how.clone())
        }
        Err(e) => Setting::about("unknown", format!("putting the drives back failed: {e}")),
    }
}

/// One case, prepared: perf's arguments and the cores its drives were given.
struct PerfCase<'a> {
    engine: &'a mut SpdkPerf,
    args: Vec<String>,
    drives: Vec<(BoundDrive, u32)>,
    nodes: Vec<Option<u32>>,
    block_bytes: u64,
    /// Each repetition's bytes (the cold one first).
    bytes: Vec<u64>,
    last: Option<PerfOutput>,
    placement: Placement,
}

impl PerfCase<'_> {
    /// Run perf once: its results, or why it failed (its stderr's last lines included).
    fn run_perf(&mut self) -> Result<PerfOutput, BenchError> {
        let mut cmd = Command::new(&self.engine.perf);
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of the child; it allocates nothing
        // and is async-signal-safe, as a pre_exec hook must be.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| BenchError::unavailable(format!("{}: {e}", self.engine.perf.display())))?;
        RUNNING.store(child.id() as i32, Ordering::SeqCst);
        // DPDK names the hugepage files of a process without a shared-memory id by its pid.
        let prefix = format!("spdk_pid{}", child.id());
        if let Err(e) = self.engine.binder.record_files(&prefix) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(BenchError::failed(format!(
                "journaling perf's hugepage files: {e}"
            )));
        }
        let readers = [
            child.stdout.take().map(|s| reader(Box::new(s))),
            child.stderr.take().map(|s| reader(Box::new(s))),
        ];
        let deadline =
            Instant::now() + Duration::from_secs(u64::from(self.engine.seconds)) + PERF_GRACE;
        let mut stopped: Option<&str> = None;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => {
                    RUNNING.store(0, Ordering::SeqCst);
                    return Err(BenchError::failed(format!("waiting for perf: {e}")));
                }
            }
            if stopped.is_none() && self.engine.cancel.load(Ordering::SeqCst) {
                stopped = Some("interrupted");
                // SAFETY: kill(2) on our own child's pid, which it keeps until we wait.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
            }
            if stopped.is_none() && Instant::now() > deadline {
                stopped = Some("timed out");
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        RUNNING.store(0, Ordering::SeqCst);
        let [stdout, stderr] = readers.map(|r| r.and_then(|h| h.join().ok()).unwrap_or_default());
        // DPDK leaves its runtime folder behind.
        let _ = std::fs::remove_dir_all(Path::new("/var/run/dpdk").join(&prefix));
        // perf's own words on a failure, after a colon, where it said any.
        let tail = || {
            let s = stderr_summary(&stderr);
            if s.is_empty() {
                s
            } else {
                format!(": {s}")
            }
        };
        if let Some(why) = stopped {
            return Err(BenchError::failed(format!(
                "spdk_nvme_perf {why}: {}",
                tail()
            )));
        }
        if !status.success() {
            return Err(BenchError::failed(format!(
                "spdk_nvme_perf exited with {status}{}",
                tail()
            )));
        }
        let out = perf_output::parse(&stdout)
            .map_err(|e| BenchError::failed(format!("{e}{}", tail())))?;
        check(&out, &self.drives).map_err(BenchError::failed)?;
        Ok(out)
    }
}

/// What of perf's stderr explains a failure: its first error lines (the cause comes first: SPDK
/// then reports each layer that failed on top of it; DPDK's `EAL:` lines among them), and its
/// last line; else its last lines.
pub fn stderr_summary(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let errors: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("error") || l.contains("fail") || l.contains("cannot") || l.contains("eal:")
        })
        .collect();
    if errors.is_empty() {
        return lines[lines.len().saturating_sub(3)..].join(" | ");
    }
    let mut v: Vec<&str> = errors.iter().copied().take(4).collect();
    if let Some(last) = lines.last().filter(|l| !v.contains(l)) {
        v.push(last);
    }
    v.join(" | ")
}

fn reader(mut s: Box<dyn Read + Send>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = s.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    })
}

impl Prepared for PerfCase<'_> {
    fn bytes_per_rep(&self) -> u64 {
        // The median of the repetitions run (perf runs for a time, not an amount).
        let mut v = self.bytes.clone();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    }

    fn run_once(&mut self) -> Result<Rep, BenchError> {
        let out = self.run_perf()?;
        let seconds = f64::from(self.engine.seconds);
        // perf's MiB/s is its I/Os over its own timed window (`-t`), which this repeats.
        let bytes = (out.total.mib_per_s * 1_048_576.0 * seconds).round() as u64;
        self.bytes.push(bytes);
        self.last = Some(out);
        Ok(Rep {
            seconds,
            wall_seconds: None,
        })
    }

    fn last_bytes(&self) -> Option<u64> {
        self.bytes.last().copied()
    }

    fn verify(&mut self) -> Result<(), BenchError> {
        // Every drive reported from its core (checked as each repetition ran): what can be
        // checked of perf's run; perf reads no data back.
        let Some(out) = &self.last else {
            return Err(BenchError::failed("no repetition ran"));
        };
        let local = self
            .drives
            .iter()
            .zip(&self.nodes)
            .map(|((drive, core), node)| {
                let on = self
                    .engine
                    .node_cpus
                    .iter()
                    .find(|(_, cpus)| cpus.contains(core))
                    .map(|(n, _)| *n);
                (&drive.bdf, core, *node, on)
            })
            .collect::<Vec<_>>();
        let all_local = local
            .iter()
            .all(|(_, _, want, on)| want.is_none() || want == on);
        self.placement.verified = all_local;
        self.placement.detail = local
            .iter()
            .map(|(bdf, core, want, on)| {
                let n = |x: &Option<u32>| x.map_or("?".to_string(), |v| v.to_string());
                format!("{bdf} (node {}) from core {core} (node {})", n(want), n(on))
            })
            .collect::<Vec<_>>()
            .join("; ");
        if out.namespaces.is_empty() {
            return Err(BenchError::failed("perf reported no namespace"));
        }
        Ok(())
    }

    fn placement(&self) -> Option<Placement> {
        Some(self.placement.clone())
    }

    fn last_latency_us(&self) -> Option<f64> {
        self.last.as_ref().map(|o| o.total.avg_latency_us)
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "spdk_nvme_perf {} ({} KiB I/Os): each repetition one perf process of {} s, its \
             Total line's MiB/s × 1.048576 / 1000; perf checks no data",
            self.args.join(" "),
            self.block_bytes / 1024,
            self.engine.seconds
        )]
    }
}
