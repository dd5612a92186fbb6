//! Rows measured over the steady-state window of an offline run (ML.ENERGY v3: every request
//! sent at once, the GPUs' energy and the tokens counted between the server filling up and its
//! queue running dry): predicted by simulating that run with `amdahl serve`'s simulator and
//! measuring the same window ([`crate::serve::steady`]), not from `infer`'s steady state, which
//! knows nothing of how the benchmark measured.
//!
//! vLLM's time per running sequence is fitted on these rows, so each run is simulated twice — with
//! none and with the shipped figure — and a row at any other figure is interpolated between the
//! two: the window's time per token is linear in it to within 0.4 % up to twice the shipped figure
//! (measured 2026-12-07 on the 112 configurations), its activity to a few per cent (a test
//! checks one run), and the fit assumes that line.

use super::predict::RowSetup;
use super::rows::Row;
use crate::infer::engine::VLLM_PER_SEQUENCE_S;
use crate::power::Activity;
use crate::serve::steady::steady_state;
use crate::serve::{
    check_requests, generate, prepare, simulate_traced, Arrivals, Client, Config, Generated,
    Lengths, Limits, PrefillBatching, Router,
};
use rayon::prelude::*;
use std::collections::HashMap;

/// σ of ln(length) for the prompts and outputs: the value data/serve_datasets.csv assumes for
/// every data set (no source publishes one); the rows' own output histograms are not read.
const SIGMA: f64 = 1.0;

/// What the window of a simulated run shows: seconds per output token, and the shares of its time
/// in iterations with prompt tokens and in decode-only ones, with their mean activity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub seconds_per_token: f64,
    pub phases: [(f64, Activity); 2],
}

/// A run's window with no vLLM per-sequence time and with [`VLLM_PER_SEQUENCE_S`].
#[derive(Debug, Clone, Copy)]
pub struct Line {
    zero: Window,
    shipped: Window,
}

impl Line {
    /// The window at `host_s` of time per sequence, on the line through the two simulations.
    pub fn at(&self, host_s: f64) -> Window {
        let t = host_s / VLLM_PER_SEQUENCE_S;
        let lerp = |a: f64, b: f64| a + t * (b - a);
        let (z, s) = (&self.zero, &self.shipped);
        let phase = |i: usize| {
            let (za, sa) = (z.phases[i].1, s.phases[i].1);
            (
                lerp(z.phases[i].0, s.phases[i].0),
                Activity {
                    busy: lerp(za.busy, sa.busy),
                    compute: lerp(za.compute, sa.compute),
                    memory: lerp(za.memory, sa.memory),
                },
            )
        };
        Window {
            seconds_per_token: lerp(z.seconds_per_token, s.seconds_per_token),
            phases: [phase(0), phase(1)],
        }
    }
}

/// Every simulated run of the set, by [`Row::run`]: its line, or why it cannot be simulated.
pub type Simulations = HashMap<String, Result<Line, String>>;

/// Simulate the run of every row that names one (`requests` set), each run once, in parallel.
pub fn simulate_rows(rows: &[Row]) -> Simulations {
    let mut runs: Vec<&Row> = rows.iter().filter(|r| r.requests.is_some()).collect();
    runs.sort_by(|a, b| a.run().cmp(b.run()));
    runs.dedup_by(|a, b| a.run() == b.run());
    runs.par_iter()
        .map(|r| {
            let line = window(r, 0.0).and_then(|zero| {
                Ok(Line {
                    zero,
                    shipped: window(r, VLLM_PER_SEQUENCE_S)?,
                })
            });
            (r.run().to_string(), line)
        })
        .collect()
}

