//! A measurement in progress around some work: `amdahl run` around its command, the Python
//! tracker (`crates/amdahl-py`) around a block of code in its own process. Everything that can
//! fail before the work starts (the output paths) fails in [`Session::start`]; from then on
//! every [`RecordSink`] gets the partial record after every sample, and [`Session::finish`]
//! gives them the final one.
//!
//! The session prints nothing: what the user should read (warnings, notes) goes to the
//! caller's [`Notify`] callback.

use crate::cluster::{self, Role};
use crate::estimate::{self, ProcessProbe};
use crate::meter::Meter;
use crate::progress::{self, Work};
use crate::record::{self, Host, Intensity, MeasurementScope, RunContext, RunRecord, RunState};
use crate::sink::{RecordSink, SinkError, Start};
use crate::utilization;
use crate::{procfs, sampler, sensors, MeterError, Sample};
use amdahl_model::carbon::kg_per_joule;
use amdahl_model::units::{Bytes, Seconds};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// What the user should read, as the session goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// Something that affects the figures or an output (an unreadable sensor, a failed write).
    Warning(String),
    /// Something the user must know that is not wrong (a recovered CodeCarbon row).
    Note(String),
    /// Where the session is (measuring the idle baseline); quiet front ends drop it.
    Progress(String),
}

/// Where the session's notices go (stderr in the CLI).
pub type Notify = Arc<dyn Fn(Notice) + Send + Sync>;

/// What a session measures and how, resolved by the front end from its flags.
pub struct Settings {
    pub project: Option<String>,
    /// What the record names as the command.
    pub command: Vec<String>,
    pub scope: MeasurementScope,
    pub interval: Duration,
    pub pue: f64,
    pub intensity: Intensity,
    /// Measure idle power for this long before the work (machine scope).
    pub baseline: Option<Duration>,
    /// The sensors to discover (for the scope's target); none are for a reference rank.
    pub sensors: sensors::Options,
    /// Which CPU power the estimate charges, kept among the warnings when the CPU is estimated.
    pub cpu_tdp_note: Option<String>,
    /// A file the work appends its step count to.
    pub progress_file: Option<PathBuf>,
    /// Steps in the whole run, for the projection.
    pub total_steps: Option<u64>,
    /// The interpreter's version when the Python tracker runs the session.
    pub python_version: Option<String>,
}

/// A session that failed: the meter's error or an output's.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Meter(#[from] MeterError),
    #[error(transparent)]
    Output(#[from] SinkError),
}

/// How the measured work ended, as far as the caller knows it.
#[derive(Debug, Default)]
pub struct Ending {
    pub exit_code: Option<i32>,
    pub child_signal: Option<i32>,
    pub partial: bool,
    pub interrupted_by: Option<String>,
    pub not_started: Option<String>,
    /// CPU time of the work in machine scope (process scope charges the probe's figure).
    pub cpu_time: Option<Seconds>,
    pub max_rss: Option<Bytes>,
    pub warnings: Vec<String>,
    /// Whether the work ran at all: one that never started has no share and no CodeCarbon row.
    pub ran: bool,
}

type Sinks = Arc<Mutex<Vec<Box<dyn RecordSink>>>>;

fn lock(sinks: &Sinks) -> MutexGuard<'_, Vec<Box<dyn RecordSink>>> {
    sinks.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct Session {
    ctx: RunContext,
    sinks: Sinks,
    sampler: sampler::Sampler,
    probe: Arc<ProcessProbe>,
    warnings: Vec<String>,
    busy0: Option<Seconds>,
    tally: Tally,
    usage: Usage,
}

/// The machine's utilisation, sampled with the energy (CodeCarbon's utilisation columns).
type Usage = Arc<Mutex<utilization::Tally>>;

fn usage_now(u: &Usage) -> Option<utilization::Utilization> {
    u.lock().unwrap_or_else(|e| e.into_inner()).utilization()
}

