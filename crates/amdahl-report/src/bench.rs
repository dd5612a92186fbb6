//! Rendering of `amdahl bench` results: tables with notes, CSV rows and SVG plots. Pure
//! functions of the report structs of `amdahl-bench`.

use crate::sig;
use crate::svg::{figure, Axis, Label, Plot, Scale, Series, Style, PALETTE};
use crate::table::Table;
use amdahl_bench::energy::{EnergyReading, EnergyStatus};
use amdahl_bench::gemm::GemmReport;
use amdahl_bench::machine::MachineInfo;
use amdahl_bench::memory::MemoryReport;
use amdahl_bench::roofline::RooflineReport;
use amdahl_bench::scaling::{ScalingAnalysis, ScalingReport};
use amdahl_bench::sparse::SparseReport;
use amdahl_bench::Precision;
use amdahl_model::scaling::analysis::Trend;

const GIGA: f64 = 1e9;
const NOT_MEASURED: &str = "not measured";

/// Headers and rows of a result, rendered as a table or as CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Grid {
    fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn table(&self) -> String {
        let mut t = Table::new(self.headers.clone());
        for r in &self.rows {
            t.row(r.clone());
        }
        t.render()
    }

    pub fn csv(&self) -> Result<String, csv::Error> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&self.headers)?;
        for r in &self.rows {
            w.write_record(r)?;
        }
        let bytes = w.into_inner().map_err(|e| e.into_error())?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

fn energy(e: &Option<EnergyReading>) -> String {
    e.as_ref().map_or(NOT_MEASURED.into(), |e| {
        format!("{} {}", sig(e.joules_per_unit, 3), e.unit)
    })
}

fn header(title: &str, m: &MachineInfo, debug: bool) -> String {
    let mut s = format!(
        "{title} on {} ({} logical CPUs, {} thread(s) used)\n",
        m.cpu_model.as_deref().unwrap_or("unknown CPU"),
        m.logical_cpus,
        m.threads.used
    );
    if debug {
        s.push_str("note: debug build, timings are not representative (build with --release)\n");
    }
    s.push('\n');
    s
}

fn energy_note(e: &EnergyStatus) -> String {
    match e {
        EnergyStatus::Measured { source, missing } => {
            let mut s = format!(
                "energy: measured over the timed repeats (whole machine: other load counts too) with {source}\n"
            );
            if let Some(m) = missing {
                s.push_str(&format!("energy: {m}\n"));
            }
            s
        }
        EnergyStatus::NotMeasured { reason } => format!("energy: {NOT_MEASURED} ({reason})\n"),
    }
}

// ---------------------------------------------------------------- gemm

pub fn gemm_grid(r: &GemmReport) -> Grid {
    let mut g = Grid::new(&[
        "precision",
        "n",
        "threads",
        "min G/s",
        "median G/s",
        "max G/s",
        "median s",
        "energy",
    ]);
    for row in &r.rows {
        g.rows.push(vec![
            row.precision.to_string(),
            row.n.to_string(),
            row.threads.to_string(),
            sig(row.rate.min / GIGA, 4),
            sig(row.rate.median / GIGA, 4),
            sig(row.rate.max / GIGA, 4),
            sig(row.seconds.median.0, 3),
            energy(&row.energy),
        ]);
    }
    g
}

pub fn gemm_text(r: &GemmReport) -> String {
    let mut s = header("GEMM C = A·B (2·n³ operations)", &r.machine, r.debug_build);
    s.push_str(&gemm_grid(r).table());
    s.push_str(&format!(
        "\nG/s: GFLOP/s (int8: GOP/s); {} warm-up run(s), then {} timed\n",
        r.warmup, r.repeats
    ));
    for p in &r.precisions {
        s.push_str(&format!(
            "{:<5} {} arithmetic {}: {}\n",
            p.precision.to_string(),
            if p.arithmetic.native {
                "native"
            } else {
                "EMULATED"
            },
            p.arithmetic.arithmetic,
            p.arithmetic.kernel
        ));
    }
    for v in &r.verification {
        s.push_str(&format!(
            "check {:<5} {}×{}·{}×{} vs naive reference: max |error| {}, {} of the allowed bound — {}\n",
            v.precision.to_string(),
            v.shape.0,
            v.shape.1,
            v.shape.1,
            v.shape.2,
            sig(v.max_abs_error, 3),
            sig(v.max_error_ratio, 2),
            if v.passed { "ok" } else { "FAILED" }
        ));
    }
    s.push_str(&energy_note(&r.energy));
    s
}

