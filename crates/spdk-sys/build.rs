//! With the `spdk` feature: find SPDK (`SPDK_DIR`, else pkg-config), generate the bindings of
//! `wrapper.h` with bindgen, and hand the binary that links SPDK's NVMe driver and env the list of
//! libraries to keep (`DEP_SPDK_LINK_LIBS`). Without it: nothing.

fn main() {
    #[cfg(feature = "spdk")]
    spdk::build();
}

#[cfg(feature = "spdk")]
mod spdk {
    use std::path::PathBuf;

    pub fn build() {
        println!("cargo:rerun-if-env-changed=SPDK_DIR");
        println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
        println!("cargo:rerun-if-changed=wrapper.h");
        // A built tree's own pkg-config files list what its NVMe driver and env need (DPDK's PCI
        // bus and mempool drivers among them).
        if let Some(dir) = std::env::var_os("SPDK_DIR") {
            let mut paths = vec![PathBuf::from(dir).join("build/lib/pkgconfig")];
            if let Some(p) = std::env::var_os("PKG_CONFIG_PATH") {
                paths.extend(std::env::split_paths(&p));
            }
            let joined = std::env::join_paths(paths).expect("a PKG_CONFIG_PATH");
            // SAFETY: the build script is single-threaded here.
            unsafe { std::env::set_var("PKG_CONFIG_PATH", joined) };
        }
        let probe = |name: &str| {
            pkg_config::Config::new()
                .cargo_metadata(false)
                .probe(name)
                .unwrap_or_else(|e| {
                    panic!(
                        "the spdk feature needs SPDK: set SPDK_DIR to a built SPDK tree, or make \
                         pkg-config find {name} ({e})"
                    )
                })
        };
        let (nvme, env) = (probe("spdk_nvme"), probe("spdk_env_dpdk"));
        let mut includes = nvme.include_paths.clone();
        includes.extend(env.include_paths.clone());
        let mut link_dirs = nvme.link_paths.clone();
        link_dirs.extend(env.link_paths.clone());
        let mut libs: Vec<String> = Vec::new();
        for l in nvme.libs.iter().chain(&env.libs) {
            if !libs.contains(l) {
                libs.push(l.clone());
            }
        }
        for d in &link_dirs {
            println!("cargo:rustc-link-search=native={}", d.display());
        }
        // Every one must be kept (SPDK's libraries do not declare what they need), which the
        // link of the final binary does: `links = "spdk"` hands it the list as
        // DEP_SPDK_LINK_LIBS, and its build script wraps them in `--no-as-needed`.
        let all: Vec<&str> = libs
            .iter()
            .map(String::as_str)
            .chain(["ssl", "crypto", "numa", "uuid", "keyutils"])
            .collect();
        println!("cargo:link_libs={}", all.join(","));
        let mut b = bindgen::Builder::default()
            .header("wrapper.h")
            .allowlist_function("spdk_(env|nvme|dma|mem|vtophys|pci_addr|get_ticks).*")
            .allowlist_type("spdk_env_opts")
            .allowlist_var("SPDK_NVME_.*")
            // Packed structs holding aligned ones, which Rust refuses: opaque (not used).
            .opaque_type("spdk_nvme_ctrlr_data")
            .opaque_type("spdk_nvme_tcp_(cmd|rsp)")
            .derive_default(true)
            .layout_tests(false)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
        for i in &includes {
            b = b.clang_arg(format!("-I{}", i.display()));
        }
        let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
        b.generate()
            .expect("bindgen could not read SPDK's headers")
            .write_to_file(out.join("bindings.rs"))
            .expect("writing the bindings");
    }
}
