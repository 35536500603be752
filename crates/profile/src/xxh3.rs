//! `cpu_features`' XXH3 fields from the hash path's measurements: every figure, the tier
//! that measured fastest, the spec's estimate, and the recommended hash by [`recommend`]'s rule.
//! Where the hash path did not run, the fields keep what detection inferred from the flags
//! (`xxh3_tier_basis: inferred`).

use hwc_model::topology::CpuFeatures;
use hwc_model::xxh3::CACHE_BLOCK_BYTES;
use hwc_model::{HashVariant, Measurement, PathId, Stats, TierBasis, Xxh3Figure};

/// The hashing speed one thread needs, in GB/s: the storage system hashes every block it
/// moves, and one thread should keep up with one PCIe Gen4 x4 NVMe drive's sequential read
/// (about 7 GB/s) with room to spare.
pub const HASH_NEED_GBPS: f64 = 10.0;

/// Every XXH3 figure among `ms`, in (path, variant, size, threads) order.
pub fn figures(ms: &[Measurement]) -> Vec<Xxh3Figure> {
    let mut v: Vec<Xxh3Figure> = ms
        .iter()
        .filter(|m| m.path == PathId::Xxh3)
        .filter_map(|m| {
            let s = m.spec.hash()?;
            Some(Xxh3Figure {
                path: s.simd,
                variant: s.variant,
                size_bytes: s.size_bytes,
                threads: s.threads,
                offset_bytes: s.offset_bytes,
                cache_resident: m.cache_resident,
                gbps: m.gbps,
                key: m.key.clone(),
            })
        })
        .collect();
    v.sort_by_key(|f| (f.path, f.variant, f.size_bytes, f.offset_bytes, f.threads));
    v
}

/// The figures the tier, estimate and recommendation are read from: 1 thread, page-aligned
/// 100 KiB blocks (cache-resident: the hash's own speed, not the memory's; aligned as a storage
/// stack's blocks are).
fn reference(figures: &[Xxh3Figure]) -> impl Iterator<Item = &Xxh3Figure> {
    figures.iter().filter(|f| {
        f.threads == 1
            && f.size_bytes == CACHE_BLOCK_BYTES
            && f.offset_bytes == Some(0)
            && f.cache_resident
    })
}

/// The fastest reference figure of `variant` (of either, with `None`).
fn fastest(figures: &[Xxh3Figure], variant: Option<HashVariant>) -> Option<&Xxh3Figure> {
    reference(figures)
        .filter(|f| variant.is_none_or(|v| f.variant == v))
        .max_by(|a, b| a.gbps.median.total_cmp(&b.gbps.median))
}

/// A figure as the estimate and the rule say it: median GB/s, then its count and spread.
fn stat(s: &Stats, verb: &str) -> String {
    format!(
        "{:.1} GB/s {verb}(median of {}, spread {:.1} %)",
        s.median, s.n, s.spread_pct
    )
}

/// The recommended hash and the rule's reasoning, from the reference figures (1 thread, 100 KiB):
/// XXH3-128 (128 bits make a collision between stored blocks negligible) on its fastest path
/// when that path hashes at least [`HASH_NEED_GBPS`]; else XXH3-64 on its fastest path when
/// that does; else whichever variant is faster, said to be under the need. `None` without a
/// reference figure.
pub fn recommend(figures: &[Xxh3Figure]) -> Option<(String, String)> {
    let f128 = fastest(figures, Some(HashVariant::Xxh3_128));
    let f64_ = fastest(figures, Some(HashVariant::Xxh3_64));
    let need = HASH_NEED_GBPS;
    let pick = |f: &Xxh3Figure| format!("{} ({} path)", f.variant.function(), f.path);
    let said = |f: Option<&Xxh3Figure>| {
        f.map(|f| format!("{} {} on {}", f.variant, stat(&f.gbps, ""), f.path))
    };
    let figures_said: Vec<String> = [said(f128), said(f64_)].into_iter().flatten().collect();
    let rule = format!(
        "XXH3-128 if its fastest path hashes at least {need} GB/s on 1 thread (page-aligned \
         100 KiB blocks), \
         else XXH3-64 if it does, else the faster; measured: {}",
        figures_said.join(", ")
    );
    let chosen = match (f128, f64_) {
        (Some(a), _) if a.gbps.median >= need => pick(a),
        (_, Some(b)) if b.gbps.median >= need => pick(b),
        _ => {
            let f = fastest(figures, None)?;
            format!("{} (under the {need} GB/s need)", pick(f))
        }
    };
    Some((chosen, rule))
}

