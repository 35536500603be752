//! Measure GPU copies through the CUDA backend and the runner, one CSV row per case, in the
//! format of `tools/gpu-reference/ref_bw` so that `tools/gpu-reference/compare.sh` can put the
//! two side by side:
//! `tool,test,size_bytes,streams,method,median_gbps,min_gbps,max_gbps,spread_pct,n,copies,flags`.
//!
//! `cuda_bw [--gpu N] [--reps N] [--warmup N] [--sizes 128K,4M,256M]
//!          [--tests h2d,d2h,duplex,d2d,h2d_pageable,d2h_pageable] [--streams 1,4]
//!          [--node N|none] [--steady no|yes]`
//!
//! `--node` is the NUMA node of the host buffers and of the issuing thread (default 0; `none`
//! requests no placement). `--steady yes` times a case again when its repetitions spread more
//! than `hwceiling profile` allows it (`hwc_plan::gpu_copy_retry_limit`: pinned H2D, D2H and
//! duplex copies of 4 MiB or more, over 1 %) and keeps the steadiest window, as the profile
//! does; the default, `no`, times every case once, as `ref_bw` does.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use hwc_bench_cuda::{probe, CudaBackend};
use hwc_model::v1::CaseParams;
use hwc_model::{Case, PathId, Reps};
use hwc_runner::{Engine, NoObserver, RunOptions};

struct Args {
    gpu: usize,
    reps: u32,
    warmup: u32,
    sizes: Vec<u64>,
    tests: Vec<String>,
    streams: Vec<u32>,
    node: Option<u32>,
    steady: bool,
}

fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .map(|n| n * mult)
        .map_err(|e| format!("bad size `{s}`: {e}"))
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        gpu: 0,
        reps: 15,
        warmup: 3,
        sizes: "128K,512K,1M,2M,4M,8M,16M,32M,64M,256M"
            .split(',')
            .map(parse_size)
            .collect::<Result<_, _>>()?,
        tests: ["h2d", "d2h", "duplex", "d2d"].map(String::from).to_vec(),
        streams: vec![1],
        node: Some(0),
        steady: false,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let [key, value] = pair else {
            return Err(format!("option {} needs a value", pair[0]));
        };
        let list = || value.split(',').map(str::to_string);
        let num = |v: &str| v.parse::<u32>().map_err(|e| format!("{key} {v}: {e}"));
        match key.as_str() {
            "--gpu" => args.gpu = num(value)? as usize,
            "--reps" => args.reps = num(value)?,
            "--warmup" => args.warmup = num(value)?,
            "--sizes" => args.sizes = list().map(|s| parse_size(&s)).collect::<Result<_, _>>()?,
            "--tests" => args.tests = list().collect(),
            "--streams" => args.streams = list().map(|s| num(&s)).collect::<Result<_, _>>()?,
            "--node" if value == "none" => args.node = None,
            "--node" => args.node = Some(num(value)?),
            "--steady" => {
                args.steady = match value.as_str() {
                    "yes" => true,
                    "no" => false,
                    v => return Err(format!("--steady {v}: yes or no")),
                }
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(args)
}

/// The cases of one test at one size and stream count, as the planner writes them.
fn cases(
    test: &str,
    size: u64,
    streams: u32,
    node: Option<u32>,
    reps: Reps,
    steady: bool,
) -> Result<Vec<(String, Case)>, String> {
    let base = CaseParams {
        gpu: Some("gpu0".into()),
        size_bytes: Some(size),
        streams: Some(streams),
        ..CaseParams::default()
    };
    let host = |memory: &str, node_is_src: bool| CaseParams {
        host_memory: Some(memory.into()),
        src_node: node.filter(|_| node_is_src),
        dst_node: node.filter(|_| !node_is_src),
        cpu_node: node,
        ..base.clone()
    };
    // The typed spec, from parameters in the style of version 1 (host buffers on `src_node`,
    // or `dst_node` for D2H).
    let one = |name: &str, path: PathId, params: CaseParams| {
        let cell = format!("{name}/{size}/s{streams}");
        let spec = params.spec(path, &cell);
        let limit = spec
            .gpu_copy()
            .and_then(|g| hwc_plan::gpu_copy_retry_limit(path, g))
            .filter(|_| steady);
        (
            name.to_string(),
            Case {
                key: cell.clone(),
                path,
                engine: hwc_bench_cuda::ENGINE,
                cell,
                spec,
                reps: Reps {
                    retry_above_spread_pct: limit,
                    ..reps
                },
            },
        )
    };
    Ok(match test {
        "h2d" => vec![one("h2d", PathId::H2d, host("pinned", true))],
        "d2h" => vec![one("d2h", PathId::D2h, host("pinned", false))],
        "h2d_pageable" => vec![one("h2d_pageable", PathId::H2d, host("pageable", true))],
        "d2h_pageable" => vec![one("d2h_pageable", PathId::D2h, host("pageable", false))],
        "d2d" => vec![one("d2d", PathId::D2d, base.clone())],
        "duplex" => ["h2d", "d2h"]
            .into_iter()
            .map(|dir| {
                let params = CaseParams {
                    direction: Some(dir.into()),
                    src_node: node,
                    ..host("pinned", false)
                };
                one(&format!("duplex_{dir}"), PathId::Duplex, params)
            })
            .collect(),
        other => return Err(format!("unknown test {other}")),
    })
}

fn main() -> ExitCode {
    // SAFETY: first thing in main: no other thread exists and CUDA is not initialised.
    unsafe { hwc_bench_cuda::connections::configure() };
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cuda_bw: {e}");
            return ExitCode::from(2);
        }
    };
    let probe = match probe() {
        Ok(p) => p,
        Err(reason) => {
            eprintln!("cuda_bw: no CUDA device ({reason})");
            return ExitCode::from(1);
        }
    };
    let Some(device) = probe.devices.get(args.gpu) else {
        eprintln!("cuda_bw: no CUDA device {}", args.gpu);
        return ExitCode::from(1);
    };
    let backend = CudaBackend::new(&probe, &[("gpu0".into(), device.pci_bdf.clone())]);
    let reps = Reps {
        warmup: args.warmup,
        timed: args.reps,
        retry_above_spread_pct: None,
        steady: None,
    };
    let options = RunOptions {
        allow_contended: false,
        wall_tolerance: Some(0.02),
    };
    let cancel = AtomicBool::new(false);
    let mut failed = false;
    let mut all = Vec::new();
    for test in &args.tests {
        for &streams in &args.streams {
            for &size in &args.sizes {
                match cases(test, size, streams, args.node, reps, args.steady) {
                    Ok(l) => all.extend(l.into_iter().map(|(n, c)| (n, c, size, streams))),
                    Err(e) => {
                        eprintln!("cuda_bw: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
        }
    }
    // As for a profile: the runner announces the cases (the backend sizes its buffer pool from
    // them) and times both directions of a duplex size in the same repetitions.
    let cases: Vec<Case> = all.iter().map(|(_, c, _, _)| c.clone()).collect();
    let mut backends: Vec<Box<dyn Engine>> = vec![Box::new(backend)];
    let out = hwc_runner::run(&cases, &mut backends, &options, &mut NoObserver, &cancel);
    for r in &out.results {
        let m = &r.measurement;
        let Some((name, _, size, streams)) = all.iter().find(|(_, c, _, _)| c.key == m.key) else {
            continue;
        };
        let (size, streams) = (*size, *streams);
        let copies = m.bytes_per_rep / (size * u64::from(streams));
        let mut flags = Vec::new();
        if m.evidence.wall_clock_disagreement.is_some() {
            flags.push("wall_disagrees");
        }
        if m.cache_resident {
            flags.push("cache");
        }
        if let Some(search) = &m.evidence.placement_search {
            eprintln!("placement {name} {size} {streams}: {}", search.detail);
        }
        if m.contended {
            flags.push("contended");
        }
        let method = if name.ends_with("pageable") {
            "events/pageable"
        } else {
            "latched/numa-register"
        };
        println!(
            "hwc,{name},{size},{streams},{method},{:.4},{:.4},{:.4},{:.3},{},{copies},{}",
            m.gbps.median,
            m.gbps.min,
            m.gbps.max,
            m.gbps.spread_pct,
            m.gbps.n,
            flags.join(";")
        );
    }
    for w in &out.waived {
        failed = true;
        eprintln!(
            "cuda_bw: {} waived: {}",
            w.scope.as_deref().unwrap_or("?"),
            w.reason
        );
    }
    for f in &out.failures {
        failed = true;
        eprintln!("cuda_bw: {} failed: {}", f.key, f.error);
    }
    for (k, v) in &out.environment {
        eprintln!("env {k} = {v}");
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
