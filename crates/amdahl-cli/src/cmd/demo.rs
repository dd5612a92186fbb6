//! `amdahl demo`: the three questions answered on embedded data, as a scripted tour of the real
//! subcommands. Each step prints the command line it runs, so a reader can re-run or vary it; the
//! steps run in-process through the same parser and code as when typed, so the tour cannot drift
//! from what the commands do.

use crate::output::print;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory for the plots the tour writes (created if missing).
    #[arg(long, default_value = "amdahl-demo")]
    pub out: PathBuf,
}

/// A step of the tour: the question it answers and the command line (without `amdahl`).
struct Step {
    heading: &'static str,
    argv: Vec<String>,
}

fn steps(out: &str) -> Vec<Step> {
    let svg = |name: &str| format!("{out}/{name}");
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    vec![
        Step {
            heading: "1a. How far will it scale? Effective parallelism of TOP500 systems, 2013-2023",
            argv: words("top500"),
        },
        Step {
            heading: "1b. The same systems on the efficiency surface E(N, 1−α)",
            argv: [words("surface -o"), vec![svg("surface.svg")]].concat(),
        },
        Step {
            heading: "1c. A measured series (throughput vs load), four laws fitted",
            argv: [words("fit --builtin --predict 64,128 --svg"), vec![svg("fit.svg")]].concat(),
        },
        Step {
            heading: "2. Where does the time go? Megatron-LM 530B on 2,520 A100 (SC21, Table 1)",
            argv: [
                words(
                    "plan --model megatron-530b --system a100-80gb --gpus 2520 --tp 8 --pp 35 \
                     --mbs 1 --batch 2520 --recompute full --region US --svg",
                ),
                vec![svg("plan.svg")],
            ]
            .concat(),
        },
        Step {
            heading: "2b. ... and when serving? Llama 3 70B on 4 H100, fp8, 1,024 + 256 tokens, in France",
            argv: [
                words(
                    "infer --model llama3-70b --system h100 --tp 4 --precision fp8 \
                     --kv-precision fp8 --input 1024 --output 256 --batch 64 --region FR --svg",
                ),
                vec![svg("infer.svg")],
            ]
            .concat(),
        },
        Step {
            heading: "3. What does it cost? GPT-3 training as published (Patterson et al. 2021), on six grids, \
                      its 45 TB raw crawl (Brown et al. 2020) shipped to each",
            argv: words(
                "carbon --device v100 --count 10000 --days 14.8 --power 330 --pue 1.1 \
                 --intensity 429 --intensity-year 2021 --compare FR,PL,US,IN,NO,AU --data-gb 45000",
            ),
        },
        Step {
            // Training: 6.4 M H100-hours for Llama 3 70B (Meta's Llama 3 model card, 2024) at the
            // 700 W TDP = 4,480 MWh. Serving: step 2b's 0.0618 kWh per 1,000 requests (the demo
            // test checks that step 2b still prints it).
            heading: "4. ... over its life? Llama 3 70B trained once (6.4 M H100-hours, Meta 2024), \
                      then served as in 2b, 100 M requests a day for three years, in France",
            argv: [
                words(
                    "lifetime --train-kwh 4480000 --kwh-per-1000-requests 0.0618 \
                     --requests-per-day 1e8 --days 1095 --region FR --svg",
                ),
                vec![svg("lifetime.svg")],
            ]
            .concat(),
        },
    ]
}

pub fn run(args: Args) -> Result<ExitCode> {
    let out = args.out.to_string_lossy().into_owned();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating the output directory {out}"))?;
    for step in steps(&out) {
        print(&format!(
            "\n== {}\n$ amdahl {}\n\n",
            step.heading,
            step.argv.join(" ")
        ))?;
        let argv = std::iter::once("amdahl".to_string()).chain(step.argv.iter().cloned());
        let cli = crate::parse::<crate::Cli, _, _>(argv).with_context(|| {
            format!(
                "the demo step `amdahl {}` no longer parses",
                step.argv.join(" ")
            )
        })?;
        let code = crate::dispatch(cli.command)?;
        if code != ExitCode::SUCCESS {
            bail!("the demo step `amdahl {}` failed", step.argv.join(" "));
        }
    }
    print(&format!(
        "\nPlots written to {out}/ (open the .svg files in a browser).\n"
    ))?;
    Ok(ExitCode::SUCCESS)
}
