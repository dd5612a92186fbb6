//! Data safety under faults: outputs through links and to special
//! files, concurrent runs sharing paths, closed pipes, signals, SIGKILL, commands that never
//! start, and the CodeCarbon columns against rows CodeCarbon itself wrote.

use crate::support::ScrubEnv;
use assert_cmd::Command;
use predicates::str::contains;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn tree(root: &Path) {
    crate::support::powercap::package(root);
}

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("amdahl")
}

fn amdahl(root: &Path) -> Command {
    let mut c = Command::new(bin());
    c.env("AMDAHL_POWERCAP_ROOT", root)
        .scrub_env()
        .current_dir(root.parent().unwrap());
    c
}

fn std_amdahl(root: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(bin());
    c.env("AMDAHL_POWERCAP_ROOT", root)
        .scrub_env()
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    c
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Pids of live processes in process group `pgid` (field 5 of /proc/PID/stat).
fn group_members(pgid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let rest = &s[s.rfind(')').unwrap() + 2..];
            let f: Vec<&str> = rest.split(' ').collect();
            f[0] != "Z" && f[2] == pgid.to_string()
        })
        .collect()
}

fn tmp_leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp") || n.ends_with(".pending"))
        .collect()
}

#[test]
fn concurrent_runs_sharing_output_paths_lose_no_record() {
    // 2-4 of 20 such runs used to exit 1 after their command finished and lose their row.
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let (out, csv, prom) = (
        t.path().join("r.json"),
        t.path().join("emissions.csv"),
        t.path().join("r.prom"),
    );
    let children: Vec<_> = (0..20)
        .map(|_| {
            std_amdahl(&root)
                .args(["run", "--no-gpu", "--interval", "10ms", "-o"])
                .arg(&out)
                .arg("--codecarbon-csv")
                .arg(&csv)
                .arg("--prometheus")
                .arg(&prom)
                .args(["--", "sleep", "0.2"])
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert_eq!(c.wait().unwrap().code(), Some(0));
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 21, "header + one row per run:\n{text}");
    assert_eq!(text.matches("timestamp,").count(), 1);
    assert_eq!(json(&out)["partial"], false);
    assert!(
        tmp_leftovers(t.path()).is_empty(),
        "{:?}",
        tmp_leftovers(t.path())
    );
}

#[test]
fn output_through_symlink_and_to_dev_null() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let real = t.path().join("real.json");
    let link = t.path().join("link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    amdahl(&root)
        .args(["run", "--no-gpu", "-o"])
        .arg(&link)
        .args(["--prometheus", "/dev/null", "--codecarbon-csv", "/dev/null"])
        .args(["--", "true"])
        .assert()
        .success();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(json(&real)["schema"], "amdahl.run/1");
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

/// Run with stderr (or stdout) a pipe whose reader is already gone.
fn with_closed(mut c: std::process::Command, stderr: bool) -> std::process::ExitStatus {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    if stderr {
        c.stderr(writer).stdout(std::process::Stdio::null());
    } else {
        c.stdout(writer).stderr(std::process::Stdio::null());
    }
    c.status().unwrap()
}

#[test]
fn closed_stderr_or_stdout_pipe_never_panics() {
    // `amdahl ... 2>&1 | head -1`: every subcommand used to panic with exit 101.
    let t = tempfile::tempdir().unwrap();
    let none = t.path().join("no-powercap");
    let out = t.path().join("r.json");
    // No RAPL counter: warnings on stderr, then the command, then the record.
    let mut c = std_amdahl(&none);
    c.args(["run", "--no-gpu", "-o"])
        .arg(&out)
        .args(["--", "true"]);
    assert_eq!(with_closed(c, true).code(), Some(0));
    assert_eq!(json(&out)["exit_code"], 0);
    let cases: &[&[&str]] = &[
        &["merge", "missing.json"],
        &["fit", "missing.csv"],
        &["carbon", "--power", "300", "--hours", "2"],
        &["catalog", "devices"],
        &["detect"],
        &[
            "scale", "--n", "1", "--runs", "1", "--warmup", "0", "--", "true",
        ],
        &["run", "--interval", "1ns", "--", "true"],
        &["nonsense-subcommand"],
    ];
    for args in cases {
        for stderr in [true, false] {
            let mut c = std_amdahl(&none);
            c.args(*args).current_dir(t.path());
            let code = with_closed(c, stderr).code();
            assert_ne!(
                code,
                Some(101),
                "{args:?} (closed std{})",
                if stderr { "err" } else { "out" }
            );
            assert!(code.is_some(), "{args:?} died of a signal");
        }
    }
}

#[test]
fn sampling_interval_below_10ms_is_a_usage_error() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    amdahl(&root)
        .args(["run", "--interval", "1e-8", "--", "true"])
        .assert()
        .code(2)
        .stderr(contains("at least 10ms"));
}

#[test]
fn sigterm_reaches_the_commands_whole_process_group() {
    // `sh -c 'sleep 60; echo'`: the sleep used to keep running, unmeasured.
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let (out, pg) = (t.path().join("r.json"), t.path().join("pg"));
    let script = format!("echo $$ > {}; sleep 60; echo after", pg.display());
    let mut child = std_amdahl(&root)
        .args(["run", "--no-gpu", "--interval", "50ms", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    wait_for("the command's pid", || {
        std::fs::read_to_string(&pg).is_ok_and(|s| s.ends_with('\n'))
    });
    let pgid: u32 = std::fs::read_to_string(&pg)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_for("sleep to start", || group_members(pgid).len() >= 2);
    kill(child.id(), libc::SIGTERM);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    wait_for("the group to be gone", || group_members(pgid).is_empty());
    let r = json(&out);
    assert_eq!(
        (r["partial"].clone(), r["interrupted_by"].clone()),
        (Value::Bool(true), "SIGTERM".into())
    );
}

/// Start `amdahl run -o OUT -- sleep 30`, wait until it samples, send `sig`, return the record
/// and amdahl's exit code.
fn signal_run(sig: i32) -> (Value, Option<i32>) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let (out, log) = (t.path().join("r.json"), t.path().join("s.jsonl"));
    let mut child = std_amdahl(&root)
        .args(["run", "--no-gpu", "--interval", "50ms", "-o"])
        .arg(&out)
        .arg("--log")
        .arg(&log)
        .args(["--", "sleep", "30"])
        .spawn()
        .unwrap();
    wait_for("sampling", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.lines().count() >= 3)
    });
    kill(child.id(), sig);
    let status = child.wait().unwrap();
    (json(&out), status.code())
}

