//! Rendering of `amdahl infer` results: tables, CSV and SVG from [`InferResult`] and
//! [`InferSearchResult`]. Pure functions.

use crate::escape::csv_unquoted;
use crate::interval::{basis_note, with_band};
use crate::sig;
use crate::svg::{figure, Axis, Label, Plot, Scale, Series, Style, PALETTE};
use crate::table::{Align, Table};
use amdahl_model::infer::{InferResult, InferSearchResult, ServingCandidate};
use std::fmt::Write;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn ms(s: f64) -> String {
    sig(s * 1e3, 3)
}

/// The human table of one configuration: what runs where, the headline figures, where a decode
/// step goes, TP scaling (Végh's view) and the precision what-if.
pub fn infer_table(r: &InferResult) -> String {
    let mut out = String::new();
    headline(&mut out, r);
    out.push_str(&figures_table(r));
    if let Some(i) = &r.intervals {
        out.push_str(&basis_note(&[
            ("throughput", &i.output_tokens_per_s),
            ("TTFT", &i.ttft_s),
            ("energy per token", &i.energy_per_token_j),
        ]));
    }
    decode_line(&mut out, r);
    let _ = writeln!(
        out,
        "\nVégh view: batch {} as TP grows (all-reduces are the part that does not shrink)",
        r.batch
    );
    out.push_str(&tp_scaling_table(r));
    let _ = writeln!(out, "\nprecision what-if at batch {}", r.batch);
    out.push_str(&precision_table(r));
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// The configuration (model, devices, parallelism, precisions) and the requests, with why the
/// batch is what it is.
fn headline(out: &mut String, r: &InferResult) {
    let _ = writeln!(
        out,
        "{} ({:.1}B parameters) on {} × {}: tp {} × pp {} × {} replica(s); weights {}, arithmetic {}, KV {}",
        r.model.name,
        r.parameters / 1e9,
        r.gpus,
        r.system,
        r.tp,
        r.pp,
        r.replicas,
        r.precision.name(),
        r.arithmetic,
        r.kv_precision.name()
    );
    let why = match &r.batch_choice {
        amdahl_model::infer::BatchChoice::Given => "given".to_string(),
        amdahl_model::infer::BatchChoice::MaxLoad => "the largest that fits".to_string(),
        amdahl_model::infer::BatchChoice::Rate { requests_per_s } => {
            format!("the smallest that sustains {requests_per_s} requests/s")
        }
    };
    let _ = writeln!(
        out,
        "requests: {} prompt + {} output tokens; batch {} ({why}; at most {} fit)\n",
        r.input_tokens, r.output_tokens, r.batch, r.max_batch
    );
}

/// The headline figures: latency, throughput, utilisation, memory, power, energy and carbon.
fn figures_table(r: &InferResult) -> String {
    let mut t = Table::new(["quantity", "value"])
        .align(0, Align::Left)
        .align(1, Align::Left);
    let rows = speed_rows(r)
        .into_iter()
        .chain(device_rows(r))
        .chain(energy_rows(r));
    for (k, v) in rows {
        t.row([k.to_string(), v]);
    }
    t.render()
}

/// Latency, throughput and how busy the devices are.
fn speed_rows(r: &InferResult) -> [(&'static str, String); 7] {
    let iv = r.intervals.as_ref();
    [
        (
            "time to first token",
            with_band(format!("{} ms", ms(r.ttft_s)), iv.map(|i| &i.ttft_s), 1e-3),
        ),
        (
            "time per output token",
            with_band(format!("{} ms", ms(r.tpot_s)), iv.map(|i| &i.tpot_s), 1e-3),
        ),
        ("end-to-end per request", format!("{} s", sig(r.e2e_s, 3))),
        (
            "output tokens/s (all replicas)",
            with_band(
                sig(r.output_tokens_per_s, 4),
                iv.map(|i| &i.output_tokens_per_s),
                1.0,
            ),
        ),
        ("requests/s", sig(r.requests_per_s, 4)),
        ("MFU", format!("{:.1} %", r.mfu * 100.0)),
        ("MBU (decode)", format!("{:.1} %", r.mbu * 100.0)),
    ]
}

/// What one device holds and draws.
fn device_rows(r: &InferResult) -> [(&'static str, String); 2] {
    [
        (
            "memory per device",
            format!(
                "{:.1} GiB of {:.1} usable (weights {:.1}, KV {:.1})",
                r.memory_per_gpu_bytes / GIB,
                r.memory.usable.get() / GIB,
                r.memory.weights.get() / GIB,
                r.memory.kv_cache.get() / GIB
            ),
        ),
        (
            "power per device",
            format!(
                "{:.0} W (prefill {:.0}, decode {:.0}; idle {:.0}, TDP {:.0}{})",
                r.power_per_gpu_w,
                r.power_prefill_w,
                r.power_decode_w,
                r.idle_power_w,
                r.tdp_w,
                r.power_cap_w
                    .map_or(String::new(), |c| format!(", capped at {c:.0}"))
            ),
        ),
    ]
}

/// Energy at the GPU and server scopes, and what it costs in carbon on the chosen grid.
fn energy_rows(r: &InferResult) -> [(&'static str, String); 6] {
    [
        (
            "energy per output token (GPU)",
            with_band(
                format!("{} J", sig(r.energy_per_token_j, 3)),
                r.intervals.as_ref().map(|i| &i.energy_per_token_j),
                1.0,
            ),
        ),
        (
            "energy per request (GPU)",
            format!("{} J", sig(r.energy_per_request_j, 3)),
        ),
        ("server (wall) per device", server_power(r)),
        (
            "energy per output token (server)",
            r.energy_per_token_server_j
                .map_or("-".into(), |j| format!("{} J", sig(j, 3))),
        ),
        (
            "per 1,000 requests (× PUE)",
            format!(
                "{} kWh, {} gCO2e (GPU scope){}",
                sig(r.kwh_per_1000_requests, 3),
                sig(r.co2e_per_1000_requests_g, 3),
                r.kwh_per_1000_requests_server
                    .map_or(String::new(), |k| format!(
                        "; {} kWh at the server scope",
                        sig(k, 3)
                    ))
            ),
        ),
        (
            "PUE, grid",
            format!(
                "{} ({}); {} gCO2e/kWh ({}, {}, {})",
                r.pue,
                r.pue_source,
                sig(r.grid_g_per_kwh, 4),
                r.grid.name,
                amdahl_model::catalog::grid::year_label(r.grid.year),
                r.grid.scope.name()
            ),
        ),
    ]
}

/// A device's share of the server's wall power, or what to give when no server is known.
fn server_power(r: &InferResult) -> String {
    match (&r.server, r.power_per_gpu_server_w) {
        (Some(s), Some(w)) => format!(
            "{w:.0} W: GPU + {:.0} W of host ({}{}), ÷ {} power-supply efficiency",
            s.host_w_per_gpu,
            s.name,
            if s.estimated { ", estimated" } else { "" },
            s.psu_efficiency
        ),
        _ => "no server known for this device: give --server or --host-w".into(),
    }
}

/// Where one decode step's time goes.
fn decode_line(out: &mut String, r: &InferResult) {
    let d = &r.decode;
    // The engine's per-sequence time is a term only where the engine has one (vLLM).
    let host = if d.engine_host_s > 0.0 {
        format!(
            " + {} per-sequence {}",
            r.engine.name(),
            ms(d.engine_host_s)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "\ndecode step {} ms = compute {} + memory {} + kernel latency {} + TP all-reduce {} + PP {} + overhead {}{host}",
        ms(r.tpot_s),
        ms(d.compute_s),
        ms(d.memory_s),
        ms(d.kernel_latency_s),
        ms(d.tp_comm_s),
        ms(d.pp_comm_s),
        ms(d.overhead_s)
    );
}

/// Time per output token, speedup and α_eff as tensor parallelism grows at this batch.
fn tp_scaling_table(r: &InferResult) -> String {
    let mut v = Table::new([
        "tp",
        "TPOT ms",
        "speedup",
        "efficiency",
        "α_eff",
        "all-reduce share",
        "J/token",
        "fits",
    ]);
    for p in &r.tp_scaling {
        v.row([
            p.tp.to_string(),
            ms(p.tpot_s),
            sig(p.speedup, 3),
            format!("{:.0} %", p.efficiency * 100.0),
            p.alpha_eff.map_or("-".into(), |a| sig(a, 4)),
            format!("{:.1} %", p.comm_share * 100.0),
            sig(p.energy_per_token_j, 3),
            if p.fits { "yes" } else { "no" }.into(),
        ]);
    }
    v.render()
}

/// The same batch at each weight precision.
fn precision_table(r: &InferResult) -> String {
    let mut w = Table::new([
        "weights",
        "arithmetic",
        "TTFT ms",
        "TPOT ms",
        "tokens/s",
        "J/token",
        "max batch",
        "fits",
    ])
    .align(1, Align::Left);
    for p in &r.precision_whatif {
        w.row([
            p.precision.name().to_string(),
            p.arithmetic.clone(),
            ms(p.ttft_s),
            ms(p.tpot_s),
            sig(p.output_tokens_per_s, 4),
            sig(p.energy_per_token_j, 3),
            p.max_batch.to_string(),
            if p.fits { "yes" } else { "no" }.into(),
        ]);
    }
    w.render()
}

/// One CSV row of the headline figures.
pub fn infer_csv(r: &InferResult) -> String {
    let mut out = String::from(
        "model,system,precision,kv_precision,tp,pp,gpus,input_tokens,output_tokens,batch,max_batch,\
         ttft_s,tpot_s,e2e_s,output_tokens_per_s,requests_per_s,mfu,mbu,memory_per_gpu_bytes,\
         power_per_gpu_w,energy_per_token_j,energy_per_request_j,pue,grid_g_per_kwh,\
         co2e_per_1000_requests_g\n",
    );
    let _ = writeln!(
        out,
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        csv_unquoted(&r.model.name),
        csv_unquoted(&r.system),
        r.precision.name(),
        r.kv_precision.name(),
        r.tp,
        r.pp,
        r.gpus,
        r.input_tokens,
        r.output_tokens,
        r.batch,
        r.max_batch,
        r.ttft_s,
        r.tpot_s,
        r.e2e_s,
        r.output_tokens_per_s,
        r.requests_per_s,
        r.mfu,
        r.mbu,
        r.memory_per_gpu_bytes,
        r.power_per_gpu_w,
        r.energy_per_token_j,
        r.energy_per_request_j,
        r.pue,
        r.grid_g_per_kwh,
        r.co2e_per_1000_requests_g
    );
    out
}

/// Latency vs throughput over the batch sweep, and energy per token vs batch.
pub fn infer_svg(r: &InferResult) -> String {
    let mut lat = Plot::new(
        format!("{}: latency vs throughput", r.model.name),
        Axis::new(Scale::Log10, "output tokens/s"),
        Axis::new(Scale::Log10, "time per output token (ms)"),
    );
    lat.series.push(
        Series::new("batch 1 … max", PALETTE[0], Style::LinePoints).points(
            r.batch_sweep
                .iter()
                .map(|p| (p.output_tokens_per_s, p.tpot_s * 1e3)),
        ),
    );
    let mut energy = Plot::new(
        "energy per output token vs batch",
        Axis::new(Scale::Log10, "batch (concurrent sequences)").powers_of_two(),
        Axis::new(Scale::Log10, "J per output token (IT)"),
    );
    energy.series.push(
        Series::new(
            format!("{} weights", r.precision.name()),
            PALETTE[1],
            Style::LinePoints,
        )
        .points(
            r.batch_sweep
                .iter()
                .map(|p| (f64::from(p.batch), p.energy_per_token_j)),
        ),
    );
    figure(&[lat, energy], 520.0, 380.0)
}

fn candidates_table(rows: &[ServingCandidate]) -> String {
    // A search over power caps says each candidate's cap beside its power.
    let capped = rows.iter().any(|c| c.power_cap_w.is_some());
    let watts = if capped { "W/GPU (cap)" } else { "W/GPU" };
    let mut t = Table::new([
        "#",
        "tp",
        "replicas",
        "weights",
        "arithmetic",
        "batch",
        "TTFT ms",
        "TPOT ms",
        "tokens/s",
        watts,
        "J/token",
        "gCO2e/1k req",
    ])
    .align(4, Align::Left);
    for (i, c) in rows.iter().enumerate() {
        t.row([
            (i + 1).to_string(),
            c.tp.to_string(),
            c.replicas.to_string(),
            c.precision.name().to_string(),
            c.arithmetic.clone(),
            c.batch.to_string(),
            ms(c.ttft_s),
            ms(c.tpot_s),
            sig(c.output_tokens_per_s, 4),
            match c.power_cap_w {
                Some(cap) => format!("{:.0} ({cap:.0})", c.power_per_gpu_w),
                None => format!("{:.0}", c.power_per_gpu_w),
            },
            sig(c.energy_per_token_j, 3),
            sig(c.co2e_per_1000_requests_g, 3),
        ]);
    }
    t.render()
}

/// The ranking and the Pareto front.
/// The listed candidates' bands of throughput and energy per token, once per class: a band is a
/// factor of the prediction that depends only on the class.
fn search_band_note(rows: &[ServingCandidate]) -> String {
    let mut seen: Vec<String> = Vec::new();
    let mut out = String::new();
    for i in rows.iter().filter_map(|r| r.intervals.as_ref()) {
        for (what, b) in [
            ("tokens/s", &i.output_tokens_per_s),
            ("J/token", &i.energy_per_token_j),
        ] {
            if seen.contains(&b.basis) {
                continue;
            }
            seen.push(b.basis.clone());
            out.push_str(&match (b.low, b.high) {
                (Some(lo), Some(hi)) => format!(
                    "{what}, {:.0} % interval: {}–{} × the prediction ({})\n",
                    100.0 * b.level,
                    sig(lo / b.value, 3),
                    sig(hi / b.value, 3),
                    b.basis
                ),
                _ => format!("{what}: {}\n", b.basis),
            });
        }
    }
    out
}

pub fn search_table(r: &InferSearchResult) -> String {
    let mut out = String::new();
    let lim = |x: Option<f64>| x.map_or("none".to_string(), |v| format!("{} ms", ms(v)));
    let _ = writeln!(
        out,
        "{} on {} × {} ({} + {} tokens): {} configurations evaluated in {} ms ({} per second), {} within TTFT ≤ {}, TPOT ≤ {}\n",
        r.model.name,
        r.gpus,
        r.system,
        r.input_tokens,
        r.output_tokens,
        r.evaluated,
        sig(r.wall_s * 1e3, 3),
        sig(r.configs_per_s, 3),
        r.feasible,
        lim(r.max_ttft_s),
        lim(r.max_tpot_s)
    );
    out.push_str("lowest energy per output token\n");
    out.push_str(&candidates_table(&r.ranked));
    out.push_str(&search_band_note(&r.ranked));
    if let Some(best) = r.ranked.first() {
        if let Some(cap) = best.power_cap_w {
            let _ = writeln!(
                out,
                "energy-optimal power cap within the limits: {cap:.0} W per GPU ({} J per output \
                 token, {} ms per output token)",
                sig(best.energy_per_token_j, 3),
                ms(best.tpot_s)
            );
        }
    }
    // The front has a point per batch; show at most 20, evenly spaced, ends included.
    let n = r.pareto.len();
    let step = n.div_ceil(20).max(1);
    let shown: Vec<ServingCandidate> = r
        .pareto
        .iter()
        .enumerate()
        .filter(|(i, _)| i % step == 0 || *i + 1 == n)
        .map(|(_, c)| c.clone())
        .collect();
    let _ = writeln!(
        out,
        "\nPareto front: time per output token vs energy per token ({n} configurations{})",
        if step > 1 {
            format!(", every {step}th shown; all with --json")
        } else {
            String::new()
        }
    );
    out.push_str(&candidates_table(&shown));
    for s in &r.skipped {
        let _ = writeln!(out, "skipped: {s}");
    }
    out
}

/// Every ranked configuration and the front, one row each (`set` = ranked or pareto).
pub fn search_csv(r: &InferSearchResult) -> String {
    let mut out = String::from(
        "set,tp,pp,replicas,precision,batch,ttft_s,tpot_s,output_tokens_per_s,requests_per_s,\
         power_per_gpu_w,energy_per_token_j,co2e_per_1000_requests_g,memory_per_gpu_bytes\n",
    );
    for (set, rows) in [("ranked", &r.ranked), ("pareto", &r.pareto)] {
        for c in rows {
            let _ = writeln!(
                out,
                "{set},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                c.tp,
                c.pp,
                c.replicas,
                c.precision.name(),
                c.batch,
                c.ttft_s,
                c.tpot_s,
                c.output_tokens_per_s,
                c.requests_per_s,
                c.power_per_gpu_w,
                c.energy_per_token_j,
                c.co2e_per_1000_requests_g,
                c.memory_per_gpu_bytes
            );
        }
    }
    out
}

/// How many of the best configurations the search figure names.
const LABELLED: usize = 6;

/// A configuration's short name: tensor (and pipeline) parallelism, precision, batch
/// (`tp4 fp8 B64`).
fn candidate_label(c: &ServingCandidate) -> String {
    let pp = if c.pp > 1 {
        format!(" pp{}", c.pp)
    } else {
        String::new()
    };
    let cap = c
        .power_cap_w
        .map_or(String::new(), |w| format!(" {} W", crate::sig(w, 3)));
    format!("tp{}{pp} {} B{}{cap}", c.tp, c.precision.name(), c.batch)
}

/// The Pareto front of TPOT vs energy per token, its points named.
pub fn search_svg(r: &InferSearchResult) -> String {
    let mut p = Plot::new(
        format!(
            "{} on {} × {}: latency vs energy",
            r.model.name, r.gpus, r.system
        ),
        Axis::new(Scale::Log10, "time per output token (ms)"),
        Axis::new(Scale::Log10, "J per output token (IT)"),
    );
    p.series.push(
        Series::new("Pareto front", PALETTE[0], Style::LinePoints).points(
            r.pareto
                .iter()
                .map(|c| (c.tpot_s * 1e3, c.energy_per_token_j)),
        ),
    );
    p.series.push(
        Series::new("lowest energy", PALETTE[1], Style::Points).points(
            r.ranked
                .iter()
                .map(|c| (c.tpot_s * 1e3, c.energy_per_token_j)),
        ),
    );
    // Each point says which configuration it is (those without room are listed under the
    // figure): the best few by energy, then the ends of the front (fastest, cheapest).
    let named = r
        .ranked
        .iter()
        .take(LABELLED)
        .chain(r.pareto.first())
        .chain(r.pareto.last());
    let mut seen = std::collections::HashSet::new();
    for c in named {
        let text = candidate_label(c);
        if seen.insert(text.clone()) {
            p.labels.push(Label {
                x: c.tpot_s * 1e3,
                y: c.energy_per_token_j,
                text,
            });
        }
    }
    figure(&[p], 560.0, 400.0)
}
