//! Command-line interface.

use clap::{Args, Parser, Subcommand, ValueEnum};
use hwc_model::long_tests::LongTestRequest;
use hwc_model::PathId;
use hwc_plan::input::{
    parse_host_threads, parse_nvme_bytes, parse_nvme_size, parse_queue_depth, parse_size,
};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "hwceiling",
    version,
    about = "Measure the raw bandwidth ceiling of every data path on a GPU + NVMe server"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Detect the machine (CPUs, NUMA, PCIe, GPUs, NVMe, tools) without measuring anything.
    Detect(DetectArgs),
    /// Detect, plan, measure and write the dated report, YAML profile and raw JSON.
    Profile(Box<ProfileArgs>),
    /// Re-render the markdown report from a YAML profile.
    Report(ReportArgs),
    /// Write a read-only profile with the NVMe write ceilings of an earlier write run of the
    /// same drives carried in, each marked with that run.
    Merge(crate::merge_cmd::MergeArgs),
    /// Serve the newest complete profile: ceilings, efficiency, Prometheus metrics, profile runs.
    Serve(crate::serve_cmd::ServeArgs),
    /// Measured / ceiling for one path, from a profile file or the daemon.
    Efficiency(crate::efficiency_cmd::EfficiencyArgs),
    /// List this build's engines: what each measures, what it needs, and whether it can run here.
    Engines(crate::engines_cmd::EnginesArgs),
    /// Compare two profiles, or a fleet's; exit 1 on a regression.
    Compare(crate::compare_cmd::CompareArgs),
    /// Hold a profile to a bring-up spec; pass/fail, JUnit XML, exit 0/1.
    Qualify(crate::qualify_cmd::QualifyArgs),
    /// Put back what a killed run changed on this system (drives bound to a userspace driver,
    /// hugepages, mounts), from its journal.
    Restore(crate::restore_cmd::RestoreArgs),
    /// Hand NVMe drives without data to a userspace driver (vfio-pci) for an SPDK job, with
    /// hugepages; put back when COMMAND (after --) ends, or by `hwceiling restore`.
    Bind(crate::bind_cmd::BindArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Yaml,
    Json,
}

#[derive(Args, Debug)]
pub struct DetectArgs {
    /// Read sysfs/procfs under this root instead of `/` (e.g. an extracted snapshot).
    #[arg(long, value_name = "DIR")]
    pub fsroot: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Args, Debug)]
