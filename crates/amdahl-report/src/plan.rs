//! Rendering of `amdahl plan` results: tables, CSV and SVG from [`PlanResult`] and
//! [`SearchResult`]. Pure functions.

use crate::interval::{basis_note, with_band};
use crate::sig;
use crate::svg::{figure, Axis, Label, Plot, Scale, Series, Style, PALETTE};
use crate::table::{Align, Table};
use amdahl_model::catalog::grid::{year_label, GridIntensity};
use amdahl_model::plan::{
    DeviceClass, Hardware, PlanResult, RankedLayout, ScalingPoint, SearchResult,
    IDLE_FRACTION_OF_TDP,
};

/// "(France, 2023, lifecycle)": where an intensity comes from.
fn grid_note(g: Option<&GridIntensity>) -> String {
    g.map(|g| format!(" ({}, {}, {})", g.name, year_label(g.year), g.scope.name()))
        .unwrap_or_default()
}

/// The GEMM-efficiency curve a device is modelled with; `generic` says it borrows Ampere's.
fn class_note(hw: &Hardware) -> String {
    match hw.class {
        DeviceClass::Generic => "generic (Ampere constants: no curve for this architecture)".into(),
        c => c.name().into(),
    }
}

/// "idle 50 W, an estimate: 1/8 of TDP" when the idle power was not catalogued or given.
fn idle_note(hw: &Hardware) -> String {
    if hw.idle_power_estimated {
        format!(
            "idle {} W, an estimate: {} × TDP; set --idle-w",
            sig(hw.idle_power.get(), 3),
            IDLE_FRACTION_OF_TDP
        )
    } else {
        format!("idle {} W", sig(hw.idle_power.get(), 3))
    }
}

fn gib(b: f64) -> String {
    format!("{} GiB", sig(b / (1024.0 * 1024.0 * 1024.0), 3))
}

fn pct(x: f64) -> String {
    format!("{} %", sig(100.0 * x, 3))
}

/// Human-readable report of one prediction.
pub fn plan_table(r: &PlanResult) -> String {
    let l = &r.layout;
    // Mixtures of experts also say how many parameters a token uses (what MFU counts).
    let active = if r.model.moe.is_some() && r.active_parameters > 0.0 {
        format!(", {} B active", sig(r.active_parameters / 1e9, 4))
    } else {
        String::new()
    };
    let mut out = format!(
        "{} ({} B parameters{active}) on {} × {}: {}\n\n",
        r.model.name,
        sig(r.parameters / 1e9, 4),
        r.gpus,
        r.device.name,
        l.label()
    );
    out.push_str(&figures_table(r));
    out.push_str("\nwhere the step goes\n");
    out.push_str(&breakdown_table(r));
    out.push_str(&format!(
        "\ntraining on {} tokens\n",
        sig(r.training.tokens, 3)
    ));
    out.push_str(&training_table(r));
    out.push_str("\nVégh view: strong scaling at fixed global batch (N counts GPUs)\n");
    out.push_str(&scaling_table(&r.scaling.strong));
    out.push_str("\nweak scaling at fixed batch per replica\n");
    out.push_str(&scaling_table(&r.scaling.weak));
    if let Some(w) = &r.scaling.precision_whatif {
        out.push_str(&format!(
            "\nprecision what-if {} → {} (peak {} TFLOP/s{}; communication bytes unchanged)\n",
            w.from.name(),
            w.to.name(),
            sig(w.peak_tflops, 4),
            if w.hypothetical_peak {
                ", hypothetical 2 × bf16: the device has no fp8"
            } else {
                ""
            }
        ));
        out.push_str(&precision_table(w));
    }
    out
}

