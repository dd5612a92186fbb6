//! Merging a benchmark's profile into an existing profile of the same device
//! (`amdahl bench gemm|memory|gpu --profile-out FILE` when FILE exists), so that a CPU, which no
//! single benchmark measures whole, gets one profile with its GEMM curve and its bandwidth.
//!
//! "The same device" is what the profile records of it: the same `kind` (cpu, gpu), `host` and
//! `device` name, and the same catalog device (`system`) where both name one. A figure the new
//! benchmark measured replaces the same figure of the file (a GEMM curve per precision); every
//! other figure of the file is kept, with its notes and the run that measured it
//! (`benchmarks`). A figure neither measured keeps the notes of the benchmark that runs its load
//! (the new one when it does: its reason replaces "profile with `bench memory`").

use super::{BenchmarkRun, DeviceProfile, ProfileError, PROFILE_SCHEMA};

/// A figure a profile holds, the unit of merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    IdleW,
    ComputeW,
    MemoryW,
    MemoryBandwidth,
    HostToDevice,
    DeviceToHost,
    /// The GEMM curves, one per precision (merged precision by precision).
    Gemm,
}

impl Figure {
    /// Every figure, in the order the notes are written.
    pub const ALL: [Figure; 7] = [
        Figure::IdleW,
        Figure::ComputeW,
        Figure::MemoryW,
        Figure::MemoryBandwidth,
        Figure::HostToDevice,
        Figure::DeviceToHost,
        Figure::Gemm,
    ];

    /// Its name in `benchmarks[].figures` (`gemm` is followed by the precision there).
    pub fn key(self) -> &'static str {
        match self {
            Figure::IdleW => "power.idle_w",
            Figure::ComputeW => "power.compute_w",
            Figure::MemoryW => "power.memory_w",
            Figure::MemoryBandwidth => "memory_bandwidth",
            Figure::HostToDevice => "host_to_device",
            Figure::DeviceToHost => "device_to_host",
            Figure::Gemm => "gemm",
        }
    }

    /// In words, for the message that says what a merge kept.
    fn said(self) -> &'static str {
        match self {
            Figure::IdleW => "idle power",
            Figure::ComputeW => "compute power",
            Figure::MemoryW => "memory power",
            Figure::MemoryBandwidth => "memory bandwidth",
            Figure::HostToDevice => "host-to-device bandwidth",
            Figure::DeviceToHost => "device-to-host bandwidth",
            Figure::Gemm => "GEMM curve",
        }
    }

    /// The words a note about this figure starts with, before its colon.
    fn note_head(self) -> &'static str {
        match self {
            Figure::MemoryBandwidth => "memory bandwidth",
            Figure::Gemm => "GEMM",
            f => f.key(),
        }
    }

    /// A note about this figure: `text` after the figure's head. The benches write every
    /// figure's notes through it, so a merge can tell which figure a note belongs to
    /// (`Figure::of_note`) however the text is worded.
    pub fn note(self, text: impl std::fmt::Display) -> String {
        format!("{}: {text}", self.note_head())
    }

    /// The figure a note is about: the words before its first colon (the head
    /// [`Figure::note`] writes; `memory_bandwidth` and any case of `gemm` too, as files written
    /// by hand have them).
    fn of_note(note: &str) -> Option<Figure> {
        let head = note.split(':').next()?.trim();
        Figure::ALL
            .into_iter()
            .find(|f| head.eq_ignore_ascii_case(f.note_head()) || head == f.key())
    }

    /// The figure a `benchmarks[].figures` entry names.
    fn of_key(key: &str) -> Option<Figure> {
        if key.starts_with("gemm ") {
            return Some(Figure::Gemm);
        }
        Figure::ALL.into_iter().find(|f| f.key() == key)
    }

    fn value(self, p: &DeviceProfile) -> Option<f64> {
        match self {
            Figure::IdleW => p.power.idle_w,
            Figure::ComputeW => p.power.compute_w,
            Figure::MemoryW => p.power.memory_w,
            Figure::MemoryBandwidth => p.memory_bandwidth,
            Figure::HostToDevice => p.host_to_device,
            Figure::DeviceToHost => p.device_to_host,
            Figure::Gemm => None,
        }
    }

    fn slot(self, p: &mut DeviceProfile) -> Option<&mut Option<f64>> {
        match self {
            Figure::IdleW => Some(&mut p.power.idle_w),
            Figure::ComputeW => Some(&mut p.power.compute_w),
            Figure::MemoryW => Some(&mut p.power.memory_w),
            Figure::MemoryBandwidth => Some(&mut p.memory_bandwidth),
            Figure::HostToDevice => Some(&mut p.host_to_device),
            Figure::DeviceToHost => Some(&mut p.device_to_host),
            Figure::Gemm => None,
        }
    }

    /// Whether `p` holds this figure.
    pub fn measured_in(self, p: &DeviceProfile) -> bool {
        match self {
            Figure::Gemm => !p.gemm.is_empty(),
            f => f.value(p).is_some(),
        }
    }

    /// The `benchmarks[].figures` entries of what `p` holds of this figure.
    fn keys_in(self, p: &DeviceProfile) -> Vec<String> {
        match self {
            Figure::Gemm => p
                .gemm
                .iter()
                .map(|g| format!("gemm {}", g.precision))
                .collect(),
            f if f.measured_in(p) => vec![f.key().to_string()],
            _ => Vec::new(),
        }
    }

    /// Lay `from`'s measurement of this figure over `to`: the value, or each precision's curve
    /// in place of the same precision's (others kept).
    fn copy(self, from: &DeviceProfile, to: &mut DeviceProfile) {
        if let (Some(v), Some(slot)) = (self.value(from), self.slot(to)) {
            *slot = Some(v);
            return;
        }
        if self == Figure::Gemm {
            for g in &from.gemm {
                match to
                    .gemm
                    .iter_mut()
                    .find(|o| o.precision.eq_ignore_ascii_case(&g.precision))
                {
                    Some(o) => *o = g.clone(),
                    None => to.gemm.push(g.clone()),
                }
            }
        }
    }
}

