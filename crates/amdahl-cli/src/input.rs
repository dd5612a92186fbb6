//! Reading input files with a bound. The readers parse whole documents (CSV and JSON results, TOP500
//! workbooks), so what cannot be streamed is capped: at most [`DEFAULT_MAX_MIB`] MiB per file,
//! or `$AMDAHL_MAX_INPUT_MIB`. `fit /dev/zero` or a 200 MB CSV stops with an error naming the cap
//! and how to raise it, instead of growing without bound.

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::Path;

/// Default cap per input file, in MiB: a TOP500 list is under 1 MB, a run record a few kB, and
/// a measured series of a million runs ~30 MB.
pub const DEFAULT_MAX_MIB: u64 = 64;

/// The environment variable that raises (or lowers) the cap, in MiB.
pub const VAR: &str = "AMDAHL_MAX_INPUT_MIB";

/// The cap in bytes: `$AMDAHL_MAX_INPUT_MIB` MiB when set (a whole number ≥ 1), else the default.
pub fn max_bytes() -> Result<u64> {
    let mib = match std::env::var(VAR) {
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(m) if m >= 1 => m,
            _ => bail!("{VAR}={v} is not a whole number of MiB ≥ 1"),
        },
        Err(_) => DEFAULT_MAX_MIB,
    };
    Ok(mib.saturating_mul(1 << 20))
}

/// Every byte of `path` (`-`: standard input), up to the cap.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let max = max_bytes()?;
    let (name, mut bytes) = if path == Path::new("-") {
        let mut b = Vec::new();
        std::io::stdin()
            .lock()
            .take(max.saturating_add(1))
            .read_to_end(&mut b)
            .context("reading standard input")?;
        ("standard input".to_string(), b)
    } else {
        let f = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
        let mut b = Vec::new();
        f.take(max.saturating_add(1))
            .read_to_end(&mut b)
            .with_context(|| format!("reading {}", path.display()))?;
        (path.display().to_string(), b)
    };
    if bytes.len() as u64 > max {
        bytes.clear();
        bail!(
            "{name} is larger than {} MiB, the most amdahl reads from one input; \
             check that it is the file you meant, or raise the cap with {VAR}=<MiB>",
            max >> 20
        );
    }
    Ok(bytes)
}

/// [`read_bytes`] as UTF-8 text.
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = read_bytes(path)?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} is not UTF-8 text (invalid byte at offset {})",
            if path == Path::new("-") {
                "standard input".to_string()
            } else {
                path.display().to_string()
            },
            e.utf8_error().valid_up_to()
        )
    })
}
