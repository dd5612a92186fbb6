//! Consistency a reader relies on: one default per quantity in every
//! command, the citable statement, `scale` without speedup, `plan --search` batch and precision,
//! usage errors and `--quiet`, and the smaller things a reader trips on. Each test is named after
//! the defect it guards against.

use crate::support::words;
use crate::support::ScrubEnv;
use assert_cmd::Command;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;
use serde_json::Value;
use std::path::Path;

fn amdahl() -> Command {
    let mut c = Command::cargo_bin("amdahl").unwrap();
    c.scrub_env();
    c
}

/// `amdahl run` with no readable counter (an empty powercap root) and no GPU: the estimate path,
/// the same on every machine.
fn run_cmd(dir: &Path) -> Command {
    let mut c = amdahl();
    c.env("AMDAHL_POWERCAP_ROOT", dir.join("no-powercap"))
        .current_dir(dir)
        .args(["run", "--no-gpu", "--cpu-tdp", "100", "--interval", "100ms"]);
    c
}

fn stdout_json(args: &[&str]) -> Value {
    let out = amdahl().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Item 14: PUE 1.0 for `plan` and `run` but 1.56 for `carbon`; a world grid of direct emissions
/// beside life-cycle countries. Now every command uses the same PUE and world grid by default.
#[test]
fn defaults_differed_between_commands() {
    let carbon = stdout_json(&[
        "carbon", "--device", "h100", "--count", "8", "--hours", "10", "--power", "500", "--json",
    ]);
    let plan = stdout_json(&words("plan --model llama2-7b --gpus 8 --batch 64 --json"));
    assert_eq!(carbon["pue"]["value"], 1.0, "{}", carbon["pue"]);
    assert_eq!(plan["training"]["pue"], 1.0);
    assert_eq!(carbon["intensity"]["g_per_kwh"], 436.0);
    assert_eq!(carbon["intensity"]["scope"], "lifecycle");
    assert_eq!(plan["grid"]["g_per_kwh"], carbon["intensity"]["g_per_kwh"]);
    assert_eq!(plan["grid"]["scope"], "lifecycle");
    // The default is named as such wherever it is shown.
    assert!(
        carbon["pue"]["source"]
            .as_str()
            .unwrap_or("")
            .contains("default"),
        "{}",
        carbon["pue"]
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    run_cmd(dir.path())
        .arg("-o")
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .success();
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(r["pue"], 1.0);
    assert_eq!(r["intensity"]["g_per_kwh"], 436.0);
}

/// Item 14: `--intensity` without a year was stamped with the current year (the demo's GPT-3 row
/// said 2026). No year given: none claimed.
#[test]
fn intensity_without_year_was_stamped_with_this_year() {
    let v = stdout_json(&words(
        "carbon --device v100 --count 8 --hours 1 --power 300 --intensity 429 --statement json",
    ));
    assert_eq!(v["intensity_year"], Value::Null);
    amdahl()
        .args([
            "carbon",
            "--device",
            "v100",
            "--count",
            "8",
            "--hours",
            "1",
            "--power",
            "300",
            "--intensity",
            "429",
            "--statement",
            "md",
        ])
        .assert()
        .success()
        .stdout(contains("year not given"));
}

/// Item 17: a statement for a run that failed (exit 2) had no warning; units like
/// "9.820e-5 hours"; internal ids like `estimate:cpu`.
#[test]
fn statement_of_a_failed_run_said_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    run_cmd(dir.path())
        .arg("-o")
        .arg(&out)
        .args(["--", "sh", "-c", "exit 2"])
        .assert()
        .code(2);
    let a = amdahl()
        .arg("carbon")
        .arg("--from")
        .arg(&out)
        .args(["--statement", "md"])
        .assert()
        .success()
        .stderr(contains(
            "warning: the measured command failed with exit status 2",
        ));
    let text = String::from_utf8_lossy(&a.get_output().stdout).into_owned();
    assert!(
        text.starts_with("Caution: the measured command failed"),
        "{text}"
    );
    assert!(!text.contains("estimate:"), "internal ids: {text}");
    let sci = text
        .as_bytes()
        .windows(3)
        .any(|w| w[0].is_ascii_digit() && w[1] == b'e' && (w[2] == b'-' || w[2].is_ascii_digit()));
    assert!(text.contains(" seconds") && !sci, "{text}");
}

/// Item 17: a prediction (`carbon --from plan.json`) said "The computation ran".
#[test]
fn statement_of_a_prediction_said_ran() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let out = amdahl()
        .args([
            "plan",
            "--model",
            "llama2-7b",
            "--gpus",
            "8",
            "--batch",
            "64",
            "--json",
        ])
        .output()
        .unwrap();
    std::fs::write(&plan, out.stdout).unwrap();
    amdahl()
        .arg("carbon")
        .arg("--from")
        .arg(&plan)
        .args(["--statement", "md"])
        .assert()
        .success()
        .stdout(contains("The computation would run on").and(contains(" ran ").not()));
}

