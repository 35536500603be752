//! CPUs: `/proc/cpuinfo`, the online CPUs with their package/core ids, caches and the
//! instruction-set features the spec's `cpu_features` section names.

use std::collections::{BTreeSet, HashSet};

use hwc_model::topology::{Cache, CpuFeatures, LogicalCpu, NumaNode};
use hwc_model::{SimdPath, TierBasis};

use crate::fsroot::FsRoot;
use crate::parse::{parse_cpulist, parse_size};

const CPU_DIR: &str = "/sys/devices/system/cpu";

/// `/proc/cpuinfo` as blocks of `key: value` pairs, one block per processor.
#[derive(Debug, Default)]
pub(crate) struct CpuInfo {
    blocks: Vec<Vec<(String, String)>>,
}

impl CpuInfo {
    pub(crate) fn read(fs: &FsRoot) -> Self {
        fs.read("/proc/cpuinfo")
            .map(|text| Self::parse(&text))
            .unwrap_or_default()
    }

    pub(crate) fn parse(text: &str) -> Self {
        let mut blocks = vec![Vec::new()];
        for line in text.lines() {
            if let Some((key, value)) = line.split_once(':') {
                if let Some(block) = blocks.last_mut() {
                    block.push((key.trim().to_string(), value.trim().to_string()));
                }
            } else if line.trim().is_empty() {
                blocks.push(Vec::new());
            }
        }
        blocks.retain(|b| !b.is_empty());
        Self { blocks }
    }

    fn get<'a>(block: &'a [(String, String)], key: &str) -> Option<&'a str> {
        block
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `key` in any block.
    fn first(&self, key: &str) -> Option<&str> {
        self.blocks.iter().find_map(|b| Self::get(b, key))
    }

    /// `key` parsed as a number in the block of processor `cpu`.
    fn processor_field(&self, cpu: u32, key: &str) -> Option<u32> {
        let block = self
            .blocks
            .iter()
            .find(|b| Self::get(b, "processor").and_then(|p| p.parse().ok()) == Some(cpu))?;
        Self::get(block, key)?.parse().ok()
    }

    fn processor_ids(&self) -> Vec<u32> {
        self.blocks
            .iter()
            .filter_map(|b| Self::get(b, "processor")?.parse().ok())
            .collect()
    }

    pub(crate) fn model_name(&self) -> Option<String> {
        self.first("model name").map(str::to_string)
    }

    pub(crate) fn vendor(&self) -> Option<String> {
        self.first("vendor_id").map(str::to_string)
    }
}

/// Online CPU ids: sysfs `online`, else the processors /proc/cpuinfo lists.
pub(crate) fn online_cpus(fs: &FsRoot, info: &CpuInfo) -> Vec<u32> {
    fs.read(format!("{CPU_DIR}/online"))
        .and_then(|t| parse_cpulist(&t))
        .filter(|cpus| !cpus.is_empty())
        .unwrap_or_else(|| info.processor_ids())
}

/// Each online CPU with its package and core (sysfs, else cpuinfo) and its NUMA node.
pub(crate) fn logical_cpus(
    fs: &FsRoot,
    info: &CpuInfo,
    online: &[u32],
    nodes: &[NumaNode],
) -> Vec<LogicalCpu> {
    online
        .iter()
        .map(|&id| {
            let topo = format!("{CPU_DIR}/cpu{id}/topology");
            LogicalCpu {
                id,
                package: sysfs_id(fs, &format!("{topo}/physical_package_id"))
                    .or_else(|| info.processor_field(id, "physical id")),
                core: sysfs_id(fs, &format!("{topo}/core_id"))
                    .or_else(|| info.processor_field(id, "core id")),
                node: nodes.iter().find(|n| n.cpus.contains(&id)).map(|n| n.id),
            }
        })
        .collect()
}

/// A non-negative id from sysfs (`-1` means unknown).
fn sysfs_id(fs: &FsRoot, path: &str) -> Option<u32> {
    u32::try_from(fs.parse::<i64>(path)?).ok()
}

