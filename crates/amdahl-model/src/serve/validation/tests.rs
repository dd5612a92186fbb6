//! The serving validation set, simulated: every row prints its figures; the summary is asserted.

use super::*;

#[test]
fn published_serving_runs() {
    let v = serve_validation().unwrap();
    for c in &v.cases {
        for m in &c.metrics {
            println!(
                "{:<28} {:<20} published {:>10.4} predicted {:>10.4} error {:+6.1} % \
                 +5 % load {:+7.1} % {}",
                c.id,
                m.metric,
                m.published,
                m.predicted,
                m.error * 100.0,
                m.load_sensitivity.unwrap_or(f64::NAN) * 100.0,
                if c.in_claim { "" } else { "(out of claim)" }
            );
        }
    }
    for s in &v.summaries {
        println!("{s:?}");
    }
    for e in &v.excluded {
        println!("excluded {}: {}", e.id, e.why);
    }
    // Every row of the set is simulated; thirty are in the accuracy claim (serve.md says why the
    // others are not).
    assert!(v.excluded.is_empty(), "{:?}", v.excluded);
    assert_eq!(v.cases.len(), 150);
    assert_eq!(v.cases.iter().filter(|c| c.in_claim).count(), 30);
    let claim = |class: &str| {
        v.summaries
            .iter()
            .find(|s| s.subset == "claim" && s.class == class)
            .unwrap()
    };
    // The summary, held so that a change which makes the simulator worse on the set fails.
    // When the set was assembled (seven rows) the claim's figures stood at p50 5 of 21 within
    // 20 % (median |error| 36.3 %), p99 0 of 9 within 30 % (66 %), throughput 5 of 6 within 15 %
    // (8.7 %). Modelling vLLM 0.6's multi-step scheduling (--num-scheduler-steps, the rows'
    // published 10) brought its four online rows into the claim under the set's rules (engine
    // features modelled, knobs published or documented defaults) — not their errors: p50 8 of 33
    // within 20 % (33.9 %); those rows publish no p99 or throughput, so the other classes are
    // unchanged. Modelling SGLang's default scheduling (prompts prefilled in iterations of their
    // own, --prefill-batching separate) and reading bench_serving's ShareGPT output cap right
    // (2,044, not 1,024): p50 9 of 33 (32.1 %). vLLM's per-sequence time read as GPU work, paid
    // on every step of a multi-step window: 10 of 33 (30.1 %). vLLM 0.6's asynchronous output
    // processing (each token delivered one iteration late): 12 of 33 (27.8 %). The refit that
    // typed Meta's fp8-mixed checkpoints (per-sequence time 31.4 → 30.6 µs): 11 of 33 (27.8 %),
    // vLLM 0.6's 70B TTFT at 4 requests/s moving from −19.3 % to −20.3 %. The SGLang and vLLM
    // rows' prompts typed as bench_serving's own ShareGPT sampling counts them (215.2 tokens,
    // serve.md), not ShareGPT's whole-set 161.31: 13 of 33 (23.6 %). A capped log-normal's μ
    // solved so that its mean after the cut is the stated one (the published means are of real
    // lengths, all within the cap; OpenOrca's preset had drawn 267 output tokens for a published
    // 294.45, the bench_serving rows' prompts 204 for 215.2): p50 16 of 33 (20.7 %), p99 2 of 9
    // (54.0 %), throughput 4 of 6 (7.8 %; the H200 row's simulated capacity fell below its
    // published rate). The refit of vLLM's per-sequence time (30.6 → 26.5 µs) and the power model
    // on the energy set's simulated windows: p50 16 of 33 (21.1 %), the rest unchanged. Two
    // held-out rows, typed with nothing refitted (vLLM 0.8.3 serving Llama 3.3 70B on 8 × A100
    // 40GB at 1 request/s, TP 8 and TP 4 × PP 2; serve.md): p50 21 of 39 (19.1 %), p99 6 of 15
    // (41.1 %), both rows predicted low (TP 8 by 7–19 %, the V0 pipeline by 16–52 %). The
    // frontend's time per request (10.2 ms, one published measurement of vLLM's OpenAI server,
    // serve/client.rs; 0 on the NVIDIA, Dell and AMD MLPerf rows, whose LoadGen runs the engine
    // in its own process), which the HTTP clients' TTFT carried and the simulator did not: p50 27
    // of 39 (14.4 %), p99 6 of 15 (36.7 %). TensorRT-LLM's token budget read from NVIDIA's and
    // Dell's parent config (max_num_tokens 4,096, published; 8,192 had been assumed): the same,
    // throughput 7.6 %. Seventeen held-out MLPerf v4.1 rows, every other submission of NVIDIA's
    // harness on a catalogued device (ASUSTeK, Dell, Fujitsu, GigaComputing, Google, HPE, Lenovo,
    // Supermicro, Sustainable Metal Cloud; NVIDIA's 500 W MaxQ H200), typed from their configs
    // with nothing refitted: alone p50 20 of 51 within 20 % (34.8 %), p99 21 of 51 (41.0 %),
    // throughput 24 of 34 (8.2 %); the set p50 47 of 90 (19.2 %), p99 27 of 66 (40.8 %),
    // throughput 28 of 40 (8.1 %). Their misses are capacity: every 8 × H200 run at full power
    // is simulated overloaded, its throughput 19–22 % low, and the 8 × H100 runs above 76
    // requests/s 14–17 % low. OpenOrca's output spread measured (σ of ln(tokens) 0.685 over the
    // 15,800 outputs of v4.1's TEST06 compliance logs, where 1.0 had been assumed; a property of
    // the workload, serve.md): p50 49 of 90 (17.3 %), p99 27 of 66 (41.3 %), throughput 30 of 40
    // (6.4 %); the thirteen rows of before p50 27 of 39 (14.4 %), p99 6 of 15 (37.7 %),
    // throughput 4 of 6 (6.0 %). The 4-GPU HGX H100 boards' NVLink typed (`--intra-gbs 150`:
    // their MLPerf system descriptions publish 6 links between a pair, not 18 through NVSwitch):
    // p50 52 of 90 (16.4 %), p99 34 of 66 (29.0 %), throughput 30 of 40 (6.9 %: the two runs at
    // 32.97 requests/s are now simulated 4 % past capacity). TensorRT-LLM's KV cache sized as
    // the engine sizes it, 90 % of the memory free after the weights (not 90 % of all of it, as
    // vLLM): p50 54 of 90 (15.0 %), p99 35 of 66 (25.6 %), throughput 30 of 40 (5.1 %); the
    // H200 runs' capacity is their compute's and does not move. Hopper's energy per FLOP held
    // at any clock under a power cap (power.rs CLOCK_ENERGY_EXPONENT, fitted on MLPerf's GPT-J
    // and Mixtral H200 MaxQ pairs, not on these rows): the 500 W H200 run, which had agreed by
    // two errors cancelling (its cap costing 8 % where the runs lost 22 %, its uncapped rate
    // 13–16 % low), now shows the second alone, 9 % below its capacity and overloaded: p50 51 of
    // 90 (16.6 %), p99 32 of 66 (33.0 %), throughput 30 of 40 (5.6 %). The targets are not met;
    // docs/usage/serve.md ("Validation") says where the simulator falls short.
    let (p50, p99, tput) = (claim("p50"), claim("p99"), claim("throughput"));
    assert_eq!((p50.figures, p99.figures, tput.figures), (90, 66, 40));
    assert!(p50.within >= 51 && p50.median_abs_error <= 0.167, "{p50:?}");
    assert!(p99.within >= 32 && p99.median_abs_error <= 0.331, "{p99:?}");
    assert!(
        tput.within >= 30 && tput.median_abs_error <= 0.057,
        "{tput:?}"
    );
    // The MLPerf rows' published rate as what it is, a capacity: the highest rate at which the
    // row's requests (time-scaled) meet MLPerf's limits, p99 TTFT 2 s and TPOT 200 ms (`serve
    // --max-rate`), against the rate the run served within them. Added 2026-12-07 with those
    // limits typed (slo_ttft_ms, slo_tpot_ms): 17 of 20 within 15 % (median 6.4 %): 8 × H100
    // −2 to −11 % (the eight submitters' 71–82 requests/s against 73.2–73.6 simulated), 8 ×
    // H200 −13 to −16 % (101–105 against 88), the 500 W H200 0.0 %, 8 × L40S +0.7 %, the 4 ×
    // H100 runs +12 to +19 % (their latencies, 38–65 % low, said the same: room to spare).
    // Those three run on 4-GPU boards with 6 NVLinks per pair (150 GB/s each way, typed as
    // `--intra-gbs`), where the catalog's 450 GB/s is the 8-GPU board's switch: −4.1 to +2.8 %,
    // and 18 of 20 within 15 % (median 3.8 %; 3.5 % with TensorRT-LLM's KV cache sized as the
    // engine sizes it; 3.8 % with Hopper's measured cap response, the 500 W H200 at −9.3 %).
    // Each row judged whole, as the specification's cases: every figure with a target within
    // it. 8 of the 30 on 2026-12-07 (the 8 × H100 MLPerf rows miss on their TTFT p99 alone, the
    // simulated queue at the edge of capacity; the H200 rows on everything, overloaded); 7 with
    // Hopper's measured cap response (the 500 W H200 run left, overloaded as its 700 W peers).
    let whole = v.rows_meeting_every_target();
    assert!(whole.len() >= 7, "{whole:?}");
    assert!(whole.contains(&"mlperf41-dell-h100x4-server"), "{whole:?}");
    let cap = claim("capacity");
    assert_eq!(cap.figures, 20);
    assert!(cap.within >= 18 && cap.median_abs_error <= 0.039, "{cap:?}");
    assert_eq!(cap.well_conditioned, 20, "{cap:?}");
    // Conditioning: the figures a 5 % error in the modelled capacity would not carry beyond
    // their target test the latency model itself. All of SGLang's and vLLM's (4 and 8 requests/s,
    // far below capacity) are among them, and the two held-out rows' (1 request/s); 25 of the 31
    // p50 figures are within 20 % (11.4 %; 19 and 18.3 % before the frontend was modelled). With
    // the seventeen MLPerf rows: p50 30 of 36 (10.2 %), p99 18 of 26 within 30 % (12.7 %); with
    // OpenOrca's measured output spread p50 30 of 37 (10.3 %), p99 17 of 27 (11.9 %); with the
    // 4-GPU boards' NVLink p50 30 of 39 (10.9 %), p99 21 of 26 (11.6 %); with TensorRT-LLM's KV
    // cache sized as the engine sizes it p50 31 of 40 (11.2 %), p99 23 of 29 (11.4 %); with
    // Hopper's measured cap response p50 31 of 41 (11.4 %), p99 23 of 31 (13.9 %): the overloaded
    // 500 W H200 run's TPOT figures, saturated, no longer move with the load.
    assert_eq!((p50.well_conditioned, p99.well_conditioned), (41, 31));
    assert!(
        p50.well_conditioned_within >= 31
            && p50.well_conditioned_median_abs_error.unwrap() <= 0.115,
        "{p50:?}"
    );
    assert!(
        p99.well_conditioned_within >= 23
            && p99.well_conditioned_median_abs_error.unwrap() <= 0.140,
        "{p99:?}"
    );
    for c in v
        .cases
        .iter()
        .filter(|c| c.source == "sglang030" && c.rate_rps.is_some())
    {
        for m in &c.metrics {
            let s = m.load_sensitivity.unwrap();
            assert!(s.abs() < 0.10, "{} {}: {s}", c.id, m.metric);
        }
    }
    // MLPerf's server runs sit at the edge of capacity by design (the rate is raised until the
    // p99 limits are about to fail): 5 % more load moves the 8 × H100 row's median TTFT tenfold.
    let h100 = v
        .cases
        .iter()
        .find(|c| c.id == "mlperf41-h100x8-server")
        .unwrap();
    let ttft = h100
        .metrics
        .iter()
        .find(|m| m.metric == "ttft_p50_ms")
        .unwrap();
    assert!(ttft.load_sensitivity.unwrap() > 10.0, "{ttft:?}");
    power_capped_h200(&v);
    runs_typed_alike(&v);
    the_committed_claim_is_the_live_one(&v);
    inter_token_latencies_of_ml_energy(&v);
}

