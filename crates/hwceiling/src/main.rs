//! `hwceiling`: measures the raw bandwidth ceiling of every data path on a GPU + NVMe server
//! and writes a dated markdown report, a YAML ceiling profile and a raw JSON record.
//!
//! Data flows one way: detect → plan → run → render. This binary owns the command line,
//! progress, signals and exit codes; a run is `hwc_session`'s, everything else lives in the
//! library crates.
//!
//! Nothing here prints with `println!`/`eprintln!`, which panic when the write fails: output
//! goes through [`out`] (a closed pipe ends output quietly, another write error is one line and
//! exit 1).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use anyhow::Result;
use clap::Parser;
use out::say;

mod bind_cmd;
mod cli;
mod compare_cmd;
mod detect_cmd;
mod efficiency_cmd;
mod engines_cmd;
mod merge_cmd;
mod out;
mod profile_cmd;
mod progress;
mod qualify_cmd;
mod restore_cmd;
mod serve_cmd;
mod signals;

fn main() {
    // The cufile engine's check of libcufile's mode runs as a child of this program.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == hwc_engine_cufile::strict::ARG)
    {
        std::process::exit(hwc_engine_cufile::strict::child_main());
    }
    restore_on_panic();
    ignore_file_size_signal();
    let args = match cli::Cli::try_parse() {
        Ok(a) => a,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            bad_command_line(&no_subcommand())
        }
        Err(e) if e.use_stderr() => bad_command_line(&clap_one_line(&e)),
        // --help and --version, through `out`: a closed pipe is quiet, a full stdout is said.
        Err(e) => std::process::exit(match out::print(&e.render().to_string()) {
            Ok(()) => e.exit_code(),
            Err(err) => {
                say!("hwceiling: error: {err}");
                1
            }
        }),
    };
    if let cli::Command::Profile(p) = &args.command {
        if let Err(e) = p.validate() {
            bad_command_line(&e);
        }
    }
    if asks_for_queues(&args.command) {
        // SAFETY: no other thread exists yet (argument parsing spawns none) and CUDA is not
        // initialised before `run`; only a measuring command asks for more hardware queues.
        unsafe { hwc_bench_cuda::connections::configure() };
    }
    let code = match run(args) {
        Ok(code) => code,
        Err(e) => {
            say!("hwceiling: error: {}", one_line(&e));
            1
        }
    };
    std::process::exit(code);
}

/// A write past the file-size limit (`ulimit -f`) fails with EFBIG, which every write reports
/// (and whose temp file is removed), instead of SIGXFSZ killing the process mid-write and leaving
/// the temp file behind. Children this process starts (SPDK's perf, the cufile check) inherit
/// it across exec: in them too a write past the limit fails with EFBIG rather than killing.
fn ignore_file_size_signal() {
    // SAFETY: sets the disposition of one signal to SIG_IGN; no handler runs, and no other
    // thread exists yet.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
}

/// A panic restores the system changes this process made (drives bound to a userspace driver,
/// hugepages) before it reports. A panic in the thread making a change leaves that to the
/// journal's handle, which restores as the thread unwinds.
fn restore_on_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report_restore(hwc_safety::journal::try_restore_owned());
        default(info);
    }));
}

/// Say on stderr what restoring this process's system changes did, if it held any.
pub(crate) fn report_restore(
    r: Option<Result<Vec<hwc_safety::journal::Restored>, hwc_safety::JournalError>>,
) {
    match r {
        None => {}
        Some(Ok(restored)) => {
            for x in restored.iter().filter(|x| x.acted) {
                say!("hwceiling: restored: {x}");
            }
        }
        Some(Err(e)) => say!("hwceiling: error: {e}"),
    }
}

fn run(args: cli::Cli) -> Result<i32> {
    match args.command {
        cli::Command::Detect(a) => detect_cmd::run(&a),
        cli::Command::Profile(a) => profile_cmd::run(&a),
        cli::Command::Report(a) => profile_cmd::report(&a),
        cli::Command::Merge(a) => merge_cmd::run(&a),
        cli::Command::Serve(a) => serve_cmd::run(&a),
        cli::Command::Efficiency(a) => efficiency_cmd::run(&a),
        cli::Command::Engines(a) => engines_cmd::run(&a),
        cli::Command::Compare(a) => compare_cmd::run(&a),
        cli::Command::Qualify(a) => qualify_cmd::run(&a),
        cli::Command::Restore(a) => restore_cmd::run(&a),
        cli::Command::Bind(a) => bind_cmd::run(&a),
    }
}

/// Bad input: one line on stderr, exit 2 (clap's usage block is one `--help` away).
fn bad_command_line(msg: &str) -> ! {
    say!("hwceiling: {msg} (see `hwceiling --help`)");
    std::process::exit(2);
}

/// A clap error's message on one line, without its `error: ` prefix and usage block.
fn clap_one_line(e: &clap::Error) -> String {
    let msg = e.to_string();
    let lines: Vec<&str> = msg
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    lines.join(" ").trim_start_matches("error: ").to_string()
}

/// What bare `hwceiling` says: a subcommand is needed, and which there are.
fn no_subcommand() -> String {
    use clap::CommandFactory;
    let names: Vec<String> = cli::Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter(|n| n != "help")
        .collect();
    format!("a subcommand is required: {}", names.join(", "))
}

/// Only a command that measures GPUs chooses the CUDA driver's hardware queue count
/// (`hwc_bench_cuda::connections`); the daemon's profiles run as `hwceiling profile` children,
/// which choose for themselves.
fn asks_for_queues(command: &cli::Command) -> bool {
    matches!(command, cli::Command::Profile(_))
}

/// An error and its causes on one line, `outer: inner: root`. Our errors say a cause either in
/// their message or as their source, never both, so each is said once.
fn one_line(e: &anyhow::Error) -> String {
    e.chain()
        .map(|c| c.to_string().replace('\n', " "))
        .collect::<Vec<_>>()
        .join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(args: &[&str]) -> cli::Command {
        cli::Cli::try_parse_from(std::iter::once("hwceiling").chain(args.iter().copied()))
            .expect("valid arguments")
            .command
    }

    #[test]
    fn an_error_line_says_each_cause_once() {
        let io = || std::io::Error::from_raw_os_error(2);
        // An error that holds its cause in its message has no source.
        let open = hwc_numa::NumaError::Affinity {
            cpus: vec![3],
            cause: io(),
        };
        assert!(std::error::Error::source(&open).is_none());
        let e = anyhow::Error::new(open).context("pinning the thread");
        assert_eq!(
            one_line(&e),
            "pinning the thread: sched_setaffinity to CPUs [3] failed: No such file or directory (os error 2)"
        );
        let e = anyhow::Error::new(io()).context("cannot write p.yaml");
        assert_eq!(
            one_line(&e),
            "cannot write p.yaml: No such file or directory (os error 2)"
        );
    }

    #[test]
    fn no_subcommand_names_every_subcommand() {
        assert_eq!(
            no_subcommand(),
            "a subcommand is required: detect, profile, report, merge, serve, efficiency, engines, compare, qualify, restore, bind"
        );
        let e = cli::Cli::try_parse_from(["hwceiling"]).unwrap_err();
        assert_eq!(
            e.kind(),
            clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
    }

    #[test]
    fn only_profile_chooses_the_hardware_queue_count() {
        assert!(asks_for_queues(&command(&["profile", "--dry-run"])));
        assert!(!asks_for_queues(&command(&["serve"])));
        assert!(!asks_for_queues(&command(&["detect"])));
        assert!(!asks_for_queues(&command(&["report", "p.yaml"])));
    }
}
