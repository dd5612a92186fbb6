//! Output sinks shared by every subcommand: a human table by default, `--json` or `--csv` for
//! scripts. Results go to stdout; progress and warnings go to stderr.

use amdahl_meter::sink::file;
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use std::path::Path;

/// The `--json` / `--csv` flags every result-producing subcommand takes.
#[derive(Args, Debug, Clone, Default)]
pub struct FormatArgs {
    /// Print the result as JSON (the documented, versioned schema) instead of a table.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the result as CSV instead of a table.
    #[arg(long)]
    pub csv: bool,
}

/// Which sink the user chose (the report crate renders every result in each).
pub use amdahl_report::render::Format;

impl FormatArgs {
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else if self.csv {
            Format::Csv
        } else {
            Format::Table
        }
    }
}

/// Print a result rendered as `text` (table, JSON or CSV) after the one check every result of
/// every command passes: no NaN or infinity anywhere in it, nor in the text rendered from it.
/// A result that fails is an error (exit 1) naming the field, never numbers that look like data.
pub fn print_result<T: serde::Serialize + ?Sized>(result: &T, text: &str) -> Result<()> {
    check_result(result)?;
    if let Some(word) = non_finite_word(text) {
        anyhow::bail!(
            "the output would contain `{word}`; the inputs are outside the range the model can compute (check for extreme or tiny values)"
        );
    }
    print_unchecked(result, text)
}

/// Print `text` rendered from `result` without [`print_result`]'s check (`infer`, `lifetime`
/// and `detect` print this way, as they always have). Under [`capture_results`] the result
/// itself is kept too, as data.
pub fn print_unchecked<T: serde::Serialize + ?Sized>(result: &T, text: &str) -> Result<()> {
    if CAPTURE.with(|c| c.borrow().is_some()) {
        let value = serde_json::to_value(result).context("keeping the result")?;
        CAPTURE.with(|c| {
            if let Some(c) = c.borrow_mut().as_mut() {
                c.results.push(value);
            }
        });
    }
    write_stdout(text, true)
}

/// The check of [`print_result`] alone, for a plot written from the result before it is printed
/// (so that no SVG is drawn from NaN either).
pub fn check_result<T: serde::Serialize + ?Sized>(result: &T) -> Result<()> {
    Ok(amdahl_report::finite::check(result)?)
}

/// The first `inf`, `-inf` or `NaN` that Rust's float formatting leaves in rendered text (a
/// renderer computing from finite fields can still overflow, e.g. a percentage of 1e308).
fn non_finite_word(text: &str) -> Option<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .find(|w| matches!(w.trim_end_matches('.'), "inf" | "-inf" | "NaN" | "-NaN"))
}

/// What a command printed while [`capture_results`] ran on its thread.
#[derive(Debug, Default)]
pub struct Capture {
    /// Everything it would have written to stdout.
    pub text: String,
    /// The results it printed, as data.
    pub results: Vec<serde_json::Value>,
    /// Whether it printed anything that is not a result's rendering.
    pub other_text: bool,
}

impl Capture {
    /// The one result the command printed, when its output was exactly that (`--json` of a
    /// command that prints its result).
    pub fn only_result(self) -> Result<serde_json::Value, String> {
        match <[_; 1]>::try_from(self.results) {
            Ok([value]) if !self.other_text => Ok(value),
            _ => Err(self.text),
        }
    }
}

thread_local! {
    /// Where [`print`] puts results while [`capture_results`] runs on this thread (the Python package
    /// takes a command's result as a return value, not from the process's stdout).
    static CAPTURE: std::cell::RefCell<Option<Capture>> = const { std::cell::RefCell::new(None) };
}

/// Run `f` with everything [`print`] would write to stdout collected instead, and each result
/// kept as data as well (`serde_json::Value`, what `json.loads` of its `--json` would give), so a
/// caller (the Python package) takes results without parsing text.
pub fn capture_results<R>(f: impl FnOnce() -> R) -> (R, Capture) {
    let previous = CAPTURE.with(|c| c.replace(Some(Capture::default())));
    let r = f();
    let captured = CAPTURE.with(|c| c.replace(previous)).unwrap_or_default();
    (r, captured)
}

/// Write `text` to stdout, treating a closed pipe (`amdahl ... | head`) as success.
pub fn print(text: &str) -> Result<()> {
    write_stdout(text, false)
}

/// [`print`]; `result`: whether `text` is a result's rendering (see [`Capture::other_text`]).
fn write_stdout(text: &str, result: bool) -> Result<()> {
    let captured = CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(c) => {
            c.text.push_str(text);
            c.other_text |= !result;
            true
        }
        None => false,
    });
    if captured {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to standard output"),
    }
}

/// Write `contents` to the file the user named, for every `-o`, `--svg`, `--prometheus` and
/// result writer of every subcommand: atomically replaced, through symbolic links, or streamed
/// to a FIFO or device (`amdahl_meter::sink::file::write`).
pub fn write_file(path: &Path, contents: &str) -> Result<()> {
    Ok(file::write(path, contents)?)
}

/// Whether `path` names (through links) a FIFO or device that [`write_file`] streams to rather
/// than replaces.
pub fn is_stream(path: &Path) -> bool {
    file::is_stream(path)
}

/// `--size`: what plots are drawn for.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotSize {
    Column,
    Page,
    Slide,
}

impl From<PlotSize> for amdahl_report::svg::Size {
    fn from(s: PlotSize) -> Self {
        match s {
            PlotSize::Column => Self::Column,
            PlotSize::Page => Self::Page,
            PlotSize::Slide => Self::Slide,
        }
    }
}

