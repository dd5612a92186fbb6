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
//!
//! An existing file's header decides the columns ([`columns_of`]), as in CodeCarbon 3.3.2
//! (`FileOutput.out`: headers compared as sets, rows written in the file's order): the same
//! names in any order, or those of an older CodeCarbon (2.x–3.0 had 32 columns, 3.1 added
//! `water_consumed` and `wue`, 3.2 the utilisation columns) get rows in that file's columns. A
//! header with a name CodeCarbon never wrote is refused before the run. CodeCarbon instead
//! renames a mismatched file to a backup and starts a new one; amdahl does not, because runs of
//! one job array share the file and a rename under one would split their rows over two files,
//! and an older CodeCarbon's file stays readable by what already reads it.

use super::{Context as _, RecordSink, SinkError, Start};
use crate::record::{parse_record, RunRecord};
use crate::Sample;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One record's row (ending in a newline) in the given columns, a subset of the header's.
pub type RenderRow =
    fn(&RunRecord, &[&str]) -> Result<String, Box<dyn std::error::Error + Send + Sync>>;

/// The CSV's format: CodeCarbon's header and one record's row.
#[derive(Clone, Copy)]
pub struct Format {
    pub header: &'static str,
    pub row: RenderRow,
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
        let older = check_header(csv, self.format.header)?;
        let regular = std::fs::metadata(csv).map(|m| m.is_file()).unwrap_or(true);
        if !regular {
            return Ok(Vec::new());
        }
        let mut recovered: Vec<String> = older.into_iter().collect();
        recovered.extend(recover(csv, &self.format)?);
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

/// The first line of `path` without its line end; None for an empty or missing file.
fn first_line(path: &Path) -> std::io::Result<Option<String>> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut line = String::new();
    BufReader::new(f).read_line(&mut line)?;
    let line = line.trim_end_matches(['\n', '\r']);
    Ok((!line.trim().is_empty()).then(|| line.to_string()))
}

/// The columns to write in a file whose header is `existing`: its names in its order, when each
/// is one of `header`'s and none repeats; else why not (names CodeCarbon never wrote).
pub fn columns_of<'a>(existing: &'a str, header: &str) -> Result<Vec<&'a str>, String> {
    let known: Vec<&str> = header.split(',').collect();
    let columns: Vec<&str> = existing.split(',').map(str::trim).collect();
    let unknown: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|c| !known.contains(c))
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "{} column(s) CodeCarbon never wrote ({})",
            unknown.len(),
            unknown
                .iter()
                .take(3)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(c) = columns
        .iter()
        .enumerate()
        .find_map(|(i, c)| columns[..i].contains(c).then_some(*c))
    {
        return Err(format!("column `{c}` twice"));
    }
    Ok(columns)
}

/// Check the CSV's header before the run: refuse one whose rows would not line up, and return a
/// note when it is an older CodeCarbon's (rows go in its columns).
fn check_header(path: &Path, header: &str) -> Result<Option<String>, SinkError> {
    let cannot = |e: std::io::Error| {
        SinkError::caused(
            format!(
                "cannot write {} (fix the path or its permissions)",
                path.display()
            ),
            e,
        )
    };
    // A FIFO or device has no header to read (and reading one would block).
    let regular = std::fs::metadata(path).map(|m| m.is_file()).unwrap_or(true);
    let existing = if regular {
        first_line(path).map_err(cannot)?
    } else {
        None
    };
    let note = match existing.as_deref() {
        None => None,
        Some(line) if line == header => None,
        Some(line) => {
            let columns = columns_of(line, header).map_err(|why| {
                SinkError::new(format!(
                    "{}: its header is not CodeCarbon {}'s: {why}; rows would not line up. Use a new file, or move this one away",
                    path.display(),
                    crate::estimate::CODECARBON_VERSION
                ))
            })?;
            let known: Vec<&str> = header.split(',').collect();
            let missing: Vec<&str> = known
                .iter()
                .copied()
                .filter(|c| !columns.contains(c))
                .collect();
            (!missing.is_empty()).then(|| {
                format!(
                    "{} has an older CodeCarbon header ({} of CodeCarbon {}'s {} columns): its row is written in that file's columns, without {}",
                    path.display(),
                    columns.len(),
                    crate::estimate::CODECARBON_VERSION,
                    known.len(),
                    missing.join(", ")
                )
            })
        }
    };
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(cannot)?;
    Ok(note)
}

