//! The requests a run serves: arrival times (Poisson, gamma with a coefficient of variation, all
//! at once, or a trace) and prompt and output lengths.

use super::error::ServeError;
use super::lengths::Lengths;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Gamma};
use serde::{Deserialize, Serialize};

/// One request: when it arrives, its prompt and the tokens it generates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Request {
    pub arrival_s: f64,
    pub input_tokens: u32,
    pub output_tokens: u32,
}

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Arrivals {
    /// Exponential gaps at `rate` requests/s (independent users; MLPerf Inference's server
    /// scenario issues its queries so: Reddi et al. 2020, "MLPerf Inference Benchmark").
    Poisson { rate: f64 },
    /// Gamma-distributed gaps of mean 1/rate and coefficient of variation `cv`: cv 1 is Poisson,
    /// cv > 1 burstier, cv < 1 more regular.
    Gamma { rate: f64, cv: f64 },
    /// Every request at t = 0: an offline run (vLLM's and SGLang's `bench_serving
    /// --request-rate inf`, MLPerf's offline scenario).
    AllAtOnce,
}

impl Arrivals {
    /// Requests per second offered; infinite for [`Arrivals::AllAtOnce`].
    pub fn rate(&self) -> f64 {
        match *self {
            Arrivals::Poisson { rate } | Arrivals::Gamma { rate, .. } => rate,
            Arrivals::AllAtOnce => f64::INFINITY,
        }
    }

    fn check(&self) -> Result<(), ServeError> {
        if *self == Arrivals::AllAtOnce {
            return Ok(());
        }
        let rate = self.rate();
        if !(rate.is_finite() && rate > 0.0) {
            return Err(ServeError::Flag {
                what: "--rate",
                want: "a positive number of requests per second",
                got: rate.to_string(),
            });
        }
        if let Arrivals::Gamma { cv, .. } = *self {
            if !(cv.is_finite() && cv > 0.0 && cv <= 100.0) {
                return Err(ServeError::Flag {
                    what: "--cv",
                    want: "a coefficient of variation above 0 and at most 100",
                    got: cv.to_string(),
                });
            }
        }
        Ok(())
    }
}

/// The most requests one run generates: ~100 bytes of state each plus the timeline, and about
/// 40 ms of simulation per 10,000 (examples/bench_serve.rs), so a typo cannot ask for gigabytes.
pub const MAX_REQUESTS: u32 = 1_000_000;

/// A generated workload: `requests` arrivals (or, with `duration_s`, every arrival in the first
/// `duration_s` seconds) with lengths drawn from the two distributions, all from one seeded
/// ChaCha8 stream (a portable generator: the same seed gives the same random
/// bits everywhere, and the same requests wherever the float maths of the draws agrees).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Generated {
    pub arrivals: Arrivals,
    pub input: Lengths,
    pub output: Lengths,
    pub requests: u32,
    /// Arrivals for this many seconds instead of `requests` of them (`--duration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    pub seed: u64,
}

/// Draw the requests of `g`, lengths clamped so that input + output fits `context` tokens (the
/// count of clamped requests is returned with them). A distribution whose shortest draw cannot
/// fit is an error.
pub fn generate(
    g: &Generated,
    context: u32,
    model: &str,
) -> Result<(Vec<Request>, u32), ServeError> {
    g.arrivals.check()?;
    check_extent(g)?;
    let (lo_in, lo_out) = (g.input.min(), g.output.min());
    if u64::from(lo_in) + u64::from(lo_out) > u64::from(context) {
        return Err(ServeError::Context {
            source_name: "--input-dist/--output-dist".into(),
            row: 1,
            input: lo_in,
            output: lo_out,
            total: u64::from(lo_in) + u64::from(lo_out),
            context,
            model: model.into(),
        });
    }
    let mut rng = ChaCha8Rng::seed_from_u64(g.seed);
    let gaps = Gaps::new(&g.arrivals);
    let (inputs, outputs) = (g.input.draws(), g.output.draws());
    let mut t = 0.0;
    let mut clamped = 0;
    let mut out = Vec::with_capacity(g.requests.min(MAX_REQUESTS) as usize);
    loop {
        match g.duration_s {
            None if out.len() >= g.requests as usize => break,
            Some(_) if out.len() >= MAX_REQUESTS as usize => break,
            _ => {}
        }
        t += gaps.sample(&mut rng);
        if g.duration_s.is_some_and(|d| t > d) {
            break;
        }
        let (raw_in, raw_out) = (inputs.sample(&mut rng), outputs.sample(&mut rng));
        let input = raw_in.min(context.saturating_sub(1).max(1));
        let output = raw_out.min(context.saturating_sub(input)).max(1);
        if (input, output) != (raw_in, raw_out) {
            clamped += 1;
        }
        out.push(Request {
            arrival_s: t,
            input_tokens: input,
            output_tokens: output,
        });
    }
    if out.is_empty() {
        return Err(ServeError::Flag {
            what: "--duration",
            want: "long enough for one arrival at --rate",
            got: format!("{} s", g.duration_s.unwrap_or(0.0)),
        });
    }
    Ok((out, clamped))
}

