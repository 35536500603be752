//! SPDK for hwceiling: [`perf_output`] reads the results that SPDK's `spdk_nvme_perf` prints.

pub mod perf_output;