/// Fill `cpu`'s XXH3 fields from the measurements; left as detected where none is of the hash
/// path at 1 thread and page-aligned 100 KiB.
pub fn fill(cpu: &mut CpuFeatures, ms: &[Measurement]) {
    let figures = figures(ms);
    if let Some(best) = fastest(&figures, None) {
        cpu.xxh3_tier = best.path.label().to_string();
        cpu.xxh3_tier_basis = TierBasis::Measured;
        cpu.xxh3_throughput_estimate = Some(format!(
            "{}, 1 thread, {}, {}, page-aligned 100 KiB blocks",
            stat(&best.gbps, "measured "),
            best.path,
            best.variant
        ));
    }
    if let Some((hash, rule)) = recommend(&figures) {
        cpu.certus_recommended_hash = hash;
        cpu.certus_recommended_hash_rule = Some(rule);
    }
    cpu.xxh3_throughput_gbps = figures;
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_model::SimdPath;

    fn fig(path: SimdPath, variant: HashVariant, size: u64, threads: u32, gbps: f64) -> Xxh3Figure {
        Xxh3Figure {
            path,
            variant,
            size_bytes: size,
            threads,
            offset_bytes: Some(0),
            cache_resident: true,
            gbps: Stats::flat(gbps, 1.0, 30),
            key: format!("xxh3/{path:?}/{variant:?}/{size}/{threads}"),
        }
    }

    use HashVariant::{Xxh3_128 as H128, Xxh3_64 as H64};
    use SimdPath::*;
    const K64: u64 = CACHE_BLOCK_BYTES;

    #[test]
    fn xxh3_128_on_its_fastest_path_when_it_meets_the_need() {
        let f = vec![
            fig(Scalar, H128, K64, 1, 6.0),
            fig(Avx2, H128, K64, 1, 24.0),
            fig(Avx512, H128, K64, 1, 30.0),
            fig(Avx512, H64, K64, 1, 33.0),
            // Not reference figures: more threads, memory-resident, and off a page boundary.
            fig(Avx2, H128, K64, 2, 60.0),
            fig(Avx2, H128, 1 << 30, 1, 90.0),
            Xxh3Figure {
                offset_bytes: Some(16),
                ..fig(Avx2, H128, K64, 1, 95.0)
            },
            // An older record, which wrote no offset.
            Xxh3Figure {
                offset_bytes: None,
                ..fig(Avx2, H128, K64, 1, 96.0)
            },
        ];
        let (hash, rule) = recommend(&f).unwrap();
        assert_eq!(hash, "XXH3_128bits (AVX-512 path)");
        assert!(
            rule.contains("XXH3-128 30.0 GB/s (median of 30, spread 1.0 %) on AVX-512"),
            "{rule}"
        );
    }

    #[test]
    fn xxh3_64_when_only_it_meets_the_need_and_the_faster_when_neither_does() {
        let f = vec![fig(Sse2, H128, K64, 1, 9.0), fig(Sse2, H64, K64, 1, 11.0)];
        assert_eq!(recommend(&f).unwrap().0, "XXH3_64bits (SSE2 path)");
        let slow = vec![
            fig(Scalar, H128, K64, 1, 4.0),
            fig(Scalar, H64, K64, 1, 5.0),
        ];
        assert_eq!(
            recommend(&slow).unwrap().0,
            "XXH3_64bits (Scalar path) (under the 10 GB/s need)"
        );
        assert_eq!(recommend(&[fig(Avx2, H64, K64, 4, 50.0)]), None);
    }

    #[test]
    fn the_tier_is_the_fastest_measured_path_and_says_so() {
        let mut cpu = CpuFeatures {
            xxh3_tier: "AVX-512".into(),
            ..CpuFeatures::default()
        };
        // Only the AVX2 path ran at the reference cell: the tier is what was measured.
        fill(&mut cpu, &[]);
        assert_eq!(cpu.xxh3_tier_basis, TierBasis::Inferred);
        assert_eq!(cpu.xxh3_tier, "AVX-512");
        assert_eq!(cpu.xxh3_throughput_estimate, None);
        let f =
            figures_to_measurements(&[fig(Avx2, H64, K64, 1, 20.5), fig(Sse2, H64, K64, 1, 12.0)]);
        fill(&mut cpu, &f);
        assert_eq!(cpu.xxh3_tier, "AVX2");
        assert_eq!(cpu.xxh3_tier_basis, TierBasis::Measured);
        assert_eq!(
            cpu.xxh3_throughput_estimate.as_deref(),
            Some(
                "20.5 GB/s measured (median of 30, spread 1.0 %), 1 thread, AVX2, XXH3-64, page-aligned 100 KiB blocks"
            )
        );
        assert_eq!(cpu.certus_recommended_hash, "XXH3_64bits (AVX2 path)");
        assert_eq!(cpu.xxh3_throughput_gbps.len(), 2);
        assert_eq!(cpu.xxh3_throughput_gbps[0].path, Sse2, "sorted by path");
    }

    fn figures_to_measurements(f: &[Xxh3Figure]) -> Vec<Measurement> {
        f.iter()
            .map(|f| {
                let case = hwc_model::Case {
                    key: f.key.clone(),
                    path: PathId::Xxh3,
                    engine: hwc_model::EngineId::new("xxh3"),
                    cell: "c".into(),
                    spec: hwc_model::Spec::Hash(hwc_model::HashSpec {
                        variant: f.variant,
                        simd: f.path,
                        size_bytes: f.size_bytes,
                        threads: f.threads,
                        cpu_node: Some(0),
                        offset_bytes: f.offset_bytes,
                    }),
                    reps: hwc_model::Reps {
                        warmup: 1,
                        timed: 30,
                        retry_above_spread_pct: None,
                        steady: None,
                    },
                };
                let mut m = Measurement::of(&case, 1, f.gbps);
                m.cache_resident = f.cache_resident;
                m
            })
            .collect()
    }
}
