//! Typed physical units.
//!
//! Each quantity is an `f64` newtype in SI base units, so a function signature says what it takes
//! and `Joules + Seconds` does not compile. Conversions to the units people read (kWh, days,
//! TFLOP/s, GiB) are named methods, never bare multiplications at call sites. Raw hardware counters
//! (µJ, mJ) are *not* units: they stay integers in `amdahl-meter` until their wrap-around is handled.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, Sub};

macro_rules! unit {
    ($(#[$doc:meta])* $name:ident, $symbol:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(transparent)]
        pub struct $name(pub f64);

        impl $name {
            pub const ZERO: Self = Self(0.0);
            /// The value in SI base units.
            pub fn get(self) -> f64 {
                self.0
            }
        }
        impl Add for $name {
            type Output = Self;
            fn add(self, rhs: Self) -> Self {
                Self(self.0 + rhs.0)
            }
        }
        impl AddAssign for $name {
            fn add_assign(&mut self, rhs: Self) {
                self.0 += rhs.0;
            }
        }
        impl Sub for $name {
            type Output = Self;
            fn sub(self, rhs: Self) -> Self {
                Self(self.0 - rhs.0)
            }
        }
        impl Mul<f64> for $name {
            type Output = Self;
            fn mul(self, rhs: f64) -> Self {
                Self(self.0 * rhs)
            }
        }
        impl Div<f64> for $name {
            type Output = Self;
            fn div(self, rhs: f64) -> Self {
                Self(self.0 / rhs)
            }
        }
        /// The ratio of two quantities of the same unit is a plain number.
        impl Div for $name {
            type Output = f64;
            fn div(self, rhs: Self) -> f64 {
                self.0 / rhs.0
            }
        }
        /// From +0.0: the sum of nothing is zero. (`f64`'s own `Sum` starts at -0.0, the
        /// identity of IEEE addition, so an empty total was `-0.0` and was written so.)
        impl std::iter::Sum for $name {
            fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
                Self(iter.fold(0.0, |acc, x| acc + x.0))
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match f.precision() {
                    Some(p) => write!(f, "{:.*} {}", p, self.0, $symbol),
                    None => write!(f, "{} {}", self.0, $symbol),
                }
            }
        }
    };
}

unit!(
    /// Time in seconds.
    Seconds, "s"
);
unit!(
    /// Energy in joules.
    Joules, "J"
);
unit!(
    /// Power in watts.
    Watts, "W"
);
unit!(
    /// A count of floating-point (or integer) operations.
    Flops, "FLOP"
);
unit!(
    /// Operations per second.
    FlopsPerSecond, "FLOP/s"
);
unit!(
    /// A size in bytes.
    Bytes, "B"
);
unit!(
    /// Bytes per second.
    BytesPerSecond, "B/s"
);
unit!(
    /// Mass of CO2-equivalent emissions in grams.
    GramsCo2e, "gCO2e"
);
unit!(
    /// Carbon intensity of electricity in grams CO2e per kilowatt-hour.
    GramsPerKwh, "gCO2e/kWh"
);

/// Joules in one kilowatt-hour (1 kWh = 1000 W × 3600 s).
pub const JOULES_PER_KWH: f64 = 3.6e6;

impl Seconds {
    pub fn from_hours(h: f64) -> Self {
        Self(h * 3600.0)
    }
    pub fn from_days(d: f64) -> Self {
        Self(d * 86_400.0)
    }
    pub fn hours(self) -> f64 {
        self.0 / 3600.0
    }
    pub fn days(self) -> f64 {
        self.0 / 86_400.0
    }
}

impl Joules {
    pub fn from_kwh(kwh: f64) -> Self {
        Self(kwh * JOULES_PER_KWH)
    }
    pub fn kwh(self) -> f64 {
        self.0 / JOULES_PER_KWH
    }
}

impl GramsCo2e {
    pub fn kg(self) -> f64 {
        self.0 / 1e3
    }
    pub fn tonnes(self) -> f64 {
        self.0 / 1e6
    }
}

impl FlopsPerSecond {
    pub fn from_tflops(t: f64) -> Self {
        Self(t * 1e12)
    }
    pub fn tflops(self) -> f64 {
        self.0 / 1e12
    }
}

impl Bytes {
    pub fn from_gib(g: f64) -> Self {
        Self(g * 1024.0 * 1024.0 * 1024.0)
    }
    pub fn gib(self) -> f64 {
        self.0 / (1024.0 * 1024.0 * 1024.0)
    }
}

