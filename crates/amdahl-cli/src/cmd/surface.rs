//! `amdahl surface` — draw the efficiency surface E(N, 1−α) with iso-efficiency contours and
//! place measured systems (`top500 --json`, `fit --json` results) on it.

use crate::cmd::top500::{load, parse_n};
use crate::output::{print_result, FormatArgs};
use amdahl_model::top500::{analyse, NCounts, Query};
use amdahl_report::render::Render;
use amdahl_report::surface::{svg, validate, SurfacePoint, SurfaceResult, SurfaceSpec};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// JSON results to place on the surface: `amdahl top500 --json` (each system at its N and
    /// 1−α_eff) or `amdahl fit --json` (each point at its N and Karp–Flatt e); `-` reads stdin.
    /// Without --from: the built-in TOP500 history.
    #[arg(long = "from", value_name = "FILE.json")]
    pub from: Vec<PathBuf>,
    /// Where to write the SVG.
    #[arg(short, long, value_name = "FILE.svg", default_value = "surface.svg")]
    pub output: PathBuf,
    /// N range of the plot, LO:HI (log axis, LO ≥ 1).
    #[arg(long, value_name = "LO:HI", default_value = "1:1e8", value_parser = parse_range)]
    pub n_range: (f64, f64),
    /// 1−α range of the plot, LO:HI (log axis, 0 < LO < HI ≤ 1).
    #[arg(long, value_name = "LO:HI", default_value = "1e-9:1e-1", value_parser = parse_range)]
    pub serial_range: (f64, f64),
    /// What N counts for the built-in history overlay: cores, accelerators or nodes.
    #[arg(long = "n", value_name = "COUNT", default_value = "cores", value_parser = parse_n)]
    pub n: NCounts,
    #[command(flatten)]
    pub format: FormatArgs,
}

/// Parse "LO:HI" into two numbers.
fn parse_range(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("\"{s}\" is not a range; write LO:HI, e.g. 1:1e7"))?;
    let num = |x: &str| {
        x.trim()
            .parse::<f64>()
            .map_err(|_| format!("\"{x}\" in \"{s}\" is not a number"))
    };
    Ok((num(a)?, num(b)?))
}

fn read_source(p: &std::path::Path) -> Result<(String, String)> {
    let name = if p.as_os_str() == "-" {
        "standard input".into()
    } else {
        p.display().to_string()
    };
    Ok((name, crate::input::read_text(p)?))
}

/// Points from the --from files, or the built-in TOP500 history.
fn points(args: &Args) -> Result<Vec<SurfacePoint>> {
    if args.from.is_empty() {
        let lists = load(&[])?;
        let r = analyse(
            &lists,
            &Query {
                n_counts: args.n,
                ..Query::default()
            },
        );
        let v = serde_json::to_value(&r).context("serialising the built-in history")?;
        return Ok(amdahl_report::kind::overlay("built-in history", &v)?.points);
    }
    let mut out = Vec::new();
    for p in &args.from {
        let (name, text) = read_source(p)?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{name}: not valid JSON (expected `amdahl top500 --json` or `amdahl fit --json` output)"))?;
        let overlay = amdahl_report::kind::overlay(&name, &v)?;
        if overlay.skipped > 0 {
            eprintln!(
                "warning: {name}: {} of {} entries have no usable (N > 1, 0 < 1-α ≤ 1) pair and are not drawn",
                overlay.skipped,
                overlay.skipped + overlay.points.len()
            );
        }
        out.extend(overlay.points);
    }
    Ok(out)
}

pub fn run(args: Args) -> Result<ExitCode> {
    let spec = SurfaceSpec {
        n_range: args.n_range,
        serial_range: args.serial_range,
        ..SurfaceSpec::default()
    };
    validate(&spec)?;
    let pts = points(&args)?;
    crate::output::write_plot(&args.output, &svg(&spec, &pts))?;
    let result = SurfaceResult::new(args.output.display().to_string(), spec, pts);
    if result.outside > 0 {
        eprintln!(
            "warning: {} of {} points lie outside the plotted ranges; widen --n-range or --serial-range",
            result.outside,
            result.points.len()
        );
    }
    let text = result.render(args.format.format())?;
    print_result(&result, &text)?;
    Ok(ExitCode::SUCCESS)
}
