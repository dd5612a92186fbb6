//! Output sinks shared by every subcommand: a human table by default, `--json` or `--csv` for
//! scripts. Results go to stdout; progress and warnings go to stderr.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};

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

/// Which sink the user chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
}

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
    print(text)
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

thread_local! {
    /// Where [`print`] puts results while [`capture`] runs on this thread (the Python package
    /// takes a command's `--json` as a return value, not from the process's stdout).
    static CAPTURE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Run `f` with every result [`print`] would write to stdout collected instead; returns them.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, String) {
    let previous = CAPTURE.with(|c| c.replace(Some(String::new())));
    let r = f();
    let text = CAPTURE.with(|c| c.replace(previous)).unwrap_or_default();
    (r, text)
}

/// Write `text` to stdout, treating a closed pipe (`amdahl ... | head`) as success.
pub fn print(text: &str) -> Result<()> {
    let captured = CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(buf) => {
            buf.push_str(text);
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
/// result writer of every subcommand.
///
/// - A regular file (or a new one) is replaced atomically: a uniquely named temporary file in
///   the target's own directory, renamed over it, so a reader never sees half a result and
///   concurrent writers of one path never collide on a shared `.tmp` name (the last rename
///   wins; none fails). The temporary file is removed if anything fails. An existing file keeps
///   its permissions; a new one gets 0666 less the umask, as `>` in a shell would.
/// - A symbolic link is followed (to any depth, relative links against their own directory) and
///   its target is written; the link stays a link.
/// - A FIFO or character device (`/dev/null`, `/dev/stdout`) is opened and written in place,
///   never renamed over. Directories, sockets and block devices are refused.
pub fn write_file(path: &Path, contents: &str) -> Result<()> {
    match destination(path)? {
        Destination::Stream(p) => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .with_context(|| format!("opening {} for writing", p.display()))?;
            f.write_all(contents.as_bytes())
                .with_context(|| format!("writing {}", p.display()))
        }
        Destination::File { path: p, keep } => replace(&p, contents.as_bytes(), keep),
    }
}

/// Whether `path` names (through links) a FIFO or device that [`write_file`] streams to rather
/// than replaces. `amdahl run` writes such outputs once at the end instead of after every sample.
pub fn is_stream(path: &Path) -> bool {
    matches!(destination(path), Ok(Destination::Stream(_)))
}

enum Destination {
    /// Replace by rename; `keep`: the permissions of the file being replaced.
    File {
        path: PathBuf,
        keep: Option<std::fs::Permissions>,
    },
    /// Write in place (FIFO, character device).
    Stream(PathBuf),
}

/// Symbolic links followed before giving up (Linux's own limit, MAXSYMLINKS, is 40).
const MAX_LINKS: usize = 40;

/// Follow `path` through symbolic links to what a write should really change.
fn destination(path: &Path) -> Result<Destination> {
    use std::os::unix::fs::FileTypeExt;
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Destination::File {
                    path: p,
                    keep: None,
                })
            }
            Err(e) => return Err(e).with_context(|| format!("cannot write {}", p.display())),
        };
        let ty = meta.file_type();
        if ty.is_symlink() {
            let target = std::fs::read_link(&p)
                .with_context(|| format!("reading the symbolic link {}", p.display()))?;
            p = match p.parent() {
                Some(dir) if target.is_relative() => dir.join(target),
                _ => target,
            };
            continue;
        }
        if ty.is_file() {
            return Ok(Destination::File {
                path: p,
                keep: Some(meta.permissions()),
            });
        }
        if ty.is_fifo() || ty.is_char_device() {
            return Ok(Destination::Stream(p));
        }
        let what = if ty.is_dir() {
            "a directory"
        } else if ty.is_block_device() {
            "a block device"
        } else {
            "a socket"
        };
        bail!(
            "cannot write {}: it is {what}; give a file name",
            path.display()
        );
    }
    bail!(
        "cannot write {}: more than {MAX_LINKS} levels of symbolic links (a loop?)",
        path.display()
    )
}

