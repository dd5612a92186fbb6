//! Benchmark: `top500` over all six shared spreadsheets (read + parse + analyse), printed as time
//! per call. Run in release: `cargo run --release -p amdahl-model --example bench_top500`. Target
//! (the `top500` specification): < 1 s per call. File reading is timed separately from parsing.

use amdahl_model::top500::{analyse, read_list, NCounts, Query};
use std::path::PathBuf;
use std::time::Instant;

const FILES: [&str; 6] = [
    "TOP500_201306.xls",
    "TOP500_201311.xls",
    "TOP500_201611.xls",
    "TOP500_201811.xls",
    "TOP500_202011.xlsx",
    "TOP500_202311.xlsx",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/top500")
        });
    let t = Instant::now();
    let files: Vec<(String, Vec<u8>)> = FILES
        .iter()
        .map(|f| {
            let p = dir.join(f);
            std::fs::read(&p).map(|b| (p.display().to_string(), b))
        })
        .collect::<Result<_, _>>()?;
    let read_s = t.elapsed().as_secs_f64();
    let call = |what: NCounts| -> Result<usize, Box<dyn std::error::Error>> {
        let lists = files
            .iter()
            .map(|(name, bytes)| read_list(name, bytes))
            .collect::<Result<Vec<_>, _>>()?;
        let r = analyse(
            &lists,
            &Query {
                n_counts: what,
                ..Query::default()
            },
        );
        Ok(r.systems.len())
    };
    let systems = call(NCounts::Cores)?; // warm-up
    let reps = 5;
    let mut per_file = Vec::new();
    for (name, bytes) in &files {
        let t = Instant::now();
        for _ in 0..reps {
            read_list(name, bytes)?;
        }
        per_file.push((name, t.elapsed().as_secs_f64() / reps as f64));
    }
    let t = Instant::now();
    for _ in 0..reps {
        call(NCounts::Accelerators)?;
    }
    let per_call = t.elapsed().as_secs_f64() / reps as f64;
    println!(
        "top500 over {} lists ({} systems), {} calls:",
        files.len(),
        systems,
        reps
    );
    for ((_, s), f) in per_file.iter().zip(FILES) {
        println!("  parse {f:<56} {:>8.1} ms", s * 1e3);
    }
    println!(
        "  {:<62} {:>8.1} ms",
        "read the six files from disk (once)",
        read_s * 1e3
    );
    println!(
        "  {:<62} {:>8.1} ms  (target < 1000 ms)",
        "read_list × 6 + analyse (--n accelerators), per call",
        per_call * 1e3
    );
    Ok(())
}
