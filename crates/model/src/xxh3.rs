//! XXH3 hash throughput (the spec's CPU step): which hash, which SIMD code path, and the
//! figures the profile's `cpu_features` carries.

use crate::results::Stats;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The two XXH3 variants the spec weighs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum HashVariant {
    /// `XXH3_64bits`.
    #[serde(rename = "xxh3_64")]
    Xxh3_64,
    /// `XXH3_128bits` (XXH128).
    #[serde(rename = "xxh3_128")]
    Xxh3_128,
}

impl HashVariant {
    pub const ALL: [HashVariant; 2] = [HashVariant::Xxh3_64, HashVariant::Xxh3_128];

    /// The name in case keys: `xxh3-64`, `xxh3-128`.
    pub fn as_str(self) -> &'static str {
        match self {
            HashVariant::Xxh3_64 => "xxh3-64",
            HashVariant::Xxh3_128 => "xxh3-128",
        }
    }

    /// For people: `XXH3-64`, `XXH3-128`.
    pub fn label(self) -> &'static str {
        match self {
            HashVariant::Xxh3_64 => "XXH3-64",
            HashVariant::Xxh3_128 => "XXH3-128",
        }
    }

    /// The C function's name, as the spec's recommendation spells it.
    pub fn function(self) -> &'static str {
        match self {
            HashVariant::Xxh3_64 => "XXH3_64bits",
            HashVariant::Xxh3_128 => "XXH3_128bits",
        }
    }
}

impl fmt::Display for HashVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One of xxHash's XXH3 code paths (`XXH_VECTOR`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SimdPath {
    /// `XXH_SCALAR`: portable C.
    Scalar,
    /// `XXH_SSE2` (x86-64).
    Sse2,
    /// `XXH_AVX2` (x86-64 with avx2).
    Avx2,
    /// `XXH_AVX512` (x86-64 with avx512f).
    Avx512,
    /// `XXH_NEON` (AArch64).
    Neon,
}

impl SimdPath {
    pub const ALL: [SimdPath; 5] = [
        SimdPath::Scalar,
        SimdPath::Sse2,
        SimdPath::Avx2,
        SimdPath::Avx512,
        SimdPath::Neon,
    ];

    /// The name in case keys: `scalar`, `sse2`, `avx2`, `avx512`, `neon`.
    pub fn as_str(self) -> &'static str {
        match self {
            SimdPath::Scalar => "scalar",
            SimdPath::Sse2 => "sse2",
            SimdPath::Avx2 => "avx2",
            SimdPath::Avx512 => "avx512",
            SimdPath::Neon => "neon",
        }
    }

    /// For people, as the spec's `xxh3_tier` spells it: `Scalar`, `SSE2`, `AVX2`, `AVX-512`,
    /// `NEON`.
    pub fn label(self) -> &'static str {
        match self {
            SimdPath::Scalar => "Scalar",
            SimdPath::Sse2 => "SSE2",
            SimdPath::Avx2 => "AVX2",
            SimdPath::Avx512 => "AVX-512",
            SimdPath::Neon => "NEON",
        }
    }

    /// The paths a CPU with these flags can run (`/proc/cpuinfo` names: `sse2`, `avx2` and
    /// `avx512f` on x86-64, `asimd` on AArch64), narrowest first. Scalar is always there.
    pub fn allowed(has_flag: &dyn Fn(&str) -> bool) -> Vec<SimdPath> {
        let mut v = vec![SimdPath::Scalar];
        for (flag, path) in [
            ("sse2", SimdPath::Sse2),
            ("avx2", SimdPath::Avx2),
            ("avx512f", SimdPath::Avx512),
            ("asimd", SimdPath::Neon),
        ] {
            if has_flag(flag) {
                v.push(path);
            }
        }
        v
    }
}

impl fmt::Display for SimdPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// How `cpu_features.xxh3_tier` was found.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TierBasis {
    /// The widest code path the CPU flags allow, no hash measured (every profile before the
    /// hash path, and any run where it did not run).
    #[default]
    Inferred,
    /// The code path whose XXH3 throughput measured fastest in this run.
    Measured,
}

/// One measured XXH3 figure: a code path, a variant, a block size and a thread count, with the
/// statistics of its measurement (`key` names it under `measurements`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Xxh3Figure {
    pub path: SimdPath,
    pub variant: HashVariant,
    /// Bytes of each block hashed (one call of the hash).
    pub size_bytes: u64,
    pub threads: u32,
    /// Bytes each thread's own block started past a page boundary (0: page-aligned); absent for
    /// a working set, and in older profiles for a block unplaced or page-aligned (see
    /// `HashSpec::offset_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_bytes: Option<u32>,
    /// The block stays in a cache (a cache figure, not a memory one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache_resident: bool,
    /// Bytes hashed per second, in GB/s (10⁹ B/s), over the timed repetitions.
    pub gbps: Stats,
    /// The measurement's key.
    pub key: String,
}

/// The cache-resident block, page-aligned: the figure the tier, the estimate and the
/// recommendation are read from (1 thread). It is the size `xxhsum -b` hashes (100 KB, its `KB`
/// being 1024 bytes), so the comparison with it differs in alignment alone.
pub const CACHE_BLOCK_BYTES: u64 = 100 * 1024;
/// Where `xxhsum -b`'s block starts past a page boundary, for the comparison with it: its
/// buffer is aligned to 16 bytes only, and any start off a 64-byte line hashes alike (AVX-512's
/// 64-byte loads straddle two lines; `tools/xxh3-reference/README.md`).
pub const XXHSUM_OFFSET_BYTES: u32 = 16;
/// A block's offset is under a page.
pub const OFFSET_LIMIT_BYTES: u32 = 4096;

/// A block as case names and tables say it: `100KiB+0B` (page-aligned) or `100KiB+16B`, the
/// bytes it starts past a page boundary; `520MiB` for a working set (and for a block of an
/// older profile that recorded no offset).
pub fn block_label(size_bytes: u64, offset_bytes: Option<u32>) -> String {
    let size = crate::size_label(size_bytes);
    match offset_bytes {
        Some(o) => format!("{size}+{o}B"),
        None => size,
    }
}
