//! Where tests find the project's shared data sets (the official TOP500 spreadsheets), which the
//! repository does not ship. Included with `#[path]` by every test that needs them, so the rule
//! lives in one place:
//!
//! - `AMDAHL_SHARED_DATA` names the directory (relative paths are taken from the repository root);
//!   without it, `../shared/data` beside the checkout, as CI lays it out.
//! - When a file is absent the test says so on stderr and returns early (a fresh clone passes its
//!   own tests), except under `CI=true`, where an absent file fails the test so CI still runs it.

use std::path::PathBuf;

/// The environment variable that names the shared data directory.
pub const VAR: &str = "AMDAHL_SHARED_DATA";

/// The repository root: every including crate lives at `crates/NAME`.
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared data directory: `$AMDAHL_SHARED_DATA`, else `../shared/data` beside the checkout.
pub fn dir() -> PathBuf {
    match std::env::var_os(VAR) {
        Some(d) if !d.is_empty() => repo_root().join(d),
        _ => repo_root().join("../shared/data"),
    }
}

/// `rel` (e.g. `top500/TOP500_201811.xls`) under the shared data directory, or `None` after
/// printing why the calling test is skipped. Under `CI=true` an absent file panics instead.
pub fn file(rel: &str) -> Option<PathBuf> {
    let p = dir().join(rel);
    if p.is_file() {
        return Some(p);
    }
    let why = format!(
        "shared data file {} is absent; set {VAR} to the directory holding `{rel}` \
         (default: ../shared/data beside the checkout)",
        p.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why} (CI=true: tests that need shared data must run)");
    }
    // Written to the stderr handle, not with eprintln!, so that libtest's output capture does not
    // hide it: a skipped test shows up in `cargo test` output.
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
    None
}
