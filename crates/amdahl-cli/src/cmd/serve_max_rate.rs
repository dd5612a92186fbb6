//! `amdahl serve --max-rate`: the highest request rate one configuration serves within its SLOs
//! (the search and its rules: `amdahl_model::serve::max_rate`).

use crate::cmd::serve::{arrivals, configured, Options};
use crate::output::print_result;
use amdahl_model::plan::{Hardware, ModelShape, Network};
use amdahl_model::serve::max_rate::{judge, search, MaxRate, SERVE_MAX_RATE_SCHEMA};
use amdahl_model::serve::{check_requests, generate, simulate, Generated, ServeError};
use amdahl_report::render::Render;
use anyhow::Result;
use std::process::ExitCode;

pub fn run(a: &Options, model: &ModelShape, hw: &Hardware, net: &Network) -> Result<ExitCode> {
    let start = a.rate.unwrap_or(1.0);
    if start.is_infinite() {
        return Err(ServeError::Flag {
            what: "--rate",
            want: "finite with --max-rate (the first rate tried)",
            got: "inf".into(),
        }
        .into());
    }
    let (config, prepared) = configured(a, model, hw, net)?;
    let (slo_ttft_s, slo_tpot_s) = (
        a.slo_ttft_ms.map(|m| m * 1e-3),
        a.slo_tpot_ms.map(|m| m * 1e-3),
    );
    let probe = |rate: f64| -> Result<_> {
        let g = Generated {
            arrivals: arrivals(rate, a.cv)?,
            input: a.input_dist.lengths,
            output: a.output_dist.lengths,
            requests: a.requests,
            duration_s: a.duration,
            seed: a.seed,
        };
        let (requests, _) = generate(&g, model.serving_context(), &model.name)?;
        check_requests(
            model,
            &prepared,
            &config.limits,
            &requests,
            "--input-dist/--output-dist",
        )?;
        let run = simulate(&prepared, hw, net, &config, &requests);
        Ok(judge(&run, &config.client, rate, slo_ttft_s, slo_tpot_s))
    };
    let found = search(start, probe)?;
    let s = config.serving;
    let arrivals = match a.cv {
        Some(cv) => format!("gamma arrivals (cv {cv})"),
        None => "Poisson arrivals".into(),
    };
    let extent = match a.duration {
        Some(d) => format!("{d} s of them"),
        None => format!("{} of them", a.requests),
    };
    let result = MaxRate {
        schema: SERVE_MAX_RATE_SCHEMA.into(),
        model: model.name.clone(),
        system: hw.name.clone(),
        tp: s.tp,
        pp: s.pp,
        replicas: s.replicas,
        gpus: s.gpus(),
        precision: s.weights.name().into(),
        kv_precision: s.kv.name().into(),
        engine: s.engine.name().into(),
        max_num_seqs: config.limits.max_num_seqs,
        max_num_batched_tokens: config.limits.max_num_batched_tokens,
        workload: format!(
            "{arrivals} at each rate, {extent}; input {}, output {}",
            a.input_dist.label, a.output_dist.label
        ),
        seed: a.seed,
        slo_ttft_s,
        slo_tpot_s,
        max_rate_rps: found.passing,
        first_failing_rps: found.failing,
        probes: found.probes,
    };
    print_result(&result, &result.render(a.format.format())?)?;
    if a.format.format() == crate::output::Format::Table {
        crate::cmd::serve_note::note_serve_accuracy();
    }
    Ok(ExitCode::SUCCESS)
}
