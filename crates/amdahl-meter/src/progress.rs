//! Units of work a measured job reports (steps, epochs), marked at every sample and projected
//! to the whole run by [`amdahl_model::projection`]. The job's side is one atomic add (the Python
//! tracker's `step()` must cost well under 2 µs); the sampler's side takes a lock once per
//! sample. `amdahl run --progress-file` sets the count from a file the job appends to.

use amdahl_model::projection::{Mark, Projection, ProjectionError, Projector};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One kind of unit: its count, the run's total (if known) and the running projection.
pub struct Units {
    name: &'static str,
    done: AtomicU64,
    /// When the count last changed: Unix seconds (f64 bits). A unit ends between two samples;
    /// knowing when lets the mark sit at the unit's boundary, with the energy interpolated
    /// there, rather than at the sample, which would charge part of the next unit to it.
    changed_at: AtomicU64,
    /// The count at the last mark.
    marked: AtomicU64,
    /// 0: not known.
    total: AtomicU64,
    projector: Mutex<Projector>,
}

/// Unix time now in seconds (a vDSO clock read, tens of ns).
pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Units {
    pub fn new(name: &'static str) -> Self {
        Units {
            name,
            done: AtomicU64::new(0),
            changed_at: AtomicU64::new(0),
            marked: AtomicU64::new(0),
            total: AtomicU64::new(0),
            projector: Mutex::new(Projector::new()),
        }
    }
    pub fn name(&self) -> &'static str {
        self.name
    }
    /// `n` more units completed, now.
    pub fn add(&self, n: u64) {
        // The time first, released with the count: a sampler that sees the count sees it too.
        self.changed_at
            .store(unix_now().to_bits(), Ordering::Relaxed);
        self.done.fetch_add(n, Ordering::Release);
    }
    /// The count as the job reports it (a progress file holds the absolute count), and when
    /// it was reached (Unix seconds: the file's modification time).
    pub fn set(&self, n: u64, at_unix_s: f64) {
        if n != self.done.load(Ordering::Acquire) {
            self.changed_at
                .store(at_unix_s.to_bits(), Ordering::Relaxed);
            self.done.store(n, Ordering::Release);
        }
    }
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Acquire)
    }
    pub fn set_total(&self, total: u64) {
        self.total.store(total, Ordering::Relaxed);
    }
    pub fn total(&self) -> Option<u64> {
        Some(self.total.load(Ordering::Relaxed)).filter(|t| *t > 0)
    }
    /// At a sample: the count now, marked where it was reached. `prev` and `now` are the run's
    /// `(seconds, joules)` at the previous sample and at this one; `start_unix_s` when the run's
    /// clock started. The energy at the unit's boundary is interpolated linearly between the
    /// two samples (power taken as constant over one interval).
    pub fn mark(&self, prev: (f64, f64), now: (f64, f64), start_unix_s: f64) {
        let units = self.done();
        if units == self.marked.swap(units, Ordering::Relaxed) && units > 0 {
            // No new unit; the energy drawn still bounds the projection from below.
            self.projector
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .measured(now.0, now.1);
            return;
        }
        let at = f64::from_bits(self.changed_at.load(Ordering::Relaxed)) - start_unix_s;
        let ((t0, e0), (t1, e1)) = (prev, now);
        let (t, e) = if units == 0 || !at.is_finite() || t1 <= t0 {
            (t1, e1)
        } else {
            let t = at.clamp(t0, t1);
            (t, e0 + (e1 - e0) * (t - t0) / (t1 - t0))
        };
        let m = Mark {
            units,
            t_s: t,
            energy_j: e,
        };
        // A poisoned lock only means a panic elsewhere mid-update; the sums stay usable.
        let mut projector = self.projector.lock().unwrap_or_else(|e| e.into_inner());
        if units > 0 && at < 0.0 {
            projector.note_stale(units);
        }
        projector.observe(m);
    }
    pub fn projection(&self) -> Result<Projection, ProjectionError> {
        self.projector
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .project(self.name, self.total())
    }
}

/// The two units a training job reports: steps and epochs.
pub struct Work {
    pub steps: Units,
    pub epochs: Units,
    /// The run's seconds and joules at the latest sample (f64 bits), for loggers mid-run.
    latest_t: AtomicU64,
    latest_e: AtomicU64,
}

impl Default for Work {
    fn default() -> Self {
        Work {
            steps: Units::new("step"),
            epochs: Units::new("epoch"),
            latest_t: AtomicU64::new(0),
            latest_e: AtomicU64::new(0),
        }
    }
}

