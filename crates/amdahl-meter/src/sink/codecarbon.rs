//! The CodeCarbon-compatible `emissions.csv` that `amdahl run --codecarbon-csv` and the Python
//! tracker append to. The row itself is rendered by the caller ([`Format`]: `amdahl-report`).
//!
//! Many runs may share one file (a job array on a shared file system), and a run may be
//! killed outright (SIGKILL, the OOM killer, a node failure), so:
//!
//! - Rows are appended under an exclusive lock of the CSV (`flock`), which also decides who
//!   writes the header: concurrent runs never interleave rows or write two headers.
//! - While the command runs, the latest partial record sits in a pending file beside the CSV,
//!   `.NAME.RUN_ID.pending`, rewritten after every sample and locked by its run from before it
//!   bears that name (it is created as `.creating`, locked, then renamed). A run that
//!   finishes appends its row and deletes the file. The next `amdahl run` with the same CSV
//!   finds pending files whose lock is free (their run died: the kernel drops a dead process's
//!   locks) and appends their last partial record as a row, so a killed run loses at most its
//!   last interval.

use super::{Context as _, RecordSink, Render, SinkError, Start};
use crate::record::{parse_record, RunRecord};
use crate::Sample;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The CSV's format: CodeCarbon's header and one record's row (ending in a newline).
#[derive(Clone, Copy)]
pub struct Format {
    pub header: &'static str,
    pub row: Render<String>,
}

/// One run's CodeCarbon output: the CSV and, once opened, its locked pending file.
pub struct CodeCarbonCsv {
    csv: PathBuf,
    format: Format,
    /// None before [`RecordSink::open`], and when the CSV is a FIFO or device (`/dev/null`):
    /// nothing there to recover into.
    pending: Option<(PathBuf, File)>,
}

impl CodeCarbonCsv {
    pub fn new(csv: impl Into<PathBuf>, format: Format) -> Self {
        CodeCarbonCsv {
            csv: csv.into(),
            format,
            pending: None,
        }
    }

    /// Check the CSV's header, append the rows of runs that died without one, and create this
    /// run's pending file. Returns the rows recovered (for a note).
    pub fn open(&mut self, run_id: &str) -> Result<Vec<String>, SinkError> {
        let csv = self.csv.as_path();
        check_header(csv, self.format.header)?;
        let regular = std::fs::metadata(csv).map(|m| m.is_file()).unwrap_or(true);
        if !regular {
            return Ok(Vec::new());
        }
        let recovered = recover(csv, &self.format)?;
        let pending_path = pending_path(csv, run_id);
        // Created under a name recovery ignores, locked, and only then renamed into place (the
        // lock belongs to the open file, not the name): another run's recovery never sees this
        // pending file unlocked, which it would take for a dead run's. Created and locked under
        // its final name, a concurrent run could lock it first, and this run then failed with
        // "lock acquisition failed" (1 run in ~300 with 20 runs sharing a CSV).
        let creating = pending_path.with_extension("creating");
        let pending = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&creating)
            .context_with(|| {
                format!(
                    "cannot create {} beside the CodeCarbon CSV (fix the directory's permissions)",
                    creating.display()
                )
            })?;
        let placed = pending
            .try_lock()
            .context_with(|| format!("locking {}", creating.display()))
            .and_then(|()| {
                std::fs::rename(&creating, &pending_path)
                    .context_with(|| format!("renaming {}", creating.display()))
            });
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&creating);
            return Err(e);
        }
        self.pending = Some((pending_path, pending));
        Ok(recovered)
    }

    /// Keep `r` (a partial record) as the row to recover if this run dies.
    pub fn save_pending(&self, r: &RunRecord) -> Result<(), SinkError> {
        let Some((path, file)) = &self.pending else {
            return Ok(());
        };
        let json = serde_json::to_string(r).context_with(|| "serialising the record".into())?;
        // Write then trim: a reader never sees an empty file, at worst a longer stale tail,
        // which fails to parse and is reported rather than turned into a wrong row.
        file.write_all_at(json.as_bytes(), 0)
            .and_then(|_| file.set_len(json.len() as u64))
            .context_with(|| format!("writing {}", path.display()))
    }

    /// Append the final row (or none, for work that never started) and drop the pending file.
    pub fn close(&mut self, r: Option<&RunRecord>) -> Result<(), SinkError> {
        if let Some(r) = r {
            append(&self.csv, r, &self.format)?;
        }
        // Unlinked while still locked, so no recovery can take it between the two steps.
        match self.pending.take() {
            Some((path, _file)) => {
                std::fs::remove_file(&path).context_with(|| format!("removing {}", path.display()))
            }
            None => Ok(()),
        }
    }
}

impl RecordSink for CodeCarbonCsv {
    fn open(&mut self, start: &Start<'_>) -> Result<Vec<String>, SinkError> {
        CodeCarbonCsv::open(self, &start.record.run_id)
    }

    fn sample(&mut self, _: &Sample, record: &RunRecord) -> Result<(), SinkError> {
        self.save_pending(record)
    }

