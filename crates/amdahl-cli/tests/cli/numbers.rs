//! The property a reader relies on (for `infer`, `lifetime` and `carbon --data-gb` too): no command prints `inf`, `NaN` or a negative energy, time or cost with
//! exit 0, over random valid and boundary inputs. Every run either succeeds with finite,
//! non-negative physical quantities, or fails with exit 1 (error) or 2 (usage) and a message,
//! never a panic.
//!
//! Inputs mix boundary spellings (0, -1, 1e-320, 1e308, NaN, inf, 2^32 + 1) with random
//! magnitudes from 1e-12 to 1e12. Each case runs the binary, so the case counts stay small.

use assert_cmd::Command;
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::Value;

/// Boundary spellings every numeric flag must survive.
fn boundary() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "-0",
            "-1",
            "1",
            "0.5",
            "1e-320",
            "1e-300",
            "1e308",
            "-1e308",
            "NaN",
            "inf",
            "-inf",
            "4294967295",
            "4294967297",
            "1e18",
            "3",
            "1.0000001",
        ])
        .prop_map(String::from),
        (-12.0f64..12.0).prop_map(|e| format!("{:e}", 10f64.powf(e))),
        (-12.0f64..12.0).prop_map(|e| format!("{:e}", -(10f64.powf(e)))),
    ]
}

/// A plausible value between 10^lo and 10^hi most of the time, a boundary otherwise, so that
/// both successful runs and refusals are exercised.
fn number_in(lo: f64, hi: f64) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (lo..hi).prop_map(|e| format!("{:e}", 10f64.powf(e))),
        1 => boundary(),
    ]
}

fn number() -> impl Strategy<Value = String> {
    number_in(-3.0, 6.0)
}

/// A device count: mostly whole numbers, sometimes a boundary.
fn count() -> impl Strategy<Value = String> {
    prop_oneof![3 => (1u32..100_000).prop_map(|n| n.to_string()), 1 => boundary()]
}

fn fraction() -> impl Strategy<Value = String> {
    number_in(-3.0, 0.0)
}

/// Physical quantities a result must never report negative: energy, time, cost, emissions.
fn physical(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "energy", "_j", "kwh", "time", "duration", "_s", "hours", "days", "cost", "co2", "price",
    ]
    .iter()
    .any(|w| k.contains(w))
        && !k.contains("ratio")
        && !k.contains("slope")
        && !k.contains("share")
}

/// Every number in `v` whose key names a physical quantity must be ≥ 0.
fn check_json(v: &Value, key: &str, path: &str) -> Result<(), String> {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(x) if physical(key) && x < 0.0 => Err(format!("{path} = {x} is negative")),
            _ => Ok(()),
        },
        Value::Array(a) => a
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| check_json(x, key, &format!("{path}[{i}]"))),
        Value::Object(o) => o
            .iter()
            .try_for_each(|(k, x)| check_json(x, k, &format!("{path}.{k}"))),
        _ => Ok(()),
    }
}

/// Run amdahl; on success the output holds no inf/NaN and (as JSON) no negative physical value;
/// on failure the exit code is 1 or 2 and nothing panicked.
fn holds(args: &[String]) -> Result<(), TestCaseError> {
    let out = Command::cargo_bin("amdahl")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    prop_assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    match out.status.code() {
        Some(0) => {
            for word in stdout.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
                prop_assert!(
                    !matches!(word, "inf" | "-inf" | "NaN" | "nan"),
                    "{args:?} printed `{word}` with exit 0:\n{stdout}"
                );
            }
            if let Ok(v) = serde_json::from_str::<Value>(&stdout) {
                if let Err(e) = check_json(&v, "", "") {
                    return Err(TestCaseError::fail(format!("{args:?}: {e}")));
                }
            }
        }
        Some(1 | 2) => prop_assert!(stderr.contains("error"), "{args:?}: {stderr}"),
        other => prop_assert!(false, "{args:?}: exit {other:?}: {stderr}"),
    }
    Ok(())
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