/// Why `--profile-out` will not merge into an existing file (which it then leaves as it is).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    #[error("--profile-out {file}: the file exists and is not a device profile ({why}); it was left as it is: give another path, or delete {file}")]
    NotAProfile { file: String, why: String },
    #[error("--profile-out {file}: the file is an `{found}`, not an `{PROFILE_SCHEMA}` profile this version can merge into; it was left as it is: give another path, or delete {file} and rerun its benchmarks")]
    Schema { file: String, found: String },
    #[error("--profile-out {file}: the profile's {what} is `{theirs}`, this benchmark's is `{ours}`; a profile merges benchmarks of one device on one host only, so it was left as it is: give another path, or delete {file} to start a new profile")]
    Other {
        file: String,
        what: &'static str,
        theirs: String,
        ours: String,
    },
}

/// What a merge made, and what it kept of the file, for the message on stderr.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub profile: DeviceProfile,
    /// The benchmark merged in (`bench memory`).
    pub bench: String,
    /// The file's figures kept, by the benchmark that measured them: ("bench gemm",
    /// ["GEMM curve (fp32)", "compute power"]).
    pub kept: Vec<(String, Vec<String>)>,
    /// The file's figures the new benchmark measured again.
    pub replaced: Vec<String>,
}

impl Merged {
    /// "merged bench memory into cpu.json (kept: GEMM curve (fp32), compute power from bench
    /// gemm; replaced: idle power)".
    pub fn summary(&self, file: &str) -> String {
        let mut parts = Vec::new();
        if !self.kept.is_empty() {
            let kept: Vec<String> = self
                .kept
                .iter()
                .map(|(bench, figs)| format!("{} from {bench}", figs.join(", ")))
                .collect();
            parts.push(format!("kept: {}", kept.join("; ")));
        }
        if !self.replaced.is_empty() {
            parts.push(format!("replaced: {}", self.replaced.join(", ")));
        }
        let mut s = format!("merged {} into {file}", self.bench);
        if !parts.is_empty() {
            s.push_str(&format!(" ({})", parts.join("; ")));
        }
        s
    }
}