/// Write a uniquely named temporary file beside `path` and rename it over `path`.
fn replace(path: &Path, contents: &[u8], keep: Option<std::fs::Permissions>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(d) => {
            std::fs::create_dir_all(d)
                .with_context(|| format!("creating directory {}", d.display()))?;
            d
        }
        None => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{name}.");
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        // The mode at creation, less the umask: what a plain `create` would give.
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .with_context(|| {
            format!(
                "cannot write {} (creating a temporary file in {})",
                path.display(),
                dir.display()
            )
        })?;
    tmp.write_all(contents)
        .with_context(|| format!("writing {}", path.display()))?;
    if let Some(perm) = keep {
        tmp.as_file()
            .set_permissions(perm)
            .with_context(|| format!("keeping the permissions of {}", path.display()))?;
    }
    // On failure the error owns the temporary file and deletes it when dropped.
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
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
    match destination(path)? {
        Destination::Stream(p) => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .with_context(|| format!("opening {} for writing", p.display()))?;
            f.write_all(contents)
                .with_context(|| format!("writing {}", p.display()))
        }
        Destination::File { path: p, keep } => replace(&p, contents, keep),
    }
}

/// `--quiet`: set once by `main` before any subcommand runs.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Silence progress, notes and "wrote FILE" lines (`--quiet`); warnings and errors still print.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `--quiet` was given.
pub fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
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

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn output_through_symlink_updates_the_target_and_keeps_the_link() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("data/real.json");
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        std::fs::write(&real, "old").unwrap();
        // A relative link, resolved against the link's own directory.
        let link = t.path().join("out.json");
        std::os::unix::fs::symlink("data/real.json", &link).unwrap();
        write_file(&link, "new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        // A dangling link creates its target.
        let dangling = t.path().join("d.json");
        std::os::unix::fs::symlink(t.path().join("data/created.json"), &dangling).unwrap();
        write_file(&dangling, "x").unwrap();
        assert_eq!(
            std::fs::read_to_string(t.path().join("data/created.json")).unwrap(),
            "x"
        );
        assert!(leftovers(t.path()).is_empty() && leftovers(&t.path().join("data")).is_empty());
    }

    #[test]
    fn output_to_dev_null_streams_and_never_replaces_the_device() {
        write_file(Path::new("/dev/null"), "{}").unwrap();
        use std::os::unix::fs::FileTypeExt;
        let m = std::fs::metadata("/dev/null").unwrap();
        assert!(m.file_type().is_char_device());
        assert!(is_stream(Path::new("/dev/null")));
    }

    #[test]
    fn output_to_fifo_streams_to_its_reader() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("pipe");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let f2 = fifo.clone();
        let reader = std::thread::spawn(move || std::fs::read_to_string(f2).unwrap());
        write_file(&fifo, "through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn output_to_directory_is_refused_with_the_reason() {
        let t = tempfile::tempdir().unwrap();
        let e = format!("{:#}", write_file(t.path(), "x").unwrap_err());
        assert!(e.contains("is a directory"), "{e}");
    }

    #[test]
    fn output_keeps_permissions_of_the_file_it_replaces() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("r.prom");
        std::fs::write(&p, "a").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_file(&p, "b").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }

    #[test]
    fn concurrent_writers_of_one_path_never_fail_or_leave_temporary_files() {
        // The old fixed `path.tmp` made 2-4 of 20 concurrent writers fail (issue 13, item 1).
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("shared.json");
        let handles: Vec<_> = (0..20)
            .map(|i| {
                let p = p.clone();
                std::thread::spawn(move || {
                    (0..20)
                        .map(|k| write_file(&p, &format!("writer {i} round {k}")))
                        .collect::<Result<Vec<_>>>()
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.starts_with("writer ") && text.ends_with("round 19"),
            "{text}"
        );
        assert!(leftovers(t.path()).is_empty());
    }
}
