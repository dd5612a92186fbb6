//! Rendering of `amdahl serve` results: the table, the summary CSV and the per-request CSV from
//! [`ServeResult`] and its [`RequestRecord`]s. Pure functions.

use crate::escape::csv_unquoted;
use crate::sig;
use crate::svg::{figure, Axis, Plot, Scale, Series, Style, PALETTE};
use crate::table::{Align, Table};
use amdahl_model::serve::{PrefillBatching, RequestRecord, ServeResult, TimelinePoint};
use std::fmt::Write;

fn ms(s: f64) -> String {
    sig(s * 1e3, 3)
}

fn ms_opt(s: Option<f64>) -> String {
    s.map_or("-".into(), ms)
}

/// The human table: configuration, latency percentiles, throughput and goodput, queueing,
/// energy per request and carbon.
pub fn serve_table(r: &ServeResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} on {} × {}: tp {} × pp {} × {} replica(s) ({} routing); weights {}, KV {}",
        r.model,
        r.gpus,
        r.system,
        r.tp,
        r.pp,
        r.replicas,
        r.router,
        r.precision.name(),
        r.kv_precision.name()
    );
    let _ = writeln!(
        out,
        "workload: {}, {} requests, mean {:.0} prompt + {:.0} output tokens{}",
        r.workload,
        r.requests,
        r.mean_input_tokens,
        r.mean_output_tokens,
        match (&r.input_dist, &r.output_dist) {
            (Some(i), Some(o)) => format!(" (input {i}, output {o})"),
            _ => String::new(),
        }
    );
    // Multi-step scheduling and separate prefill are named only where they are on, so the
    // default runs print as before.
    let steps = if r.num_scheduler_steps > 1 {
        format!(
            ", num-scheduler-steps {} (multi-step, prompts not chunked)",
            r.num_scheduler_steps
        )
    } else if r.prefill_batching == PrefillBatching::Separate {
        ", prefill-batching separate (prefill-only iterations; decodes wait)".to_string()
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "scheduler: max-num-seqs {}, max-num-batched-tokens {}{steps}, {} KV blocks of {} tokens per replica",
        r.max_num_seqs, r.max_num_batched_tokens, r.kv_blocks_per_replica, r.block_size
    );
    let _ = writeln!(out, "{}\n", frontend_line(r.client.frontend_s));
    let mut t = Table::new(["latency", "p50", "p90", "p99"]).align(0, Align::Left);
    t.row([
        "time to first token (ms)".to_string(),
        ms(r.ttft_p50_s),
        ms(r.ttft_p90_s),
        ms(r.ttft_p99_s),
    ]);
    t.row([
        "time per output token (ms)".to_string(),
        ms_opt(r.tpot_p50_s),
        ms_opt(r.tpot_p90_s),
        ms_opt(r.tpot_p99_s),
    ]);
    t.row([
        "inter-token latency (ms)".to_string(),
        ms_opt(r.itl_p50_s),
        ms_opt(r.itl_p90_s),
        ms_opt(r.itl_p99_s),
    ]);
    t.row([
        "end-to-end (s)".to_string(),
        sig(r.e2e_p50_s, 3),
        sig(r.e2e_p90_s, 3),
        sig(r.e2e_p99_s, 3),
    ]);
    out.push_str(&t.render());
    out.push('\n');
    out.push_str(&figures(r).render());
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// What the latencies carry besides the engine's time (`serve::client`).
fn frontend_line(frontend_s: f64) -> String {
    if frontend_s > 0.0 {
        format!(
            "frontend: {} ms per request in TTFT and end-to-end (HTTP, tokenising, streaming; \
             --frontend-ms)",
            sig(frontend_s * 1e3, 3)
        )
    } else {
        "frontend: none (a client in the engine's process; --frontend-ms 0)".into()
    }
}

fn figures(r: &ServeResult) -> Table {
    let mut t = Table::new(["quantity", "value"])
        .align(0, Align::Left)
        .align(1, Align::Left);
    let prefix = r.prefix_cache.as_ref().map(|p| {
        (
            "prefix cache",
            format!(
                "{}-token shared prefix: {:.1} % of prompt tokens from the cache ({} of {})",
                p.shared_tokens,
                p.hit_rate * 100.0,
                p.hit_tokens,
                p.prompt_tokens
            ),
        )
    });
    for (k, v) in load_rows(r).into_iter().chain(prefix).chain(energy_rows(r)) {
        t.row([k.to_string(), v]);
    }
    t
}

