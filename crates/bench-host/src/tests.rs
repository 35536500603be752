use super::*;
use hwc_model::topology::{NumaNode, Platform};
use hwc_model::Reps;
use hwc_runner::{run_case, CaseOutcome, RunOptions};

fn this_machine() -> Topology {
    // One node with the CPUs this test may run on; enough for a real copy.
    let cpus = hwc_numa::current_affinity();
    Topology {
        platform: Platform {
            numa_nodes: 1,
            numa: vec![NumaNode {
                id: 0,
                cpus: cpus.clone(),
                memory_only: false,
                memory_bytes: None,
                distances: vec![],
            }],
            ..Platform::default()
        },
        ..Topology::default()
    }
}

/// A case of `size` bytes on `threads` threads of node 0 for `engine` ([`MEMCPY`] or
/// [`STREAMING`]).
fn case_of(engine: EngineId, size: u64, threads: u32) -> Case {
    Case::new(
        PathId::HostRam,
        engine,
        format!("n0-n0/{size}/t{threads}"),
        Spec::HostCopy(HostCopySpec {
            size_bytes: size,
            threads,
            cpu_node: 0,
            src_node: 0,
            dst_node: 0,
        }),
        Reps {
            warmup: 1,
            timed: 3,
            retry_above_spread_pct: None,
            steady: None,
        },
    )
}

fn case(size: u64, threads: u32) -> Case {
    case_of(MEMCPY, size, threads)
}

/// The engine of `c` on `topo` (its `/proc` at `proc_root`).
fn engine_for(c: &Case, topo: &Topology, proc_root: &Path) -> HostEngine {
    let (memcpy, streaming) = engines(topo, proc_root);
    if c.engine == STREAMING {
        streaming
    } else {
        memcpy
    }
}

/// `c` run by its host engine on [`this_machine`], as the runner runs a case.
fn run_here(c: &Case) -> CaseOutcome {
    let mut e = engine_for(c, &this_machine(), Path::new("/proc"));
    run_case(c, &mut e, &RunOptions::default(), &AtomicBool::new(false))
}

/// A `memcpy` of `size` bytes by one thread on `cpu`, with no NUMA node asked for and not
/// cache-resident; it takes the buffers kept in `home` when they fit and leaves its own there.
#[track_caller]
fn memcpy_on(cpu: u32, size: usize, home: &RefCell<Option<Buffers>>) -> PreparedCopy<'_> {
    memcpy_in(cpu, (size, size), home)
}

/// As [`memcpy_on`], its buffers made `capacity` bytes where new ones are made.
#[track_caller]
fn memcpy_in(
    cpu: u32,
    (size, capacity): (usize, usize),
    home: &RefCell<Option<Buffers>>,
) -> PreparedCopy<'_> {
    PreparedCopy::new(
        (size, capacity),
        &[cpu],
        CopyKernel::Memcpy,
        None,
        None,
        false,
        Path::new("/proc"),
        home.borrow_mut(),
    )
    .unwrap()
}

#[test]
fn pinning_order_spreads_over_physical_cores_first() {
    let all: Vec<LogicalCpu> = (0..8)
        .map(|id| LogicalCpu {
            id,
            package: Some(0),
            core: Some(id % 4),
            node: Some(0),
        })
        .collect();
    assert_eq!(
        pinning_order(&[0, 1, 2, 3, 4, 5, 6, 7], &all),
        vec![0, 1, 2, 3, 4, 5, 6, 7]
    );
    // Siblings adjacent (0,1 share a core): cores first.
    let all: Vec<LogicalCpu> = (0..4)
        .map(|id| LogicalCpu {
            id,
            package: Some(0),
            core: Some(id / 2),
            node: Some(0),
        })
        .collect();
    assert_eq!(pinning_order(&[3, 2, 1, 0], &all), vec![0, 2, 1, 3]);
    // Unknown cores: id order.
    assert_eq!(pinning_order(&[5, 4], &[]), vec![4, 5]);
}