/// NVIDIA's MaxQ submission: the 8 × H200 server at `power_limit` 500 W (`--power-cap 500`),
/// 80.1 requests/s, beside NVIDIA's own run of the same system at 700 W (101.25 requests/s):
/// the pair tests the cap apart from the rate. Typed 2026-12-07 with nothing refitted, it agreed
/// by two errors cancelling: the simulated cap cost 9 % of the capacity where the runs lost 21 %,
/// and the 700 W capacity is 13 % low. Since Hopper's energy per FLOP holds at any clock under a
/// cap (power.rs CLOCK_ENERGY_EXPONENT, fitted on other MLPerf pairs, not these), the capacity
/// ratio is 0.825 against 0.791 published (+4.3 %; 0.909 before, +15 %), and the 500 W run is as
/// far below its capacity as its 700 W peer (−9.3 % and −13.0 %). The DGX H200's mean wall power
/// over the run, MLPerf Power's measurement (6,280 W), is +0.5 % — with the GPUs at their limit,
/// mostly a check of the host estimate and the power supplies' efficiency.
fn power_capped_h200(v: &ServeValidation) {
    let case = |id: &str| v.cases.iter().find(|c| c.id == id).unwrap();
    let metric = |id: &str, name: &str| {
        case(id)
            .metrics
            .iter()
            .find(|m| m.metric == name)
            .cloned()
            .unwrap()
    };
    let (capped, free) = ("mlperf41-h200x8-maxq-server", "mlperf41-h200x8-server");
    assert!(case(capped).in_claim, "{:?}", case(capped));
    let (c, f) = (
        metric(capped, "slo_capacity_rps"),
        metric(free, "slo_capacity_rps"),
    );
    let ratio = (c.predicted / f.predicted) / (c.published / f.published) - 1.0;
    assert!(
        ratio.abs() <= 0.05,
        "capacity ratio {ratio:+.3}: {c:?} {f:?}"
    );
    assert!((c.error - f.error).abs() <= 0.05, "{c:?} {f:?}");
    assert!(metric(capped, "server_power_w").error.abs() <= 0.02);
}