pub fn gemm_svg(r: &GemmReport) -> String {
    let most = r.rows.iter().map(|x| x.threads).max().unwrap_or(1);
    let mut p = Plot::new(
        format!("GEMM throughput, {most} thread(s)"),
        Axis::new(Scale::Log10, "matrix order n").powers_of_two(),
        Axis::new(Scale::Log10, "GFLOP/s (int8: GOP/s), median"),
    );
    for (i, prec) in Precision::ALL.iter().enumerate() {
        let pts: Vec<(f64, f64)> = r
            .rows
            .iter()
            .filter(|x| x.precision == *prec && x.threads == most)
            .map(|x| (x.n as f64, x.rate.median / GIGA))
            .collect();
        if !pts.is_empty() {
            p.series.push(
                Series::new(prec.name(), PALETTE[i % PALETTE.len()], Style::LinePoints).points(pts),
            );
        }
    }
    figure(&[p], 640.0, 420.0)
}

// ---------------------------------------------------------------- sparse

pub fn sparse_grid(r: &SparseReport) -> Grid {
    let mut g = Grid::new(&[
        "sparsity %",
        "nnz",
        "median s",
        "sparse/dense time",
        "useful GFLOP/s",
        "energy",
    ]);
    for row in &r.rows {
        g.rows.push(vec![
            sig(row.sparsity * 100.0, 3),
            row.nnz.to_string(),
            sig(row.seconds.median.0, 3),
            sig(row.time_ratio, 3),
            sig(row.useful_rate.median / GIGA, 3),
            energy(&row.energy),
        ]);
    }
    g
}

pub fn sparse_text(r: &SparseReport) -> String {
    let mut s = header(
        &format!("Sparse (CSR) × dense vs dense fp32, n = {}", r.n),
        &r.machine,
        r.debug_build,
    );
    s.push_str(&sparse_grid(r).table());
    s.push_str(&format!(
        "\ndense: median {} s, {} GFLOP/s\n",
        sig(r.dense_seconds.median.0, 3),
        sig(r.dense_rate.median / GIGA, 4)
    ));
    s.push_str(&match r.crossover_time {
        Some(c) => format!(
            "crossover (time): skipping zeros pays from {} % sparsity\n",
            sig(c * 100.0, 3)
        ),
        None => "crossover (time): sparse never beat dense in the measured range\n".into(),
    });
    s.push_str(&match (r.crossover_energy, &r.energy) {
        (Some(c), _) => format!("crossover (energy): {} % sparsity\n", sig(c * 100.0, 3)),
        (None, EnergyStatus::Measured { missing: None, .. }) => {
            "crossover (energy): sparse never used less energy\n".into()
        }
        (
            None,
            EnergyStatus::Measured {
                missing: Some(_), ..
            },
        ) => {
            format!("crossover (energy): {NOT_MEASURED} (not every case has a reading)\n")
        }
        (None, EnergyStatus::NotMeasured { reason }) => {
            format!("crossover (energy): {NOT_MEASURED} ({reason})\n")
        }
    });
    s.push_str(&energy_note(&r.energy));
    s.push_str(&format!(
        "check: max |sparse − dense| {} (bound {})\n",
        sig(r.max_abs_diff, 3),
        sig(r.diff_bound, 3)
    ));
    s
}

pub fn sparse_svg(r: &SparseReport) -> String {
    let mut p = Plot::new(
        format!("Sparse × dense vs dense, n = {}", r.n),
        Axis::new(Scale::Linear, "sparsity of A (%)").range(0.0, 100.0),
        Axis::new(Scale::Log10, "time sparse / dense (median)"),
    );
    p.series.push(
        Series::new("sparse / dense", PALETTE[0], Style::LinePoints)
            .points(r.rows.iter().map(|x| (x.sparsity * 100.0, x.time_ratio))),
    );
    p.series.push(
        Series::new("break-even", PALETTE[7], Style::DashedLine).points([(0.0, 1.0), (100.0, 1.0)]),
    );
    if let Some(c) = r.crossover_time {
        p.labels.push(Label {
            x: c * 100.0,
            y: 1.0,
            text: format!("crossover {} %", sig(c * 100.0, 3)),
        });
    }
    figure(&[p], 640.0, 420.0)
}

