//! `amdahl carbon --sci`: the Software Carbon Intensity (ISO/IEC 21031:2024), (E × I + M) per R,
//! from hardware-hours, a serving simulation and a lifetime, checked against figures computed by
//! hand; and `amdahl report` showing a saved SCI result.

use crate::support::{amdahl, json, num, within};
use predicates::str::contains;

/// 8 devices × 24 h × 500 W = 96 kWh IT; PUE 1; at 100 g/kWh E × I = 9.6 kg; M = 0.4 kg
/// declared; R = 1e6 tokens: SCI = 10,000 g / 1e6 = 0.01 g per token.
#[test]
fn sci_of_hardware_hours_by_hand() {
    let v = json(&[
        "carbon",
        "--count",
        "8",
        "--hours",
        "24",
        "--power",
        "500",
        "--intensity",
        "100",
        "--sci",
        "token",
        "--sci-r",
        "1e6",
        "--sci-m",
        "0.4",
    ]);
    assert_eq!(v["schema"], "amdahl.sci/1");
    assert_eq!(v["unit"], "token");
    assert_eq!(v["side"], "consumer");
    let item = &v["items"][0];
    within(num(item, "energy_kwh"), 96.0, 1e-12);
    within(num(item, "operational_kg"), 9.6, 1e-12);
    within(num(item, "embodied_kg"), 0.4, 1e-12);
    within(num(item, "total_kg"), 10.0, 1e-12);
    within(num(item, "g_per_unit"), 0.01, 1e-12);
    assert_eq!(item["embodied_source"], "declared with --sci-m");
}

/// Without --sci-m, M is amdahl's embodied share of the device: the same figure `carbon`
/// prints as `embodied_co2e_kg`, and SCI = (co2e + embodied) × 1000 / R.
#[test]
fn sci_m_defaults_to_the_embodied_share_carbon_computes() {
    let base = [
        "carbon", "--device", "h100", "--count", "8", "--hours", "24", "--power", "500",
        "--region", "FR",
    ];
    let carbon = json(&base);
    let mut args = base.to_vec();
    args.extend(["--sci", "token", "--sci-r", "2e9"]);
    let v = json(&args);
    let item = &v["items"][0];
    let embodied = num(&carbon, "embodied_co2e_kg");
    assert!(embodied > 0.0);
    within(num(item, "embodied_kg"), embodied, 1e-12);
    within(
        num(item, "g_per_unit"),
        (num(&carbon, "co2e_kg") + embodied) * 1e3 / 2e9,
        1e-12,
    );
    assert!(item["embodied_source"]
        .as_str()
        .unwrap()
        .contains("LLMCarbon"));
}

/// A lifetime: training 1,000 kWh; serving 1,000 requests a day for 10 days at 0.5 kWh per
/// 1,000 = 5 kWh; PUE 1 and 200 g/kWh; M = 1 kg declared; R = 1e6 tokens.
/// Serving (the consumer SCI): (5 × 200 + 1,000) g / 1e6 = 0.002 g per token.
/// Training + serving: (1,005 × 200 + 1,000) g / 1e6 = 0.202 g per token, with the note that
/// amortising training goes beyond the standard.
#[test]
fn sci_of_a_lifetime_by_hand_says_it_goes_beyond_the_standard() {
    let t = tempfile::tempdir().unwrap();
    let life = t.path().join("life.json");
    let out = amdahl()
        .args([
            "lifetime",
            "--train-kwh",
            "1000",
            "--kwh-per-1000-requests",
            "0.5",
            "--requests-per-day",
            "1000",
            "--days",
            "10",
            "--intensity",
            "200",
            "--pue",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&life, &out.stdout).unwrap();
    let path = life.to_str().unwrap();
    let v = json(&[
        "carbon", "--from", path, "--sci", "token", "--sci-r", "1e6", "--sci-m", "1",
    ]);
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["label"], "serving");
    within(num(&items[0], "energy_kwh"), 5.0, 1e-12);
    within(num(&items[0], "g_per_unit"), 0.002, 1e-12);
    assert_eq!(items[1]["label"], "training + serving");
    within(num(&items[1], "energy_kwh"), 1005.0, 1e-12);
    within(num(&items[1], "g_per_unit"), 0.202, 1e-12);
    assert!(
        v["notes"][0]
            .as_str()
            .unwrap()
            .contains("goes beyond the standard"),
        "{}",
        v["notes"]
    );
    // A lifetime names no hardware: M must be declared.
    amdahl()
        .args(["carbon", "--from", path, "--sci", "token", "--sci-r", "1e6"])
        .assert()
        .code(1)
        .stderr(contains("--sci-m KG"));
}

