//! A pure parser of what `spdk_nvme_perf` (SPDK v25.09, `app/spdk_nvme_perf/perf.c`) prints: its
//! results table, one line per namespace and a `Total` line.
//!
//! The table, from `print_performance`, is (over PCIe):
//!
//! ```text
//! ========================================================
//!                                                                                        Latency(us)
//! Device Information                                  :       IOPS      MiB/s    Average        min        max
//! PCIE (0000:11:00.0) [1b36:0010] NSID 1 from core  0:   35154.00    4394.25     454.09      55.90   21743.29
//! ========================================================
//! Total                                               :   35154.00    4394.25     454.09      55.90   21743.29
//! ```
//!
//! Over TCP a namespace is named `TCP (addr:127.0.0.1 subnqn:nqn.2016-06.io.spdk:cnode1) NSID 1`;
//! names are padded to the longest, and there is one line per namespace and core.
//!
//! The output is split into lines on both `\n` and `\r` (on a terminal perf joins its per-second
//! `IOPS, MiB/s` progress lines, and the first `=====` banner, with bare `\r`), and terminal
//! escapes (`ESC[2K`, which perf prints after `-a` warm-up) are removed. What else perf prints is
//! ignored on purpose:
//!
//! - before the header row: `Initializing NVMe Controllers`, `Attached to …`, `Associating …`,
//!   `Initialization complete…`, warnings (`WARNING: Some requested NVMe devices were skipped`,
//!   `WARNING: IO size … is not a multiple of …`), the progress lines (`[warmup]` ones too), the
//!   transport statistics of `--transport-stats`, SPDK's own log lines on stderr, the `=====`
//!   banner and the `Latency(us)` caption;
//! - inside the table: the `=====` line before `Total`, and any line without ` from core ` (a
//!   stderr line that landed there when both streams share one file);
//! - after `Total`: `-L`'s `Summary latency data for …` percentiles, `-LL`'s `Latency histogram
//!   for …` buckets, and `-l`'s `Read/Write Latency Statistics` pages.
//!
//! Perf leaves out namespaces that completed no I/O, and prints no `Total` line at all when none
//! did, which is also what a run that could not attach any controller looks like: it then exits 0,
//! so the missing `Total` line, not the exit code, tells the failure.

use std::borrow::Cow;

/// The results of one `spdk_nvme_perf` run: its per-namespace lines and its `Total` line.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfOutput {
    /// The per-namespace lines, in the order perf printed them.
    pub namespaces: Vec<NamespaceLine>,
    /// The figures of the `Total` line.
    pub total: Totals,
}

/// One per-namespace line of the results table (one namespace driven from one core).
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceLine {
    /// The transport as printed: `PCIE`, `TCP`, `RDMA`, `VFIOUSER` or `CUSTOM`.
    pub transport: String,
    /// The text between the parentheses as printed: a PCI address (`0000:11:00.0`) for PCIe, or
    /// `addr:127.0.0.1 subnqn:nqn.2016-06.io.spdk:cnode1` for TCP and RDMA.
    pub address: String,
    /// The PCI vendor and device id (`1b36:0010`) when perf printed one (PCIe only).
    pub id: Option<String>,
    /// The namespace id (`NSID n`).
    pub nsid: u32,
    /// The core that drove this namespace (`from core c`).
    pub core: u32,
    /// The line's figures.
    pub stats: Totals,
}

/// The five figures of a results line, in perf's columns' order.
#[derive(Debug, Clone, PartialEq)]
pub struct Totals {
    /// I/O operations completed per second (`IOPS`).
    pub iops: f64,
    /// Throughput in MiB/s (2^20 bytes per second), as perf prints it (`MiB/s`).
    pub mib_per_s: f64,
    /// Mean latency in µs (`Average`).
    pub avg_latency_us: f64,
    /// Lowest latency in µs (`min`).
    pub min_latency_us: f64,
    /// Highest latency in µs (`max`).
    pub max_latency_us: f64,
}

