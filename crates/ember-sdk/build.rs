//! Tells the crate (and its tests) whether it is built with frame pointers, so tests can
//! require full stacks exactly when the walk can produce them.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(ember_sdk_frame_pointers)");
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let forced = flags.split('\x1f').collect::<Vec<_>>().windows(2).any(|w| {
        w[1].starts_with("force-frame-pointers=")
            && w[0] == "-C"
            && matches!(
                &w[1]["force-frame-pointers=".len()..],
                "yes" | "y" | "on" | "true"
            )
    }) || flags.split('\x1f').any(|f| {
        f.strip_prefix("-Cforce-frame-pointers=")
            .is_some_and(|v| matches!(v, "yes" | "y" | "on" | "true"))
    });
    if forced {
        println!("cargo::rustc-cfg=ember_sdk_frame_pointers");
    }
}
