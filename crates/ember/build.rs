//! Build script of the `ember` binary: link it as a fixed-address (non-PIE) executable on Linux.
//!
//! Why: `ember` is one large multi-command binary. Linked as PIE, the dynamic loader must apply
//! tens of thousands of relative relocations at every start (reading ~0.5 MB of `.rela.dyn` and
//! writing every page of the ~0.4 MB `.data.rel.ro`), whatever the command. Short commands such
//! as `ember collapse` on a few MB of input pay that in peak memory and start-up time: measured
//! 6.7 MB → 4.9 MB peak RSS for `ember collapse /dev/null` (bench/COLLAPSE-RESULTS.md).
//! The objects stay position-independent (so proc-macros and tests are unaffected); only the
//! final link of the binary differs, which costs address-space randomisation of the binary's
//! own image (shared libraries, heap and stacks stay randomised).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    // GCC/Clang driver flag; other platforms' linkers do not know it.
    if os == "linux" && (env == "gnu" || env == "musl") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
