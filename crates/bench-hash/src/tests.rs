use super::*;

/// Tests that need the C code say so and pass where the build has none.
fn skip_without_xxhash() -> bool {
    if available().is_err() {
        eprintln!(
            "SKIPPED: this build has no XXH3 code (xxhash.h was missing when it was built; \
             {INSTALL_HINT})"
        );
        return true;
    }
    false
}

#[test]
fn the_test_buffer_is_upstreams() {
    let b = test_buffer(4);
    // 2654435761 = 0x9E3779B1: the top byte of the first word is 0.
    assert_eq!(b[0], 0);
    assert_eq!(b.len(), 4);
}

#[test]
fn every_compiled_path_the_cpu_runs_hashes_as_the_scalar_path_and_the_test_vectors() {
    if skip_without_xxhash() {
        return;
    }
    let paths = runnable();
    assert!(paths.contains(&SimdPath::Scalar));
    for p in paths {
        check_path(p).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn a_path_the_cpu_or_the_build_lacks_is_refused_not_called() {
    for p in SimdPath::ALL {
        let h = Hasher::new(p, HashVariant::Xxh3_64);
        match (compiled().contains(&p), cpu_has(p)) {
            (true, true) => assert!(h.is_ok(), "{p}"),
            (false, _) => assert_eq!(h, Err(HashError::NotCompiled(p))),
            (true, false) => assert_eq!(h, Err(HashError::CpuLacks(p))),
        }
    }
}

#[test]
fn this_build_compiles_every_path_of_its_architecture() {
    if skip_without_xxhash() {
        return;
    }
    let want: Vec<SimdPath> = if cfg!(target_arch = "x86_64") {
        vec![
            SimdPath::Scalar,
            SimdPath::Sse2,
            SimdPath::Avx2,
            SimdPath::Avx512,
        ]
    } else if cfg!(target_arch = "aarch64") {
        vec![SimdPath::Scalar, SimdPath::Neon]
    } else {
        vec![SimdPath::Scalar]
    };
    assert_eq!(compiled(), want);
    assert!(xxhash_version().is_some_and(|v| v.starts_with("0.8")));
}

/// The paths this build runs here are those this CPU's flags (as /proc/cpuinfo lists them)
/// allow: the planner plans from the flags, the engine selects at run time, and they agree.
#[test]
fn the_paths_run_here_are_the_paths_the_cpu_flags_allow() {
    if skip_without_xxhash() {
        return;
    }
    let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") else {
        eprintln!("SKIPPED: no /proc/cpuinfo");
        return;
    };
    let flags: std::collections::BTreeSet<&str> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags") || l.starts_with("Features"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, f)| f.split_whitespace().collect())
        .unwrap_or_default();
    let allowed = SimdPath::allowed(&|f| flags.contains(f));
    assert_eq!(runnable(), allowed, "flags: {flags:?}");
}

/// A case of each thread's own block, page-aligned.
fn case(simd: SimdPath, variant: HashVariant, size_bytes: u64, threads: u32) -> Case {
    case_at(simd, variant, size_bytes, threads, Some(0))
}

/// A case of a working set (no offset: hashed in page-aligned slices).
fn set_case(simd: SimdPath, variant: HashVariant, size_bytes: u64, threads: u32) -> Case {
    case_at(simd, variant, size_bytes, threads, None)
}

fn case_at(
    simd: SimdPath,
    variant: HashVariant,
    size_bytes: u64,
    threads: u32,
    offset_bytes: Option<u32>,
) -> Case {
    let spec = Spec::Hash(HashSpec {
        variant,
        simd,
        size_bytes,
        threads,
        cpu_node: None,
        offset_bytes,
    });
    Case {
        key: format!("xxh3/xxh3/{simd:?}"),
        path: PathId::Xxh3,
        engine: ENGINE,
        cell: "test".into(),
        spec,
        reps: hwc_model::Reps {
            warmup: 0,
            timed: 1,
            retry_above_spread_pct: None,
            steady: None,
        },
    }
}

/// The engine on this machine's CPUs (node 0), with `llc_bytes` of last-level cache, and the
/// threads a case takes here (up to 2).
fn here(llc_bytes: Option<u64>) -> (HashEngine, u32) {
    let cpus = hwc_numa::current_affinity();
    let threads = cpus.len().min(2) as u32;
    (
        HashEngine::new(BTreeMap::from([(0, cpus)]), llc_bytes, "/proc"),
        threads,
    )
}

/// Every runnable path, both variants, hashes on the threads it was given and the hashes check
/// (no timing is judged: a benchmark is not a unit test).
#[test]
fn each_path_runs_and_verifies_its_blocks_on_every_thread() {
    if skip_without_xxhash() {
        return;
    }
    let (mut engine, threads) = here(Some(1 << 30));
    for simd in runnable() {
        for variant in HashVariant::ALL {
            let c = case(simd, variant, 4096, threads);
            let mut p = engine.prepare(&c).expect("prepare");
            assert!(p.cache_resident());
            // The first thread's rate set the repetition's length, within its bounds.
            let per_thread = p.bytes_per_rep() / u64::from(threads);
            assert_eq!(per_thread % 4096, 0);
            assert!(
                REP_BYTES_PER_THREAD.contains(&per_thread),
                "{simd} {variant}: {per_thread} bytes a thread a repetition"
            );
            p.run_once().expect("run");
            p.verify().expect("verify");
        }
    }
    // A working set is split among the threads, each slice hashed once a repetition, whatever
    // the cache: its case says so (no offset), even where the set would fit this 64 MiB cache.
    let mut large_cache = HashEngine::new(
        BTreeMap::from([(0, hwc_numa::current_affinity())]),
        Some(64 << 20),
        "/proc",
    );
    let c = set_case(SimdPath::Scalar, HashVariant::Xxh3_128, 4 << 20, threads);
    let mut p = large_cache.prepare(&c).expect("prepare");
    assert!(!p.cache_resident());
    // Slices this small: the whole set a repetition.
    assert_eq!(p.bytes_per_rep(), 4 << 20);
    p.run_once().expect("run");
    p.verify().expect("verify");
}

#[test]
fn a_working_set_is_hashed_in_parts_only_where_each_slice_is_large() {
    let slice = MEMORY_PART_MIN_SLICE_BYTES;
    let parts = MEMORY_PARTS as u64;
    assert_eq!(memory_parts(parts * slice, 1), MEMORY_PARTS);
    assert_eq!(memory_parts(parts * slice - 1, 1), 1);
    assert_eq!(memory_parts(parts * 16 * slice, 16), MEMORY_PARTS);
    assert_eq!(memory_parts(600 << 20, 16), 1);
    assert_eq!(memory_parts(600 << 20, 4), MEMORY_PARTS);
    assert_eq!(memory_parts(0, 0), 1);
}

/// A working set in parts: a part a repetition, the parts in turn from case to case (the next
/// case goes on where the last one stopped), every repetition checked against the scalar
/// hashes of what each thread hashed.
#[test]
fn a_working_sets_parts_take_turns_across_cases_and_each_is_checked() {
    if skip_without_xxhash() {
        return;
    }
    let cpu = hwc_numa::current_affinity()[0];
    let size = MEMORY_PARTS as u64 * MEMORY_PART_MIN_SLICE_BYTES;
    let mut set = WorkingSet::new(size, None).expect("a working set");
    let spec = |variant| HashSpec {
        variant,
        simd: SimdPath::Scalar,
        size_bytes: size,
        threads: 1,
        cpu_node: None,
        offset_bytes: None,
    };
    let start = |variant, set: &mut WorkingSet| {
        let proc_root = std::path::Path::new("/proc");
        Workers::start(&spec(variant), &[cpu], Some(set), false, proc_root).expect("start")
    };
    let mut a = start(HashVariant::Xxh3_64, &mut set);
    assert_eq!(a.bytes_per_rep, size / MEMORY_PARTS as u64);
    let mut hashed = Vec::new();
    for _ in 0..3 {
        a.run_once().expect("a repetition, checked");
        hashed.push(a.hashed_part);
    }
    drop(a);
    let mut b = start(HashVariant::Xxh3_128, &mut set);
    for _ in 0..3 {
        b.run_once().expect("a repetition, checked");
        hashed.push(b.hashed_part);
    }
    assert_eq!(hashed, [0, 1, 2, 3, 0, 1]);
    // A wrong reference hash is caught by the repetition itself.
    b.expected[b.cursor.load(std::sync::atomic::Ordering::Acquire)][0] ^= 1;
    let e = b.run_once().expect_err("a mismatch");
    assert!(e.to_string().contains("the scalar path"), "{e}");
}

/// A block starts where its case says, past a page boundary (each thread's start is checked by
/// the engine, which fails the case otherwise), and hashes alike; a case with an offset hashes
/// its own blocks where the last-level cache is unknown too.
#[test]
fn blocks_start_at_their_offset_past_a_page_boundary() {
    if skip_without_xxhash() {
        return;
    }
    let (mut engine, threads) = here(Some(1 << 30));
    let path = *runnable().last().expect("a path");
    for offset in [0, hwc_model::xxh3::XXHSUM_OFFSET_BYTES, 4095] {
        let c = case_at(path, HashVariant::Xxh3_64, 100 << 10, threads, Some(offset));
        let mut p = engine.prepare(&c).expect("prepare");
        p.run_once().expect("run");
        p.verify().expect("verify");
        let want = if offset == 0 {
            "page-aligned".to_string()
        } else {
            format!("starting {offset} bytes past a page boundary")
        };
        assert!(p.notes()[0].contains(&want), "{:?}", p.notes());
    }
    // Own blocks whatever the cache: where the last-level cache is unknown too.
    let (mut no_llc, _) = here(None);
    let c = case_at(path, HashVariant::Xxh3_64, 100 << 10, threads, Some(16));
    let mut p = no_llc.prepare(&c).expect("prepare");
    assert!(p.cache_resident());
    p.run_once().expect("run");
}

#[test]
fn a_repetition_lasts_about_rep_seconds_at_the_rate_measured_within_its_bounds() {
    let k100 = 100 << 10;
    // 10 GB/s: 4 ms is 40 MB, 391 calls of 100 KiB.
    assert_eq!(calls_per_rep(k100, 10e9), 391);
    // Slow: at least 16 MiB (164 calls); fast: at most 256 MiB (2621 calls).
    assert_eq!(calls_per_rep(k100, 1e9), 164);
    assert_eq!(calls_per_rep(k100, 1e12), 2621);
    // A block larger than the bound is still hashed once; a rate not measured takes the most.
    assert_eq!(calls_per_rep(512 << 20, 1e9), 1);
    assert_eq!(calls_per_rep(k100, f64::NAN), 2621);
    assert_eq!(calls_per_rep(k100, 0.0), 2621);
}

#[test]
fn a_case_of_more_threads_than_cpus_is_unavailable() {
    let mut engine = HashEngine::new(BTreeMap::from([(0, vec![0])]), None, "/proc");
    let c = case(SimdPath::Scalar, HashVariant::Xxh3_64, 4096, 2);
    if available().is_ok() {
        assert!(matches!(
            engine.prepare(&c).err(),
            Some(BenchError::Unavailable { .. })
        ));
    }
}

#[test]
fn a_case_records_where_its_threads_ran() {
    if skip_without_xxhash() {
        return;
    }
    let cpus = hwc_numa::current_affinity();
    let mut engine = HashEngine::new(BTreeMap::from([(0, cpus.clone())]), Some(1 << 20), "/proc");
    let c = case(SimdPath::Scalar, HashVariant::Xxh3_64, 4096, 1);
    let p = engine.prepare(&c).expect("prepare");
    let placed = p.placement().expect("a placement");
    assert_eq!(placed.cpus, Some(hwc_model::cpulist::format(&cpus[..1])));
    assert!(
        !placed.verified,
        "a thread's own block is first-touch, not checked"
    );
}

#[test]
fn a_hash_case_is_marked_contended_while_another_cpu_spins() {
    let cpus = hwc_numa::current_affinity();
    if cpus.len() < 2 {
        eprintln!("skipped: this machine lets the test use one CPU; the watch needs a second");
        return;
    }
    // The case's one thread on the first CPU, a process's worth of spinning on the second.
    let mut engine = HashEngine::new(BTreeMap::from([(0, cpus.clone())]), Some(1 << 20), "/proc");
    let c = case(SimdPath::Scalar, HashVariant::Xxh3_64, 4096, 1);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinner = {
        let (stop, cpu) = (stop.clone(), cpus[1]);
        std::thread::spawn(move || {
            let _ = hwc_numa::pin_current_thread(&[cpu]);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let mut p = engine.prepare(&c).expect("prepare");
    p.watch();
    for _ in 0..3 {
        p.run_once().expect("a repetition");
    }
    let why = p.busy_meanwhile();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spinner.join().unwrap();
    // Seen as the busy CPU outside the case, or, where the scheduler put other work (another
    // test's threads) on the case's own CPU, as its thread kept waiting there; the rule itself
    // is tested on fixed `/proc/stat` samples (`idle.rs`).
    let why = why.expect("a spinning CPU was not seen");
    assert!(
        (why.contains(&format!("CPU {} was", cpus[1])) && why.contains("busy while the case ran"))
            || why.contains("a thread of the case waited"),
        "{why}"
    );
}