#[test]
fn sighup_sigquit_and_sigusr1_are_forwarded_and_the_final_record_written() {
    // They used to kill amdahl outright: no final record, the command left running.
    let (r, code) = signal_run(libc::SIGHUP);
    assert_eq!((code, r["exit_code"].as_i64()), (Some(129), Some(129)));
    assert_eq!(r["interrupted_by"], "SIGHUP");
    let (r, code) = signal_run(libc::SIGQUIT);
    assert_eq!(code, Some(131));
    assert_eq!(r["interrupted_by"], "SIGQUIT");
    // SIGUSR1 (Slurm's checkpoint signal) is only forwarded: sleep dies of it (default action).
    let (r, code) = signal_run(libc::SIGUSR1);
    assert_eq!(code, Some(138));
    assert_eq!(r["partial"], false);
    assert!(r["warnings"].to_string().contains("SIGUSR1"), "{r}");
}

#[test]
fn codecarbon_row_survives_sigkill_of_amdahl() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let csv = t.path().join("emissions.csv");
    let mut child = std_amdahl(&root)
        .args(["run", "--no-gpu", "--interval", "50ms", "--codecarbon-csv"])
        .arg(&csv)
        .args(["--", "sleep", "30"])
        .spawn()
        .unwrap();
    let pending = || {
        std::fs::read_dir(t.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().ends_with(".pending"))
            .map(|e| e.path())
    };
    wait_for("a pending record", || {
        pending()
            .is_some_and(|p| std::fs::read_to_string(p).is_ok_and(|s| s.contains("duration_s")))
    });
    let amdahl_pid = child.id();
    kill(amdahl_pid, libc::SIGKILL);
    child.wait().unwrap();
    // The orphaned sleep: amdahl started it in its own process group; end that group.
    for pid in std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if s == "sleep\x0030\x00" && group_members(pid).contains(&pid) {
            kill(pid, libc::SIGKILL);
        }
    }
    amdahl(&root)
        .args(["run", "--no-gpu", "--codecarbon-csv"])
        .arg(&csv)
        .args(["--", "true"])
        .assert()
        .success()
        .stderr(contains("appended the CodeCarbon row of run"));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(
        text.lines().count(),
        3,
        "header, the recovered row, the new row:\n{text}"
    );
    assert!(pending().is_none());
}