pub struct ProfileArgs {
    /// Folder for the report, profile and raw JSON.
    #[arg(long, short = 'o', value_name = "DIR", default_value = DEFAULT_OUTPUT_DIR)]
    pub output_dir: PathBuf,
    /// Print the plan (every case and every waiver) and exit without measuring.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long, value_delimiter = ',', value_name = "PATHS", help = paths_help())]
    pub paths: Option<Vec<PathId>>,
    /// Only these engines (comma-separated ids, as `hwceiling engines` lists them), in place of
    /// those on by default; `null` measures the harness itself, never the hardware.
    #[arg(long, value_delimiter = ',', value_name = "ENGINE,...", value_parser = hwc_model::EngineId::parse)]
    pub engines: Option<Vec<hwc_model::EngineId>>,
    /// Host memcpy thread counts instead of the sweep (e.g. `1,8,16`; 1 to 4096; a count above
    /// a node's CPUs is waived for that node).
    #[arg(long, value_delimiter = ',', value_name = "N,...", value_parser = parse_host_threads)]
    pub threads: Option<Vec<u32>>,
    /// Host memcpy sizes instead of 4,16,64,256 MiB (e.g. `256MiB,1GiB`; a size whose buffers
    /// need more than half a node's memory is waived for that node).
    #[arg(long, value_delimiter = ',', value_name = "SIZE,...", value_parser = parse_size)]
    pub host_sizes: Option<Vec<u64>>,
    /// Fewer repetitions (a tenth, at least 5 timed): a quick look, not a ceiling to publish.
    #[arg(long)]
    pub quick: bool,
    /// Time every case its full count of repetitions instead of stopping each once its median
    /// is known within its limit (docs/usage.md, "Repetitions"): slower, for comparing against the default.
    #[arg(long)]
    pub fixed_reps: bool,
    /// Measure even when the CPUs or GPU are busy, marking every such figure contended.
    #[arg(long)]
    pub allow_contended: bool,
    /// NVMe drives to measure, comma-separated: serial, /dev/nvmeXnY, /dev/nvmeX or PCI
    /// address (default: every drive). Writes go to these, or to those of them --write-drives
    /// names.
    #[arg(long, value_delimiter = ',', value_name = "DRIVE,...")]
    pub drives: Option<Vec<String>>,
    /// Run the NVMe write sweep (Path 2) on the drives named with --write-drives or --drives
    /// (or on --target), after the safety checks: DESTROYS THE DATA ON THEM.
    #[arg(long)]
    pub allow_destructive_writes: bool,
    /// The NVMe drives writes go to (with --allow-destructive-writes; named as --drives, and
    /// among them when --drives is given), while reads cover --drives or, without it, every
    /// drive: a node whose boot drive is NVMe gets a complete profile with write ceilings.
    /// DESTROYS THE DATA ON THEM.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "DRIVE,...",
        requires = "allow_destructive_writes",
        conflicts_with = "target"
    )]
    pub write_drives: Option<Vec<String>>,
    /// Measure this file or block device instead of the NVMe drives; a path that does not exist
    /// is created, filled, and removed (its name at once). Refused in memory (tmpfs, a RAM disk)
    /// and, when missing, under /dev.
    #[arg(long, value_name = "PATH")]
    pub target: Option<PathBuf>,
    /// NVMe block sizes instead of 4KiB,16KiB,…,8MiB, and GDS's instead of 4MiB,8MiB,16MiB (e.g.
    /// `128KiB,1MiB`; multiples of 512 bytes up to 256MiB).
    #[arg(long, value_delimiter = ',', value_name = "SIZE,...", value_parser = parse_nvme_size)]
    pub nvme_sizes: Option<Vec<u64>>,
    /// NVMe queue depths instead of 16,32 (1 to 4096).
    #[arg(long, value_delimiter = ',', value_name = "N,...", value_parser = parse_queue_depth)]
    pub queue_depths: Option<Vec<u32>>,
    /// Bytes per drive per NVMe repetition (default 2GiB; at least 1MiB and the largest NVMe
    /// block size; a smaller device is read over again).
    #[arg(long, value_name = "SIZE", value_parser = parse_nvme_bytes)]
    pub nvme_bytes: Option<u64>,
    /// The spec's long drive tests, comma-separated: read-cache and power-states (reads; about
    /// 20 s and 9 min per drive), gc-settle (WRITES, DESTROYS THE DATA: only with
    /// --allow-destructive-writes and the drives named with --write-drives or --drives; up to
    /// about 20 min per drive), or all.
    #[arg(long, value_name = "TEST,...", value_parser = hwc_model::long_tests::parse_long_tests)]
    pub nvme_long_tests: Option<LongTestRequest>,
    /// The power-state test's longest idle gap, seconds (default 60; gaps 0.01, 0.1, 0.5, 1, 2,
    /// 5, 10, 20, 30, 60 up to it).
    #[arg(long, value_name = "SECONDS", value_parser = parse_idle_max, requires = "nvme_long_tests")]
    pub nvme_idle_max_s: Option<f64>,
    /// The gc-settle test's sustained writes, seconds (default 600, at least 3).
    #[arg(long, value_name = "SECONDS", value_parser = parse_gc_write_s, requires = "nvme_long_tests")]
    pub nvme_gc_write_s: Option<u64>,
    /// The longest the gc-settle test waits for reads to settle after its writes, seconds
    /// (default 600).
    #[arg(long, value_name = "SECONDS", value_parser = parse_gc_settle_max_s, requires = "nvme_long_tests")]
    pub nvme_gc_settle_max_s: Option<u64>,
    /// NVMe drives the SPDK engines may hand to vfio-pci for their cases (named as --drives;
    /// each refused unless nothing on it can be lost: not mounted, partitioned, held, signed or
    /// open). They are put back on their kernel driver when the SPDK cases end, or on any exit.
    /// Without --drives, the kernel engines measure these drives too.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "DRIVE,...",
        conflicts_with = "target"
    )]
    pub spdk_drives: Option<Vec<String>>,
    /// Where SPDK is built (spdk_nvme_perf in DIR/build/bin); default: deps/spdk-build/bin,
    /// deps/spdk/build/bin, then PATH.
    #[arg(long, value_name = "DIR")]
    pub spdk_dir: Option<PathBuf>,
    /// Leave the --spdk-drives on vfio-pci when the run ends, for a following SPDK job
    /// (`hwceiling restore` puts them back; until then every run refuses to start).
    #[arg(long, requires = "spdk_drives")]
    pub leave_bound: bool,
    /// NVMe DMA into BAR N of these PCI devices (`BDF/N`), beside GPU BAR1: a stand-in where no
    /// GPU BAR can be mapped. The BAR's memory is overwritten: only a prefetchable memory BAR of
    /// a device that no driver holds.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "BDF/N,...",
        requires = "spdk_drives"
    )]
    pub p2p_bar: Option<Vec<String>>,
    /// Plan for the machine whose sysfs/procfs snapshot is under DIR (only with --dry-run).
    #[arg(long, value_name = "DIR", requires = "dry_run")]
    pub fsroot: Option<PathBuf>,
    /// Once the files are written, write their paths as JSON to FILE (for a program that
    /// starts the run: `serve`).
    #[arg(long, value_name = "FILE", hide = true)]
    pub result_file: Option<PathBuf>,
    /// The whole run as JSON (`hwc_model::RunConfig`), in place of the run's flags (for a
    /// program that starts the run: `serve`).
    #[arg(long, value_name = "FILE", hide = true)]
    pub run_config: Option<PathBuf>,
}