#[test]
fn split_covers_the_buffer_exactly() {
    for (size, n) in [(4 << 20, 3), (4096, 4), (10_000, 2), (1 << 20, 16)] {
        let parts = split(size, n);
        assert_eq!(parts.len(), n);
        let mut next = 0;
        for (off, len) in parts {
            assert_eq!(off, next.min(size));
            next = off + len;
        }
        assert_eq!(next, size);
    }
}

#[test]
fn a_real_copy_is_measured_verified_and_placed() {
    let threads = hwc_numa::current_affinity().len().min(2) as u32;
    let out = run_here(&case(8 << 20, threads));
    let CaseOutcome::Measured(r) = out else {
        panic!("not measured: {out:?}")
    };
    let m = &r.measurement;
    assert_eq!(m.bytes_per_rep, 8 << 20);
    assert_eq!(m.gbps.n, 3);
    assert!(m.gbps.median > 0.0 && m.cold_gbps.is_some());
    let p = m.placement.as_ref().unwrap();
    assert!(
        p.detail.contains("src") && p.detail.contains("dst"),
        "{}",
        p.detail
    );
    assert!(p.detail.contains("pinned and checked"), "{}", p.detail);
    // 8 MiB asks for huge pages: the note says how much of each buffer got them (where the
    // kernel has smaps, which every Linux does), in bytes no larger than the buffer.
    let huge = m
        .notes
        .iter()
        .find(|n| n.starts_with("buffers madvise(MADV_HUGEPAGE)"))
        .expect("a huge-page note");
    assert!(
        huge.contains("src ") && huge.contains(" of 8MiB, dst ") && huge.ends_with(" of 8MiB"),
        "{huge}"
    );
}

#[test]
fn too_many_threads_is_unavailable_not_a_crash() {
    let n = hwc_numa::current_affinity().len() as u32 + 1;
    let out = run_here(&case(1 << 20, n));
    assert!(
        matches!(out, CaseOutcome::Waived(ref w) if w.reason.contains("threads requested")),
        "{out:?}"
    );
}

#[test]
fn corrupted_copy_is_caught_by_verify() {
    let home = RefCell::new(None);
    let mut p = memcpy_on(hwc_numa::current_affinity()[0], 1 << 20, &home);
    p.run_once().unwrap();
    assert!(p.verify().is_ok());
    if let Some(b) = p.bufs.as_mut() {
        b.dst.as_mut_slice()[12345] ^= 0xff;
    }
    let e = p.verify().unwrap_err().to_string();
    assert!(e.contains("mismatch at byte 12345"), "{e}");
}

#[test]
fn buffers_kept_for_the_next_case_do_not_let_a_missing_copy_pass() {
    let cpu = hwc_numa::current_affinity()[0];
    let home = RefCell::new(None);
    // Made for the largest copy planned (2 MiB), used from their start by a smaller one (all
    // under the huge-page size: one kind of pages).
    let first_src = {
        let mut p = memcpy_in(cpu, (1 << 20, 2 << 20), &home);
        assert!(p.buffers().src.len() >= 2 << 20 && p.buffers().dst.len() >= 2 << 20);
        p.run_once().unwrap();
        assert!(p.verify().is_ok());
        p.buffers().src.as_ptr() as usize
    };
    // A copy that fits, of another size: the same buffers come back, with the last copy
    // cleared from dst.
    let mut again = memcpy_on(cpu, 2 << 20, &home);
    assert_eq!(again.buffers().src.as_ptr() as usize, first_src);
    let e = again.verify().unwrap_err().to_string();
    assert!(e.contains("mismatch at byte"), "{e}");
    // The check is a case's last step: its copy threads have ended, and a repetition after it
    // is an error, not a hang.
    let e = again.run_once().unwrap_err().to_string();
    assert!(e.contains("after the data check"), "{e}");
    drop(again);
    let mut again = memcpy_on(cpu, 2 << 20, &home);
    again.run_once().unwrap();
    assert!(again.verify().is_ok());
    drop(again);
    // A copy that does not fit, of the same pages: new buffers, a fresh pattern, and the check
    // still holds.
    let mut other = memcpy_on(cpu, 3 << 20, &home);
    assert!(other.buffers().src.len() >= 3 << 20);
    other.run_once().unwrap();
    assert!(other.verify().is_ok());
}

