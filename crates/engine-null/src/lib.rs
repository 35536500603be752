//! The null engine, as fio's: it moves no data. Each repetition is timed from the end of the one
//! before it (from preparation, for the first) to its own end, so its time is what the runner
//! itself spends per repetition — its bookkeeping, clocks, statistics and progress. That is a
//! real figure: the floor under every other engine's repetition, which no hardware figure can
//! beat. It measures every path's cells, so a run with `--engines null` drives a whole profile
//! (plan, runner, profile, report, compare, qualify, serve) without a device.
//!
//! Its figures are labelled as the null engine's everywhere, and its declaration says it does
//! not measure the hardware (`hardware: false`): no null figure becomes a ceiling.
//!
//! - `latency_us`: the harness's cost of one repetition, in µs;
//! - GB/s: the bytes the case's spec names per repetition (its transfer size) over that cost:
//!   the rate at which the harness alone would cap the case.

use hwc_model::{Case, CellKind, EngineDecl, EngineId, Needs, PathId, Spec};
use hwc_runner::{BenchError, Engine, Prepared, Rep};
use std::time::Instant;

/// The null engine's id.
pub const ENGINE: EngineId = EngineId::new("null");

/// Its declaration: every path's sweep and sustained cells, nothing needed, off by default, and
/// not a measurement of the hardware.
pub fn decl() -> EngineDecl {
    EngineDecl {
        id: ENGINE,
        title: "null engine: moves no data; times the harness's own cost per repetition".into(),
        paths: PathId::ALL.to_vec(),
        cells: vec![CellKind::Sweep, CellKind::Sustained],
        needs: Needs::default(),
        hardware: false,
        default_on: false,
    }
}

/// The bytes a case's spec names per repetition: its transfer size.
pub fn nominal_bytes(spec: &Spec) -> u64 {
    spec.size_bytes()
}

/// The engine: nothing to hold between cases.
#[derive(Debug, Default)]
pub struct NullEngine;

impl Engine for NullEngine {
    fn id(&self) -> EngineId {
        ENGINE
    }

    fn prepare<'a>(&'a mut self, case: &Case) -> Result<Box<dyn Prepared + 'a>, BenchError> {
        Ok(Box::new(NullCase {
            bytes: nominal_bytes(&case.spec),
            since: Instant::now(),
            last_seconds: None,
        }))
    }
}

/// One case: when the last repetition ended, and how long the last one took.
struct NullCase {
    bytes: u64,
    since: Instant,
    last_seconds: Option<f64>,
}

impl Prepared for NullCase {
    fn bytes_per_rep(&self) -> u64 {
        self.bytes
    }

    fn run_once(&mut self) -> Result<Rep, BenchError> {
        let now = Instant::now();
        let seconds = now.duration_since(self.since).as_secs_f64();
        self.since = now;
        if seconds <= 0.0 {
            // A clock that did not move between two repetitions measures nothing.
            return Err(BenchError::Failed(
                "the monotonic clock did not advance between two repetitions".into(),
            ));
        }
        self.last_seconds = Some(seconds);
        Ok(Rep {
            seconds,
            wall_seconds: None,
        })
    }

    fn verify(&mut self) -> Result<(), BenchError> {
        Ok(())
    }

    fn last_latency_us(&self) -> Option<f64> {
        self.last_seconds.map(|s| s * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hwc_model::{Reps, Topology};
    use std::sync::atomic::AtomicBool;

    #[test]
    fn it_is_declared_as_no_measurement_of_the_hardware_and_off_by_default() {
        let d = decl();
        assert!(!d.hardware && !d.default_on);
        assert_eq!(d.paths, PathId::ALL);
        assert_eq!(d.needs, Needs::default());
    }

    #[test]
    fn each_repetition_times_the_harness_between_repetitions() {
        let case = Case::new(
            PathId::HostRam,
            ENGINE,
            "n0-n0/4MiB/t1",
            Spec::HostCopy(hwc_model::HostCopySpec {
                size_bytes: 4 << 20,
                threads: 1,
                cpu_node: 0,
                src_node: 0,
                dst_node: 0,
            }),
            Reps {
                warmup: 2,
                timed: 20,
                retry_above_spread_pct: None,
                steady: None,
            },
        );
        let mut engines: Vec<Box<dyn Engine>> = vec![Box::new(NullEngine)];
        let out = hwc_runner::run(
            std::slice::from_ref(&case),
            &mut engines,
            &hwc_runner::RunOptions::default(),
            &mut hwc_runner::NoObserver,
            &AtomicBool::new(false),
        );
        assert!(out.failures.is_empty() && out.waived.is_empty(), "{out:?}");
        let r = &out.results[0];
        let m = &r.measurement;
        assert_eq!((m.engine.clone(), m.bytes_per_rep), (ENGINE, 4 << 20));
        assert_eq!(r.samples_gbps.len(), 20);
        assert!(r.samples_gbps.iter().all(|g| g.is_finite() && *g > 0.0));
        // The figure is the nominal bytes over the harness's cost: the latency says that cost.
        let us = m.latency_us.as_ref().expect("the cost of a repetition");
        assert!(us.median > 0.0 && us.max < 1e6, "{us:?} µs");
        assert_eq!(us.n, 20);
    }

    /// One NUMA node of four CPUs and nothing else: host RAM cells only.
    fn one_node() -> Topology {
        use hwc_model::topology::{LogicalCpu, NumaNode, Platform};
        let cpus: Vec<u32> = (0..4).collect();
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
                cpus: cpus
                    .iter()
                    .map(|&c| LogicalCpu {
                        id: c,
                        package: Some(0),
                        core: Some(c),
                        node: Some(0),
                    })
                    .collect(),
                ..Platform::default()
            },
            ..Topology::default()
        }
    }

    #[test]
    fn its_cases_are_planned_only_when_named_and_cover_the_path_matrix() {
        let topo = one_node();
        let status = |decl| hwc_model::EngineStatus {
            decl,
            available: Ok(()),
        };
        let mut opts = hwc_plan::PlanOptions {
            engines: vec![status(decl())],
            ..Default::default()
        };
        assert!(
            hwc_plan::plan(&topo, &opts).cases.is_empty(),
            "off by default"
        );
        opts.selected_engines = Some([ENGINE].into());
        let plan = hwc_plan::plan(&topo, &opts);
        assert!(plan.cases.iter().all(|c| c.engine == ENGINE));
        // The host RAM matrix: every size × thread count of the sweep, and the sustained cells.
        let host: Vec<&str> = plan
            .cases
            .iter()
            .filter(|c| c.path == PathId::HostRam)
            .map(|c| c.key.as_str())
            .collect();
        assert!(host.contains(&"host_ram/null/n0-n0/4MiB/t1"), "{host:?}");
        assert!(host.len() > 4, "{host:?}");
    }
}
