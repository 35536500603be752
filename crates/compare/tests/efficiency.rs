//! `efficiency_in`: the answer says when the ceiling it divides by is weaker than a ceiling.

mod common;
use common::{profile, with_limit, with_measurement, with_source};
use hwc_compare::efficiency::efficiency_in;
use hwc_model::CeilingSource;
use hwc_testkit::with_options;

const KEY: &str = "warm_gpu0_peak_gbps";
const FROM: &str = "h2d/cuda-copy/gpu0/local/256MiB/s1";

fn sourced(p: hwc_model::Profile) -> hwc_model::Profile {
    with_source(
        p,
        KEY,
        CeilingSource::Measured {
            measurement: FROM.into(),
        },
    )
}

#[test]
fn a_clean_ceiling_carries_no_note() {
    let p = sourced(with_measurement(
        profile("n", &[(KEY, 55.0)]),
        FROM,
        55.0,
        false,
    ));
    let e = efficiency_in(&p, KEY, 44.0).unwrap();
    assert!((e.efficiency - 0.8).abs() < 1e-12);
    assert_eq!(e.note, None);
}

#[test]
fn a_contended_unsteady_quick_interrupted_or_narrowed_ceiling_says_so() {
    let p = sourced(with_measurement(
        profile("n", &[(KEY, 55.0)]),
        FROM,
        55.0,
        true,
    ));
    let note = efficiency_in(&p, KEY, 44.0).unwrap().note.unwrap();
    assert!(
        note.contains("(contended): a lower bound, so this efficiency reads high"),
        "{note}"
    );

    let p = sourced(with_limit(profile("n", &[(KEY, 55.0)]), FROM, 55.0, 3.0, 1));
    let note = efficiency_in(&p, KEY, 44.0).unwrap().note.unwrap();
    assert_eq!(
        note,
        "the ceiling's measurement spread more than it is held to (unsteady)"
    );

    let mut p = sourced(with_measurement(
        profile("n", &[(KEY, 55.0)]),
        FROM,
        55.0,
        false,
    ));
    p.provenance.interrupted = true;
    let mut p = with_options(p, &[("quick", "true"), ("paths", "h2d")]);
    let note = efficiency_in(&p, KEY, 60.0).unwrap().note.unwrap();
    // Every caveat, the measurement above its ceiling first.
    assert_eq!(
        note,
        "the measurement exceeds the ceiling: the profile is stale, or the two count bytes \
         differently; the profile is of an interrupted run; the profile is a --quick run (a look, \
         not a ceiling to publish); the profile is of a run narrowed by --paths h2d (a part of \
         the full plan: a ceiling of a narrower sweep can be low, and this efficiency high)"
    );
    // Narrowed alone, by a sweep: said alone.
    p.provenance.interrupted = false;
    p.provenance.options = [("threads".to_string(), "4".to_string())].into();
    let note = efficiency_in(&p, KEY, 44.0).unwrap().note.unwrap();
    assert!(
        note.starts_with("the profile is of a run narrowed by --threads 4 ("),
        "{note}"
    );
    // A failed case: said with how many.
    p.provenance.options.clear();
    p.failures.push(hwc_model::Failure {
        engine: None,
        key: "h2d/cuda-copy/gpu0/local/4MiB/s8".into(),
        path: hwc_model::PathId::H2d,
        error: "data mismatch".into(),
    });
    let note = efficiency_in(&p, KEY, 44.0).unwrap().note.unwrap();
    assert_eq!(
        note,
        "the profile's run had 1 failed case(s) (a ceiling that is the best of fewer cases can \
         be low, and this efficiency high)"
    );
}
