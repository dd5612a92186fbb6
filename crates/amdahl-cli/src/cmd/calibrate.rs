//! `amdahl calibrate`: fit the model's free constants to the user's measured runs.
//!
//! The rows come as a CSV whose `command` column holds the configuration as the user types it
//! (`plan …`, `infer … --batch B`, or `gemm --n N` for a GEMM loop on a profiled device), parsed
//! by the same clap parsers `amdahl plan` and `amdahl infer` use, and measured columns
//! (`step_s`, `tokens_per_s`, `ttft_s`, `tpot_s`, `power_w`) or a `run` column naming an
//! `amdahl.run/1` record whose duration over its steps gives `step_s`. The fit itself is
//! `amdahl_model::calibrate` (docs/usage/calibrate.md, docs/methodology.md "Calibration").

use crate::cmd::resolve::load;
use crate::cmd::shape::read_json;
use crate::output::{print_result, FormatArgs};
use amdahl_meter::record::RunRecord;
use amdahl_model::calibrate::{calibrate, check_rows, Quantity, Request, Row, Workload};
use amdahl_model::catalog::Catalogs;
use amdahl_model::profile::DeviceProfile;
use amdahl_report::render::{Format, Render};
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Fit the model's constants (GEMM efficiency, bandwidth fraction, kernel latency, per-step
/// overhead, the serving engine's time per running sequence, power coefficients) to measured runs, with standard errors and leave-one-out errors.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Measured runs: a CSV with a `command` column (`plan …`, `infer … --batch B` or
    /// `gemm --n N` arguments, as typed) and measured columns (step_s, tokens_per_s, ttft_s,
    /// tpot_s, power_w), or a `run` column naming an `amdahl run -o` record (with `steps`).
    #[arg(value_name = "RUNS.csv")]
    pub runs: PathBuf,
    /// A device profile (`amdahl bench … --profile-out`): laid over every row's device before
    /// the fit; required by `gemm` rows.
    #[arg(long, value_name = "FILE")]
    pub device_profile: Option<PathBuf>,
    /// Constants to fit, comma-separated (gemm_efficiency, memory_efficiency, kernel_latency_s,
    /// step_overhead_s, per_sequence_s, power_active, power_compute, power_memory) [default: every one the rows
    /// identify; the others are listed as not fitted]. A named one the rows cannot identify is an
    /// error.
    #[arg(long, value_delimiter = ',', value_name = "NAME,…")]
    pub fit: Vec<String>,
    /// Held-back runs (same format), predicted with the fitted constants and never fitted to.
    #[arg(long, value_name = "RUNS.csv")]
    pub check: Option<PathBuf>,
    /// Write the calibration (amdahl.calibration/1) here, for `plan`/`infer --calibration`.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub format: FormatArgs,
}

/// A row's configuration, parsed by the same parsers as the commands it names.
#[derive(clap::Parser, Debug)]
#[command(name = "command", no_binary_name = true)]
enum RowCommand {
    Plan(crate::cmd::plan::Args),
    Infer(crate::cmd::infer::Args),
    /// One square GEMM of order N per step, on the device of --device-profile.
    Gemm(GemmRow),
}

#[derive(clap::Args, Debug)]
struct GemmRow {
    /// Matrix order.
    #[arg(long, value_parser = crate::domain::count)]
    n: u32,
    /// Precision of the profile's GEMM curve to use.
    #[arg(long, default_value = "fp32")]
    precision: String,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let profile = match &args.device_profile {
        Some(p) => Some((
            read_json::<DeviceProfile>("--device-profile", p)?,
            p.clone(),
        )),
        None => None,
    };
    let mut reader = RowReader::new(profile.as_ref());
    let rows = reader.read(&args.runs)?;
    check_rows(&rows)?;
    let req = Request {
        constants: (!args.fit.is_empty()).then(|| args.fit.clone()),
    };
    let source = args.runs.display().to_string();
    let mut cal = calibrate(&rows, &req, &source)?;
    if let Some(check) = &args.check {
        let held = reader.read(check)?;
        check_rows(&held)?;
        if let Some(r) = held
            .iter()
            .find(|r| r.workload.hardware().name != cal.system)
        {
            bail!(
                "{}: a run of the {}, the calibration is of the {}",
                r.origin,
                r.workload.hardware().name,
                cal.system
            );
        }
        cal.held_back = cal.check_held_back(&held);
    }
    if let Some(out) = &args.out {
        crate::output::write_file(out, &amdahl_report::to_json(&cal)?)?;
        crate::output::wrote(out);
    }
    let format = args.format.format();
    let mut text = cal.render(format)?;
    if format == Format::Table && !cal.held_back.is_empty() {
        text.push_str("\nheld-back rows (not fitted):\n");
        text.push_str(&amdahl_report::calibrate::rows_table(&cal.held_back).render());
    }
    print_result(&cal, &text)?;
    Ok(ExitCode::SUCCESS)
}