/// Item 20: `amdahl run -x -- true` ran `-x` as the command (exit 127 after two long warnings).
/// An option amdahl does not know, before the command, is a usage error.
#[test]
fn unknown_option_before_the_command_was_run_as_the_command() {
    let dir = tempfile::tempdir().unwrap();
    run_cmd(dir.path())
        .args(["-x", "--", "true"])
        .assert()
        .code(2)
        .stderr(contains("unexpected argument '-x'"));
    amdahl()
        .args(["scale", "--n", "1,2", "-x", "--", "true"])
        .assert()
        .code(2);
    // Options after the command's first word still belong to the command.
    run_cmd(dir.path()).args(["ls", "-la"]).assert().success();
}

/// `serve --rate -1`, `--slo-ttft-ms -5` and `plan --gpus -8` were answered "unexpected argument
/// '-1' found" (clap took the value for an option) or "invalid digit found in string". Every
/// numeric option's value reaches its parser now, which names the domain (exit 2).
#[test]
fn a_negative_value_was_taken_for_an_option() {
    let serve = [
        "serve",
        "--model",
        "llama3-8b",
        "--system",
        "h100",
        "--gpus",
        "1",
    ];
    let cases: [(&[&str], &str); 5] = [
        (
            &["--rate", "-1"],
            "'-1' for '--rate <RATE>': must be a positive number (got -1)",
        ),
        (
            &["--rate", "2", "--slo-ttft-ms", "-5"],
            "must be a positive number (got -5)",
        ),
        (
            &["--rate", "2", "--seed", "-3"],
            "must be a whole number from 0 to 18446744073709551615 (got -3)",
        ),
        (
            &["--rate", "2", "--tp", "-2"],
            "must be a whole number from 1 to 4294967295 (got -2)",
        ),
        (
            &["--rate", "2", "--duration", "-60"],
            "'-60' for '--duration <SECONDS>'",
        ),
    ];
    for (args, message) in cases {
        amdahl()
            .args(serve)
            .args(args)
            .assert()
            .code(2)
            .stderr(contains(message).and(contains("unexpected argument").not()));
    }
    amdahl()
        .args([
            "plan",
            "--model",
            "llama3-8b",
            "--system",
            "h100",
            "--gpus",
            "-8",
        ])
        .assert()
        .code(2)
        .stderr(contains(
            "'-8' for '--gpus <GPUS>': must be a whole number from 0",
        ));
    amdahl()
        .args([
            "carbon", "--device", "h100", "--count", "8", "--hours", "-2",
        ])
        .assert()
        .code(2)
        .stderr(contains("must be a positive number (got -2)"));
}

/// Item 20: `--quiet` (`-q`): results only; the run summary and "wrote FILE" lines go.
#[test]
fn quiet_silences_notes_and_summaries() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let a = run_cmd(dir.path())
        .arg("-q")
        .arg("-o")
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .success();
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(!err.contains("total ") && !err.contains("wrote"), "{err}");
    assert!(out.exists());
}

