//! What a run records of the choices it was given: what each selection leaves out of this
//! machine's full plan (which decides, typed, whether the run is complete: `provenance.run`),
//! and the options as a record for people (`provenance.options`).

use crate::nvme::LeftOutDrives;
use hwc_model::{LeftOut, RunConfig, Topology};
use std::collections::BTreeMap;

/// What each selection of `c` leaves out of the full plan on `topo`: a sweep given as a list
/// leaves out the points of the full sweep it lacks, for host sizes the cells (`256MiB
/// sustained` when a larger size moves the sustained cells); the drives as the NVMe setup found
/// (`None` where it did not look: the NVMe paths not planned).
pub(crate) fn left_out(c: &RunConfig, topo: &Topology, drives: &LeftOutDrives) -> LeftOut {
    fn missing<T: PartialEq + Copy>(given: &[T], full: &[T], show: fn(T) -> String) -> Vec<String> {
        full.iter()
            .filter(|p| !given.contains(p))
            .map(|&x| show(x))
            .collect()
    }
    let num = |x: u32| x.to_string();
    LeftOut {
        engines: c.engines.as_ref().map(|named| {
            crate::engines::declarations()
                .into_iter()
                .filter(|d| d.default_on && !named.contains(&d.id))
                .map(|d| d.id.to_string())
                .collect()
        }),
        drives: drives.read.clone(),
        threads: c
            .threads
            .as_ref()
            .map(|t| missing(t, &hwc_plan::default_host_threads(topo), num)),
        host_sizes: c
            .host_sizes
            .as_ref()
            .map(|s| hwc_plan::host_sizes_left_out(topo, s)),
        nvme_sizes: c
            .nvme_sizes
            .as_ref()
            .map(|s| missing(s, &hwc_plan::NVME_SIZES, hwc_model::size_label)),
        queue_depths: c
            .queue_depths
            .as_ref()
            .map(|q| missing(q, &hwc_plan::NVME_QUEUE_DEPTHS, num)),
    }
}