/// `figures` in words: each figure once, the GEMM curve with its precisions.
fn said(figures: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let precisions: Vec<&str> = figures
        .iter()
        .filter_map(|k| k.strip_prefix("gemm "))
        .collect();
    for f in Figure::ALL {
        if f == Figure::Gemm {
            if !precisions.is_empty() {
                out.push(format!("{} ({})", f.said(), precisions.join(", ")));
            }
        } else if figures.iter().any(|k| Figure::of_key(k) == Some(f)) {
            out.push(f.said().to_string());
        }
    }
    // A name this version does not know (a newer writer's) is said as it is.
    out.extend(
        figures
            .iter()
            .filter(|k| Figure::of_key(k).is_none())
            .cloned(),
    );
    out
}

/// Read the existing file `file` (its text) as a profile to merge into: JSON, of schema
/// `amdahl.device-profile/1`, with every measured figure a positive number.
pub fn parse_existing(text: &str, file: &str) -> Result<DeviceProfile, MergeError> {
    let not = |why: String| MergeError::NotAProfile {
        file: file.into(),
        why,
    };
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| not(format!("not JSON: {e}")))?;
    let Some(schema) = v.get("schema").and_then(serde_json::Value::as_str) else {
        return Err(not("no `schema` field".into()));
    };
    if schema != PROFILE_SCHEMA {
        return Err(MergeError::Schema {
            file: file.into(),
            found: schema.into(),
        });
    }
    let p: DeviceProfile = serde_json::from_value(v).map_err(|e| not(e.to_string()))?;
    p.check(file).map_err(|e| match e {
        ProfileError::Value { field, value, .. } => {
            not(format!("{field} = {value} is not a positive number"))
        }
        e => not(e.to_string()),
    })?;
    Ok(p)
}

impl DeviceProfile {
    /// The profile as one benchmark run, for a profile written before `benchmarks` was kept:
    /// the benchmark guessed from what it holds, its date the profile's.
    pub fn as_one_run(&self) -> BenchmarkRun {
        let bench = if self.kind == "gpu" {
            "bench gpu"
        } else if !self.gemm.is_empty() {
            "bench gemm"
        } else if self.memory_bandwidth.is_some() {
            "bench memory"
        } else {
            "bench"
        };
        BenchmarkRun {
            bench: bench.into(),
            measured_at: self.measured_at.clone(),
            amdahl_version: self.amdahl_version.clone(),
            debug_build: self.debug_build,
            threads: self.threads,
            figures: self.measured_figures(),
        }
    }

    /// The `benchmarks[].figures` entries of every figure the profile holds.
    pub fn measured_figures(&self) -> Vec<String> {
        Figure::ALL.iter().flat_map(|f| f.keys_in(self)).collect()
    }

