//! What the backend does where it cannot measure, through the runner: no CUDA (waived with the
//! reason), a GPU the driver does not list (waived), a malformed case (fails with a clear
//! error). None of this needs a GPU, and none of it may panic.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use hwc_bench_cuda::{CudaBackend, CudaProbe};
use hwc_model::{Case, GpuCopySpec, HostCopySpec, HostMemory, PathId, Reps, Spec};
use hwc_runner::{run_case, CaseOutcome, Engine, Idle, RunOptions};

fn h2d(gpu: &str, size: u64) -> Case {
    Case::new(
        PathId::H2d,
        hwc_bench_cuda::ENGINE,
        format!("{gpu}/local/4MiB/s1"),
        Spec::GpuCopy(GpuCopySpec {
            gpu: gpu.into(),
            size_bytes: size,
            streams: 1,
            host_memory: Some(HostMemory::Pinned),
            host_node: None,
            cpu_node: None,
            direction: None,
        }),
        Reps {
            warmup: 1,
            timed: 3,
            retry_above_spread_pct: None,
            steady: None,
        },
    )
}

fn outcome(backend: &mut CudaBackend, case: &Case) -> CaseOutcome {
    run_case(
        case,
        backend,
        &RunOptions::default(),
        &AtomicBool::new(false),
    )
}

#[test]
fn without_cuda_every_path_is_waived_with_the_reason() {
    let mut backend =
        CudaBackend::unavailable("libcuda.so.1 not found: no NVIDIA driver is installed");
    assert_eq!(backend.id(), hwc_bench_cuda::ENGINE);
    assert_eq!(
        hwc_bench_cuda::decl().paths,
        [PathId::H2d, PathId::D2h, PathId::Duplex, PathId::D2d]
    );
    match outcome(&mut backend, &h2d("gpu0", 4 << 20)) {
        CaseOutcome::Waived(w) => {
            assert!(w.reason.contains("libcuda.so.1 not found"), "{}", w.reason);
            assert!(w.hint.is_some());
        }
        other => panic!("expected a waiver, got {other:?}"),
    }
}

#[test]
fn a_gpu_the_driver_does_not_list_is_waived() {
    let probe = CudaProbe {
        devices: Vec::new(),
        driver_version: "test".into(),
        environment: BTreeMap::new(),
    };
    let mut backend = CudaBackend::new(&probe, &[("gpu0".into(), "00000000:00:06.0".into())]);
    assert_eq!(backend.idle_check(&h2d("gpu0", 1)), Idle::Idle);
    match outcome(&mut backend, &h2d("gpu0", 4 << 20)) {
        CaseOutcome::Waived(w) => {
            assert!(w.reason.contains("0000:00:06.0"), "{}", w.reason);
            assert!(w.reason.contains("not a CUDA device"), "{}", w.reason);
        }
        other => panic!("expected a waiver, got {other:?}"),
    }
    match outcome(&mut backend, &h2d("gpu7", 4 << 20)) {
        CaseOutcome::Waived(w) => assert!(w.reason.contains("gpu7"), "{}", w.reason),
        other => panic!("expected a waiver, got {other:?}"),
    }
    assert_eq!(
        backend
            .environment()
            .get("gpu0.pci_bdf")
            .map(|s| s.value.as_str()),
        Some("0000:00:06.0")
    );
}

#[test]
fn a_case_of_another_workload_fails_with_a_clear_error() {
    let probe = CudaProbe {
        devices: Vec::new(),
        driver_version: "test".into(),
        environment: BTreeMap::new(),
    };
    let mut backend = CudaBackend::new(&probe, &[("gpu0".into(), "0000:00:06.0".into())]);
    let mut case = h2d("gpu0", 4 << 20);
    case.spec = Spec::HostCopy(HostCopySpec {
        size_bytes: 1,
        threads: 1,
        cpu_node: 0,
        src_node: 0,
        dst_node: 0,
    });
    match outcome(&mut backend, &case) {
        CaseOutcome::Failed(f) => {
            assert_eq!(f.error, "the CUDA copy engine was given a host_copy case")
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}