/// Write a plot where the user asked: SVG, or PNG or PDF by the extension of `path` (`.png`,
/// `.pdf`; anything else is SVG), and its data as CSV beside it (`f.svg` → `f.csv`) so that it
/// can be re-plotted. Says "wrote" for each file.
pub fn write_plot(path: &Path, svg: &str) -> Result<()> {
    let (svg, data) = amdahl_report::svg::split_data(svg);
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("png") => write_bytes(path, &amdahl_report::export::png(&svg)?)?,
        Some("pdf") => write_bytes(path, &amdahl_report::export::pdf(&svg)?)?,
        _ => write_file(path, &svg)?,
    }
    wrote(path);
    if let Some(csv) = data {
        if !is_stream(path) {
            let beside = path.with_extension("csv");
            if beside != path {
                write_file(&beside, &csv)?;
                wrote(&beside);
            }
        }
    }
    Ok(())
}

/// [`write_file`] for binary contents (PNG, PDF).
pub fn write_bytes(path: &Path, contents: &[u8]) -> Result<()> {
    Ok(file::write_bytes(path, contents)?)
}

/// How a command's output looks: `--quiet`, `--size`, and the width tables must fit. Built once
/// per invocation from its flags (`execute`) and in force for that command on its thread
/// ([`Settings::apply`]), so two commands run at once from two threads (the Python package's
/// calls) each print with their own; nothing process-wide changes.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub quiet: bool,
    pub plot_size: PlotSize,
    pub table_width: Option<u16>,
}

thread_local! {
    /// `--quiet` of the command running on this thread.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Settings {
    /// Run `f` (a command) with these settings on this thread; the ones before are restored
    /// afterwards, even if `f` panics.
    pub fn apply<R>(self, f: impl FnOnce() -> R) -> R {
        struct Restore(bool);
        impl Drop for Restore {
            fn drop(&mut self) {
                QUIET.with(|q| q.set(self.0));
            }
        }
        let _restore = Restore(QUIET.with(|q| q.replace(self.quiet)));
        amdahl_report::table::with_max_width(self.table_width, || {
            amdahl_report::svg::with_size(self.plot_size.into(), f)
        })
    }
}

/// Whether `--quiet` was given to the command running on this thread: progress, notes and
/// "wrote FILE" lines are silenced; warnings and errors still print.
pub fn quiet() -> bool {
    QUIET.with(|q| q.get())
}

/// An informational line on stderr (`amdahl: MESSAGE`), silenced by `--quiet`. Warnings and
/// errors do not go through here: they always print.
pub fn note(message: &str) {
    if !quiet() {
        // A closed stderr is not worth failing a finished command for (EPIPE is ignored).
        let _ = writeln!(std::io::stderr().lock(), "amdahl: {message}");
    }
}

/// Say that a command wrote `path`, the same way for every command and every kind of file: one
/// `amdahl: wrote PATH` line on stderr (stdout carries only results), silenced by `--quiet`.
pub fn wrote(path: &Path) {
    note(&format!("wrote {}", path.display()));
}

/// A progress bar on stderr for `total` steps, hidden under `--quiet` (indicatif hides it by
/// itself when stderr is not a terminal).
pub fn progress_bar(total: Option<u64>) -> indicatif::ProgressBar {
    let target = if quiet() {
        indicatif::ProgressDrawTarget::hidden()
    } else {
        indicatif::ProgressDrawTarget::stderr()
    };
    indicatif::ProgressBar::with_draw_target(total, target)
}

/// The width tables must fit: `$COLUMNS` when set (scripts and tests can ask for a width), else
/// the terminal's when stdout is one; `None` (never wrap) in a pipe or a file.
pub fn table_width() -> Option<u16> {
    if let Some(w) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w >= 20)
    {
        return Some(w);
    }
    terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| w.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_words_are_found_only_as_whole_words() {
        assert_eq!(non_finite_word("E = NaN %"), Some("NaN"));
        assert_eq!(non_finite_word("step time inf s"), Some("inf"));
        assert_eq!(non_finite_word("co2e -inf t"), Some("-inf"));
        assert_eq!(non_finite_word("{\"x\": inf}"), Some("inf"));
        assert_eq!(non_finite_word("information, infinite, NaNo, 1e308"), None);
    }

    /// Settings are the running command's, per thread: one thread's `--quiet` and table width
    /// never reach another's, and each thread has its own back when its command ends.
    #[test]
    fn settings_apply_to_their_own_thread_only() {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let wide = || {
            let mut t = amdahl_report::table::Table::new(["a long column header", "another one"]);
            t.row([
                "a cell with several words in it",
                "and one more cell with words",
            ]);
            t.render()
        };
        let threads: Vec<_> = [(true, Some(30)), (false, None)]
            .into_iter()
            .map(|(q, width)| {
                let barrier = std::sync::Arc::clone(&barrier);
                std::thread::spawn(move || {
                    let settings = Settings {
                        quiet: q,
                        plot_size: PlotSize::Page,
                        table_width: width,
                    };
                    let inside = settings.apply(|| {
                        barrier.wait();
                        let seen = (quiet(), wide());
                        barrier.wait();
                        seen
                    });
                    (inside, (quiet(), wide()))
                })
            })
            .collect();
        let seen: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let ((q0, narrow), after0) = &seen[0];
        let ((q1, whole), after1) = &seen[1];
        assert!(*q0 && !*q1);
        assert!(narrow.lines().all(|l| l.chars().count() <= 30), "{narrow}");
        assert!(whole.lines().any(|l| l.chars().count() > 30), "{whole}");
        // Back to the defaults once each command ended.
        assert!(!after0.0 && !after1.0);
        assert_eq!(after0.1, *whole);
    }
}
