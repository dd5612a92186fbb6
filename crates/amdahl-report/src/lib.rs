//! Rendering of amdahl's result structs: terminal tables, JSON, CSV and SVG plots.
//!
//! Every function here is a pure function of data it is given; nothing measures, reads sensors or
//! prints. The binary chooses a sink and writes the returned string where the user asked.

pub mod bench;
pub mod bench_gpu;
pub mod carbon;
pub mod catalog;
pub mod fit;
pub mod meter;
pub mod plan;
pub mod scale;
pub mod surface;
pub mod svg;
pub mod table;
pub mod top500;

/// Serialise any result struct as the pretty JSON amdahl writes (trailing newline included).
pub fn to_json<T: serde::Serialize>(value: &T) -> Result<String, serde_json::Error> {
    let mut s = serde_json::to_string_pretty(value)?;
    s.push('\n');
    Ok(s)
}

/// Format a number for humans with `sig` significant digits, switching to scientific notation for
/// very small or very large magnitudes (α_eff values of 1e-7 next to efficiencies of 0.78).
pub fn sig(x: f64, sig: usize) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "-".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    if x == 0.0 {
        return "0".into();
    }
    let mag = x.abs().log10().floor() as i32;
    if !(-3..7).contains(&mag) {
        return format!("{:.*e}", sig.saturating_sub(1), x);
    }
    let decimals = (sig as i32 - 1 - mag).max(0) as usize;
    format!("{:.*}", decimals, x)
}

#[cfg(test)]
mod tests {
    use super::sig;

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
