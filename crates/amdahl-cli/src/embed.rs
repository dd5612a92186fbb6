//! What the Python package (`crates/amdahl-py`) calls. It converts Python arguments into a
//! command line and results back into Python objects; everything in between is the CLI's own
//! code, so a Python call gives the same numbers and the same error messages as the command.
//!
//! - [`call`]: a command run on an argv (`["plan", "--model", …, "--json"]`), its result
//!   returned as data instead of printed (or its stdout, for a command that prints other text).
//! - [`Tracker`]: `amdahl run`'s measurement ([`Session`], `amdahl-meter`'s) around code in this
//!   process instead of a child.

use crate::Outcome;
use amdahl_meter::estimate::ProcessProbe;
use amdahl_meter::procfs;
use amdahl_meter::progress::Work;
use amdahl_meter::record::RunRecord;
use amdahl_meter::session::{Ending, Session};
use amdahl_model::units::{Bytes, Seconds};
use std::process::ExitCode;
use std::sync::Arc;

/// A command that failed: its exit code (1 error, 2 usage) and the message the CLI prints.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    fn error(e: &anyhow::Error) -> Self {
        Failure {
            code: 1,
            message: format!("{e:#}"),
        }
    }
    fn usage(e: &clap::Error) -> Self {
        Failure {
            code: u8::try_from(e.exit_code()).unwrap_or(2),
            message: e.render().to_string().trim_end().to_string(),
        }
    }
}

/// The integer of an [`ExitCode`] (std keeps it opaque; it only compares them).
pub fn exit_status(code: ExitCode) -> u8 {
    (0..=u8::MAX)
        .find(|c| ExitCode::from(*c) == code)
        .unwrap_or(1)
}

/// What a command called through [`call`] gave back.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// The one result it printed, as data: what `json.loads` of its `--json` gives, built
    /// without writing or parsing JSON text.
    Result(serde_json::Value),
    /// Its stdout, when that was not exactly one result (a listing, or several outputs).
    Text(String),
}

/// Run `amdahl ARGS…` (without the program name) and return the result it printed (the caller
/// adds `--json`, so that nothing else is printed). A command that exits non-zero without an
/// error (none of the modelling commands do) is a failure with its code.
pub fn call(args: &[String]) -> Result<Output, Failure> {
    let argv = std::iter::once("amdahl".to_string()).chain(args.iter().cloned());
    let (outcome, captured) = crate::output::capture_results(|| crate::execute(argv));
    match outcome {
        Outcome::Exit(code) if code == ExitCode::SUCCESS => Ok(match captured.only_result() {
            Ok(value) => Output::Result(value),
            Err(text) => Output::Text(text),
        }),
        Outcome::Exit(code) => Err(Failure {
            code: exit_status(code),
            message: format!(
                "amdahl {} exited with {}",
                args.join(" "),
                exit_status(code)
            ),
        }),
        Outcome::Usage(e) => Err(Failure::usage(&e)),
        Outcome::Error(message) => Err(Failure { code: 1, message }),
    }
}

/// How the tracked code ended.
#[derive(Debug, Clone, Default)]
pub struct Exit {
    /// The exception that left the block, as `(type name, message)`; None for a normal end.
    pub exception: Option<(String, String)>,
}

/// `amdahl run`'s measurement around code running in this process: the same sensors, sampler,
/// outputs (written after every sample) and record; the process itself and its children are the
/// "command" (process scope charges their CPU time).
pub struct Tracker {
    session: Session,
    work: Arc<Work>,
    probe: Arc<ProcessProbe>,
    /// The process that started the tracker: a forked child has no sampler thread to stop.
    pid: u32,
}

impl Tracker {
    /// Start measuring. `options` are `amdahl run`'s options (`--region FR -o run.json …`),
    /// parsed and checked by the same code, and `command` is what the record names as the
    /// command (the script's argv); `python_version` is the interpreter's (the record's and the
    /// CodeCarbon row's `python_version`). Fails, before any work, on what `amdahl run` would
    /// refuse.
    pub fn start(
        options: &[String],
        command: &[String],
        work: Arc<Work>,
        python_version: Option<String>,
    ) -> Result<Tracker, Failure> {
        use clap::{Args as _, FromArgMatches as _};
        let argv = std::iter::once("run".to_string())
            .chain(options.iter().cloned())
            .chain(std::iter::once("--".to_string()))
            .chain(command.iter().cloned());
        // Only `run`'s own arguments are built and parsed, not the whole CLI's (every
        // subcommand's): the tracker starts inside someone's script, and what it builds and
        // touches there is time and memory of theirs (scripts/bench/python_overhead.sh).
        let cmd =
            crate::cmd::run::Args::augment_args(clap::Command::new("run").bin_name("amdahl run"));
        let args = cmd
            .try_get_matches_from(argv)
            .and_then(|m| crate::cmd::run::Args::from_arg_matches(&m))
            .map_err(|e| Failure::usage(&e))?;
        let probe = ProcessProbe::of_this_process();
        let session = crate::cmd::run::start_session(
            &args,
            Arc::clone(&probe),
            Arc::clone(&work),
            python_version,
        )
        .map_err(|e| Failure::error(&e))?;
        Ok(Tracker {
            session,
            work,
            probe,
            pid: std::process::id(),
        })
    }