/// Where `profile` writes without `--output-dir`.
pub const DEFAULT_OUTPUT_DIR: &str = "profiling";

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A `hardware_profile_<date>.yaml` written by `hwceiling profile`.
    pub profile: PathBuf,
    /// Write the markdown here instead of standard output (never overwrites), and its SVG
    /// charts, linked from it, into `<FILE without .md>-charts/` beside it.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Seconds for `--nvme-idle-max-s`: at least the shortest gap (0.01), at most a day.
pub fn parse_idle_max(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.01..=86_400.0).contains(&v) => Ok(v),
        Ok(_) => Err(format!(
            "`{s}`: the longest idle gap must be between 0.01 (the shortest gap) and 86400 s"
        )),
        Err(_) => Err(format!(
            "`{s}` is not a number of seconds (examples: 0.5, 60)"
        )),
    }
}

/// Seconds for `--nvme-gc-write-s`: 3 (enough writes for the drive to start collecting) to a day.
pub fn parse_gc_write_s(s: &str) -> Result<u64, String> {
    whole_seconds(s, 3, "the gc-settle test's writes")
}

/// Seconds for `--nvme-gc-settle-max-s`: 0 to a day.
pub fn parse_gc_settle_max_s(s: &str) -> Result<u64, String> {
    whole_seconds(s, 0, "the gc-settle test's wait for reads to settle")
}

/// Whole seconds from `min` to a day (86400); `what` names what lasts that long, in the user's
/// terms (clap's own range message, `1 is not in 3..=86400`, says neither).
fn whole_seconds(s: &str, min: u64, what: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(v) if (min..=86_400).contains(&v) => Ok(v),
        Ok(_) => Err(format!(
            "{what} must last from {min} to 86400 seconds (a day)"
        )),
        Err(_) => Err(format!(
            "`{s}` is not a whole number of seconds (examples: 60, 600)"
        )),
    }
}

