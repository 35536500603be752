//! Against a real libgdrapi (`HWC_LIBGDRAPI`, else the default places): every call binds, the
//! runtime version is 2.x or later, and `open` either names the missing gdrdrv module with its
//! install hint or, where `/dev/gdrdrv` exists, opens and reads the driver's version. Without
//! a library (CI) each test says plainly that it skipped, and why. `HWC_LIBGDRAPI` set to
//! something that does not load is a failure, not a skip.

use hwc_gdrcopy_sys::{Gdrapi, OpenError, LIBGDRAPI_ENV, SYMBOLS};
use std::path::Path;

fn load(test: &str) -> Option<Gdrapi> {
    let explicit = std::env::var_os(LIBGDRAPI_ENV).filter(|v| !v.is_empty());
    match Gdrapi::load() {
        Ok(g) => {
            eprintln!(
                "{test}: loaded {} (libgdrapi {:?}, info call {})",
                g.path().display(),
                g.runtime_version(),
                g.info_symbol()
            );
            Some(g)
        }
        Err(e) if explicit.is_none() && e.is_not_found() => {
            eprintln!(
                "skipped: {test}: no libgdrapi on this machine and {LIBGDRAPI_ENV} unset ({e})"
            );
            None
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

#[test]
fn every_call_binds_and_the_runtime_is_version_2_or_later() {
    let Some(api) = load("every_call_binds_and_the_runtime_is_version_2_or_later") else {
        return;
    };
    let bound = api.bound_symbols();
    for ((name, addr), want) in bound.iter().zip(SYMBOLS) {
        assert_ne!(*addr, 0, "{name} bound to NULL");
        if want == "gdr_get_info_v2" {
            assert_eq!(*name, api.info_symbol());
        } else {
            assert_eq!(*name, want);
        }
    }
    let (major, minor) = api.runtime_version();
    assert!(major >= 2, "libgdrapi {major}.{minor}");
    assert!(minor >= 0, "libgdrapi {major}.{minor}");
    // 2.4 brought gdr_get_info_v2; an older library is read through gdr_get_info.
    let want_info = if (major, minor) >= (2, 4) {
        "gdr_get_info_v2"
    } else {
        "gdr_get_info"
    };
    assert_eq!(api.info_symbol(), want_info, "libgdrapi {major}.{minor}");
}

#[test]
fn open_names_the_missing_module_or_reads_the_driver_version() {
    let Some(api) = load("open_names_the_missing_module_or_reads_the_driver_version") else {
        return;
    };
    if Path::new("/dev/gdrdrv").exists() {
        let gdr = api
            .open()
            .expect("/dev/gdrdrv exists, so gdr_open should succeed");
        let (major, minor) = gdr.driver_version().expect("gdr_driver_get_version");
        eprintln!("/dev/gdrdrv present: gdrdrv {major}.{minor}");
        assert!(major >= 2, "gdrdrv {major}.{minor}");
        gdr.close().expect("gdr_close");
    } else {
        let e = api
            .open()
            .expect_err("no /dev/gdrdrv, yet gdr_open succeeded");
        let s = e.to_string();
        eprintln!("/dev/gdrdrv absent: {s}");
        assert!(matches!(e, OpenError::NoGdrdrv { .. }), "{e:?}");
        assert_eq!(
            s,
            "the gdrdrv kernel module is not loaded (`/dev/gdrdrv` absent): build and load it \
             from https://github.com/NVIDIA/gdrcopy (`make driver && sudo ./insmod.sh`), user \
             library via `make lib lib_install`"
        );
    }
}

#[test]
fn a_dev_dir_without_the_node_refuses_before_gdr_open() {
    let Some(api) = load("a_dev_dir_without_the_node_refuses_before_gdr_open") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let e = api.open_in(dir.path()).unwrap_err();
    match e {
        OpenError::NoGdrdrv { node } => assert_eq!(node, dir.path().join("gdrdrv")),
        other => panic!("{other}"),
    }
}

#[test]
fn gdr_open_returning_null_is_reported_with_the_node() {
    let Some(api) = load("gdr_open_returning_null_is_reported_with_the_node") else {
        return;
    };
    if Path::new("/dev/gdrdrv").exists() {
        return eprintln!(
            "skipped: gdr_open_returning_null_is_reported_with_the_node: /dev/gdrdrv exists, \
             so gdr_open would not fail"
        );
    }
    // A stand-in node passes the check, so the real gdr_open runs, finds no /dev/gdrdrv and
    // returns NULL.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gdrdrv"), b"").unwrap();
    let opened = api.open_in(dir.path());
    match opened {
        Err(OpenError::OpenFailed { node, reason }) => {
            assert_eq!(node, dir.path().join("gdrdrv"));
            eprintln!("gdr_open returned NULL: {reason}");
            assert!(!reason.is_empty());
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("gdr_open succeeded without /dev/gdrdrv (a dma-buf capable 2.6+?)"),
    }
}