// ---------------------------------------------------------------- memory

pub fn memory_grid(r: &MemoryReport) -> Grid {
    let mut g = Grid::new(&[
        "kernel",
        "bytes/pass",
        "best GB/s",
        "median GB/s",
        "min GB/s",
        "energy",
    ]);
    for row in &r.stream {
        g.rows.push(vec![
            row.kernel.name().to_string(),
            sig(row.bytes, 4),
            sig(row.rate.max / GIGA, 4),
            sig(row.rate.median / GIGA, 4),
            sig(row.rate.min / GIGA, 4),
            energy(&row.energy),
        ]);
    }
    g
}

pub fn memory_text(r: &MemoryReport) -> String {
    let mut s = header("STREAM (McCalpin) bandwidth", &r.machine, r.debug_build);
    s.push_str(&format!(
        "arrays of {} f64 ({} MB each){}\n\n",
        r.stream_len,
        sig(r.stream_len as f64 * 8.0 / 1e6, 3),
        if r.fits_in_cache {
            "; they fit in the last-level cache: this measures the cache, not memory"
        } else {
            ""
        }
    ));
    s.push_str(&memory_grid(r).table());
    s.push_str(&format!(
        "validation: {}\n",
        if r.validated { "ok" } else { "FAILED" }
    ));
    if !r.sweep.is_empty() {
        let mut t = Table::new(["working set", "GB/s (1 thread, read)"]);
        for p in &r.sweep {
            t.row([kib(p.working_set_bytes), sig(p.bandwidth / GIGA, 4)]);
        }
        s.push('\n');
        s.push_str(&t.render());
        let mut t = Table::new(["level", "size", "GB/s (median)"]);
        for l in &r.levels {
            t.row([
                l.level.clone(),
                l.size_bytes.map_or("-".into(), kib),
                l.bandwidth.map_or("no point".into(), |b| sig(b / GIGA, 4)),
            ]);
        }
        s.push('\n');
        s.push_str(&t.render());
    }
    s.push_str(&energy_note(&r.energy));
    s
}

fn kib(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{} MiB", sig(b as f64 / (1u64 << 20) as f64, 3))
    } else {
        format!("{} KiB", b >> 10)
    }
}

pub fn memory_svg(r: &MemoryReport) -> String {
    let mut p = Plot::new(
        "Read bandwidth vs working set (1 thread)",
        Axis::new(Scale::Log10, "working set (KiB)").powers_of_two(),
        Axis::new(Scale::Log10, "GB/s"),
    );
    p.series.push(
        Series::new("read", PALETTE[0], Style::LinePoints).points(
            r.sweep
                .iter()
                .map(|x| (x.working_set_bytes as f64 / 1024.0, x.bandwidth / GIGA)),
        ),
    );
    let top = r
        .sweep
        .iter()
        .map(|x| x.bandwidth / GIGA)
        .fold(f64::NAN, f64::max);
    let bottom = r
        .sweep
        .iter()
        .map(|x| x.bandwidth / GIGA)
        .fold(f64::NAN, f64::min);
    for (i, c) in r.machine.caches.iter().enumerate() {
        let x = c.size_bytes as f64 / 1024.0;
        p.series.push(
            Series::new("", PALETTE[(i + 1) % PALETTE.len()], Style::DashedLine)
                .points([(x, bottom), (x, top)]),
        );
        p.labels.push(Label {
            x,
            y: top,
            text: format!("L{} {}", c.level, kib(c.size_bytes)),
        });
    }
    figure(&[p], 640.0, 420.0)
}

// ---------------------------------------------------------------- roofline

pub fn roofline_grid(r: &RooflineReport) -> Grid {
    let mut g = Grid::new(&[
        "kernel",
        "FLOP/byte",
        "GFLOP/s",
        "roof GFLOP/s",
        "% of roof",
        "bound",
    ]);
    for k in &r.kernels {
        g.rows.push(vec![
            k.name.clone(),
            sig(k.intensity, 3),
            sig(k.rate / GIGA, 4),
            sig(k.attainable / GIGA, 4),
            sig(100.0 * k.rate / k.attainable, 3),
            k.bound.clone(),
        ]);
    }
    g
}

