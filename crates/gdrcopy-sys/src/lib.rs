//! NVIDIA GDRCopy's user library, `libgdrapi.so.2`, loaded at run time (no crate binds it):
//! CPU loads and stores to GPU memory through a BAR1 mapping that the gdrdrv kernel module
//! sets up, the path under GPU ↔ host copies of a few bytes to a few KiB.
//!
//! - [`Gdrapi::load`] opens the library named by `HWC_LIBGDRAPI`, else the first of
//!   [`DEFAULT_CANDIDATES`] (`libgdrapi.so.2`, `libgdrapi.so`, then three install folders),
//!   and resolves all eleven calls at once: a missing one is an error naming it. The loaded
//!   path is kept ([`Gdrapi::path`]). Signatures and layouts follow `include/gdrapi.h` of
//!   GDRCopy 2.4 and 2.5 (`gdr_info_v2_t` with its `mapping_type`; 2.6 is the same for these
//!   calls); a 2.0–2.3 library, without `gdr_get_info_v2`, is read through its
//!   `gdr_get_info`, whose struct is the v2 one without `mapping_type`.
//! - [`Gdrapi::open`] checks for `/dev/gdrdrv` first, so a missing kernel module is one line
//!   saying how to build and load it ([`OpenError::NoGdrdrv`]); then [`Gdr::pin`] →
//!   [`Pinned::map`] → [`Mapping::copy_to`]/[`Mapping::copy_from`]. Each handle borrows the
//!   one before, so drops unmap, unpin and close in that order.
//! - GPU memory is pinned in 64 KiB GPU pages ([`GPU_PAGE_BYTES`], [`gpu_page_span`]).
//!
//! Testing against a real build (no GPU or gdrdrv needed; `tests/real_lib.rs` then checks the
//! symbols, the version, and that `open` names the missing module):
//!
//! ```text
//! git clone https://github.com/NVIDIA/gdrcopy /tmp/gdrcopy-src && cd /tmp/gdrcopy-src
//! git checkout v2.5.2 && make lib && make lib_install prefix=/tmp/gdrcopy
//! HWC_LIBGDRAPI=/tmp/gdrcopy/lib/libgdrapi.so.2 cargo test -p hwc-gdrcopy-sys -- --nocapture
//! ```

mod ffi;
mod handle;
mod load;
mod pages;

pub use handle::{
    check_gdrdrv, Gdr, GdrError, Info, Mapped, Mapping, MappingType, OpenError, Pinned, Result,
    DEFAULT_DEV_DIR, DRIVER_INSTALL_HINT,
};
pub use load::{
    candidates, Gdrapi, LoadError, DEFAULT_CANDIDATES, LIBGDRAPI_ENV, LIBRARY_INSTALL_HINT, SYMBOLS,
};
pub use pages::{
    gpu_page_span, round_down_to_gpu_page, round_up_to_gpu_page, GpuPageSpan, GPU_PAGE_BYTES,
    GPU_PAGE_SHIFT,
};