/// `--requests` within 1..=1,000,000, or `--duration` positive and short enough that its
/// expected arrivals (duration × rate) stay within that bound.
fn check_extent(g: &Generated) -> Result<(), ServeError> {
    if let (Some(d), Arrivals::AllAtOnce) = (g.duration_s, g.arrivals) {
        return Err(ServeError::Flag {
            what: "--rate",
            want:
                "finite with --duration (with every request at once, give their number: --requests)",
            got: format!("inf, --duration {d} s"),
        });
    }
    if let Some(d) = g.duration_s {
        if !(d.is_finite() && d > 0.0) {
            return Err(ServeError::Flag {
                what: "--duration",
                want: "a positive number of seconds",
                got: d.to_string(),
            });
        }
        let expected = d * g.arrivals.rate();
        if expected > f64::from(MAX_REQUESTS) {
            return Err(ServeError::Flag {
                what: "--duration",
                want: "short enough for at most 1,000,000 arrivals at --rate (duration × rate)",
                got: format!("{d} s × {} requests/s = {expected:.0}", g.arrivals.rate()),
            });
        }
        return Ok(());
    }
    if g.requests == 0 || g.requests > MAX_REQUESTS {
        return Err(ServeError::Flag {
            what: "--requests",
            want: "from 1 to 1,000,000",
            got: g.requests.to_string(),
        });
    }
    Ok(())
}

/// Gap sampler: exponential, gamma, or fixed (0 for all at once).
enum Gaps {
    Exp(Exp<f64>),
    Gamma(Gamma<f64>),
    Fixed(f64),
}