/// Power × time = energy.
impl Mul<Seconds> for Watts {
    type Output = Joules;
    fn mul(self, rhs: Seconds) -> Joules {
        Joules(self.0 * rhs.0)
    }
}

/// Energy ÷ time = average power.
impl Div<Seconds> for Joules {
    type Output = Watts;
    fn div(self, rhs: Seconds) -> Watts {
        Watts(self.0 / rhs.0)
    }
}

/// Work ÷ rate = time.
impl Div<FlopsPerSecond> for Flops {
    type Output = Seconds;
    fn div(self, rhs: FlopsPerSecond) -> Seconds {
        Seconds(self.0 / rhs.0)
    }
}

/// Bytes ÷ bandwidth = time.
impl Div<BytesPerSecond> for Bytes {
    type Output = Seconds;
    fn div(self, rhs: BytesPerSecond) -> Seconds {
        Seconds(self.0 / rhs.0)
    }
}

/// Energy × carbon intensity = emissions.
impl Mul<GramsPerKwh> for Joules {
    type Output = GramsCo2e;
    fn mul(self, rhs: GramsPerKwh) -> GramsCo2e {
        GramsCo2e(self.kwh() * rhs.0)
    }
}

/// A number a user typed, shown in an error message: as typed for ordinary magnitudes, in
/// scientific notation for extreme ones (Rust's `{}` writes 1e308 as 309 digits).
pub fn shown(x: &f64) -> String {
    let a = x.abs();
    if !x.is_finite() || a == 0.0 || (1e-4..1e9).contains(&a) {
        format!("{x}")
    } else {
        format!("{x:.3e}")
    }
}

/// [`sig`] without trailing zeros, with thousands separators: 1.10 → "1.1", 1291159 → "1,291,159".
/// How tables and statements show a figure, so text built beside a table (a saved result's
/// method, a statement) quotes the table's number (a method said "465 W" beside "465.5 W").
pub fn readable(x: f64, digits: usize) -> String {
    let s = sig(x, digits);
    if s.contains('e') || !x.is_finite() {
        return s;
    }
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    let (sign, rest) = s.strip_prefix('-').map_or(("", s.as_str()), |r| ("-", r));
    let (int, frac) = rest
        .split_once('.')
        .map_or((rest, None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// `x` rounded as [`sig`] shows it, as a number: a figure shown in another unit (g for a table's
/// kg) is this value scaled, so both show the same digits (2.5865 g was "2.587 g" beside
/// "0.002586 kg").
pub fn rounded(x: f64, digits: usize) -> f64 {
    sig(x, digits).parse().unwrap_or(x)
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
    use super::*;

    /// The total of no devices is 0 J, not -0 J (the sign showed in records as `-0.0`).
    #[test]
    fn the_sum_of_nothing_is_positive_zero() {
        let none: Joules = std::iter::empty().sum();
        assert!(none.get() == 0.0 && !none.get().is_sign_negative());
        let neg: Joules = [Joules(-0.0)].into_iter().sum();
        assert!(!neg.get().is_sign_negative());
        assert_eq!(
            [Joules(1.5), Joules(-0.5)].into_iter().sum::<Joules>(),
            Joules(1.0)
        );
    }

    #[test]
    fn shown_keeps_typed_numbers_and_shortens_extreme_ones() {
        assert_eq!(shown(&1.5), "1.5");
        assert_eq!(shown(&50.0), "50");
        assert_eq!(shown(&1e308), "1.000e308");
        assert_eq!(shown(&-1e-320), "-1.000e-320");
        assert_eq!(shown(&f64::NAN), "NaN");
    }

    #[test]
    fn kwh_round_trip() {
        // 1 kWh = 3.6 MJ by definition.
        assert_eq!(Joules::from_kwh(1.0).get(), 3.6e6);
        assert!((Joules(7.2e6).kwh() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn power_time_energy_carbon() {
        // 1 kW for 1 h = 1 kWh; at 475 g/kWh that is 475 g.
        let e = Watts(1000.0) * Seconds::from_hours(1.0);
        assert!((e.kwh() - 1.0).abs() < 1e-12);
        let g = e * GramsPerKwh(475.0);
        assert!((g.get() - 475.0).abs() < 1e-9);
        assert!(((e / Seconds(3600.0)).get() - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn display_honours_precision() {
        assert_eq!(format!("{:.1}", Watts(12.345)), "12.3 W");
    }
}
