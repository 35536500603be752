//! Raw bindings to SPDK's environment (`spdk/env.h`) and NVMe driver (`spdk/nvme.h`), generated
//! by bindgen at build time against the user's SPDK, behind the `spdk` feature: a build without
//! it has no SPDK, no libclang and an empty crate.
//!
//! Where SPDK is: `SPDK_DIR` (a built source tree: headers in `include/`, libraries in
//! `build/lib/`, DPDK's in `dpdk/build/lib/` when SPDK built its own), else pkg-config's
//! `spdk_nvme` and `spdk_env_dpdk`. SPDK's shared libraries do not declare their own needs
//! (OpenSSL), and Debian's linker drops libraries it thinks unneeded: a binary that links them depends on
//! this crate directly and wraps `DEP_SPDK_LINK_LIBS` in `--no-as-needed` in its build script, as
//! `hwceiling`'s does (`../shared/tools/spdk/README.md`). At run time they must be
//! on the loader's path (`LD_LIBRARY_PATH=$SPDK_DIR/build/lib:$SPDK_DIR/dpdk/build/lib`).

#[cfg(feature = "spdk")]
#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    clippy::all,
    clippy::pedantic
)]
mod bindings {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

#[cfg(feature = "spdk")]
pub use bindings::*;