impl Session {
    /// Find the sensors, open every sink (in order; the first that fails ends the start),
    /// measure the baseline if asked, and start sampling. `probe` follows the processes the
    /// scope charges (`amdahl run`: the command's tree; the tracker: its own process too);
    /// `work` counts units for projection.
    pub fn start(
        settings: Settings,
        sinks: Vec<Box<dyn RecordSink>>,
        probe: Arc<ProcessProbe>,
        work: Arc<Work>,
        notify: Notify,
    ) -> Result<Session, SessionError> {
        let mut ctx = RunContext {
            run_id: record::new_run_id(),
            project: settings.project,
            command: settings.command,
            started_unix_s: record::unix_now(),
            scope: settings.scope,
            interval: Seconds(settings.interval.as_secs_f64()),
            host: Host::this_machine(),
            cluster: cluster::detect(|k| std::env::var(k).ok()),
            pue: settings.pue,
            intensity: settings.intensity,
            baseline: None,
            python_version: settings.python_version,
        };
        // A reference rank measures nothing: local rank 0 measures the node.
        let (sources, mut warnings) = if ctx.cluster.role == Role::Reference {
            (Vec::new(), Vec::new())
        } else {
            let d = sensors::discover(settings.sensors);
            (d.sources, d.warnings)
        };
        // Which catalog row (or the fallback) the CPU estimate uses: said, and kept in the record.
        if let Some(note) = settings
            .cpu_tdp_note
            .filter(|_| sensors::estimates_cpu(&sources))
        {
            warnings.insert(0, note);
        }
        for w in &warnings {
            notify(Notice::Warning(w.clone()));
        }
        let mut meter = Meter::new(sources);
        let mut sinks = sinks;
        let first = record::build(
            &ctx,
            &meter.energies(),
            in_progress(Seconds::ZERO, &warnings, None),
        );
        let devices = meter.device_infos();
        let start = Start {
            record: &first,
            devices: &devices,
        };
        for sink in &mut sinks {
            for note in sink.open(&start)? {
                notify(Notice::Note(note));
            }
        }
        if let Some(d) = settings
            .baseline
            .filter(|_| ctx.cluster.role == Role::Measured)
        {
            notify(Notice::Progress(format!(
                "measuring idle power for {} s before starting",
                d.as_secs_f64()
            )));
            ctx.baseline = Some(meter.measure_idle(d));
        }
        if let Some(t) = settings.total_steps {
            work.steps.set_total(t);
        }
        let tally = Tally {
            work,
            progress_file: settings.progress_file,
            kg_per_joule: kg_per_joule(ctx.pue, ctx.intensity.g_per_kwh),
        };
        // The work starts now: the baseline phase is not part of the run's window.
        ctx.started_unix_s = record::unix_now();
        let busy0 = procfs::machine_busy();
        let sinks: Sinks = Arc::new(Mutex::new(sinks));
        let usage = Usage::default();
        let on_sample = on_sample(
            &ctx,
            &sinks,
            &warnings,
            (tally.clone(), Arc::clone(&usage)),
            notify,
        );
        let sampler = sampler::start(meter, settings.interval, on_sample);
        Ok(Session {
            ctx,
            sinks,
            sampler,
            probe,
            warnings,
            busy0,
            tally,
            usage,
        })
    }

    pub fn context(&self) -> &RunContext {
        &self.ctx
    }

    /// kg CO2e per joule of this run (PUE × grid intensity), for projections.
    pub fn kg_per_joule(&self) -> f64 {
        self.tally.kg_per_joule
    }

