//! A run configuration checked before anything is detected, created or measured: what a flag
//! parser cannot check value by value (a value listed twice, `--nvme-bytes` against the block
//! sizes, an engine this build lacks), and every value's range, for a configuration that did
//! not come through the flags (`serve`'s).

use hwc_model::{size_label, RunConfig};
use hwc_plan::input::{
    check_host_threads, check_nvme_bytes, check_nvme_size, check_queue_depth, no_repeats,
};

/// `Err` with one line, in the flags' words, for a configuration that cannot run.
pub fn check(c: &RunConfig) -> Result<(), String> {
    let flag = |name: &str, r: Result<(), String>| r.map_err(|e| format!("--{name} {e}"));
    fn each<T>(name: &str, r: Result<T, String>) -> Result<(), String> {
        r.map(drop).map_err(|e| format!("--{name}: {e}"))
    }
    if let Some(p) = &c.paths {
        flag("paths", no_repeats(p, |x| x.to_string()))?;
    }
    if let Some(e) = &c.engines {
        flag("engines", no_repeats(e, |x| x.to_string()))?;
        let known = crate::engines::declarations();
        if let Some(unknown) = e.iter().find(|id| known.iter().all(|d| &d.id != *id)) {
            let ids: Vec<String> = known.iter().map(|d| d.id.to_string()).collect();
            return Err(format!(
                "--engines: no engine `{unknown}` in this build (its engines: {})",
                ids.join(", ")
            ));
        }
    }
    if let Some(t) = &c.threads {
        for &n in t {
            each("threads", check_host_threads(n))?;
        }
        flag("threads", no_repeats(t, u32::to_string))?;
    }
    if let Some(s) = &c.host_sizes {
        if s.contains(&0) {
            return Err("--host-sizes: a size must be at least one byte".into());
        }
        flag("host-sizes", no_repeats(s, |&b| size_label(b)))?;
    }
    for (name, list) in [
        ("drives", &c.drives),
        ("write-drives", &c.write_drives),
        ("spdk-drives", &c.spdk_drives),
    ] {
        if let Some(d) = list {
            let trimmed: Vec<&str> = d.iter().map(|x| x.trim()).collect();
            flag(name, no_repeats(&trimmed, |x| format!("`{x}`")))?;
        }
    }
    if c.write_drives.is_some() && !c.allow_destructive_writes {
        return Err("--write-drives needs --allow-destructive-writes".into());
    }
    if c.write_drives.is_some() && c.target.is_some() {
        return Err("--write-drives and --target cannot be used together".into());
    }
    if c.spdk_drives.is_some() && c.target.is_some() {
        return Err("--spdk-drives and --target cannot be used together".into());
    }
    if c.leave_bound && c.spdk_drives.is_none() {
        return Err("--leave-bound needs --spdk-drives".into());
    }
    if let Some(bars) = &c.p2p_bars {
        if c.spdk_drives.is_none() {
            return Err("--p2p-bar needs --spdk-drives (SPDK's driver does the DMA)".into());
        }
        for b in bars {
            crate::bar::parse(b).map_err(|e| format!("--p2p-bar: {e}"))?;
        }
        flag("p2p-bar", no_repeats(bars, |x| format!("`{x}`")))?;
    }
    if let Some(s) = &c.nvme_sizes {
        for &b in s {
            each("nvme-sizes", check_nvme_size(b))?;
        }
        flag("nvme-sizes", no_repeats(s, |&b| size_label(b)))?;
    }
    if let Some(q) = &c.queue_depths {
        for &n in q {
            each("queue-depths", check_queue_depth(n))?;
        }
        flag("queue-depths", no_repeats(q, u32::to_string))?;
    }
    if let Some(bytes) = c.nvme_bytes {
        let sizes = c
            .nvme_sizes
            .clone()
            .unwrap_or_else(|| hwc_plan::NVME_SIZES.to_vec());
        check_nvme_bytes(bytes, &sizes).map_err(|e| format!("--nvme-bytes: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_out_of_range_or_repeating_is_refused_in_the_flags_words() {
        let with = |f: &dyn Fn(&mut RunConfig)| {
            let mut c = RunConfig::new("out");
            f(&mut c);
            check(&c)
        };
        assert_eq!(with(&|_| {}), Ok(()));
        assert_eq!(
            with(&|c| c.threads = Some(vec![0])),
            Err("--threads: `0`: a thread count must be from 1 to 4096".into())
        );
        assert_eq!(
            with(&|c| c.threads = Some(vec![2, 2])),
            Err("--threads lists 2 twice".into())
        );
        let e = with(&|c| c.nvme_sizes = Some(vec![1000])).unwrap_err();
        assert!(
            e.starts_with("--nvme-sizes: `1000`: an NVMe block size must be a multiple"),
            "{e}"
        );
        let e = with(&|c| c.queue_depths = Some(vec![5000])).unwrap_err();
        assert_eq!(
            e,
            "--queue-depths: `5000`: a queue depth must be from 1 to 4096"
        );
        let e = with(&|c| c.engines = Some(vec![hwc_model::EngineId::new("fio")])).unwrap_err();
        assert!(
            e.starts_with("--engines: no engine `fio` in this build"),
            "{e}"
        );
        let e = with(&|c| c.write_drives = Some(vec!["nvme0".into()])).unwrap_err();
        assert_eq!(e, "--write-drives needs --allow-destructive-writes");
    }
}
