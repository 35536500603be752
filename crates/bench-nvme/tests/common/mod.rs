//! Cases shared by the bench-nvme integration tests.

use hwc_model::{Case, NvmePattern, NvmeSpec, NvmeTest, PathId, Reps, Spec};

/// A sequential case of `path` on `key` (a `--target`) of `block` bytes at `qd`.
#[allow(dead_code)]
pub fn target_case(path: PathId, key: &str, block: u64, qd: u32, reps: Reps) -> Case {
    Case::new(
        path,
        hwc_bench_nvme::ENGINE,
        format!("target/{}/qd{qd}", hwc_model::size_label(block)),
        Spec::Nvme(NvmeSpec {
            test: NvmeTest::Sweep,
            block_bytes: block,
            queue_depth: qd,
            drives: vec![key.to_string()],
            target: true,
            pattern: NvmePattern::Sequential,
        }),
        reps,
    )
}

/// A gc-settle case on `key`: `write_s` one-second write intervals (128 KiB at QD 8), then at
/// most `settle_max_s` s of probes.
pub fn gc_case(key: &str, write_s: u64, settle_max_s: u64) -> Case {
    let timed = u32::try_from(write_s.div_ceil(3)).unwrap();
    Case::new(
        PathId::NvmeWrite,
        hwc_bench_nvme::ENGINE,
        "gc-settle/target",
        Spec::Nvme(NvmeSpec {
            test: NvmeTest::GcSettle,
            block_bytes: 128 << 10,
            queue_depth: 8,
            drives: vec![key.to_string()],
            target: true,
            pattern: NvmePattern::GcSettle {
                duration_s: write_s,
                settle_max_s,
            },
        }),
        Reps {
            warmup: u32::try_from(write_s).unwrap() - timed,
            timed,
            retry_above_spread_pct: None,
            steady: None,
        },
    )
}