    /// Stop sampling, and give every sink the final record (every sink is attempted before the
    /// first error is returned: a failing `-o` must not cost the CodeCarbon row, nor the
    /// reverse).
    pub fn finish(self, end: Ending) -> Result<RunRecord, SessionError> {
        let meter = self.sampler.stop()?;
        let busy1 = procfs::machine_busy();
        // Process scope: the work's CPU time over the machine's busy CPU time in the same
        // window. The probe's figure is the larger of rusage and the live /proc scans (which
        // also saw orphans still running when the command exited).
        let share = match (self.ctx.scope, end.ran, self.busy0, busy1) {
            (MeasurementScope::Process, true, Some(a), Some(b)) => {
                Some(estimate::cpu_share(self.probe.cpu_seconds(), (b - a).get()))
            }
            (MeasurementScope::Process, ..) => Some(0.0),
            (MeasurementScope::Machine, ..) => None,
        };
        let mut warnings = self.warnings;
        warnings.extend(end.warnings);
        let mut rec = record::build(
            &self.ctx,
            &meter.energies(),
            RunState {
                duration: meter.elapsed(),
                exit_code: end.exit_code,
                child_signal: end.child_signal,
                partial: end.partial,
                interrupted_by: end.interrupted_by,
                not_started: end.not_started,
                cpu_time: end
                    .ran
                    .then(|| match self.ctx.scope {
                        MeasurementScope::Process => Some(Seconds(self.probe.cpu_seconds())),
                        MeasurementScope::Machine => end.cpu_time,
                    })
                    .flatten(),
                max_rss: end.max_rss,
                share,
                utilization: usage_now(&self.usage),
                warnings,
            },
        );
        self.tally.update(&mut rec);
        let mut first_error = None;
        for sink in lock(&self.sinks).iter_mut() {
            if let Err(e) = sink.finish(&rec, end.ran) {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(rec),
        }
    }
}

fn in_progress(
    duration: Seconds,
    warnings: &[String],
    utilization: Option<utilization::Utilization>,
) -> RunState {
    RunState {
        duration,
        partial: true,
        utilization,
        warnings: warnings.to_vec(),
        ..Default::default()
    }
}

/// What every sample updates besides the meter: the units of work and, from them, the
/// projection the record carries.
#[derive(Clone)]
struct Tally {
    work: Arc<Work>,
    progress_file: Option<PathBuf>,
    /// PUE × g/kWh ÷ 3.6·10⁹: kg CO2e per joule, as the record converts its energy.
    kg_per_joule: f64,
}

impl Tally {
    /// Read the progress file, mark the units at this record's time and energy, and put the
    /// projection into the record.
    fn update(&self, r: &mut RunRecord) {
        if let Some((n, at)) = self
            .progress_file
            .as_deref()
            .and_then(progress::read_progress_file)
        {
            self.work.steps.set(n, at);
        }
        self.work
            .mark(r.duration_s.get(), r.total_energy_j.get(), r.started_unix_s);
        r.projection = self
            .work
            .projection()
            .map(|p| p.with_carbon(self.kg_per_joule));
    }
}

/// Per sample: the partial record to every sink. Write failures are reported once and do not
/// stop the measurement.
fn on_sample(
    ctx: &RunContext,
    sinks: &Sinks,
    warnings: &[String],
    (tally, usage): (Tally, Usage),
    notify: Notify,
) -> sampler::OnSample {
    let (ctx, sinks, warnings) = (ctx.clone(), Arc::clone(sinks), warnings.to_vec());
    let mut warned = false;
    Box::new(move |m: &Meter, s: &Sample| {
        let now = {
            let mut u = usage.lock().unwrap_or_else(|e| e.into_inner());
            u.sample();
            u.utilization()
        };
        let mut r = record::build(&ctx, &m.energies(), in_progress(s.t_s, &warnings, now));
        tally.update(&mut r);
        let mut err = None;
        for sink in lock(&sinks).iter_mut() {
            if let Err(e) = sink.sample(s, &r) {
                err.get_or_insert(e);
            }
        }
        if let (Some(e), false) = (err, warned) {
            notify(Notice::Warning(chain(&e)));
            warned = true;
        }
    })
}

/// An error with its causes, "what: why: why", as the CLI prints a context chain.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::Target;
    use crate::gpu::Visible;
    use crate::rapl;
    use amdahl_model::units::{GramsPerKwh, Watts};

    /// A sink that records what the session asked of it, and can fail at the end.
    struct Recording {
        name: &'static str,
        log: Arc<Mutex<Vec<String>>>,
        fail_finish: bool,
    }

    impl Recording {
        fn push(&self, what: &str) {
            self.log
                .lock()
                .unwrap()
                .push(format!("{} {what}", self.name));
        }
    }

    impl RecordSink for Recording {
        fn open(&mut self, start: &Start<'_>) -> Result<Vec<String>, SinkError> {
            assert!(start.record.partial);
            self.push("open");
            Ok(vec![format!("{} opened", self.name)])
        }
        fn sample(&mut self, _: &Sample, record: &RunRecord) -> Result<(), SinkError> {
            assert!(record.partial);
            self.push("sample");
            Ok(())
        }
        fn finish(&mut self, record: &RunRecord, ran: bool) -> Result<(), SinkError> {
            assert!(ran && !record.partial);
            self.push("finish");
            match self.fail_finish {
                true => Err(SinkError::new(format!("{} failed", self.name))),
                false => Ok(()),
            }
        }
    }

    fn settings(powercap_root: &std::path::Path) -> Settings {
        Settings {
            project: None,
            command: vec!["test".into()],
            scope: MeasurementScope::Machine,
            interval: Duration::from_millis(10),
            pue: 1.5,
            intensity: Intensity {
                g_per_kwh: GramsPerKwh(400.0),
                region: "custom".into(),
                source: "test".into(),
                year: None,
                location: None,
            },
            baseline: None,
            sensors: sensors::Options {
                powercap_root: powercap_root.to_path_buf(),
                reader: rapl::fs_reader(),
                cpu_tdp: Some(Watts(10.0)),
                gpus: false,
                visible: Visible::All,
                hwmon_root: powercap_root.join("no-hwmon"),
                amd_visible: crate::hwmon::AmdVisible::all(),
                amd_smi: false,
                target: Target::Machine,
            },
            cpu_tdp_note: None,
            progress_file: None,
            total_steps: None,
            python_version: None,
        }
    }

