//! libcufile, loaded at run time: the dozen calls this engine makes, with C enums read as plain
//! integers (a code a newer library adds is then a number to report, not undefined behaviour).
//!
//! Why not cudarc's `cufile` module: it looks for `libcufile.so` and versions 1 and 9–12 but not
//! `libcufile.so.0`, the only name the CUDA runtime and NVIDIA's wheel ship; it panics when the
//! library or a symbol is missing; it returns C enums as Rust enums (a code past its list, as
//! CUDA 13 adds, is undefined behaviour); and its `buf_register` passes an element count as
//! the length. The layouts here follow `cufile.h` of CUDA 13.0 (`../shared/notes/apis.md`).

use std::ffi::{c_int, c_uint, c_void};
use std::path::{Path, PathBuf};

/// `CUfileError_t`: libcufile's code and, for 5011, the CUDA driver's.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    pub err: u32,
    pub cu_err: u32,
}

/// `CUfileDescr_t` for a file descriptor (`type` 1 = `CU_FILE_HANDLE_TYPE_OPAQUE_FD`).
#[repr(C)]
struct Descr {
    kind: u32,
    fd: DescrHandle,
    fs_ops: *const c_void,
}

#[repr(C)]
union DescrHandle {
    fd: c_int,
    _handle: *mut c_void,
}

/// `CUfileDrvProps_t`'s leading fields (the struct is read into a larger zeroed buffer).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverProps {
    pub nvfs_major: c_uint,
    pub nvfs_minor: c_uint,
    pub poll_thresh_size: usize,
    pub max_direct_io_size: usize,
    pub dstatusflags: c_uint,
    pub dcontrolflags: c_uint,
    pub fflags: c_uint,
}

/// `CUFileBoolConfigParameter_t` values.
pub const PARAM_ALLOW_COMPAT_MODE: c_int = 1;
pub const PARAM_USE_PCIP2PDMA: c_int = 7;

/// `CU_FILE_DRIVER_NOT_INITIALIZED`: what opening says without nvidia_fs when compat is off.
pub const DRIVER_NOT_INITIALIZED: u32 = 5001;

type OpenFn = unsafe extern "C" fn() -> Status;
type PropsFn = unsafe extern "C" fn(*mut c_void) -> Status;
type HandleRegisterFn = unsafe extern "C" fn(*mut *mut c_void, *mut Descr) -> Status;
type HandleDeregisterFn = unsafe extern "C" fn(*mut c_void);
type BufRegisterFn = unsafe extern "C" fn(*const c_void, usize, c_int) -> Status;
type BufDeregisterFn = unsafe extern "C" fn(*const c_void) -> Status;
type ReadFn = unsafe extern "C" fn(*mut c_void, *mut c_void, usize, i64, i64) -> isize;
type WriteFn = unsafe extern "C" fn(*mut c_void, *const c_void, usize, i64, i64) -> isize;
type VersionFn = unsafe extern "C" fn(*mut c_int) -> Status;
type SetBoolFn = unsafe extern "C" fn(c_int, bool) -> Status;
type GetBoolFn = unsafe extern "C" fn(c_int, *mut bool) -> Status;

/// The library and its calls.
pub struct Cufile {
    pub path: PathBuf,
    // Kept loaded for the process's life (RTLD_NODELETE: libcufile keeps thread-local state).
    _lib: libloading::os::unix::Library,
    open: OpenFn,
    close: OpenFn,
    props: PropsFn,
    handle_register: HandleRegisterFn,
    handle_deregister: HandleDeregisterFn,
    buf_register: BufRegisterFn,
    buf_deregister: BufDeregisterFn,
    read: ReadFn,
    write: WriteFn,
    version: Option<VersionFn>,
    set_bool: Option<SetBoolFn>,
    get_bool: Option<GetBoolFn>,
}

// SAFETY: the library's entry points are thread-safe per NVIDIA's API reference (handles and
// buffers are used from many threads, as kvikio does); the struct holds only function pointers.
unsafe impl Send for Cufile {}
// SAFETY: as above.
unsafe impl Sync for Cufile {}