/// The engine makes a node pair's buffers once, for the largest copy it was told to expect,
/// and frees them after its last case.
#[test]
fn buffers_are_made_for_the_largest_expected_copy_and_freed_at_the_end() {
    let (small, large) = (case(4 << 20, 1), case(6 << 20, 1));
    let mut e = engine_for(&small, &this_machine(), Path::new("/proc"));
    e.expect(&[&small, &large]);
    let spare_len = |e: &HostEngine| e.state.borrow().spare.as_ref().map(|b| b.src.len());
    // The small copy first: its buffers are made for the large one.
    drop(e.prepare(&small).expect("prepare"));
    let made = spare_len(&e).expect("buffers kept");
    assert!(made >= 6 << 20, "{made}");
    drop(e.prepare(&large).expect("prepare"));
    assert_eq!(spare_len(&e), Some(made), "the same buffers, not new ones");
    e.finish();
    assert_eq!(spare_len(&e), None);
}

#[test]
fn the_streaming_kernel_is_measured_verified_and_named() {
    let threads = hwc_numa::current_affinity().len().min(2) as u32;
    let c = case_of(STREAMING, (8 << 20) + 4096 + 100, threads);
    let out = run_here(&c);
    let Some(isa) = Isa::detect() else {
        assert!(matches!(out, CaseOutcome::Waived(_)), "{out:?}");
        return;
    };
    let CaseOutcome::Measured(r) = out else {
        panic!("not measured: {out:?}")
    };
    let note = CopyKernel::Streaming(isa).to_string();
    assert!(
        r.measurement.notes.iter().any(|n| n.contains(&note)),
        "{:?}",
        r.measurement.notes
    );
    // A copy that wrote nothing, or the wrong bytes, fails verify: run_case verified it (every
    // block of the shared copy, the odd-sized last one too, was written).
    assert_eq!(r.measurement.gbps.n, 3);
    let block = shared_block((8 << 20) + 4096 + 100, threads as usize);
    let work = format!(
        "work: {} blocks taken in turn by the {threads} thread(s), not fixed slices",
        hwc_model::size_label(block as u64)
    );
    assert!(
        r.measurement.notes.contains(&work),
        "{:?}",
        r.measurement.notes
    );
}

#[test]
fn shared_blocks_are_whole_pages_about_sixteen_a_thread_within_bounds() {
    assert_eq!(shared_block(1 << 30, 16), 4 << 20);
    assert_eq!(shared_block(1 << 30, 1), 8 << 20);
    assert_eq!(shared_block(4 << 20, 16), 64 << 10);
    assert_eq!(shared_block(100 << 20, 3) % 4096, 0);
    assert_eq!(shared_block(0, 0), 64 << 10);
}

#[test]
fn a_shared_copy_covers_the_buffer_once_over_repetitions() {
    // Several threads taking blocks of a buffer that is not a whole number of blocks, over
    // three repetitions: a block skipped or cut short leaves the cleared destination's zeros,
    // which verify finds.
    let threads = hwc_numa::current_affinity().len().clamp(1, 4) as u32;
    let size = 3 * shared_block(3 << 20, threads as usize) + 12_345;
    let c = case_of(STREAMING, size as u64, threads);
    if Isa::detect().is_none() {
        return;
    }
    let out = run_here(&c);
    assert!(matches!(out, CaseOutcome::Measured(_)), "{out:?}");
}

#[test]
fn a_case_of_another_workload_fails_alone_with_what_it_was() {
    let mut c = case(1 << 20, 1);
    c.spec = Spec::Nvme(hwc_model::NvmeSpec {
        test: hwc_model::NvmeTest::Sweep,
        block_bytes: 4096,
        queue_depth: 1,
        drives: vec!["nvme9".into()],
        target: false,
        pattern: hwc_model::NvmePattern::Sequential,
    });
    let out = run_here(&c);
    let CaseOutcome::Failed(f) = out else {
        panic!("not failed: {out:?}")
    };
    assert_eq!(f.error, "a host copy engine was given a nvme case");
}

