//! Links GNU libiberty's C++ demangler when the target is glibc Linux and `libiberty.a` is
//! installed (Debian/Ubuntu: `libiberty-dev`), so C++ names read exactly as `c++filt`
//! (binutils, built on the same code) prints them. Elsewhere (the static musl build, a
//! machine without the package) `cpp_demangle` demangles them instead, with a build warning:
//! its output differs from `c++filt` for some templates, literals and special names.
//!
//! `EMBER_LIBIBERTY_DIR` names the folder holding `libiberty.a` when it is not in one of the
//! usual library folders; `EMBER_LIBIBERTY=0` turns the link off.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rustc-check-cfg=cfg(ember_libiberty)");
    println!("cargo:rerun-if-env-changed=EMBER_LIBIBERTY_DIR");
    println!("cargo:rerun-if-env-changed=EMBER_LIBIBERTY");
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os != "linux" || env != "gnu" || std::env::var("EMBER_LIBIBERTY").as_deref() == Ok("0") {
        return;
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("EMBER_LIBIBERTY_DIR")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    for dir in [
        format!("/usr/lib/{arch}-linux-gnu"),
        "/usr/lib64".to_string(),
        "/usr/lib".to_string(),
    ] {
        dirs.push(PathBuf::from(dir));
    }
    match dirs.iter().find(|d| d.join("libiberty.a").is_file()) {
        Some(dir) => {
            println!(
                "cargo:rerun-if-changed={}",
                dir.join("libiberty.a").display()
            );
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=static=iberty");
            println!("cargo:rustc-cfg=ember_libiberty");
        }
        None => {
            for dir in &dirs {
                println!("cargo:rerun-if-changed={}", Path::new(dir).display());
            }
            println!(
                "cargo:warning=libiberty.a not found (apt-get install libiberty-dev): C++ names \
                 will be demangled by cpp_demangle, which differs from c++filt on some names"
            );
        }
    }
}