/// The names and places to try, first found wins: `explicit` (the topology's find or
/// `HWC_LIBCUFILE`), the loader's own search for `libcufile.so.0` (LD_LIBRARY_PATH, ldconfig),
/// then the CUDA toolkits' library folders.
pub fn candidates(explicit: Option<&Path>) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = explicit.map(Path::to_path_buf).into_iter().collect();
    v.push("libcufile.so.0".into());
    let mut toolkits: Vec<PathBuf> = std::fs::read_dir("/usr/local")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("cuda"))
        })
        .collect();
    toolkits.sort();
    toolkits.reverse();
    for t in toolkits {
        v.push(t.join("targets/x86_64-linux/lib/libcufile.so.0"));
        v.push(t.join("lib64/libcufile.so.0"));
    }
    v
}

impl Cufile {
    /// Load the first of `candidates` that loads and has every call this engine needs.
    pub fn load(candidates: &[PathBuf]) -> Result<Cufile, String> {
        let mut tried = Vec::new();
        for c in candidates {
            match Self::load_one(c) {
                Ok(l) => return Ok(l),
                Err(e) => tried.push(format!("{}: {e}", c.display())),
            }
        }
        Err(format!(
            "libcufile could not be loaded ({})",
            tried.join("; ")
        ))
    }