/// Why `spdk_nvme_perf`'s output could not be read as one run's results.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// No `Total` line: perf completed no I/O or attached no controller.
    #[error(
        "spdk_nvme_perf printed no Total line: it completed no I/O, or could not attach any \
         controller (it exits 0 even then; its error messages are on stderr)"
    )]
    NoTotal,
    /// A `Total` line came before any `Device Information` header row.
    #[error(
        "spdk_nvme_perf's Total line (line {line}) comes without the results table's \
         `Device Information` header row before it"
    )]
    TotalWithoutHeader {
        /// The `Total` line's line number (1-based, counting `\n`).
        line: usize,
    },
    /// The output holds a second results table (two runs' outputs joined).
    #[error(
        "spdk_nvme_perf's output holds more than one results table (lines {first} and {second}): \
         give the parser one run's output"
    )]
    SeveralTables {
        /// The line of the first table's `Total` line or header row.
        first: usize,
        /// The line where the second table begins.
        second: usize,
    },
    /// The header row names other columns than SPDK v25.09's.
    #[error(
        "spdk_nvme_perf's results header (line {line}) names the columns `{found}`, not \
         `IOPS MiB/s Average min max` as SPDK v25.09 prints them"
    )]
    UnexpectedColumns {
        /// The header row's line number.
        line: usize,
        /// The column names found.
        found: String,
    },
    /// A results line has other than five figures.
    #[error(
        "spdk_nvme_perf's {row} (line {line}) has {found} figures where 5 were expected \
         (IOPS, MiB/s, average, min and max latency)"
    )]
    FigureCount {
        /// The line number.
        line: usize,
        /// Which line: `Total line` or `line for <device>`.
        row: String,
        /// How many figures it has.
        found: usize,
    },
    /// A figure is not a number.
    #[error(
        "spdk_nvme_perf's {row} (line {line}) has `{text}` for {column}, which is not a number"
    )]
    NotANumber {
        /// The line number.
        line: usize,
        /// Which line: `Total line` or `line for <device>`.
        row: String,
        /// The column: `IOPS`, `MiB/s`, `average latency`, `min latency` or `max latency`.
        column: &'static str,
        /// The figure as printed.
        text: String,
    },
    /// A figure is infinite or not a number (`inf`, `nan`).
    #[error("spdk_nvme_perf's {row} (line {line}) has `{text}` for {column}, which is not finite")]
    NotFinite {
        /// The line number.
        line: usize,
        /// Which line: `Total line` or `line for <device>`.
        row: String,
        /// The column: `IOPS`, `MiB/s`, `average latency`, `min latency` or `max latency`.
        column: &'static str,
        /// The figure as printed.
        text: String,
    },
    /// A figure is below zero.
    #[error("spdk_nvme_perf's {row} (line {line}) has {text} for {column}, which is negative")]
    Negative {
        /// The line number.
        line: usize,
        /// Which line: `Total line` or `line for <device>`.
        row: String,
        /// The column: `IOPS`, `MiB/s`, `average latency`, `min latency` or `max latency`.
        column: &'static str,
        /// The figure as printed.
        text: String,
    },
    /// A line of the table names a core (` from core `) but is not a namespace line perf prints.
    #[error("spdk_nvme_perf's results line {line} is not a namespace line ({why}): `{text}`")]
    BadNamespaceLine {
        /// The line number.
        line: usize,
        /// What is wrong with it.
        why: &'static str,
        /// The line's text.
        text: String,
    },
    /// A line is for a file or block device driven through AIO or io_uring, not for NVMe.
    #[error(
        "spdk_nvme_perf's results line {line} is for `{name}`, a file or block device (AIO or \
         io_uring) rather than an NVMe namespace, which this parser does not read"
    )]
    NotAnNvmeNamespace {
        /// The line number.
        line: usize,
        /// The device name as printed (the path perf was given).
        name: String,
    },
    /// A `Total` line with no namespace line above it.
    #[error(
        "spdk_nvme_perf printed a Total line (line {line}) but no per-namespace line above it"
    )]
    NoNamespaceLines {
        /// The `Total` line's line number.
        line: usize,
    },
    /// The per-namespace MiB/s do not add up to the `Total` line's.
    #[error(
        "spdk_nvme_perf's per-namespace MiB/s add up to {sum:.2}, but its Total line says \
         {total:.2} MiB/s: {percent_apart:.2} % apart, more than the 1 % allowed"
    )]
    SumMismatch {
        /// The sum of the per-namespace lines' MiB/s.
        sum: f64,
        /// The `Total` line's MiB/s.
        total: f64,
        /// How far apart they are, in % of the total.
        percent_apart: f64,
    },
}