/// A serving simulation: E = energy_j × PUE / 3.6e6 and I its grid, from its own JSON; R its
/// output tokens (requests × mean output) declared; SCI = (E × I + M) / R.
#[test]
fn sci_of_a_serving_simulation_uses_its_energy_and_grid() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("serve.json");
    let out = amdahl()
        .args([
            "serve",
            "--model",
            "llama3-8b",
            "--system",
            "h100",
            "--rate",
            "20",
            "--requests",
            "100",
            "--intensity",
            "300",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&path, &out.stdout).unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tokens = num(&s, "mean_output_tokens") * num(&s, "requests");
    let r = tokens.to_string();
    let v = json(&[
        "carbon",
        "--from",
        path.to_str().unwrap(),
        "--sci",
        "token",
        "--sci-r",
        &r,
        "--sci-m",
        "0",
    ]);
    let item = &v["items"][0];
    let e = num(&s, "energy_j") * num(&s, "pue") / 3.6e6;
    within(num(item, "energy_kwh"), e, 1e-12);
    within(num(item, "intensity_g_per_kwh"), 300.0, 1e-12);
    within(num(item, "g_per_unit"), e * 300.0 / tokens, 1e-12);
    assert!(v["notes"].to_string().contains("M is 0"), "{}", v["notes"]);
    // Its PUE and grid are its own.
    amdahl()
        .args([
            "carbon",
            "--from",
            path.to_str().unwrap(),
            "--sci",
            "token",
            "--sci-r",
            "1",
        ])
        .args(["--region", "FR"])
        .assert()
        .code(1)
        .stderr(contains("cannot be combined"));
}

#[test]
fn sci_needs_r_and_refuses_nonsense() {
    let base = [
        "carbon", "--count", "1", "--hours", "1", "--power", "100", "--sci", "token",
    ];
    let mut no_r = base.to_vec();
    no_r.push("--sci-m");
    no_r.push("0");
    amdahl()
        .args(&no_r)
        .assert()
        .code(1)
        .stderr(contains("needs --sci-r R"));
    for (flag, value, says) in [
        ("--sci-r", "0", "--sci-r"),
        ("--sci-r", "-5", "--sci-r"),
        ("--sci-m", "-1", "0 or more"),
    ] {
        let mut a = base.to_vec();
        a.extend(["--sci-r", "10", "--sci-m", "1"]);
        let i = a.iter().rposition(|x| *x == flag).unwrap();
        a[i + 1] = value;
        amdahl().args(&a).assert().code(1).stderr(contains(says));
    }
    // Without a device there is no embodied share to default to.
    let mut a = base.to_vec();
    a.extend(["--sci-r", "10"]);
    amdahl()
        .args(&a)
        .assert()
        .code(1)
        .stderr(contains("--sci-m KG"));
    // --sci-r without --sci is a usage error.
    amdahl()
        .args([
            "carbon", "--count", "1", "--hours", "1", "--power", "100", "--sci-r", "5",
        ])
        .assert()
        .code(2);
}

/// `amdahl report` shows a saved SCI result: its section, the formula and the figure.
#[test]
fn report_shows_a_saved_sci_result() {
    let t = tempfile::tempdir().unwrap();
    let sci = t.path().join("sci.json");
    let out = amdahl()
        .args([
            "carbon",
            "--count",
            "8",
            "--hours",
            "24",
            "--power",
            "500",
            "--intensity",
            "100",
            "--sci",
            "token",
            "--sci-r",
            "1e6",
            "--sci-m",
            "0.4",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(&sci, &out.stdout).unwrap();
    let html = t.path().join("r.html");
    amdahl()
        .arg("report")
        .arg(&sci)
        .arg("-o")
        .arg(&html)
        .assert()
        .success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Software Carbon Intensity"), "no section");
    assert!(page.contains("0.01 gCO2e per token"), "no SCI figure");
    assert!(page.contains("ISO/IEC 21031:2024"), "no standard");
}

/// Regression: the SCI's source text printed the PUE as given
/// ("PUE 1.12345") where `carbon`'s table and statement for the same job print "1.12".
#[test]
fn the_sci_source_quotes_the_pue_as_the_carbon_table_shows_it() {
    let job = [
        "carbon", "--count", "8", "--hours", "10", "--power", "500", "--pue", "1.12345",
    ];
    let text = |extra: &[&str]| {
        let out = amdahl().args(job).args(extra).assert().success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    let table = text(&[]);
    let pue = table
        .lines()
        .find_map(|l| l.strip_prefix("PUE"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no PUE row in\n{table}"));
    assert!(pue.starts_with("1.12 ("), "{table}");
    let sci = text(&["--sci", "token", "--sci-r", "1e6", "--sci-m", "0"]);
    assert!(sci.contains("; PUE 1.12, "), "{sci}");
    assert!(!sci.contains("1.12345"), "{sci}");
}