impl ProfileArgs {
    /// The run these flags ask for.
    pub fn config(&self) -> hwc_model::RunConfig {
        hwc_model::RunConfig {
            output_dir: self.output_dir.clone(),
            paths: self.paths.clone(),
            engines: self.engines.clone(),
            threads: self.threads.clone(),
            host_sizes: self.host_sizes.clone(),
            quick: self.quick,
            fixed_reps: self.fixed_reps,
            allow_contended: self.allow_contended,
            drives: self.drives.clone(),
            allow_destructive_writes: self.allow_destructive_writes,
            write_drives: self.write_drives.clone(),
            target: self.target.clone(),
            nvme_sizes: self.nvme_sizes.clone(),
            queue_depths: self.queue_depths.clone(),
            nvme_bytes: self.nvme_bytes,
            nvme_long_tests: self.nvme_long_tests.clone(),
            nvme_idle_max_s: self.nvme_idle_max_s,
            nvme_gc_write_s: self.nvme_gc_write_s,
            nvme_gc_settle_max_s: self.nvme_gc_settle_max_s,
            spdk_drives: self.spdk_drives.clone(),
            spdk_dir: self.spdk_dir.clone(),
            leave_bound: self.leave_bound,
            p2p_bars: self.p2p_bar.clone(),
        }
    }

    /// What clap cannot check value by value ([`hwc_session::check`]: a value listed twice,
    /// `--nvme-bytes` against the block sizes, an engine this build lacks), and `--run-config`
    /// given with the flags it replaces. An error is a bad command line (exit 2), found before
    /// anything is detected, created or measured.
    pub fn validate(&self) -> Result<(), String> {
        if self.run_config.is_some() {
            let alone = hwc_model::RunConfig::new(DEFAULT_OUTPUT_DIR);
            if self.config() != alone || self.dry_run || self.fsroot.is_some() {
                return Err("--run-config holds the whole run: give no other run options".into());
            }
            return Ok(());
        }
        hwc_session::check(&self.config())
    }
}