    /// Every number in `v` with its path, for the test below.
    fn numbers(v: &serde_json::Value, path: String, out: &mut Vec<(String, f64)>) {
        match v {
            serde_json::Value::Number(n) => out.extend(n.as_f64().map(|x| (path, x))),
            serde_json::Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, x)| numbers(x, format!("{path}[{i}]"), out)),
            serde_json::Value::Object(o) => o
                .iter()
                .for_each(|(k, x)| numbers(x, format!("{path}.{k}"), out)),
            _ => {}
        }
    }

    /// Regression: a command that never started (`amdahl run -- /nonexistent/cmd`) recorded
    /// `-0.0` J, kWh and g CO2e: the total of no devices was an empty f64 sum, which Rust starts
    /// at -0.0. Every energy of such a record is 0.0, its sign bit clear.
    #[test]
    fn a_command_that_never_started_records_zero_energy_not_negative_zero() {
        let dir = tempfile::tempdir().unwrap();
        let session = Session::start(
            settings(dir.path()),
            Vec::new(),
            ProcessProbe::new(),
            Arc::new(Work::default()),
            Arc::new(|_| {}),
        )
        .unwrap();
        let r = session
            .finish(Ending {
                not_started: Some("cannot start `/nonexistent/cmd`: command not found".into()),
                ran: false,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(r.total_energy_j.get(), 0.0);
        for (what, x) in [
            ("total_energy_j", r.total_energy_j.get()),
            ("energy_kwh", r.energy_kwh),
            ("co2e_g", r.co2e_g.get()),
        ] {
            assert!(!x.is_sign_negative(), "{what} is {x:?}");
        }
        let mut all = Vec::new();
        numbers(&serde_json::to_value(&r).unwrap(), String::new(), &mut all);
        let negative_zeros: Vec<_> = all
            .iter()
            .filter(|(_, x)| *x == 0.0 && x.is_sign_negative())
            .collect();
        assert!(negative_zeros.is_empty(), "{negative_zeros:?}");
    }

    /// The final record carries the machine's utilisation sampled during the run (read from
    /// this machine's /proc: RAM in use is above 0 % and below 100 %, CPU within 0–100 %); a
    /// command that never started carries none.
    #[test]
    fn a_measured_session_records_the_machines_utilisation() {
        let dir = tempfile::tempdir().unwrap();
        let start = || {
            Session::start(
                settings(dir.path()),
                Vec::new(),
                ProcessProbe::new(),
                Arc::new(Work::default()),
                Arc::new(|_| {}),
            )
            .unwrap()
        };
        let session = start();
        std::thread::sleep(Duration::from_millis(50));
        let r = session
            .finish(Ending {
                exit_code: Some(0),
                ran: true,
                ..Default::default()
            })
            .unwrap();
        let u = r.utilization.expect("utilisation of a measured run");
        assert!(u.ram_percent > 0.0 && u.ram_percent < 100.0, "{u:?}");
        assert!(u.ram_used_gib > 0.0, "{u:?}");
        assert!((0.0..=100.0).contains(&u.cpu_percent), "{u:?}");
        let never = start()
            .finish(Ending {
                not_started: Some("not found".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(never.utilization, None);
    }

    /// Every sink is opened in order before the work, gets samples, and gets the final record
    /// even when one before it fails there; the first failure is the session's error.
    #[test]
    fn every_sink_gets_the_final_record_even_after_one_fails() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let notices = Arc::new(Mutex::new(Vec::new()));
        let sink = |name, fail_finish| -> Box<dyn RecordSink> {
            Box::new(Recording {
                name,
                log: Arc::clone(&log),
                fail_finish,
            })
        };
        let seen = Arc::clone(&notices);
        let session = Session::start(
            settings(dir.path()),
            vec![sink("a", true), sink("b", false)],
            ProcessProbe::new(),
            Arc::new(Work::default()),
            Arc::new(move |n| seen.lock().unwrap().push(n)),
        )
        .unwrap();
        assert_eq!(session.kg_per_joule(), 1.5 * 400.0 / 3.6e9);
        std::thread::sleep(Duration::from_millis(30));
        let e = session
            .finish(Ending {
                exit_code: Some(0),
                ran: true,
                ..Default::default()
            })
            .unwrap_err();
        assert_eq!(e.to_string(), "a failed");
        let log = log.lock().unwrap();
        assert_eq!(&log[..2], ["a open", "b open"]);
        assert!(log.contains(&"a sample".to_string()));
        assert_eq!(&log[log.len() - 2..], ["a finish", "b finish"]);
        let notices = notices.lock().unwrap();
        assert!(
            notices.contains(&Notice::Note("a opened".into())),
            "{notices:?}"
        );
        assert!(notices.contains(&Notice::Note("b opened".into())));
    }
}
