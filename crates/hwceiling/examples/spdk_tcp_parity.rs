//! The native SPDK engine against `spdk_nvme_perf` on one NVMe-oF TCP target, interleaved in one
//! run: the parity check of the two SPDK engines without a VM (`tools/spdk/tcp-parity.sh` starts
//! the target and runs this). Both engines run through the same code a profile runs; only the
//! transport differs (TCP instead of PCIe, ordinary memory instead of hugepages).
//!
//! ```text
//! spdk_tcp_parity PERF ADDR PORT SUBNQN CPU BLOCK_BYTES QD REPS BYTES_PER_REP [read|write]
//! ```
//!
//! Each round runs one repetition of each engine, the order swapped every round, after one
//! untimed repetition of each; prints each engine's median, min, max, spread and N in GB/s, the
//! native engine's median over perf's, and the median of the rounds' own ratios (each round's two
//! repetitions ran back to back, so a slow spell of the machine touches both).
use hwc_engine_spdk::native::{HostRam, SpdkNative};
use hwc_engine_spdk::{Binder, BoundDrive, Finished, SpdkPerf, TcpTarget};
use hwc_model::{Case, NvmePattern, NvmeSpec, NvmeTest, PathId, Reps, Spec};
use hwc_runner::{Engine, Prepared};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

/// The target needs no binding: it hands the engines the TCP drive and changes nothing.
struct Loopback(BoundDrive);

impl Binder for Loopback {
    fn bind(&mut self, _hugepages_bytes_per_node: u64) -> Result<Vec<BoundDrive>, String> {
        Ok(vec![self.0.clone()])
    }
    fn record_files(&mut self, _prefix: &str) -> Result<(), String> {
        Ok(())
    }
    fn finish(&mut self) -> Result<Option<Finished>, String> {
        Ok(None)
    }
}

static CANCEL: AtomicBool = AtomicBool::new(false);

/// MiB of ordinary memory each engine's DPDK gets.
const MEMORY_MIB: u32 = 1024;

fn main() {
    if let Err(e) = run() {
        eprintln!("spdk_tcp_parity: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 9 {
        return Err(
            "usage: PERF ADDR PORT SUBNQN CPU BLOCK_BYTES QD REPS BYTES_PER_REP [read|write]"
                .into(),
        );
    }
    let num = |i: usize, what: &str| -> Result<u64, String> {
        a[i].parse()
            .map_err(|_| format!("{what} must be a number, got {:?}", a[i]))
    };
    let port = u16::try_from(num(2, "PORT")?).map_err(|_| "PORT is out of range")?;
    let cpu = num(4, "CPU")? as u32;
    let (block, qd, reps, bytes) = (
        num(5, "BLOCK_BYTES")?,
        num(6, "QD")? as u32,
        num(7, "REPS")? as usize,
        num(8, "BYTES_PER_REP")?,
    );
    let path = match a.get(9).map(String::as_str) {
        None | Some("read") => PathId::NvmeRead,
        Some("write") => PathId::NvmeWrite,
        Some(o) => return Err(format!("read or write, not {o}")),
    };
    let drive = BoundDrive {
        name: "tcp0".into(),
        bdf: "tcp0".into(),
        numa_node: Some(0),
        tcp: Some(TcpTarget {
            addr: a[1].clone(),
            port,
            subnqn: a[3].clone(),
        }),
    };
    let node_cpus = BTreeMap::from([(0u32, vec![cpu])]);
    let mut perf = SpdkPerf::new(
        a[0].clone().into(),
        Box::new(Loopback(drive.clone())),
        node_cpus.clone(),
        &CANCEL,
    )
    .without_hugepages(MEMORY_MIB);
    let mut native = SpdkNative::new(
        Box::new(Loopback(drive)),
        Box::new(HostRam),
        node_cpus,
        bytes,
    )
    .without_hugepages(MEMORY_MIB);
    let spec = Spec::Nvme(NvmeSpec {
        test: NvmeTest::Sweep,
        block_bytes: block,
        queue_depth: qd,
        drives: vec!["tcp0".into()],
        target: false,
        pattern: NvmePattern::Sequential,
    });
    let reps_spec = Reps {
        warmup: 1,
        timed: reps as u32,
        retry_above_spread_pct: None,
        steady: None,
    };
    let perf_case = Case::new(path, perf.id(), "tcp0", spec.clone(), reps_spec);
    let native_case = Case::new(path, native.id(), "tcp0", spec, reps_spec);
    perf.expect(&[&perf_case]);
    native.expect(&[&native_case]);
    let mut p = perf.prepare(&perf_case).map_err(|e| format!("perf: {e}"))?;
    let mut n = native
        .prepare(&native_case)
        .map_err(|e| format!("native: {e}"))?;
    let mut gbps = [Vec::new(), Vec::new()];
    for round in 0..=reps {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let (engine, prepared): (&str, &mut Box<dyn Prepared + '_>) = if which == 0 {
                ("perf", &mut p)
            } else {
                ("native", &mut n)
            };
            let rep = prepared.run_once().map_err(|e| format!("{engine}: {e}"))?;
            let moved = prepared
                .last_bytes()
                .unwrap_or_else(|| prepared.bytes_per_rep());
            let g = hwc_stats::gbps(moved, rep.seconds);
            eprintln!(
                "round {round}{}: {engine} {g:.3} GB/s",
                if round == 0 { " (untimed)" } else { "" }
            );
            if round > 0 {
                gbps[which].push(g);
            }
        }
    }
    n.verify().map_err(|e| format!("native: {e}"))?;
    p.verify().map_err(|e| format!("perf: {e}"))?;
    println!("{}", p.notes().join("; "));
    println!("{}", n.notes().join("; "));
    let mut medians = [0.0; 2];
    for (i, name) in ["spdk-perf", "spdk-native"].iter().enumerate() {
        let s = hwc_stats::summarize(&gbps[i]).map_err(|e| e.to_string())?;
        medians[i] = s.median;
        println!(
            "{name:12} median {:.3} GB/s  min {:.3}  max {:.3}  spread {:.1} %  N {}",
            s.median, s.min, s.max, s.spread_pct, s.n
        );
    }
    let ratios: Vec<f64> = gbps[1].iter().zip(&gbps[0]).map(|(n, p)| n / p).collect();
    let r = hwc_stats::summarize(&ratios).map_err(|e| e.to_string())?;
    println!(
        "native / perf: {:.1} % of the medians; per round {:.1} % median (min {:.1}, max {:.1}, N {})",
        medians[1] / medians[0] * 100.0,
        r.median * 100.0,
        r.min * 100.0,
        r.max * 100.0,
        r.n
    );
    drop(p);
    drop(n);
    perf.finish();
    native.finish();
    Ok(())
}