#[test]
fn the_two_engines_share_their_buffers() {
    let topo = this_machine();
    let (mut memcpy, mut streaming) = engines(&topo, "/proc");
    if Isa::detect().is_none() {
        return;
    }
    let first = {
        let p = memcpy.prepare(&case(1 << 20, 1)).unwrap();
        drop(p);
        memcpy.state.borrow().spare.as_ref().unwrap().src.as_ptr() as usize
    };
    drop(streaming.prepare(&case_of(STREAMING, 1 << 20, 1)).unwrap());
    let again = streaming
        .state
        .borrow()
        .spare
        .as_ref()
        .unwrap()
        .src
        .as_ptr() as usize;
    assert_eq!(
        first, again,
        "the streaming case took the memcpy case's buffers"
    );
}

#[test]
fn the_buffers_are_freed_when_the_last_engine_given_cases_finishes() {
    let topo = this_machine();
    let (mut memcpy, mut streaming) = engines(&topo, "/proc");
    let c = case(1 << 20, 1);
    memcpy.expect(&[&c]);
    streaming.expect(&[&case_of(STREAMING, 1 << 20, 1)]);
    drop(memcpy.prepare(&c).unwrap());
    let spare = |e: &HostEngine| e.state.borrow().spare.is_some();
    assert!(spare(&memcpy), "kept for the next case");
    memcpy.finish();
    assert!(
        spare(&streaming),
        "the streaming engine's cases may still reuse them"
    );
    streaming.finish();
    assert!(!spare(&memcpy), "freed once both have finished");
    // An engine given no cases does not hold them.
    let (mut only, mut idle) = engines(&topo, "/proc");
    only.expect(&[&c]);
    idle.expect(&[]);
    drop(only.prepare(&c).unwrap());
    only.finish();
    assert!(!spare(&only));
}

#[test]
fn the_page_wise_pattern_fill_is_the_byte_pattern() {
    for len in [0, 1, 4095, 4096, 4097, 3 * 4096 + 17, (1 << 20) + 5] {
        let mut buf = vec![0u8; len];
        fill_pattern(&mut buf);
        let want: Vec<u8> = (0..len).map(pattern_byte).collect();
        assert!(buf == want, "len {len}");
    }
    // Pages differ from each other (the `i >> 12` term), so a misplaced page fails verify.
    let mut buf = vec![0u8; 3 * 4096];
    fill_pattern(&mut buf);
    assert_ne!(buf[..4096], buf[4096..8192]);
}

#[test]
fn the_first_difference_is_found_in_any_piece_of_a_large_buffer() {
    let len = (PARALLEL_COMPARE_BYTES * 2) + 12_345;
    let a = vec![0x5Au8; len];
    let mut b = a.clone();
    assert_eq!(
        first_difference(&a, &b, &hwc_numa::current_affinity()),
        None
    );
    // The earliest of several differences, wherever the pieces split.
    for at in [0, 4095, PARALLEL_COMPARE_BYTES + 1, len - 1] {
        b[at] ^= 1;
        b[len - 1] ^= 0x80;
        assert_eq!(
            first_difference(&a, &b, &hwc_numa::current_affinity()),
            Some(at),
            "{at}"
        );
        b[at] ^= 1;
        b[len - 1] ^= 0x80;
    }
    // At and around the pieces' boundaries, on 3 threads whatever this machine has.
    let piece = len.div_ceil(3).next_multiple_of(4096);
    for at in [piece - 1, piece, piece + 1, 2 * piece - 1, 2 * piece] {
        b[at] ^= 1;
        b[len - 1] ^= 0x80;
        assert_eq!(first_difference_on(&a, &b, 3, &[]), Some(at), "{at}");
        b[at] ^= 1;
        b[len - 1] ^= 0x80;
    }
    assert_eq!(first_difference_on(&a, &b, 3, &[]), None);
    // Small buffers, on one thread.
    assert_eq!(first_difference(b"abcd", b"abxd", &[]), Some(2));
    assert_eq!(first_difference(b"abcd", b"abcd", &[]), None);
}