pub fn roofline_text(r: &RooflineReport) -> String {
    let mut s = header(
        "Roofline (Williams, Waterman & Patterson 2009)",
        &r.machine,
        r.debug_build,
    );
    s.push_str(&format!(
        "bandwidth β = {} GB/s (best STREAM kernel, best run)\n",
        sig(r.bandwidth / GIGA, 4)
    ));
    for roof in &r.roofs {
        s.push_str(&format!(
            "{} peak π = {} GFLOP/s (GEMM n={}), ridge point π/β = {} FLOP/byte\n",
            roof.precision,
            sig(roof.peak / GIGA, 4),
            roof.at_n,
            sig(roof.ridge, 3)
        ));
    }
    s.push('\n');
    s.push_str(&roofline_grid(r).table());
    if r.kernels.iter().any(|k| k.bound == "cache") {
        s.push_str(
            "cache: above its roof — the kernel's data stayed in cache, so not all of its bytes \
             came from memory\n",
        );
    }
    s
}

pub fn roofline_svg(r: &RooflineReport) -> String {
    // Headroom above the highest roof so kernel labels near the peak stay readable.
    let top = r.roofs.iter().map(|x| x.peak / GIGA).fold(0.0, f64::max) * 3.0;
    let bottom = r
        .kernels
        .iter()
        .map(|k| k.rate / GIGA)
        .fold(f64::INFINITY, f64::min)
        / 3.0;
    let mut y = Axis::new(Scale::Log10, "GFLOP/s");
    if top > 0.0 && bottom.is_finite() && bottom > 0.0 && top > bottom {
        y = y.range(bottom, top);
    }
    let mut p = Plot::new(
        "Roofline of this machine (measured)",
        Axis::new(Scale::Log10, "operational intensity (FLOP/byte)"),
        y,
    );
    let lo = r
        .kernels
        .iter()
        .map(|k| k.intensity)
        .chain(r.roofs.iter().map(|x| x.ridge))
        .fold(f64::INFINITY, f64::min)
        / 4.0;
    let hi = r
        .kernels
        .iter()
        .map(|k| k.intensity)
        .chain(r.roofs.iter().map(|x| x.ridge))
        .fold(0.0, f64::max)
        * 4.0;
    for (i, roof) in r.roofs.iter().enumerate() {
        let (peak, beta) = (roof.peak / GIGA, r.bandwidth / GIGA);
        p.series.push(
            Series::new(
                format!("{} roof", roof.precision),
                PALETTE[i % PALETTE.len()],
                Style::Line,
            )
            .points([(lo, beta * lo), (roof.ridge, peak), (hi, peak)]),
        );
        p.labels.push(Label {
            x: roof.ridge,
            y: peak,
            text: format!("ridge {} FLOP/B", sig(roof.ridge, 3)),
        });
    }
    for (i, prec) in [Precision::Fp64, Precision::Fp32].iter().enumerate() {
        let pts: Vec<(f64, f64)> = r
            .kernels
            .iter()
            .filter(|k| k.precision == *prec)
            .map(|k| (k.intensity, k.rate / GIGA))
            .collect();
        if !pts.is_empty() {
            p.series.push(
                Series::new(
                    format!("{prec} kernels"),
                    PALETTE[(i + 2) % PALETTE.len()],
                    Style::Points,
                )
                .points(pts),
            );
        }
    }
    for k in &r.kernels {
        p.labels.push(Label {
            x: k.intensity,
            y: k.rate / GIGA,
            text: k.name.clone(),
        });
    }
    figure(&[p], 760.0, 480.0)
}

// ---------------------------------------------------------------- scaling

