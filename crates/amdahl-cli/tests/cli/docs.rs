//! Docs that are executed: every ```` ```console ```` block of README.md and docs/usage/*.md runs
//! here and what it prints must match what the block shows, so no example goes stale.
//!
//! A block is a list of commands, each a line starting with `$ ` (continued while it ends in
//! ` \`), each followed by the output it prints (stdout and stderr together, as a terminal shows
//! them). The expected output may elide: `[..]` matches any text within a line, a line `...`
//! any number of lines (snapbox's wildcards), `[CWD]` the folder the examples run in,
//! `[ELAPSED]` and `[RATE]` a search's wall time and speed. Commands
//! run in `bash -o pipefail` so pipes and redirections work as pasted, one file's blocks in order
//! in one scratch folder (a later block may read what an earlier one wrote). That folder holds a
//! link to each top-level entry of the checkout (`data/`, `docs/`, …) and sits beside a link to
//! the shared data (`../shared`), as a checkout does.
//!
//! The info string says more: `console full` (an update writes every line, not the first ones),
//! `console exit=N` (every command of the block exits N instead of 0),
//! `console needs=gpu|slurm|mpi|root|network|daemon` (shown, not run: CI has none of those, or
//! the command serves until stopped; the end-to-end tests of those paths live in their own
//! modules). A shell block (`sh`, `bash`,
//! `shell`) that runs `amdahl` is refused: it would be an example nobody checks.
//!
//! `AMDAHL_UPDATE_DOCS=1 cargo test -p amdahl-cli --test cli docs::` rewrites the shown outputs
//! from what the binary prints, keeping the wildcards that still match; review the diff.

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag};
use snapbox::filter::NormalizeToExpected;
use snapbox::{Data, Redactions};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The checkout's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One command of a block and the output it should print.
struct Example {
    /// The command as typed, continuation lines joined by newlines.
    command: String,
    /// The lines after it, up to the next command.
    expected: String,
}

/// A fenced block's text split into its commands and their outputs.
fn examples(body: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut lines = body.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(first) = line.strip_prefix("$ ") {
            let mut command = first.to_string();
            while command.ends_with('\\') {
                match lines.next() {
                    Some(next) => {
                        command.push('\n');
                        command.push_str(next);
                    }
                    None => break,
                }
            }
            // A here-document (`cat > runs.csv <<'CSV'`) runs to the line holding its word.
            if let Some(word) = heredoc_word(&command).map(str::to_string) {
                for next in lines.by_ref() {
                    command.push('\n');
                    command.push_str(next);
                    if next.trim() == word {
                        break;
                    }
                }
            }
            out.push(Example {
                command,
                expected: String::new(),
            });
        } else if let Some(last) = out.last_mut() {
            last.expected.push_str(line);
            last.expected.push('\n');
        } else {
            panic!("a console block must start with a `$ ` command line, not {line:?}");
        }
    }
    out
}

/// The delimiting word of a here-document the command opens (`<<'CSV'`, `<<-EOF`), if any.
fn heredoc_word(command: &str) -> Option<&str> {
    let rest = command.split_once("<<")?.1;
    let rest = rest.strip_prefix('-').unwrap_or(rest);
    let word = rest.trim_start_matches(['\'', '"']);
    let end = word
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(word.len());
    (end > 0).then(|| &word[..end])
}

/// A fenced block: its info string and the byte range of its text in the file.
struct Block {
    info: String,
    body: std::ops::Range<usize>,
    line: usize,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    for (event, range) in Parser::new(text).into_offset_iter() {
        let Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) = event else {
            continue;
        };
        // The body runs from after the opening fence's line to the start of the closing one.
        let fenced = &text[range.clone()];
        let start = range.start + fenced.find('\n').map_or(fenced.len(), |i| i + 1);
        let end = range.start + fenced.trim_end().rfind('\n').map_or(0, |i| i + 1);
        out.push(Block {
            info: info.to_string(),
            body: start..end.max(start),
            line: text[..range.start].lines().count() + 1,
        });
    }
    out
}

/// What a `needs=` tag names: environments CI does not have.
const NOT_IN_CI: &[&str] = &["gpu", "slurm", "mpi", "root", "network", "daemon"];

/// The scratch folder a file's examples run in, laid out as a checkout with shared data beside it.
fn sandbox() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("amdahl");
    std::fs::create_dir(&work).unwrap();
    for entry in std::fs::read_dir(root()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        std::os::unix::fs::symlink(entry.path(), work.join(&name)).unwrap();
    }
    let shared = crate::support::shared_data::dir();
    if let (true, Some(parent)) = (shared.is_dir(), shared.parent()) {
        std::os::unix::fs::symlink(parent, tmp.path().join("shared")).unwrap();
    }
    (tmp, work)
}

