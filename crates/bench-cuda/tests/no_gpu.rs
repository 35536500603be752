//! What the backend does where it cannot measure, through the runner: no CUDA (waived with the
//! reason), a GPU the driver does not list (waived), a malformed case (fails with a clear
//! error). None of this needs a GPU, and none of it may panic.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use hwc_bench_cuda::{CudaBackend, CudaProbe};
use hwc_model::{Case, CaseParams, PathId, Reps};
use hwc_runner::{run_case, Backend, CaseOutcome, Idle, RunOptions};

fn h2d(gpu: Option<&str>, size: Option<u64>) -> Case {
    Case {
        key: "h2d/gpu0/4MiB/s1".into(),
        path: PathId::H2d,
        params: CaseParams {
            gpu: gpu.map(str::to_string),
            size_bytes: size,
            streams: Some(1),
            host_memory: Some("pinned".into()),
            ..CaseParams::default()
        },
        reps: Reps {
            warmup: 1,
            timed: 3,
            retry_above_spread_pct: None,
        },
    }
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
    for path in [PathId::H2d, PathId::D2h, PathId::Duplex, PathId::D2d] {
        assert!(backend.serves(path));
    }
    assert!(!backend.serves(PathId::HostRam));
    match outcome(&mut backend, &h2d(Some("gpu0"), Some(4 << 20))) {
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
    assert_eq!(backend.idle_check(&h2d(Some("gpu0"), Some(1))), Idle::Idle);
    match outcome(&mut backend, &h2d(Some("gpu0"), Some(4 << 20))) {
        CaseOutcome::Waived(w) => {
            assert!(w.reason.contains("0000:00:06.0"), "{}", w.reason);
            assert!(w.reason.contains("not a CUDA device"), "{}", w.reason);
        }
        other => panic!("expected a waiver, got {other:?}"),
    }
    match outcome(&mut backend, &h2d(Some("gpu7"), Some(4 << 20))) {
        CaseOutcome::Waived(w) => assert!(w.reason.contains("gpu7"), "{}", w.reason),
        other => panic!("expected a waiver, got {other:?}"),
    }
    assert_eq!(
        backend
            .environment()
            .get("gpu0.pci_bdf")
            .map(String::as_str),
        Some("0000:00:06.0")
    );
}

#[test]
fn malformed_cases_fail_with_a_clear_error() {
    let probe = CudaProbe {
        devices: Vec::new(),
        driver_version: "test".into(),
        environment: BTreeMap::new(),
    };
    let mut backend = CudaBackend::new(&probe, &[("gpu0".into(), "0000:00:06.0".into())]);
    for (case, expected) in [
        (h2d(None, Some(4 << 20)), "no `gpu` parameter"),
        (h2d(Some("gpu0"), None), "no `size_bytes` parameter"),
    ] {
        match outcome(&mut backend, &case) {
            CaseOutcome::Failed(f) => assert!(f.error.contains(expected), "{}", f.error),
            other => panic!("expected a failure, got {other:?}"),
        }
    }
}
