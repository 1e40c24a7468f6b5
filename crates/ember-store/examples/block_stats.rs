//! What the bytes of a store's blocks are spent on: `block_stats BLOCK_DIR` prints, per
//! block file and summed, the bytes of each part (symbol tables, stack tree, per-profile
//! columns, sample labels, rollups, time chunks, index), and the profiles the blocks hold
//! when given `PROFILES` (pprof profiles ingested) as a second argument, per profile.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(
        args.get(1)
            .expect("usage: block_stats BLOCK_DIR [PROFILES]"),
    );
    let profiles: Option<f64> = args.get(2).and_then(|p| p.parse().ok());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "blk"))
        .collect();
    files.sort();
    let mut total: Vec<(String, u64)> = Vec::new();
    let mut bytes = 0u64;
    for f in &files {
        let file = std::fs::read(f).expect("block");
        bytes += file.len() as u64;
        let Some(parts) = ember_store::block_breakdown(&file) else {
            println!(
                "{}: not a readable block of the current or the fourth format",
                f.display()
            );
            continue;
        };
        if total.is_empty() {
            total = parts.iter().map(|(n, _)| (n.clone(), 0)).collect();
        }
        for ((_, t), (_, p)) in total.iter_mut().zip(&parts) {
            *t += p;
        }
    }
    println!("{} blocks, {bytes} bytes", files.len());
    for (name, b) in &total {
        let share = *b as f64 * 100.0 / bytes.max(1) as f64;
        match profiles {
            Some(n) => println!(
                "{name:>36}: {b:>12} bytes {share:5.1} % {:>9.0} per profile",
                *b as f64 / n
            ),
            None => println!("{name:>36}: {b:>12} bytes {share:5.1} %"),
        }
    }
}