#[test]
fn a_destination_is_cleared_whole_on_several_threads() {
    // Larger than the parallel threshold and not a multiple of the pieces.
    let len = PARALLEL_COMPARE_BYTES + 3 * 4096 + 5;
    let mut buf = vec![0xa5u8; len];
    clear(&mut buf, &[0, 0, 0]);
    assert!(buf.iter().all(|&b| b == 0));
    let mut small = vec![1u8; 100];
    clear(&mut small, &[]);
    assert_eq!(small, vec![0u8; 100]);
}

#[test]
fn one_busy_cpu_outside_the_case_or_one_of_its_threads_kept_waiting_mark_it_contended() {
    use crate::idle::{busy_reason, Waits};
    // Jiffies over one 50 ms window (5 ticks per CPU): 16 CPUs, the case on CPUs 0–3, whose
    // own threads keep them busy.
    let window = |busy: &[(u32, u64)]| {
        let a: std::collections::BTreeMap<u32, (u64, u64)> = (0..16).map(|c| (c, (0, 0))).collect();
        let b = (0..16)
            .map(|c| {
                let ticks = if c < 4 {
                    5
                } else {
                    busy.iter().find(|(x, _)| *x == c).map_or(0, |(_, t)| *t)
                };
                (c, (ticks, 5))
            })
            .collect();
        (a, b)
    };
    let waited = |ms: u64| {
        Some(Waits {
            worst_ns: ms * 1_000_000,
            rep_seconds: 0.05,
        })
    };
    let case_cpus = [0, 1, 2, 3];
    let (a, b) = window(&[]);
    assert_eq!(busy_reason(&a, &b, &case_cpus, waited(0)), None);
    // A stray tick on one CPU (20 %): not contended.
    let (a, b) = window(&[(9, 1)]);
    assert_eq!(busy_reason(&a, &b, &case_cpus, waited(0)), None);
    // A process spinning on CPU 12, off the case's CPUs: contended, and the reason says where.
    let (a, b) = window(&[(12, 5)]);
    let why = busy_reason(&a, &b, &case_cpus, waited(0)).unwrap();
    assert!(
        why.starts_with("CPU 12 was 100 % busy while the case ran"),
        "{why}"
    );
    // Another task on one of the case's 16 CPUs: that CPU's thread waited half the time, and
    // the repetitions lasted as long as it did: contended, however many threads did not wait.
    let sixteen: Vec<u32> = (0..16).collect();
    let (a, b) = window(&[]);
    let why = busy_reason(&a, &b, &sixteen, waited(25)).unwrap();
    assert!(
        why.starts_with(
            "a thread of the case waited 50 % of its repetitions' time for its CPU (of 0-15)"
        ),
        "{why}"
    );
    // A thread kept off its CPU for 2 % of the time: not contended.
    assert_eq!(busy_reason(&a, &b, &sixteen, waited(1)), None);
    // Where the threads could not read their delay, /proc/stat still judges the others.
    assert_eq!(busy_reason(&a, &b, &case_cpus, None), None);
    let (a, b) = window(&[(7, 4)]);
    assert!(busy_reason(&a, &b, &case_cpus, None).is_some());
}

#[test]
fn the_memcpy_note_says_which_stores_each_threads_call_gets() {
    let t = 181 << 20;
    assert_eq!(
        memcpy_store_note(1 << 30, 4, t),
        "memcpy: each thread's call copies 256MiB, at or above glibc's non-temporal threshold of \
         181.0 MiB (ld.so --list-diagnostics): non-temporal stores"
    );
    assert!(memcpy_store_note(1 << 30, 8, t).contains("128MiB, under glibc's"));
    assert!(memcpy_store_note(1 << 30, 8, t).ends_with("stores through the cache"));
}