/// Reads one `spdk_nvme_perf` run's output (stdout, or stdout and stderr together) into its
/// per-namespace lines and `Total` line, or says why it cannot.
pub fn parse(output: &str) -> Result<PerfOutput, ParseError> {
    let mut header: Option<usize> = None;
    let mut total: Option<(usize, Totals)> = None;
    let mut namespaces = Vec::new();

    for (index, physical) in output.split('\n').enumerate() {
        let line = index + 1;
        for segment in physical.split('\r') {
            let cleaned = strip_escapes(segment);
            let text = cleaned.trim_end();

            if let Some(figures) = total_figures(text) {
                if let Some((first, _)) = total {
                    return Err(ParseError::SeveralTables {
                        first,
                        second: line,
                    });
                }
                if header.is_none() {
                    return Err(ParseError::TotalWithoutHeader { line });
                }
                total = Some((line, parse_figures(figures, line, "Total line")?));
                continue;
            }
            if let Some(columns) = header_columns(text) {
                if let Some(first) = header {
                    return Err(ParseError::SeveralTables {
                        first,
                        second: line,
                    });
                }
                let found: Vec<&str> = columns.split_whitespace().collect();
                if found != ["IOPS", "MiB/s", "Average", "min", "max"] {
                    return Err(ParseError::UnexpectedColumns {
                        line,
                        found: found.join(" "),
                    });
                }
                header = Some(line);
                continue;
            }
            if header.is_none() || total.is_some() {
                // Before the table or after it: progress, warnings, logs, latency summaries.
                continue;
            }
            if text.contains(" from core ") {
                namespaces.push(parse_namespace_line(text, line)?);
            }
        }
    }

    let (total_line, total) = total.ok_or(ParseError::NoTotal)?;
    if namespaces.is_empty() {
        return Err(ParseError::NoNamespaceLines { line: total_line });
    }
    check_sum(&namespaces, &total)?;
    Ok(PerfOutput { namespaces, total })
}

/// Converts perf's MiB/s into the spec's GB/s (10^9 bytes per second): MiB/s × 1.048576 / 1000.
pub fn gbps_from_mib_per_s(mib_per_s: f64) -> f64 {
    mib_per_s * 1.048576 / 1000.0
}

/// Names of the five columns, for error messages.
const COLUMNS: [&str; 5] = [
    "IOPS",
    "MiB/s",
    "average latency",
    "min latency",
    "max latency",
];

/// Removes terminal control sequences (`ESC [ … final`), and any other lone `ESC`.
fn strip_escapes(segment: &str) -> Cow<'_, str> {
    if !segment.contains('\x1b') {
        return Cow::Borrowed(segment);
    }
    let mut out = String::with_capacity(segment.len());
    let mut chars = segment.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'[') {
            chars.next();
            // Parameters and intermediates, up to the final byte in '@'..='~'.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    Cow::Owned(out)
}

/// The figures after `Total …:`, if `text` is the `Total` line.
fn total_figures(text: &str) -> Option<&str> {
    text.strip_prefix("Total")?.trim_start().strip_prefix(':')
}

/// The column names after `Device Information …:`, if `text` is the header row.
fn header_columns(text: &str) -> Option<&str> {
    text.strip_prefix("Device Information")?
        .trim_start()
        .strip_prefix(':')
}

/// Parses the five figures of a results line: numbers, finite and not negative.
fn parse_figures(figures: &str, line: usize, row: &str) -> Result<Totals, ParseError> {
    let texts: Vec<&str> = figures.split_whitespace().collect();
    if texts.len() != COLUMNS.len() {
        return Err(ParseError::FigureCount {
            line,
            row: row.to_string(),
            found: texts.len(),
        });
    }
    let mut values = [0.0_f64; 5];
    for ((value, text), column) in values.iter_mut().zip(&texts).zip(COLUMNS) {
        let parsed: f64 = text.parse().map_err(|_| ParseError::NotANumber {
            line,
            row: row.to_string(),
            column,
            text: text.to_string(),
        })?;
        if !parsed.is_finite() {
            return Err(ParseError::NotFinite {
                line,
                row: row.to_string(),
                column,
                text: text.to_string(),
            });
        }
        if parsed < 0.0 {
            return Err(ParseError::Negative {
                line,
                row: row.to_string(),
                column,
                text: text.to_string(),
            });
        }
        *value = parsed;
    }
    let [iops, mib_per_s, avg_latency_us, min_latency_us, max_latency_us] = values;
    Ok(Totals {
        iops,
        mib_per_s,
        avg_latency_us,
        min_latency_us,
        max_latency_us,
    })
}

