//! `amdahl lifetime`: hand-computed phases, overtaking day and break-even; composing saved
//! results (the hand-written `amdahl.infer/1` contract fixture, plan and run results); bad input
//! (exit 1 with a clear message, never a panic).

use crate::support::{amdahl, json, num, within, words};
use predicates::prelude::*;
use std::path::Path;

fn infer() -> String {
    format!("{}/tests/fixtures/infer.json", env!("CARGO_MANIFEST_DIR"))
}

fn fails(args: &[&str], message: &str) {
    amdahl()
        .args(args)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(message).and(predicate::str::contains("panicked").not()));
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let f = dir.join(name);
    std::fs::write(&f, text).unwrap();
    f.to_str().unwrap().to_string()
}

#[test]
fn training_kwh_plus_an_infer_result_by_hand() {
    // Training: 100 kWh IT × PUE 1.1 = 110 kWh, × 56 g/kWh (FR, data/grid.csv) = 6.16 kg.
    // Serving (fixture): 200 J per request; 100,000 a day = 20 MJ = 5.556 kWh IT, × 1.1 =
    // 6.111 kWh a day; 30 days: 183.3 kWh, 10.27 kg. Serving overtakes training on day
    // 110 / 6.111 = 18.0; inference share 183.3 / 293.3 = 62.5 %.
    let v = json(&[
        "lifetime",
        "--train-kwh",
        "100",
        "--serve",
        &infer(),
        "--requests-per-day",
        "100000",
        "--days",
        "30",
        "--pue",
        "1.1",
        "--region",
        "FR",
    ]);
    assert_eq!(v["schema"], "amdahl.lifetime/1");
    within(num(&v, "requests"), 3e6, 1e-12);
    let a = &v["alternatives"][0];
    within(num(&a["training"], "energy_kwh"), 110.0, 1e-12);
    within(num(&a["training"], "co2e_kg"), 6.16, 1e-12);
    within(
        num(&a["serving"], "kwh_per_1000_requests"),
        1.1 * 200e3 / 3.6e6,
        1e-12,
    );
    within(num(a, "serving_energy_kwh"), 550.0 / 3.0, 1e-12);
    within(num(a, "serving_co2e_kg"), 550.0 / 3.0 * 0.056, 1e-12);
    within(num(a, "inference_share_energy"), 0.625, 1e-12);
    within(num(a, "overtake_day_energy"), 18.0, 1e-12);
    within(num(a, "overtake_day_co2e"), 18.0, 1e-12);
    assert_eq!(a["serving"]["basis"], "estimated");
}

#[test]
fn saved_results_keep_their_own_pue_and_grid() {
    // Without --pue/--region each phase resolves as `amdahl carbon --from` does: the infer
    // result's PUE 1.1 and FR grid; a measured run's local PUE (1.0) and its recorded grid.
    let dir = tempfile::tempdir().unwrap();
    let run = write(
        dir.path(),
        "run.json",
        r#"{"schema":"amdahl.run/1","total_energy_j":3.6e8,"duration_s":36000,
           "intensity":{"g_per_kwh":30.1,"region":"NO","source":"OWID","year":2023}}"#,
    );
    let v = json(&[
        "lifetime",
        "--train",
        &run,
        "--serve",
        &infer(),
        "--requests-per-day",
        "1e6",
        "--days",
        "365",
    ]);
    let a = &v["alternatives"][0];
    assert_eq!(a["training"]["basis"], "measured");
    within(num(&a["training"], "energy_kwh"), 100.0, 1e-12);
    assert_eq!(a["training"]["intensity"]["code"], "NO");
    within(num(&a["training"]["pue"], "value"), 1.0, 1e-12);
    within(num(&a["serving"]["pue"], "value"), 1.1, 1e-12);
    assert_eq!(a["serving"]["intensity"]["code"], "FR");
    // 1e6 requests a day × 200 J × 1.1 = 61.1 kWh a day: overtakes 100 kWh on day 1.636.
    within(
        num(a, "overtake_day_energy"),
        100.0 / (1e6 * 200.0 * 1.1 / 3.6e6),
        1e-12,
    );
}