/// Append one row under the CSV's lock: with the header first if the file is empty, else in the
/// columns of the header it has (read under the lock, so a file another run just started is
/// followed too).
pub fn append(path: &Path, r: &RunRecord, format: &Format) -> Result<(), SinkError> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .context_with(|| format!("writing {}", path.display()))?;
    f.lock()
        .context_with(|| format!("locking {}", path.display()))?;
    let regular = f.metadata().map(|m| m.is_file()).unwrap_or(false);
    let empty = f.metadata().map(|m| m.len() == 0).unwrap_or(true);
    let existing = if regular && !empty {
        first_line(path).context_with(|| format!("reading {}", path.display()))?
    } else {
        None
    };
    let ours: Vec<&str> = format.header.split(',').collect();
    let columns = match existing.as_deref() {
        None => ours,
        Some(line) => columns_of(line, format.header).map_err(|why| {
            SinkError::new(format!(
                "{}: its header changed during the run ({why}); the row was not written",
                path.display()
            ))
        })?,
    };
    let row = (format.row)(r, &columns).context_with(|| "formatting the CodeCarbon row".into())?;
    // An empty file, a FIFO or a device (`/dev/null`) gets the header first.
    let text = match existing {
        None => format!("{}\n{row}", format.header),
        Some(_) => row,
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
        row: |_, _| Ok(String::new()),
    };

    /// A row that names its columns: `A,B,C` for columns a, b, c.
    const NAMED: Format = Format {
        header: "a,b,c,d",
        row: |_, columns| Ok(format!("{}\n", columns.join(",").to_uppercase())),
    };

    fn record() -> RunRecord {
        use crate::cluster::Role;
        let ctx = crate::record::tests::ctx("node1", Role::Measured, 0);
        crate::record::build(&ctx, &[], Default::default())
    }

    /// Regression: a CSV an older CodeCarbon started (2.x–3.0: 32 columns, without the
    /// utilisation, water and WUE columns) was refused ("its header is not CodeCarbon 3.x's 38
    /// columns"); a file with CodeCarbon's names in another order too, which CodeCarbon itself
    /// appends to in the file's order. Both now get rows in their own columns; the older one
    /// with a note that names the columns left out.
    #[test]
    fn rows_follow_an_older_or_reordered_header() {
        let dir = tempfile::tempdir().unwrap();
        for (header, note) in [("c,a", Some("without b, d")), ("d,c,b,a", None)] {
            let csv = dir.path().join(format!("{}.csv", header.replace(',', "")));
            std::fs::write(&csv, format!("{header}\nold,row\n")).unwrap();
            let mut cc = CodeCarbonCsv::new(&csv, NAMED);
            let notes = cc.open("run-1").unwrap();
            match note {
                Some(n) => assert!(
                    notes.len() == 1 && notes[0].contains(n) && notes[0].contains("older"),
                    "{notes:?}"
                ),
                None => assert!(notes.is_empty(), "{notes:?}"),
            }
            cc.close(Some(&record())).unwrap();
            let text = std::fs::read_to_string(&csv).unwrap();
            assert_eq!(
                text,
                format!("{header}\nold,row\n{}\n", header.to_uppercase())
            );
        }
        // A new file gets the whole header.
        let fresh = dir.path().join("new.csv");
        let mut cc = CodeCarbonCsv::new(&fresh, NAMED);
        assert!(cc.open("run-2").unwrap().is_empty());
        cc.close(Some(&record())).unwrap();
        assert_eq!(
            std::fs::read_to_string(&fresh).unwrap(),
            "a,b,c,d\nA,B,C,D\n"
        );
    }

    /// A header with a name CodeCarbon never wrote, or one twice, is refused before the run,
    /// and the file is left as it was.
    #[test]
    fn a_foreign_header_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        for (header, why) in [("a,zz", "never wrote (zz)"), ("a,b,a", "`a` twice")] {
            let csv = dir.path().join("e.csv");
            std::fs::write(&csv, format!("{header}\n1,2\n")).unwrap();
            let e = CodeCarbonCsv::new(&csv, NAMED).open("run-1").unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains(why) && msg.contains("move this one away"),
                "{msg}"
            );
            assert_eq!(
                std::fs::read_to_string(&csv).unwrap(),
                format!("{header}\n1,2\n")
            );
        }
    }

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