    fn load_one(path: &Path) -> Result<Cufile, String> {
        use libloading::os::unix::{Library, RTLD_NOW};
        // SAFETY: loading runs the library's initialisers, which libcufile keeps to itself;
        // RTLD_NODELETE keeps it mapped (its thread-local state outlives any unload).
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | libc::RTLD_NODELETE) }
            .map_err(|e| e.to_string())?;
        // A symbol by its C name, typed by its signature in cufile.h.
        macro_rules! get {
            ($t:ty, $name:literal) => {{
                // SAFETY: the symbol's C signature is `$t` per cufile.h.
                let s: Result<libloading::os::unix::Symbol<$t>, _> =
                    unsafe { lib.get(concat!($name, "\0").as_bytes()) };
                s.map(|s| *s)
            }};
        }
        // One this engine cannot do without.
        macro_rules! need {
            ($t:ty, $name:literal) => {
                get!($t, $name).map_err(|_| format!("no symbol {} (libcufile too old?)", $name))?
            };
        }
        let close =
            get!(OpenFn, "cuFileDriverClose_v2").or_else(|_| get!(OpenFn, "cuFileDriverClose"));
        Ok(Cufile {
            path: path.to_path_buf(),
            open: need!(OpenFn, "cuFileDriverOpen"),
            close: close.map_err(|_| "no symbol cuFileDriverClose (libcufile too old?)")?,
            props: need!(PropsFn, "cuFileDriverGetProperties"),
            handle_register: need!(HandleRegisterFn, "cuFileHandleRegister"),
            handle_deregister: need!(HandleDeregisterFn, "cuFileHandleDeregister"),
            buf_register: need!(BufRegisterFn, "cuFileBufRegister"),
            buf_deregister: need!(BufDeregisterFn, "cuFileBufDeregister"),
            read: need!(ReadFn, "cuFileRead"),
            write: need!(WriteFn, "cuFileWrite"),
            version: get!(VersionFn, "cuFileGetVersion").ok(),
            set_bool: get!(SetBoolFn, "cuFileSetParameterBool").ok(),
            get_bool: get!(GetBoolFn, "cuFileGetParameterBool").ok(),
            _lib: lib,
        })
    }

    pub fn driver_open(&self) -> Status {
        // SAFETY: no arguments; libcufile serialises its own initialisation.
        unsafe { (self.open)() }
    }

    pub fn driver_close(&self) -> Status {
        // SAFETY: as above; called only with no handle or buffer registered.
        unsafe { (self.close)() }
    }

    /// The driver's properties (after a successful open).
    pub fn properties(&self) -> Result<DriverProps, Status> {
        // Larger than any CUfileDrvProps_t so far (48 bytes in CUDA 13.0), 8-byte aligned.
        let mut buf = [0u64; 32];
        // SAFETY: the buffer outlives the call and is larger than the struct it fills.
        let s = unsafe { (self.props)(buf.as_mut_ptr().cast()) };
        if s.err != 0 {
            return Err(s);
        }
        // SAFETY: DriverProps is a prefix of CUfileDrvProps_t's layout (repr(C)), inside buf.
        Ok(unsafe { std::ptr::read(buf.as_ptr().cast::<DriverProps>()) })
    }

    /// `cuFileGetVersion` (e.g. 1150 for 1.15), where the library has it.
    pub fn version(&self) -> Option<i32> {
        let f = self.version?;
        let mut v: c_int = 0;
        // SAFETY: out-pointer to a local.
        (unsafe { f(&mut v) }.err == 0).then_some(v)
    }

    /// Set a boolean parameter (before the driver is opened); `false` where the library has no
    /// such call or refused.
    pub fn set_bool(&self, param: c_int, value: bool) -> bool {
        // SAFETY: a plain value call.
        self.set_bool
            .is_some_and(|f| unsafe { f(param, value) }.err == 0)
    }

    pub fn get_bool(&self, param: c_int) -> Option<bool> {
        let f = self.get_bool?;
        let mut v = false;
        // SAFETY: out-pointer to a local.
        (unsafe { f(param, &mut v) }.err == 0).then_some(v)
    }

    /// Register an O_DIRECT file descriptor.
    pub fn handle_register(&self, fd: c_int) -> Result<*mut c_void, Status> {
        let mut d = Descr {
            kind: 1,
            fd: DescrHandle { fd },
            fs_ops: std::ptr::null(),
        };
        let mut h: *mut c_void = std::ptr::null_mut();
        // SAFETY: d and h outlive the call; fd is open.
        let s = unsafe { (self.handle_register)(&mut h, &mut d) };
        if s.err == 0 {
            Ok(h)
        } else {
            Err(s)
        }
    }

    /// # Safety
    /// `h` came from [`Self::handle_register`], and no read on it is in flight.
    pub unsafe fn handle_deregister(&self, h: *mut c_void) {
        // SAFETY: as the caller guarantees.
        unsafe { (self.handle_deregister)(h) }
    }

    /// # Safety
    /// `ptr` is the base of a live device allocation of at least `len` bytes.
    pub unsafe fn buf_register(&self, ptr: *const c_void, len: usize) -> Status {
        // SAFETY: as the caller guarantees.
        unsafe { (self.buf_register)(ptr, len, 0) }
    }

    /// # Safety
    /// `ptr` was registered, and no read into it is in flight.
    pub unsafe fn buf_deregister(&self, ptr: *const c_void) -> Status {
        // SAFETY: as the caller guarantees.
        unsafe { (self.buf_deregister)(ptr) }
    }

    /// Read `size` bytes at `file_offset` of `h` into `base + buf_offset` (device memory of the
    /// thread's current context), or write them from there (`write`): the bytes moved, or the
    /// failure.
    ///
    /// # Safety
    /// `h` is registered; `[base + buf_offset, + size)` lies in a live device allocation.
    pub unsafe fn io(
        &self,
        write: bool,
        h: *mut c_void,
        base: *mut c_void,
        size: usize,
        file_offset: i64,
        buf_offset: i64,
    ) -> Result<usize, String> {
        // SAFETY: as the caller guarantees.
        let n = unsafe {
            if write {
                (self.write)(h, base, size, file_offset, buf_offset)
            } else {
                (self.read)(h, base, size, file_offset, buf_offset)
            }
        };
        let call = if write { "cuFileWrite" } else { "cuFileRead" };
        match n {
            n if n >= 0 => Ok(n as usize),
            -1 => Err(format!(
                "{call} failed: {}",
                std::io::Error::last_os_error()
            )),
            n => Err(format!(
                "{call} failed: {}",
                describe(Status {
                    err: n.unsigned_abs() as u32,
                    cu_err: 0
                })
            )),
        }
    }
}

