//! `amdahl report` — one self-contained HTML page from saved results: tables, plots, provenance
//! and the citable statement of each, several results of one kind side by side.
//!
//! Every file is read and checked before anything is written, and the page is written to a
//! temporary file renamed over the output, so a bad input leaves no partial HTML behind.

use crate::cmd::carbon;
use crate::output::{self, write_file};
use amdahl_model::carbon::Statement;
use amdahl_report::{html, kind};
use anyhow::{bail, Context, Result};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Result files written by amdahl commands (--json or -o): run, merge, scale, fit, top500,
    /// plan, infer, lifetime, bench.
    #[arg(value_name = "RESULT.json")]
    pub files: Vec<PathBuf>,
    /// Where to write the HTML page.
    #[arg(short, long, value_name = "FILE.html", default_value = "report.html")]
    pub output: PathBuf,
    /// Leave out the citable statements (otherwise computed as `amdahl carbon --from FILE`
    /// would, for run, plan and infer results).
    #[arg(long)]
    pub no_statement: bool,
}

/// `amdahl carbon`'s options, parsed from words (the statement of a saved result is exactly what
/// `amdahl carbon --from FILE --statement md` prints).
#[derive(Parser, Debug)]
struct CarbonWords {
    #[command(flatten)]
    options: carbon::Options,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.files.is_empty() {
        bail!("no result files given; name one or more JSON results, e.g. `amdahl report run.json fit.json -o report.html`");
    }
    check_directory(&args.output)?;
    let mut entries = Vec::with_capacity(args.files.len());
    for path in &args.files {
        if path == Path::new("-") {
            bail!("`amdahl report` reads files, not standard input: save the result with -o FILE or > FILE first");
        }
        let name = path.display().to_string();
        let text = crate::input::read_text(path)?;
        let saved = kind::read(&text, &name)?;
        output::check_result(&saved.json)
            .with_context(|| format!("{name}: the result holds a value that is not a number"))?;
        let statement = if !args.no_statement && saved.kind.reads_energy() {
            Some(statement(path)?)
        } else {
            None
        };
        entries.push(html::Entry {
            file: name,
            saved,
            statement,
        });
    }
    let page = html::page(&entries, &format!("amdahl {}", env!("CARGO_PKG_VERSION")));
    write_file(&args.output, &page)?;
    output::wrote(&args.output);
    Ok(ExitCode::SUCCESS)
}

/// The statement `amdahl carbon --from PATH --statement md` prints.
fn statement(path: &Path) -> Result<String> {
    let words = crate::parse::<CarbonWords, _, _>([
        std::ffi::OsStr::new("carbon"),
        std::ffi::OsStr::new("--from"),
        path.as_os_str(),
    ])
    .context("building the statement's options")?;
    let report = carbon::estimate(&words.options)
        .with_context(|| format!("{}: computing its carbon statement", path.display()))?;
    Ok(amdahl_report::carbon::statement_markdown(
        &Statement::from_report(&report),
    ))
}

/// Refuse an output in a directory that does not exist (a typo should not create directories).
fn check_directory(output: &Path) -> Result<()> {
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            bail!(
                "cannot write {}: the directory {} does not exist; create it first (mkdir -p {})",
                output.display(),
                dir.display(),
                dir.display()
            );
        }
    }
    Ok(())
}
