//! Finding and loading libgdrapi, and resolving every call at once.

use crate::ffi::{
    CloseFn, CopyFromMappingFn, CopyToMappingFn, DriverGetVersionFn, GetInfoFn, MapFn, OpenFn,
    PinBufferFn, RuntimeGetVersionFn, UnmapFn, UnpinBufferFn,
};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use std::ffi::{c_int, OsStr};
use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming the library to load (and nothing else is tried).
pub const LIBGDRAPI_ENV: &str = "HWC_LIBGDRAPI";

/// Where the library is looked for when [`LIBGDRAPI_ENV`] is unset, in order: the loader's own
/// search (`LD_LIBRARY_PATH`, ldconfig's cache), then `make lib_install`'s default prefix, the
/// Debian/Ubuntu package's folder, and a common hand-install prefix.
pub const DEFAULT_CANDIDATES: [&str; 5] = [
    "libgdrapi.so.2",
    "libgdrapi.so",
    "/usr/local/lib/libgdrapi.so.2",
    "/usr/lib/x86_64-linux-gnu/libgdrapi.so.2",
    "/opt/gdrcopy/lib/libgdrapi.so.2",
];

/// How to get the user library, for messages.
pub const LIBRARY_INSTALL_HINT: &str = "build and install the user library from \
     https://github.com/NVIDIA/gdrcopy (`make lib lib_install`), or set HWC_LIBGDRAPI to a \
     libgdrapi.so.2";

/// The paths to try: `env` (the value of [`LIBGDRAPI_ENV`]) alone when set and not empty,
/// else [`DEFAULT_CANDIDATES`].
pub fn candidates(env: Option<&OsStr>) -> Vec<PathBuf> {
    match env {
        Some(p) if !p.is_empty() => vec![PathBuf::from(p)],
        _ => DEFAULT_CANDIDATES.iter().map(PathBuf::from).collect(),
    }
}

/// The C names of the calls resolved at load, in [`Gdrapi::bound_symbols`]'s order. The info
/// call is `gdr_get_info_v2`, or `gdr_get_info` in a library older than 2.4
/// ([`Gdrapi::info_symbol`]).
pub const SYMBOLS: [&str; 11] = [
    "gdr_open",
    "gdr_close",
    "gdr_pin_buffer",
    "gdr_unpin_buffer",
    "gdr_get_info_v2",
    "gdr_map",
    "gdr_unmap",
    "gdr_copy_to_mapping",
    "gdr_copy_from_mapping",
    "gdr_runtime_get_version",
    "gdr_driver_get_version",
];

/// Why libgdrapi could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// `dlopen` refused the path (absent, wrong architecture, a missing dependency).
    #[error("cannot load {}: {reason}", path.display())]
    Open { path: PathBuf, reason: String },
    /// The library loaded but lacks a call: not libgdrapi, or one older than GDRCopy 2.0.
    #[error(
        "{} has no symbol {symbol} (not libgdrapi, or older than GDRCopy 2.0)",
        path.display()
    )]
    MissingSymbol { path: PathBuf, symbol: &'static str },
    /// Neither `gdr_get_info_v2` (2.4+) nor `gdr_get_info` (2.0–2.3) is exported.
    #[error(
        "{} (libgdrapi {major}.{minor}) has neither gdr_get_info_v2 nor gdr_get_info",
        path.display()
    )]
    NoInfoCall {
        path: PathBuf,
        major: i32,
        minor: i32,
    },
    /// No candidate loaded; each one's reason, in the order tried.
    #[error("libgdrapi could not be loaded ({}): {LIBRARY_INSTALL_HINT}", Attempts(.attempts))]
    NotFound { attempts: Vec<LoadError> },
}

struct Attempts<'a>(&'a [LoadError]);

impl fmt::Display for Attempts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl LoadError {
    /// Whether nothing was found at all (every candidate refused by `dlopen`), as opposed to
    /// a library that is there but unusable.
    pub fn is_not_found(&self) -> bool {
        match self {
            LoadError::Open { .. } => true,
            LoadError::NotFound { attempts } => attempts.iter().all(LoadError::is_not_found),
            LoadError::MissingSymbol { .. } | LoadError::NoInfoCall { .. } => false,
        }
    }
}

/// Which call fills [`crate::Info`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InfoCall {
    /// `gdr_get_info_v2` (2.4+): reports the mapping type.
    V2,
    /// `gdr_get_info` of 2.0–2.3: the same struct without `mapping_type`, which is then
    /// derived from `mapped`/`wc_mapping` as libgdrapi 2.4+ does for an old gdrdrv.
    V1,
}

/// The resolved calls.
#[derive(Clone, Copy)]
pub(crate) struct Fns {
    pub open: OpenFn,
    pub close: CloseFn,
    pub pin_buffer: PinBufferFn,
    pub unpin_buffer: UnpinBufferFn,
    pub get_info: GetInfoFn,
    pub map: MapFn,
    pub unmap: UnmapFn,
    pub copy_to_mapping: CopyToMappingFn,
    pub copy_from_mapping: CopyFromMappingFn,
    pub runtime_get_version: RuntimeGetVersionFn,
    pub driver_get_version: DriverGetVersionFn,
}

