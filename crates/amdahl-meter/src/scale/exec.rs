//! The two executors: the real one (spawn, time and meter the command) and the scripted mock.

use super::{Executor, Job, Outcome};
use crate::meter::{DeviceEnergy, Meter};
use crate::source::{DeviceKind, Method};
use crate::{runner, sampler, MeterError};
use amdahl_model::units::{Joules, Seconds};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Lines of the command's stderr kept for a failure report, and the longest line kept.
const TAIL_LINES: usize = 20;
const TAIL_LINE_CHARS: usize = 400;
/// How long to wait for stderr to close after the command exited: a descendant left running in
/// the background may hold it open for ever.
const TAIL_GRACE: Duration = Duration::from_millis(500);

/// Spawns the command, times it from spawn to exit (wall clock, as hyperfine) and meters the
/// energy of the same window with the [`Meter`] and a background [`sampler`]. A launcher
/// (`srun`, `mpirun`, `torchrun`) is just the command: it is timed and metered as a whole.
pub struct MeterExecutor {
    meter: Option<Meter>,
    interval: Duration,
    quiet: bool,
    reap_orphans: bool,
}

impl MeterExecutor {
    /// `quiet`: discard the command's stdout and capture its stderr (kept for failure reports);
    /// otherwise both pass through. `reap_orphans`: see [`runner::wait`] (true only in a process
    /// with no other children, like the `amdahl` binary).
    pub fn new(meter: Meter, interval: Duration, quiet: bool, reap_orphans: bool) -> Self {
        MeterExecutor {
            meter: Some(meter),
            interval,
            quiet,
            reap_orphans,
        }
    }
}

/// The last [`TAIL_LINES`] lines of a stream, read to its end.
fn tail(stream: impl Read) -> String {
    let mut r = BufReader::new(stream);
    let mut lines: VecDeque<String> = VecDeque::new();
    let mut buf = Vec::new();
    while matches!(r.read_until(b'\n', &mut buf), Ok(k) if k > 0) {
        let line: String = String::from_utf8_lossy(&buf)
            .trim_end()
            .chars()
            .take(TAIL_LINE_CHARS)
            .collect();
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
        buf.clear();
    }
    lines.into_iter().collect::<Vec<_>>().join("\n")
}

impl Executor for MeterExecutor {
    fn execute(&mut self, job: &Job) -> Result<Outcome, MeterError> {
        let mut meter = self.meter.take().ok_or(MeterError::SamplerPanicked)?;
        meter.reset();
        let sampler = sampler::start(meter, self.interval, Box::new(|_, _| {}));
        let t0 = Instant::now();
        let ran = runner::spawn_with(&job.argv, &job.env, self.quiet).and_then(|mut child| {
            // Captured only when quiet; with --show-output there is no pipe and nothing to wait for.
            let rx = child.stderr.take().map(|err| {
                let (tx, rx) = mpsc::channel();
                std::thread::spawn(move || tx.send(tail(err)));
                rx
            });
            let finished = runner::wait(&mut child, self.reap_orphans)?;
            let time = Seconds(t0.elapsed().as_secs_f64());
            let tail = rx.and_then(|r| r.recv_timeout(TAIL_GRACE).ok());
            Ok((finished, time, tail.unwrap_or_default()))
        });
        let meter = sampler.stop()?;
        let devices = meter.energies();
        self.meter = Some(meter);
        let (finished, time, stderr_tail) = ran?;
        let (mut exit_code, mut signal) = (finished.exit_code, finished.signal);
        // A command that survives amdahl's SIGINT/SIGTERM with status 0 still ends the sweep.
        if let (0, Some(sig)) = (exit_code, runner::interrupted()) {
            (exit_code, signal) = (128 + sig, Some(sig));
        }
        Ok(Outcome {
            time,
            devices,
            exit_code,
            signal,
            stderr_tail,
        })
    }
}

type Script = Box<dyn FnMut(&Job, u32) -> Result<Outcome, MeterError>>;

/// Scripted outcomes for deterministic tests: the script gets the job and the 0-based index of
/// the call at that N (warm-ups included). Every job seen is kept in `jobs`.
pub struct MockExecutor {
    script: Script,
    calls: HashMap<u64, u32>,
    pub jobs: Vec<Job>,
}

impl MockExecutor {
    pub fn new(script: impl FnMut(&Job, u32) -> Result<Outcome, MeterError> + 'static) -> Self {
        MockExecutor {
            script: Box::new(script),
            calls: HashMap::new(),
            jobs: Vec::new(),
        }
    }

    /// A successful run of `time_s` seconds that used `energy_j` joules on one counter device.
    pub fn ok(time_s: f64, energy_j: f64) -> Outcome {
        Outcome {
            time: Seconds(time_s),
            devices: vec![DeviceEnergy {
                id: "mock:0".into(),
                kind: DeviceKind::CpuPackage,
                name: "mock package".into(),
                method: Method::Counter,
                energy_j: Joules(energy_j),
                note: None,
                rejected_steps: 0,
            }],
            exit_code: 0,
            signal: None,
            stderr_tail: String::new(),
        }
    }
}

impl Executor for MockExecutor {
    fn execute(&mut self, job: &Job) -> Result<Outcome, MeterError> {
        let k = self.calls.entry(job.n).or_insert(0);
        let idx = *k;
        *k += 1;
        self.jobs.push(job.clone());
        (self.script)(job, idx)
    }
}