#[test]
fn a_measured_serving_run_needs_its_request_count() {
    // 7.2 MJ over 1,000 requests = 7,200 J each, 2 kWh per 1,000 (PUE 1 given).
    let dir = tempfile::tempdir().unwrap();
    let run = write(
        dir.path(),
        "serve.json",
        r#"{"schema":"amdahl.run/1","total_energy_j":7.2e6,"duration_s":600}"#,
    );
    let v = json(&[
        "lifetime",
        "--train-kwh",
        "10",
        "--serve",
        &run,
        "--requests-in-run",
        "1000",
        "--requests-per-day",
        "10",
        "--days",
        "7",
        "--pue",
        "1",
    ]);
    let a = &v["alternatives"][0];
    within(num(&a["serving"], "kwh_per_1000_requests"), 2.0, 1e-12);
    assert_eq!(a["serving"]["basis"], "measured");
    // 10 kWh ÷ 0.02 kWh a day = day 500: not within 7 days.
    assert!(a["overtake_day_energy"].is_null());
    amdahl()
        .args([
            "lifetime",
            "--train-kwh",
            "10",
            "--serve",
            &run,
            "--requests-in-run",
            "1000",
            "--requests-per-day",
            "10",
            "--days",
            "7",
            "--pue",
            "1",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("not within 7 days"));
    fails(
        &[
            "lifetime",
            "--train-kwh",
            "10",
            "--serve",
            &run,
            "--requests-per-day",
            "10",
            "--days",
            "7",
        ],
        "--requests-in-run N",
    );
}

#[test]
fn two_alternatives_break_even_by_hand() {
    // big: 1,000 kWh training, 2 kWh per 1,000 requests; small: 3,000 kWh, 1 kWh (PUE 1, one
    // grid). small pays back after (3,000 − 1,000) / ((2 − 1) / 1,000) = 2,000,000 requests,
    // day 20 at 100,000 a day; both totals are then 5,000 kWh.
    let dir = tempfile::tempdir().unwrap();
    let side = |label: &str, train: &str, serve: &str| -> String {
        let out = amdahl()
            .args([
                "lifetime",
                "--train-kwh",
                train,
                "--kwh-per-1000-requests",
                serve,
                "--requests-per-day",
                "100000",
                "--days",
                "30",
                "--pue",
                "1",
                "--intensity",
                "100",
                "--label",
                label,
                "--json",
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        write(
            dir.path(),
            &format!("{label}.json"),
            &String::from_utf8(out).unwrap(),
        )
    };
    let (a, b) = (side("big", "1000", "2"), side("small", "3000", "1"));
    let svg = dir.path().join("life.svg");
    let v = json(&["lifetime", &a, &b, "--svg", svg.to_str().unwrap()]);
    let e = &v["break_even"]["energy"];
    assert_eq!(e["costlier_training"], "small");
    within(num(e, "requests"), 2e6, 1e-12);
    within(num(e, "day"), 20.0, 1e-12);
    assert_eq!(e["within_horizon"], true);
    within(num(&v["break_even"]["co2e"], "requests"), 2e6, 1e-12);
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("break-even: small cheaper after day 20"));
    // Over 10 days (flag overrides the files' 30) it does not pay back yet.
    let v = json(&["lifetime", &a, &b, "--days", "10"]);
    assert_eq!(v["break_even"]["energy"]["within_horizon"], false);
    // The other way round the costlier training never pays.
    let c = side("dear", "3000", "3");
    amdahl()
        .args(["lifetime", &a, &c])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "dear (the costlier to train) never becomes the cheaper",
        ));
    // Files over different horizons need one given; per-alternative options are refused.
    let out = amdahl()
        .args([
            "lifetime",
            "--train-kwh",
            "5",
            "--kwh-per-1000-requests",
            "1",
            "--requests-per-day",
            "100000",
            "--days",
            "60",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let long = write(dir.path(), "long.json", &String::from_utf8(out).unwrap());
    fails(&["lifetime", &a, &long], "differ in days; give --days");
    let v = json(&["lifetime", &a, &long, "--days", "45"]);
    within(num(&v, "days"), 45.0, 1e-12);
    fails(
        &["lifetime", &a, &b, "--pue", "1.2"],
        "--pue describes one alternative",
    );
    fails(
        &["lifetime", &a, &b, "--label", "x"],
        "--label describes one alternative",
    );
    // A result of two alternatives is not an alternative.
    let both = write(dir.path(), "both.json", &serde_json::to_string(&v).unwrap());
    fails(&["lifetime", &both, &a], "holds 2 alternatives");
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let i = infer();
    let plan = write(
        dir.path(),
        "plan.json",
        r#"{"schema":"amdahl.plan/1","gpus":8,"training":{"train_time":3600,
           "power_per_device":500,"tokens":1e9,"pue":1.1}}"#,
    );
    let search = write(
        dir.path(),
        "search.json",
        r#"{"schema":"amdahl.infer-search/1"}"#,
    );
    let fit = write(dir.path(), "fit.json", r#"{"schema":"amdahl.fit/1"}"#);
    let partial = write(
        dir.path(),
        "partial.json",
        r#"{"schema":"amdahl.infer/1","energy_per_request_j":200,"gpus":8}"#,
    );
    let ok = ["--requests-per-day", "1000", "--days", "30"];
    let life = |extra: &[&str]| -> Vec<String> {
        ["lifetime"]
            .iter()
            .chain(extra)
            .chain(ok.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |args: Vec<String>, msg: &str| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        fails(&a, msg);
    };
    // Zero requests, zero or negative days.
    fails(
        &[
            "lifetime",
            "--train-kwh",
            "1",
            "--serve",
            &i,
            "--requests-per-day",
            "0",
            "--days",
            "3",
        ],
        "requests per day must be a positive number",
    );
    for d in ["0", "-5"] {
        fails(
            &[
                "lifetime",
                "--train-kwh",
                "1",
                "--serve",
                &i,
                "--requests-per-day",
                "9",
                "--days",
                d,
            ],
            "days must be a positive number",
        );
    }
    fails(
        &["lifetime", "--train-kwh", "1", "--serve", &i, "--days", "3"],
        "--requests-per-day",
    );
    // Mismatched schemas: serving as training, training as serving, a search, an unknown kind.
    run(
        life(&["--train", &i, "--serve", &i]),
        "is a serving result; give it as --serve",
    );
    run(
        life(&["--train", &plan, "--serve", &plan]),
        "is a training plan; give it as --train",
    );
    run(
        life(&["--train", &plan, "--serve", &search]),
        "without --search",
    );
    run(life(&["--train", &fit, "--serve", &i]), "not supported");
    // Missing fields and missing inputs.
    run(
        life(&["--train-kwh", "5", "--serve", &partial]),
        "`requests_per_s` is missing",
    );
    run(life(&["--serve", &i]), "--train FILE");
    run(life(&["--train-kwh", "5"]), "--serve FILE");
    run(
        life(&["--train-kwh", "0", "--serve", &i]),
        "training energy must be a positive number",
    );
    run(
        life(&["--train-kwh", "5", "--kwh-per-1000-requests", "-1"]),
        "energy per request must be a positive number",
    );
    run(
        life(&["--train-kwh", "5", "--train", &plan, "--serve", &i]),
        "cannot be combined",
    );
    run(
        life(&["--train-kwh", "5", "--serve", &i, "--requests-in-run", "10"]),
        "already gives its energy per request",
    );
    // Alternatives must be lifetime results, two of them.
    run(life(&[&plan, &i]), "is not an alternative");
    run(life(&[&plan]), "compare two");
    fails(
        &["lifetime", "/nonexistent/a.json", &plan],
        "reading /nonexistent/a.json",
    );
}

/// The fields `amdahl.serve/1` promises a reader of its energy (crates/amdahl-model/src/carbon/
/// from_result.rs, `read_serve`), hand-written: 7,200 J for 100 requests in 10 s on 2 devices.
const SERVE_CONTRACT: &str = r#"{"schema":"amdahl.serve/1","energy_j":7200,"requests":100,
"duration_s":10,"gpus":2,"pue":1.2,"grid":"France","grid_code":"FR","grid_g_per_kwh":56,
"grid_year":2023,"model":"M","system":"H100 SXM5 80GB","workload":"w"}"#;

/// `lifetime --json` of 10 kWh of training and the serving result `serve`, over a horizon.
fn with_serve(serve: &str, per_day: &str, days: &str) -> serde_json::Value {
    json(&[
        "lifetime",
        "--train-kwh",
        "10",
        "--serve",
        serve,
        "--requests-per-day",
        per_day,
        "--days",
        days,
    ])
}

#[test]
fn a_serve_simulation_is_its_energy_over_its_requests_by_hand() {
    // 7,200 J ÷ 100 requests = 72 J each: 0.02 kWh IT per 1,000; × PUE 1.2 (the result's) =
    // 0.024 kWh; × 56 g/kWh (its FR grid) = 1.344 g. 1,000 a day for 10 days = 0.24 kWh.
    let dir = tempfile::tempdir().unwrap();
    let serve = write(dir.path(), "serve.json", SERVE_CONTRACT);
    let v = with_serve(&serve, "1000", "10");
    let s = &v["alternatives"][0]["serving"];
    within(num(s, "it_kwh_per_1000_requests"), 0.02, 1e-12);
    within(num(s, "kwh_per_1000_requests"), 0.024, 1e-12);
    within(
        num(s, "co2e_kg_per_1000_requests"),
        0.024 * 56.0 / 1000.0,
        1e-12,
    );
    assert_eq!(s["intensity"]["code"], "FR");
    assert_eq!(s["basis"], "estimated");
    within(
        num(&v["alternatives"][0], "serving_energy_kwh"),
        0.24,
        1e-12,
    );
    // A table says the serving energy is the power model's, and how far it holds.
    amdahl()
        .args(["lifetime", "--train-kwh", "10", "--serve", &serve])
        .args(["--requests-per-day", "1000", "--days", "10"])
        .assert()
        .success()
        .stderr(predicate::str::contains("energy: modelled, not measured"));
}

#[test]
fn a_real_serve_result_gives_the_energy_per_request_it_printed() {
    // `amdahl serve --json` as a user saves it: lifetime's serving figure per 1,000 requests
    // (× PUE) is the simulation's own `kwh_per_1000_requests`, and its grid the run's.
    let dir = tempfile::tempdir().unwrap();
    let sim = json(&words(
        "serve --model llama3-8b --system h100 --rate 20 --requests 100 --region FR --pue 1.3",
    ));
    let serve = write(dir.path(), "serve.json", &sim.to_string());
    let v = with_serve(&serve, "1e6", "30");
    let s = &v["alternatives"][0]["serving"];
    within(
        num(s, "kwh_per_1000_requests"),
        num(&sim, "kwh_per_1000_requests"),
        1e-9,
    );
    assert_eq!(s["intensity"]["code"], "FR");
    within(num(&s["pue"], "value"), 1.3, 1e-12);
}

#[test]
fn a_serve_result_that_cannot_be_read_says_which_field() {
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "lifetime",
        "--train-kwh",
        "10",
        "--requests-per-day",
        "1",
        "--days",
        "1",
    ];
    for (from, to, says) in [
        (
            r#""gpus":2"#,
            r#""gpus":0"#,
            "field `gpus` = 0 is not a device count",
        ),
        (r#""energy_j":7200,"#, "", "field `energy_j` is missing"),
        (
            r#""requests":100"#,
            r#""requests":-5"#,
            "field `requests` = -5 must be positive",
        ),
    ] {
        let f = write(dir.path(), "bad.json", &SERVE_CONTRACT.replace(from, to));
        fails(&[&base[..], &["--serve", &f]].concat(), says);
    }
    // A search ranks configurations: it is not one run's energy.
    let search = write(
        dir.path(),
        "search.json",
        r#"{"schema":"amdahl.serve-search/1"}"#,
    );
    fails(
        &[&base[..], &["--serve", &search]].concat(),
        "re-run `amdahl serve` without --search",
    );
}