impl Gaps {
    fn new(a: &Arrivals) -> Self {
        match *a {
            Arrivals::Poisson { rate } => Exp::new(rate).map_or(Gaps::Fixed(1.0 / rate), Gaps::Exp),
            // Shape k = 1/cv², scale θ = 1/(rate·k): mean kθ = 1/rate, cv = 1/√k.
            Arrivals::Gamma { rate, cv } => {
                let k = 1.0 / (cv * cv);
                Gamma::new(k, 1.0 / (rate * k)).map_or(Gaps::Fixed(1.0 / rate), Gaps::Gamma)
            }
            Arrivals::AllAtOnce => Gaps::Fixed(0.0),
        }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> f64 {
        match self {
            Gaps::Exp(d) => d.sample(rng),
            Gaps::Gamma(d) => d.sample(rng),
            Gaps::Fixed(x) => *x,
        }
    }
}

/// Read a trace: JSON Lines when its first character is `{` (one object per line with the
/// fields `arrival_s`, `input_tokens`, `output_tokens`), else CSV ([`parse_csv_trace`]). The same
/// checks and messages either way.
pub fn parse_trace(file: &str, text: &str) -> Result<Vec<Request>, ServeError> {
    if text.trim_start().starts_with('{') {
        parse_jsonl_trace(file, text)
    } else {
        parse_csv_trace(file, text)
    }
}

/// One request per non-empty line, `{"arrival_s": 0.5, "input_tokens": 100, "output_tokens": 20}`.
fn parse_jsonl_trace(file: &str, text: &str) -> Result<Vec<Request>, ServeError> {
    let mut out: Vec<Request> = Vec::new();
    let rows = text.lines().filter(|l| !l.trim().is_empty());
    for (i, line) in rows.enumerate() {
        let row = i + 1;
        let err = |field: &'static str, value: String, why: &'static str| ServeError::TraceField {
            file: file.into(),
            row,
            field,
            value,
            why,
        };
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|_| err("row", line.chars().take(60).collect(), "not a JSON object"))?;
        let field = |name: &'static str| {
            v.get(name)
                .ok_or_else(|| err(name, String::new(), "the field is missing"))
        };
        let a = field("arrival_s")?;
        let arrival = a
            .as_f64()
            .filter(|x| x.is_finite())
            .ok_or_else(|| err("arrival_s", a.to_string(), "not a number of seconds"))?;
        let tokens = |name: &'static str| {
            let t = field(name)?;
            t.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n >= 1)
                .ok_or_else(|| err(name, t.to_string(), "not a whole number of tokens ≥ 1"))
        };
        let r = Request {
            arrival_s: arrival,
            input_tokens: tokens("input_tokens")?,
            output_tokens: tokens("output_tokens")?,
        };
        push_checked(file, row, &mut out, r, &a.to_string())?;
    }
    if out.is_empty() {
        return Err(ServeError::TraceEmpty { file: file.into() });
    }
    Ok(out)
}

/// Append `r` after checking its arrival: not negative, not before the previous row's.
fn push_checked(
    file: &str,
    row: usize,
    out: &mut Vec<Request>,
    r: Request,
    shown: &str,
) -> Result<(), ServeError> {
    if r.arrival_s < 0.0 {
        return Err(ServeError::TraceField {
            file: file.into(),
            row,
            field: "arrival_s",
            value: shown.into(),
            why: "arrivals must be at or after 0 s",
        });
    }
    if let Some(prev) = out.last() {
        if r.arrival_s < prev.arrival_s {
            return Err(ServeError::TraceUnsorted {
                file: file.into(),
                row,
                arrival: r.arrival_s,
                previous: prev.arrival_s,
            });
        }
    }
    out.push(r);
    Ok(())
}

