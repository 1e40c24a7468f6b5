//! Prints a summary and the default folded view of a profile.
//!
//! `cargo run -p ember-pprof --example pprof_info -- <profile.pb.gz>`

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: pprof_info <profile>");
        std::process::exit(2);
    };
    let profile = match ember_pprof::read_file(std::path::Path::new(&path)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let types: Vec<String> = profile
        .sample_type
        .iter()
        .map(|vt| ember_pprof::type_name(&profile, vt))
        .collect();
    println!(
        "# {} samples, {} locations, {} functions, {} mappings; sample types: {}",
        profile.sample.len(),
        profile.location.len(),
        profile.function.len(),
        profile.mapping.len(),
        types.join(", ")
    );
    if let Ok(index) = ember_pprof::sample_index(&profile, None) {
        print!(
            "{}",
            ember_pprof::folded_to_string(&ember_pprof::folded_stacks(&profile, index))
        );
    }
}