/// The headline figures of a step: time, throughput, utilisation and memory per GPU.
fn figures_table(r: &PlanResult) -> String {
    let mut t = Table::new(["quantity", "value"]);
    let iv = r.intervals.as_ref();
    let rows: Vec<(&str, String)> = vec![
        (
            "step time",
            with_band(
                format!("{} s", sig(r.step_time_s, 4)),
                iv.map(|i| &i.step_time_s),
                1.0,
            ),
        ),
        ("microbatches per step", r.microbatches.to_string()),
        (
            "tokens/s",
            with_band(sig(r.tokens_per_s, 4), iv.map(|i| &i.tokens_per_s), 1.0),
        ),
        (
            "TFLOP/s per GPU (executed)",
            with_band(sig(r.tflops_per_gpu, 4), iv.map(|i| &i.tflops_per_gpu), 1.0),
        ),
        ("TFLOP/s per GPU (model)", sig(r.model_tflops_per_gpu, 4)),
        ("MFU", pct(r.mfu)),
        ("HFU", pct(r.hfu)),
        ("GEMM-efficiency curve", class_note(&r.device)),
        (
            "memory per GPU",
            format!(
                "{} of {} ({})",
                gib(r.memory_per_gpu_bytes),
                gib(r.memory.capacity.get()),
                if r.fits { "fits" } else { "DOES NOT FIT" }
            ),
        ),
        ("  weights", gib(r.memory.weights.get())),
        ("  gradients", gib(r.memory.gradients.get())),
        ("  optimizer state", gib(r.memory.optimizer.get())),
        ("  activations", gib(r.memory.activations.get())),
    ];
    for (k, v) in rows {
        t.row([k.to_string(), v]);
    }
    let mut out = t.render();
    if let Some(i) = iv {
        out.push_str(&basis_note(&[(
            "step time, tokens/s, TFLOP/s",
            &i.step_time_s,
        )]));
        if let Some(e) = &i.energy_kwh {
            out.push_str(&basis_note(&[("energy", e)]));
        }
    }
    out
}

/// Where the step's time goes, part by part, with each part's share.
fn breakdown_table(r: &PlanResult) -> String {
    let l = &r.layout;
    let b = &r.breakdown;
    let mut t = Table::new(["part", "seconds", "share"]);
    let mut parts = vec![
        ("compute (GEMM)", b.compute.get()),
        ("memory-bound", b.memory_bound.get()),
        ("TP communication", b.tp_comm.get()),
        ("PP communication", b.pp_comm.get()),
        ("DP communication", b.dp_comm.get()),
        ("pipeline bubble", b.bubble.get()),
        ("optimizer", b.optimizer.get()),
        ("other", b.other.get()),
    ];
    // Context parallelism's K/V ring, listed only where the layout has it.
    if r.layout.cp > 1 {
        parts.insert(5, ("CP communication", b.cp_comm.get()));
    }
    // Expert-parallel all-to-alls exist only for MoE layouts with --ep > 1.
    if l.ep > 1 || b.ep_comm.get() > 0.0 {
        parts.insert(5, ("EP all-to-all", b.ep_comm.get()));
    }
    // A calibrated per-step overhead (framework, launch, host), only where one was fitted.
    if b.overhead.get() > 0.0 {
        parts.push(("step overhead (calibrated)", b.overhead.get()));
    }
    for (k, v) in parts {
        t.row([k.to_string(), sig(v, 3), pct(v / r.step_time_s)]);
    }
    t.render()
}

