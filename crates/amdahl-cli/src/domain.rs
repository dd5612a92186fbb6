//! The domain of every numeric flag, in one place: typed clap value parsers. A value outside its
//! domain is a usage error (exit 2) that says what the flag accepts, before any command runs.
//! Results are checked for finiteness once more at the output sink (`output::print_result`).
//!
//! Each parser names its domain in its message; the flag's name is added by clap
//! (`invalid value '0.5' for '--by <K>': ...`).

use amdahl_meter::sampler;
use std::time::Duration;

/// Parse a float, refusing NaN and infinities (Rust's parser accepts "NaN", "inf", "1e400").
fn finite(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("`{s}` is not a finite number"))
    }
}

/// A positive, finite number (a duration, a power, a bandwidth, a parameter count).
/// Subnormal values (below 2.2e-308) are refused too: their reciprocals overflow to infinity.
pub fn positive(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v >= f64::MIN_POSITIVE {
        Ok(v)
    } else {
        Err(format!("must be a positive number (got {s})"))
    }
}

/// A request rate: a positive number, or `inf` for every request at once (as vLLM's and
/// SGLang's `bench_serving --request-rate inf`).
pub fn rate(s: &str) -> Result<f64, String> {
    if s.trim().eq_ignore_ascii_case("inf") {
        return Ok(f64::INFINITY);
    }
    positive(s).map_err(|e| format!("{e}, or inf for every request at once"))
}

/// A finite number ≥ 0 (a price, an idle power, a latency).
pub fn non_negative(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("must be a number ≥ 0 (got {s})"))
    }
}

/// A fraction in (0, 1]: efficiency, utilisation, MFU, network efficiency.
pub fn fraction(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!(
            "must be a fraction in (0, 1], e.g. 0.6 for 60 % (got {s})"
        ))
    }
}

/// A share in [0, 1] (part of 1-α that is communication).
pub fn share(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("must be a share in [0, 1] (got {s})"))
    }
}

/// The non-parallel fraction 1-α in [0, 1): 0 is perfect scaling, 1 would be no parallel part.
pub fn serial_fraction(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("must be a fraction in [0, 1) (got {s})"))
    }
}

/// A processor count N ≥ 1 as the measured run counted it (cores, GPUs, nodes); below 2^53 so
/// that every whole count is exact.
pub fn processors(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if (1.0..=9.007_199_254_740_992e15).contains(&v) {
        Ok(v)
    } else {
        Err(format!("must be a count from 1 to 2^53 (got {s})"))
    }
}

/// A speed-up factor K ≥ 1: how many times faster the parallel part runs. A slower part (K < 1)
/// is the same what-if read backwards; give the faster run's figures and K = 1/K instead.
pub fn speedup(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v >= 1.0 {
        Ok(v)
    } else {
        Err(format!(
            "must be at least 1: the parallel part runs K times faster (got {s}; for a slower part, start from the slower run's figures)"
        ))
    }
}

/// A whole count from 1 to 4,294,967,295 (u32): devices, repeats, runs.
pub fn count(s: &str) -> Result<u32, String> {
    whole(s, 1, u32::MAX.into()).map(|v| v as u32)
}

/// A whole number from 0 to 4,294,967,295 (u32): token counts that may be none.
pub fn natural_u32(s: &str) -> Result<u32, String> {
    whole(s, 0, u32::MAX.into()).map(|v| v as u32)
}

/// A whole count from 1 to 2⁶⁴ − 1 (u64): steps of a run.
pub fn count_wide(s: &str) -> Result<u64, String> {
    whole(s, 1, u64::MAX)
}

/// A whole number from 0 to 2⁶⁴ − 1: GPU totals, seeds, N lists, device ordinals. Zero parses;
/// where a command cannot use it, the command says why (exit 1).
pub fn natural(s: &str) -> Result<u64, String> {
    whole(s, 0, u64::MAX)
}

/// [`natural`] as a `usize` (list lengths, ordinals, caps).
pub fn natural_usize(s: &str) -> Result<usize, String> {
    let max = u64::try_from(usize::MAX).unwrap_or(u64::MAX);
    whole(s, 0, max).map(|v| usize::try_from(v).unwrap_or(usize::MAX))
}

/// `--num-scheduler-steps`: 1 to [`amdahl_model::serve::multistep::MAX_STEPS`].
pub fn scheduler_steps(s: &str) -> Result<u32, String> {
    use amdahl_model::serve::multistep::{MAX_STEPS, STEPS_RANGE};
    match count(s) {
        Ok(k) if k <= MAX_STEPS => Ok(k),
        _ => Err(format!("must be {STEPS_RANGE} (got {s})")),
    }
}