/// The window of row `r`'s run with `host_s` of vLLM time per sequence: `amdahl serve --rate inf
/// --requests N --max-num-seqs BATCH --max-num-batched-tokens B --input-dist lognormal:IN:1
/// --output-dist lognormal:OUT:1:MAX --seed 0`, measured as the benchmark measures.
fn window(r: &Row, host_s: f64) -> Result<Window, String> {
    let RowSetup {
        model,
        hw,
        net,
        serving,
    } = RowSetup::of(r, host_s)?;
    let need = |v: Option<u32>, what: &str| v.ok_or(format!("an offline run needs its {what}"));
    let (n, budget) = (
        need(r.requests, "requests")?,
        need(r.max_num_batched_tokens, "max_num_batched_tokens")?,
    );
    let (input, output) = match (r.input_tokens, r.output_tokens) {
        (Some(i), Some(o)) => (i, o),
        _ => return Err("input or output length not given".into()),
    };
    let cap = r.output_max.map_or(String::new(), |m| format!(":{m}"));
    let lengths = |text: String| Lengths::parse(&text).map_err(|e| e.to_string());
    let c = Config {
        serving,
        limits: Limits {
            max_num_seqs: r.batch,
            max_num_batched_tokens: budget,
            num_scheduler_steps: 1,
            prefill: PrefillBatching::default_for(serving.engine, 1),
            shared_prefix: 0,
        },
        router: Router::RoundRobin,
        // The window's figures are the engine's (`serve::steady`): the frontend changes none.
        client: Client::ENGINE,
    };
    let p = prepare(&model, &hw, &net, &c).map_err(|e| e.to_string())?;
    let g = Generated {
        arrivals: Arrivals::AllAtOnce,
        input: lengths(format!("lognormal:{input}:{SIGMA}"))?,
        output: lengths(format!("lognormal:{output}:{SIGMA}{cap}"))?,
        requests: n,
        duration_s: None,
        seed: 0,
    };
    let (requests, _) = generate(&g, model.seq, &model.name).map_err(|e| e.to_string())?;
    check_requests(&model, &p, &c.limits, &requests, &r.id).map_err(|e| e.to_string())?;
    let run = simulate_traced(&p, &hw, &net, &c, &requests);
    let server = r.batch * serving.replicas;
    let w = steady_state(&run, server).ok_or_else(|| {
        format!(
            "{n} requests never fill {server} running sequences and empty the queue after: no steady state"
        )
    })?;
    let seconds = w.seconds();
    Ok(Window {
        seconds_per_token: seconds / w.tokens,
        phases: w.phases.map(|(t, a)| (t / seconds, a)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy_validation::rows::rows;

    #[test]
    fn a_run_between_and_beyond_its_two_simulations_is_on_their_line() {
        // Llama-3.1-8B on one H100 at batch 64 (1,024 requests): simulated at 1.5 × the shipped
        // time per sequence (the held-out fits stay within ±40 % of it), the window agrees with
        // the line through the two simulations to 1 % in time per token and 3 % in activity
        // (2.2 % in the compute share, measured); at the shipped time the line is the simulation.
        let all = rows().unwrap();
        let r = all
            .iter()
            .find(|r| r.id == "mlenergy3-llama3.1-8b-h100-tp1-b64-tput")
            .unwrap();
        let line = Line {
            zero: window(r, 0.0).unwrap(),
            shipped: window(r, VLLM_PER_SEQUENCE_S).unwrap(),
        };
        assert_eq!(line.at(VLLM_PER_SEQUENCE_S), line.shipped);
        let h = 1.5 * VLLM_PER_SEQUENCE_S;
        let (direct, drawn) = (window(r, h).unwrap(), line.at(h));
        let close = |a: f64, b: f64| (a / b - 1.0).abs() < 0.01;
        assert!(
            close(direct.seconds_per_token, drawn.seconds_per_token),
            "{direct:?} {drawn:?}"
        );
        let (d, l) = (direct.phases[1].1, drawn.phases[1].1);
        let near = |a: f64, b: f64| (a / b - 1.0).abs() < 0.03;
        assert!(
            near(d.memory, l.memory) && near(d.compute, l.compute),
            "{d:?} {l:?}"
        );
        // More time per sequence: slower, and the shares of the window still add up to one.
        assert!(line.zero.seconds_per_token < line.shipped.seconds_per_token);
        let shares: f64 = drawn.phases.iter().map(|(t, _)| t).sum();
        assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    }

    #[test]
    fn every_offline_run_of_the_set_is_simulated_once() {
        let all = rows().unwrap();
        let sims = simulate_rows(&all);
        // 112 runs (ML.ENERGY v3 configurations × batch caps), each measured by a power, an
        // energy-per-token and a throughput row.
        assert_eq!(sims.len(), 112);
        assert!(sims.values().all(Result::is_ok));
        assert_eq!(all.iter().filter(|r| r.requests.is_some()).count(), 336);
    }
}