/// Item 21: "wrote FILE" went to stdout for `surface`, stderr for `fit`, nowhere for `plan`. Every
/// command now says it the same way, on stderr.
#[test]
fn wrote_file_went_to_different_streams() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: Vec<(Vec<String>, std::path::PathBuf)> = vec![
        (
            vec!["fit".into(), "--builtin".into(), "--svg".into()],
            d.join("fit.svg"),
        ),
        (
            vec![
                "plan".into(),
                "--model".into(),
                "llama2-7b".into(),
                "--gpus".into(),
                "8".into(),
                "--batch".into(),
                "64".into(),
                "--svg".into(),
            ],
            d.join("plan.svg"),
        ),
        (vec!["surface".into(), "-o".into()], d.join("surface.svg")),
    ];
    for (args, path) in cases {
        let a = amdahl().args(&args).arg(&path).assert().success();
        let o = a.get_output();
        let want = format!("amdahl: wrote {}", path.display());
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(&want),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("wrote"),
            "{args:?}: stdout carries results only"
        );
    }
}

/// Item 21: an unknown model said "run `amdahl catalog`", which fails without the catalog's
/// name; the models table did not show the short names users type.
#[test]
fn unknown_model_hint_named_a_failing_command() {
    amdahl()
        .args([
            "carbon", "--model", "gpt9", "--tokens", "1e9", "--device", "h100", "--mfu", "0.4",
        ])
        .assert()
        .code(1)
        .stderr(contains("`amdahl catalog models`"));
    amdahl()
        .args(["catalog", "models"])
        .assert()
        .success()
        .stdout(contains("also called").and(contains("gpt3-175b")));
}