/// libgdrapi, loaded, with every call resolved. The library stays loaded as long as this
/// value lives, and every handle ([`crate::Gdr`], [`crate::Pinned`], [`crate::Mapping`])
/// borrows it.
pub struct Gdrapi {
    pub(crate) fns: Fns,
    pub(crate) info_call: InfoCall,
    path: PathBuf,
    // Declared last: dropped (dlclose) after nothing else here can call into it.
    _lib: Library,
}

impl fmt::Debug for Gdrapi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gdrapi")
            .field("path", &self.path)
            .field("info_symbol", &self.info_symbol())
            .finish_non_exhaustive()
    }
}

/// A symbol's address, typed as its C signature.
///
/// # Safety
/// `T` is the function pointer type of `name`'s C declaration in gdrapi.h.
unsafe fn resolve<T: Copy>(lib: &Library, path: &Path, name: &'static str) -> Result<T, LoadError> {
    // SAFETY: the caller guarantees `T` matches the symbol's C type; the value is copied out
    // of the `Symbol` and is used only while `lib` stays loaded (both live in one `Gdrapi`).
    let s = unsafe { lib.get::<T>(name.as_bytes()) };
    s.map(|s| *s).map_err(|_| LoadError::MissingSymbol {
        path: path.to_path_buf(),
        symbol: name,
    })
}

impl Gdrapi {
    /// Load the library named by [`LIBGDRAPI_ENV`], or else the first of
    /// [`DEFAULT_CANDIDATES`] that loads with every call.
    pub fn load() -> Result<Gdrapi, LoadError> {
        Self::load_first(&candidates(std::env::var_os(LIBGDRAPI_ENV).as_deref()))
    }

    /// Load the first of `paths` that loads with every call; [`LoadError::NotFound`] with each
    /// one's reason when none does.
    pub fn load_first(paths: &[PathBuf]) -> Result<Gdrapi, LoadError> {
        let mut attempts = Vec::new();
        for p in paths {
            match Self::load_from(p) {
                Ok(g) => return Ok(g),
                Err(e) => attempts.push(e),
            }
        }
        Err(LoadError::NotFound { attempts })
    }

    /// Load `path` (a file name alone goes through the loader's search) and resolve every
    /// call, the first missing one named in the error.
    pub fn load_from(path: &Path) -> Result<Gdrapi, LoadError> {
        // SAFETY: loading runs the library's initialisers; libgdrapi has none beyond libc's
        // (its state is set up in gdr_open). RTLD_NOW makes a missing dependency fail here
        // rather than at a first call; RTLD_LOCAL keeps its symbols out of the global scope.
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| {
            // dlerror's text usually starts with the path again.
            let reason = e.to_string();
            let prefix = format!("{}: ", path.display());
            LoadError::Open {
                path: path.to_path_buf(),
                reason: reason.strip_prefix(&prefix).unwrap_or(&reason).to_string(),
            }
        })?;
        // SAFETY: for every `resolve` call in this block, the type is the named symbol's
        // signature in gdrapi.h, transcribed in `ffi`. The info call of 2.0-2.3,
        // `gdr_get_info`, fills the first 40 bytes of the v2 struct, whose fields sit in the
        // same places (see `ffi::RawInfo`), so both resolve to `GetInfoFn`.
        unsafe {
            let open: OpenFn = resolve(&lib, path, "gdr_open")?;
            let close: CloseFn = resolve(&lib, path, "gdr_close")?;
            let pin_buffer: PinBufferFn = resolve(&lib, path, "gdr_pin_buffer")?;
            let unpin_buffer: UnpinBufferFn = resolve(&lib, path, "gdr_unpin_buffer")?;
            let info = resolve::<GetInfoFn>(&lib, path, "gdr_get_info_v2")
                .map(|f| (f, InfoCall::V2))
                .or_else(|_| {
                    resolve::<GetInfoFn>(&lib, path, "gdr_get_info").map(|f| (f, InfoCall::V1))
                });
            let (get_info, info_call) = match info {
                Ok(i) => i,
                Err(_) => {
                    // Name the version when the library can tell it.
                    return Err(
                        match resolve::<RuntimeGetVersionFn>(&lib, path, "gdr_runtime_get_version")
                        {
                            Ok(f) => {
                                let (major, minor) = runtime_version_of(f);
                                LoadError::NoInfoCall {
                                    path: path.to_path_buf(),
                                    major,
                                    minor,
                                }
                            }
                            Err(_) => LoadError::MissingSymbol {
                                path: path.to_path_buf(),
                                symbol: "gdr_get_info_v2",
                            },
                        },
                    );
                }
            };
            let fns = Fns {
                open,
                close,
                pin_buffer,
                unpin_buffer,
                get_info,
                map: resolve(&lib, path, "gdr_map")?,
                unmap: resolve(&lib, path, "gdr_unmap")?,
                copy_to_mapping: resolve(&lib, path, "gdr_copy_to_mapping")?,
                copy_from_mapping: resolve(&lib, path, "gdr_copy_from_mapping")?,
                runtime_get_version: resolve(&lib, path, "gdr_runtime_get_version")?,
                driver_get_version: resolve(&lib, path, "gdr_driver_get_version")?,
            };
            Ok(Gdrapi {
                fns,
                info_call,
                path: path.to_path_buf(),
                _lib: lib,
            })
        }
    }

    /// The path that loaded, as given (a bare file name when the loader's search found it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `gdr_runtime_get_version`: the library's (major, minor), e.g. (2, 5).
    pub fn runtime_version(&self) -> (i32, i32) {
        runtime_version_of(self.fns.runtime_get_version)
    }

    /// The info call in use: `gdr_get_info_v2`, or `gdr_get_info` in a 2.0–2.3 library.
    pub fn info_symbol(&self) -> &'static str {
        match self.info_call {
            InfoCall::V2 => "gdr_get_info_v2",
            InfoCall::V1 => "gdr_get_info",
        }
    }

    /// Every resolved call by its C name and address ([`SYMBOLS`]' order, with
    /// [`Self::info_symbol`] in the info call's place).
    pub fn bound_symbols(&self) -> [(&'static str, usize); 11] {
        let f = &self.fns;
        [
            ("gdr_open", f.open as usize),
            ("gdr_close", f.close as usize),
            ("gdr_pin_buffer", f.pin_buffer as usize),
            ("gdr_unpin_buffer", f.unpin_buffer as usize),
            (self.info_symbol(), f.get_info as usize),
            ("gdr_map", f.map as usize),
            ("gdr_unmap", f.unmap as usize),
            ("gdr_copy_to_mapping", f.copy_to_mapping as usize),
            ("gdr_copy_from_mapping", f.copy_from_mapping as usize),
            ("gdr_runtime_get_version", f.runtime_get_version as usize),
            ("gdr_driver_get_version", f.driver_get_version as usize),
        ]
    }
}