/// A libcufile code in words, with the fix where one is known.
pub fn describe(s: Status) -> String {
    let what = match s.err {
        5001 => "nvidia-fs driver is not loaded (and compat mode is off)",
        5004 => {
            "the nvidia-fs driver's version does not match libcufile's: install the nvidia-fs \
                 that ships with this CUDA release"
        }
        5007 => "GPUDirect Storage is not supported on this platform",
        5008 => "GPUDirect Storage does not support this file (its filesystem)",
        5009 => "GPUDirect Storage does not support this GPU",
        5011 => "a CUDA driver call failed",
        5018 => "unsupported file type",
        5019 | 5020 => {
            "the file is not open with O_DIRECT, or its filesystem refuses O_DIRECT (tmpfs does): \
             put the target on a filesystem that supports O_DIRECT (ext4, xfs)"
        }
        5025 => "permission denied on the driver or the file (/dev/nvidia-fs*, or the file's mode)",
        5027 => {
            "libcufile could not register the file: on a machine without udevd it cannot read the \
             filesystem type from the udev database (its log says \"udev property not found: \
             ID_FS_USAGE\"); run udevd, or write /run/udev/data/b<major>:<minor> for the \
             filesystem's device with the lines E:ID_FS_USAGE=filesystem and E:ID_FS_TYPE=<type>"
        }
        5033 => "nvidia-fs could not be set up",
        5034 => "GPUDirect Storage is disabled for this file by cufile.json",
        5036 => "GPU memory could not be pinned for GPUDirect (BAR1 space exhausted?)",
        5044 => "an I/O error",
        _ => "",
    };
    let cuda = if s.cu_err != 0 {
        format!(", CUDA error {}", s.cu_err)
    } else {
        String::new()
    };
    if what.is_empty() {
        format!("libcufile error {}{cuda}", s.err)
    } else {
        format!("libcufile error {}: {what}{cuda}", s.err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_failures_name_their_fix() {
        let d = |err| describe(Status { err, cu_err: 0 });
        assert!(
            d(5027).contains("/run/udev/data/b<major>:<minor>"),
            "{}",
            d(5027)
        );
        assert!(d(5027).contains("ID_FS_USAGE"));
        assert!(d(5019).contains("tmpfs"));
        assert!(d(5004).contains("version does not match"));
        assert!(d(5036).contains("pinned"));
        // A code this build does not know is a number, not a guess.
        assert_eq!(d(5999), "libcufile error 5999");
        let cuda = describe(Status {
            err: 5011,
            cu_err: 700,
        });
        assert!(cuda.ends_with("CUDA error 700"), "{cuda}");
    }

    #[test]
    fn the_explicit_path_comes_first_then_the_loader_s_own_search() {
        let c = candidates(Some(Path::new("/opt/x/libcufile.so.0")));
        assert_eq!(c[0], Path::new("/opt/x/libcufile.so.0"));
        assert_eq!(c[1], Path::new("libcufile.so.0"));
        assert!(c[2..]
            .iter()
            .all(|p| p.starts_with("/usr/local") && p.ends_with("libcufile.so.0")));
        assert_eq!(candidates(None)[0], Path::new("libcufile.so.0"));
    }

    #[test]
    fn a_missing_library_is_an_error_naming_every_place_tried() {
        let e = match Cufile::load(&[
            PathBuf::from("/nonexistent/libcufile.so.0"),
            PathBuf::from("libhwc-no-such-cufile.so.0"),
        ]) {
            Ok(_) => panic!("loaded a library that is not there"),
            Err(e) => e,
        };
        assert!(e.starts_with("libcufile could not be loaded"), "{e}");
        assert!(
            e.contains("/nonexistent/libcufile.so.0") && e.contains("libhwc-no-such-cufile"),
            "{e}"
        );
        // A library that loads but is not libcufile is refused by its missing calls.
        let libc_path = PathBuf::from("libc.so.6");
        let e = match Cufile::load(&[libc_path]) {
            Ok(_) => panic!("took libc for libcufile"),
            Err(e) => e,
        };
        assert!(e.contains("no symbol cuFileDriverOpen"), "{e}");
    }

    #[test]
    fn the_descriptor_and_properties_have_cufile_h_s_layout() {
        assert_eq!(std::mem::size_of::<Descr>(), 24);
        assert_eq!(std::mem::offset_of!(Descr, fd), 8);
        assert_eq!(std::mem::offset_of!(Descr, fs_ops), 16);
        assert_eq!(std::mem::offset_of!(DriverProps, dstatusflags), 24);
        assert_eq!(std::mem::offset_of!(DriverProps, dcontrolflags), 28);
        assert_eq!(std::mem::offset_of!(DriverProps, fflags), 32);
        assert_eq!(std::mem::size_of::<Status>(), 8);
    }
}