    /// Refuse to merge a benchmark of `kind` `device` (when known yet) on `host`, of catalog
    /// device `system`, into this profile (read from `file`) unless it is of the same device:
    /// the same kind, host and device name, and the same catalog device where both name one.
    pub fn check_same(
        &self,
        file: &str,
        kind: &str,
        host: &str,
        device: Option<&str>,
        system: Option<&str>,
    ) -> Result<(), MergeError> {
        if self.schema != PROFILE_SCHEMA {
            return Err(MergeError::Schema {
                file: file.into(),
                found: self.schema.clone(),
            });
        }
        let other = |what: &'static str, theirs: &str, ours: &str| {
            Err(MergeError::Other {
                file: file.into(),
                what,
                theirs: theirs.into(),
                ours: ours.into(),
            })
        };
        if self.kind != kind {
            return other("kind", &self.kind, kind);
        }
        if self.host != host {
            return other("host", &self.host, host);
        }
        if let Some(d) = device.filter(|d| *d != self.device) {
            return other("device", &self.device, d);
        }
        if let (Some(theirs), Some(ours)) = (&self.system, system) {
            if !theirs.eq_ignore_ascii_case(ours) {
                return other("catalog device (--profile-system)", theirs, ours);
            }
        }
        Ok(())
    }

    /// Merge `new`, the profile of one benchmark that ran the loads of `covered`, into this
    /// profile, read from `file` (module docs). Refused, with nothing changed, when the two are
    /// not of the same device.
    pub fn merge(
        &self,
        new: DeviceProfile,
        covered: &[Figure],
        file: &str,
    ) -> Result<Merged, MergeError> {
        self.check_same(
            file,
            &new.kind,
            &new.host,
            Some(&new.device),
            new.system.as_deref(),
        )?;
        let mut new_run = new.benchmarks.last().cloned().unwrap_or_else(|| {
            let mut r = new.as_one_run();
            r.bench = "bench".into();
            r
        });
        new_run.figures = new.measured_figures();
        let mut runs = if self.benchmarks.is_empty() {
            vec![self.as_one_run()]
        } else {
            self.benchmarks.clone()
        };
        let mut m = self.clone();
        let replaced = lay_figures(self, &new, covered, &mut runs, &mut m);
        m.power.method = power_method(self, &new, covered);
        runs.retain(|r| !r.figures.is_empty());
        let kept = runs
            .iter()
            .map(|r| (r.bench.clone(), said(&r.figures)))
            .collect();
        if !new_run.figures.is_empty() {
            runs.push(new_run.clone());
        }
        m.measured_at = runs
            .iter()
            .map(|r| r.measured_at.clone())
            .max()
            .unwrap_or_else(|| new.measured_at.clone());
        m.debug_build = if runs.is_empty() {
            new.debug_build
        } else {
            runs.iter().any(|r| r.debug_build)
        };
        m.benchmarks = runs;
        m.amdahl_version = new.amdahl_version.clone();
        m.threads = new.threads.or(self.threads);
        m.driver = new.driver.clone().or_else(|| self.driver.clone());
        m.system = new.system.clone().or_else(|| self.system.clone());
        Ok(Merged {
            profile: m,
            bench: new_run.bench,
            kept,
            replaced,
        })
    }
}

/// Lay over `m` (a copy of `old`) each figure `new` measured, dropping it from the older `runs`,
/// and give `m` the notes of whichever profile each figure comes from (module docs); the
/// figures measured again, in words.
fn lay_figures(
    old: &DeviceProfile,
    new: &DeviceProfile,
    covered: &[Figure],
    runs: &mut [BenchmarkRun],
    m: &mut DeviceProfile,
) -> Vec<String> {
    let mut notes = Vec::new();
    let mut replaced = Vec::new();
    for f in Figure::ALL {
        let (old_has, new_has) = (f.measured_in(old), f.measured_in(new));
        if new_has {
            let keys = f.keys_in(new);
            let mut again = Vec::new();
            for r in runs.iter_mut() {
                again.extend(r.figures.iter().filter(|k| keys.contains(k)).cloned());
                r.figures.retain(|k| !keys.contains(k));
            }
            if again.is_empty() && old_has && f != Figure::Gemm {
                again.push(f.key().to_string());
            }
            replaced.extend(said(&again));
            f.copy(new, m);
        }
        let from = if new_has || (covered.contains(&f) && !old_has) {
            new
        } else {
            old
        };
        notes.extend(
            from.notes
                .iter()
                .filter(|n| Figure::of_note(n) == Some(f))
                .cloned(),
        );
    }
    // Notes on no figure: the file's, then the new ones it does not hold.
    for n in old.notes.iter().chain(&new.notes) {
        if Figure::of_note(n).is_none() && !notes.contains(n) {
            notes.push(n.clone());
        }
    }
    m.notes = notes;
    replaced
}