#[test]
fn command_that_never_started_gets_a_record_that_says_so_and_no_codecarbon_row() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let (out, csv) = (t.path().join("r.json"), t.path().join("emissions.csv"));
    amdahl(&root)
        .args(["run", "--no-gpu", "-o"])
        .arg(&out)
        .arg("--codecarbon-csv")
        .arg(&csv)
        .args(["--", "amdahl-surely-not-a-command"])
        .assert()
        .code(127);
    let r = json(&out);
    assert!(r["not_started"]
        .as_str()
        .unwrap()
        .contains("command not found"));
    assert_eq!(r["total_energy_j"], 0.0);
    assert_eq!(r["devices"].as_array().unwrap().len(), 0);
    let rows = std::fs::read_to_string(&csv).unwrap_or_default();
    assert_eq!(rows.lines().count(), 0, "{rows}");
}

#[test]
fn script_without_shebang_runs_with_sh_and_background_grandchild_is_warned_about() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let script = t.path().join("job");
    std::fs::write(&script, "sleep 2 &\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = t.path().join("r.json");
    amdahl(&root)
        .args(["run", "--no-gpu", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&script)
        .assert()
        .code(3)
        .stderr(contains("still run after it exited"));
    assert!(json(&out)["warnings"].to_string().contains("still run"));
}

/// The location columns of the first data row of a CodeCarbon CSV.
fn location_columns(csv_text: &str) -> Vec<String> {
    let mut r = csv::Reader::from_reader(csv_text.as_bytes());
    let head = r.headers().unwrap().clone();
    let row = r.records().next().unwrap().unwrap();
    [
        "country_name",
        "country_iso_code",
        "region",
        "cloud_provider",
        "cloud_region",
        "on_cloud",
    ]
    .iter()
    .map(|k| {
        let i = head.iter().position(|h| h == *k).unwrap();
        row.get(i).unwrap().to_string()
    })
    .collect()
}

#[test]
fn codecarbon_location_columns_match_rows_codecarbon_wrote() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codecarbon");
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    for (region, fixture, country) in [
        ("FR", "country_FRA.csv", None),
        ("gcp:europe-west9", "gcp_europe-west9.csv", None),
        // CodeCarbon 3.3.2 knows no AWS region's country; amdahl's catalog does.
        (
            "aws:eu-west-3",
            "aws_eu-west-3.csv",
            Some(("France", "FRA")),
        ),
    ] {
        let csv = t.path().join(format!("{fixture}.out"));
        amdahl(&root)
            .args(["run", "--no-gpu", "--region", region, "--codecarbon-csv"])
            .arg(&csv)
            .args(["--", "true"])
            .assert()
            .success();
        let ours = std::fs::read_to_string(&csv).unwrap();
        let theirs = std::fs::read_to_string(fixtures.join(fixture)).unwrap();
        assert_eq!(ours.lines().next(), theirs.lines().next(), "header");
        let mut expected = location_columns(&theirs);
        if let Some((name, iso)) = country {
            expected[0] = name.into();
            expected[1] = iso.into();
        }
        assert_eq!(location_columns(&ours), expected, "{region}");
    }
}

#[test]
fn merge_rejects_a_record_with_negative_energy() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let out = t.path().join("r.json");
    amdahl(&root)
        .args(["run", "--no-gpu", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .success();
    let mut r = json(&out);
    r["total_energy_j"] = Value::from(-224.0);
    std::fs::write(&out, r.to_string()).unwrap();
    amdahl(&root)
        .arg("merge")
        .arg(&out)
        .assert()
        .code(1)
        .stderr(contains("total_energy_j"));
}
