//! Compiles upstream xxHash's XXH3 once per SIMD code path (`csrc/xxh3_path.c`) when its
//! header `xxhash.h` is found (Debian: `libxxhash-dev`; `XXHASH_INCLUDE_DIR`; or unpacked under
//! deps/dev/xxhsum); without it the crate still builds,
//! with no path (`cfg(hwc_xxhash)` unset), and the hash engine says why it cannot run.

use std::path::PathBuf;

/// (name suffix, XXH_VECTOR value, extra compiler flag) per path of one architecture.
fn paths(arch: &str) -> Vec<(&'static str, &'static str, Option<&'static str>)> {
    let mut v = vec![("scalar", "0", None)];
    match arch {
        "x86_64" => {
            v.push(("sse2", "1", None));
            v.push(("avx2", "2", Some("-mavx2")));
            v.push(("avx512", "3", Some("-mavx512f")));
        }
        "aarch64" => v.push(("neon", "4", None)),
        _ => {}
    }
    v
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(hwc_xxhash)");
    println!("cargo::rustc-check-cfg=cfg(hwc_xxh3_path, values(\"scalar\", \"sse2\", \"avx2\", \"avx512\", \"neon\"))");
    println!("cargo::rerun-if-changed=csrc");
    println!("cargo::rerun-if-env-changed=XXHASH_INCLUDE_DIR");
    println!("cargo::rerun-if-env-changed=HWC_XXHASH");
    // `HWC_XXHASH=off` builds as a machine without xxhash.h would (to check that build).
    if std::env::var("HWC_XXHASH").is_ok_and(|v| v == "off") {
        println!("cargo::rustc-env=HWC_XXHASH_MISSING=HWC_XXHASH=off");
        return;
    }
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    // XXHASH_INCLUDE_DIR, else the system's, else a Debian package unpacked under the
    // workspace's deps/dev/xxhsum (tools/xxh3-reference/README.md: a machine without apt).
    let unpacked = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("../../deps/dev/xxhsum/usr/include");
    let system = ["/usr/include", "/usr/local/include"]
        .iter()
        .any(|d| std::path::Path::new(d).join("xxhash.h").exists());
    let include = std::env::var_os("XXHASH_INCLUDE_DIR")
        .map(PathBuf::from)
        .or_else(|| (!system && unpacked.join("xxhash.h").exists()).then_some(unpacked));
    if let Some(dir) = &include {
        println!("cargo::rerun-if-changed={}", dir.join("xxhash.h").display());
    } else {
        for dir in ["/usr/include", "/usr/local/include"] {
            println!("cargo::rerun-if-changed={dir}/xxhash.h");
        }
    }
    let base = || {
        let mut b = cc::Build::new();
        // -O2, as Debian and most distributions build libxxhash and xxhsum: the figure is then
        // the throughput the machine's own XXH3 gives. At -O3 the AVX-512 path read 12–16 %
        // above Debian's xxhsum on the same path (tools/xxh3-reference/README.md).
        b.opt_level(2).warnings(false).cargo_warnings(false);
        if let Some(dir) = &include {
            b.include(dir);
        }
        b
    };
    // The version unit first: where the header is missing (or older than 0.8.0) it fails,
    // and the crate builds without any path.
    if let Err(e) = base().file("csrc/version.c").try_compile("hwc_xxh_version") {
        println!(
            "cargo::warning=xxhash.h (0.8.0 or newer) was not found, so the XXH3 hash path will \
             be waived; install libxxhash-dev (Debian/Ubuntu) or set XXHASH_INCLUDE_DIR ({})",
            first_line(&e.to_string())
        );
        println!(
            "cargo::rustc-env=HWC_XXHASH_MISSING={}",
            first_line(&e.to_string())
        );
        return;
    }
    for (name, vector, flag) in paths(&arch) {
        let mut b = base();
        b.file("csrc/xxh3_path.c")
            .define("XXH_VECTOR", vector)
            .define("HWC_PATH", name);
        if let Some(flag) = flag {
            b.flag(flag);
        }
        match b.try_compile(&format!("hwc_xxh3_{name}")) {
            Ok(()) => println!("cargo::rustc-cfg=hwc_xxh3_path=\"{name}\""),
            Err(e) => println!(
                "cargo::warning=the XXH3 {name} path did not compile and will be waived: {}",
                first_line(&e.to_string())
            ),
        }
    }
    println!("cargo::rustc-cfg=hwc_xxhash");
}

fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect()
}
