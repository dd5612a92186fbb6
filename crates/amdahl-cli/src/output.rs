//! Output sinks shared by every subcommand: a human table by default, `--json` or `--csv` for
//! scripts. Results go to stdout; progress and warnings go to stderr.

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

/// Write `text` to stdout, treating a closed pipe (`amdahl ... | head`) as success.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to standard output"),
    }
}

/// Write a file atomically (temp file + rename), so a reader never sees half a plot or result.
pub fn write_file(path: &Path, contents: &str) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(d) = dir {
        std::fs::create_dir_all(d)
            .with_context(|| format!("creating directory {}", d.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, contents).with_context(|| format!("writing {}", path.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