/// `--paths`'s help: every path the model knows, so the list cannot drift from it.
fn paths_help() -> String {
    let names: Vec<&str> = PathId::ALL.iter().map(|p| p.as_str()).collect();
    format!("Only these paths (comma-separated): {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `profile` with these arguments, parsed and validated as `main` does.
    fn parse(args: &[&str]) -> Result<ProfileArgs, String> {
        let p = Cli::try_parse_from(["hwceiling", "profile"].iter().chain(args.iter()))
            .map(|c| match c.command {
                Command::Profile(p) => *p,
                _ => unreachable!(),
            })
            .map_err(|e| e.to_string())?;
        p.validate()?;
        Ok(p)
    }

    #[test]
    fn thread_counts_outside_1_to_4096_are_a_bad_command_line() {
        assert_eq!(
            parse(&["--threads", "1,4096"]).unwrap().threads,
            Some(vec![1, 4096])
        );
        for bad in ["0", "1,0", "4097", "1000000", "two"] {
            let e = parse(&["--threads", bad]).unwrap_err();
            assert!(e.contains("1 to 4096"), "{bad}: {e}");
        }
    }

    #[test]
    fn nvme_values_that_cannot_run_anywhere_are_a_bad_command_line() {
        let p = parse(&[
            "--queue-depths",
            "1,4096",
            "--nvme-sizes",
            "512,4KiB,256MiB",
        ])
        .unwrap();
        assert_eq!(p.queue_depths, Some(vec![1, 4096]));
        assert_eq!(p.nvme_sizes, Some(vec![512, 4096, 256 << 20]));
        for (flag, bad, needle) in [
            ("--queue-depths", "0", "from 1 to 4096"),
            ("--queue-depths", "100000", "from 1 to 4096"),
            ("--nvme-sizes", "1B", "multiple of 512 bytes"),
            ("--nvme-sizes", "4KiB,1000", "multiple of 512 bytes"),
            ("--nvme-sizes", "1GiB", "at most 256MiB"),
            ("--nvme-bytes", "4KiB", "at least 1MiB"),
        ] {
            let e = parse(&[flag, bad]).unwrap_err();
            assert!(e.contains(needle) && e.contains(flag), "{flag} {bad}: {e}");
        }
        // A repetition holds at least one I/O of the largest block size (8 MiB by default).
        let e = parse(&["--nvme-bytes", "4MiB"]).unwrap_err();
        assert!(
            e.contains("--nvme-bytes") && e.contains("one 8MiB block"),
            "{e}"
        );
        let e = parse(&["--nvme-bytes", "1MiB", "--nvme-sizes", "4KiB,2MiB"]).unwrap_err();
        assert!(e.contains("one 2MiB block"), "{e}");
        assert!(parse(&["--nvme-bytes", "1MiB", "--nvme-sizes", "4KiB,1MiB"]).is_ok());
        assert!(parse(&["--nvme-bytes", "8MiB"]).is_ok());
    }

    #[test]
    fn a_value_listed_twice_is_a_bad_command_line_naming_it() {
        for (args, needle) in [
            (
                ["--nvme-sizes", "1MiB,1MiB"],
                "--nvme-sizes lists 1MiB twice",
            ),
            (
                ["--nvme-sizes", "1MiB,1024KiB"],
                "--nvme-sizes lists 1MiB twice",
            ),
            (
                ["--queue-depths", "16,32,16"],
                "--queue-depths lists 16 twice",
            ),
            (
                ["--host-sizes", "4MiB,4MiB"],
                "--host-sizes lists 4MiB twice",
            ),
            (["--threads", "1,1"], "--threads lists 1 twice"),
            (["--paths", "h2d,host_ram,h2d"], "--paths lists h2d twice"),
            (
                ["--paths", "host_ram,host-ram"],
                "--paths lists host_ram twice",
            ),
            (["--drives", "x,y, x"], "--drives lists `x` twice"),
            (
                ["--engines", "io-uring,io-uring"],
                "--engines lists io-uring twice",
            ),
            (
                ["--engines", "spdk-nvme"],
                "--engines: no engine `spdk-nvme` in this build (its engines: host-memcpy,",
            ),
            (
                ["--spdk-drives", "nvme1,nvme1"],
                "--spdk-drives lists `nvme1` twice",
            ),
            (["--engines", "Host"], "`Host` is not an engine name"),
        ] {
            let e = parse(&args).unwrap_err();
            assert!(e.contains(needle), "{args:?}: {e}");
        }
        assert!(parse(&["--threads", "1,2", "--host-sizes", "4MiB,16MiB"]).is_ok());
    }

    #[test]
    fn write_drives_need_the_write_flag_and_no_target() {
        let p = parse(&["--allow-destructive-writes", "--write-drives", "S1,nvme2"]).unwrap();
        assert_eq!(p.write_drives.unwrap(), ["S1", "nvme2"]);
        assert!(p.drives.is_none(), "reads keep every drive");
        let e = parse(&["--allow-destructive-writes", "--write-drives", "x,y, x"]).unwrap_err();
        assert!(e.contains("--write-drives lists `x` twice"), "{e}");
        let e = parse(&["--write-drives", "S1"]).unwrap_err();
        assert!(e.contains("--allow-destructive-writes"), "{e}");
        let e = parse(&[
            "--allow-destructive-writes",
            "--write-drives",
            "S1",
            "--target",
            "/tmp/f",
        ])
        .unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
    }

    #[test]
    fn long_test_options_parse_and_refuse_bad_input() {
        let p = parse(&["--nvme-long-tests", "all", "--nvme-idle-max-s", "0.5"]).unwrap();
        assert_eq!(p.nvme_long_tests.unwrap().tests.len(), 3);
        assert_eq!(p.nvme_idle_max_s, Some(0.5));
        let e = parse(&["--nvme-long-tests", "read-cache,smart"]).unwrap_err();
        assert!(e.contains("unknown NVMe long test `smart`"), "{e}");
        let e = parse(&["--nvme-idle-max-s", "5"]).unwrap_err();
        assert!(
            e.contains("--nvme-long-tests"),
            "a knob without the tests: {e}"
        );
        let e = parse(&["--nvme-long-tests", "gc-settle", "--nvme-gc-write-s", "2"]).unwrap_err();
        assert!(e.contains("2"), "{e}");
        assert!(parse_idle_max("0.001").is_err());
        assert!(parse_idle_max("NaN").is_err());
        assert!(parse_idle_max("soon").unwrap_err().contains("not a number"));
        assert!(parse_size("4 TB").is_err());
        assert_eq!(parse_idle_max("60"), Ok(60.0));
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
