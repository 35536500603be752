//! Records the git revision the binary was built from (`HWCEILING_GIT_REVISION`), and, with the
//! `spdk` feature, links SPDK's libraries, every one kept (`hwc-spdk-sys`).
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let rev = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let rev = if dirty { format!("{rev}-dirty") } else { rev };
    println!("cargo:rustc-env=HWCEILING_GIT_REVISION={rev}");
    println!("cargo:rerun-if-changed=../../.git/HEAD");
    println!("cargo:rerun-if-changed=../../.git/index");
    if let Ok(libs) = std::env::var("DEP_SPDK_LINK_LIBS") {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        for l in libs.split(',').filter(|l| !l.is_empty()) {
            println!("cargo:rustc-link-arg=-l{l}");
        }
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
}
