//! End-to-end on the machine the tests run on: `profile --paths xxh3` measures every XXH3 code
//! path this CPU's flags allow (the set measured equals `cpu_features.xxh3_paths`), records the
//! fastest as the measured tier, and the profile reads back. It judges no figure: benchmarks
//! are not unit tests. Skips, saying why, in a build without xxhash.h.

use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn every_path_the_cpu_flags_allow_is_measured_and_the_tier_is_measured() {
    if hwc_bench_hash::available().is_err() {
        println!(
            "SKIPPED: this build has no XXH3 code (xxhash.h was missing when it was built): {}",
            hwc_bench_hash::INSTALL_HINT
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("p");
    let o = Command::new(env!("CARGO_BIN_EXE_hwceiling"))
        .args([
            "profile",
            "--paths",
            "xxh3",
            "--threads",
            "1",
            "--quick",
            "-o",
        ])
        .arg(&dir)
        .output()
        .expect("run hwceiling");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let yaml_path = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "yaml"))
        .unwrap();
    let p = hwc_profile::from_yaml(&std::fs::read_to_string(&yaml_path).unwrap()).unwrap();
    assert!(p.failures.is_empty(), "{:?}", p.failures);
    let f = &p.cpu_features;
    let allowed: BTreeSet<_> = f.xxh3_paths.iter().copied().collect();
    assert!(!allowed.is_empty());
    let measured: BTreeSet<_> = f.xxh3_throughput_gbps.iter().map(|x| x.path).collect();
    assert_eq!(
        measured, allowed,
        "every path the flags allow, and no other"
    );
    // The memory-resident size is waived where it would take too much of the memory.
    let memory_waived = p
        .waivers_of(hwc_model::PathId::Xxh3)
        .any(|w| w.scope.as_deref() == Some("memory-resident"));
    let sizes_wanted = if memory_waived { 2 } else { 3 };
    for path in &allowed {
        for variant in hwc_model::HashVariant::ALL {
            let blocks: BTreeSet<(u64, Option<u32>)> = f
                .xxh3_throughput_gbps
                .iter()
                .filter(|x| x.path == *path && x.variant == variant)
                .map(|x| (x.size_bytes, x.offset_bytes))
                .collect();
            let block = hwc_model::xxh3::CACHE_BLOCK_BYTES;
            assert!(
                blocks.contains(&(block, Some(0)))
                    && blocks.contains(&(block, Some(hwc_model::xxh3::XXHSUM_OFFSET_BYTES)))
                    && blocks.len() == sizes_wanted,
                "{path} {variant}: {blocks:?}"
            );
        }
    }
    assert_eq!(f.xxh3_tier_basis, hwc_model::TierBasis::Measured);
    assert!(allowed.iter().any(|p| p.label() == f.xxh3_tier));
    assert!(f
        .xxh3_throughput_estimate
        .as_deref()
        .is_some_and(|e| e.contains("GB/s measured (median of ") && e.contains("%), 1 thread")));
    assert!(f.certus_recommended_hash_rule.is_some());
}