/// Read a CSV trace: a header naming `arrival_s`, `input_tokens` and `output_tokens` (any
/// order, other columns ignored); arrivals non-negative and sorted, lengths whole numbers ≥ 1.
/// `file` names the source in errors; rows are counted from 1 after the header.
pub fn parse_csv_trace(file: &str, text: &str) -> Result<Vec<Request>, ServeError> {
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(text.as_bytes());
    let field_err =
        |row: usize, field: &'static str, value: &str, why: &'static str| ServeError::TraceField {
            file: file.into(),
            row,
            field,
            value: value.into(),
            why,
        };
    let headers = rdr
        .headers()
        .map_err(|_| field_err(0, "header", "", "the header is not UTF-8 CSV"))?
        .clone();
    let col = |name: &'static str| {
        headers
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .ok_or(ServeError::TraceColumn {
                file: file.into(),
                column: name,
            })
    };
    let (ca, ci, co) = (
        col("arrival_s")?,
        col("input_tokens")?,
        col("output_tokens")?,
    );
    let mut out: Vec<Request> = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let row = i + 1;
        let rec = rec.map_err(|_| field_err(row, "row", "", "the row is not valid UTF-8 CSV"))?;
        let get = |c: usize, field: &'static str| {
            rec.get(c)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| field_err(row, field, "", "the field is missing"))
        };
        let a = get(ca, "arrival_s")?;
        let arrival: f64 = a
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite())
            .ok_or_else(|| field_err(row, "arrival_s", a, "not a number of seconds"))?;
        let tokens = |c: usize, field: &'static str| {
            let v = get(c, field)?;
            v.parse::<u32>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| field_err(row, field, v, "not a whole number of tokens ≥ 1"))
        };
        let r = Request {
            arrival_s: arrival,
            input_tokens: tokens(ci, "input_tokens")?,
            output_tokens: tokens(co, "output_tokens")?,
        };
        push_checked(file, row, &mut out, r, a)?;
    }
    if out.is_empty() {
        return Err(ServeError::TraceEmpty { file: file.into() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_reads_and_its_errors_name_file_row_and_field() {
        let t = parse_trace(
            "t.csv",
            "input_tokens,arrival_s,output_tokens\n10,0.5,3\n20,1.0,4\n",
        )
        .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].arrival_s, 1.0);
        assert_eq!(t[1].input_tokens, 20);
        let err = |text: &str| parse_trace("t.csv", text).unwrap_err().to_string();
        let e = err("arrival_s,input_tokens\n0,1\n");
        assert!(e.contains("t.csv") && e.contains("output_tokens"), "{e}");
        let e = err("arrival_s,input_tokens,output_tokens\n0,1,1\n-1,1,1\n");
        assert!(
            e.contains("row 2") && e.contains("arrival_s") && e.contains("after 0"),
            "{e}"
        );
        let e = err("arrival_s,input_tokens,output_tokens\n2,1,1\n1,1,1\n");
        assert!(e.contains("row 2") && e.contains("sort"), "{e}");
        let e = err("arrival_s,input_tokens,output_tokens\n0,1,x\n");
        assert!(e.contains("row 1") && e.contains("`output_tokens`"), "{e}");
        let e = err("arrival_s,input_tokens,output_tokens\n0,1\n");
        assert!(e.contains("row 1") && e.contains("missing"), "{e}");
        assert!(err("arrival_s,input_tokens,output_tokens\n").contains("no requests"));
    }

    #[test]
    fn a_jsonl_trace_reads_with_the_same_checks() {
        let t = parse_trace(
            "t.jsonl",
            "{\"arrival_s\": 0, \"input_tokens\": 5, \"output_tokens\": 2}\n\n\
             {\"arrival_s\": 1.5, \"input_tokens\": 7, \"output_tokens\": 3, \"id\": \"x\"}\n",
        )
        .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].input_tokens, 7);
        let err = |text: &str| parse_trace("t.jsonl", text).unwrap_err().to_string();
        let e = err(
            "{\"arrival_s\": 2, \"input_tokens\": 5, \"output_tokens\": 2}\n\
                     {\"arrival_s\": 1, \"input_tokens\": 5, \"output_tokens\": 2}",
        );
        assert!(e.contains("t.jsonl: row 2") && e.contains("sort"), "{e}");
        let e = err("{\"arrival_s\": 0, \"input_tokens\": 5}");
        assert!(
            e.contains("row 1, field `output_tokens`") && e.contains("missing"),
            "{e}"
        );
        let e = err("{\"arrival_s\": -1, \"input_tokens\": 5, \"output_tokens\": 2}");
        assert!(e.contains("after 0 s"), "{e}");
        let e = err("{\"arrival_s\": 0, \"input_tokens\": 1.5, \"output_tokens\": 2}");
        assert!(
            e.contains("`input_tokens`") && e.contains("whole number"),
            "{e}"
        );
    }

    #[test]
    fn all_at_once_arrives_at_zero_and_has_no_duration() {
        let mut g = Generated {
            arrivals: Arrivals::AllAtOnce,
            input: Lengths::Fixed { tokens: 100 },
            output: Lengths::Fixed { tokens: 10 },
            requests: 50,
            duration_s: None,
            seed: 0,
        };
        let (reqs, clamped) = generate(&g, 4096, "m").unwrap();
        assert_eq!((reqs.len(), clamped), (50, 0));
        assert!(reqs.iter().all(|r| r.arrival_s == 0.0));
        assert!(g.arrivals.rate().is_infinite());
        g.duration_s = Some(10.0);
        let e = generate(&g, 4096, "m").unwrap_err().to_string();
        assert!(e.contains("--requests"), "{e}");
    }

    #[test]
    fn a_duration_bounds_the_arrivals() {
        // 50 requests/s for 20 s: Poisson, so about 1,000 arrivals (σ = √1000 ≈ 32; ±15 %), none
        // after 20 s; a duration whose expected arrivals exceed the bound is refused.
        let mut g = Generated {
            arrivals: Arrivals::Poisson { rate: 50.0 },
            input: Lengths::Fixed { tokens: 10 },
            output: Lengths::Fixed { tokens: 10 },
            requests: 5,
            duration_s: Some(20.0),
            seed: 4,
        };
        let (r, _) = generate(&g, 4096, "m").unwrap();
        assert!((850..=1150).contains(&r.len()), "{}", r.len());
        assert!(r.iter().all(|q| q.arrival_s <= 20.0));
        g.duration_s = Some(1e6);
        let e = generate(&g, 4096, "m").unwrap_err().to_string();
        assert!(e.contains("--duration") && e.contains("1,000,000"), "{e}");
        g.duration_s = Some(-1.0);
        assert!(generate(&g, 4096, "m").is_err());
    }

    #[test]
    fn poisson_gaps_have_the_rate() {
        // 100,000 exponential gaps: the mean's relative standard error is 1/sqrt(n) = 0.3 %;
        // 1.5 % tolerance. Gamma with cv 3 has the same mean and a gap CV near 3 (10 %).
        for (arrivals, cv) in [
            (Arrivals::Poisson { rate: 4.0 }, 1.0),
            (Arrivals::Gamma { rate: 4.0, cv: 3.0 }, 3.0),
        ] {
            let g = Generated {
                arrivals,
                input: Lengths::Fixed { tokens: 10 },
                output: Lengths::Fixed { tokens: 10 },
                requests: 100_000,
                duration_s: None,
                seed: 1,
            };
            let (r, _) = generate(&g, 4096, "m").unwrap();
            let gaps: Vec<f64> = std::iter::once(r[0].arrival_s)
                .chain(r.windows(2).map(|w| w[1].arrival_s - w[0].arrival_s))
                .collect();
            let n = gaps.len() as f64;
            let mean = gaps.iter().sum::<f64>() / n;
            let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n).sqrt();
            assert!((mean * 4.0 - 1.0).abs() < 0.015, "{mean}");
            assert!((sd / mean / cv - 1.0).abs() < 0.1, "{}", sd / mean);
        }
    }

    /// A trace is user input: whatever the text, the reader gives requests that the simulator
    /// can take (arrivals finite, non-negative and sorted; lengths ≥ 1) or an error, never a
    /// panic. Arbitrary text, and rows shaped like a trace with arbitrary fields.
    fn holds_the_trace_contract(text: &str) {
        if let Ok(reqs) = parse_trace("t", text) {
            assert!(!reqs.is_empty());
            for w in reqs.windows(2) {
                assert!(w[0].arrival_s <= w[1].arrival_s, "{w:?}");
            }
            for r in &reqs {
                assert!(r.arrival_s.is_finite() && r.arrival_s >= 0.0, "{r:?}");
                assert!(r.input_tokens >= 1 && r.output_tokens >= 1, "{r:?}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_a_trace_or_an_error(text in "\\PC{0,300}") {
            holds_the_trace_contract(&text);
        }

        #[test]
        fn any_csv_or_jsonl_rows_are_a_trace_or_an_error(
            rows in proptest::collection::vec(
                ("-?[0-9]{0,4}(\\.[0-9]{0,3})?(e-?[0-9]{1,3})?|NaN|inf|", "-?[0-9]{0,11}|x", "[0-9]{0,11}|"),
                0..6,
            ),
            jsonl in proptest::bool::ANY,
        ) {
            let text: String = if jsonl {
                rows.iter()
                    .map(|(a, i, o)| format!(
                        "{{\"arrival_s\": {a}, \"input_tokens\": {i}, \"output_tokens\": {o}}}\n"
                    ))
                    .collect()
            } else {
                std::iter::once("arrival_s,input_tokens,output_tokens\n".to_string())
                    .chain(rows.iter().map(|(a, i, o)| format!("{a},{i},{o}\n")))
                    .collect()
            };
            holds_the_trace_contract(&text);
        }
    }
}
