//! On a machine with a GPU, libgdrapi and gdrdrv: each direction copies through BAR1, checks
//! its data, and says its mapping type. Elsewhere it says why it skipped.

use hwc_engine_gdrcopy::{probe, GdrcopyEngine, GpuSlot};
use hwc_model::{Case, CopyDirection, GdrcopySpec, PathId, Reps, Spec};
use hwc_runner::Engine;
use std::collections::BTreeMap;

#[test]
fn copies_through_bar1_both_ways_and_checks_the_data() {
    let gdr = match probe(std::path::Path::new("/dev")) {
        Ok(g) => g,
        Err((reason, hint)) => {
            eprintln!("skipped: GDRCopy cannot run here: {reason} ({hint})");
            return;
        }
    };
    let mut engine = GdrcopyEngine::new(
        gdr,
        vec![GpuSlot {
            name: "gpu0".into(),
            ordinal: 0,
        }],
        BTreeMap::new(),
        false,
    );
    for direction in [CopyDirection::H2d, CopyDirection::D2h] {
        let spec = GdrcopySpec {
            gpu: "gpu0".into(),
            direction,
            size_bytes: 1 << 20,
            cpu_node: None,
            cross_numa: false,
            latency: false,
        };
        let case = Case {
            key: format!("gdrcopy/gdrcopy/gpu0/{direction:?}"),
            path: PathId::Gdrcopy,
            engine: hwc_engine_gdrcopy::ENGINE,
            cell: "gpu0".into(),
            spec: Spec::Gdrcopy(spec),
            reps: Reps {
                warmup: 1,
                timed: 1,
                retry_above_spread_pct: None,
                steady: None,
            },
        };
        let mut c = engine.prepare(&case).expect("prepare");
        let rep = c.run_once().expect("a repetition");
        c.verify().expect("the data");
        let gbps = c.bytes_per_rep() as f64 / rep.seconds / 1e9;
        eprintln!("{direction:?}: {gbps:.2} GB/s; {}", c.notes().join("; "));
        assert!(gbps > 0.0);
        assert!(c.notes()[0].contains("mapping"));
    }
}
