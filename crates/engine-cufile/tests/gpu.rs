//! On a machine with an NVIDIA GPU: the engine reads a file into GPU memory both ways through
//! the runner, each case's data checked, and labels cuFile's figures with a mode. Elsewhere (CI)
//! it says plainly that it skipped, and why.

use hwc_engine_cufile::{candidates, Cufile, CufileEngine, GpuSlot};
use hwc_model::{Case, GdsRoute, GdsSpec, PathId, Reps, Spec};
use hwc_runner::{run, CaseOutcome, Engine, Observer, RunOptions};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::AtomicBool;

struct Outcomes(Vec<CaseOutcome>);
impl Observer for Outcomes {
    fn case_finished(&mut self, o: &CaseOutcome) {
        self.0.push(o.clone());
    }
}

#[test]
fn reads_a_file_into_the_gpu_both_ways_and_labels_the_mode() {
    let probe = match hwc_bench_cuda::probe() {
        Ok(p) if !p.devices.is_empty() => p,
        Ok(_) => return eprintln!("skipped: no CUDA device on this machine"),
        Err(e) => return eprintln!("skipped: {e}"),
    };
    let lib = Cufile::load(&candidates(
        std::env::var_os("HWC_LIBCUFILE")
            .as_deref()
            .map(std::path::Path::new),
    ));
    let has_lib = lib.is_ok();
    let dir = std::env::var("HWC_GDS_TEST_DIR").unwrap_or_else(|_| "/var/tmp".into());
    let path = std::path::Path::new(&dir).join(format!("hwc-gds-test-{}.bin", std::process::id()));
    {
        let mut f = std::fs::File::create(&path).unwrap();
        let block: Vec<u8> = (0..1u32 << 20)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for i in 0..64u8 {
            let mut b = block.clone();
            b[0] = i;
            f.write_all(&b).unwrap();
        }
        f.sync_all().unwrap();
    }
    let key = path.display().to_string();
    let d = &probe.devices[0];
    let engine = CufileEngine::new(
        lib,
        vec![GpuSlot {
            name: "gpu0".into(),
            ordinal: d.ordinal,
            bdf: d.pci_bdf.clone(),
        }],
        BTreeMap::new(),
        BTreeMap::new(),
        32 << 20,
        // No child to run the check in: the mode comes from the driver's properties alone.
        Box::new(|_: &std::path::Path| None),
    );
    let case = |route: GdsRoute, write: bool| {
        Case::new(
            PathId::Gds,
            engine.id(),
            format!(
                "gpu0/{}target/4MiB/qd4/{}",
                if write { "write/" } else { "" },
                route.as_str()
            ),
            Spec::Gds(GdsSpec {
                gpu: "gpu0".into(),
                drives: vec![key.clone()],
                target: true,
                block_bytes: 4 << 20,
                queue_depth: 4,
                route,
                write,
                host_node: None,
            }),
            Reps {
                warmup: 1,
                timed: 3,
                retry_above_spread_pct: None,
                steady: None,
            },
        )
    };
    // Reads, then writes of the test's own file (each checked by reading the block back).
    let cases = [
        case(GdsRoute::Cufile, false),
        case(GdsRoute::PosixBounce, false),
        case(GdsRoute::Cufile, true),
        case(GdsRoute::PosixBounce, true),
    ];
    let mut engines: Vec<Box<dyn Engine>> = vec![Box::new(engine)];
    let mut seen = Outcomes(Vec::new());
    let out = run(
        &cases,
        &mut engines,
        &RunOptions::default(),
        &mut seen,
        &AtomicBool::new(false),
    );
    let env = engines[0].environment();
    let _ = std::fs::remove_file(&path);
    // The cases that ran by route, from their specs: (write, measurement).
    let ran = |route: GdsRoute| -> Vec<(bool, &hwc_model::Measurement)> {
        out.results
            .iter()
            .map(|r| &r.measurement)
            .filter_map(|m| {
                let s = m.spec.gds()?;
                (s.route == route).then_some((s.write, m))
            })
            .collect()
    };
    // The bounce needs no libcufile: it reads and writes here, each case's data checked.
    let bounce = ran(GdsRoute::PosixBounce);
    assert_eq!(
        bounce.iter().map(|(w, _)| *w).collect::<Vec<_>>(),
        [false, true],
        "the bounce did not read and write: {:?} {:?}",
        out.failures,
        out.waived
    );
    for (_, m) in &bounce {
        assert!(m.gbps.median > 0.0);
        assert_eq!(m.bytes_per_rep, 32 << 20);
    }
    if !has_lib {
        return eprintln!("cuFile part skipped: libcufile not found; the bounce ran");
    }
    let cufile = ran(GdsRoute::Cufile);
    match cufile.first() {
        Some((_, m)) => {
            let mode = &env["gds.mode"];
            eprintln!(
                "cuFile {:.2} GB/s in mode {} ({:?})",
                m.gbps.median, mode.value, mode.about
            );
            assert!(["nvfs", "p2pdma", "compat"].contains(&mode.value.as_str()));
            let label = if mode.value == "compat" {
                "not GPUDirect"
            } else {
                "GPUDirect Storage"
            };
            assert!(m.notes.iter().any(|n| n.contains(label)), "{:?}", m.notes);
            assert_eq!(cufile.len(), 2, "reads and writes: {:?}", out.failures);
        }
        None => {
            // A machine whose libcufile cannot register the file says why, in one line.
            let why = format!("{:?} {:?}", out.waived, out.failures);
            eprintln!("cuFile did not run here: {why}");
            assert!(why.contains("libcufile") || why.contains("cuFile"), "{why}");
        }
    }
}