fn whole(s: &str, min: u64, max: u64) -> Result<u64, String> {
    let t = s.trim();
    let range = || format!("must be a whole number from {min} to {max}");
    // Parse wide first so that the message for 4294967297 says "too large", not "at least 1".
    // "1e4" is a whole number too; "2.5" and "NaN" are not.
    let wide = match t.parse::<i128>() {
        Ok(v) => v,
        Err(_) => match t.parse::<f64>() {
            Ok(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e30 => f as i128,
            Ok(_) => return Err(format!("{}; `{s}` is not whole", range())),
            Err(_) => return Err(format!("`{s}` is not a number; {}", range())),
        },
    };
    if wide < i128::from(min) {
        return Err(format!("{} (got {s})", range()));
    }
    u64::try_from(wide)
        .ok()
        .filter(|v| *v <= max)
        .ok_or_else(|| format!("{} (got {s}, too large)", range()))
}

/// A duration in seconds (≥ 0): a plain number of seconds ("2.5") or a humantime spelling
/// ("90s", "500ms", "1h 30m"), parsed by the `humantime` crate.
pub fn seconds(s: &str) -> Result<f64, String> {
    let v = match finite(s) {
        Ok(v) => v,
        Err(_) => humantime::parse_duration(s.trim())
            .map_err(|e| {
                format!("`{s}` is not a duration ({e}); write seconds (2.5) or e.g. 90s, 1h 30m")
            })?
            .as_secs_f64(),
    };
    if v >= 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(format!("must be a duration ≥ 0 (got {s})"))
    }
}

/// Years of service life for embodied carbon: (0, 100]. No accelerator serves a century; the
/// bound keeps `--lifetime-years 1e-320` from dividing by almost nothing.
pub fn lifetime_years(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 1e-3 && v <= 100.0 {
        Ok(v)
    } else {
        Err(format!(
            "must be between 0.001 and 100 years (got {s}); the default is the catalog's service life"
        ))
    }
}

/// A flag whose values are a model enum's names (`amdahl_model`'s `NAMES` constants), in their
/// order, each with the help text `help` gives it (the ones it lists), parsed by the enum's
/// `FromStr`: clap validates and lists the names, so the binary keeps no copy of the enum.
pub fn model_enum<T>(
    names: &'static [&'static str],
    help: &'static [(&'static str, &'static str)],
) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let values = names.iter().map(|&n| {
        let v = PossibleValue::new(n);
        match help.iter().find(|(name, _)| *name == n) {
            Some(&(_, h)) => v.help(h),
            None => v,
        }
    });
    PossibleValuesParser::new(values).try_map(|s| s.parse::<T>())
}

/// A time span as `run`, `scale` and `exporter` take it: a humantime spelling (`1s`, `250ms`,
/// `0.5s`, `2m`, `1h 30m`) or a bare number of seconds, as [`seconds`] reads it; must be > 0.
pub fn duration(s: &str) -> Result<Duration, String> {
    // One grammar for every duration flag: [`seconds`] (a plain number, or humantime's).
    let secs = seconds(s).map_err(|e| {
        if e.starts_with("must be") {
            format!("`{s}`: the duration must be greater than zero")
        } else {
            e
        }
    })?;
    if secs <= 0.0 {
        return Err(format!("`{s}`: the duration must be greater than zero"));
    }
    // About 31 years: beyond it the value is a typo, and timers would overflow.
    if secs > 1e9 {
        return Err(format!("`{s}`: too long (at most 1e9 s)"));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}"))
}

/// A [`duration`], or zero (`0`, `0s`): the exporter's refresh and retention spans.
pub fn duration_or_zero(s: &str) -> Result<Duration, String> {
    let num = s.trim().trim_end_matches(|c: char| c.is_ascii_alphabetic());
    if num.trim().parse::<f64>() == Ok(0.0) {
        return Ok(Duration::ZERO);
    }
    duration(s)
}

/// A sampling interval: a duration of at least [`sampler::MIN_INTERVAL`] (10 ms; why: see
/// there). Shorter ones are usage errors rather than silently raised.
pub fn interval(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d < sampler::MIN_INTERVAL {
        return Err(format!(
            "`{s}`: the sampling interval must be at least 10ms (RAPL counters update about once per millisecond; shorter intervals measure noise)"
        ));
    }
    Ok(d)
}

/// A power in watts > 0 (`--cpu-tdp`).
pub fn watts(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(w) if w.is_finite() && w > 0.0 => Ok(w),
        _ => Err(format!("`{s}`: must be a power in watts > 0")),
    }
}

