//! Benchmark: `amdahl fit` on 1,000,000 (n, time) points — CSV parsing, the whole analysis
//! (4 models incl. the Levenberg–Marquardt USL fit, AICc choice, Karp–Flatt trend,
//! predictions) and each model fit alone — printed as time per call, side by side.
//!
//! Run: `cargo run --release -p amdahl-model --example bench_fit [POINTS]`

use amdahl_model::scaling::input::parse_csv;
use amdahl_model::scaling::models::{fit, ModelKind};
use amdahl_model::scaling::{analyse, FitOptions};
use std::fmt::Write as _;
use std::time::Instant;

/// On-CPU time of this thread in seconds (Linux `/proc/thread-self/schedstat`, first field, ns):
/// unlike wall time it does not count time spent waiting for a core on a shared machine.
fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns * 1e-9)
}

/// (wall, CPU) seconds per call of `f`: the best of `reps` calls (the least disturbed by other
/// processes on a shared machine). CPU is NaN where schedstat is unavailable.
fn per_call<T>(reps: u32, mut f: impl FnMut() -> T) -> (f64, f64) {
    (0..reps)
        .map(|_| {
            let c = cpu_seconds();
            let t = Instant::now();
            std::hint::black_box(f());
            let wall = t.elapsed().as_secs_f64();
            let cpu = match (c, cpu_seconds()) {
                (Some(a), Some(b)) => b - a,
                _ => f64::NAN,
            };
            (wall, cpu)
        })
        .fold((f64::INFINITY, f64::INFINITY), |(w, c), (a, b)| {
            (w.min(a), c.min(b))
        })
}

fn main() {
    let points: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    // Strong scaling with a serial part, a log2 N collective and ±1 % deterministic ripple.
    let mut csv = String::with_capacity(points * 24);
    csv.push_str("n,time\n");
    let mut ns = Vec::with_capacity(points);
    let mut ts = Vec::with_capacity(points);
    for i in 1..=points {
        let n = i as f64;
        let ripple = 1.0 + 0.01 * ((i as f64) * 0.7).sin();
        let t = (0.5 + 1000.0 / n + 0.01 * n.log2()) * ripple;
        let _ = writeln!(csv, "{n},{t}");
        ns.push(n);
        ts.push(t);
    }
    let d = match parse_csv(&csv) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("benchmark input did not parse: {e}");
            std::process::exit(1);
        }
    };
    let opts = FitOptions {
        predict: vec![1024.0, 4096.0],
        ..Default::default()
    };
    let reps = 3;
    let parse = per_call(reps, || parse_csv(&csv).map(|d| d.series.len()));
    let whole = per_call(reps, || analyse(&d, &opts).map(|r| r.series.len()));
    println!("amdahl fit benchmark: {points} (n, time) points, best of {reps} calls, release build expected");
    let row = |name: &str, (wall, cpu): (f64, f64)| {
        println!("{name:<34} {:>10.1} {:>10.1}", wall * 1e3, cpu * 1e3);
    };
    println!("{:<34} {:>10} {:>10}", "step (ms per call)", "wall", "cpu");
    row("parse CSV", parse);
    row("analyse (all models + choice)", whole);
    for kind in ModelKind::ALL {
        let t = per_call(reps, || fit(kind, &ns, &ts, 1.0).map(|m| m.rss_rel).ok());
        row(&format!("  fit {}", kind.name()), t);
    }
    row("parse + analyse", (parse.0 + whole.0, parse.1 + whole.1));
    if let Ok(r) = analyse(&d, &opts) {
        let s = &r.series[0];
        println!(
            "chosen model: {} (1−α = {:.4e}), trend: {:?}",
            s.chosen_model.name(),
            s.serial_fraction,
            s.trend
        );
    }
}