/// The counters the merged power figures were read by: both profiles' where each keeps a power
/// figure, else the one that does, else (none measured) the new one's reason when it ran a
/// power load.
fn power_method(old: &DeviceProfile, new: &DeviceProfile, covered: &[Figure]) -> String {
    let power = [Figure::IdleW, Figure::ComputeW, Figure::MemoryW];
    let old_kept = power
        .iter()
        .any(|f| f.measured_in(old) && !f.measured_in(new));
    let new_has = power.iter().any(|f| f.measured_in(new));
    match (old_kept, new_has) {
        (true, true) => {
            let mut sources: Vec<&str> = Vec::new();
            for s in new
                .power
                .method
                .split("; ")
                .chain(old.power.method.split("; "))
            {
                if !sources.contains(&s) {
                    sources.push(s);
                }
            }
            sources.join("; ")
        }
        (true, false) => old.power.method.clone(),
        (false, true) => new.power.method.clone(),
        (false, false) if power.iter().any(|f| covered.contains(f)) => new.power.method.clone(),
        (false, false) => old.power.method.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{GemmPoint, GemmProfile, PowerProfile};

    const RAPL: &str = "intel-rapl:0 package-0 (counter)";

    fn run(bench: &str, at: &str, p: &DeviceProfile) -> BenchmarkRun {
        BenchmarkRun {
            bench: bench.into(),
            ..p.as_one_run()
        }
        .with_date(at)
    }

    impl BenchmarkRun {
        fn with_date(mut self, at: &str) -> Self {
            self.measured_at = at.into();
            self
        }
    }

    fn base(at: &str) -> DeviceProfile {
        DeviceProfile {
            schema: PROFILE_SCHEMA.into(),
            amdahl_version: "0.1.0".into(),
            kind: "cpu".into(),
            device: "AMD EPYC 7763 64-Core Processor".into(),
            system: Some("EPYC 7763".into()),
            host: "node1".into(),
            driver: None,
            measured_at: at.into(),
            debug_build: false,
            threads: Some(2),
            gemm: Vec::new(),
            memory_bandwidth: None,
            host_to_device: None,
            device_to_host: None,
            power: PowerProfile::default(),
            notes: Vec::new(),
            benchmarks: Vec::new(),
        }
    }

    fn gemm(precision: &str, rate: f64) -> GemmProfile {
        GemmProfile {
            precision: precision.into(),
            points: vec![GemmPoint {
                n: 64,
                flops: 2.0 * 64f64.powi(3),
                seconds: 2.0 * 64f64.powi(3) / rate,
            }],
            sustained_flops_per_s: rate,
            latency_s: 0.0,
        }
    }

    /// As `bench gemm` writes it: the curves, idle and compute power from RAPL.
    fn gemm_profile(at: &str, rate: f64, idle: f64) -> DeviceProfile {
        let mut p = base(at);
        p.gemm = vec![gemm("fp32", rate), gemm("fp64", rate / 2.0)];
        p.power = PowerProfile {
            idle_w: Some(idle),
            compute_w: Some(90.0),
            memory_w: None,
            method: RAPL.into(),
        };
        p.notes = vec![
            format!("power.idle_w: {idle:.1} W during idle over 2.00 s"),
            "power.compute_w: 90.0 W during fp32 GEMM n=64 on 2 threads over 0.50 s".into(),
            "power.memory_w: this benchmark runs no such load; profile with `bench memory` (or \
             `bench gpu`) for it"
                .into(),
            "memory bandwidth: not measured by `bench gemm`; profile with `bench memory`".into(),
        ];
        p.benchmarks = vec![run("bench gemm", at, &p)];
        p
    }

    /// As `bench memory` writes it on a machine without a readable counter.
    fn memory_profile(at: &str, bw: f64) -> DeviceProfile {
        let mut p = base(at);
        p.memory_bandwidth = Some(bw);
        let why = "estimate only: CPU time × TDP share";
        p.power.method = format!("not measured: {why}");
        p.notes = vec![
            format!("power.idle_w: not measured: {why}"),
            "power.compute_w: this benchmark runs no such load; profile with `bench gemm` (or \
             `bench gpu`) for it"
                .into(),
            format!("power.memory_w: not measured: {why}"),
            "GEMM: not measured by `bench memory`; profile with `bench gemm` too".into(),
        ];
        p.benchmarks = vec![run("bench memory", at, &p)];
        p
    }

    const GEMM: &[Figure] = &[Figure::IdleW, Figure::ComputeW, Figure::Gemm];
    const MEMORY: &[Figure] = &[Figure::IdleW, Figure::MemoryW, Figure::MemoryBandwidth];

    #[test]
    fn a_gemm_profile_and_a_memory_profile_make_one_with_both() {
        let g = gemm_profile("2026-01-01T00:00:00Z", 5e10, 30.0);
        let m = memory_profile("2026-01-02T00:00:00Z", 2e10);
        let out = g.merge(m, MEMORY, "cpu.json").unwrap();
        let p = &out.profile;
        p.check("cpu.json").unwrap();
        // Both measurements, and the idle power the memory run could not read kept.
        assert_eq!(p.gemm.len(), 2);
        assert_eq!(p.memory_bandwidth, Some(2e10));
        assert_eq!(
            (p.power.idle_w, p.power.compute_w, p.power.memory_w),
            (Some(30.0), Some(90.0), None)
        );
        assert_eq!(p.power.method, RAPL);
        let notes = p.notes.join("\n");
        // What the memory run measured or tried replaces "profile with `bench memory`".
        assert!(!notes.contains("profile with `bench memory`"), "{notes}");
        assert!(!notes.contains("GEMM: not measured"), "{notes}");
        assert!(!notes.contains("runs no such load"), "{notes}");
        assert!(
            notes.contains("power.idle_w: 30.0 W during idle"),
            "{notes}"
        );
        assert!(!notes.contains("power.idle_w: not measured"), "{notes}");
        assert!(notes.contains("power.compute_w: 90.0 W during fp32 GEMM"));
        assert!(
            notes.contains("power.memory_w: not measured: estimate only"),
            "{notes}"
        );
        assert_eq!(p.notes.len(), 3, "{notes}");
        // Each run with what it measured and when; the profile's date is the newest.
        let runs: Vec<(&str, &str, Vec<&str>)> = p
            .benchmarks
            .iter()
            .map(|b| {
                (
                    b.bench.as_str(),
                    b.measured_at.as_str(),
                    b.figures.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            runs,
            [
                (
                    "bench gemm",
                    "2026-01-01T00:00:00Z",
                    vec!["power.idle_w", "power.compute_w", "gemm fp32", "gemm fp64"]
                ),
                (
                    "bench memory",
                    "2026-01-02T00:00:00Z",
                    vec!["memory_bandwidth"]
                ),
            ]
        );
        assert_eq!(p.measured_at, "2026-01-02T00:00:00Z");
        assert_eq!(
            p.provenance("EPYC 7763", "cpu.json"),
            "EPYC 7763, profiled on node1: bench gemm at 2026-01-01T00:00:00Z, bench memory at \
             2026-01-02T00:00:00Z (cpu.json)"
        );
        assert_eq!(
            out.summary("cpu.json"),
            "merged bench memory into cpu.json (kept: idle power, compute power, GEMM curve \
             (fp32, fp64) from bench gemm)"
        );

        // The other way round: the GEMM run's figures join the memory profile, and its notes on
        // the GEMM and on the compute load replace the memory run's "profile with bench gemm".
        let g = gemm_profile("2026-01-03T00:00:00Z", 5e10, 30.0);
        let m = memory_profile("2026-01-02T00:00:00Z", 2e10);
        let out = m.merge(g, GEMM, "cpu.json").unwrap();
        let p = &out.profile;
        assert_eq!(p.memory_bandwidth, Some(2e10));
        assert_eq!(p.gemm.len(), 2);
        assert_eq!(p.power.idle_w, Some(30.0));
        let notes = p.notes.join("\n");
        assert!(!notes.contains("GEMM: not measured"), "{notes}");
        assert!(!notes.contains("profile with `bench"), "{notes}");
        assert!(!notes.contains("power.idle_w: not measured"), "{notes}");
        assert!(notes.contains("power.memory_w: not measured: estimate only"));
        assert_eq!(p.measured_at, "2026-01-03T00:00:00Z");
        assert_eq!(p.power.method, RAPL);
        assert_eq!(
            out.summary("cpu.json"),
            "merged bench gemm into cpu.json (kept: memory bandwidth from bench memory)"
        );
    }

    #[test]
    fn a_figure_measured_twice_is_the_newer_one() {
        let old = gemm_profile("2026-01-01T00:00:00Z", 5e10, 30.0);
        // The newer run measured fp32 only, and an idle power of its own.
        let mut new = gemm_profile("2026-02-01T00:00:00Z", 6e10, 25.0);
        new.gemm.retain(|g| g.precision == "fp32");
        new.threads = Some(1);
        new.benchmarks = vec![run("bench gemm", "2026-02-01T00:00:00Z", &new)];
        let out = old.merge(new, GEMM, "cpu.json").unwrap();
        let p = &out.profile;
        assert_eq!(p.gemm_of("fp32").unwrap().sustained_flops_per_s, 6e10);
        assert_eq!(p.gemm_of("fp64").unwrap().sustained_flops_per_s, 2.5e10);
        assert_eq!(p.power.idle_w, Some(25.0));
        assert_eq!(p.threads, Some(1));
        let notes = p.notes.join("\n");
        assert!(notes.contains("power.idle_w: 25.0 W"), "{notes}");
        assert!(!notes.contains("power.idle_w: 30.0 W"), "{notes}");
        assert_eq!(p.benchmarks.len(), 2);
        assert_eq!(p.benchmarks[0].figures, ["gemm fp64"]);
        assert_eq!(p.benchmarks[0].threads, Some(2));
        assert_eq!(
            p.benchmarks[1].figures,
            ["power.idle_w", "power.compute_w", "gemm fp32"]
        );
        assert_eq!(
            out.summary("cpu.json"),
            "merged bench gemm into cpu.json (kept: GEMM curve (fp64) from bench gemm; \
             replaced: idle power, compute power, GEMM curve (fp32))"
        );

        // Everything measured again: the older run is gone from the profile.
        let again = gemm_profile("2026-03-01T00:00:00Z", 7e10, 20.0);
        let p = p.merge(again, GEMM, "cpu.json").unwrap().profile;
        assert_eq!(p.benchmarks.len(), 1);
        assert_eq!(p.benchmarks[0].measured_at, "2026-03-01T00:00:00Z");
        assert_eq!(p.gemm_of("fp32").unwrap().sustained_flops_per_s, 7e10);
        assert_eq!(p.provenance("X", "f").matches(" at ").count(), 1);

        // A newer run that could not read a figure keeps the older reading, and its notes.
        let mut blind = memory_profile("2026-04-01T00:00:00Z", 3e10);
        blind.memory_bandwidth = None;
        blind.benchmarks = vec![run("bench memory", "2026-04-01T00:00:00Z", &blind)];
        let p2 = p.merge(blind, MEMORY, "cpu.json").unwrap().profile;
        assert_eq!(p2.power.idle_w, Some(20.0));
        assert!(p2.notes.join("\n").contains("power.idle_w: 20.0 W"));
        assert_eq!(p2.benchmarks, p.benchmarks);
    }

    #[test]
    fn a_profile_of_another_device_is_refused() {
        let old = gemm_profile("2026-01-01T00:00:00Z", 5e10, 30.0);
        let m = memory_profile("2026-01-02T00:00:00Z", 2e10);
        let refused = |f: &dyn Fn(&mut DeviceProfile)| {
            let mut other = m.clone();
            f(&mut other);
            old.merge(other, MEMORY, "cpu.json").unwrap_err()
        };
        let e = refused(&|p| p.host = "node2".into());
        assert_eq!(
            e.to_string(),
            "--profile-out cpu.json: the profile's host is `node1`, this benchmark's is `node2`; \
             a profile merges benchmarks of one device on one host only, so it was left as it \
             is: give another path, or delete cpu.json to start a new profile"
        );
        assert!(matches!(
            refused(&|p| p.device = "Intel Xeon".into()),
            MergeError::Other { what: "device", .. }
        ));
        assert!(matches!(
            refused(&|p| p.kind = "gpu".into()),
            MergeError::Other { what: "kind", .. }
        ));
        let e = refused(&|p| p.system = Some("EPYC 9654".into()));
        assert!(e.to_string().contains("--profile-system"), "{e}");
        // A benchmark that names no catalog device merges into one that does, and keeps it.
        let mut unnamed = m.clone();
        unnamed.system = None;
        let p = old.merge(unnamed, MEMORY, "cpu.json").unwrap().profile;
        assert_eq!(p.system.as_deref(), Some("EPYC 7763"));
    }

    #[test]
    fn only_a_profile_of_this_schema_is_read_for_merging() {
        let p = gemm_profile("2026-01-01T00:00:00Z", 5e10, 30.0);
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(parse_existing(&text, "cpu.json").unwrap(), p);
        let not = |text: &str| parse_existing(text, "cpu.json").unwrap_err();
        assert!(matches!(not("hello"), MergeError::NotAProfile { .. }));
        assert!(not("").to_string().contains("not JSON"));
        assert!(not("{\"a\": 1}").to_string().contains("no `schema` field"));
        let gemm_report = not("{\"schema\": \"amdahl.bench.gemm/1\"}");
        assert_eq!(
            gemm_report.to_string(),
            "--profile-out cpu.json: the file is an `amdahl.bench.gemm/1`, not an \
             `amdahl.device-profile/1` profile this version can merge into; it was left as it \
             is: give another path, or delete cpu.json and rerun its benchmarks"
        );
        let v2 = text.replace(PROFILE_SCHEMA, "amdahl.device-profile/2");
        assert!(
            matches!(not(&v2), MergeError::Schema { found, .. } if found == "amdahl.device-profile/2")
        );
        let damaged = text.replace("\"idle_w\":30.0", "\"idle_w\":-1.0");
        assert_ne!(damaged, text);
        assert!(not(&damaged).to_string().contains("power.idle_w = -1"));
        assert!(matches!(
            not("{\"schema\": \"amdahl.device-profile/1\"}"),
            MergeError::NotAProfile { .. }
        ));
    }

    #[test]
    fn a_profile_written_before_merging_counts_as_one_run() {
        let mut old = gemm_profile("2026-01-01T00:00:00Z", 5e10, 30.0);
        old.benchmarks.clear();
        old.debug_build = true;
        let out = old
            .merge(
                memory_profile("2026-01-02T00:00:00Z", 2e10),
                MEMORY,
                "cpu.json",
            )
            .unwrap();
        let p = &out.profile;
        assert_eq!(p.benchmarks.len(), 2);
        assert_eq!(p.benchmarks[0].bench, "bench gemm");
        assert_eq!(p.benchmarks[0].measured_at, "2026-01-01T00:00:00Z");
        assert!(p.benchmarks[0].debug_build && !p.benchmarks[1].debug_build);
        // Its GEMM curve was measured by a debug build: the profile still says so.
        assert!(p.debug_build);
    }
}
