//! `amdahl top500` end to end: the shared official lists (`$AMDAHL_SHARED_DATA/top500`, default
//! `../shared/data` beside the checkout as CI lays it out; absent lists skip those tests, or fail
//! them under `CI=true`: tests/support/shared_data.rs), the built-in history, and bad input (exit 1, a message naming file,
//! sheet, row and column, never a panic).

use predicates::prelude::*;
use std::path::PathBuf;

use crate::support::{amdahl, refused};

use crate::support::shared_data;

/// A shared TOP500 list, or `None` when the shared data is absent (the test is skipped).
fn shared(name: &str) -> Option<PathBuf> {
    shared_data::file(&format!("top500/{name}"))
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = amdahl().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn builtin_history_prints_a_table_with_n_stated() {
    amdahl()
        .arg("top500")
        .assert()
        .success()
        .stdout(predicate::str::contains("1−α_eff HPL (N = cores)"))
        .stdout(predicate::str::contains("Piz Daint"))
        .stdout(predicate::str::contains("Frontier"))
        .stdout(predicate::str::contains("78.18 %"));
}

#[test]
fn json_contract_2018_11_piz_daint_and_summit() {
    let Some(f) = shared("TOP500_201811.xls") else {
        return;
    };
    let v = json(&["top500", "--json", "--top", "5", f.to_str().unwrap()]);
    assert_eq!(v["schema"], "amdahl.top500/1");
    assert_eq!(v["n_counts"], "cores");
    let systems = v["systems"].as_array().unwrap();
    assert_eq!(systems.len(), 5);
    for key in [
        "list",
        "rank",
        "name",
        "system",
        "site",
        "country",
        "n",
        "rmax_tflops",
        "rpeak_tflops",
        "efficiency_hpl",
        "serial_fraction_hpl",
        "efficiency_hpcg",
        "serial_fraction_hpcg",
        "gflops_per_watt",
    ] {
        assert!(systems[0].get(key).is_some(), "missing {key}");
    }
    let daint = systems.iter().find(|s| s["name"] == "Piz Daint").unwrap();
    // Végh's validation numbers for Piz Daint (TOP500 2018-11): E 78.18 %, 1−α 7.19e-7 (N = 387,872 cores), HPCG 1.83 % of peak.
    assert!((daint["efficiency_hpl"].as_f64().unwrap() - 0.7818).abs() < 5e-5);
    assert!((daint["serial_fraction_hpl"].as_f64().unwrap() - 7.19e-7).abs() < 5e-10);
    assert!((daint["efficiency_hpcg"].as_f64().unwrap() - 0.0183).abs() < 5e-5);
    assert_eq!(daint["list"], "2018-11");
    let summit = systems.iter().find(|s| s["name"] == "Summit").unwrap();
    assert!((summit["efficiency_hpl"].as_f64().unwrap() - 0.7147).abs() < 5e-5);
    assert!((summit["serial_fraction_hpl"].as_f64().unwrap() - 1.67e-7).abs() < 5e-10);
}

#[test]
fn accelerators_as_n_for_piz_daint() {
    let Some(f) = shared("TOP500_201811.xls") else {
        return;
    };
    let v = json(&[
        "top500",
        "--json",
        "--n",
        "accelerators",
        "--system",
        "Piz Daint",
        f.to_str().unwrap(),
    ]);
    assert_eq!(v["n_counts"], "accelerators");
    let s = &v["systems"][0];
    assert_eq!(s["n"], 5704);
    // 1−α = (1-0.78183)/(0.78183·5703) = 4.89e-5.
    assert!((s["serial_fraction_hpl"].as_f64().unwrap() - 4.89e-5).abs() < 5e-8);
}

#[test]
fn follows_piz_daint_across_all_six_lists() {
    let files: Option<Vec<String>> = [
        "TOP500_201306.xls",
        "TOP500_201311.xls",
        "TOP500_201611.xls",
        "TOP500_201811.xls",
        "TOP500_202011.xlsx",
        "TOP500_202311.xlsx",
    ]
    .iter()
    .map(|f| shared(f).map(|p| p.display().to_string()))
    .collect::<Option<_>>();
    let Some(files) = files else {
        return;
    };
    let mut args = vec!["top500", "--csv", "--system", "piz daint"];
    args.extend(files.iter().map(String::as_str));
    let out = amdahl().args(&args).output().unwrap();
    assert!(out.status.success());
    let csv = String::from_utf8(out.stdout).unwrap();
    let lists: Vec<&str> = csv.lines().skip(1).map(|l| &l[..7]).collect();
    assert_eq!(
        lists,
        ["2013-06", "2013-11", "2016-11", "2018-11", "2020-11", "2023-11"]
    );
    // The GFlop/s lists note how they were read.
    assert!(String::from_utf8_lossy(&out.stderr).contains("read as GFlop/s"));
}

#[test]
fn nodes_unknown_is_said_not_invented() {
    let Some(f) = shared("TOP500_201811.xls") else {
        return;
    };
    amdahl()
        .args(["top500", "--n", "nodes", "--top", "1", f.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "unknown: the list gives no node count",
        ));
}

fn bad(name: &str, contents: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(name);
    std::fs::write(&p, contents).unwrap();
    (d, p)
}

fn fails_with(path: &PathBuf, needles: &[&str]) {
    let out = amdahl().arg("top500").arg(path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "expected {n:?} in {err}");
    }
}