pub fn scaling_grid(r: &ScalingReport) -> Grid {
    let mut g = Grid::new(&[
        "kernel",
        "threads",
        "median s",
        "speedup",
        "efficiency",
        "Karp–Flatt e",
        "α_eff",
        "energy",
    ]);
    for s in &r.series {
        for p in &s.points {
            g.rows.push(vec![
                s.kernel.clone(),
                p.threads.to_string(),
                sig(p.seconds.median.0, 3),
                sig(p.speedup, 3),
                sig(p.efficiency, 3),
                p.karp_flatt.map_or("-".into(), |e| sig(e, 3)),
                p.alpha_eff.map_or("-".into(), |a| sig(a, 4)),
                energy(&p.energy),
            ]);
        }
    }
    g
}

pub fn scaling_text(r: &ScalingReport) -> String {
    let mut s = header("Thread scaling", &r.machine, r.debug_build);
    s.push_str(&scaling_grid(r).table());
    s.push_str("\nN counts threads (one per logical CPU).\n");
    for series in &r.series {
        s.push_str(&scaling_fit_text(&series.kernel, &series.analysis));
        if series
            .points
            .iter()
            .any(|p| p.karp_flatt.is_some_and(|e| e >= 1.0))
        {
            s.push_str(
                "  Karp–Flatt e ≥ 1 at some N: more threads were not faster there — other load \
                 on the machine, or a problem too small to split\n",
            );
        }
    }
    s.push_str(&energy_note(&r.energy));
    s
}

/// The fitter's verdict for one kernel: chosen model, 1 − α, trend and predictions, or why there
/// is no fit.
fn scaling_fit_text(kernel: &str, a: &ScalingAnalysis) -> String {
    let Some(f) = &a.fit else {
        return format!(
            "{kernel}: {}\n",
            a.no_fit
                .as_deref()
                .unwrap_or("no fit; per-point Karp–Flatt only")
        );
    };
    let trend = match f.trend {
        None | Some(Trend::Untested) => "undetermined (needs 3 or more points beyond 1 thread)",
        Some(Trend::Constant) => "constant (Amdahl's law describes it)",
        Some(Trend::Rising) => "rising (overhead grows with threads)",
        Some(Trend::Falling) => "falling (superlinear effects or a noisy baseline)",
    };
    let mut s = format!(
        "{kernel}: model {} ({}), 1−α = {}, α_eff = {} (N = {}); Karp–Flatt trend {trend}",
        f.model.name(),
        f.formula,
        sig(f.serial_fraction, 3),
        sig(f.alpha_eff, 4),
        a.n_counts,
    );
    if let Some(slope) = f.trend_slope {
        s.push_str(&format!(
            ", slope {} ± {} per thread",
            sig(slope, 2),
            f.trend_slope_stderr.map_or("-".into(), |e| sig(e, 2))
        ));
    }
    s.push('\n');
    s.push_str(&format!("  chosen by: {}\n", f.choice_reason));
    let mut tail = Vec::new();
    if let Some(h) = f.half_efficiency_threads {
        tail.push(format!("efficiency falls to 50 % at N ≈ {}", sig(h, 3)));
    }
    if let Some(p) = f.peak_threads {
        tail.push(format!("throughput peaks at N ≈ {}", sig(p, 3)));
    }
    if !tail.is_empty() {
        s.push_str(&format!("  {}\n", tail.join("; ")));
    }
    if !f.predicted.is_empty() {
        let cells: Vec<String> = f
            .predicted
            .iter()
            .map(|p| format!("E({:.0}) = {}", p.n, sig(p.efficiency, 3)))
            .collect();
        s.push_str(&format!(
            "  predicted ({}): {}\n",
            f.model.name(),
            cells.join(", ")
        ));
    }
    s
}