/// Rates, SLOs, the unloaded comparison, queue and KV cache.
fn load_rows(r: &ServeResult) -> Vec<(&'static str, String)> {
    let slo = match (r.slo_ttft_s, r.slo_tpot_s) {
        (None, None) => "no SLO given: every request counts".to_string(),
        (a, b) => format!(
            "{:.1} % of requests meet{}{}",
            r.slo_attainment * 100.0,
            a.map_or(String::new(), |s| format!(" TTFT ≤ {} ms", ms(s))),
            b.map_or(String::new(), |s| format!(" TPOT ≤ {} ms", ms(s)))
        ),
    };
    let unloaded = r.unloaded.as_ref().map_or("-".into(), |u| {
        format!(
            "TTFT {} ms, TPOT {} ms; capacity {} requests/s at batch {}",
            ms(u.ttft_s),
            ms(u.tpot_s),
            sig(u.capacity_requests_per_s, 4),
            u.capacity_batch
        )
    });
    vec![
        (
            "offered rate",
            match (r.offline, r.client.max_concurrency) {
                (true, _) => format!("all {} requests at t = 0 (offline)", r.requests),
                // The client sent them as places freed: its rate is what the server allowed.
                (false, Some(n)) => format!(
                    "{} requests/s sent, at most {n} in flight",
                    sig(r.offered_requests_per_s, 4)
                ),
                (false, None) => format!("{} requests/s", sig(r.offered_requests_per_s, 4)),
            },
        ),
        (
            "completed",
            format!(
                "{} requests/s over {} s{}",
                sig(r.completed_requests_per_s, 4),
                sig(r.duration_s, 4),
                // An offline run's arrivals are all at its start: its whole run is the drain.
                if r.offline {
                    String::new()
                } else {
                    format!(" (the last {} s after the last arrival)", sig(r.drain_s, 3))
                }
            ),
        ),
        (
            "output tokens/s (all replicas)",
            sig(r.output_tokens_per_s, 4),
        ),
        (
            "goodput",
            format!("{} requests/s ({slo})", sig(r.goodput_requests_per_s, 4)),
        ),
        ("infer, same configuration", unloaded),
        (
            "queue",
            format!(
                "at most {} waiting (at {} s), {} at the last arrival{}",
                r.max_waiting,
                sig(r.max_waiting_at_s, 3),
                r.waiting_at_last_arrival,
                match (r.overloaded, r.offline) {
                    (false, _) => "",
                    (true, false) => ": OVERLOADED",
                    (true, true) => ": backlogged by construction (offline)",
                }
            ),
        ),
        (
            "KV cache",
            format!(
                "peak {:.1} % in use, {} preemptions, {} iterations",
                r.peak_kv_use * 100.0,
                r.preemptions,
                r.iterations
            ),
        ),
    ]
}

/// Energy per request, per token, of the run, and per 1,000 requests with its emissions; an
/// offline run's steady-state window too.
fn energy_rows(r: &ServeResult) -> Vec<(&'static str, String)> {
    let steady = r.steady_state.map(|w| {
        (
            "steady state (ML.ENERGY's window)",
            format!(
                "{} output tokens/s, {} W per GPU, {} J per output token (GPU), from {} s to {} s",
                sig(w.output_tokens_per_s, 4),
                sig(w.power_per_gpu_w, 4),
                sig(w.energy_per_output_token_j, 3),
                sig(w.start_s, 3),
                sig(w.end_s, 3)
            ),
        )
    });
    let rows = vec![
        (
            "energy per request (GPU)",
            format!(
                "mean {} J, p50 {} J, p99 {} J ({} J with idle time)",
                sig(r.energy_per_request_j.mean, 3),
                sig(r.energy_per_request_j.p50, 3),
                sig(r.energy_per_request_j.p99, 3),
                sig(r.energy_per_request_with_idle_j, 3)
            ),
        ),
        (
            "energy per output token (GPU)",
            format!("{} J", sig(r.energy_per_output_token_j, 3)),
        ),
        (
            "run energy (GPU)",
            format!(
                "{} kJ: iterations {} kJ + idle {} kJ; mean {} W{}",
                sig(r.energy_j / 1e3, 4),
                sig(r.energy_busy_j / 1e3, 4),
                sig(r.energy_idle_j / 1e3, 4),
                sig(r.power_w, 4),
                r.energy_server_j.map_or(String::new(), |j| format!(
                    "; server (wall) {} kJ",
                    sig(j / 1e3, 4)
                ))
            ),
        ),
        (
            "per 1,000 requests (× PUE)",
            format!(
                "{} kWh, {} gCO2e ({}, {}, {} g/kWh, PUE {})",
                sig(r.kwh_per_1000_requests, 3),
                sig(r.co2e_per_1000_requests_g, 3),
                r.grid,
                amdahl_model::catalog::grid::year_label(r.grid_year),
                sig(r.grid_g_per_kwh, 4),
                r.pue
            ),
        ),
    ];
    rows.into_iter().chain(steady).collect()
}