/// Every option that shaped the run, for the provenance's record for people: each selection
/// with what it leaves out of the full plan (`threads_left_out`, …; empty when it leaves out
/// nothing), and the NVMe options. `provenance.run` holds what decides completeness, typed.
pub(crate) fn options_map(
    c: &RunConfig,
    topo: &Topology,
    drives: &LeftOutDrives,
) -> BTreeMap<String, String> {
    let mut o = BTreeMap::new();
    o.insert("output_dir".into(), c.output_dir.display().to_string());
    for (sel, given, left) in c.selections(&left_out(c, topo, drives)) {
        let key = sel.key();
        o.insert(key.to_string(), given.join(","));
        if let Some(left) = left {
            o.insert(format!("{key}_left_out"), left.join(","));
        }
    }
    o.insert("quick".into(), c.quick.to_string());
    o.insert("fixed_reps".into(), c.fixed_reps.to_string());
    o.insert("allow_contended".into(), c.allow_contended.to_string());
    crate::nvme::options(c, drives, &mut o);
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_model::{PathId, Provenance};

    /// What the run judges (typed), asserted equal to what a profile of an earlier build,
    /// holding only the options' words, reads as.
    fn narrowed_by(c: &RunConfig, topo: &Topology, drives: &LeftOutDrives) -> Vec<String> {
        let typed = Provenance {
            run: Some(c.run_choices(&left_out(c, topo, drives))),
            ..Default::default()
        };
        let legacy = Provenance {
            options: options_map(c, topo, drives),
            ..Default::default()
        };
        assert_eq!(typed.narrowed_by(), legacy.narrowed_by(), "{c:?}");
        assert_eq!(typed.quick(), legacy.quick());
        typed.narrowed_by()
    }

    fn with(f: impl FnOnce(&mut RunConfig)) -> RunConfig {
        let mut c = RunConfig::new("out");
        f(&mut c);
        c
    }

    const NONE: &[&str] = &[];
    const MIB: u64 = 1 << 20;

    #[test]
    fn a_sweep_given_narrows_only_when_it_leaves_out_a_point_of_the_full_runs() {
        use hwc_model::topology::{NumaNode, Platform};
        // Two nodes: 8 CPUs (1, 2, 4, 8) and 4 (1, 2, 4).
        let node = |id: u32, cpus: std::ops::Range<u32>| NumaNode {
            id,
            cpus: cpus.collect(),
            memory_only: false,
            memory_bytes: None,
            distances: vec![],
        };
        let topo = Topology {
            platform: Platform {
                numa_nodes: 2,
                numa: vec![node(0, 0..8), node(1, 8..12)],
                ..Platform::default()
            },
            ..Topology::default()
        };
        let none = LeftOutDrives::default();
        let n = |c: RunConfig| narrowed_by(&c, &topo, &none);
        assert_eq!(n(with(|c| c.threads = Some(vec![8, 4, 2, 1]))), NONE);
        assert_eq!(n(with(|c| c.threads = Some(vec![1, 2, 4, 8, 16]))), NONE);
        assert_eq!(
            n(with(|c| c.threads = Some(vec![1, 8]))),
            ["--threads 1,8 (leaves out 2,4)"]
        );
        let sizes = |v: &[u64]| Some(v.iter().map(|&m| m * MIB).collect::<Vec<u64>>());
        assert_eq!(n(with(|c| c.host_sizes = sizes(&[256, 64, 16, 4]))), NONE);
        // A larger size moves the streaming kernel (and the sustained ceiling) off 256 MiB.
        assert_eq!(
            n(with(|c| c.host_sizes = sizes(&[4, 16, 64, 256, 1024]))),
            ["--host-sizes 4MiB,16MiB,64MiB,256MiB,1GiB (leaves out 256MiB sustained)"]
        );
        assert_eq!(
            n(with(|c| c.host_sizes = sizes(&[256]))),
            ["--host-sizes 256MiB (leaves out 4MiB,16MiB,64MiB)"]
        );
        assert_eq!(n(with(|c| c.queue_depths = Some(vec![32, 16]))), NONE);
        assert_eq!(
            n(with(|c| c.queue_depths = Some(vec![32]))),
            ["--queue-depths 32 (leaves out 16)"]
        );
        assert_eq!(
            n(with(|c| c.nvme_sizes = Some(hwc_plan::NVME_SIZES.to_vec()))),
            NONE
        );
        assert_eq!(
            n(with(|c| c.nvme_sizes = Some(vec![MIB, 8 * MIB]))),
            ["--nvme-sizes 1MiB,8MiB (leaves out 4KiB,16KiB,64KiB,128KiB,256KiB,512KiB,2MiB,4MiB)"]
        );
    }

    #[test]
    fn the_options_a_run_records_say_what_narrowed_it() {
        let topo = Topology::default();
        let reads = |read: Option<&[&str]>| LeftOutDrives {
            read: read.map(|v| v.iter().map(|s| s.to_string()).collect()),
            written: None,
        };
        let full = with(|c| {
            c.allow_contended = true;
            c.quick = true;
            c.nvme_bytes = Some(1 << 30);
            c.nvme_long_tests =
                Some(hwc_model::long_tests::parse_long_tests("read-cache").unwrap());
            c.nvme_idle_max_s = Some(1.0);
        });
        assert_eq!(narrowed_by(&full, &topo, &reads(None)), NONE);
        let h2d = with(|c| c.paths = Some(vec![PathId::H2d]));
        assert_eq!(narrowed_by(&h2d, &topo, &reads(None)), ["--paths h2d"]);
        // Every drive named (as a full run with writes must): not narrowed, when the run
        // recorded that it left none out.
        let drives = with(|c| {
            c.drives = Some(vec!["nvme0".into(), "nvme1".into()]);
            c.allow_destructive_writes = true;
        });
        assert_eq!(narrowed_by(&drives, &topo, &reads(Some(&[]))), NONE);
        assert_eq!(
            narrowed_by(&drives, &topo, &reads(Some(&["nvme2"]))),
            ["--drives nvme0,nvme1 (leaves out nvme2)"]
        );
        assert_eq!(
            narrowed_by(&drives, &topo, &reads(None)),
            ["--drives nvme0,nvme1"]
        );
        // Writes to some drives while every drive is read: complete, and the options say
        // which drives were not written.
        let writes = with(|c| {
            c.allow_destructive_writes = true;
            c.write_drives = Some(vec!["nvme1".into()]);
        });
        assert_eq!(narrowed_by(&writes, &topo, &reads(None)), NONE);
        let left_out = LeftOutDrives {
            read: None,
            written: Some(vec!["nvme0".into(), "nvme2".into()]),
        };
        let o = options_map(&writes, &topo, &left_out);
        assert_eq!(o["write_drives"], "nvme1");
        assert_eq!(o["write_drives_left_out"], "nvme0,nvme2");
        assert!(!o.contains_key("drives_left_out"));
        let sweeps = with(|c| {
            c.target = Some("/scratch/f".into());
            c.threads = Some(vec![4]);
            c.host_sizes = Some(vec![4 * MIB]);
            c.nvme_sizes = Some(vec![MIB]);
            c.queue_depths = Some(vec![64]);
        });
        assert_eq!(
            narrowed_by(&sweeps, &topo, &reads(None)),
            // No NUMA node known here: no host-RAM case a list could leave out.
            [
                "--target /scratch/f",
                "--nvme-sizes 1MiB (leaves out 4KiB,16KiB,64KiB,128KiB,256KiB,512KiB,2MiB,4MiB,8MiB)",
                "--queue-depths 64 (leaves out 16,32)"
            ]
        );
    }
}