/// `amdahl serve` quotes the claim from data/validation/serve-claim.json: it must be what the set
/// gives now (`AMDAHL_UPDATE_SERVE_CLAIM=1` rewrites it). Checked here, on the one simulation of
/// the set this test binary runs.
fn the_committed_claim_is_the_live_one(v: &ServeValidation) {
    let live = serde_json::to_string_pretty(&ServeClaim::of(v)).unwrap() + "\n";
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/validation/serve-claim.json"
    );
    if std::env::var_os("AMDAHL_UPDATE_SERVE_CLAIM").is_some() {
        std::fs::write(path, &live).unwrap();
        return;
    }
    assert!(
        live == COMMITTED_CLAIM,
        "data/validation/serve-claim.json is stale: rewrite it with AMDAHL_UPDATE_SERVE_CLAIM=1 \
         cargo test -p amdahl-model --lib serve::validation"
    );
    let read = serve_claim_committed().unwrap();
    assert_eq!(read.rows, 30);
    assert_eq!(
        read.class("p99").unwrap().within,
        ServeClaim::of(v).class("p99").unwrap().within
    );
}

/// Runs typed alike (the same inputs to `amdahl serve`, other submitters): three groups — 8 ×
/// H100 at 75.10 requests/s (NVIDIA, Dell, Google), 8 × H200 at 102.71 (Dell, GigaComputing), 4
/// × H100 at 32.97 (Dell, Fujitsu) — whose published figures differ by up to 28.5 % (the H200
/// pair's median TPOT, 132 and 170 ms) while the simulator, given identical inputs, predicts
/// them identically: no model can be within less than half that on both.
fn runs_typed_alike(v: &ServeValidation) {
    let a = &v.alike;
    assert_eq!(a.groups.len(), 3, "{a:?}");
    assert_eq!(a.groups.iter().map(Vec::len).sum::<usize>(), 7, "{a:?}");
    for g in &a.groups {
        let of = |id: &String| v.cases.iter().find(|c| &c.id == id).unwrap();
        let first = of(&g[0]);
        for id in &g[1..] {
            let other = of(id);
            for (m, n) in first.metrics.iter().zip(&other.metrics) {
                assert_eq!((&m.metric, m.predicted), (&n.metric, n.predicted), "{id}");
            }
        }
    }
    let spread = |class: &str| a.spreads.iter().find(|s| s.class == class).unwrap();
    assert!((spread("p50").max_spread - 0.285).abs() < 0.005, "{a:?}");
    assert!((spread("p99").max_spread - 0.265).abs() < 0.005, "{a:?}");
    assert!(spread("throughput").max_spread < 0.005, "{a:?}");
}