/// The power of one device in watts, within what any device draws: from 0.5 W (below the
/// smallest accelerators, e.g. Google's 2 W Coral Edge TPU) to 30 kW (above the largest single
/// device, Cerebras's 23 kW CS-3 wafer-scale system, 2024 data sheet). `--tdp-w 1e-9` gave
/// 2.4e-13 J/token and `1e308` printed `inf J`: a typo, not a device.
pub fn device_watts(s: &str) -> Result<f64, String> {
    const RANGE: std::ops::RangeInclusive<f64> = 0.5..=30_000.0;
    let w = finite(s)?;
    if RANGE.contains(&w) {
        Ok(w)
    } else {
        Err(format!(
            "{s} W is not the power of one device: give watts between {} and {} (a GPU draws \
             ~300-1200 W)",
            RANGE.start(),
            RANGE.end()
        ))
    }
}

/// A byte regex (the command's output need not be UTF-8), with the regex crate's own message
/// (it points at the offending character) when it does not compile.
pub fn progress_regex(s: &str) -> Result<regex::bytes::Regex, String> {
    regex::bytes::RegexBuilder::new(s)
        // `^` and `$` anchor at the line's ends: each line is matched on its own anyway.
        .multi_line(true)
        .build()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_and_non_numbers_are_refused_everywhere() {
        for p in [
            positive,
            non_negative,
            fraction,
            share,
            serial_fraction,
            speedup,
        ] {
            for bad in ["NaN", "nan", "inf", "-inf", "1e400", "abc", ""] {
                assert!(p(bad).is_err(), "{bad}");
            }
        }
    }

    #[test]
    fn domains_hold_their_boundaries() {
        assert!(positive("1e-320").is_err());
        assert_eq!(positive("1e308"), Ok(1e308));
        assert!(positive("0").is_err() && positive("-1").is_err());
        assert_eq!(non_negative("0"), Ok(0.0));
        assert!(non_negative("-1").is_err());
        assert_eq!(fraction("1"), Ok(1.0));
        assert!(fraction("0").is_err() && fraction("1.01").is_err());
        assert_eq!(share("0"), Ok(0.0));
        assert_eq!(serial_fraction("0"), Ok(0.0));
        assert!(serial_fraction("1").is_err());
        assert!(speedup("0.5").is_err());
        assert_eq!(speedup("1"), Ok(1.0));
        assert!(lifetime_years("1e-320").is_err());
        assert_eq!(lifetime_years("4"), Ok(4.0));
    }

    #[test]
    fn durations_take_seconds_or_humantime_spellings() {
        assert_eq!(seconds("2.5"), Ok(2.5));
        assert_eq!(seconds("90s"), Ok(90.0));
        assert_eq!(seconds("1h 30m"), Ok(5400.0));
        assert_eq!(seconds("500ms"), Ok(0.5));
        assert_eq!(seconds("0"), Ok(0.0));
        assert!(seconds("-1").is_err() && seconds("soon").is_err() && seconds("NaN").is_err());
    }

    #[test]
    fn count_4294967297_says_too_large_not_at_least_1() {
        let e = count("4294967297").unwrap_err();
        assert!(e.contains("too large") && e.contains("4294967295"), "{e}");
        assert!(count("0").unwrap_err().contains("from 1"));
        assert!(count("2.5").unwrap_err().contains("not whole"));
        assert_eq!(count("4294967295"), Ok(u32::MAX));
        assert_eq!(count("1e4"), Ok(10_000));
        assert!(count("1e10").unwrap_err().contains("too large"));
    }

    #[test]
    fn natural_numbers_take_zero_and_the_whole_u64_range_and_name_a_negative() {
        assert_eq!(natural("0"), Ok(0));
        assert_eq!(natural("18446744073709551615"), Ok(u64::MAX));
        assert!(natural("18446744073709551616")
            .unwrap_err()
            .contains("too large"));
        let e = natural("-1").unwrap_err();
        assert_eq!(
            e,
            "must be a whole number from 0 to 18446744073709551615 (got -1)"
        );
        assert_eq!(natural_usize("7"), Ok(7));
        assert!(count_wide("0").unwrap_err().contains("from 1"));
        assert_eq!(count_wide("5000000000"), Ok(5_000_000_000));
    }

    #[test]
    fn durations() {
        assert_eq!(duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("0.5"), Ok(Duration::from_millis(500)));
        assert!(duration("0s").is_err());
        assert!(duration("-1s").is_err());
        assert!(duration("fast").is_err());
        assert!(duration("1e300s").is_err());
        assert_eq!(duration_or_zero("0s"), Ok(Duration::ZERO));
        assert!(interval("5ms").is_err());
        // humantime's grammar, the same as every other duration flag's: spans add up.
        assert_eq!(duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("0.5s"), Ok(Duration::from_millis(500)));
    }
}