/// Item 21: tables 150–260 columns wide wrapped in an 80–120 column terminal.
#[test]
fn tables_wrapped_in_a_narrow_terminal() {
    let a = amdahl()
        .env("COLUMNS", "80")
        .args(["catalog", "pue"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&a.get_output().stdout).into_owned();
    for l in text.lines() {
        assert!(
            l.chars().count() <= 80,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    assert!(text.contains("Uptime Institute"), "{text}");
}

/// Item 19: `plan --search --batch 2520` listed B2516, B1424, B2112 without saying so, and the
/// top 5 were near-duplicates of one layout.
#[test]
fn search_changed_the_batch_and_listed_near_duplicates() {
    let v = stdout_json(&words(
        "plan --model gpt3-175b --gpus 1024 --batch 2520 --search --top 5 --json",
    ));
    let top = v["top"].as_array().unwrap();
    assert!(!top.is_empty());
    let mut shapes = std::collections::HashSet::new();
    for l in top {
        let l = &l["layout"];
        assert_eq!(l["batch"], 2520, "{l}");
        assert!(
            shapes.insert((
                l["tp"].clone().to_string(),
                l["pp"].to_string(),
                l["dp"].to_string(),
                l["mbs"].to_string()
            )),
            "near-duplicate shape listed twice: {l}"
        );
    }
    // --batch-max lets the search train on less, and says so.
    amdahl()
        .args([
            "plan",
            "--model",
            "gpt3-175b",
            "--gpus",
            "1024",
            "--batch-max",
            "2520",
            "--search",
            "--top",
            "3",
        ])
        .assert()
        .success()
        .stdout(contains("at most 2520 sequences (--batch-max)"));
}

/// Item 19: V100 was planned in bf16 without comment (Volta has no bf16).
#[test]
fn v100_was_planned_in_bf16() {
    let base = [
        "plan",
        "--model",
        "llama2-7b",
        "--system",
        "v100-32gb",
        "--gpus",
        "8",
        "--batch",
        "64",
        "--tp",
        "8",
    ];
    amdahl()
        .args(base)
        .assert()
        .code(1)
        .stderr(contains("no bf16").and(contains("--precision fp16")));
    amdahl()
        .args(base)
        .args(["--precision", "fp16"])
        .assert()
        .success()
        .stdout(contains("fp16"));
}

/// Item 19: the bf16 → fp8 what-if table had no precision column.
#[test]
fn precision_whatif_had_no_precision_column() {
    let a = amdahl()
        .args([
            "plan",
            "--model",
            "llama2-7b",
            "--system",
            "h100",
            "--gpus",
            "8",
            "--batch",
            "64",
        ])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&a.get_output().stdout).into_owned();
    let what_if = text
        .split("precision what-if")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    let mut lines = what_if.lines().skip(1);
    assert!(
        lines.next().unwrap_or("").starts_with("precision"),
        "{what_if}"
    );
    assert!(
        what_if.contains("\nbf16 ") && what_if.contains("\nfp8 "),
        "{what_if}"
    );
}

/// Item 21: `plan -h` had undocumented options and 55 ungrouped ones.
#[test]
fn plan_help_was_ungrouped_and_undocumented() {
    let a = amdahl().args(["plan", "--help"]).assert().success();
    let text = String::from_utf8_lossy(&a.get_output().stdout).into_owned();
    for h in [
        "Model:", "System:", "Layout:", "Cost:", "Search:", "Output:",
    ] {
        assert!(text.contains(h), "heading {h} missing:\n{text}");
    }
    // Every option has a sentence: no option line is followed directly by another option line.
    let lines: Vec<&str> = text.lines().collect();
    for w in lines.windows(2) {
        let opt = |l: &str| l.trim_start().starts_with("--") || l.trim_start().starts_with("-q");
        assert!(
            !(opt(w[0]) && (opt(w[1]) || w[1].trim().is_empty() || w[1].trim().starts_with('['))),
            "undocumented option: {}",
            w[0]
        );
    }
}

/// Item 21: `accelerate` printed "1" beside "2.247×"; `fit` printed "throughput peak at N = -".
#[test]
fn units_and_dashes_a_reader_trips_on() {
    amdahl()
        .args([
            "accelerate",
            "--n",
            "1000",
            "--efficiency",
            "0.5",
            "--by",
            "4",
        ])
        .assert()
        .success()
        .stdout(contains(" 1× ").and(contains("1-α").not()));
    amdahl()
        .args(["fit", "--builtin"])
        .assert()
        .success()
        .stdout(contains("peak at N = -").not());
}

/// The `[profile.NAME]` settings of the workspace manifest, `key = value` per line.
fn profile(name: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let toml = std::fs::read_to_string(root).unwrap();
    let header = format!("profile.{name}]");
    let section = toml
        .split("\n[")
        .find(|s| s.starts_with(&header))
        .unwrap_or_else(|| panic!("Cargo.toml has no [profile.{name}] section"));
    section
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

/// Regression: release artefacts shipped with debug info (`debug = 1`: a 158 MB `amdahl`
/// binary, 18.8 MB without it; the wheel installed 156 MB). The release profile must build
/// without debug info and strip what dependencies' prebuilt objects bring
/// (`strip = "debuginfo"` or `"symbols"`); the wheel's size is measured in docs/usage/python.md.
#[test]
fn release_artefacts_carry_no_debug_info() {
    let p = profile("release");
    let get = |k: &str| p.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    assert!(
        matches!(get("debug"), Some("false" | "0" | "none")),
        "[profile.release] debug = {:?}",
        get("debug")
    );
    assert!(
        matches!(get("strip"), Some("debuginfo" | "symbols" | "true")),
        "[profile.release] strip = {:?}",
        get("strip")
    );
}

/// Regression: the wheel installed 26.3 MB (release profile), over the 15 MB it must fit in. The
/// `dist` profile the install line builds (`maturin build --profile dist`) made it 14.4 MB
/// (docs/usage/python.md): whole-program LTO in one codegen unit, no symbols, size-optimised code
/// except the models and kernels. A build takes ~10 minutes here, so CI checks the settings that
/// got there rather than the size.
#[test]
fn the_wheel_profile_optimises_for_size() {
    let p = profile("dist");
    let get = |k: &str| p.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    assert_eq!(get("inherits"), Some("release"));
    assert_eq!(get("lto"), Some("fat"));
    assert_eq!(get("codegen-units"), Some("1"));
    assert_eq!(get("strip"), Some("symbols"));
    assert_eq!(get("opt-level"), Some("z"));
    // The models keep full optimisation: their speed is what users feel.
    assert_eq!(
        profile("dist.package.amdahl-model"),
        [("opt-level".to_string(), "3".to_string())]
    );
}

/// Regression: `--intensity-year`'s help, shared by every command with
/// a grid, said "printed in the statement", but only `carbon` has `--statement`, and `serve` and
/// `lifetime` showed the year nowhere (`serve` did not even record it). Every command that takes
/// it now prints it beside the intensity, and the help says so.
#[test]
fn every_command_that_takes_intensity_year_prints_it() {
    let grid = "--intensity 300 --intensity-year 2019";
    let dir = tempfile::tempdir().unwrap();
    let mut outputs = vec![];
    for line in [
        "carbon --device h100 --count 8 --hours 10 --power 500",
        "plan --model llama3-8b --system h100 --gpus 8 --batch 64",
        "infer --model llama3-8b --system h100",
        "serve --model llama3-8b --system h100 --rate 5 --requests 20",
        "lifetime --train-kwh 50000 --kwh-per-1000-requests 0.4 --requests-per-day 1e6 --days 365",
    ] {
        let out = amdahl()
            .args(words(line))
            .args(words(grid))
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push((line, String::from_utf8_lossy(&out.stdout).into_owned()));
    }
    let out = run_cmd(dir.path())
        .args(words(grid))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let both = [out.stdout, out.stderr].concat();
    outputs.push(("run", String::from_utf8_lossy(&both).into_owned()));
    for (line, text) in &outputs {
        assert!(
            text.contains("2019"),
            "{line}: the year is not shown:\n{text}"
        );
    }
    let serve = stdout_json(&words(&format!(
        "serve --model llama3-8b --system h100 --rate 5 --requests 20 {grid} --json"
    )));
    assert_eq!(serve["grid_year"], 2019, "{}", serve["grid"]);
    for cmd in [
        "carbon", "plan", "infer", "serve", "lifetime", "run", "scale",
    ] {
        let out = amdahl().args([cmd, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        let year = help
            .split_once("--intensity-year <YEAR>")
            .map(|(_, h)| h.split("[default").next().unwrap_or(""))
            .unwrap_or_else(|| panic!("{cmd}: no --intensity-year"));
        assert!(!year.contains("printed in the statement"), "{cmd}: {year}");
        assert!(
            year.contains("printed beside the intensity"),
            "{cmd}: {year}"
        );
    }
}

/// Regression: `--intensity-source`'s help says the source is recorded with the intensity, and
/// `serve`'s JSON kept only the grid's name. Every command's JSON now holds it.
#[test]
fn every_command_records_where_its_intensity_comes_from() {
    let grid = "--intensity 300 --intensity-source utility-bill-2025 --json";
    for line in [
        "plan --model llama3-8b --system h100 --gpus 8 --batch 64",
        "infer --model llama3-8b --system h100",
        "serve --model llama3-8b --system h100 --rate 5 --requests 20",
        "lifetime --train-kwh 50000 --kwh-per-1000-requests 0.4 --requests-per-day 1e6 --days 365",
    ] {
        let v = stdout_json(&words(&format!("{line} {grid}")));
        assert!(
            v.to_string().contains("\"utility-bill-2025\""),
            "{line}: the source is not recorded: {v}"
        );
    }
}