    /// The units of work (steps, epochs) the code reports.
    pub fn work(&self) -> &Arc<Work> {
        &self.work
    }

    pub fn run_id(&self) -> &str {
        &self.session.context().run_id
    }

    /// kg CO2e per joule of this run (PUE × grid intensity), for projections.
    pub fn kg_per_joule(&self) -> f64 {
        self.session.kg_per_joule()
    }

    /// Stop, write the final record and the CodeCarbon row, and return the record.
    pub fn stop(self, exit: Exit) -> Result<RunRecord, Failure> {
        if std::process::id() != self.pid {
            return Err(Failure {
                code: 1,
                message: format!(
                    "this tracker was started in process {} and cannot be stopped in a forked child ({}); the parent stops it and writes the record",
                    self.pid,
                    std::process::id()
                ),
            });
        }
        let (exit_code, partial, by, warnings) = match exit.exception {
            None => (0, false, None, Vec::new()),
            Some((kind, message)) => (
                // What the interpreter would exit with: 130 (128 + SIGINT) for Ctrl-C, else 1.
                if kind == "KeyboardInterrupt" { 130 } else { 1 },
                true,
                Some(kind.clone()),
                vec![format!("the tracked code raised {kind}: {message}")],
            ),
        };
        // The CPU time of this process and its children since start (the probe subtracts what
        // the interpreter had spent before), and the process's peak RSS.
        self.probe.refresh();
        self.session
            .finish(Ending {
                exit_code: Some(exit_code),
                partial,
                interrupted_by: by,
                cpu_time: Some(Seconds(self.probe.cpu_seconds())),
                max_rss: procfs::own_peak_rss_bytes().map(|b| Bytes(b as f64)),
                warnings,
                ran: true,
                ..Default::default()
            })
            .map_err(|e| Failure::error(&anyhow::Error::from(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_reads_the_opaque_code() {
        assert_eq!(exit_status(ExitCode::SUCCESS), 0);
        assert_eq!(exit_status(ExitCode::from(2)), 2);
        assert_eq!(exit_status(ExitCode::from(255)), 255);
    }

    #[test]
    fn call_returns_stdout_or_the_cli_message() {
        let out = call(&["accelerate".into(), "--help".into()]);
        // --help is a "usage" outcome with exit code 0 in clap; it is not a result.
        assert!(matches!(out, Err(Failure { code: 0, .. })), "{out:?}");
        let e = call(&["plan".into(), "--nope".into()]).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.message.contains("--nope"), "{}", e.message);
    }

    /// A command's result comes back as data, equal to its `--json` text parsed; a command that
    /// prints a listing rather than a result comes back as its text.
    #[test]
    fn call_returns_the_result_as_data() {
        let args = |a: &str| a.split(' ').map(String::from).collect::<Vec<_>>();
        let Ok(Output::Result(v)) = call(&args("accelerate --n 64 --efficiency 0.9 --by 2 --json"))
        else {
            panic!("accelerate --json gave no result");
        };
        assert_eq!(v["schema"], "amdahl.accelerate/1");
        let Ok(Output::Result(csv_run)) =
            call(&args("accelerate --n 64 --efficiency 0.9 --by 2 --csv"))
        else {
            panic!("accelerate --csv gave no result");
        };
        assert_eq!(v, csv_run, "the data is the result, whatever the format");
        let out = call(&args("catalog pue --json"));
        assert!(
            matches!(&out, Ok(Output::Text(t)) if t.contains("amdahl.catalog/1")),
            "{out:?}"
        );
    }

    /// The width of an SVG document's root element (`width="241pt"`).
    fn svg_width(svg: &str) -> String {
        let at = svg.find("width=\"").map_or(0, |i| i + 7);
        svg[at..].split('"').next().unwrap_or_default().to_string()
    }

    /// Two commands at once from two threads, as two Python threads calling `amdahl.call`,
    /// with different output settings (`--size`, one `--quiet`): each figure is drawn at its own
    /// command's size. With the size a process-wide static, set by whichever call started last,
    /// one thread's figures came out at the other's size.
    #[test]
    fn concurrent_calls_keep_their_own_output_settings() {
        let dir = tempfile::tempdir().unwrap();
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = [("column", true), ("slide", false)]
            .into_iter()
            .map(|(size, quiet)| {
                let path = dir.path().join(format!("{size}.svg"));
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    let mut args = vec!["surface", "--size", size, "-o"];
                    args.push(path.to_str().unwrap());
                    if quiet {
                        args.push("--quiet");
                    }
                    let args: Vec<String> = args.into_iter().map(String::from).collect();
                    (0..8)
                        .map(|_| {
                            barrier.wait();
                            call(&args).unwrap();
                            svg_width(&std::fs::read_to_string(&path).unwrap())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let widths: Vec<Vec<String>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let (column, slide) = (&widths[0], &widths[1]);
        assert!(column.iter().all(|w| *w == column[0]), "{column:?}");
        assert!(slide.iter().all(|w| *w == slide[0]), "{slide:?}");
        assert_ne!(column[0], slide[0]);
    }
}