fn runtime_version_of(f: RuntimeGetVersionFn) -> (i32, i32) {
    let (mut major, mut minor): (c_int, c_int) = (-1, -1);
    // SAFETY: two out-pointers to locals that outlive the call; the call only stores the
    // library's compiled-in version through them.
    unsafe { f(&mut major, &mut minor) };
    (major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_env_path_is_the_only_candidate_when_set() {
        let c = candidates(Some(OsStr::new("/tmp/gdrcopy/lib/libgdrapi.so.2")));
        assert_eq!(c, vec![PathBuf::from("/tmp/gdrcopy/lib/libgdrapi.so.2")]);
        // Unset or empty: the defaults, the loader's own search first.
        for env in [None, Some(OsStr::new(""))] {
            let c = candidates(env);
            assert_eq!(c.len(), DEFAULT_CANDIDATES.len());
            assert_eq!(c[0], Path::new("libgdrapi.so.2"));
            assert_eq!(c[1], Path::new("libgdrapi.so"));
            assert_eq!(c[4], Path::new("/opt/gdrcopy/lib/libgdrapi.so.2"));
        }
    }

    #[test]
    fn a_missing_library_is_an_error_naming_every_place_tried_and_the_hint() {
        let e = Gdrapi::load_first(&[
            PathBuf::from("/nonexistent/libgdrapi.so.2"),
            PathBuf::from("libhwc-no-such-gdrapi.so.2"),
        ])
        .unwrap_err();
        assert!(e.is_not_found(), "{e}");
        let s = e.to_string();
        assert!(s.starts_with("libgdrapi could not be loaded ("), "{s}");
        assert!(s.contains("/nonexistent/libgdrapi.so.2"), "{s}");
        assert!(s.contains("libhwc-no-such-gdrapi.so.2"), "{s}");
        assert!(s.contains("https://github.com/NVIDIA/gdrcopy"), "{s}");
        assert!(s.contains("make lib lib_install"), "{s}");
        assert!(s.contains("HWC_LIBGDRAPI"), "{s}");
    }

    #[test]
    fn a_library_without_the_calls_is_refused_naming_the_first_missing_one() {
        // libc loads everywhere this runs and has none of gdrapi's calls.
        let e = Gdrapi::load_from(Path::new("libc.so.6")).unwrap_err();
        assert!(
            matches!(
                e,
                LoadError::MissingSymbol {
                    symbol: "gdr_open",
                    ..
                }
            ),
            "{e}"
        );
        assert!(!e.is_not_found());
        assert!(e.to_string().contains("has no symbol gdr_open"), "{e}");
        // Through the candidate list the reason survives, and it is not "not found".
        let e = Gdrapi::load_first(&[PathBuf::from("libc.so.6")]).unwrap_err();
        assert!(!e.is_not_found());
        assert!(e.to_string().contains("libc.so.6 has no symbol"), "{e}");
    }

    #[test]
    fn the_symbol_list_is_the_brief_s_eleven_calls() {
        assert_eq!(SYMBOLS.len(), 11);
        let mut s = SYMBOLS.to_vec();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 11);
    }
}