/// The whole training run: steps, time, device-hours, power, energy, emissions and price.
fn training_table(r: &PlanResult) -> String {
    let c = &r.training;
    let mut t = Table::new(["quantity", "value"]);
    t.row(["steps".to_string(), sig(c.steps, 4)]);
    t.row([
        "wall time".to_string(),
        format!("{} days", sig(c.train_time.days(), 3)),
    ]);
    t.row(["device-hours".to_string(), sig(c.device_hours, 4)]);
    t.row([
        "power per device".to_string(),
        format!(
            "{} W ({})",
            sig(c.power_per_device.get(), 3),
            idle_note(&r.device)
        ),
    ]);
    t.row([
        "energy (× PUE)".to_string(),
        with_band(
            format!(
                "{} MWh (PUE {})",
                sig(c.facility_energy.kwh() / 1e3, 4),
                sig(c.pue, 3)
            ),
            r.intervals.as_ref().and_then(|i| i.energy_kwh.as_ref()),
            1e3,
        ),
    ]);
    t.row([
        "emissions".to_string(),
        format!(
            "{} t CO2e at {} g/kWh{}",
            sig(c.emissions.tonnes(), 4),
            sig(c.intensity.get(), 3),
            grid_note(r.grid.as_ref())
        ),
    ]);
    match (
        c.server_power_per_device,
        c.server_facility_energy,
        c.server_emissions,
        &r.device.server,
    ) {
        (Some(w), Some(e), Some(co2), Some(s)) => {
            t.row([
                "server (wall) per device".to_string(),
                format!(
                    "{} W: GPU + {:.0} W of host ({}{}), ÷ {} power-supply efficiency",
                    sig(w.get(), 3),
                    s.host_w_per_gpu,
                    s.name,
                    if s.estimated { ", estimated" } else { "" },
                    s.psu_efficiency
                ),
            ]);
            t.row([
                "energy, server (× PUE)".to_string(),
                format!(
                    "{} MWh, {} t CO2e",
                    sig(e.kwh() / 1e3, 4),
                    sig(co2.tonnes(), 4)
                ),
            ]);
        }
        _ => t.row([
            "server (wall) per device".to_string(),
            "no server known for this device: give --server or --host-w".to_string(),
        ]),
    }
    if let Some(p) = c.price {
        t.row(["price".to_string(), sig(p, 4)]);
    }
    t.render()
}

fn opt(x: Option<f64>) -> String {
    x.map(|v| sig(v, 4)).unwrap_or_else(|| "-".into())
}

/// The what-if as two rows that say which precision each is (without a precision column the
/// two rows would read as the same job).
fn precision_table(w: &amdahl_model::plan::scaling::PrecisionWhatIf) -> String {
    let rows = scaling_rows(&[w.base, w.whatif]);
    let mut t = Table::new(
        std::iter::once("precision".to_string())
            .chain(SCALING_HEADERS.iter().map(|h| h.to_string())),
    );
    for (p, r) in [w.from.name(), w.to.name()].into_iter().zip(rows) {
        t.row(std::iter::once(p.to_string()).chain(r));
    }
    t.render()
}

const SCALING_HEADERS: [&str; 12] = [
    "N", "DP", "batch", "step s", "TFLOP/s", "E", "α_eff", "1−α", "comm", "bubble", "serial",
    "fits",
];

fn scaling_table(pts: &[ScalingPoint]) -> String {
    let mut t = Table::new(SCALING_HEADERS);
    for r in scaling_rows(pts) {
        t.row(r);
    }
    t.render()
}

fn scaling_rows(pts: &[ScalingPoint]) -> Vec<Vec<String>> {
    pts.iter()
        .map(|p| {
            let parts = p.parts;
            vec![
                p.gpus.to_string(),
                p.dp.to_string(),
                p.batch.to_string(),
                sig(p.step_time_s, 4),
                sig(p.tflops_per_gpu, 4),
                sig(p.efficiency, 4),
                opt(p.alpha_eff.map(|a| a.min(1.0))),
                opt(p.serial_total),
                opt(parts.map(|x| x.communication)),
                opt(parts.map(|x| x.bubble)),
                opt(parts.map(|x| x.serial)),
                if p.fits { "yes" } else { "no" }.to_string(),
            ]
        })
        .collect()
}

/// `quantity,value` rows of the headline numbers and the breakdown.
pub fn plan_csv(r: &PlanResult) -> String {
    let b = &r.breakdown;
    let rows: [(&str, f64); 19] = [
        ("step_time_s", r.step_time_s),
        ("tokens_per_s", r.tokens_per_s),
        ("tflops_per_gpu", r.tflops_per_gpu),
        ("mfu", r.mfu),
        ("hfu", r.hfu),
        ("memory_per_gpu_bytes", r.memory_per_gpu_bytes),
        ("fits", if r.fits { 1.0 } else { 0.0 }),
        ("compute_s", b.compute.get()),
        ("memory_bound_s", b.memory_bound.get()),
        ("tp_comm_s", b.tp_comm.get()),
        ("pp_comm_s", b.pp_comm.get()),
        ("dp_comm_s", b.dp_comm.get()),
        ("bubble_s", b.bubble.get()),
        ("optimizer_s", b.optimizer.get()),
        ("other_s", b.other.get()),
        ("ep_comm_s", b.ep_comm.get()),
        ("train_time_s", r.training.train_time.get()),
        ("energy_kwh", r.training.facility_energy.kwh()),
        ("emissions_kg", r.training.emissions.kg()),
    ];
    let mut s = String::from("quantity,value\n");
    for (k, v) in rows {
        s.push_str(&format!("{k},{v}\n"));
    }
    s
}

