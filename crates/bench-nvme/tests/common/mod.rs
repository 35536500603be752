//! Cases shared by the bench-nvme integration tests.

use hwc_model::{Case, CaseParams, PathId, Reps};

/// A gc-settle case on `key`: `write_s` one-second write intervals (128 KiB at QD 8), then at
/// most `settle_max_s` s of probes.
pub fn gc_case(key: &str, write_s: u64, settle_max_s: u64) -> Case {
    let timed = u32::try_from(write_s.div_ceil(3)).unwrap();
    Case {
        key: "nvme_write/gc-settle/target".into(),
        path: PathId::NvmeWrite,
        params: CaseParams {
            size_bytes: Some(128 << 10),
            queue_depth: Some(8),
            drives: vec![key.to_string()],
            pattern: Some("gc-settle".into()),
            duration_s: Some(write_s),
            settle_max_s: Some(settle_max_s),
            ..CaseParams::default()
        },
        reps: Reps {
            warmup: u32::try_from(write_s).unwrap() - timed,
            timed,
            retry_above_spread_pct: None,
        },
    }
}
