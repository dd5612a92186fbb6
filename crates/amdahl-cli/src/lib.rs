//! The `amdahl` command: argument parsing, progress and wiring. The work happens in the library
//! crates; each subcommand lives in its own module under `cmd/` and returns an exit code.
//! A library target so that the binary (`main.rs`) and the Python package (`crates/amdahl-py`)
//! run the same commands: [`run_argv`] is the command line, [`embed`] what Python calls.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

// Terminal output that never panics. std's `eprintln!` and `println!` panic when their stream is
// a closed pipe (`amdahl ... 2>&1 | head -1`, a log collector that went away): every subcommand
// then exited 101, and `amdahl run` lost its record. Defined before the modules, these shadow
// std's macros in the whole crate (macro_rules scoping is textual), so no module can use the
// panicking ones by accident; a closed or failing terminal stream drops the text. Results on
// stdout go through `output::print`, which reports real write errors.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
macro_rules! eprint {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}
#[allow(unused_macros)]
macro_rules! println {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
#[allow(unused_macros)]
macro_rules! print {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

mod cmd;
mod domain;
pub mod embed;
mod input;
mod output;

/// How far will it scale, where does the time go, what does it cost — by model and by measurement.
#[derive(Parser)]
#[command(name = "amdahl", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// Print results only: no progress bars, notes or "wrote FILE" lines (warnings and errors
    /// still go to stderr).
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Size plots are drawn for: column (85 mm, one column of a paper), page (174 mm) or slide
    /// (254 mm, larger type).
    #[arg(long, global = true, value_enum, default_value = "page")]
    size: output::PlotSize,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Tour all three questions on embedded data: scaling, a training plan, serving, a carbon estimate, plots.
    Demo(cmd::demo::Args),
    /// Fit scaling laws (Amdahl, Amdahl + communication, USL) to measured runs.
    Fit(cmd::fit::Args),
    /// Végh's what-if: the parallel part runs K× faster, the serial part does not.
    Accelerate(cmd::accelerate::Args),
    /// Read official TOP500 spreadsheets: efficiency, effective parallelism, energy efficiency.
    Top500(cmd::top500::Args),
    /// Draw the efficiency surface E(N, 1−α) with measured systems placed on it.
    Surface(cmd::surface::Args),
    /// List the embedded catalogs: devices, grid regions, models, PUE presets, and the published
    /// training runs the planner is validated against.
    Catalog(cmd::catalog::Args),
    /// Estimate energy and emissions of a job, with a statement a paper can cite.
    Carbon(cmd::carbon::Args),
    /// Add serving to training over a model's life: energy, CO2e, when inference overtakes.
    Lifetime(cmd::lifetime::Args),
    /// Run a command and measure the energy it uses.
    Run(cmd::run::Args),
    /// List the energy sensors on this machine and why any is unusable.
    Detect(cmd::detect::Args),
    /// Merge per-node `amdahl run` results into one job total.
    Merge(cmd::merge::Args),
    /// Predict step time, memory and cost of distributed training; search for the best layout.
    Plan(cmd::plan::Args),
    /// Predict serving latency, throughput, energy per token and carbon; search TP, batch, precision.
    Infer(cmd::infer::Args),
    /// Simulate a server under a stream of requests: tail latency, goodput, energy per request.
    Serve(cmd::serve::Args),
    /// Run a command at several degrees of parallelism; fit its scaling and energy per job.
    Scale(cmd::scale::Args),
    /// Fit the model's constants to measured runs: step time, TTFT/TPOT, throughput, power.
    Calibrate(cmd::calibrate::Args),
    /// Serve node energy per cgroup, Slurm job, user and process to Prometheus (/metrics).
    Exporter(cmd::exporter::Args),
    /// Measure this machine: GEMM per precision, sparse vs dense, memory bandwidth, thread scaling.
    Bench(cmd::bench::Args),
    /// Write one self-contained HTML page from saved results: tables, plots, provenance, statements.
    Report(cmd::report::Args),
}

/// How one invocation of the CLI ended.
pub enum Outcome {
    /// The command ran; its exit code (`run` and `scale` pass the child's on).
    Exit(ExitCode),
    /// The arguments did not parse, or `--help` / `--version` was asked for.
    Usage(clap::Error),
    /// The command failed; the message with its whole context chain, as `error: …` prints it.
    Error(String),
}

/// Parse `argv` (the program name first) and run the subcommand, without printing the outcome.
/// The binary prints it ([`run_argv`]); the library target (`lib.rs`, for the Python package)
/// turns it into a return value or an exception.
pub fn execute<I, T>(argv: I) -> Outcome
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match parse::<Cli, _, _>(argv) {
        Ok(c) => c,
        Err(e) => return Outcome::Usage(e),
    };
    let settings = output::Settings {
        quiet: cli.quiet,
        plot_size: cli.size,
        table_width: output::table_width(),
    };
    match settings.apply(|| dispatch(cli.command)) {
        Ok(code) => Outcome::Exit(code),
        // `{:#}` prints the whole context chain: "reading runs.csv: row 4, column `time`: ...".
        Err(e) => Outcome::Error(format!("{e:#}")),
    }
}

/// Parse `argv` as clap does, except that every option's value may start with a minus: `--rate
/// -1` reaches the value parser, which says why it is refused ("must be a positive number (got
/// -1)"), where clap alone would answer "unexpected argument '-1' found", as if `-1` were an
/// option. One place for every subcommand, instead of an attribute on each numeric option.
pub(crate) fn parse<P, I, T>(argv: I) -> Result<P, clap::Error>
where
    P: CommandFactory + FromArgMatches,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    negative_values_reach_parsers(P::command())
        .try_get_matches_from(argv)
        .and_then(|m| P::from_arg_matches(&m))
}

fn negative_values_reach_parsers(command: clap::Command) -> clap::Command {
    command
        .mut_args(|a| {
            if a.get_action().takes_values() {
                a.allow_negative_numbers(true)
            } else {
                a
            }
        })
        .mut_subcommands(negative_values_reach_parsers)
}

/// Run the CLI on `argv` as the `amdahl` command does: usage errors print clap's message and
/// exit 2 (help and --version print on stdout and exit 0), other errors `error: …` and exit 1.
pub fn run_argv<I, T>(argv: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match execute(argv) {
        Outcome::Exit(code) => code,
        Outcome::Usage(e) => {
            let _ = e.print();
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
        }
        Outcome::Error(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

/// Run one parsed subcommand. `demo` calls this too, so its tour runs the real commands.
fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Fit(a) => cmd::fit::run(a),
        Command::Accelerate(a) => cmd::accelerate::run(a),
        Command::Top500(a) => cmd::top500::run(a),
        Command::Surface(a) => cmd::surface::run(a),
        Command::Catalog(a) => cmd::catalog::run(a),
        Command::Carbon(a) => cmd::carbon::run(a),
        Command::Lifetime(a) => cmd::lifetime::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Detect(a) => cmd::detect::run(a),
        Command::Merge(a) => cmd::merge::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Infer(a) => cmd::infer::run(a),
        Command::Calibrate(a) => cmd::calibrate::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Scale(a) => cmd::scale::run(a),
        Command::Exporter(a) => cmd::exporter::run(a),
    }
}