/// Reads measured-runs CSVs into rows, sharing catalogs and workloads between rows that name
/// the same configuration.
struct RowReader<'a> {
    profile: Option<&'a (DeviceProfile, PathBuf)>,
    /// The rows' parser, built once: building clap's command for `plan` and `infer` costs more
    /// than parsing a row with it.
    parser: clap::Command,
    catalogs: HashMap<Vec<PathBuf>, Arc<Catalogs>>,
    workloads: HashMap<String, Arc<Workload>>,
}

impl<'a> RowReader<'a> {
    fn new(profile: Option<&'a (DeviceProfile, PathBuf)>) -> Self {
        RowReader {
            profile,
            parser: <RowCommand as clap::CommandFactory>::command(),
            catalogs: HashMap::new(),
            workloads: HashMap::new(),
        }
    }

    /// Every (row, measured column) of `path` as a [`Row`].
    fn read(&mut self, path: &Path) -> Result<Vec<Row>> {
        let text = crate::input::read_text(path).context("reading the measured runs")?;
        let name = path.display().to_string();
        let mut csv = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .comment(Some(b'#'))
            .from_reader(text.as_bytes());
        let headers = csv
            .headers()
            .with_context(|| format!("{name}: reading the header"))?
            .clone();
        let col = |h: &str| headers.iter().position(|x| x == h);
        let Some(command) = col("command") else {
            bail!(
                "{name}: no `command` column; the header needs `command` (the row's `plan …`, \
                 `infer …` or `gemm …` arguments) and measured columns ({})",
                Quantity::ALL.map(Quantity::column).join(", ")
            );
        };
        let measured: Vec<(Quantity, usize)> = Quantity::ALL
            .iter()
            .filter_map(|&q| col(q.column()).map(|c| (q, c)))
            .collect();
        let (run_col, steps_col) = (col("run"), col("steps"));
        if measured.is_empty() && run_col.is_none() {
            bail!(
                "{name}: no measured column; give at least one of {} (or `run` with an amdahl.run/1 record)",
                Quantity::ALL.map(Quantity::column).join(", ")
            );
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let mut rows = Vec::new();
        for record in csv.records() {
            let record = record.with_context(|| format!("{name}: reading a row"))?;
            let line = record.position().map_or(0, |p| p.line());
            let origin = format!("{name} line {line}");
            let cell = |c: usize| record.get(c).unwrap_or("").trim();
            let cmd = cell(command);
            if cmd.is_empty() {
                bail!("{origin}: empty `command`; give the row's `plan …`, `infer …` or `gemm …` arguments");
            }
            let workload = self
                .workload(cmd)
                .with_context(|| format!("{origin}, field `command`"))?;
            let mut values: Vec<(Quantity, f64)> = Vec::new();
            for &(q, c) in &measured {
                let v = cell(c);
                if v.is_empty() {
                    continue;
                }
                let x: f64 = v.parse().map_err(|_| {
                    anyhow::anyhow!("{origin}, field `{}`: `{v}` is not a number", q.column())
                })?;
                values.push((q, x));
            }
            if let Some(rc) = run_col.filter(|&c| !cell(c).is_empty()) {
                if !values.iter().any(|(q, _)| *q == Quantity::StepS) {
                    let steps = steps_col.map(cell).filter(|s| !s.is_empty());
                    let step = step_from_record(&base.join(cell(rc)), steps)
                        .with_context(|| format!("{origin}, field `run`"))?;
                    values.push((Quantity::StepS, step));
                }
            }
            if values.is_empty() {
                bail!("{origin}: no measured value in this row; fill a measured column or drop the row");
            }
            for (quantity, value) in values {
                rows.push(Row {
                    origin: origin.clone(),
                    workload: workload.clone(),
                    quantity,
                    measured: value,
                });
            }
        }
        Ok(rows)
    }

    /// The workload of a `command` cell (cached: a sweep repeats configurations).
    fn workload(&mut self, cmd: &str) -> Result<Arc<Workload>> {
        if let Some(w) = self.workloads.get(cmd) {
            return Ok(w.clone());
        }
        let mut words = split_words(cmd)?;
        if words.first().map(String::as_str) == Some("amdahl") {
            words.remove(0);
        }
        let is_model = matches!(words.first().map(String::as_str), Some("plan" | "infer"));
        if is_model && words.iter().any(|w| w.starts_with("--calibration")) {
            bail!("a measured row is predicted with the model's own constants: drop --calibration from it");
        }
        if let (true, Some((_, p))) = (is_model, self.profile) {
            if !words.iter().any(|w| w.starts_with("--device-profile")) {
                words.push("--device-profile".into());
                words.push(p.display().to_string());
            }
        }
        let usage = |e: clap::Error| anyhow::anyhow!("{}", e.render().to_string().trim_end());
        let matches = self
            .parser
            .try_get_matches_from_mut(&words)
            .map_err(usage)?;
        let parsed =
            <RowCommand as clap::FromArgMatches>::from_arg_matches(&matches).map_err(usage)?;
        let w = match parsed {
            RowCommand::Plan(a) => {
                let c = self.catalogs(crate::cmd::plan::catalog_files(&a))?;
                let (model, hw, net, layout) = crate::cmd::plan::workload(a, &c)?;
                Workload::Train {
                    model,
                    hw,
                    net,
                    layout,
                }
            }
            RowCommand::Infer(a) => {
                let c = self.catalogs(crate::cmd::infer::catalog_files(&a))?;
                let (model, hw, net, serving, requests, batch) =
                    crate::cmd::infer::workload(a, &c)?;
                Workload::Serve {
                    model,
                    hw,
                    net,
                    serving,
                    requests,
                    batch,
                }
            }
            RowCommand::Gemm(g) => {
                let Some((profile, path)) = self.profile else {
                    bail!("a `gemm` row runs on a profiled device: give --device-profile FILE");
                };
                let (hw, peak) =
                    profile.gemm_hardware(&g.precision, &path.display().to_string())?;
                Workload::Gemm {
                    flops: 2.0 * f64::from(g.n).powi(3),
                    peak,
                    hw,
                }
            }
        };
        let w = Arc::new(w);
        self.workloads.insert(cmd.to_string(), w.clone());
        Ok(w)
    }

    fn catalogs(&mut self, files: &[PathBuf]) -> Result<Arc<Catalogs>> {
        if let Some(c) = self.catalogs.get(files) {
            return Ok(c.clone());
        }
        let c = Arc::new(load(files)?);
        self.catalogs.insert(files.to_vec(), c.clone());
        Ok(c)
    }
}

/// Seconds per step of an `amdahl run -o` record: its duration over `steps` (the column), else
/// over the steps its progress counted.
fn step_from_record(path: &Path, steps: Option<&str>) -> Result<f64> {
    let r: RunRecord = read_json("the run record", path)?;
    if r.schema != "amdahl.run/1" {
        bail!(
            "{}: schema `{}`, not amdahl.run/1",
            path.display(),
            r.schema
        );
    }
    if r.partial || r.exit_code != Some(0) {
        bail!(
            "{}: the run did not finish cleanly (exit {:?}{}): its duration is not that of the steps",
            path.display(),
            r.exit_code,
            if r.partial { ", partial" } else { "" }
        );
    }
    let n: f64 = match steps {
        Some(s) => s
            .parse::<u64>()
            .ok()
            .filter(|&n| n >= 1)
            .map(|n| n as f64)
            .with_context(|| format!("field `steps`: `{s}` is not a whole number ≥ 1"))?,
        None => match &r.projection {
            Some(p) if p.units_done >= 1 => p.units_done as f64,
            _ => bail!(
                "{}: the record counted no steps (run it with --progress-regex); or give a `steps` column",
                path.display()
            ),
        },
    };
    Ok(r.duration_s.get() / n)
}

/// Split a command cell into words as a POSIX shell would for plain words and quotes: spaces
/// separate, '…' and "…" group, a backslash escapes the next character.
fn split_words(s: &str) -> Result<Vec<String>> {
    let (mut words, mut cur, mut any) = (Vec::new(), String::new(), false);
    let mut chars = s.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_whitespace() => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => cur.push(c),
            (_, '\\') => {
                cur.push(chars.next().unwrap_or('\\'));
                any = true;
            }
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if let Some(q) = quote {
        bail!("unclosed {q} quote in `{s}`");
    }
    if any {
        words.push(cur);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_a_shell_would() {
        assert_eq!(
            split_words(r#"plan --model 'gpt3 1.3b' --x "a b" c\ d"#).unwrap(),
            ["plan", "--model", "gpt3 1.3b", "--x", "a b", "c d"]
        );
        assert!(split_words("plan 'oops").is_err());
    }
}
