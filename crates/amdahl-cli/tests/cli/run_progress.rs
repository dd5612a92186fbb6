//! `amdahl run --progress-regex RE --total-steps S`: steps counted in the command's stdout, which
//! passes through amdahl byte for byte, feed the same projection as `--progress-file`. Over a
//! fake powercap tree that the command itself advances, so the energies are exact.

use crate::support::ScrubEnv;
use amdahl_meter::rapl::fake as fcap;
use predicates::str::contains;
use serde_json::Value;
use std::path::{Path, PathBuf};

const MAX: u64 = 262_143_328_850;

/// A temp dir with a powercap tree: package-0 and dram at 0 J (a dram counter, so no RAM
/// estimate joins the total).
fn node() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    fcap::zone(&root, "intel-rapl:0", "package-0", 0, MAX).unwrap();
    fcap::zone(&root, "intel-rapl:0:2", "dram", 0, MAX).unwrap();
    (t, root)
}

fn amdahl(root: &Path) -> assert_cmd::Command {
    let mut c = crate::support::amdahl();
    c.env("AMDAHL_POWERCAP_ROOT", root)
        .scrub_env()
        .args(["run", "--no-gpu", "-q"]);
    c
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn steps_printed_on_stdout_project_the_whole_run_and_stdout_passes_through() {
    // As run.rs's progress-file test: 5 of 20 steps, each drawing 1 J in 10 advances of 0.1 J
    // over ~0.2 s, but the step is announced on stdout. The whole run projects to 20 J
    // (tolerance 10 %: the counter moves in tenths of a unit, the resolution boundaries are
    // interpolated to). Around the steps: bytes that are not UTF-8, and a last line without
    // a newline, all of which must reach amdahl's stdout unchanged.
    let (t, root) = node();
    let out = t.path().join("r.json");
    let script = format!(
        "f={r}/intel-rapl:0/energy_uj; printf 'start \\377\\376\\n'; for i in 1 2 3 4 5; do \
         for k in 1 2 3 4 5 6 7 8 9 10; do sleep 0.02; v=$(cat $f); echo $((v + 100000)) > $f.t; \
         mv $f.t $f; done; echo \"step $i/20\"; done; printf 'done, no newline'",
        r = root.display()
    );
    let run = amdahl(&root)
        .args(["--interval", "20ms", "--total-steps", "20"])
        .args(["--progress-regex", r"^step (\d+)"])
        .arg("-o")
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .assert()
        .success();
    let mut want = b"start \xff\xfe\n".to_vec();
    for i in 1..=5 {
        want.extend(format!("step {i}/20\n").bytes());
    }
    want.extend(b"done, no newline");
    assert_eq!(run.get_output().stdout, want, "stdout is byte-identical");
    let r = json(&out);
    assert_eq!(r["total_energy_j"], 5.0);
    let p = &r["projection"];
    assert_eq!(
        (
            p["unit"].as_str(),
            p["units_done"].as_u64(),
            p["units_total"].as_u64()
        ),
        (Some("step"), Some(5), Some(20))
    );
    let e = p["energy_j"].as_f64().unwrap();
    assert!((e - 20.0).abs() <= 2.0, "projected {e} J");
    // 20 J at PUE 1 and 436 g/kWh (Ember 2022 world).
    let kg = p["co2e_kg"].as_f64().unwrap();
    assert!((kg - e / 3.6e6 * 0.436).abs() < 1e-12);
}

#[test]
fn without_a_group_each_matching_line_is_one_step() {
    // 3 matching lines among others; the child exits at once, so the final sample marks them.
    let (t, root) = node();
    let out = t.path().join("r.json");
    let run = amdahl(&root)
        .args(["--total-steps", "30", "--progress-regex", "^step"])
        .arg("-o")
        .arg(&out)
        .args([
            "--",
            "sh",
            "-c",
            "for i in 1 2 3; do echo \"step $i\"; echo loss; done",
        ])
        .assert()
        .success();
    assert_eq!(
        String::from_utf8_lossy(&run.get_output().stdout),
        "step 1\nloss\nstep 2\nloss\nstep 3\nloss\n"
    );
    let p = &json(&out)["projection"];
    assert_eq!(p["units_done"], 3, "{p}");
}

#[test]
fn a_large_output_neither_blocks_nor_loses_bytes() {
    // 2 MB through the pipe (32 times its 64 KiB buffer): the copy thread drains it while amdahl
    // waits for the command, and every line is counted.
    let (t, root) = node();
    let out = t.path().join("r.json");
    let run = amdahl(&root)
        .args(["--total-steps", "1000000", "--progress-regex", "^step$"])
        .arg("-o")
        .arg(&out)
        .args(["--", "sh", "-c", "yes step | head -n 400000"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .success();
    assert_eq!(run.get_output().stdout.len(), 400_000 * 5);
    assert_eq!(json(&out)["projection"]["units_done"], 400_000);
}

#[test]
fn output_of_a_command_killed_midway_is_not_lost() {
    let (_t, root) = node();
    amdahl(&root)
        .args(["--total-steps", "10", "--progress-regex", "step"])
        .args(["--", "sh", "-c", "echo step 1; printf partial; kill -9 $$"])
        .assert()
        .code(137)
        .stdout("step 1\npartial");
}

#[test]
fn the_command_keeps_amdahls_stdout_unless_a_regex_is_given() {
    // Without --progress-regex the command writes to amdahl's own stdout (a terminal stays a
    // terminal); with it, to a pipe that amdahl copies from.
    let (t, root) = node();
    let file = t.path().join("stdout.txt");
    let fd1 = |extra: &[&str]| {
        let f = std::fs::File::create(&file).unwrap();
        let status = std::process::Command::new(assert_cmd::cargo::cargo_bin("amdahl"))
            .env("AMDAHL_POWERCAP_ROOT", &root)
            .args(["run", "--no-gpu", "-q"])
            .args(extra)
            .args(["--", "readlink", "/proc/self/fd/1"])
            .stdout(f)
            .status()
            .unwrap();
        assert!(status.success());
        std::fs::read_to_string(&file).unwrap()
    };
    assert_eq!(fd1(&[]).trim_end(), file.to_str().unwrap());
    let piped = fd1(&["--total-steps", "1", "--progress-regex", "x"]);
    assert!(piped.starts_with("pipe:"), "{piped}");
}

#[test]
fn background_processes_holding_stdout_delay_the_end_by_the_grace_only() {
    // `sleep 6 &` inherits the pipe; amdahl waits 2 s for it, not 6, and says why.
    let (_t, root) = node();
    let t0 = std::time::Instant::now();
    amdahl(&root)
        .args(["--total-steps", "10", "--progress-regex", "step"])
        .args([
            "--",
            "sh",
            "-c",
            "sleep 6 2>/dev/null </dev/null & echo step 1",
        ])
        .assert()
        .success()
        .stdout("step 1\n")
        .stderr(contains("still open"));
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn a_bad_regex_or_a_missing_total_is_a_usage_error() {
    let (_t, root) = node();
    amdahl(&root)
        .args([
            "--total-steps",
            "10",
            "--progress-regex",
            "step (",
            "--",
            "true",
        ])
        .assert()
        .code(2)
        .stderr(contains("--progress-regex"));
    amdahl(&root)
        .args(["--progress-regex", "step", "--", "true"])
        .assert()
        .code(2)
        .stderr(contains("--total-steps"));
    // One source of progress at a time.
    amdahl(&root)
        .args(["--total-steps", "10", "--progress-regex", "step"])
        .args(["--progress-file", "p", "--", "true"])
        .assert()
        .code(2);
}