impl Work {
    /// Mark both at a sample: the run's seconds and joules so far, its clock's start in Unix
    /// seconds.
    pub fn mark(&self, t_s: f64, energy_j: f64, start_unix_s: f64) {
        let prev = self.latest();
        self.steps.mark(prev, (t_s, energy_j), start_unix_s);
        self.epochs.mark(prev, (t_s, energy_j), start_unix_s);
        self.latest_t.store(t_s.to_bits(), Ordering::Relaxed);
        self.latest_e.store(energy_j.to_bits(), Ordering::Relaxed);
    }
    /// Seconds and joules of the run at the latest sample.
    pub fn latest(&self) -> (f64, f64) {
        (
            f64::from_bits(self.latest_t.load(Ordering::Relaxed)),
            f64::from_bits(self.latest_e.load(Ordering::Relaxed)),
        )
    }
    /// The projection the record carries: by epochs when their total is known (whole epochs
    /// are the steadier unit), else by steps; None until one can be made.
    pub fn projection(&self) -> Option<Projection> {
        [&self.epochs, &self.steps]
            .into_iter()
            .filter(|u| u.total().is_some())
            .find_map(|u| u.projection().ok())
    }
}

/// The count a progress file reports, with the file's modification time (Unix seconds): the
/// last number on its last line that has one (`1200` and `step 1200` read 1200; `1200/5000`
/// reads 5000, so write the count last or alone). Only the file's tail is read, so a file
/// appended to for days costs the same. None while the file does not exist or holds no number.
pub fn read_progress_file(path: &Path) -> Option<(u64, f64)> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking, and regular files only: a FIFO put in its place after `amdahl run` checked
    // it must not stall the sampler (opening a FIFO for reading blocks until a writer comes).
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let len = meta.len();
    let mtime = meta
        .modified()
        .ok()
        .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0.0, |d| d.as_secs_f64());
    let from = len.saturating_sub(4096);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut buf = Vec::new();
    f.take(4096).read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    Some((last_count(&text)?, mtime))
}

/// The last number on the last line of `text` that has one.
pub fn last_count(text: &str) -> Option<u64> {
    text.lines().rev().find_map(|line| {
        line.rsplit(|c: char| !c.is_ascii_digit())
            .find(|w| !w.is_empty())
            .and_then(|w| w.parse().ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_in_place_of_the_progress_file_is_no_count_and_no_hang() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(made.success());
        // Without O_NONBLOCK this open would wait for a writer forever.
        assert_eq!(read_progress_file(&p), None);
    }

    #[test]
    fn progress_file_counts() {
        assert_eq!(last_count("1\n2\n3\n"), Some(3));
        assert_eq!(last_count("step 10\nstep 12\n\n"), Some(12));
        assert_eq!(last_count("10\nwarming up\n"), Some(10));
        assert_eq!(last_count(""), None);
        assert_eq!(last_count("99999999999999999999999\n"), None);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("progress");
        assert_eq!(read_progress_file(&p), None);
        let long: String = (1..=5000).map(|i| format!("{i}\n")).collect();
        std::fs::write(&p, long).unwrap();
        assert_eq!(read_progress_file(&p).map(|c| c.0), Some(5000));
    }

    #[test]
    fn work_projects_by_the_unit_with_a_total() {
        let w = Work::default();
        w.mark(0.0, 0.0, 0.0);
        assert_eq!(w.projection(), None);
        // Units of 10 J ending at t = 1, 2, 3 s (progress-file style, with their times).
        for i in 1..=3u64 {
            w.steps.set(i, i as f64);
            w.mark(i as f64, 10.0 * i as f64, 0.0);
        }
        assert_eq!(w.projection(), None, "no total yet");
        w.steps.set_total(10);
        let p = w.projection().unwrap();
        assert_eq!((p.unit.as_str(), p.units_done), ("step", 3));
        assert!((p.energy_j - 100.0).abs() < 1e-9);
    }

    #[test]
    fn a_unit_ending_between_samples_is_marked_at_its_end() {
        // 10 W throughout; units end at 0.5 s, 1.5 s, 2.5 s; samples at whole seconds. The
        // sample at 3 s has drawn 30 J but only 3 units are done, the 3rd 0.5 s ago: marking
        // there would charge half of unit 4 to the first three. Interpolated: 5 J + 10 J/unit.
        let w = Work::default();
        w.epochs.set_total(10);
        w.mark(0.0, 0.0, 100.0);
        for (end, sample) in [(0.5, 1.0), (1.5, 2.0), (2.5, 3.0)] {
            let done = w.epochs.done() + 1;
            w.epochs.set(done, 100.0 + end);
            w.mark(sample, 10.0 * sample, 100.0);
        }
        let p = w.projection().unwrap();
        // Boundary at 2.5 s / 25 J, 7 more units of 10 J.
        assert!((p.energy_j - 95.0).abs() < 1e-9, "{}", p.energy_j);
        assert!((p.duration_s - 9.5).abs() < 1e-9, "{}", p.duration_s);
    }
}