proptest! {
    #![proptest_config(Config { cases: 48, failure_persistence: None, ..Config::default() })]

    #[test]
    fn carbon_prints_no_inf_nan_or_negative(
        hours in number(), power in number(), count in count(),
        pue in number_in(0.0, 0.5), life in number_in(-1.0, 1.5), json in any::<bool>(), statement in any::<bool>(),
    ) {
        let mut a = strings(&["carbon", "--device", "h100"]);
        a.extend([format!("--hours={hours}"), format!("--power={power}"), format!("--count={count}")]);
        a.extend([format!("--pue={pue}"), format!("--lifetime-years={life}")]);
        if statement {
            a.extend(strings(&["--statement", "md"]));
        } else if json {
            a.push("--json".into());
        }
        holds(&a)?;
    }

    #[test]
    fn carbon_compute_path_prints_no_inf_nan_or_negative(
        params in number_in(6.0, 12.0), tokens in number_in(6.0, 13.0), mfu in fraction(),
        count in count(),
    ) {
        let mut a = strings(&["carbon", "--device", "a100", "--json"]);
        a.extend([format!("--params={params}"), format!("--tokens={tokens}")]);
        a.extend([format!("--mfu={mfu}"), format!("--count={count}")]);
        holds(&a)?;
    }

    #[test]
    fn accelerate_prints_no_inf_nan_or_negative(
        n in number_in(0.0, 9.0), e in fraction(), by in number_in(0.0, 3.0),
        share in fraction(), ratio in number_in(-1.0, 1.0),
        json in any::<bool>(),
    ) {
        let mut a = strings(&["accelerate"]);
        a.extend([format!("--n={n}"), format!("--efficiency={e}"), format!("--by={by}")]);
        a.extend([format!("--comm-share={share}"), format!("--bytes-ratio={ratio}")]);
        if json {
            a.push("--json".into());
        }
        holds(&a)?;
    }

    #[test]
    fn plan_prints_no_inf_nan_or_negative(
        price in number(), intra in number_in(0.0, 3.0), inter in number_in(0.0, 3.0),
        eff in fraction(), tokens in number_in(6.0, 13.0), idle in number_in(0.0, 3.0),
    ) {
        let mut a = strings(&["plan", "--model", "llama2-7b", "--gpus", "16", "--tp", "2",
            "--batch", "64", "--recompute", "full", "--json"]);
        a.extend([format!("--price={price}"), format!("--intra-gbs={intra}")]);
        a.extend([format!("--inter-gbit={inter}"), format!("--inter-eff={eff}")]);
        a.extend([format!("--tokens={tokens}"), format!("--idle-w={idle}")]);
        holds(&a)?;
    }

    #[test]
    fn infer_prints_no_inf_nan_or_negative(
        rate in number_in(-2.0, 3.0), input in count(), output in count(), pue in number_in(0.0, 0.5),
        idle in number_in(0.0, 3.0), intra in number_in(0.0, 3.0), use_rate in any::<bool>(),
        json in any::<bool>(),
    ) {
        let mut a = strings(&["infer", "--model", "llama3-8b", "--system", "h100", "--tp", "2"]);
        a.extend([format!("--input={input}"), format!("--output={output}"), format!("--pue={pue}")]);
        a.extend([format!("--idle-w={idle}"), format!("--intra-gbs={intra}")]);
        if use_rate {
            a.push(format!("--rate={rate}"));
        }
        if json {
            a.push("--json".into());
        }
        holds(&a)?;
    }

    #[test]
    fn infer_search_prints_no_inf_nan_or_negative(
        ttft in number_in(0.0, 4.0), tpot in number_in(0.0, 3.0), max_batch in count(),
    ) {
        let mut a = strings(&["infer", "--model", "llama3-8b", "--system", "h100", "--search",
            "--json"]);
        a.extend([format!("--max-ttft-ms={ttft}"), format!("--max-tpot-ms={tpot}")]);
        a.push(format!("--search-max-batch={max_batch}"));
        holds(&a)?;
    }

    #[test]
    fn lifetime_prints_no_inf_nan_or_negative(
        train in number_in(0.0, 8.0), serve in number_in(-4.0, 1.0), per_day in number_in(0.0, 10.0),
        days in number_in(0.0, 4.0), pue in number_in(0.0, 0.5), json in any::<bool>(),
    ) {
        let mut a = strings(&["lifetime"]);
        a.extend([format!("--train-kwh={train}"), format!("--kwh-per-1000-requests={serve}")]);
        a.extend([format!("--requests-per-day={per_day}"), format!("--days={days}")]);
        a.push(format!("--pue={pue}"));
        if json {
            a.push("--json".into());
        }
        holds(&a)?;
    }

    #[test]
    fn carbon_where_to_run_prints_no_inf_nan_or_negative(
        hours in number(), data in number_in(-2.0, 7.0), net in number_in(-5.0, 0.0),
        json in any::<bool>(),
    ) {
        let mut a = strings(&["carbon", "--device", "h100", "--count", "8", "--compare", "FR,PL"]);
        a.extend([format!("--hours={hours}"), format!("--data-gb={data}")]);
        a.push(format!("--network-kwh-per-gb={net}"));
        if json {
            a.push("--json".into());
        }
        holds(&a)?;
    }

    #[test]
    fn top500_prints_no_inf_nan_or_negative(
        rmax in number(), rpeak in number(), hpcg in number(), cores in number_in(0.0, 8.0),
        power in number(), json in any::<bool>(),
    ) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("TOP500_201811.csv");
        std::fs::write(&p, format!(
            "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s],HPCG [TFlop/s],Power (kW)\n\
             1,A,\"{cores}\",{rmax},{rpeak},{hpcg},{power}\n2,B,100,1,2,,\n"
        )).unwrap();
        let mut a = strings(&["top500", p.to_str().unwrap()]);
        if json {
            a.push("--json".into());
        }
        holds(&a)?;
    }

    #[test]
    fn fit_prints_no_inf_nan_or_negative(
        t in prop::collection::vec(number_in(-1.0, 1.0), 4),
        n in prop::collection::vec(number_in(0.3, 4.0), 4),
        json in any::<bool>(),
    ) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("runs.csv");
        let mut csv = "n,time\n1,10\n".to_string();
        for (n, t) in n.iter().zip(&t) {
            csv.push_str(&format!("{n},{t}\n"));
        }
        std::fs::write(&p, csv).unwrap();
        let mut a = strings(&["fit", p.to_str().unwrap(), "--predict", "64,1e6"]);
        if json {
            a.push("--json".into());
        }
        holds(&a)?;
    }
}