/// Distinct packages, and distinct (package, core) pairs, among the CPUs (None when no CPU
/// says).
pub(crate) fn sockets_and_cores(cpus: &[LogicalCpu]) -> (Option<u32>, Option<u32>) {
    let packages: BTreeSet<u32> = cpus.iter().filter_map(|c| c.package).collect();
    let cores: BTreeSet<(Option<u32>, u32)> = cpus
        .iter()
        .filter_map(|c| Some((c.package, c.core?)))
        .collect();
    let known = |n: usize| (n > 0).then(|| count(n));
    (known(packages.len()), known(cores.len()))
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The caches of the first online CPU, with how many CPUs share each and how many exist.
pub(crate) fn caches(fs: &FsRoot, online: &[u32]) -> Vec<Cache> {
    let Some(&first) = online.first() else {
        return Vec::new();
    };
    fs.names(format!("{CPU_DIR}/cpu{first}/cache"))
        .into_iter()
        .filter(|name| name.starts_with("index"))
        .filter_map(|index| {
            let own = CacheIndex::read(fs, first, &index)?;
            Some(Cache {
                level: own.level,
                kind: own.kind.clone(),
                size_bytes: fs.text(own.path("size")).and_then(|s| parse_size(&s))?,
                shared_by_cpus: own.shared.as_ref().map(|s| count(s.len())),
                instances: instances(fs, online, &own),
            })
        })
        .collect()
}

/// One `cache/indexN` directory of one CPU.
struct CacheIndex {
    dir: String,
    index: String,
    level: u32,
    kind: String,
    shared: Option<Vec<u32>>,
}

impl CacheIndex {
    fn read(fs: &FsRoot, cpu: u32, index: &str) -> Option<Self> {
        let dir = format!("{CPU_DIR}/cpu{cpu}/cache/{index}");
        Some(Self {
            level: fs.parse(format!("{dir}/level"))?,
            kind: fs.text(format!("{dir}/type"))?,
            shared: fs
                .read(format!("{dir}/shared_cpu_list"))
                .and_then(|t| parse_cpulist(&t))
                .filter(|s| !s.is_empty()),
            index: index.to_string(),
            dir,
        })
    }

    fn path(&self, file: &str) -> String {
        format!("{}/{file}", self.dir)
    }
}

/// Distinct instances of a cache: walks the online CPUs, skipping those already known to share
/// an instance seen before, so each instance is read once.
fn instances(fs: &FsRoot, online: &[u32], own: &CacheIndex) -> Option<u32> {
    let mut seen: Vec<Vec<u32>> = Vec::new();
    let mut covered: HashSet<u32> = HashSet::new();
    for &cpu in online {
        if covered.contains(&cpu) {
            continue;
        }
        let other = CacheIndex::read(fs, cpu, &own.index)?;
        if other.level != own.level || other.kind != own.kind {
            return None;
        }
        let shared = other.shared?;
        covered.extend(shared.iter().copied());
        covered.insert(cpu);
        if !seen.contains(&shared) {
            seen.push(shared);
        }
    }
    Some(count(seen.len()))
}

/// AMD Zen generation from family and model (`cpu family`, `model` in /proc/cpuinfo).
pub fn zen_generation(family: u32, model: u32) -> Option<u8> {
    match (family, model) {
        (0x17, 0x00..=0x2f) => Some(1),
        (0x17, 0x30..=0xff) => Some(2),
        (0x19, 0x00..=0x0f | 0x20..=0x5f) => Some(3),
        (0x19, 0x10..=0x1f | 0x60..=0x7f | 0xa0..=0xaf) => Some(4),
        (0x1a, _) => Some(5),
        _ => None,
    }
}

/// The spec's `cpu_features`, from the vendor, family, model and flags of /proc/cpuinfo.
pub(crate) fn features(info: &CpuInfo) -> CpuFeatures {
    let vendor = info.vendor();
    let family = info.first("cpu family").and_then(|f| f.parse().ok());
    let model = info.first("model").and_then(|m| m.parse().ok());
    let flags: HashSet<&str> = info
        .first("flags")
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let has = |flag: &str| flags.contains(flag);
    let is_amd = vendor.as_deref() == Some("AuthenticAMD");
    let zen = family
        .zip(model)
        .and_then(|(f, m)| zen_generation(f, m))
        .filter(|_| is_amd);
    let zen_label = match (is_amd, zen) {
        (_, Some(gen)) => format!("Zen {gen}"),
        (false, None) => "N/A (non-AMD)".to_string(),
        (true, None) => "unknown AMD family".to_string(),
    };
    // AArch64 lists its features under `Features`.
    let arm: HashSet<&str> = info
        .first("Features")
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let paths = SimdPath::allowed(&|flag| has(flag) || arm.contains(flag));
    let tier = paths.last().copied().unwrap_or(SimdPath::Scalar).label();
    CpuFeatures {
        vendor,
        zen_generation: zen,
        zen_label,
        has_avx512: has("avx512f") && has("avx512bw"),
        has_avx512f: has("avx512f"),
        has_avx512bw: has("avx512bw"),
        has_avx2: has("avx2"),
        has_sse4_2: has("sse4_2"),
        has_pclmulqdq: has("pclmulqdq"),
        has_aes: has("aes"),
        xxh3_tier: tier.to_string(),
        xxh3_tier_basis: TierBasis::Inferred,
        xxh3_paths: paths,
        xxh3_throughput_gbps: Vec::new(),
        xxh3_throughput_estimate: None,
        certus_recommended_hash: format!("XXH3_128bits ({tier} path)"),
        certus_recommended_hash_rule: None,
        family,
        model,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpuinfo(vendor: &str, family: u32, model: u32, flags: &str) -> CpuInfo {
        CpuInfo::parse(&format!(
            "processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n\
             model name\t: Test CPU\nphysical id\t: 1\ncore id\t\t: 3\nflags\t\t: {flags}\n\n\
             processor\t: 1\nvendor_id\t: {vendor}\nphysical id\t: 1\ncore id\t\t: 4\n\n"
        ))
    }

    #[test]
    fn zen_generations() {
        assert_eq!(zen_generation(0x17, 0x01), Some(1));
        assert_eq!(zen_generation(0x17, 0x08), Some(1)); // Zen+ is still generation 1
        assert_eq!(zen_generation(0x17, 0x31), Some(2));
        assert_eq!(zen_generation(0x19, 0x01), Some(3));
        assert_eq!(zen_generation(0x19, 0x21), Some(3));
        assert_eq!(zen_generation(0x19, 0x11), Some(4));
        assert_eq!(zen_generation(0x19, 0x61), Some(4));
        assert_eq!(zen_generation(0x19, 0xa0), Some(4));
        assert_eq!(zen_generation(0x19, 0x90), None);
        assert_eq!(zen_generation(0x1a, 0x02), Some(5));
        assert_eq!(zen_generation(0x15, 0x02), None);
    }

    #[test]
    fn amd_features() {
        let f = features(&cpuinfo(
            "AuthenticAMD",
            0x19,
            0x11,
            "sse2 sse4_2 avx2 avx512f avx512bw aes pclmulqdq",
        ));
        assert_eq!(f.zen_generation, Some(4));
        assert_eq!(f.zen_label, "Zen 4");
        assert!(f.has_avx512 && f.has_avx2 && f.has_sse4_2 && f.has_aes && f.has_pclmulqdq);
        assert_eq!(f.xxh3_tier, "AVX-512");
        assert_eq!(f.certus_recommended_hash, "XXH3_128bits (AVX-512 path)");
        assert_eq!((f.family, f.model), (Some(0x19), Some(0x11)));
        let old = features(&cpuinfo("AuthenticAMD", 0x15, 2, "sse2"));
        assert_eq!(old.zen_generation, None);
        assert_eq!(old.zen_label, "unknown AMD family");
        assert_eq!(old.xxh3_tier, "SSE2");
    }

    #[test]
    fn intel_and_bare_features() {
        let f = features(&cpuinfo("GenuineIntel", 0x17, 0x31, "sse2 avx2 avx512f"));
        assert_eq!(f.zen_generation, None, "family 0x17 on Intel is not Zen");
        assert_eq!(f.zen_label, "N/A (non-AMD)");
        assert!(f.has_avx512f && !f.has_avx512bw && !f.has_avx512);
        assert_eq!(f.xxh3_tier, "AVX-512");
        let bare = features(&CpuInfo::parse(""));
        assert_eq!(bare.vendor, None);
        assert_eq!(bare.xxh3_tier, "Scalar");
        assert_eq!(bare.certus_recommended_hash, "XXH3_128bits (Scalar path)");
        let avx2 = features(&cpuinfo("GenuineIntel", 6, 85, "sse2 avx2"));
        assert_eq!(avx2.certus_recommended_hash, "XXH3_128bits (AVX2 path)");
        assert_eq!(
            avx2.xxh3_paths,
            vec![SimdPath::Scalar, SimdPath::Sse2, SimdPath::Avx2]
        );
        assert_eq!(f.xxh3_paths.last(), Some(&SimdPath::Avx512));
        assert_eq!(f.xxh3_tier_basis, TierBasis::Inferred);
    }

    #[test]
    fn arm_features_name_neon_and_never_an_x86_tier() {
        let info = CpuInfo::parse(
            "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1\n\n",
        );
        let f = features(&info);
        assert_eq!(f.xxh3_paths, vec![SimdPath::Scalar, SimdPath::Neon]);
        assert_eq!(f.xxh3_tier, "NEON");
    }

    #[test]
    fn cpuinfo_fallbacks() {
        let info = cpuinfo("GenuineIntel", 6, 85, "");
        assert_eq!(info.processor_ids(), vec![0, 1]);
        assert_eq!(info.processor_field(1, "core id"), Some(4));
        assert_eq!(info.processor_field(7, "core id"), None);
        assert_eq!(info.model_name().as_deref(), Some("Test CPU"));
        let empty = tempfile::tempdir().expect("tempdir");
        let fs = FsRoot::new(empty.path());
        assert_eq!(online_cpus(&fs, &info), vec![0, 1]);
        let cpus = logical_cpus(&fs, &info, &[0, 1], &[]);
        assert_eq!(cpus[1].package, Some(1));
        assert_eq!(sockets_and_cores(&cpus), (Some(1), Some(2)));
        assert!(caches(&fs, &[0, 1]).is_empty());
    }
}
