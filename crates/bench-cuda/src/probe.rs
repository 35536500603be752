//! Is CUDA here, and which GPUs does it see? Never panics: cudarc panics when libcuda or one of
//! its symbols is missing, so the library's presence and the driver's version are checked first.

use hwc_model::Setting;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int};

use cudarc::driver::{result, sys};
use nvml_wrapper::Nvml;

use crate::bdf::normalize_bdf;
use crate::error::code_of;
use crate::nvml::{self, NvmlFacts};

/// Oldest CUDA driver API this backend calls into (every symbol it uses exists there).
const MIN_DRIVER_API: c_int = 11040;

/// What the CUDA driver (and NVML, where present) report.
#[derive(Debug, Clone, PartialEq)]
pub struct CudaProbe {
    pub devices: Vec<CudaDevice>,
    /// The NVIDIA driver's version (`580.159.04`) from NVML, else the CUDA driver API version.
    pub driver_version: String,
    /// Versions and tool facts for the profile's provenance (`cuda.driver_api_version`, …).
    pub environment: hwc_model::Environment,
}

/// One CUDA device.
#[derive(Debug, Clone, PartialEq)]
pub struct CudaDevice {
    /// CUDA ordinal (the `cuda_index` of the topology's GPU).
    pub ordinal: u32,
    /// `0000:00:06.0` form, lower case.
    pub pci_bdf: String,
    pub name: String,
    pub memory_bytes: u64,
    pub l2_cache_bytes: u64,
    pub multiprocessors: u32,
    /// (major, minor).
    pub compute_capability: (u32, u32),
    /// Copy engines usable concurrently with kernels (`CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT`).
    pub copy_engines: u32,
    pub nvml: Option<NvmlFacts>,
}

/// `13000` → `13.0`.
pub fn api_version_label(version: c_int) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

/// Load libcuda, initialise it and list its devices. `Err` carries the reason, fit to be a
/// waiver's reason: no libcuda, a driver too old, no device, or a failing driver.
pub fn probe() -> Result<CudaProbe, String> {
    // SAFETY: only tries to dlopen the candidate names; nothing is called through them.
    if !unsafe { sys::is_culib_present() } {
        return Err("libcuda.so.1 not found: no NVIDIA driver is installed".into());
    }
    let mut version: c_int = 0;
    // SAFETY: out-pointer to a local; cuDriverGetVersion exists in every libcuda.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|e| format!("cuDriverGetVersion failed: {}", code_of(&e)))?;
    if version < MIN_DRIVER_API {
        return Err(format!(
            "the NVIDIA driver supports CUDA {} only; this tool needs {} or newer",
            api_version_label(version),
            api_version_label(MIN_DRIVER_API)
        ));
    }
    result::init().map_err(|e| match e.0 {
        sys::cudaError_enum::CUDA_ERROR_NO_DEVICE => {
            "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)".to_string()
        }
        _ => format!("cuInit failed: {}", code_of(&e)),
    })?;
    let count = result::device::get_count()
        .map_err(|e| format!("cuDeviceGetCount failed: {}", code_of(&e)))?;
    if count <= 0 {
        return Err("no CUDA device".into());
    }

    let mut environment = hwc_model::Environment::new();
    environment.insert(
        "cuda.driver_api_version".into(),
        api_version_label(version).into(),
    );
    environment.insert("cuda.device_count".into(), count.to_string().into());

    let nvml = Nvml::init();
    let nvml_index = match &nvml {
        Ok(n) => {
            if let Ok(v) = n.sys_driver_version() {
                environment.insert("nvidia.driver_version".into(), v.into());
            }
            nvml::index_by_bdf(n)
        }
        Err(e) => {
            environment.insert("nvml".into(), Setting::about("unavailable", e.to_string()));
            BTreeMap::new()
        }
    };

    let mut devices = Vec::new();
    for ordinal in 0..count {
        let mut device = query_device(ordinal)?;
        if let (Ok(n), Some(&index)) = (&nvml, nvml_index.get(&device.pci_bdf)) {
            if let Ok(d) = n.device_by_index(index) {
                device.nvml = Some(nvml::facts(&d, index));
            }
        }
        devices.push(device);
    }
    let driver_version = environment
        .get("nvidia.driver_version")
        .map(|s| s.value.clone())
        .unwrap_or_else(|| format!("CUDA {}", api_version_label(version)));
    Ok(CudaProbe {
        devices,
        driver_version,
        environment,
    })
}

fn query_device(ordinal: c_int) -> Result<CudaDevice, String> {
    let fail = |call: &str, e: result::DriverError| {
        format!("{call} failed on CUDA device {ordinal}: {}", code_of(&e))
    };
    let dev = result::device::get(ordinal).map_err(|e| fail("cuDeviceGet", e))?;
    let name = result::device::get_name(dev).map_err(|e| fail("cuDeviceGetName", e))?;
    // SAFETY: dev is a valid device handle from cuDeviceGet.
    let memory_bytes =
        unsafe { result::device::total_mem(dev) }.map_err(|e| fail("cuDeviceTotalMem", e))?;
    let attr = |a: sys::CUdevice_attribute| -> Result<u32, String> {
        // SAFETY: dev is valid; the attribute is a plain integer query.
        let v = unsafe { result::device::get_attribute(dev, a) }
            .map_err(|e| fail("cuDeviceGetAttribute", e))?;
        Ok(u32::try_from(v).unwrap_or(0))
    };
    use sys::CUdevice_attribute::*;
    let l2_cache_bytes = u64::from(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?);
    let multiprocessors = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let compute_capability = (
        attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    );
    let copy_engines = attr(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)?;
    let mut bus_id = [0 as c_char; 32];
    // SAFETY: the buffer holds 32 bytes and its length is passed; the driver NUL-terminates.
    unsafe { sys::cuDeviceGetPCIBusId(bus_id.as_mut_ptr(), bus_id.len() as c_int, dev) }
        .result()
        .map_err(|e| fail("cuDeviceGetPCIBusId", e))?;
    let raw: Vec<u8> = bus_id
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let pci_bdf = normalize_bdf(&raw).unwrap_or(raw.to_ascii_lowercase());
    Ok(CudaDevice {
        ordinal: u32::try_from(ordinal).unwrap_or(0),
        pci_bdf,
        name,
        memory_bytes: memory_bytes as u64,
        l2_cache_bytes,
        multiprocessors,
        compute_capability,
        copy_engines,
        nvml: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_read_like_cuda_writes_them() {
        assert_eq!(api_version_label(13000), "13.0");
        assert_eq!(api_version_label(12090), "12.9");
        assert_eq!(api_version_label(11040), "11.4");
    }

    #[test]
    fn probe_never_panics_and_says_why_without_libcuda() {
        // SAFETY: only tries to dlopen the candidate names.
        let present = unsafe { sys::is_culib_present() };
        match probe() {
            Ok(p) => {
                assert!(present);
                assert!(!p.devices.is_empty());
                for d in &p.devices {
                    assert_eq!(normalize_bdf(&d.pci_bdf).as_deref(), Some(&*d.pci_bdf));
                }
            }
            Err(reason) => {
                assert!(!reason.is_empty());
                if !present {
                    assert!(reason.contains("libcuda"), "{reason}");
                }
            }
        }
    }
}