/// Efficiency and 1−α parts vs N (strong scaling, with the fp8 what-if), and weak scaling.
pub fn plan_svg(r: &PlanResult) -> String {
    let pts = |v: &[ScalingPoint], f: &dyn Fn(&ScalingPoint) -> Option<f64>| {
        v.iter()
            .filter_map(|p| Some((p.gpus as f64, f(p)?)))
            .collect::<Vec<_>>()
    };
    let mut eff = Plot::new(
        format!("{}: efficiency vs N", r.model.name),
        Axis::new(Scale::Log10, "GPUs N").powers_of_two(),
        Axis::new(Scale::Linear, "efficiency E").range(0.0, 1.0),
    );
    eff.series.push(
        Series::new("strong (fixed batch)", PALETTE[0], Style::LinePoints)
            .points(pts(&r.scaling.strong, &|p| Some(p.efficiency))),
    );
    eff.series.push(
        Series::new("weak (fixed batch/replica)", PALETTE[1], Style::LinePoints)
            .points(pts(&r.scaling.weak, &|p| Some(p.efficiency))),
    );
    if let Some(w) = &r.scaling.precision_whatif {
        eff.series.push(
            Series::new(
                format!("strong, {} what-if", w.to.name()),
                PALETTE[2],
                Style::DashedLine,
            )
            .points(pts(&w.strong, &|p| Some(p.efficiency))),
        );
    }
    let mut parts = Plot::new(
        "1−α_eff by cause (strong scaling)",
        Axis::new(Scale::Log10, "GPUs N").powers_of_two(),
        Axis::new(Scale::Log10, "contribution to 1−α_eff"),
    );
    let s = &r.scaling.strong;
    for (i, (name, f)) in [
        (
            "communication",
            (&|p: &ScalingPoint| p.parts.map(|x| x.communication))
                as &dyn Fn(&ScalingPoint) -> Option<f64>,
        ),
        ("bubble", &|p: &ScalingPoint| p.parts.map(|x| x.bubble)),
        ("serial", &|p: &ScalingPoint| p.parts.map(|x| x.serial)),
    ]
    .into_iter()
    .enumerate()
    {
        parts
            .series
            .push(Series::new(name, PALETTE[i + 3], Style::LinePoints).points(pts(s, f)));
    }
    // A decade of headroom above the largest part: the curves span several decades and reach
    // every inside corner, so without it the legend hides markers wherever it goes.
    let values = parts
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|v| *v > 0.0 && v.is_finite());
    let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if lo.is_finite() && hi > lo {
        parts.y = parts.y.range(lo / 2.0, hi * 10.0);
    }
    figure(&[eff, parts], 520.0, 380.0)
}

fn ranked_table(rows: &[RankedLayout]) -> String {
    let mut t = Table::new([
        "#", "layout", "GPUs", "step s", "TFLOP/s", "MFU", "mem", "days", "GPU-h", "MWh", "t CO2e",
    ])
    .align(1, Align::Left);
    for r in rows {
        t.row([
            r.rank.to_string(),
            r.label.clone(),
            r.gpus.to_string(),
            sig(r.step_time_s, 4),
            sig(r.tflops_per_gpu, 4),
            pct(r.mfu),
            gib(r.memory_per_gpu_bytes),
            sig(r.train_time_s / 86_400.0, 3),
            sig(r.device_hours, 4),
            sig(r.energy_kwh / 1e3, 4),
            sig(r.emissions_kg / 1e3, 4),
        ]);
    }
    t.render()
}