const HEAD: &str = "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s]\n";

#[test]
fn rmax_above_rpeak_names_the_cell() {
    let (_d, p) = bad("list.csv", format!("{HEAD}1,A,8,3,2\n").as_bytes());
    fails_with(
        &p,
        &[
            "list.csv",
            "sheet \"csv\", row 2, column D (`Rmax [TFlop/s]`)",
            "exceeds Rpeak",
        ],
    );
}

#[test]
fn zero_cores_names_the_cell() {
    let (_d, p) = bad(
        "list.csv",
        format!("{HEAD}1,A,8,1,2\n2,B,0,1,2\n").as_bytes(),
    );
    fails_with(
        &p,
        &["row 3, column C (`Total Cores`)", "at least one core"],
    );
}

#[test]
fn missing_rpeak_column_is_reported() {
    let (_d, p) = bad(
        "list.csv",
        b"Rank,Name,Total Cores,Rmax [TFlop/s]\n1,A,8,1\n",
    );
    fails_with(&p, &["list.csv", "no sheet holds a TOP500 list", "Rpeak"]);
    let (_d, p) = bad(
        "list.csv",
        b"Rank,Name,Rmax [TFlop/s],Rpeak [TFlop/s]\n1,A,1,2\n",
    );
    fails_with(&p, &["missing column `Total Cores`", "\"Rmax [TFlop/s]\""]);
}

#[test]
fn unrecognised_and_corrupt_spreadsheets() {
    let (_d, p) = bad("list.xls", &[0u8, 1, 2, 3, 255, 0, 9]);
    fails_with(&p, &["list.xls", "not a spreadsheet amdahl can read"]);
    // An .xls (OLE) signature followed by garbage, and a zip signature with no archive.
    let (_d, p) = bad(
        "list.xls",
        &[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1, 1, 2, 3],
    );
    fails_with(&p, &["list.xls", "the workbook could not be read"]);
    let (_d, p) = bad("list.xlsx", b"PK\x03\x04garbage");
    fails_with(&p, &["list.xlsx", "the workbook could not be read"]);
    let (_d, p) = bad("empty.csv", b"");
    fails_with(&p, &["empty.csv", "empty"]);
}

#[test]
fn missing_file_and_unknown_system() {
    amdahl()
        .args(["top500", "/nonexistent/TOP500_209906.xls"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "reading /nonexistent/TOP500_209906.xls",
        ));
    amdahl()
        .args(["top500", "--system", "Deep Thought"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no system named \"Deep Thought\""));
    let e = refused(&["top500", "--n", "sockets"]);
    assert!(e.contains("cores, accelerators or nodes"), "{e}");
}

/// The shared 2018-11 list with one BIFF record length (the LABELSST record at byte 142,225)
/// raised from 10 to 0x2000 bytes: the reader then steps over the rows that follow.
fn with_lost_rows(dir: &tempfile::TempDir) -> Option<PathBuf> {
    let mut bytes = std::fs::read(shared("TOP500_201811.xls")?).unwrap();
    let at = (142_225..bytes.len() - 4)
        .find(|&i| bytes[i..i + 4] == [0xFD, 0x00, 0x0A, 0x00])
        .expect("a LABELSST record in the second half of the list");
    bytes[at + 2..at + 4].copy_from_slice(&0x2000u16.to_le_bytes());
    let p = dir.path().join("TOP500_201811.xls");
    std::fs::write(&p, bytes).unwrap();
    Some(p)
}

#[test]
fn top500_list_with_lost_rows_fails_instead_of_338_systems() {
    // Regression: two changed bytes made ranks 134-295 vanish with exit 0 and empty stderr.
    let dir = tempfile::tempdir().unwrap();
    let Some(p) = with_lost_rows(&dir) else {
        return;
    };
    amdahl()
        .args(["top500", "--csv", p.to_str().unwrap()])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::is_match("ranks [0-9]+–[0-9]+ are missing").unwrap())
        .stderr(predicate::str::contains("probably damaged"));
}