/// Run one example as a user pastes it: bash, the built `amdahl` first on PATH, nothing of the
/// test's environment that changes what amdahl prints.
fn run(command: &str, cwd: &Path) -> (i32, String) {
    let bin = assert_cmd::cargo::cargo_bin("amdahl");
    let bin_dir = bin.parent().unwrap();
    let path = format!("{}:/usr/bin:/bin", bin_dir.display());
    let mut c = Command::new("timeout");
    c.arg("120")
        .args(["bash", "--noprofile", "--norc", "-o", "pipefail", "-c"])
        .arg(format!("exec 2>&1\n{command}"))
        .current_dir(cwd)
        .env_clear()
        .env("PATH", path)
        .env("HOME", cwd)
        .env("LANG", "C.UTF-8")
        .env("TZ", "UTC")
        .env("NO_COLOR", "1")
        .env("AMDAHL_POWERCAP_ROOT", "/nonexistent/amdahl-docs-powercap")
        .env("AMDAHL_HWMON_ROOT", "/nonexistent/amdahl-docs-hwmon");
    let out = c.output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    (code, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What differs between two runs of the same example and is not what the example shows: the
/// folder it ran in and how long a search took (its results are shown in full).
fn redactions(work: &Path) -> Redactions {
    let mut r = Redactions::new();
    let patterns = [
        (
            "[CWD]",
            regex::Regex::new(&regex::escape(&work.display().to_string())),
        ),
        (
            "[ELAPSED]",
            regex::Regex::new(r"evaluated in (?<redacted>[0-9.]+ (?:µs|ms|s))\b"),
        ),
        (
            "[RATE]",
            regex::Regex::new(r"\((?<redacted>[0-9]+) per second\)"),
        ),
    ];
    for (placeholder, pattern) in patterns {
        r.insert(placeholder, pattern.unwrap()).unwrap();
    }
    r
}

/// Check (or with `AMDAHL_UPDATE_DOCS=1` rewrite) every console block of one file.
fn check(file: &str) {
    let path = root().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let update = std::env::var_os("AMDAHL_UPDATE_DOCS").is_some();
    let (_tmp, work) = sandbox();
    let redactions = redactions(&work);
    let has_shared = crate::support::shared_data::dir().is_dir();
    let mut failures = Vec::new();
    let mut rewritten = String::new();
    let mut copied = 0;
    let mut ran = 0;
    for block in blocks(&text) {
        let mut words = block.info.split_whitespace();
        let lang = words.next().unwrap_or("");
        let tags: Vec<&str> = words.collect();
        let body = &text[block.body.clone()];
        let at = format!("{file}:{}", block.line);
        if matches!(lang, "sh" | "bash" | "shell")
            && body.lines().any(|l| l.trim_start().starts_with("amdahl "))
        {
            failures.push(format!(
                "{at}: a `{lang}` block runs amdahl but is never checked: make it `console` \
                 (`$ ` before each command, its output after) or `console needs=…`"
            ));
            continue;
        }
        if lang != "console" {
            continue;
        }
        let needs = tags.iter().find_map(|t| t.strip_prefix("needs="));
        if let Some(n) = needs {
            assert!(
                NOT_IN_CI.contains(&n),
                "{at}: needs={n} is not one of {NOT_IN_CI:?}"
            );
            continue;
        }
        let exit: i32 = tags
            .iter()
            .find_map(|t| t.strip_prefix("exit="))
            .map_or(0, |n| n.parse().expect("exit=N takes a number"));
        if !has_shared && body.contains("../shared/") {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{at}: the shared data sets are missing under CI=true"
            );
            eprintln!("SKIPPED: {at} reads ../shared/, which is not beside this checkout");
            continue;
        }
        let mut new_body = String::new();
        for example in examples(body) {
            ran += 1;
            let (code, actual) = run(&example.command, &work);
            let expected = Data::text(example.expected.clone());
            let normalized = NormalizeToExpected::new()
                .redact_with(&redactions)
                .normalize(Data::text(actual.clone()), &expected)
                .render()
                .unwrap_or_default();
            if code != exit {
                failures.push(format!(
                    "{at}: `{}` exited {code}, the block says {exit}; it printed:\n{actual}",
                    example.command
                ));
            } else if normalized != example.expected {
                failures.push(format!(
                    "{at}: `{}` printed what the docs do not show:\n{}",
                    example.command,
                    diff(&example.expected, &normalized)
                ));
            }
            new_body.push_str("$ ");
            new_body.push_str(&example.command);
            new_body.push('\n');
            if tags.contains(&"full") {
                new_body.push_str(&normalized);
            } else {
                new_body.push_str(&shown(&example.expected, &normalized));
            }
        }
        rewritten.push_str(&text[copied..block.body.start]);
        rewritten.push_str(&new_body);
        copied = block.body.end;
    }
    rewritten.push_str(&text[copied..]);
    if update {
        if rewritten != text {
            std::fs::write(&path, rewritten).unwrap();
            eprintln!("updated {file}");
        }
        return;
    }
    assert!(
        failures.is_empty(),
        "{} of {ran} examples in {file} do not print what they show (AMDAHL_UPDATE_DOCS=1 \
         rewrites them; review the diff):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// What an update writes for one example: the output as printed, or, for an example that
/// showed nothing yet, its first lines and `...` when it is long (a page shows the start of a
/// table; the test still runs the whole command).
fn shown(expected: &str, normalized: &str) -> String {
    const FIRST_LINES: usize = 12;
    if !expected.is_empty() || normalized.lines().count() <= FIRST_LINES + 2 {
        return normalized.to_string();
    }
    let mut out: String = normalized
        .lines()
        .take(FIRST_LINES)
        .flat_map(|l| [l, "\n"])
        .collect();
    out.push_str("...\n");
    out
}

/// Lines that differ, `-` shown, `+` printed.
fn diff(shown: &str, printed: &str) -> String {
    similar::TextDiff::from_lines(shown, printed)
        .unified_diff()
        .context_radius(2)
        .header("shown", "printed")
        .to_string()
}

macro_rules! doc_tests {
    ($($name:ident => $file:literal),* $(,)?) => {
        $(#[test] fn $name() { check($file); })*

        /// Every usage page is checked by one of the tests above.
        #[test]
        fn every_usage_page_is_executed() {
            let listed = [$($file),*];
            for entry in std::fs::read_dir(root().join("docs/usage")).unwrap() {
                let name = format!("docs/usage/{}", entry.unwrap().file_name().to_string_lossy());
                assert!(listed.contains(&name.as_str()), "{name} has no test in docs.rs");
            }
        }
    };
}

doc_tests! {
    readme => "README.md",
    usage_bench => "docs/usage/bench.md",
    usage_calibrate => "docs/usage/calibrate.md",
    usage_carbon => "docs/usage/carbon.md",
    usage_exporter => "docs/usage/exporter.md",
    usage_fit => "docs/usage/fit.md",
    usage_infer => "docs/usage/infer.md",
    usage_lifetime => "docs/usage/lifetime.md",
    usage_plan => "docs/usage/plan.md",
    usage_python => "docs/usage/python.md",
    usage_report => "docs/usage/report.md",
    usage_run => "docs/usage/run.md",
    usage_scale => "docs/usage/scale.md",
    usage_serve => "docs/usage/serve.md",
    usage_top500 => "docs/usage/top500.md",
}

/// docs/architecture.md's crate graph is the manifests' `[dependencies]`, so it cannot drift.
#[test]
fn architecture_draws_the_crates_as_their_manifests_make_them() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let mut drawn = std::collections::BTreeMap::new();
    for line in doc.lines() {
        if let Some((krate, deps)) = line.split_once(" → ") {
            let krate = krate.trim();
            if krate.starts_with("amdahl-") && !krate.contains(' ') {
                let deps: std::collections::BTreeSet<String> = deps
                    .split(", ")
                    .filter(|d| d.starts_with("amdahl-"))
                    .map(str::to_string)
                    .collect();
                drawn.insert(krate.to_string(), deps);
            }
        }
    }
    let mut manifests = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let section = toml
            .split("\n[dependencies]\n")
            .nth(1)
            .map_or("", |rest| rest.split("\n[").next().unwrap_or(""));
        let deps = section
            .lines()
            .filter_map(|l| l.split_once(".workspace").map(|(name, _)| name.trim()))
            .filter(|name| name.starts_with("amdahl-"))
            .map(str::to_string)
            .collect();
        manifests.insert(
            dir.file_name().unwrap().to_string_lossy().into_owned(),
            deps,
        );
    }
    assert_eq!(
        drawn, manifests,
        "docs/architecture.md's crate graph vs crates/*/Cargo.toml"
    );
}