/// At most `k` rows spread evenly over `v`, keeping the first and last.
fn thin(v: &[RankedLayout], k: usize) -> Vec<RankedLayout> {
    if v.len() <= k || k < 2 {
        return v.to_vec();
    }
    let last = v.len() - 1;
    let mut idx: Vec<usize> = (0..k).map(|i| i * last / (k - 1)).collect();
    idx.dedup();
    idx.iter().filter_map(|&i| v.get(i).cloned()).collect()
}

/// Human-readable search result: counts, top K, Pareto front.
/// One line on the listed layouts' step-time bands: the band is a factor of the prediction that
/// depends only on the class, so it is said once per class instead of in every row.
fn search_band_note(rows: &[RankedLayout]) -> String {
    let mut seen: Vec<String> = Vec::new();
    let mut out = String::new();
    for i in rows.iter().filter_map(|r| r.intervals.as_ref()) {
        let s = &i.step_time_s;
        if seen.contains(&s.basis) {
            continue;
        }
        seen.push(s.basis.clone());
        out.push_str(&match (s.low, s.high) {
            (Some(lo), Some(hi)) => format!(
                "step s, {:.0} % interval: {}–{} × the prediction ({})\n",
                100.0 * s.level,
                sig(lo / s.value, 3),
                sig(hi / s.value, 3),
                s.basis
            ),
            _ => format!("step s: {}\n", s.basis),
        });
    }
    out
}

pub fn search_table(r: &SearchResult) -> String {
    let rj = &r.rejected;
    let mut out = format!(
        "{} on {}{} × {}: {} layouts evaluated in {} s, {} fit, {} rejected \
         (memory {}, interleave/microbatches {}, ZeRO-2/3 with PP {}, batch too small {}, \
         DP × mbs not dividing the batch {})\n{}\n",
        r.model.name,
        if r.space.up_to { "up to " } else { "" },
        r.space.gpus,
        r.device.name,
        r.evaluated,
        sig(r.wall_time_s, 3),
        r.fitting,
        r.rejected_total,
        rj.memory,
        rj.interleave_microbatches,
        rj.zero_with_pipeline,
        rj.batch_too_small,
        rj.batch_not_divisible,
        if r.space.exact_batch {
            format!(
                "global batch: {} sequences in every layout",
                r.space.max_batch
            )
        } else {
            format!(
                "global batch: at most {} sequences (--batch-max): each layout trains on the \
                 largest multiple of DP × mbs not above it, shown in the B column",
                r.space.max_batch
            )
        },
    );
    out.push_str(
        "one row per parallel shape (TP, PP, DP, mbs, batch, precision), with its best ZeRO \
         stage, recomputation, SP, overlap and interleaving\n\n",
    );
    out.push_str(&format!(
        "top {} by {:?} (training on {} tokens; {} g/kWh{}, PUE {}; {}; GEMM curve {})\n",
        r.top.len(),
        r.objective,
        sig(r.space.cost.tokens, 3),
        sig(r.space.cost.intensity.get(), 3),
        grid_note(r.grid.as_ref()),
        sig(r.space.cost.pue, 3),
        idle_note(&r.device),
        class_note(&r.device)
    ));
    out.push_str(&ranked_table(&r.top));
    out.push_str(&search_band_note(&r.top));
    // The front can hold hundreds of near-identical layouts; the table shows an even sample
    // of it (the JSON and CSV keep all).
    let shown = thin(&r.pareto, r.top.len().max(2));
    out.push_str(&format!(
        "\nPareto front: training time vs energy ({} layouts{})\n",
        r.pareto.len(),
        if shown.len() < r.pareto.len() {
            format!(", {} shown", shown.len())
        } else {
            String::new()
        }
    ));
    out.push_str(&ranked_table(&shown));
    out
}