    /// Work that never ran gets no row: CodeCarbon would have measured nothing.
    fn finish(&mut self, record: &RunRecord, ran: bool) -> Result<(), SinkError> {
        self.close(ran.then_some(record))
    }
}

fn pending_prefix(csv: &Path) -> String {
    let name = csv
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(".{name}.")
}

fn pending_path(csv: &Path, run_id: &str) -> PathBuf {
    let name = format!("{}{run_id}.pending", pending_prefix(csv));
    match csv.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(d) => d.join(name),
        None => PathBuf::from(name),
    }
}

/// Append the rows of runs that died: pending files of this CSV whose lock is free.
fn recover(csv: &Path, format: &Format) -> Result<Vec<String>, SinkError> {
    let dir = csv
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let prefix = pending_prefix(csv);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut notes = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with(&prefix) && name.ends_with(".pending")) {
            continue;
        }
        let path = e.path();
        let Ok(f) = OpenOptions::new().read(true).write(true).open(&path) else {
            continue;
        };
        match f.try_lock() {
            Ok(()) => {}
            // Its run is alive.
            Err(TryLockError::WouldBlock) => continue,
            Err(TryLockError::Error(_)) => continue,
        }
        // Still the file at that path (its run may have finished and unlinked it meanwhile).
        let same = match (f.metadata(), std::fs::metadata(&path)) {
            (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            _ => false,
        };
        if !same {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        match parse_record(&text, &path) {
            Ok(mut r) => {
                r.partial = true;
                append(csv, &r, format)?;
                notes.push(format!(
                    "appended the CodeCarbon row of run {} ({:.1} s measured), which ended without writing its own (amdahl was killed?)",
                    r.run_id,
                    r.duration_s.get()
                ));
                let _ = std::fs::remove_file(&path);
            }
            Err(e) => notes.push(format!(
                "{}: a run that ended without its CodeCarbon row left an unreadable record ({e}); left in place",
                path.display()
            )),
        }
    }
    Ok(notes)
}

/// Refuse a CSV whose header is not CodeCarbon 3.x's (rows would not line up).
fn check_header(path: &Path, header: &str) -> Result<(), SinkError> {
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => {
            let first = text
                .lines()
                .next()
                .unwrap_or_default()
                .trim_end_matches('\r');
            if first != header {
                return Err(SinkError::new(format!(
                    "{}: its header is not CodeCarbon 3.x's 38 columns; rows would not line up. Use a new file, or move this one away",
                    path.display()
                )));
            }
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(SinkError::caused(
                format!(
                    "cannot write {} (fix the path or its permissions)",
                    path.display()
                ),
                e,
            ))
        }
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .context_with(|| {
            format!(
                "cannot write {} (fix the path or its permissions)",
                path.display()
            )
        })?;
    Ok(())
}

/// Append one row under the CSV's lock, with the header first if the file is empty.
pub fn append(path: &Path, r: &RunRecord, format: &Format) -> Result<(), SinkError> {
    let row = (format.row)(r).context_with(|| "formatting the CodeCarbon row".into())?;
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .context_with(|| format!("writing {}", path.display()))?;
    f.lock()
        .context_with(|| format!("locking {}", path.display()))?;
    let empty = f.metadata().map(|m| m.len() == 0).unwrap_or(true);
    let text = if empty {
        format!("{}\n{row}", format.header)
    } else {
        row
    };
    // One write of the whole text, under the lock.
    f.write_all(text.as_bytes())
        .and_then(|_| f.flush())
        .context_with(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// No row is ever formatted here: every run ends without one.
    const FORMAT: Format = Format {
        header: "timestamp,project_name",
        row: |_| Ok(String::new()),
    };

    /// Regression (CI: 1 of 20 concurrent runs sharing a CSV exited 1, "locking
    /// .emissions.csv.….pending: lock acquisition failed"): a run's pending file was visible
    /// unlocked between its creation and its lock, so another run's recovery could take it for
    /// a dead run's and hold its lock. Here one thread recovers without pause while another
    /// opens and finishes 2,000 runs: every open succeeds and recovery never sees a live run's
    /// file.
    #[test]
    fn recovery_never_takes_a_starting_run_for_a_dead_one() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("emissions.csv");
        let stop = Arc::new(AtomicBool::new(false));
        let recoverer = {
            let (csv, stop) = (csv.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut notes = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    notes.extend(recover(&csv, &FORMAT).unwrap());
                }
                notes
            })
        };
        let mut failures = Vec::new();
        for k in 0..2000 {
            let mut cc = CodeCarbonCsv::new(&csv, FORMAT);
            match cc.open(&format!("run-{k}")) {
                Ok(_) => cc.close(None).unwrap(),
                Err(e) => failures.push(format!("{e:#}")),
            }
        }
        stop.store(true, Ordering::Relaxed);
        let notes = recoverer.join().unwrap();
        assert!(
            failures.is_empty(),
            "{} opens failed: {:?}",
            failures.len(),
            failures.first()
        );
        assert!(
            notes.is_empty(),
            "recovery took live runs: {:?}",
            notes.first()
        );
    }
}
