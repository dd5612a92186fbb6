//! Rendering of amdahl's result structs: terminal tables, JSON, CSV and SVG plots.
//!
//! Every function here is a pure function of data it is given; nothing measures, reads sensors or
//! prints. The binary chooses a sink and writes the returned string where the user asked.

pub mod accelerate;
pub mod bench;
pub mod bench_gpu;
pub mod calibrate;
pub mod carbon;
pub mod catalog;
pub mod energy_validation;
pub mod escape;
pub mod export;
pub mod exporter;
pub mod field_names;
pub mod finite;
pub mod fit;
pub mod font;
pub mod html;
pub mod infer;
pub mod interval;
pub mod kind;
pub mod lifetime;
pub mod meter;
pub mod plan;
pub mod render;
pub mod scale;
pub mod schema;
pub mod sci;
pub mod serve;
pub mod serve_max_rate;
pub mod serve_search;
pub mod serve_validation;
pub mod surface;
pub mod svg;
pub mod table;
pub mod top500;
pub mod validation;
pub mod viridis;

/// Serialise any result struct as the pretty JSON amdahl writes (trailing newline included).
pub fn to_json<T: serde::Serialize>(value: &T) -> Result<String, serde_json::Error> {
    let mut s = serde_json::to_string_pretty(value)?;
    s.push('\n');
    Ok(s)
}

/// Significant-digit formatting lives with the units: the model's own texts (a statement's
/// method) round as the tables do.
pub use amdahl_model::units::sig;

/// A whole count for humans, every digit kept and grouped by thousands (1e8 → "100,000,000"):
/// request counts and days read better in full than as "1.00000e8". Other values go through
/// [`sig`] with 4 digits.
pub fn count(x: f64) -> String {
    if !(x.is_finite() && x.fract() == 0.0 && x.abs() < 1e15) {
        return sig(x, 4);
    }
    let digits = format!("{:.0}", x.abs());
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if x < 0.0 {
        out.push('-');
    }
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A number as the page shows it: whole numbers in full with thousands separators, others with
/// four significant digits (what the terminal tables print): the figures of `amdahl report`'s
/// page and its run device table. Tests read them back and compare
/// with the JSON at a relative tolerance of 1e-3.
pub fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        count(x)
    } else {
        sig(x, 4)
    }
}

#[cfg(test)]
mod tests {
    use super::{count, sig};

    #[test]
    fn counts_are_whole_and_grouped() {
        assert_eq!(count(1e8), "100,000,000");
        assert_eq!(count(109_500_000_000.0), "109,500,000,000");
        assert_eq!(count(365.0), "365");
        assert_eq!(count(-1234.0), "-1,234");
        assert_eq!(count(2.5), "2.500");
    }

    #[test]
    fn sig_formats_by_magnitude() {
        assert_eq!(sig(0.78177, 4), "0.7818");
        assert_eq!(sig(7.19e-7, 3), "7.19e-7");
        assert_eq!(sig(2414592.0, 3), "2414592");
        assert_eq!(sig(1.5e9, 3), "1.50e9");
        assert_eq!(sig(f64::NAN, 3), "-");
        assert_eq!(sig(0.0, 3), "0");
    }
}