/// CSV of the top K then the Pareto front, one layout per row.
pub fn search_csv(r: &SearchResult) -> String {
    let mut s = String::from(
        "set,rank,layout,gpus,tp,pp,dp,interleave,mbs,batch,recompute,zero,sp,precision,\
         overlap_dp,step_time_s,tflops_per_gpu,mfu,memory_per_gpu_bytes,train_time_s,\
         device_hours,energy_kwh,emissions_kg\n",
    );
    for (set, rows) in [("top", &r.top), ("pareto", &r.pareto)] {
        for x in rows.iter() {
            let l = &x.layout;
            s.push_str(&format!(
                "{set},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                x.rank,
                x.label,
                x.gpus,
                l.tp,
                l.pp,
                l.dp,
                l.interleave,
                l.mbs,
                l.batch,
                l.recompute.name(),
                l.zero,
                l.sp,
                l.precision.name(),
                l.overlap_dp,
                x.step_time_s,
                x.tflops_per_gpu,
                x.mfu,
                x.memory_per_gpu_bytes,
                x.train_time_s,
                x.device_hours,
                x.energy_kwh,
                x.emissions_kg
            ));
        }
    }
    s
}

/// A search point's short name: its rank, parallel shape and precision (`#1 tp8 pp4 dp32 bf16`).
fn point_label(x: &RankedLayout) -> String {
    let l = &x.layout;
    format!(
        "#{} tp{} pp{} dp{} {}",
        x.rank,
        l.tp,
        l.pp,
        l.dp,
        l.precision.name()
    )
}

/// Training time vs energy of the top K (each labelled with its layout) and the Pareto front.
pub fn search_svg(r: &SearchResult) -> String {
    let xy = |v: &[RankedLayout]| {
        v.iter()
            .map(|x| (x.train_time_s / 86_400.0, x.energy_kwh))
            .collect::<Vec<_>>()
    };
    let mut p = Plot::new(
        format!("{}: time vs energy", r.model.name),
        Axis::new(Scale::Linear, "training time (days)"),
        Axis::new(Scale::Linear, "energy (kWh)"),
    );
    // The front can hold hundreds of layouts: a line, with the top K as points on top.
    p.series
        .push(Series::new("Pareto front", PALETTE[1], Style::Line).points(xy(&r.pareto)));
    p.series.push(
        Series::new(format!("top {}", r.top.len()), PALETTE[0], Style::Points).points(xy(&r.top)),
    );
    // Each point says which layout it is (those without room are listed under the figure).
    p.labels.extend(r.top.iter().map(|x| {
        let (px, py) = (x.train_time_s / 86_400.0, x.energy_kwh);
        Label {
            x: px,
            y: py,
            text: point_label(x),
        }
    }));
    figure(&[p], 640.0, 420.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::plan::{
        catalog_model, catalog_system, evaluate, CostInputs, Layout, Recompute,
    };

    fn result() -> PlanResult {
        let (Ok((hw, net)), Ok(m)) = (catalog_system("a100-80gb"), catalog_model("megatron-39b"))
        else {
            panic!("catalog entries missing")
        };
        let l = Layout {
            tp: 8,
            pp: 2,
            dp: 32,
            batch: 1536,
            recompute: Recompute::Full,
            ..Layout::default()
        };
        let e = evaluate(&m, &hw, &net, &l).unwrap_or_else(|e| panic!("{e}"));
        let inputs = CostInputs {
            tokens: 1e9,
            pue: 1.1,
            intensity: amdahl_model::catalog::grid::lookup("world")
                .unwrap_or_else(|e| panic!("{e}"))
                .g_per_kwh,
            price_per_device_hour: None,
        };
        PlanResult::new(&m, &hw, &net, &e, &inputs)
    }

    #[test]
    fn table_csv_svg_carry_the_result() {
        let r = result();
        let t = plan_table(&r);
        for needle in [
            "step time",
            "pipeline bubble",
            "α_eff",
            "fp8",
            "hypothetical",
        ] {
            assert!(t.contains(needle), "{needle} missing:\n{t}");
        }
        let csv = plan_csv(&r);
        assert!(csv.starts_with("quantity,value\nstep_time_s,"));
        assert_eq!(csv.lines().count(), 20);
        let svg = plan_svg(&r);
        assert!(svg.starts_with("<svg") && svg.contains("1−α_eff by cause"));
    }
}
