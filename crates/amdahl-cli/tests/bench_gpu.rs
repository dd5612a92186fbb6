//! `amdahl bench gpu` where there is no GPU (CI): clear errors, exit 1, never a panic.

use assert_cmd::Command;
use predicates::prelude::*;

fn amdahl() -> Command {
    Command::cargo_bin("amdahl").unwrap()
}

#[test]
fn without_the_feature_it_says_how_to_rebuild() {
    let out = amdahl()
        .args(["bench", "gpu", "--quick", "--json"])
        .assert();
    if cfg!(feature = "cuda") {
        // Built with CUDA: on a machine without a driver this is a clear error; with a GPU it
        // measures. Either way, no panic.
        let code = out.get_output().status.code();
        assert!(matches!(code, Some(0) | Some(1)), "{code:?}");
        out.stderr(predicate::str::contains("panicked").not());
    } else {
        out.code(1).stdout("").stderr(
            "error: built without the `cuda` feature: \
             cargo build --release -p amdahl-cli --features cuda\n",
        );
    }
}

#[test]
fn bad_flags_exit_1_before_any_device_is_touched() {
    for (args, says) in [
        (&["--sizes", "0"][..], "--sizes must be a positive integer"),
        (&["--sizes", "-3"][..], "--sizes must be a positive integer"),
        (&["--precision", "fp8"][..], "unknown GPU precision `fp8`"),
        (&["--repeats", "0"][..], "--repeats"),
        (&["--min-time", "-2"][..], "--min-time"),
        (&["--copy-mib", "0"][..], "--copy-mib"),
        (&["--sizes", "4000000000"][..], "out of range"),
    ] {
        amdahl()
            .args(["bench", "gpu"])
            .args(args)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(says));
    }
}

#[test]
fn conflicting_flags_are_usage_errors() {
    amdahl()
        .args(["bench", "gpu", "--no-gemm", "--no-copy"])
        .assert()
        .code(2);
}