/// Parses `<TRANSPORT> (<address>)[ [vid:did]] NSID <n><pad> from core <c>: <5 figures>`.
fn parse_namespace_line(text: &str, line: usize) -> Result<NamespaceLine, ParseError> {
    let bad = |why: &'static str| ParseError::BadNamespaceLine {
        line,
        why,
        text: text.to_string(),
    };
    let (name, after) = text
        .rsplit_once(" from core ")
        .ok_or_else(|| bad("no ` from core `"))?;
    let (core, figures) = after
        .split_once(':')
        .ok_or_else(|| bad("no `:` after the core number"))?;
    let core: u32 = core
        .trim()
        .parse()
        .map_err(|_| bad("the core is not a whole number"))?;
    let name = name.trim();

    let Some((device, nsid)) = name.rsplit_once(" NSID ") else {
        if !name.contains(" (") {
            return Err(ParseError::NotAnNvmeNamespace {
                line,
                name: name.to_string(),
            });
        }
        return Err(bad("no `NSID n` after the device"));
    };
    let nsid: u32 = nsid
        .parse()
        .map_err(|_| bad("the NSID is not a whole number"))?;

    let (device, id) = match device.strip_suffix(']').and_then(|d| d.rsplit_once(" [")) {
        Some((device, id)) => (device, Some(id.to_string())),
        None => (device, None),
    };
    let (transport, address) = device
        .strip_suffix(')')
        .and_then(|d| d.split_once(" ("))
        .ok_or_else(|| bad("the device is not `TRANSPORT (address)`"))?;
    let transport_ok = !transport.is_empty()
        && transport
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if !transport_ok {
        return Err(bad(
            "the transport is not an upper-case name such as PCIE or TCP",
        ));
    }
    if address.is_empty() {
        return Err(bad("the address between the parentheses is empty"));
    }

    let stats = parse_figures(figures, line, &format!("line for {name}"))?;
    Ok(NamespaceLine {
        transport: transport.to_string(),
        address: address.to_string(),
        id,
        nsid,
        core,
        stats,
    })
}

