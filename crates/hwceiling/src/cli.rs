//! Command-line interface.

use clap::{Args, Parser, Subcommand, ValueEnum};
use hwc_model::long_tests::LongTestRequest;
use hwc_model::PathId;
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
    Profile(ProfileArgs),
    /// Re-render the markdown report from a YAML profile.
    Report(ReportArgs),
    /// Serve the newest profile: ceilings, efficiency, Prometheus metrics, profile runs.
    Serve(crate::serve_cmd::ServeArgs),
    /// Measured / ceiling for one path, from a profile file or the daemon.
    Efficiency(crate::efficiency_cmd::EfficiencyArgs),
    /// Compare two profiles, or a fleet's; exit 1 on a regression.
    Compare(crate::compare_cmd::CompareArgs),
    /// Hold a profile to a bring-up spec; pass/fail, JUnit XML, exit 0/1.
    Qualify(crate::qualify_cmd::QualifyArgs),
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
    #[arg(long, short = 'o', value_name = "DIR", default_value = "profiling")]
    pub output_dir: PathBuf,
    /// Print the plan (every case and every waiver) and exit without measuring.
    #[arg(long)]
    pub dry_run: bool,
    /// Only these paths (comma-separated): nvme_read, nvme_write, h2d, d2h, duplex, d2d,
    /// gdrcopy, gds, host_ram, nvme_bar1.
    #[arg(long, value_delimiter = ',', value_name = "PATHS")]
    pub paths: Option<Vec<PathId>>,
    /// Host memcpy thread counts instead of the sweep (e.g. `1,8,16`).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub threads: Option<Vec<u32>>,
    /// Host memcpy sizes instead of 4,16,64,256 MiB (e.g. `256MiB,1GiB`).
    #[arg(long, value_delimiter = ',', value_name = "SIZE,...", value_parser = parse_size)]
    pub host_sizes: Option<Vec<u64>>,
    /// Fewer repetitions (a tenth, at least 5 timed): a quick look, not a ceiling to publish.
    #[arg(long)]
    pub quick: bool,
    /// Measure even when the CPUs or GPU are busy, marking every such figure contended.
    #[arg(long)]
    pub allow_contended: bool,
    /// NVMe drives to measure, comma-separated: serial, /dev/nvmeXnY, /dev/nvmeX or PCI
    /// address (default: every drive). The only drives writes may go to.
    #[arg(long, value_delimiter = ',', value_name = "DRIVE,...")]
    pub drives: Option<Vec<String>>,
    /// Run the NVMe write sweep (Path 2) on the drives named with --drives (or on --target),
    /// after the safety checks: DESTROYS THE DATA ON THEM.
    #[arg(long)]
    pub allow_destructive_writes: bool,
    /// Measure this file or block device instead of the NVMe drives; a path that does not exist
    /// is created, filled, and removed (its name at once).
    #[arg(long, value_name = "PATH")]
    pub target: Option<PathBuf>,
    /// NVMe block sizes instead of 4KiB,16KiB,…,8MiB (e.g. `128KiB,1MiB`).
    #[arg(long, value_delimiter = ',', value_name = "SIZE,...", value_parser = parse_size)]
    pub nvme_sizes: Option<Vec<u64>>,
    /// NVMe queue depths instead of 16,32.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub queue_depths: Option<Vec<u32>>,
    /// Bytes per drive per NVMe repetition (default 2GiB; a smaller device is read over again).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub nvme_bytes: Option<u64>,
    /// The spec's long drive tests, comma-separated: read-cache and power-states (reads; about
    /// 20 s and 9 min per drive), gc-settle (WRITES, DESTROYS THE DATA: only with
    /// --allow-destructive-writes and --drives; up to about 20 min per drive), or all.
    #[arg(long, value_name = "TEST,...", value_parser = hwc_model::long_tests::parse_long_tests)]
    pub nvme_long_tests: Option<LongTestRequest>,
    /// The power-state test's longest idle gap, seconds (default 60; gaps 0.01, 0.1, 0.5, 1, 2,
    /// 5, 10, 20, 30, 60 up to it).
    #[arg(long, value_name = "SECONDS", value_parser = parse_idle_max, requires = "nvme_long_tests")]
    pub nvme_idle_max_s: Option<f64>,
    /// The gc-settle test's sustained writes, seconds (default 600, at least 3).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(3..=86_400), requires = "nvme_long_tests")]
    pub nvme_gc_write_s: Option<u64>,
    /// The longest the gc-settle test waits for reads to settle after its writes, seconds
    /// (default 600).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(0..=86_400), requires = "nvme_long_tests")]
    pub nvme_gc_settle_max_s: Option<u64>,
    /// Plan for the machine whose sysfs/procfs snapshot is under DIR (only with --dry-run).
    #[arg(long, value_name = "DIR", requires = "dry_run")]
    pub fsroot: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A `hardware_profile_<date>.yaml` written by `hwceiling profile`.
    pub profile: PathBuf,
    /// Write the markdown here instead of standard output (never overwrites).
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

/// `4MiB`, `1GiB`, `512KiB`, `4096` (bytes), `2M`, `1G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (examples: 4MiB, 1GiB, 4096)"))?;
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "`{s}`: unknown unit `{unit}` (use KiB, MiB or GiB)"
            ))
        }
    };
    match n.checked_mul(mult) {
        Some(0) | None => Err(format!("`{s}` is not a usable size")),
        Some(v) => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("0").is_err());
        assert!(parse_size("4 TB").is_err());
        assert!(parse_size("lots").unwrap_err().contains("not a size"));
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn long_test_options_parse_and_refuse_bad_input() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(["hwceiling", "profile"].iter().chain(args.iter()))
                .map(|c| match c.command {
                    Command::Profile(p) => p,
                    _ => unreachable!(),
                })
                .map_err(|e| e.to_string())
        };
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
        assert_eq!(parse_idle_max("60"), Ok(60.0));
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