/// ML.ENERGY v3's offline vLLM 0.11 runs (112 configurations of Llama 3.1 8B–405B, Llama 3.3
/// 70B and Qwen3 8B–32B on H100 and B200, batch caps 8 to 2,048), each with its published ITL
/// percentiles: out of the claim, since their output lengths are the runs' own. Measured when
/// they were added (2026-12-07; with the lengths `--rate inf` draws): p50 98 of 112 within 20 %
/// (median 7.9 %; on the 43 Qwen3 rows, which no fit has seen, 37 within, 7.6 %); p99 63 of 112
/// within 30 %, median 27.6 % and predicted low on 105 of them: the simulator's longest gaps (iterations a prefill chunk lengthened) are
/// shorter than the served ones, which also carry what it does not model (the API server,
/// detokenising, streaming). The worst p50 rows are the small models on one B200 (Llama-3.1-8B
/// from batch 128, −34 to −60 %; Qwen3 8B and 14B, −24 to −38 %), too fast as in the energy
/// set, where Llama-3.1-8B and Qwen3-8B there are host-bound. Since vLLM's per-sequence time was
/// refitted on the energy set's simulated windows (30.6 → 26.5 µs): p50 96 within 20 % (median
/// 9.2 %), p99 62 (28.4 %): the decode-only steps the ITL median sees are now a little fast,
/// while the windows' iterations, which carry prompt chunks, were too slow at the larger time
/// (docs/methodology.md, "Engine per-sequence time").
fn inter_token_latencies_of_ml_energy(v: &ServeValidation) {
    let itl = |class: &str| {
        v.summaries
            .iter()
            .find(|s| s.subset == "itl" && s.class == class)
            .unwrap()
    };
    let (p50, p99) = (itl("p50"), itl("p99"));
    // With the two held-out rows' ITL (both in the claim): 114 figures each.
    assert_eq!((p50.figures, p99.figures), (114, 114));
    assert!(p50.within >= 96 && p50.median_abs_error <= 0.093, "{p50:?}");
    assert!(p99.within >= 62 && p99.median_abs_error <= 0.285, "{p99:?}");
    let low = v
        .cases
        .iter()
        .flat_map(|c| &c.metrics)
        .filter(|m| m.metric == "itl_p99_ms" && m.error < 0.0)
        .count();
    assert!(low >= 105, "{low}");
    assert!(v
        .cases
        .iter()
        .filter(|c| c.source == "mlenergy3")
        .all(|c| !c.in_claim && c.rate_rps.is_none()));
}

