//! Errors of the CUDA layer and how they reach the runner.

use cudarc::driver::DriverError;
use hwc_runner::BenchError;

use crate::params::ParamError;

impl From<hwc_numa::NumaError> for CudaError {
    fn from(e: hwc_numa::NumaError) -> Self {
        CudaError::Numa(e)
    }
}

/// Something a CUDA case could not do.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// A driver call returned an error.
    #[error("{call} failed: {code}")]
    Driver { call: &'static str, code: String },
    /// The case's parameters do not follow the planner's convention.
    #[error(transparent)]
    Params(#[from] ParamError),
    /// A host buffer could not be mapped or the thread not pinned (the cause is in the
    /// message, not a source: an error says its cause once).
    #[error("host memory: {0}")]
    Numa(hwc_numa::NumaError),
    /// The latch kernel gave up waiting before the host released it: the copies were not all
    /// queued in time (the driver's queue was full, or the host thread stalled), so submission
    /// may have been timed.
    #[error(
        "the latch timed out after {timeout_ms} ms before the host released it: submission was \
         not hidden from the timer"
    )]
    LatchTimeout { timeout_ms: u64 },
    /// A read, write or copy would reach past a buffer (a bug of ours, refused rather than
    /// clamped: a clamped check would pass on fewer bytes than were copied).
    #[error("bytes {offset}..{end} are past the end of a {capacity}-byte buffer")]
    OutOfRange {
        offset: usize,
        end: usize,
        capacity: usize,
    },
    /// The copied data is not what was sent.
    #[error("data check failed: {0}")]
    Mismatch(String),
    /// Device memory cannot be read back through a staging buffer of no bytes.
    #[error("no staging buffer to read device memory back through")]
    NoStaging,
    /// The case cannot run on this machine.
    #[error("{reason}")]
    Unavailable {
        reason: String,
        hint: Option<String>,
    },
}

impl CudaError {
    pub fn unavailable(reason: impl Into<String>, hint: Option<&str>) -> Self {
        CudaError::Unavailable {
            reason: reason.into(),
            hint: hint.map(str::to_string),
        }
    }
}

/// The error's name as the driver spells it (`CUDA_ERROR_OUT_OF_MEMORY`).
pub fn code_of(e: &DriverError) -> String {
    format!("{:?}", e.0)
}

/// Attach the call's name to a driver error.
pub fn driver(call: &'static str) -> impl FnOnce(DriverError) -> CudaError {
    move |e| CudaError::Driver {
        call,
        code: code_of(&e),
    }
}

impl From<CudaError> for BenchError {
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::Unavailable { reason, hint } => BenchError::Unavailable { reason, hint },
            other => BenchError::Failed(other.to_string()),
        }
    }
}