pub fn scaling_svg(r: &ScalingReport) -> String {
    let pmax = r
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.threads))
        .max()
        .unwrap_or(1) as f64;
    let mut p = Plot::new(
        "Speedup vs threads",
        Axis::new(Scale::Linear, "threads N").counts(),
        Axis::new(Scale::Linear, "speedup T(1)/T(N)"),
    );
    p.series.push(
        Series::new("ideal", PALETTE[7], Style::DashedLine).points([(1.0, 1.0), (pmax, pmax)]),
    );
    for (i, s) in r.series.iter().enumerate() {
        p.series.push(
            Series::new(
                s.kernel.clone(),
                PALETTE[i % PALETTE.len()],
                Style::LinePoints,
            )
            .points(s.points.iter().map(|x| (x.threads as f64, x.speedup))),
        );
    }
    figure(&[p], 640.0, 420.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_bench::gemm::{self, GemmConfig};
    use amdahl_bench::machine::Threads;
    use amdahl_bench::scaling::ScalingSeries;
    use amdahl_bench::stats::Stats;
    use amdahl_bench::Hooks;
    use amdahl_model::units::Seconds;

    fn tiny_gemm() -> GemmReport {
        let mut cfg = GemmConfig::quick(Threads {
            used: 1,
            capped_from: None,
        });
        cfg.sizes = vec![8];
        cfg.repeats = 1;
        gemm::run(&cfg, &mut Hooks::default()).unwrap()
    }

    /// `bench gemm --quick` (n = 64 and 128) was ticked 70, 80, 90, 100: a doubled size axis
    /// ticks at powers of two, its sizes among them.
    #[test]
    fn gemm_svg_ticks_the_sizes_run() {
        let mut r = tiny_gemm();
        r.rows = r
            .rows
            .iter()
            .flat_map(|row| {
                [64, 128].map(|n| {
                    let mut row = row.clone();
                    row.n = n;
                    row
                })
            })
            .collect();
        let f = crate::svg::testing::checked(|| gemm_svg(&r));
        let x = crate::svg::testing::labels(&f.panels[0].x_ticks);
        assert_eq!(x, ["32", "64", "128"]);
    }

    #[test]
    fn gemm_text_flags_emulation_and_missing_energy() {
        let r = tiny_gemm();
        let t = gemm_text(&r);
        assert!(t.contains("bf16  EMULATED arithmetic fp32"), "{t}");
        assert!(t.contains("fp64  native"), "{t}");
        assert!(t.contains("energy: not measured"), "{t}");
        let csv = gemm_grid(&r).csv().unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "precision,n,threads,min G/s,median G/s,max G/s,median s,energy"
        );
        assert_eq!(lines.len(), 1 + 5);
        assert!(lines[1].starts_with("fp64,8,1,") && lines[1].ends_with(",not measured"));
        assert!(gemm_svg(&r).contains("<circle"));
    }

    fn synthetic(times: &[(usize, f64)]) -> ScalingReport {
        let times: Vec<(usize, Stats)> = times
            .iter()
            .map(|&(p, t)| {
                let t = Seconds(t);
                (
                    p,
                    Stats {
                        min: t,
                        median: t,
                        max: t,
                        repeats: 1,
                    },
                )
            })
            .collect();
        ScalingReport {
            schema: "amdahl.bench.scaling/1".into(),
            machine: tiny_gemm().machine,
            debug_build: false,
            series: vec![ScalingSeries::new("synthetic".into(), 1.0, &times)],
            energy: EnergyStatus::NotMeasured {
                reason: "no energy sensor wired to the benchmark".into(),
            },
        }
    }

    #[test]
    fn scaling_text_reads_the_fit() {
        // T(p) = 0.1 + 0.9/p: Amdahl with 1−α = 0.1; E = 50 % at N = 1.1/0.1 = 11.
        let r = synthetic(
            &(1..=8)
                .map(|p| (p, 0.1 + 0.9 / p as f64))
                .collect::<Vec<_>>(),
        );
        let t = scaling_text(&r);
        assert!(
            t.contains(
                "synthetic: model amdahl (T = a + b/N), 1−α = 0.100, α_eff = 0.9000 (N = threads)"
            ),
            "{t}"
        );
        assert!(t.contains("constant (Amdahl's law describes it)"), "{t}");
        assert!(t.contains("efficiency falls to 50 % at N ≈ 11.0"), "{t}");
        assert!(t.contains("predicted (amdahl): E(16) = 0.400, "), "{t}");
        assert!(scaling_svg(&r).contains("ideal"));
    }

    #[test]
    fn scaling_text_with_two_threads_gives_no_number() {
        let t = scaling_text(&synthetic(&[(1, 1.0), (2, 0.6)]));
        assert!(
            t.contains("synthetic: no fit possible with 2 points; per-point Karp–Flatt only ("),
            "{t}"
        );
        assert!(!t.contains("1−α ="), "{t}");
        assert!(!t.contains("predicted"), "{t}");
    }
}