#[test]
fn the_set_is_typed_as_a_user_types_it() {
    // Every row names a catalogued model and device and a layout that multiplies out; a row's
    // lengths are a data set or a log-normal; `own` lengths keep a row out of the claim.
    let rows = rows().unwrap();
    for r in &rows {
        assert!(catalog_model(&r.model).is_ok(), "{}", r.id);
        let layout = u64::from(r.tp) * u64::from(r.pp) * u64::from(r.replicas);
        assert_eq!(layout, r.gpus, "{}", r.id);
        assert!(
            ["published", "default", "assumed"].contains(&r.settings.as_str()),
            "{}",
            r.id
        );
        assert!(
            ["dataset", "derived", "own"].contains(&r.lengths.as_str()),
            "{}",
            r.id
        );
        assert!(r.lengths != "own" || r.in_claim == "no", "{}", r.id);
        assert!(r.in_claim == "yes" || !r.why_not.is_empty(), "{}", r.id);
        // Multi-step scheduling is a vLLM knob: only vLLM rows set it.
        assert!(
            (1..=crate::serve::multistep::MAX_STEPS).contains(&r.num_scheduler_steps)
                && (r.num_scheduler_steps == 1 || r.engine == "vllm"),
            "{}",
            r.id
        );
        assert!(!r.locator.is_empty(), "{}", r.id);
    }
}