/// Refuses per-namespace MiB/s whose sum is more than 1 % from the `Total` line's.
///
/// Each printed figure is rounded to 0.01, so a difference of up to 0.005 per figure (the
/// namespaces' and the total's) is allowed as well; it matters only below about 1 MiB/s.
fn check_sum(namespaces: &[NamespaceLine], total: &Totals) -> Result<(), ParseError> {
    let sum: f64 = namespaces.iter().map(|n| n.stats.mib_per_s).sum();
    let apart = (sum - total.mib_per_s).abs();
    let rounding = 0.005 * (namespaces.len() + 1) as f64;
    if apart <= (0.01 * total.mib_per_s).max(rounding) {
        return Ok(());
    }
    let percent_apart = if total.mib_per_s > 0.0 {
        apart / total.mib_per_s * 100.0
    } else {
        f64::INFINITY
    };
    Err(ParseError::SumMismatch {
        sum,
        total: total.mib_per_s,
        percent_apart,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const READ: &str = include_str!("../tests/data/tcp-read-1ns-q16-128k.txt");
    const READ_STDOUT: &str = include_str!("../tests/data/tcp-read-1ns-q16-128k.stdout");
    const WRITE: &str = include_str!("../tests/data/tcp-write-1ns-q16-128k.txt");
    const TWO_NS: &str = include_str!("../tests/data/tcp-read-2ns-1subsys-q16-128k.txt");
    const THREE_NS: &str = include_str!("../tests/data/tcp-read-3ns-2subsys-q16-128k.txt");
    const P2: &str = include_str!("../tests/data/tcp-read-1ns-P2-q16-128k.txt");
    const LL: &str = include_str!("../tests/data/tcp-read-1ns-q16-128k-LL.txt");
    const TTY: &str = include_str!("../tests/data/tcp-read-1ns-q16-128k-tty.txt");
    const WARMUP_TTY: &str = include_str!("../tests/data/tcp-read-1ns-q16-128k-warmup2-tty.txt");
    const FAIL_SUBNQN: &str = include_str!("../tests/data/tcp-read-fail-wrong-subnqn.txt");
    const FAIL_SUBNQN_STDOUT: &str =
        include_str!("../tests/data/tcp-read-fail-wrong-subnqn.stdout");
    const FAIL_PORT: &str = include_str!("../tests/data/tcp-read-fail-wrong-port.txt");

    const CNODE1: &str = "addr:127.0.0.1 subnqn:nqn.2016-06.io.spdk:cnode1";
    const CNODE2: &str = "addr:127.0.0.1 subnqn:nqn.2016-06.io.spdk:cnode2";

    /// The PCIe line captured in the QEMU VM (shared SPDK README), real output.
    const PCIE_LINE: &str = "PCIE (0000:11:00.0) [1b36:0010] NSID 1 from core  0:   35154.00    4394.25     454.09      55.90   21743.29";

    fn totals(iops: f64, mib: f64, avg: f64, min: f64, max: f64) -> Totals {
        Totals {
            iops,
            mib_per_s: mib,
            avg_latency_us: avg,
            min_latency_us: min,
            max_latency_us: max,
        }
    }

    fn tcp(address: &str, nsid: u32, stats: Totals) -> NamespaceLine {
        NamespaceLine {
            transport: "TCP".to_string(),
            address: address.to_string(),
            id: None,
            nsid,
            core: 1,
            stats,
        }
    }

    /// A results table as perf lays it out, around hand-made namespace lines and Total figures.
    fn table(names_and_figures: &[(&str, &str)], total: &str) -> String {
        let width = names_and_figures
            .iter()
            .map(|(name, _)| name.len())
            .max()
            .unwrap_or(0);
        let mut out = String::from("Initializing NVMe Controllers\n");
        out.push_str("========================================================\n");
        out.push_str(&format!("{:>w$}\n", "Latency(us)", w = width + 60));
        out.push_str(&format!(
            "{:<w$}: {:>10} {:>10} {:>10} {:>10} {:>10}\n",
            "Device Information",
            "IOPS",
            "MiB/s",
            "Average",
            "min",
            "max",
            w = width + 13
        ));
        for (name, figures) in names_and_figures {
            out.push_str(&format!("{name:<width$} from core  0: {figures}\n"));
        }
        out.push_str("========================================================\n");
        out.push_str(&format!("{:<w$}: {total}\n\n", "Total", w = width + 13));
        out
    }

    const NVME0: &str = "PCIE (0000:11:00.0) [1b36:0010] NSID 1";
    const GOOD: &str = "  100.00     100.00     10.00      1.00     20.00";

    #[test]
    fn piped_read_capture() {
        let out = parse(READ).unwrap();
        assert_eq!(
            out.namespaces,
            vec![tcp(
                CNODE1,
                1,
                totals(12943.61, 1617.95, 1235.82, 229.46, 199965.32)
            )]
        );
        assert_eq!(
            out.total,
            totals(12943.61, 1617.95, 1235.82, 229.46, 199965.32)
        );
        // The stdout alone (stderr was empty) reads the same.
        assert_eq!(parse(READ_STDOUT).unwrap(), out);
    }

    #[test]
    fn piped_write_capture() {
        let out = parse(WRITE).unwrap();
        assert_eq!(
            out.namespaces,
            vec![tcp(
                CNODE1,
                1,
                totals(12755.66, 1594.46, 1253.93, 169.63, 164429.46)
            )]
        );
        assert_eq!(
            out.total,
            totals(12755.66, 1594.46, 1253.93, 169.63, 164429.46)
        );
    }

    #[test]
    fn two_namespaces_of_one_subsystem() {
        let out = parse(TWO_NS).unwrap();
        assert_eq!(
            out.namespaces,
            vec![
                tcp(
                    CNODE2,
                    1,
                    totals(10839.33, 1354.92, 1475.96, 316.90, 80323.15)
                ),
                tcp(
                    CNODE2,
                    2,
                    totals(9714.00, 1214.25, 1644.99, 421.16, 80317.27)
                ),
            ]
        );
        assert_eq!(
            out.total,
            totals(20553.33, 2569.17, 1555.85, 316.90, 80323.15)
        );
    }

    #[test]
    fn three_namespaces_of_two_subsystems() {
        let out = parse(THREE_NS).unwrap();
        assert_eq!(
            out.namespaces,
            vec![
                tcp(
                    CNODE1,
                    1,
                    totals(15376.00, 1922.00, 1040.58, 294.89, 70530.86)
                ),
                tcp(
                    CNODE2,
                    1,
                    totals(15232.67, 1904.08, 1049.72, 403.04, 70367.88)
                ),
                tcp(
                    CNODE2,
                    2,
                    totals(14274.33, 1784.29, 1119.70, 511.09, 70140.28)
                ),
            ]
        );
        assert_eq!(
            out.total,
            totals(44883.00, 5610.38, 1068.85, 294.89, 70530.86)
        );
    }

    /// Real PCIe output: two drives bound to vfio-pci by `hwceiling bind` in the VM, each
    /// driven from its own core, and a write run.
    #[test]
    fn pcie_captures_from_the_vm() {
        let pcie = |addr: &str, core: u32, stats: Totals| NamespaceLine {
            transport: "PCIE".into(),
            address: addr.into(),
            id: Some("1b36:0010".into()),
            nsid: 1,
            core,
            stats,
        };
        let out = parse(include_str!(
            "../tests/data/vm-pcie-read-2drives-q16-128k.stdout"
        ))
        .unwrap();
        assert_eq!(
            out.namespaces,
            vec![
                pcie(
                    "0000:11:00.0",
                    0,
                    totals(10975.00, 1371.88, 1455.97, 99.76, 43384.25)
                ),
                pcie(
                    "0000:21:00.0",
                    1,
                    totals(11674.67, 1459.33, 1370.32, 63.78, 26748.44)
                ),
            ]
        );
        assert_eq!(
            out.total,
            totals(22649.67, 2831.21, 1411.82, 63.78, 43384.25)
        );
        let out = parse(include_str!(
            "../tests/data/vm-pcie-write-1drive-q16-128k.stdout"
        ))
        .unwrap();
        assert_eq!(
            out.namespaces,
            vec![pcie(
                "0000:21:00.0",
                0,
                totals(39371.67, 4921.46, 405.90, 73.41, 8832.35)
            )]
        );
        assert_eq!(out.total, totals(39371.67, 4921.46, 405.90, 73.41, 8832.35));
    }

    /// Captures of one namespace: the line and the Total carry the same figures.
    #[test]
    fn one_namespace_captures() {
        // -LL's "Summary latency data for … from core 1:" lines name a core too, after Total.
        assert!(LL.contains("Summary latency data for TCP"));
        assert!(LL.contains("Latency histogram for TCP"));
        // On a terminal the progress lines and the first banner share one '\n' line, joined
        // by '\r'; with -a, warm-up lines and an erase escape come too.
        assert!(TTY.contains(
            "    11961 IOPS,  1495.12 MiB/s\r    13062 IOPS,  1632.75 MiB/s\r    12481 IOPS,  \
             1560.12 MiB/s\r=====",
        ));
        assert!(WARMUP_TTY.contains("[warmup]") && WARMUP_TTY.contains("\x1b[2K"));
        for (name, text, figures) in [
            // -P 2: two qpairs, still one line per namespace.
            ("P2", P2, totals(31967.67, 3995.96, 501.70, 81.90, 20108.97)),
            (
                "LL",
                LL,
                totals(34484.33, 4310.54, 463.89, 173.66, 56088.09),
            ),
            (
                "tty",
                TTY,
                totals(12506.63, 1563.33, 1279.06, 236.58, 116361.46),
            ),
            (
                "warmup tty",
                WARMUP_TTY,
                totals(12814.00, 1601.75, 1305.11, 234.14, 181589.91),
            ),
        ] {
            let out = parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                out.namespaces,
                vec![tcp(CNODE1, 1, figures.clone())],
                "{name}"
            );
            assert_eq!(out.total, figures, "{name}");
        }
    }

    #[test]
    fn failed_runs_have_no_total_line() {
        assert_eq!(parse(FAIL_SUBNQN), Err(ParseError::NoTotal));
        assert_eq!(parse(FAIL_SUBNQN_STDOUT), Err(ParseError::NoTotal));
        assert_eq!(parse(FAIL_PORT), Err(ParseError::NoTotal));
        assert_eq!(
            ParseError::NoTotal.to_string().split(':').next(),
            Some("spdk_nvme_perf printed no Total line")
        );
    }

    #[test]
    fn pcie_line_from_the_vm() {
        let expected = NamespaceLine {
            transport: "PCIE".to_string(),
            address: "0000:11:00.0".to_string(),
            id: Some("1b36:0010".to_string()),
            nsid: 1,
            core: 0,
            stats: totals(35154.00, 4394.25, 454.09, 55.90, 21743.29),
        };
        assert_eq!(parse_namespace_line(PCIE_LINE, 1).unwrap(), expected);

        // In a table as perf lays it out (the Total line here is built, not captured).
        let (name, figures) = PCIE_LINE.split_once(" from core  0: ").unwrap();
        let out = parse(&table(&[(name, figures)], figures)).unwrap();
        assert_eq!(out.namespaces, vec![expected]);
        assert_eq!(
            out.total,
            totals(35154.00, 4394.25, 454.09, 55.90, 21743.29)
        );
    }

    #[test]
    fn other_transports_as_spdk_names_them() {
        let rdma = parse_namespace_line(
            "RDMA (addr:192.168.100.8 subnqn:nqn.2016-06.io.spdk:cnode1) NSID 3 from core 12:  \
             1.00 2.00 3.00 4.00 5.00",
            1,
        )
        .unwrap();
        assert_eq!(rdma.transport, "RDMA");
        assert_eq!(
            rdma.address,
            "addr:192.168.100.8 subnqn:nqn.2016-06.io.spdk:cnode1"
        );
        assert_eq!((rdma.id, rdma.nsid, rdma.core), (None, 3, 12));

        let vfio = parse_namespace_line(
            "VFIOUSER (/var/run/vfio-user) NSID 1 from core  2: 1.00 2.00 3.00 4.00 5.00",
            1,
        )
        .unwrap();
        assert_eq!(vfio.transport, "VFIOUSER");
        assert_eq!(vfio.address, "/var/run/vfio-user");
    }

    #[test]
    fn warnings_before_the_table_are_ignored() {
        let input = format!(
            "WARNING: Some requested NVMe devices were skipped\n{}",
            table(&[(NVME0, GOOD)], GOOD)
        );
        assert_eq!(parse(&input).unwrap().namespaces.len(), 1);
    }

    #[test]
    fn never_panics_on_cut_or_mangled_captures() {
        for capture in [READ, TWO_NS, THREE_NS, LL, TTY, WARMUP_TTY, FAIL_PORT] {
            let cuts = (0..capture.len()).filter(|&i| capture.is_char_boundary(i));
            for cut in cuts.step_by(7) {
                let _ = parse(&capture[..cut]);
                let _ = parse(&capture[cut..]);
            }
            let _ = parse(&capture.replace(' ', ""));
            let _ = parse(&capture.replace(':', " "));
        }
    }

    #[test]
    fn gbps_conversion() {
        let gbps = gbps_from_mib_per_s(4394.25);
        assert!((gbps - 4.607_705_088).abs() < 1e-12, "{gbps}");
        assert_eq!(gbps_from_mib_per_s(1000.0), 1.048576);
        assert_eq!(gbps_from_mib_per_s(0.0), 0.0);
    }

    #[test]
    fn refuses_output_without_total() {
        let mut input = table(&[(NVME0, GOOD)], GOOD);
        input.truncate(input.find("Total").unwrap());
        assert_eq!(parse(&input), Err(ParseError::NoTotal));
        assert_eq!(parse(""), Err(ParseError::NoTotal));
    }

    #[test]
    fn refuses_total_with_non_numbers() {
        let input = table(
            &[(NVME0, GOOD)],
            "  100.00     fast     10.00      1.00     20.00",
        );
        let err = parse(&input).unwrap_err();
        assert_eq!(
            err,
            ParseError::NotANumber {
                line: 7,
                row: "Total line".to_string(),
                column: "MiB/s",
                text: "fast".to_string(),
            }
        );
        assert!(err.to_string().contains("`fast` for MiB/s"), "{err}");

        let short = table(&[(NVME0, GOOD)], "  100.00     100.00");
        assert!(matches!(
            parse(&short),
            Err(ParseError::FigureCount { found: 2, .. })
        ));
    }

    #[test]
    fn refuses_negative_figures() {
        let input = table(
            &[(NVME0, GOOD)],
            "  100.00     100.00     -10.00      1.00     20.00",
        );
        assert!(matches!(
            parse(&input),
            Err(ParseError::Negative {
                column: "average latency",
                ..
            })
        ));
        let in_namespace = table(
            &[(NVME0, "  -100.00     100.00     10.00      1.00     20.00")],
            GOOD,
        );
        let err = parse(&in_namespace).unwrap_err();
        assert!(
            matches!(&err, ParseError::Negative { column: "IOPS", row, .. } if row.contains(NVME0)),
            "{err:?}"
        );
    }

    #[test]
    fn refuses_non_finite_figures() {
        for bad in ["inf", "-nan", "nan", "infinity"] {
            let input = table(
                &[(NVME0, GOOD)],
                &format!("  100.00     100.00     10.00      1.00     {bad}"),
            );
            assert!(
                matches!(
                    parse(&input),
                    Err(ParseError::NotFinite {
                        column: "max latency",
                        ..
                    })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn refuses_namespace_sum_off_total() {
        let a = "  100.00     100.00     10.00      1.00     20.00";
        let b = "  100.00      50.00     10.00      1.00     20.00";
        let names = [(NVME0, a), ("PCIE (0000:12:00.0) [1b36:0010] NSID 1", b)];
        // 150 vs 152: 1.3 % apart.
        let input = table(&names, "  200.00     152.00     10.00      1.00     20.00");
        let err = parse(&input).unwrap_err();
        match &err {
            ParseError::SumMismatch {
                sum,
                total,
                percent_apart,
            } => {
                assert_eq!((*sum, *total), (150.0, 152.0));
                assert!((percent_apart - 1.315_789).abs() < 1e-5);
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("add up to 150.00"), "{err}");
        assert!(err.to_string().contains("says 152.00 MiB/s"), "{err}");
        // 150 vs 151: 0.66 % apart, within the 1 %.
        let near = table(&names, "  200.00     151.00     10.00      1.00     20.00");
        assert!(parse(&near).is_ok());
    }

    #[test]
    fn refuses_total_without_namespace_lines_or_header() {
        let no_lines = table(&[], GOOD);
        assert!(matches!(
            parse(&no_lines),
            Err(ParseError::NoNamespaceLines { .. })
        ));
        let no_header = format!("Total : {GOOD}\n");
        assert_eq!(
            parse(&no_header),
            Err(ParseError::TotalWithoutHeader { line: 1 })
        );
    }

    #[test]
    fn refuses_two_runs_joined() {
        let joined = format!("{READ}{WRITE}");
        assert!(matches!(
            parse(&joined),
            Err(ParseError::SeveralTables { .. })
        ));
    }

    #[test]
    fn refuses_unknown_columns_and_lines() {
        let other_columns = table(&[(NVME0, GOOD)], GOOD).replace("Average", "Mean");
        assert!(matches!(
            parse(&other_columns),
            Err(ParseError::UnexpectedColumns { .. })
        ));
        let aio = table(&[("/dev/nvme0n1", GOOD)], GOOD);
        assert_eq!(
            parse(&aio),
            Err(ParseError::NotAnNvmeNamespace {
                line: 5,
                name: "/dev/nvme0n1".to_string()
            })
        );
        let no_nsid = table(&[("PCIE (0000:11:00.0) [1b36:0010]", GOOD)], GOOD);
        assert!(matches!(
            parse(&no_nsid),
            Err(ParseError::BadNamespaceLine { .. })
        ));
        let lower_case = table(&[("tcp (addr:1.2.3.4 subnqn:x) NSID 1", GOOD)], GOOD);
        assert!(matches!(
            parse(&lower_case),
            Err(ParseError::BadNamespaceLine { .. })
        ));
    }
}