/// One row of the headline figures, header first.
pub fn serve_csv(r: &ServeResult) -> String {
    let opt = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
    let mut out = String::from(
        "model,system,tp,pp,replicas,gpus,requests,offered_requests_per_s,completed_requests_per_s,\
         output_tokens_per_s,goodput_requests_per_s,ttft_p50_s,ttft_p99_s,tpot_p50_s,tpot_p99_s,\
         e2e_p99_s,energy_per_request_j,energy_per_output_token_j,energy_j,overloaded,itl_p50_s,\
         itl_p99_s,steady_output_tokens_per_s,steady_power_per_gpu_w,\
         steady_energy_per_output_token_j\n",
    );
    let _ = writeln!(
        out,
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        csv_unquoted(&r.model),
        csv_unquoted(&r.system),
        r.tp,
        r.pp,
        r.replicas,
        r.gpus,
        r.requests,
        r.offered_requests_per_s,
        r.completed_requests_per_s,
        r.output_tokens_per_s,
        r.goodput_requests_per_s,
        r.ttft_p50_s,
        r.ttft_p99_s,
        opt(r.tpot_p50_s),
        opt(r.tpot_p99_s),
        r.e2e_p99_s,
        r.energy_per_request_j.mean,
        r.energy_per_output_token_j,
        r.energy_j,
        r.overloaded,
        opt(r.itl_p50_s),
        opt(r.itl_p99_s),
        opt(r.steady_state.map(|w| w.output_tokens_per_s)),
        opt(r.steady_state.map(|w| w.power_per_gpu_w)),
        opt(r.steady_state.map(|w| w.energy_per_output_token_j))
    );
    out
}

/// `--per-request FILE`: one row per request, in arrival order.
pub fn requests_csv(records: &[RequestRecord]) -> String {
    let mut out = String::from(
        "request,arrival_s,input_tokens,output_tokens,replica,ttft_s,tpot_s,e2e_s,energy_j,preemptions\n",
    );
    for (i, r) in records.iter().enumerate() {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            i + 1,
            r.arrival_s,
            r.input_tokens,
            r.output_tokens,
            r.replica,
            r.ttft_s,
            r.tpot_s.map_or(String::new(), |t| t.to_string()),
            r.e2e_s,
            r.energy_j,
            r.preemptions
        );
    }
    out
}

/// The figure: the latency CDFs (TTFT and TPOT over requests, the inter-token latency over
/// tokens; ms, log scale) and the queue over time (requests waiting and running, all replicas).
pub fn serve_svg(r: &ServeResult) -> String {
    let mut cdf = Plot::new(
        format!("{}: latency CDF", r.model),
        Axis::new(Scale::Log10, "latency (ms)"),
        Axis::new(Scale::Linear, "fraction of requests").range(0.0, 1.0),
    );
    let positive = |x: f64| x > 0.0 && x.is_finite();
    cdf.series.push(
        Series::new("time to first token", PALETTE[0], Style::Line).points(
            r.latency_quantiles
                .iter()
                .filter(|p| positive(p.ttft_s))
                .map(|p| (p.ttft_s * 1e3, p.q)),
        ),
    );
    cdf.series.push(
        Series::new("time per output token", PALETTE[1], Style::Line).points(
            r.latency_quantiles
                .iter()
                .filter_map(|p| p.tpot_s.filter(|&t| positive(t)).map(|t| (t * 1e3, p.q))),
        ),
    );
    cdf.series.push(
        Series::new("inter-token latency (of tokens)", PALETTE[4], Style::Line).points(
            r.latency_quantiles
                .iter()
                .filter_map(|p| p.itl_s.filter(|&t| positive(t)).map(|t| (t * 1e3, p.q))),
        ),
    );
    let mut queue = Plot::new(
        "requests over time",
        Axis::new(Scale::Linear, "time (s)"),
        Axis::new(Scale::Linear, "requests").counts(),
    );
    let t0 = r.timeline.first().map_or(0.0, |s| s.t_s);
    queue.series.push(
        Series::new("waiting", PALETTE[2], Style::Line)
            .points(r.timeline.iter().map(|s| (s.t_s - t0, s.waiting as f64))),
    );
    queue.series.push(
        Series::new("running", PALETTE[3], Style::Line)
            .points(r.timeline.iter().map(|s| (s.t_s - t0, s.running as f64))),
    );
    let mut kv = Plot::new(
        "KV cache over time",
        Axis::new(Scale::Linear, "time (s)"),
        Axis::new(Scale::Linear, "blocks in use (%)").range(0.0, 100.0),
    );
    kv.series.push(
        Series::new("all replicas", PALETTE[5], Style::Line)
            .points(r.timeline.iter().map(|s| (s.t_s - t0, 100.0 * s.kv_use))),
    );
    let mut power = Plot::new(
        "power over time",
        Axis::new(Scale::Linear, "time (s)"),
        Axis::new(Scale::Linear, "W, all devices"),
    );
    type Scope = (
        &'static str,
        &'static str,
        fn(&TimelinePoint) -> Option<f64>,
    );
    let scopes: [Scope; 2] = [
        ("GPUs", PALETTE[0], |s| s.gpu_power_w),
        ("server (wall)", PALETTE[7], |s| s.server_power_w),
    ];
    for (name, colour, of) in scopes {
        let points: Vec<(f64, f64)> = r
            .timeline
            .iter()
            .filter_map(|s| of(s).map(|w| (s.t_s - t0, w)))
            .collect();
        if !points.is_empty() {
            power
                .series
                .push(Series::new(name, colour, Style::Line).points(points));
        }
    }
    if power.series.is_empty() {
        // A result written before the timeline carried power.
        return figure(&[cdf, queue, kv], 520.0, 380.0);
    }
    figure(&[cdf, queue, kv, power], 520.0, 380.0)
}