/// The kernel gives each thread its run-queue delay here (else the live scheduling tests say
/// so and stop).
fn has_schedstat() -> bool {
    let here = Path::new("/proc/thread-self/schedstat").exists();
    if !here {
        eprintln!("skipped: /proc/thread-self/schedstat is absent on this kernel");
    }
    here
}

/// A thread pinned to `cpu` that spins until the returned flag is set, then is joined.
fn hog(cpu: u32) -> (Arc<AtomicBool>, JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let h = std::thread::spawn(move || {
        hwc_numa::pin_current_thread(&[cpu]).unwrap();
        while !flag.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    (stop, h)
}

#[test]
fn a_busy_thread_on_the_copy_threads_cpu_is_seen_as_run_queue_delay_and_noted() {
    if !has_schedstat() {
        return;
    }
    let cpu = hwc_numa::current_affinity()[0];
    let (stop, h) = hog(cpu);
    let mut topo = this_machine();
    topo.platform.numa[0].cpus = vec![cpu];
    let mut b = engines(&topo, "/proc").0;
    let mut c = case(64 << 20, 1);
    c.reps.timed = 5;
    let out = run_case(&c, &mut b, &RunOptions::default(), &AtomicBool::new(false));
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    let CaseOutcome::Measured(r) = out else {
        panic!("not measured: {out:?}")
    };
    let ev = r.scheduling.as_ref().expect("scheduling evidence");
    assert_eq!(ev.reps.len(), 5);
    // The copy thread shared its CPU with a spinning thread for every repetition: it waited.
    let delays: Vec<Option<u64>> = ev
        .reps
        .iter()
        .map(|e| e.sched.threads[0].run_delay_ns)
        .collect();
    assert!(delays.iter().all(Option::is_some), "{delays:?}");
    assert!(
        delays.iter().any(|d| d.is_some_and(|d| d > 0)),
        "{delays:?}"
    );
    assert!(
        ev.reps.iter().any(|e| e.disturbed == Some(true)),
        "no repetition disturbed: {ev:?}"
    );
    let summary = r
        .measurement
        .evidence
        .scheduling
        .as_ref()
        .expect("a summary");
    assert!(
        summary.counts.is_some_and(|c| c.disturbed > 0),
        "{summary:?}"
    );
    let note = &summary.detail;
    assert!(note.contains("largest run-queue delay"), "{note}");
    // The statistic keeps every repetition.
    assert_eq!(r.samples_gbps.len(), 5);
}

#[test]
fn two_copy_threads_pinned_to_one_cpu_each_read_their_own_delay() {
    if !has_schedstat() {
        return;
    }
    let cpu = hwc_numa::current_affinity()[0];
    let home = RefCell::new(None);
    let mut p = PreparedCopy::new(
        (32 << 20, 32 << 20),
        &[cpu, cpu],
        CopyKernel::Memcpy,
        None,
        None,
        false,
        Path::new("/proc"),
        home.borrow_mut(),
    )
    .unwrap();
    // Per thread (0: the timing thread, 1: the worker), its delay in each repetition.
    let mut delays = [Vec::new(), Vec::new()];
    for _ in 0..4 {
        p.run_once().unwrap();
        let s = p.last_sched().expect("counters of the repetition");
        assert_eq!(s.threads.len(), 2);
        assert!(s.threads.iter().all(|t| t.cpu == cpu));
        assert!(s.threads[1].run_delay_ns.is_some() && s.threads[1].nivcsw.is_some());
        for (d, t) in delays.iter_mut().zip(&s.threads) {
            d.push(t.run_delay_ns.unwrap_or(0));
        }
    }
    p.verify().unwrap();
    // One CPU, two threads copying on it: each waits while the other runs, so each thread's own
    // counters show a delay. A worker that read another thread's counters (the process's idle
    // main thread, through `self` instead of `thread-self`) would show none.
    assert!(
        delays.iter().all(|d| d.iter().any(|&ns| ns > 0)),
        "{delays:?}"
    );
    assert!(
        p.sched_sources().unavailable.is_empty(),
        "{:?}",
        p.sched_sources()
    );
}

#[test]
fn without_the_counters_the_evidence_is_not_available_with_why_never_zero() {
    // A /proc with neither schedstat nor stat in it.
    let root = std::env::temp_dir().join(format!("hwc-noproc-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let mut b = engines(&this_machine(), &root).0;
    let out = run_case(
        &case(1 << 20, 1),
        &mut b,
        &RunOptions::default(),
        &AtomicBool::new(false),
    );
    std::fs::remove_dir_all(&root).unwrap();
    let CaseOutcome::Measured(r) = out else {
        panic!("not measured: {out:?}")
    };
    let ev = r
        .scheduling
        .as_ref()
        .expect("evidence, if only of what was missing");
    for e in &ev.reps {
        assert_eq!(e.disturbed, None);
        assert_eq!(e.sched.machine_steal_us, None);
        assert!(e
            .sched
            .threads
            .iter()
            .all(|t| t.run_delay_ns.is_none() && t.steal_us.is_none()));
    }
    let summary = r
        .measurement
        .evidence
        .scheduling
        .as_ref()
        .expect("a summary");
    assert_eq!(summary.counts, None, "nothing judged");
    let note = &summary.detail;
    assert!(
        note.starts_with("not available (run-queue delay not available: neither"),
        "{note}"
    );
    assert!(note.contains("steal not available: "), "{note}");
    assert!(!note.contains("repetitions disturbed"), "{note}");
}

#[test]
fn a_slot_left_empty_or_poisoned_takes_only_that_threads_evidence() {
    let filled = ThreadSched {
        cpu: 3,
        run_delay_ns: Some(1500),
        nivcsw: Some(2),
        steal_us: None,
    };
    let slots = vec![
        Mutex::new(Some(filled.clone())),
        Mutex::new(None),
        Mutex::new(Some(filled.clone())),
    ];
    // A thread that panicked while holding the third slot: what it left is still read.
    std::thread::scope(|s| {
        let _ = s
            .spawn(|| {
                let _g = slots[2].lock().unwrap();
                panic!("a worker panicking while holding its slot");
            })
            .join();
    });
    assert!(slots[2].is_poisoned());
    let why = Mutex::new(BTreeSet::new());
    let taken = take_slots(&slots, &[3, 5, 3], &why);
    assert_eq!(taken[0], filled);
    assert_eq!(
        taken[1],
        ThreadSched {
            cpu: 5,
            run_delay_ns: None,
            nivcsw: None,
            steal_us: None,
        }
    );
    assert_eq!(taken[2], filled);
    assert_eq!(
        why.into_inner().unwrap().into_iter().collect::<Vec<_>>(),
        vec!["the copy thread on CPU 5 left no counters for a repetition".to_string()]
    );
    // Taken: the slots are empty for the next repetition.
    assert!(slots.iter().all(|s| lock(s).is_none()));
}

#[test]
fn a_worker_that_panics_fails_the_wait_instead_of_hanging_it() {
    let gate = Gate::new(2);
    // A worker that counts itself done, and one that panics before it can.
    gate.done.fetch_add(1, Ordering::AcqRel);
    std::thread::scope(|s| {
        let _ = s
            .spawn(|| {
                let _unwinding = Unwinding(&gate);
                panic!("a copy thread panicking mid-copy");
            })
            .join();
    });
    let e = wait_for(&gate, &gate.done, 2).unwrap_err().to_string();
    assert!(e.contains("a copy thread panicked"), "{e}");
    // A thread that returns normally marks nothing.
    let calm = Gate::new(1);
    std::thread::scope(|s| {
        s.spawn(|| {
            let _unwinding = Unwinding(&calm);
        });
    });
    calm.done.fetch_add(1, Ordering::AcqRel);
    assert!(wait_for(&calm, &calm.done, 1).is_ok());
    assert!(!calm.panicked.load(Ordering::Acquire));
}
